"""translator=ctranslate2 on a tiny fairseq model trained here: conversion, fairseq's translations in
float32, int8, the converted cache (reused, stale after a fine-tune, corrupt), unconvertible checkpoints,
and a model folder converted beforehand, tested through repair.purity."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from repair.errors import UserError
from repair.nmt.fairseq.ct2 import MARKER, CTranslate2Translator, cache_folder
from repair.nmt.fairseq.finetune import finetune_model
from repair.nmt.fairseq.translator import FairseqTranslator
from test_nmt import corpus, data_dir, model_files, trained, valid_pairs  # noqa: F401 - fixtures of the tiny model

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # trains the tiny model (about a minute on 2 cores)

OPTIONS = {"beam": 4, "max_tokens": 300, "threads": 1}


def texts() -> list[str]:
    held_out = [en for en, _ in corpus.pairs(60, seed=7)]
    # empty, unknown characters, a text that runs into the output cap, a long one
    return held_out + ["", "Zyx qwv ☃ !", "the " * 12, " ".join(en for en, _ in corpus.pairs(8, seed=8))]


@pytest.fixture(scope="module")
def files(trained, data_dir, tmp_path_factory):  # noqa: F811
    """The tiny model in a folder of its own, so that its converted cache is this module's."""
    folder = tmp_path_factory.mktemp("model")
    shutil.copyfile(trained, folder / "checkpoint.pt")
    return model_files(trained, data_dir).with_checkpoint(folder / "checkpoint.pt")


@pytest.fixture(scope="module")
def fairseq_out(files):
    return FairseqTranslator(files=files, **OPTIONS).translate(texts())


def test_float32_gives_fairseqs_translations(files, fairseq_out, caplog):
    with caplog.at_level(logging.INFO):
        ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    folder = cache_folder(files.checkpoint)
    assert f"into {folder}" in caplog.text
    assert {"config.json", "model.bin", MARKER} <= {p.name for p in folder.iterdir()}
    marker = json.loads((folder / MARKER).read_text())
    assert set(marker["from"]) == {"checkpoint", "src_dict", "tgt_dict"}
    # what the translator needs of the checkpoint, so that a cached conversion never loads it
    assert marker["checkpoint"]["model"]["max_source_positions"] == ct2.max_source_positions > 0
    task = dict(marker["checkpoint"]["task"])
    # the folder it was trained on, where its dictionaries are looked for when none is given
    assert Path(task.pop("data")).name == "bin" and task == {"source_lang": "en", "target_lang": "zh"}
    out = ct2.translate(texts())
    assert out == fairseq_out
    assert out[60] == "" and sum(o.endswith("。") for o in out[:60]) >= 55
    # few of these texts reach the cap: the next call searches only those again, with the same translations
    with caplog.at_level(logging.DEBUG, logger="repair.nmt"):
        assert ct2.translate(texts()) == fairseq_out
    assert "fairseq's rule (searched again at the cap)" in caplog.text


@pytest.mark.parametrize("way", ["one search", "searched again at the cap"])
@pytest.mark.parametrize("max_len, len_penalty", [(2, 1.0), (3, 1.0), (4, 0.6), (4, 1.3)])
def test_float32_gives_fairseqs_translations_at_the_output_cap(files, fairseq_out, max_len, len_penalty, way, caplog):
    """Outputs cut at the cap: fairseq ends every open hypothesis with its end token's score there; both ways
    of finding it (one search keeping every hypothesis, or the texts at the cap searched again)."""
    options = {**OPTIONS, "max_len": max_len, "len_penalty": len_penalty}
    sources = texts()
    fairseq = FairseqTranslator(files=files, **options).translate(sources)
    ct2 = CTranslate2Translator(files=files, compute_type="float32", **options)
    # the way is chosen by the share of texts that reached the cap so far: none of 100 makes it the second search
    ct2._cap_counts = (0, 0) if way == "one search" else (100, 0)
    with caplog.at_level(logging.DEBUG, logger="repair.nmt"):
        assert ct2.translate(sources) == fairseq
    assert f"fairseq's rule ({way})" in caplog.text
    assert "may differ" not in caplog.text
    assert sum(a != b for a, b in zip(fairseq, fairseq_out)) >= 10  # many cut by the cap


