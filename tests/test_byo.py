"""Bring your own model and corpus: a Moses + subword-nmt model in fairseq's published folder layout,
tested against fairseq-interactive, taken through the loop; a user's parallel corpus; bad input."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repair.errors import UserError
from repair.examples.moses_bpe import SMALL
from repair.nmt.preprocessing import detokenize_zh
from repair.nmt.fairseq.translator import FairseqTranslator, load_model_files

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
# the example's model, smaller and quicker to warm up
TINY = {**SMALL, "name": "byo_tiny", "encoder_layers": 1, "decoder_layers": 1, "encoder_embed_dim": 64,
        "decoder_embed_dim": 64, "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128,
        "lr": 5e-3, "warmup_updates": 40, "max_tokens": 3000}


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The README's worked example, small: Tatoeba split, Moses + jieba + joint BPE, a tiny model, a model folder."""
    from conftest import SHARED_DATA, need_shared

    from repair.examples.moses_bpe import build

    tatoeba = SHARED_DATA / "tatoeba-cmn-eng" / "cmn.txt"
    need_shared(tatoeba)
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("byo")
    build(out, source=tatoeba, epochs=3, merges=2000, n_train=6000, model=TINY)
    return out


@pytest.fixture(scope="module")
def hub(example) -> Path:
    return example / "model"


def test_a_model_folder_brings_its_own_preprocessing(hub, tmp_path):
    files = load_model_files(hub)
    assert Path(files.checkpoint) == hub / "model.pt"
    assert (files.src.tokenizer, files.src.bpe, files.src.bpe_codes) == ("moses", "subword_nmt", str(hub / "bpecodes"))
    assert (files.tgt.tokenizer, files.tgt.bpe) == ("jieba", "subword_nmt")
    assert files.src.dict == str(hub / "dict.en.txt") and files.tgt.dict == str(hub / "dict.zh.txt")
    # Without preprocessing.yaml: what fairseq-train recorded in the checkpoint (one tokenizer for both sides)
    bare = tmp_path / "bare"
    shutil.copytree(hub, bare)
    (bare / "preprocessing.yaml").unlink()
    files = load_model_files(bare)
    assert (files.src.tokenizer, files.tgt.tokenizer, files.tgt.bpe) == ("moses", "moses", "subword_nmt")
    assert files.tgt.bpe_codes == str(bare / "bpecodes")
    # explicit options win, per side
    files = load_model_files(bare, tgt_tokenizer="jieba")
    assert (files.src.tokenizer, files.tgt.tokenizer) == ("moses", "jieba")


def test_translations_are_written_text(hub, example):
    t = FairseqTranslator(hub, beam=2)
    texts = (example / "corpus" / "test.en").read_text(encoding="utf-8").splitlines()[:40]
    out = t.translate(texts)
    assert all(o for o in out)
    assert not any("@@" in o for o in out), out  # BPE joined
    assert not any("&apos;" in o or "&quot;" in o for o in out), out  # Moses escapes undone


