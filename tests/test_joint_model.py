"""A third model none of us made, trained the other common fairseq way (tests/cli_model.py's build_joint): one joint
SentencePiece model on both sides, `fairseq-preprocess --joined-dictionary`, `fairseq-train --share-all-embeddings`
with no `--bpe` recorded, brought as the checkpoint file fairseq wrote and the data folder where it left it.

Its dictionaries are found in the data folder the checkpoint records; without its SentencePiece model the model check
stops the loop before any sentence is tested, naming `translator.bpe=sentencepiece`; with it, the loop tests it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_model import build_joint, tatoeba_corpus, tatoeba_pairs

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def joint(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("joint")
    corpus = tatoeba_corpus(tatoeba_pairs(), out / "corpus", n_train=4000, n_valid=200, n_test=200)
    best = build_joint(corpus, out)
    return {"corpus": corpus, "checkpoint": best, "work": best.parent.parent,
            "spm": best.parent.parent / "spm" / "joint.model"}


def sample(joint: dict) -> tuple[list[str], list[tuple[str, str]]]:
    corpus = joint["corpus"]
    test = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    valid = zip(*((corpus / f"valid.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "zh")))
    return test[:80], list(valid)[:80]


def test_the_fixture_is_the_third_way(joint):
    from repair.nmt.fairseq.checkpoint import checkpoint_cfg, load_checkpoint

    cfg = checkpoint_cfg(load_checkpoint(joint["checkpoint"]))
    assert cfg.bpe is None and cfg.tokenizer is None and cfg.task.data == "bin"  # relative to where it was trained
    assert cfg.model.share_all_embeddings and cfg.optimization.update_freq == [2]
    work = joint["work"]
    assert (work / "bin" / "dict.en.txt").read_bytes() == (work / "bin" / "dict.zh.txt").read_bytes()  # joined
    assert not list(joint["checkpoint"].parent.glob("dict.*"))


def test_dictionaries_are_found_in_the_data_folder_the_checkpoint_records(joint, tmp_path):
    from repair.nmt.fairseq.translator import load_model_files

    files = load_model_files(joint["checkpoint"])
    assert files.src.dict == str(joint["work"] / "bin" / "dict.en.txt")
    assert files.tgt.dict == str(joint["work"] / "bin" / "dict.zh.txt")
    # the checkpoint alone, its data folder nowhere near: one message naming the folder it records and the key
    alone = tmp_path / "alone" / "checkpoint_best.pt"
    alone.parent.mkdir()
    shutil.copyfile(joint["checkpoint"], alone)
    from repair.errors import UserError

    with pytest.raises(UserError, match=r"data folder the checkpoint records \(bin\).*translator\.src_dict="):
        load_model_files(alone)


def test_recorded_data_folders_absolute_or_beside_the_checkpoint(tmp_path):
    from repair.nmt.fairseq.checkpoint import recorded_data_folders

    (tmp_path / "run" / "ckpt").mkdir(parents=True)
    (tmp_path / "run" / "ckpt" / "data-bin").mkdir()
    (tmp_path / "run" / "bin").mkdir()
    ckpt = tmp_path / "run" / "ckpt" / "checkpoint_best.pt"
    assert recorded_data_folders({"task": {"data": "data-bin"}}, ckpt) == [tmp_path / "run" / "ckpt" / "data-bin"]
    assert recorded_data_folders({"task": {"data": "bin"}}, ckpt) == [tmp_path / "run" / "bin"]
    assert recorded_data_folders({"task": {"data": f"{tmp_path / 'run' / 'bin'}:missing"}}, ckpt) == [
        tmp_path / "run" / "bin"]
    assert recorded_data_folders({"task": {"data": "missing"}}, ckpt) == []
    assert recorded_data_folders(None, ckpt) == []


def test_without_its_sentencepiece_model_the_check_names_the_key(joint):
    from repair.nmt.fairseq.translator import FairseqTranslator

    sentences, pairs = sample(joint)
    record = FairseqTranslator(joint["checkpoint"], beam=2, device="cpu").check_model(sentences, pairs)
    assert record["checked"] and record["stop"]
    assert record["src"]["unknown"] > 0.5 and record["src"]["dictionary"]["kind"] == "sentencepiece"
    assert {p["side"] for p in record["problems"]} >= {"src", "tgt"}
    # the SentencePiece model is nowhere beside the model: the dictionaries' shape says what to set
    assert "translator.bpe=sentencepiece with translator.sentencepiece_model=FILE" in record["message"]


def test_a_sentencepiece_model_beside_the_checkpoint_is_tried_and_named(joint, tmp_path):
    from repair.nmt.fairseq.translator import FairseqTranslator

    (tmp_path / "ckpt").mkdir()
    shutil.copyfile(joint["checkpoint"], tmp_path / "ckpt" / "checkpoint_best.pt")
    shutil.copytree(joint["work"] / "bin", tmp_path / "bin")
    shutil.copyfile(joint["spm"], tmp_path / "sp.model")
    (tmp_path / "broken.model").write_text("not a model", encoding="utf-8")  # tried, and named as not readable
    sentences, pairs = sample(joint)
    record = FairseqTranslator(tmp_path / "ckpt" / "checkpoint_best.pt", beam=2, device="cpu").check_model(sentences,
                                                                                                            pairs)
    hint = record["hint"]
    assert hint["keys"] == {"translator.bpe": "sentencepiece", "translator.sentencepiece_model": str(tmp_path / "sp.model")}
    assert hint["loss"] <= 1.5 * record["loss"]["recorded_valid_loss"] < record["loss"]["sample_valid_loss"]
    assert any("broken.model" in key for key in hint["failed"])
    assert f"rerun with translator.bpe=sentencepiece translator.sentencepiece_model={tmp_path / 'sp.model'}" in \
        record["message"]


def test_with_its_sentencepiece_model_the_check_passes(joint):
    from repair.nmt.fairseq.translator import FairseqTranslator

    sentences, pairs = sample(joint)
    t = FairseqTranslator(joint["checkpoint"], beam=2, device="cpu", bpe="sentencepiece",
                          sentencepiece_model=str(joint["spm"]))
    record = t.check_model(sentences, pairs)
    assert record["checked"] and not record["problems"] and not record["stop"], record
    assert record["src"]["unknown"] < 0.05 and record["tgt"]["unknown"] < 0.05
    assert record["loss"]["sample_valid_loss"] < 1.5 * record["loss"]["recorded_valid_loss"]
    assert record["translations"]["marked"] == 0


def loop(args: list[str], run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repair.loop", *args, f"run_dir={run_dir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=900)


def test_the_loop_stops_before_testing_without_it_and_tests_with_it(joint, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(joint["corpus"], data)
    sentences = tmp_path / "sentences.en"
    sentences.write_text("\n".join(sample(joint)[0][:30]) + "\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    args = [f"model.checkpoint={joint['checkpoint']}", "data=parallel", f"data.dir={data}",
            f"purity.input={sentences}", "purity.holdout=0", "purity.suggest.enabled=false", "review=file",
            "translator.beam=2", "device=cpu", "model.threads=2"]
    first = loop(args, run_dir)
    assert first.returncode == 2, first.stderr[-3000:]
    error = first.stderr.strip().splitlines()[-1]
    assert error.startswith("error: the model") and "translator.bpe=sentencepiece" in error, error
    assert "Nothing was tested" in error
    assert not (run_dir / "cycle1" / "test" / "pairs.jsonl").exists()  # no sentence was tested
    assert not (run_dir / "cycle1" / "test" / "summary.json").exists()

    second = loop([*args, "translator.bpe=sentencepiece", f"translator.sentencepiece_model={joint['spm']}"], run_dir)
    assert (run_dir / "cycle1" / "test" / "summary.json").is_file(), second.stderr[-3000:]
    check = json.loads((run_dir / "cycle1" / "test" / "model_check.json").read_text(encoding="utf-8"))
    assert check["checked"] and not check["problems"]


def test_purity_warns_and_stops_with_model_check_stop(joint, tmp_path):
    sentences = tmp_path / "sentences.en"
    sentences.write_text("\n".join(sample(joint)[0][:20]) + "\n", encoding="utf-8")
    common = [sys.executable, "-m", "repair.purity", f"input={sentences}", "parser=spacy", "translator=fairseq",
              f"translator.checkpoint={joint['checkpoint']}", "translator.beam=2", "translator.device=cpu",
              "suggest.enabled=false"]
    stopped = subprocess.run([*common, "model_check=stop", f"out={tmp_path / 'stop'}"], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    assert stopped.returncode == 2, stopped.stderr[-3000:]
    assert "translator.bpe=sentencepiece" in stopped.stderr and "model_check=stop" in stopped.stderr
    assert not (tmp_path / "stop" / "summary.json").exists()
    warned = subprocess.run([*common, f"out={tmp_path / 'warn'}"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert warned.returncode == 0, warned.stderr[-3000:]
    assert (tmp_path / "warn" / "summary.json").is_file()
    logged = warned.stdout + warned.stderr + "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "warn").glob("*.log"))
    assert "model check: the model" in logged and "model_check=stop makes it fatal" in logged, logged[-3000:]


def bare_layout(joint: dict, root: Path) -> Path:
    """The checkpoint and its data folder copied under `root` as fairseq left them, its SentencePiece model beside
    them (root/sp.model) with a file that is no model (root/broken.model)."""
    (root / "ckpt").mkdir(parents=True)
    shutil.copyfile(joint["checkpoint"], root / "ckpt" / "checkpoint_best.pt")
    shutil.copytree(joint["work"] / "bin", root / "bin")
    shutil.copyfile(joint["spm"], root / "sp.model")
    (root / "broken.model").write_text("not a model", encoding="utf-8")
    return root / "ckpt" / "checkpoint_best.pt"


def test_the_fine_tunes_probe_tries_subwords_and_names_what_failed(joint, tmp_path):
    from repair.errors import UserError
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.finetune import binarize_pairs
    from repair.nmt.fairseq.probe import check_encoding
    from repair.nmt.fairseq.translator import load_model_files

    checkpoint = bare_layout(joint, tmp_path / "model")
    files = load_model_files(checkpoint)  # bpe none: the pieces' model not given
    pairs = sample(joint)[1]
    data = binarize_pairs({"valid": pairs}, files, tmp_path / "data")
    with pytest.raises(UserError) as e:
        check_encoding(files, load_checkpoint(checkpoint), data, pairs, binarize=binarize_pairs)
    text = str(e.value)
    assert f"rerun with translator.bpe=sentencepiece translator.sentencepiece_model={tmp_path / 'model' / 'sp.model'}" \
        in text, text
    assert "both sides are likely encoded unlike" in text
    assert f"could not be tried: translator.bpe=sentencepiece translator.sentencepiece_model=" \
           f"{tmp_path / 'model' / 'broken.model'}: UserError" in text


def test_a_probe_that_measured_nothing_is_not_checked(joint, tmp_path):
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.finetune import binarize_pairs
    from repair.nmt.fairseq.probe import check_encoding
    from repair.nmt.fairseq.translator import load_model_files
    from repair.report import finetune_markdown

    files = load_model_files(joint["checkpoint"], bpe="sentencepiece", sentencepiece_model=str(joint["spm"]))
    long = [(" ".join(["house"] * 1100), "房子" * 1100)]  # longer than the model's 1024 positions: left out
    data = binarize_pairs({"valid": long}, files, tmp_path / "data")
    record = check_encoding(files, load_checkpoint(joint["checkpoint"]), data, long, binarize=binarize_pairs)
    assert record["checked"] is False and "nothing was measured" in record["why"]
    md = "\n".join(finetune_markdown({"epochs": 1, "best_valid_loss": 3.0, "encoding": record}))
    assert "the encoding is the model's own" not in md and "was not checked (nothing was measured" in md


def test_the_fine_tunes_probe_names_the_subwords_the_dictionaries_ask_for(joint, tmp_path):
    """No SentencePiece model anywhere beside the model: no tokenizer brings the loss back (the old hint named one),
    and the dictionaries' shape names the setting and the key of its file."""
    from repair.errors import UserError
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.finetune import binarize_pairs
    from repair.nmt.fairseq.probe import check_encoding
    from repair.nmt.fairseq.translator import load_model_files

    files = load_model_files(joint["checkpoint"])
    pairs = sample(joint)[1]
    data = binarize_pairs({"valid": pairs}, files, tmp_path / "data")
    with pytest.raises(UserError) as e:
        check_encoding(files, load_checkpoint(joint["checkpoint"]), data, pairs, binarize=binarize_pairs)
    text = str(e.value)
    assert "rerun with" not in text and "translator.bpe=sentencepiece with translator.sentencepiece_model=FILE" in text