@pytest.mark.parametrize("way", ["one search", "searched again at the cap"])
@pytest.mark.parametrize("beam, max_len", [(5, 200), (5, 8), (2, 5)])
def test_float32_gives_fairseqs_translations_with_no_length_penalty(files, beam, max_len, way):
    """translator.len_penalty=0: CTranslate2 alone ends a search once its best hypothesis ends, whatever the
    patience, where the length and coverage penalties are 0; fairseq ends it once `beam` have ended. The search is
    kept going as fairseq's (a coverage penalty too small to change a score), texts at the cap included."""
    options = {**OPTIONS, "beam": beam, "max_len": max_len, "len_penalty": 0.0}
    sources = [en for en, _ in corpus.pairs(300, seed=9)]
    sources += [" ".join(en.split()[::-1]) for en in sources[:100]]  # word salad: searches that end late
    fairseq = FairseqTranslator(files=files, **options).translate(sources)
    ct2 = CTranslate2Translator(files=files, compute_type="float32", **options)
    ct2._cap_counts = (0, 0) if way == "one search" else (100, 0)
    assert ct2.translate(sources) == fairseq
    ct2._penalties = lambda: {"length_penalty": 0.0}  # CTranslate2's early end, as it was asked before
    ct2._cap_counts = (0, 0) if way == "one search" else (100, 0)
    if (beam, max_len, way) != (2, 5, "one search"):
        assert ct2.translate(sources) != fairseq  # which these texts show


def test_a_text_still_open_at_the_cap_when_searched_again_is_said(files, fairseq_out, caplog):
    """The one search's "unsure" texts are searched again as fairseq searches; one still open at the cap there,
    which _ended_before_cap rules out, is decided at the cap, with a warning."""
    options = {**OPTIONS, "max_len": 3}
    sources = texts()
    fairseq = FairseqTranslator(files=files, **options).translate(sources)
    ct2 = CTranslate2Translator(files=files, compute_type="float32", **options)
    ct2._cap_counts = (0, 0)
    ct2._ended_before_cap = lambda result: ("unsure", None)  # as if every list were cut where it cannot tell
    with caplog.at_level(logging.WARNING, logger="repair.nmt"):
        assert ct2.translate(sources) == fairseq
    assert "searched again as fairseq searches (patience 1) were still open at the output cap" in caplog.text


def test_float32_with_beam_1_gives_fairseqs_translations(files, caplog):
    """A greedy search (beam 1) at a cap most texts reach: the texts at the cap searched again, as fairseq ends them."""
    options = {**OPTIONS, "beam": 1, "max_len": 3}
    fairseq = FairseqTranslator(files=files, **options).translate(texts())
    with caplog.at_level(logging.DEBUG, logger="repair.nmt"):
        assert CTranslate2Translator(files=files, compute_type="float32", **options).translate(texts()) == fairseq
    assert "fairseq's rule (searched again at the cap)" in caplog.text


def test_int8_translates(files, fairseq_out, caplog):
    with caplog.at_level(logging.INFO):
        ct2 = CTranslate2Translator(files=files, compute_type="int8", **OPTIONS)
        out = ct2.translate(texts())
    assert ct2.compute_type == "int8"
    # fairseq's end at the output cap (a second search) only where the translations are to be fairseq's
    assert not ct2.fairseq_cap and CTranslate2Translator(files=files, compute_type="int8", fairseq_cap=True,
                                                         **OPTIONS).fairseq_cap
    assert CTranslate2Translator(files=files, compute_type="float32", **OPTIONS).fairseq_cap
    # int8's agreement with fairseq depends on the CPU's int8 kernels: only what holds on any machine here
    assert len(out) == len(fairseq_out) and out[60] == ""
    assert all(isinstance(o, str) for o in out)
    fidelity = ct2.fidelity
    assert fidelity["checked"] and fidelity["compute_type"] == "int8" and fidelity["chosen"].startswith("given")
    # a compute type given below the bar runs, with a warning giving its agreement
    below = fidelity["identical"] < fidelity["min_identical"]
    assert ("below translator.min_identical=0.98" in caplog.text) == below
    assert f"{100 * fidelity['identical']:.1f}% of {fidelity['sample']} sample translations" in caplog.text