def fairseq_interactive(hub: Path, texts: list[str], beam: int) -> list[str]:
    """fairseq's own CLI with the matching --tokenizer/--bpe options (torch's weights-only loader allowlisted
    for fairseq's checkpoint classes, as repair.nmt.fairseq.checkpoint does)."""
    args = [str(hub), "--path", str(hub / "model.pt"), "--source-lang", "en", "--target-lang", "zh",
            "--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", str(hub / "bpecodes"),
            "--beam", str(beam), "--max-len-a", "0", "--max-len-b", "200", "--batch-size", "50", "--buffer-size", "50",
            "--cpu", "--num-workers", "0"]
    code = ("import sys; from repair.nmt.fairseq.checkpoint import allow_fairseq_globals; allow_fairseq_globals(); "
            "from fairseq_cli.interactive import cli_main; "
            "sys.argv = ['fairseq-interactive'] + sys.argv[1:]; cli_main()")
    result = subprocess.run([sys.executable, "-c", code, *args], input="".join(t + "\n" for t in texts),
                            capture_output=True, text=True, timeout=1200, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    out: dict[int, str] = {}
    for line in result.stdout.splitlines():
        if line.startswith("D-"):
            head, _score, *text = line.split("\t")
            out[int(head[2:])] = text[0] if text else ""
    assert len(out) == len(texts), result.stdout[-2000:]
    return [out[i] for i in range(len(texts))]


def test_the_same_translations_as_fairseq_interactive(hub, example):
    """500 real sentences, beam 5: >= 99% identical lines (fairseq-interactive's output with spaces between
    Chinese characters removed, the one step ours adds)."""
    texts = (example / "corpus" / "test.en").read_text(encoding="utf-8").splitlines()[:500]
    assert len(texts) == 500
    ours = FairseqTranslator(hub, beam=5, tokenizer="moses", max_len_a=0, max_len_b=200, max_len=200).translate(texts)
    theirs = [detokenize_zh(t) for t in fairseq_interactive(hub, texts, beam=5)]
    differ = [(s, a, b) for s, a, b in zip(texts, ours, theirs) if a != b]
    assert len(differ) <= 5, differ[:10]


def test_bad_model_files_are_one_clear_error_each(hub, tmp_path, example):
    from repair.purity.translators import make_translator

    bad = tmp_path / "model"
    shutil.copytree(hub, bad)
    lines = (bad / "dict.zh.txt").read_text(encoding="utf-8").splitlines()
    (bad / "dict.zh.txt").write_text("".join(l + "\n" for l in lines[:-16]), encoding="utf-8")
    with pytest.raises(UserError) as e:
        load_model_files(bad)
    msg = str(e.value)
    assert str(bad / "dict.zh.txt") in msg and str(bad / "dict.en.txt") in msg and str(bad / "model.pt") in msg
    assert f"{len(lines) - 16 + 4} entries" in msg and f"embeds {len(lines) + 4}" in msg
    shutil.copyfile(hub / "dict.zh.txt", bad / "dict.zh.txt")
    (bad / "bpecodes").unlink()
    with pytest.raises(UserError, match=r"BPE codes .*bpecodes not found"):
        load_model_files(bad)
    (bad / "preprocessing.yaml").unlink()
    # the codes path the checkpoint recorded at training time does not exist on this machine either
    from repair.nmt.fairseq.checkpoint import load_checkpoint

    state = load_checkpoint(bad / "model.pt")
    state["cfg"]["bpe"]["bpe_codes"] = str(tmp_path / "on-the-training-machine" / "bpecodes")
    torch.save(state, bad / "model.pt")
    with pytest.raises(UserError, match=r"bpe=subword_nmt needs its BPE codes .*translator.bpe_codes"):
        load_model_files(bad)
    with pytest.raises(UserError, match=r"unknown tokenizer 'mosses'.*moses, space, jieba, none"):
        load_model_files(hub, tokenizer="mosses")
    with pytest.raises(UserError, match=r"unknown bpe 'bpe'.*sentencepiece, subword_nmt, fastbpe, none"):
        load_model_files(hub, bpe="bpe")
    with pytest.raises(UserError, match=r"SentencePiece model .*none.model not found"):
        load_model_files(hub, bpe="sentencepiece", sentencepiece_model=str(tmp_path / "none.model"))
    with pytest.raises(UserError, match="no option 'bpe_code'"):
        make_translator({"name": "fairseq", "checkpoint": str(hub), "bpe_code": "x"})
    (tmp_path / "other.yaml").write_text("tokeniser: moses\n", encoding="utf-8")
    shutil.copyfile(tmp_path / "other.yaml", bad / "preprocessing.yaml")
    with pytest.raises(UserError, match=r"preprocessing.yaml: unknown preprocessing key\(s\) \['tokeniser'\]"):
        load_model_files(bad)


def test_the_loop_takes_translator_keys(hub, example, tmp_path):
    from hydra import compose, initialize_config_dir

    from omegaconf import OmegaConf

    from repair.stages import Translators

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("loop", overrides=["translator.beam=3", "translator.max_tokens=700", "device=cpu"])
    t = Translators(OmegaConf.to_container(cfg.translator), cfg.device)(load_model_files(hub))
    assert (t.generator.beam_size, t.max_tokens) == (3, 700)
    assert t.files.src.tokenizer == "moses"


def fill_sheet(sheet: Path, references: dict[str, str], limit: int = 12) -> int:
    """A person's review: a flagged sentence whose translation differs from the corpus reference gets the
    reference as its correction; everything else is judged correct. Returns the corrections made."""
    with open(sheet, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    made, seen = 0, set()
    for row in rows:  # side 1 of an RTI issue is the container (here the sentence)
        ref = references.get(row["source_1"])
        wrong = ref is not None and ref != row["translation_1"] and made < limit and row["source_1"] not in seen
        row["wrong_1"], row["wrong_2"] = ("yes" if wrong else "no"), "no"
        if wrong:
            row["kind"] = "word/phrase mistranslation"
            row["corrected_1"] = ref
            made += 1
            seen.add(row["source_1"])
    with open(sheet, "w", newline="", encoding="utf-8-sig") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return made


def run_loop_with_file_review(args: list[str], run_dir: Path, corpus: Path) -> dict:
    def cli():
        return subprocess.run([sys.executable, "-m", "repair.loop", *args, f"run_dir={run_dir}", "review=file"],
                              cwd=REPO, capture_output=True, text=True, timeout=1500)

    first = cli()
    assert first.returncode == 2, first.stderr[-3000:]
    sheet = run_dir / "cycle1" / "review" / "sheet.csv"
    assert "sheet.csv" in first.stderr and sheet.is_file()
    en = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    zh = (corpus / "test.zh").read_text(encoding="utf-8").splitlines()
    assert fill_sheet(sheet, dict(zip(en, zh))) >= 1
    second = cli()
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.strip().splitlines()[-1] == f"report: {run_dir / 'report.json'}"
    return json.loads((run_dir / "report.json").read_text(encoding="utf-8"))


MODEL_SIZE = ("encoder_layers", "decoder_layers", "encoder_embed_dim", "decoder_embed_dim", "encoder_ffn_embed_dim",
              "decoder_ffn_embed_dim", "lr", "warmup_updates", "max_tokens")
LOOP_SMALL = ["finetune.max_epoch=2", "finetune.patience=1", "finetune.replay=300", "finetune.keep=50",
              "verify.bootstrap_samples=100", "translator.beam=2", "device=cpu", "model.threads=1"]


@pytest.mark.slow
def test_a_model_folder_goes_through_test_file_review_finetune_and_verify(example, hub, tmp_path):
    corpus = example / "corpus"
    sentences = tmp_path / "sentences.en"
    sentences.write_text("".join((corpus / "test.en").read_text(encoding="utf-8").splitlines(True)[:60]), encoding="utf-8")
    run_dir = tmp_path / "run"
    report = run_loop_with_file_review(
        [f"model.checkpoint={hub}", "data=parallel", f"data.dir={tmp_path / 'data'}",
         f"data.train={corpus / 'train'}", f"data.valid={corpus / 'valid'}", f"data.test={corpus / 'test'}",
         f"purity.input={sentences}", *LOOP_SMALL], run_dir, corpus)
    assert report["corrections"] >= 1 and 0 <= report["fix_rate"] <= 1
    assert report["bleu"]["before"] > 0 and "p_value" in report["bleu"]
    # only cleaned: a model brought along has its own preprocessing
    assert (tmp_path / "data" / "clean" / "train.en").is_file() and not (tmp_path / "data" / "spm").exists()
    # the fine-tuned folder is a model folder of its own, with the base model's files and preprocessing
    finetuned = run_dir / "cycle1" / "finetune"
    files = load_model_files(finetuned)
    assert Path(files.checkpoint).name == "checkpoint_best.pt"
    assert (files.src.tokenizer, files.tgt.tokenizer, files.src.bpe) == ("moses", "jieba", "subword_nmt")
    assert (finetuned / "dict.zh.txt").read_bytes() == (hub / "dict.zh.txt").read_bytes()
    assert FairseqTranslator(finetuned, beam=2).translate(["Tom is here."])[0]


@pytest.mark.slow
def test_data_parallel_trains_and_runs_the_loop_on_a_users_corpus(example, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(example / "corpus", corpus)
    for split, n in (("train", 6000), ("valid", 200), ("test", 150)):
        for lang in ("en", "zh"):
            path = corpus / f"{split}.{lang}"
            path.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:n]), encoding="utf-8")
    run_dir = tmp_path / "run"
    report = run_loop_with_file_review(
        ["data=parallel", f"data.dir={corpus}", f"checkpoint_dir={tmp_path / 'ckpt'}", "data.prepare.vocab_size=3000",
         *(f"model.{k}={v}" for k, v in TINY.items() if k in MODEL_SIZE), "model.max_epoch=3", *LOOP_SMALL],
        run_dir, corpus)
    assert report["corrections"] >= 1
    assert (corpus / "spm" / "en.model").is_file() and (corpus / "bin" / "train.en-zh.zh.bin").is_file()
    saved = json.loads((run_dir / "model.json").read_text(encoding="utf-8"))
    assert saved["files"]["src"]["bpe"] == "sentencepiece"
    assert saved["files"]["src"]["sentencepiece_model"] == str(corpus / "spm" / "en.model")


