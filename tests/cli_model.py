"""A model none of us made: built the classic way, with fairseq's own command line, as a team outside would.

English: Moses (sacremoses, fairseq's defaults), then subword-nmt; Chinese: jieba, then Moses, then the same joint
subword-nmt codes; `fairseq-preprocess` with a dictionary per language; `fairseq-train` to a number of updates, then on to a time limit
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


def tatoeba_pairs() -> Path:
    """Tatoeba's pairs beside the project (../shared/data); the test skips, saying so, where they are absent."""
    import pytest
    from conftest import SHARED_DATA

    tatoeba = SHARED_DATA / "tatoeba-cmn-eng" / "cmn.txt"
    if not tatoeba.is_file():
        pytest.skip(f"{tatoeba} is absent (real data for tests lives beside the project)")
    return tatoeba


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


def cli(*args: str, cwd: Path, timeout: int = 1200, threads: int = 2) -> None:
    # fairseq's checkpoints pickle argparse.Namespace: a fairseq user resuming training under torch >= 2.6 turns
    # the weights-only loader off for their own checkpoints
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def train_args(max_update: int, stop_hours: float | None = None) -> list[str]:
    """fairseq-train's options: a tiny transformer, as a team's recipe would give a small one."""
    return ["bin", "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
            "--encoder-embed-dim", "64", "--decoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
            "--decoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
            "--share-decoder-input-output-embed", "--dropout", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
            "--lr", "5e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "40",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens", "3000",
            "--max-update", str(max_update), *(["--stop-time-hours", str(stop_hours)] if stop_hours else []),
            "--save-dir", "checkpoints", "--no-epoch-checkpoints", "--cpu", "--num-workers", "0", "--seed", "1",
            "--log-format", "simple"]


def build_hub(corpus: Path, out: Path, *, merges: int = 2000, updates: int = 800) -> Path:
    """out/hub: the model folder; out/work: what making it left (tokenized text, codes, binarized data, checkpoints).

    Trained for `updates` updates, then resumed with a time limit already spent (`--stop-time-hours`): fairseq
    stops after one more update, and the checkpoint shipped (checkpoint_last.pt) carries that limit and its
    cumulative training time, as a model trained to a time budget does; the weights are the same on every run."""
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
    if not (work / "bin" / "test.en-zh.zh.bin").is_file():  # a build cut short reruns from what it made
        cli(f"{bin_}/fairseq-preprocess", "--source-lang", "en", "--target-lang", "zh", "--trainpref", "train.bpe",
            "--validpref", "valid.bpe", "--testpref", "test.bpe", "--destdir", "bin", "--workers", "1", cwd=work)
    cli(f"{bin_}/fairseq-train", *train_args(updates), cwd=work, timeout=3600)
    cli(f"{bin_}/fairseq-train", *train_args(updates + 100, stop_hours=0.0001), cwd=work, timeout=3600)
    tmp = out / ".hub.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(work / "checkpoints" / "checkpoint_last.pt", tmp / "model.pt")
    shutil.copyfile(work / "bpecodes", tmp / "bpecodes")
    for lang in ("en", "zh"):
        shutil.copyfile(work / "bin" / f"dict.{lang}.txt", tmp / f"dict.{lang}.txt")
    (tmp / "README.md").write_text(README, encoding="utf-8")
    tmp.rename(hub)
    return hub


def spm_train(corpus: Path, prefix: Path, vocab_size: int) -> Path:
    """`spm_train --input=train.en,train.zh --model_prefix=... --vocab_size=... --character_coverage=0.995`: one
    SentencePiece model on both languages, trained as the command line trains it (the same flags, in-process)."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        f"--input={corpus / 'train.en'},{corpus / 'train.zh'} --model_prefix={prefix} --vocab_size={vocab_size} "
        "--character_coverage=0.995 --model_type=unigram --num_threads=2 --minloglevel=2")
    return prefix.with_suffix(".model")


def spm_encode(model: Path, src: Path, dst: Path) -> None:
    """`spm_encode --model=M --output_format=piece < src > dst`: the pieces of each line, joined by spaces."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    lines = src.read_text(encoding="utf-8").splitlines()
    dst.write_text("".join(" ".join(p) + "\n" for p in sp.encode(lines, out_type=str)), encoding="utf-8")


def build_joint(corpus: Path, out: Path, *, vocab: int = 3000, epochs: int = 5) -> Path:
    """The other common fairseq way: one joint SentencePiece model on both sides (work/spm/joint.model), the pieces
    written as spm_encode writes them, `fairseq-preprocess --joined-dictionary` into work/bin, `fairseq-train
    --share-all-embeddings --update-freq 2 --max-epoch N --save-interval-updates 150` into work/ckpt, no --bpe
    recorded. Returns the checkpoint file fairseq wrote, work/ckpt/checkpoint_best.pt, with the data folder where
    fairseq-preprocess left it (the checkpoint records it as `bin`, relative to work/)."""
    work = out / "work"
    best = work / "ckpt" / "checkpoint_best.pt"
    if best.is_file():
        return best
    (work / "spm").mkdir(parents=True, exist_ok=True)
    model = spm_train(corpus, work / "spm" / "joint", vocab)
    for split in SPLITS:
        for lang in ("en", "zh"):
            spm_encode(model, corpus / f"{split}.{lang}", work / f"{split}.sp.{lang}")
    bin_ = os.path.dirname(sys.executable)
    cli(f"{bin_}/fairseq-preprocess", "--source-lang", "en", "--target-lang", "zh", "--trainpref", "train.sp",
        "--validpref", "valid.sp", "--testpref", "test.sp", "--destdir", "bin", "--joined-dictionary",
        "--workers", "1", cwd=work)
    args = train_args(0)
    args = args[:args.index("--max-update")] + args[args.index("--save-dir"):]  # no update limit: epochs
    args[args.index("--share-decoder-input-output-embed")] = "--share-all-embeddings"
    args[args.index("checkpoints")] = "ckpt"
    # one thread: a model this small trains no faster on two, and far slower where the cores are busy
    cli(f"{bin_}/fairseq-train", *args, "--update-freq", "2", "--max-epoch", str(epochs),
        "--save-interval-updates", "150", cwd=work, timeout=900, threads=1)
    return best