def test_fidelity_is_measured_once_and_chooses_the_fastest_at_the_bar(files, fairseq_out, caplog):
    options = {**OPTIONS, "max_len": 30}  # settings of their own: measured here, on the first texts translated
    with caplog.at_level(logging.INFO):
        ct2 = CTranslate2Translator(files=files, **options)
        assert ct2.compute_type is None and ct2.fidelity is None  # not known before the first texts
        out = ct2.translate(texts())
    assert "fidelity of" in caplog.text
    fidelity = ct2.fidelity
    measured = fidelity["candidates"]
    assert list(measured) == ct2.candidates() and "float32" in measured  # int8, int16 where the CPU offers them
    from repair.data.prepare import clean_text

    assert fidelity["sample"] == len({clean_text(t) for t in texts()} - {""})  # the first call's texts (at most 200)
    assert all(0 <= m["identical"] <= 1 and 0 <= m["bleu"] <= 100 for m in measured.values())
    passing = [c for c in ct2.candidates() if measured[c]["identical"] >= 0.98]
    if passing:  # the fastest at or above the bar (float32 gives fairseq's translations: one always is, here)
        assert ct2.compute_type == passing[0] and fidelity["identical"] >= 0.98
    assert out == CTranslate2Translator(files=files, compute_type=ct2.compute_type, **options).translate(texts())
    # kept beside the conversion: the next translator uses it, loading neither fairseq nor the checkpoint
    marker = json.loads((cache_folder(files.checkpoint) / MARKER).read_text())
    assert marker["fidelity"][ct2.fidelity_key]["candidates"] == measured
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = CTranslate2Translator(files=files, **options)
    assert again.compute_type == ct2.compute_type and again.fidelity == fidelity
    assert "fidelity of" not in caplog.text
    # a bar nothing misses: the first candidate; a bar above all: the closest, with a warning
    assert CTranslate2Translator(files=files, min_identical=0.0, **options).compute_type == ct2.candidates()[0]
    best = max(m["identical"] for m in measured.values())
    strict = CTranslate2Translator(files=files, min_identical=1.0, **options)
    assert strict.fidelity["identical"] == best
    with pytest.raises(UserError, match="min_identical=2"):
        CTranslate2Translator(files=files, min_identical=2, **options)