def test_translations_with_markers_or_one_phrase_for_everything_are_far_off():
    from repair.nmt.modelcheck import translation_measures, translation_problems

    garbage = translation_measures(["\u2581 房间里房间里。"] * 30 + ["\u2581 他。"] * 10)
    assert garbage["marked"] == 1.0 and garbage["repeated"] == 0.75 and garbage["distinct"] == 0.05
    assert [p["side"] for p in translation_problems(garbage)] == ["tgt", "tgt"]
    # a weak model repeats itself, but says something else for each sentence: not far off
    weak = translation_measures([f"卫昨晚昨晚昨晚在{c}色的大故事。" for c in "红白黑蓝绿"] + ["他在桌子旁边。"] * 1)
    assert weak["repeated"] > 0.5 and weak["distinct"] == 1.0 and translation_problems(weak) == []
    bpe = translation_measures(["他 在 桌@@ 子 旁边。", "他在桌子旁边。"])
    assert bpe["marked"] == 0.5 and translation_problems(bpe)[0]["what"].startswith("50% of its translations hold")


def test_a_dictionary_s_shape_against_the_configured_subwords(tmp_path):
    from repair.nmt.fairseq.subwords import dictionary_shape, dictionary_symbols, shape_problem
    from repair.nmt.preprocessing import Side

    pieces = tmp_path / "dict.pieces.txt"
    pieces.write_text("\u2581the 90\n\u2581a 80\ns 70\n\u2581house 5\n, 4 #fairseq:overwrite\n", encoding="utf-8")
    units = tmp_path / "dict.units.txt"
    units.write_text("the 90\nhou@@ 9\nse 9\nbig 3\n", encoding="utf-8")
    assert dictionary_symbols(pieces)[-1] == ","  # the flag is not part of the entry
    assert dictionary_shape(dictionary_symbols(pieces))["kind"] == "sentencepiece"
    assert dictionary_shape(dictionary_symbols(units))["kind"] == "subword_nmt"
    assert shape_problem(Side("en", str(pieces), bpe="none"), dictionary_shape(dictionary_symbols(pieces)))
    assert shape_problem(Side("en", str(pieces), bpe="sentencepiece"), dictionary_shape(dictionary_symbols(pieces))) is None
    assert "subword-nmt" in shape_problem(Side("en", str(units), bpe="sentencepiece"),
                                          dictionary_shape(dictionary_symbols(units)))


