"""A model none of us made: built the classic way, with fairseq's own command line, as a team outside would.

English: Moses (sacremoses, fairseq's defaults), then subword-nmt; Chinese: jieba, then Moses, then the same joint
subword-nmt codes; `fairseq-preprocess` with a dictionary per language; `fairseq-train` stopped by a time limit
(`--stop-time-hours`), which the checkpoint keeps with its cumulative training time; laid out as a hub folder:
model.pt, dict.en.txt, dict.zh.txt, bpecodes and a prose README of the preprocessing, no preprocessing.yaml. Nothing
of the project encodes the text: only the libraries and fairseq's console scripts.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

SPLITS = ("train", "valid", "test")
README = """A small English-to-Chinese transformer trained with fairseq.

Preprocessing: the English was tokenized with the Moses tokenizer and split with subword-nmt BPE (bpecodes).
The Chinese was segmented into words with jieba, tokenized with Moses, and split with the same BPE codes.
"""


def tatoeba_corpus(source: Path, out: Path, *, n_train: int, n_valid: int = 300, n_test: int = 400) -> Path:
    """Tatoeba's pairs shuffled (seed 3) into out/{train,valid,test}.{en,zh}, as a team keeps its corpus."""
    rows = []
    for line in source.read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
            rows.append((fields[0].strip(), fields[1].strip()))
    random.Random(3).shuffle(rows)
    splits = {"test": rows[:n_test], "valid": rows[n_test:n_test + n_valid],
              "train": rows[n_test + n_valid:n_test + n_valid + n_train]}
    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        for i, lang in enumerate(("en", "zh")):
            (out / f"{split}.{lang}").write_text("".join(p[i] + "\n" for p in pairs), encoding="utf-8")
    return out


def tokenize(corpus: Path, work: Path) -> None:
    """work/{split}.tok.{en,zh}: Moses English; jieba-segmented, then Moses-tokenized Chinese."""
    import jieba
    from sacremoses import MosesTokenizer

    jieba.setLogLevel(60)
    moses = {"en": MosesTokenizer("en"), "zh": MosesTokenizer("zh")}
    for split in SPLITS:
        for lang in ("en", "zh"):
            lines = (corpus / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            if lang == "zh":
                lines = [" ".join(w for w in jieba.cut(line) if w.strip()) for line in lines]
            toks = [moses[lang].tokenize(line, aggressive_dash_splits=True, return_str=True, escape=True)
                    for line in lines]
            (work / f"{split}.tok.{lang}").write_text("".join(t + "\n" for t in toks), encoding="utf-8")


def cli(*args: str, cwd: Path, timeout: int = 1200) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def build_hub(corpus: Path, out: Path, *, merges: int = 2000, stop_hours: float = 0.012, max_epoch: int = 30) -> Path:
    """out/hub: the model folder; out/work: what making it left (tokenized text, codes, binarized data, checkpoints)."""
    hub, work = out / "hub", out / "work"
    if (hub / "model.pt").is_file():
        return hub
    work.mkdir(parents=True, exist_ok=True)
    tokenize(corpus, work)
    bin_ = os.path.dirname(sys.executable)
    cli(f"{bin_}/subword-nmt", "learn-joint-bpe-and-vocab", "--input", "train.tok.en", "train.tok.zh", "-s", str(merges),
        "-o", "bpecodes", "--write-vocabulary", "vocab.en", "vocab.zh", cwd=work)
    for split in SPLITS:
        for lang in ("en", "zh"):
            cli(f"{bin_}/subword-nmt", "apply-bpe", "-c", "bpecodes", "--input", f"{split}.tok.{lang}",
                "--output", f"{split}.bpe.{lang}", cwd=work)
    cli(f"{bin_}/fairseq-preprocess", "--source-lang", "en", "--target-lang", "zh", "--trainpref", "train.bpe",
        "--validpref", "valid.bpe", "--testpref", "test.bpe", "--destdir", "bin", "--workers", "1", cwd=work)
    cli(f"{bin_}/fairseq-train", "bin", "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
        "--encoder-embed-dim", "64", "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
        "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
        "--share-decoder-input-output-embed", "--dropout", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
        "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "40",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "3000",
        "--max-epoch", str(max_epoch), "--stop-time-hours", str(stop_hours), "--save-dir", "checkpoints",
        "--no-epoch-checkpoints", "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "simple",
        cwd=work, timeout=3600)
    tmp = out / ".hub.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(work / "checkpoints" / "checkpoint_best.pt", tmp / "model.pt")
    shutil.copyfile(work / "bpecodes", tmp / "bpecodes")
    for lang in ("en", "zh"):
        shutil.copyfile(work / "bin" / f"dict.{lang}.txt", tmp / f"dict.{lang}.txt")
    (tmp / "README.md").write_text(README, encoding="utf-8")
    tmp.rename(hub)
    return hub