def test_a_cached_conversion_imports_neither_fairseq_nor_torch(files, data_dir, tmp_path):  # noqa: F811
    """repair.purity with translator=ctranslate2 and its conversion cached (fidelity measured): the checkpoint
    is not loaded (torch is never imported), the preprocessing is applied without fairseq, spaCy parses without torch."""
    CTranslate2Translator(files=files, sample=texts(), **OPTIONS)  # converted, fidelity measured
    sentences = [en for en, _ in corpus.pairs(12, seed=21)]
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    argv = ["repair.purity", f"input={tmp_path / 'sentences.txt'}", "parser=spacy", "translator=ctranslate2",
            f"translator.checkpoint={files.checkpoint}", f"translator.data_dir={data_dir}", "translator.beam=4",
            "translator.threads=1", "translator.max_tokens=300", "suggest.enabled=false", f"out={tmp_path / 'run'}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # the modules loaded when the run ends: python -m repair.purity, with a look at sys.modules at exit
    code = ("import atexit, runpy, sys\n"
            "atexit.register(lambda: print('LOADED', sorted({m.split('.')[0] for m in sys.modules if sys.modules[m]})))\n"
            f"sys.argv = {argv!r}\nrunpy.run_module('repair.purity', run_name='__main__', alter_sys=True)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = set(json.loads(result.stdout.split("LOADED ", 1)[1].replace("'", '"')))
    assert {"ctranslate2", "sentencepiece", "repair"} <= loaded  # what the run uses ...
    assert not loaded & {"torch", "fairseq"}  # ... and nothing it does not
    assert "(cached)" in result.stdout + result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # spaCy in a process of its own (repair.purity.parsers.process), not imported here
    assert "spacy" not in loaded and summary["settings"]["parser"] == "spacy" and summary["parser_process"]["load"] > 0
    fidelity = summary["translator"]["fidelity"]
    assert fidelity["checked"] and summary["translator"]["compute_type"] == fidelity["compute_type"]
    assert "float32" in fidelity["candidates"] and 0 <= fidelity["identical"] <= 1


def test_the_command_line_begins_the_sentences_before_the_parser_loads(files, data_dir, tmp_path):  # noqa: F811
    """With a cached conversion, repair.purity loads spaCy in a process of its own and translates the sentences while
    it loads and parses; a parser that then fails is one clear error, its translations waited for (a process that
    ended with CTranslate2's threads still translating was aborted: 'terminate called without an active exception')."""
    CTranslate2Translator(files=files, sample=texts(), **OPTIONS)  # converted, fidelity measured
    sentences = list(dict.fromkeys(en for en, _ in corpus.pairs(400, seed=23)))
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", "repair.purity", f"input={tmp_path / 'sentences.txt'}", "parser=spacy",
            "translator=ctranslate2", f"translator.checkpoint={files.checkpoint}", f"translator.data_dir={data_dir}",
            "translator.beam=4", "translator.threads=1", "suggest.enabled=false"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(argv + [f"out={tmp_path / 'run'}"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    log = run.stdout + run.stderr
    assert "(cached)" in log and "spaCy parser:" in log and "loaded in a process of its own" in log
    assert f"{len(sentences)} sentences translated while their pairs were built" in log
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["parser_process"]["parse"] > 0
    table = (tmp_path / "run" / "translations.tsv").read_text(encoding="utf-8").splitlines()
    ct2 = CTranslate2Translator(files=files, **OPTIONS)
    sources = [row.split("\t")[0] for row in table]
    assert [row.split("\t")[1] for row in table] == [" ".join(t.split()) for t in ct2.translate(sources)]
    # enough text that the translation still runs when the parser fails
    many = [" ".join(en for en, _ in corpus.pairs(4, seed=1000 + k)) for k in range(3000)]
    (tmp_path / "many.txt").write_text("\n".join(many) + "\n", encoding="utf-8")
    argv[3] = f"input={tmp_path / 'many.txt'}"
    argv.remove("translator.threads=1")  # a worker per core, as by default
    failed = subprocess.run(argv + ["parser.model=en_no_such_model", f"out={tmp_path / 'failed'}"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert failed.returncode == 2, failed.stderr[-2000:]
    assert "spaCy model 'en_no_such_model' could not be loaded" in failed.stderr
    assert "terminate called" not in failed.stderr


def test_a_checkpoint_written_over_is_loaded_and_converted_again(files, data_dir, tmp_path, caplog):  # noqa: F811
    """By path: the checkpoint's facts kept in a cache that is stale are not used, the checkpoint is loaded."""
    copy = tmp_path / "model" / "checkpoint.pt"
    copy.parent.mkdir()
    shutil.copyfile(files.checkpoint, copy)
    options = {**OPTIONS, "compute_type": "float32"}
    before = CTranslate2Translator(copy, data_dir, **options).translate(texts()[:20])
    state = torch.load(copy, map_location="cpu", weights_only=True)
    state["model"]["decoder.embed_tokens.weight"][5:] *= 1.5  # other weights, the same recorded facts
    torch.save(state, copy)
    with caplog.at_level(logging.INFO):
        ct2 = CTranslate2Translator(copy, data_dir, **options)
    assert "is stale (checkpoint changed since it was converted)" in caplog.text
    after = ct2.translate(texts()[:20])
    assert after == FairseqTranslator(copy, data_dir, beam=4, max_tokens=300, threads=1).translate(texts()[:20])
    assert after != before


def test_the_converted_cache_is_reused(files, caplog):
    CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    model_bin = cache_folder(files.checkpoint) / "model.bin"
    before = model_bin.stat()
    with caplog.at_level(logging.INFO):
        CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    assert "(cached)" in caplog.text and "converted" not in caplog.text
    after = model_bin.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_cache_dir_keeps_checkpoints_of_the_same_name_apart(files, tmp_path):
    other = tmp_path / "other" / Path(files.checkpoint).name
    other.parent.mkdir()
    shutil.copyfile(files.checkpoint, other)
    a = CTranslate2Translator(files=files, cache_dir=tmp_path / "cache", **OPTIONS)
    b = CTranslate2Translator(files=files.with_checkpoint(other), cache_dir=tmp_path / "cache", **OPTIONS)
    assert a.model_path.parent == b.model_path.parent == tmp_path / "cache" and a.model_path != b.model_path
    assert (a.model_path / MARKER).is_file() and (b.model_path / MARKER).is_file()


@pytest.mark.parametrize("damage", ["model.bin", "marker", "vocabulary"])
def test_a_corrupt_cache_is_converted_again(files, fairseq_out, damage, caplog):
    CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    folder = cache_folder(files.checkpoint)
    if damage == "model.bin":
        data = bytearray((folder / "model.bin").read_bytes())
        data[len(data) // 2: len(data) // 2 + 64] = bytes(64)  # same size, wrong weights
        (folder / "model.bin").write_bytes(bytes(data))
        reason = "model.bin does not match its hash"
    elif damage == "marker":
        (folder / MARKER).unlink()  # a conversion stopped before its end
        reason = "no marker"
    else:
        (folder / "target_vocabulary.json").unlink()
        reason = "target_vocabulary.json is missing"
    with caplog.at_level(logging.INFO):
        ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    assert f"is corrupt ({reason}" in caplog.text and "converting again" in caplog.text
    assert ct2.translate(texts()) == fairseq_out
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}")]  # no temporary left


def test_a_finetuned_checkpoint_is_converted_again(files, data_dir, tmp_path, caplog):  # noqa: F811
    corrections = [("The teacher likes the clever dog .", "老师喜欢聪明的狗。"), ("The old child calls the student .", "老孩子叫学生。")]
    pairs = corrections * 10 + corpus.pairs(100, seed=0)
    result = finetune_model(files, pairs, valid_pairs(data_dir), tmp_path / "ft",
                            lr=1e-3, lr_from_model=None, patience=1, max_epoch=3)
    tuned = files.with_checkpoint(result["best_checkpoint"])
    sources = [en for en, _ in corrections] + texts()
    # The fine-tuned model through its own files, as the loop's verification does: its own cache.
    ct2_tuned = CTranslate2Translator(files=tuned, compute_type="float32", **OPTIONS)
    fairseq_tuned = FairseqTranslator(files=tuned, **OPTIONS).translate(sources)
    assert ct2_tuned.translate(sources) == fairseq_tuned
    assert cache_folder(tuned.checkpoint).is_dir()
    # The same checkpoint path overwritten by a fine-tune: the cache beside it is stale and never used.
    copy = tmp_path / "model" / "checkpoint.pt"
    copy.parent.mkdir()
    shutil.copyfile(files.checkpoint, copy)
    base_out = CTranslate2Translator(files=files.with_checkpoint(copy), compute_type="float32", **OPTIONS).translate(sources)
    shutil.copyfile(tuned.checkpoint, copy)
    with caplog.at_level(logging.INFO):
        again = CTranslate2Translator(files=files.with_checkpoint(copy), compute_type="float32", **OPTIONS).translate(sources)
    assert "is stale (checkpoint changed since it was converted)" in caplog.text
    assert again == fairseq_tuned != base_out


def test_an_unconvertible_checkpoint_names_the_option(files, tmp_path):
    state = torch.load(files.checkpoint, map_location="cpu", weights_only=True)
    args = state["cfg"]["model"]
    args.activation_fn = "tanh"  # fairseq trains with it, CTranslate2 has no tanh activation
    bad = tmp_path / "tanh.pt"
    torch.save(state, bad)
    with pytest.raises(UserError) as e:
        CTranslate2Translator(files=files.with_checkpoint(bad), **OPTIONS)
    message = str(e.value)
    assert "activation-fn tanh is not supported" in message and "translator=fairseq" in message
    assert str(bad) in message and "\n" not in message
    assert not cache_folder(bad).exists() and [p.name for p in tmp_path.iterdir()] == ["tanh.pt"]


def test_bad_options_are_clear_errors(files, tmp_path):
    from repair.stages import check_translator
    from repair.purity.translators import make_translator

    with pytest.raises(UserError, match="translator.checkpoint=PATH .* translator.model_dir=DIR"):
        make_translator({"name": "ctranslate2"})
    with pytest.raises(UserError, match="compute_type=bfloat8: not offered on cpu"):
        CTranslate2Translator(files=files, compute_type="bfloat8", **OPTIONS)
    with pytest.raises(UserError, match="not a CTranslate2 model folder"):
        CTranslate2Translator(model_dir=tmp_path)
    with pytest.raises(UserError, match="can be tested .* but not fine-tuned"):
        check_translator({"name": "ctranslate2", "model_dir": str(tmp_path)})


def test_a_gpu_ctranslate2_cannot_compute_on_means_the_cpu_or_a_clear_error(files, monkeypatch, caplog):
    """CTranslate2's Linux wheels load CUDA 12's cuBLAS when they first compute: on a machine with CUDA 13 alone
    the model loads on the GPU, then translating fails (seen on an H200). Here a GPU is made to look present and
    to fail that way; the CPU build's own translator does the rest."""
    import ctranslate2

    from repair.nmt.ct2 import translator as ct2_module

    real = ctranslate2.Translator
    tried = []

    class NoCublas:
        def __init__(self, path, device="cpu", **kwargs):
            self.device = device
            if device == "cuda":
                tried.append(path)
            self.model = None if device == "cuda" else real(path, device=device, **kwargs)

        def translate_batch(self, *args, **kwargs):
            if self.device == "cuda":
                raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")
            return self.model.translate_batch(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.model, name)

    monkeypatch.setattr(ctranslate2, "Translator", NoCublas)
    monkeypatch.setattr(ct2_module, "GPU_TRIED", {})  # nothing tried yet in this process
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    supported = ctranslate2.get_supported_compute_types
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types",
                        lambda kind: {"float16", "float32", "int8_float16"} if kind == "cuda" else supported(kind))
    with caplog.at_level(logging.WARNING):
        ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    assert ct2.device == "cpu" and ct2.candidates() == [c for c in ("int8", "int16", "float32") if c in supported("cpu")]
    assert "cannot translate on it (Library libcublas.so.12 is not found" in caplog.text
    assert ct2.translate(texts()[:5]) == FairseqTranslator(files=files, **OPTIONS).translate(texts()[:5])
    with pytest.raises(UserError, match=r"device=cuda: CTranslate2 cannot translate on the GPU .*libcublas.so.12.*"
                                        r"translator.device=cpu"):
        CTranslate2Translator(files=files, device="cuda", **OPTIONS)
    assert len(tried) == 1  # the GPU is tried once per process, not once per translator


def test_the_loop_builds_a_ctranslate2_translator_per_model(files, tmp_path):
    from repair.stages import Translators

    translators = Translators(OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "translator" / "ctranslate2.yaml")),
                              device="cpu", threads=1)
    base = translators(files)
    assert isinstance(base, CTranslate2Translator) and base.threads == 1
    assert base.model_path == cache_folder(files.checkpoint) and base.min_identical == 0.98


def test_a_converted_model_folder_is_tested_through_purity(files, fairseq_out, tmp_path):
    """A model converted beforehand, with its SentencePiece models beside it as OPUS-MT folders have them."""
    import ctranslate2

    from repair.nmt.fairseq.checkpoint import allow_fairseq_globals

    allow_fairseq_globals()  # the converter loads the checkpoint with torch's weights-only unpickler

    data = tmp_path / "dicts"
    data.mkdir()
    for side in (files.src, files.tgt):
        shutil.copyfile(side.dict, data / f"dict.{side.lang}.txt")
    model = tmp_path / "converted"
    ctranslate2.converters.FairseqConverter(files.checkpoint, str(data), source_lang="en", target_lang="zh").convert(
        str(model), quantization="float32")
    shutil.copyfile(files.src.sentencepiece_model, model / "source.spm")
    shutil.copyfile(files.tgt.sentencepiece_model, model / "target.spm")
    sentences = [en for en, _ in corpus.pairs(12, seed=21)]
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "repair.purity", f"input={tmp_path / 'sentences.txt'}", "parser=spacy",
         "translator=ctranslate2", f"translator.model_dir={model}", "translator.compute_type=float32",
         "translator.beam=4", f"out={tmp_path / 'run'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("\t") for line in (tmp_path / "run" / "translations.tsv").read_text(encoding="utf-8").splitlines()]
    assert {s for s, _ in rows} >= set(sentences)
    reference = FairseqTranslator(files=files, beam=4, threads=1).translate([s for s, _ in rows])
    assert sum(t == r for (_, t), r in zip(rows, reference)) >= 0.95 * len(rows)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["settings"]["translator"] == "ctranslate2"
    assert summary["translator"]["fidelity"]["checked"] is False and "converted elsewhere" in result.stdout + result.stderr
    assert "no fairseq checkpoint" in summary["suggestions"]["skipped"]  # a converted model alone: none searched
    # The same folder without its SentencePiece models: one error that says what to add.
    (model / "source.spm").unlink()
    (model / "target.spm").unlink()
    with pytest.raises(UserError, match="source.spm and target.spm"):
        CTranslate2Translator(model_dir=model)


def test_suggestions_for_a_ctranslate2_model_say_where_they_came_from(files):
    from repair.purity.relations.base import Case
    from repair.purity.relations.replace import ReplaceRelation
    from repair.purity.suggest import add_suggestions

    for compute_type, by in (("float32", "ctranslate2 with the phrases in a forced beginning of the translation"),
                             ("int8", "fairseq on the ctranslate2 model's checkpoint")):
        ct2 = CTranslate2Translator(files=files, compute_type=compute_type, **OPTIONS)
        o, m = "The teacher likes the clever student .", "The teacher likes the clever child ."
        translation = dict(zip([o, m], ct2.translate([o, m])))
        translation.update({w: zh for _, pairs in corpus.lexicon().items() for w, zh in pairs})
        # an issue whatever this machine's tiny model says: the mutant's translation lacks the child it names
        translation[m] = translation[o]
        case = Case("replace", o, (("original", o), ("mutant", m)), (o, m, "student", "child"))
        relation = ReplaceRelation(stopwords=[], candidates="context")
        issues = [{"id": case.id, "relation": "replace"}]
        figures = add_suggestions(issues, {case.id: case}, {"replace": relation}, translation, ct2, beam=4,
                                  min_score=None)
        assert figures["searched"] >= 1 and "skipped" not in figures
        search, note = ct2.searcher(4)
        assert by in note
        # the searches no prefix can do: fairseq on the checkpoint this model was converted from
        assert isinstance(search.fairseq(), FairseqTranslator) and search.fairseq().files.checkpoint == files.checkpoint
        # whether this machine's tiny model finds a consistent translation is its own; what it offers says where it came from
        assert all(note in s["origin"] for s in issues[0]["suggestions"])


def test_ctranslate2_float32_scores_are_fairseqs(files, fairseq_out):
    """The suggestion step's teacher-forced scores from CTranslate2 (float32): fairseq's, up to rounding."""
    from repair.nmt.fairseq.ondemand import ct2_scores

    ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    sources = texts() * 2
    targets = fairseq_out + fairseq_out[1:] + fairseq_out[:1]  # each text's own translation, then another's
    got, want = ct2_scores(ct2, sources, targets), FairseqTranslator(files=files, **OPTIONS).score(sources, targets)
    assert [g == float("-inf") for g in got] == [w == float("-inf") for w in want]  # an empty text: -inf
    finite = [(g, w) for g, w in zip(got, want) if w != float("-inf")]
    assert len(finite) >= 120 and max(abs(g - w) for g, w in finite) < 1e-4
    n = len(texts())  # the model's own translations score higher than another text's
    assert sum(w for w in want[:n] if w > -1e9) / 60 > sum(w for w in want[n:] if w > -1e9) / 60 + 1


def _suggestion_issues(ct2):
    """RTI issues (a container and its last words) and a replace issue, with the model's translations."""
    from repair.purity.relations.base import Case

    containers = [en for en, _ in corpus.pairs(12, seed=11)]
    rtis = [" ".join(c.split()[-4:-1]) for c in containers]
    o, m = "The teacher likes the clever student .", "The teacher likes the clever child ."
    translation = dict(zip(containers + rtis + [o, m], ct2.translate(containers + rtis + [o, m])))
    translation.update({w: zh for _, pairs in corpus.lexicon().items() for w, zh in pairs})
    translation[m] = translation[o]
    cases = [Case("rti", c, (("container", c), ("rti", r)), (c, r)) for c, r in zip(containers, rtis)]
    cases.append(Case("replace", o, (("original", o), ("mutant", m)), (o, m, "student", "child")))
    return cases, translation


def _counting_fairseq_loads(monkeypatch) -> list:
    from repair.nmt.fairseq import translator as fairseq_module

    built = []
    original_init = fairseq_module.FairseqTranslator.__init__
    monkeypatch.setattr(fairseq_module.FairseqTranslator, "__init__",
                        lambda self, *a, **k: (built.append(1), original_init(self, *a, **k))[1])
    return built


def test_suggestions_on_a_float32_ctranslate2_model_are_searched_by_it_without_fairseq(files, monkeypatch):
    """Every search the suggestion step asks for begins with its phrases, or is an n-best list: CTranslate2 does them
    all, scored as fairseq scores; each offer makes its pair consistent, as fairseq's search's offers do."""
    from repair.purity.relations.replace import ReplaceRelation
    from repair.purity.relations.rti import RTIRelation
    from repair.purity.suggest import add_suggestions

    ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    cases, translation = _suggestion_issues(ct2)
    relations = {"rti": RTIRelation(stopwords=[]), "replace": ReplaceRelation(stopwords=[], candidates="context")}
    built = _counting_fairseq_loads(monkeypatch)

    def suggest(translator, min_score):
        issues = [{"id": c.id, "relation": c.relation} for c in cases]
        figures = add_suggestions(issues, {c.id: c for c in cases}, relations, translation, translator, beam=4,
                                  min_score=min_score)
        return figures, issues

    fairseq = FairseqTranslator(files=files, **OPTIONS)
    built.clear()
    for min_score in (None, -1.5):
        (mine, issues), (theirs, _) = suggest(ct2, min_score), suggest(fairseq, min_score)
        assert mine["searched"] == theirs["searched"] > 0
        offered = [(c, s) for c, i in zip(cases, issues) for s in i["suggestions"]]
        for case, s in offered:  # each offer consistent with its partner, and as the model scores it
            side = dict(case.sides)[s["role"]]
            assert relations[case.relation].check(case, {**translation, side: s["text"]}).distance == 0
            assert s["score"] == pytest.approx(ct2.searcher(4)[0].score([side], [s["text"]])[0], abs=1e-3)
    assert built == []  # no fairseq translator made for the searches (the one compared with was made before)
    assert sum(len(i["suggestions"]) for i in suggest(ct2, None)[1]) >= 1  # something offered on this tiny model


def test_a_ctranslate2_prefix_search_begins_with_its_phrases_and_loads_fairseq_only_for_the_rest(files, monkeypatch):
    ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    search, _ = ct2.searcher(4)
    sources = [en for en, _ in corpus.pairs(6, seed=13)]
    own = ct2.translate(sources)
    built = _counting_fairseq_loads(monkeypatch)
    # phrases that begin the translation: its first characters, then its last ones
    phrases = [[t[:2], t[-2:]] for t in own]
    found = search.translate_constrained(sources, phrases, beam=4, nbest=4, starts=[True] * len(sources))
    assert built == [] and search.searched == {"ctranslate2": len(sources), "fallback": 0}
    for t, ps, hyps in zip(own, phrases, found):
        begun = search.t.text_of(search.prefix_tokens(ps))  # the phrases but the last, to the last whole token
        assert begun and ps[0].startswith(begun) and all(h.text.startswith(begun) for h in hyps)
        assert [(not h.met, -h.score) for h in hyps] == sorted((not h.met, -h.score) for h in hyps)  # met first
        assert any(h.met for h in hyps)  # the phrases joined are a candidate, whatever the model writes after them
    assert search.score([sources[0]], [found[0][0].text]) == pytest.approx([found[0][0].score])
    # an n-best list: CTranslate2's beam search, its best hypothesis the translation
    nbest = search.translate_constrained(sources, [[] for _ in sources], beam=4, nbest=4)
    assert [h[0].text for h in nbest] == own and built == []
    # phrases that need not begin it: put after each beginning of the model's own translation, still CTranslate2
    found = search.translate_constrained(sources, [[t[-2:]] for t in own], beam=4, nbest=2, starts=[False] * 6)
    assert built == [] and search.searched == {"ctranslate2": 3 * len(sources), "fallback": 0}
    assert all(hyps and hyps[0].met and t[-2:] in hyps[0].text for t, hyps in zip(own, found))
    # phrases in any order: fairseq's lexically constrained search, loaded for them
    found = search.translate_constrained(sources[:2], phrases[:2], beam=4, nbest=2, ordered=False)
    assert len(built) == 1 and search.searched["fallback"] == 2 and all(found)


def test_texts_begun_in_the_background_are_translated_as_at_once(files, fairseq_out, tmp_path, caplog):  # noqa: F811
    """Purity's sentences start translating while their pairs are built: the same translations as one batch."""
    from repair.purity.parsers.spacy import SpacyParser
    from repair.purity.run import run_purity

    ct2 = CTranslate2Translator(files=files, compute_type="float32", **OPTIONS)
    ct2.translate(texts()[:2])  # the fidelity check (a cached conversion has it already)
    wait = ct2.begin(texts()[:30])
    rest = ct2.translate(texts()[30:])
    assert wait() + rest == fairseq_out
    # before the fidelity check has chosen the compute type, nothing is begun
    assert CTranslate2Translator(files=files, cache_dir=tmp_path / "fresh", **OPTIONS).begin(texts()[:3]) is None
    assert FairseqTranslator(files=files, **OPTIONS).begin(texts()[:3]) is None

    sentences = [en for en, _ in corpus.pairs(12, seed=31)]
    parser = SpacyParser()
    with caplog.at_level(logging.INFO):
        run_purity(sentences, parser, ct2, tmp_path / "ct2")
    assert f"{len(set(sentences))} sentences translated while their pairs were built" in caplog.text
    run_purity(sentences, parser, FairseqTranslator(files=files, **OPTIONS), tmp_path / "fairseq")
    tsv = [(tmp_path / run / "translations.tsv").read_text(encoding="utf-8") for run in ("ct2", "fairseq")]
    assert tsv[0] == tsv[1] and all(s in tsv[0] for s in sentences)


class _Listed:
    """A CTranslate2 search result: hypotheses (the end token included where ended), best first."""

    def __init__(self, *listed: tuple[float, str]):
        self.scores = [s for s, _ in listed]
        self.hypotheses = [h.split() for _, h in listed]


@pytest.mark.parametrize("listed, verdict", [
    # whole (under 2 * beam): fewer than `beam` ended before the cap -> at the cap
    ((( -1.0, "a b c"), (-1.2, "a </s>"), (-1.5, "b c d")), ("cap", None)),
    # whole: fairseq stops at the step where the 2nd ended (step 2) and chooses the best ended by then; the better
    # one ended later (step 3) is what patience 2 found, not fairseq
    (((-0.5, "x y z </s>"), (-1.0, "a b </s>"), (-2.0, "c </s>")), ("ended", ["a", "b"])),
    # cut (2 * beam listed): the best of those ended by the 2nd listed ending, none that could have ended before it
    (((-0.5, "a </s>"), (-0.6, "b c </s>"), (-0.7, "d e f </s>"), (-0.8, "g h i j </s>")), ("ended", ["a"])),
    # cut: the best ended by the 2nd listed ending ended at step 2; one listed ended before it, and no dropped one
    # can have (one listed at the last step: fewer than one dropped ended before it): fairseq's choice
    (((-0.5, "b c </s>"), (-0.6, "a </s>"), (-0.7, "d e f </s>"), (-0.8, "g h i j </s>")), ("ended", ["b", "c"])),
    # cut with two listed at the last step: a dropped hypothesis may have ended at step 1 beside "a", so that
    # fairseq stopped at step 1 and chose "a": cannot be told
    (((-0.5, "b c </s>"), (-0.6, "a </s>"), (-0.7, "d e f </s>"), (-0.8, "g e f </s>")), ("unsure", None)),
])
def test_fairseqs_choice_is_told_from_one_search_with_patience_2(listed, verdict):
    """The search with patience 2 (2 * beam hypotheses kept) tells fairseq's choice (patience 1) or says it cannot."""
    from types import SimpleNamespace

    rule = SimpleNamespace(beam=2, _end="</s>")
    rule._ended = lambda hypothesis: CTranslate2Translator._ended(rule, hypothesis)
    assert CTranslate2Translator._ended_before_cap(rule, _Listed(*listed)) == verdict