def test_what_stops_the_test_and_what_is_a_warning():
    from repair.nmt.fairseq.modelcheck import stops

    loss = {"side": "both", "what": "its validation loss on a sample of 80 pairs is 10.36 where ... 5.49"}
    unknown = {"side": "src", "what": "84% of its en tokens are unknown to dict.en.txt"}
    assert stops({"problems": [unknown], "hint": {}})
    assert stops({"problems": [loss], "hint": {"keys": {"translator.bpe": "sentencepiece"}}})
    # translations read and written as trained: only the fine-tune's target encoding is off
    assert not stops({"problems": [loss], "hint": {"keys": {"translator.tgt_tokenizer": "jieba"}}})
    # the loss alone, and no other encoding brings it back: another domain, for the fine-tune's check to judge
    assert not stops({"problems": [loss], "hint": {}})
    assert not stops({"problems": []})


def test_the_fine_tunes_learning_rate_is_at_least_half_the_one_the_model_was_trained_with(joint):
    from repair.errors import UserError
    from repair.nmt.fairseq.finetune import finetune_lr
    from repair.stages.finetune import lr_share

    lr, record = finetune_lr(joint["checkpoint"], 1e-3, 0.5)  # trained at 5e-3 (tests/cli_model.py)
    assert lr == pytest.approx(2.5e-3) and record["trained"] == 5e-3 and "finetune.lr_from_model" in record["why"]
    assert finetune_lr(joint["checkpoint"], 4e-3, 0.5)[0] == 4e-3  # the group's own, where higher
    assert finetune_lr(joint["checkpoint"], 1e-3, None)[0] == 1e-3  # off
    assert lr_share(None) is None and lr_share(0) is None and lr_share(0.5) == 0.5
    with pytest.raises(UserError, match="finetune.lr_from_model"):
        lr_share(-1)