def test_a_corpus_with_misaligned_or_broken_files_stops_before_any_work(tmp_path):
    from repair.data.prepare import parallel_sources, prepare_data

    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.en").write_text("One.\nTwo.\n", encoding="utf-8")
        (tmp_path / f"{split}.zh").write_text("一。\n二。\n", encoding="utf-8")
    (tmp_path / "test.zh").write_text("一。\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"test.en has 2 lines but .*test.zh has 1"):
        prepare_data(tmp_path, sources=parallel_sources(tmp_path))
    assert not (tmp_path / "clean").exists()
    (tmp_path / "test.zh").write_bytes("一。\n".encode() + b"\xc3\x28\n")
    with pytest.raises(UserError, match=r"test.zh:2: not UTF-8"):
        prepare_data(tmp_path, sources=parallel_sources(tmp_path))
    (tmp_path / "test.zh").write_text("一。\n二。\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"smaller than the \d+ characters of the en side.*data.prepare.vocab_size"):
        prepare_data(tmp_path, sources=parallel_sources(tmp_path), vocab_size=3, model_type="bpe")
    with pytest.raises(UserError, match=r"data.train=.*PREFIX"):
        parallel_sources(tmp_path, {"train": ["a", "b", "c"]})
    sources = parallel_sources(tmp_path, {"train": str(tmp_path / "train"), "valid": [str(tmp_path / "valid.en"),
                                                                                       str(tmp_path / "valid.zh")]})
    assert sources[("train", "zh")] == tmp_path / "train.zh" and sources[("valid", "en")] == tmp_path / "valid.en"