def test_a_fine_tune_of_the_joint_model_reaches_its_fixes_and_says_why_it_stopped(joint, tmp_path):
    """The fine-tune stage (tests/reach.py) on 6 corrections of sentences of the validation split: the validation loss
    rises from the first epochs while the corrections are learnt, and the fine-tune goes on while epochs fix more of
    them (patience 3 on the loss alone stopped it after epoch 4, none fixed), to the fix rate; every weight trained,
    an update per batch (the model was trained with --update-freq 2)."""
    from reach import data_folder, reach

    corpus = joint["corpus"]
    pairs = list(zip(*((corpus / f"valid.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "zh"))))
    import sentencepiece as spm

    from repair.face import family_named
    from repair.nmt.fairseq.translator import load_model_files

    files = load_model_files(joint["checkpoint"], bpe="sentencepiece", sentencepiece_model=str(joint["spm"]))
    short = [(s, z) for s, z in pairs[100:] if 4 <= len(s.split()) <= 8]
    cannot = set(family_named("fairseq").unwritable(files, [z for _, z in short]))
    # none with a character the model cannot write; first, one with characters SentencePiece writes as one unknown
    # piece that the dictionary holds one by one (the fine-tune spells it so: encoded as SentencePiece writes it,
    # it is an unknown token no epoch learns)
    sp = spm.SentencePieceProcessor(model_file=str(joint["spm"]))
    spelt = [(s, z) for s, z in short if z not in cannot and sp.unk_id() in sp.encode(z)]
    assert spelt and len(cannot) < len(short) // 2, (len(spelt), len(cannot), len(short))
    assert family_named("fairseq").unwritable(files, ["龘龘。", spelt[0][1]]) == ["龘龘。"]  # a character it never saw
    candidates = spelt[:1] + [(s, z) for s, z in short if z not in cannot and (s, z) not in spelt[:1]]
    cfg = {"name": "fairseq", "beam": 2, "device": "cpu", "bpe": "sentencepiece",
           "sentencepiece_model": str(joint["spm"])}
    data = data_folder(corpus, tmp_path / "data", 100, 60)
    # the group's lr (1e-3) raised to half the 5e-3 the model was trained with (finetune.lr_from_model): at 1e-3 this
    # fine-tune fixed 3 of the 6 in 20 epochs
    result, fixes = reach(cfg, joint["checkpoint"], data, candidates, 6, tmp_path / "ft", replay=100, keep=0,
                          patience=6, max_epoch=30)
    assert result["learning_rate"]["lr"] == pytest.approx(2.5e-3) and result["learning_rate"]["trained"] == 5e-3
    assert fixes["fix_rate"] >= 0.9, (fixes["rows"], result["stop"], result["selected"]["epochs"])
    assert result["unwritable"] == [] and not any("vocabulary lacks" in w for w in result["warnings"])
    stop = result["stop"]
    assert stop["reason"] == "fix_rate" and stop["why"].startswith(f"fix rate reached: epoch {stop['epoch']} fixes")
