"""`python -m repair.examples.moses_bpe OUT`: a model made the way fairseq's translation recipe makes one.

English tokenized with Moses, Chinese segmented with jieba, one joint subword-nmt BPE over both,
fairseq dictionaries and binarized data, a small transformer trained with fairseq (its checkpoint
records `--tokenizer moses --bpe subword_nmt --bpe-codes`, as fairseq-train writes them), and the
result laid out like fairseq's published translation models:

    OUT/corpus/{train,valid,test}.{en,zh}   the aligned corpus (Tatoeba's English-Chinese pairs, split)
    OUT/model/model.pt                      the checkpoint
    OUT/model/dict.en.txt, dict.zh.txt      its dictionaries
    OUT/model/bpecodes                      its BPE codes
    OUT/model/preprocessing.yaml            what fairseq's checkpoint cannot say: Chinese is segmented with jieba

It stands for a team's own model: `repair.purity` and `repair.loop` take OUT/model as it is
(`translator.checkpoint=OUT/model`, `model.checkpoint=OUT/model data=parallel data.dir=OUT/corpus`).
Rerunning reuses what is there.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import time
from pathlib import Path

from repair.errors import UserError, exit_on_user_error

REPO = Path(__file__).resolve().parents[2]
TATOEBA = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"
SPLITS = ("train", "valid", "test")
# A model a little smaller than transformer_tiny: the recipe, not the model, is the point.
SMALL = {
    "name": "moses_bpe_small", "arch": "transformer",
    "encoder_layers": 2, "decoder_layers": 2, "encoder_embed_dim": 128, "decoder_embed_dim": 128,
    "encoder_ffn_embed_dim": 256, "decoder_ffn_embed_dim": 256,
    "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "share_decoder_input_output_embed": True, "dropout": 0.1,
    "optimizer": "adam", "adam_betas": [0.9, 0.98], "lr": 2e-3, "lr_scheduler": "inverse_sqrt",
    "warmup_updates": 200, "criterion": "label_smoothed_cross_entropy", "label_smoothing": 0.1,
    "max_tokens": 6000,
}

logger = logging.getLogger("repair.examples.moses_bpe")


def write_corpus(out: Path, source: Path, *, n_valid: int = 500, n_test: int = 500, n_train: int | None = None,
                 pairs: list[tuple[str, str]] | None = None) -> Path:
    """Tatoeba's pairs (or `pairs`, a selection of them) shuffled (seed 0) into OUT/corpus/{train,valid,test}.{en,zh}."""
    from repair.bench.translate import tatoeba_pairs
    from repair.fileio import write_text_atomic

    corpus = out / "corpus"
    if all((corpus / f"{s}.{l}").is_file() for s in SPLITS for l in ("en", "zh")):
        return corpus
    if pairs is None:
        check_source(source)
        pairs = tatoeba_pairs(source)
    pairs = list(pairs)
    random.Random(0).shuffle(pairs)
    splits = {"test": pairs[:n_test], "valid": pairs[n_test:n_test + n_valid], "train": pairs[n_test + n_valid:]}
    if n_train:
        splits["train"] = splits["train"][:n_train]
    for split, rows in splits.items():
        for i, lang in enumerate(("en", "zh")):
            write_text_atomic(corpus / f"{split}.{lang}", "".join(r[i] + "\n" for r in rows))
    return corpus


def check_source(source: Path) -> None:
    if not source.is_file():
        raise UserError(f"{source} not found: the example trains on Tatoeba's English-Chinese pairs "
                        f"(cmn.txt, tab separated); give --tatoeba FILE")


def learn_codes(texts: list[str], codes: Path, merges: int) -> None:
    """One joint subword-nmt BPE over the tokenized English and segmented Chinese training text."""
    import io

    from subword_nmt.learn_bpe import learn_bpe

    from repair.fileio import write_text_atomic

    buf = io.StringIO()
    learn_bpe(texts, buf, merges, min_frequency=2)
    write_text_atomic(codes, buf.getvalue())


def build(out: Path, *, source: Path = TATOEBA, epochs: int = 8, merges: int = 6000, n_train: int | None = None,
          model: dict | None = None, threads: int | None = None, pairs: list[tuple[str, str]] | None = None) -> Path:
    """The corpus (Tatoeba's pairs, or `pairs`), the BPE codes, the binarized data, the trained model and its
    folder; returns OUT/model."""
    from repair.data.prepare import _build_dictionary, binarize_file, clean_text, read_parallel
    from repair.fileio import write_text_atomic
    from repair.nmt.preprocessing import PREPROCESSING_FILE, Codec, Side
    from repair.nmt.fairseq.train import train_model

    out = Path(out)
    model_dir = out / "model"
    if (model_dir / "model.pt").is_file() and (model_dir / PREPROCESSING_FILE).is_file():
        logger.info("%s is already built", model_dir)
        return model_dir
    corpus = write_corpus(out, source, n_train=n_train, pairs=pairs)
    work = out / "work"
    bin_dir, codes = work / "bin", work / "bpecodes"
    texts = {s: read_parallel(corpus / f"{s}.en", corpus / f"{s}.zh") for s in SPLITS}
    texts = {s: [(clean_text(en), clean_text(zh)) for en, zh in rows] for s, rows in texts.items()}
    # the recipe's tokenizers, applied through fairseq's encoders as the translator applies them
    tokenizers = {"en": Codec(Side("en", "", "moses")), "zh": Codec(Side("zh", "", "jieba"))}
    if not codes.is_file():
        tokenized = [line for i, lang in enumerate(("en", "zh"))
                     for line in tokenizers[lang].encode_all([p[i] for p in texts["train"]])]
        learn_codes(tokenized, codes, merges)
    if not (bin_dir / "test.en-zh.zh.bin").is_file():
        bin_dir.mkdir(parents=True, exist_ok=True)
        for i, (lang, tok) in enumerate((("en", "moses"), ("zh", "jieba"))):
            codec = Codec(Side(lang, "", tok, "subword_nmt", str(codes)))
            for split in SPLITS:
                write_text_atomic(work / f"{split}.bpe.{lang}",
                                  "".join(l + "\n" for l in codec.encode_all([p[i] for p in texts[split]])))
            d = _build_dictionary(work / f"train.bpe.{lang}")
            d.save(str(bin_dir / f"dict.{lang}.txt"))
            for split in SPLITS:
                binarize_file(work / f"{split}.bpe.{lang}", d, bin_dir / f"{split}.en-zh.{lang}")
    if threads:
        import torch

        torch.set_num_threads(threads)
    start = time.time()
    checkpoint = train_model(work, work / "checkpoints", model or SMALL, max_epoch=epochs,
                             extra_options={"tokenizer": "moses", "bpe": "subword_nmt", "bpe_codes": str(codes)})
    logger.info("trained in %.0f s: %s", time.time() - start, checkpoint)
    tmp = out / ".model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(checkpoint, tmp / "model.pt")
    shutil.copyfile(codes, tmp / "bpecodes")
    for lang in ("en", "zh"):
        shutil.copyfile(bin_dir / f"dict.{lang}.txt", tmp / f"dict.{lang}.txt")
    # fairseq's checkpoint names one tokenizer for both sides; the Chinese side was segmented with jieba
    write_text_atomic(tmp / PREPROCESSING_FILE, "src_tokenizer: moses\ntgt_tokenizer: jieba\nbpe: subword_nmt\n"
                                                "bpe_codes: bpecodes\n")
    shutil.rmtree(model_dir, ignore_errors=True)
    tmp.rename(model_dir)
    return model_dir


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m repair.examples.moses_bpe", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="output folder (corpus/, work/, model/)")
    p.add_argument("--tatoeba", type=Path, default=TATOEBA, help=f"Tatoeba's cmn.txt (default: {TATOEBA})")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--merges", type=int, default=6000, help="BPE merge operations")
    p.add_argument("--train-pairs", type=int, default=None, help="use only the first N training pairs")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    model = build(args.out, source=args.tatoeba, epochs=args.epochs, merges=args.merges, n_train=args.train_pairs)
    print(f"model: {model}\ncorpus: {args.out / 'corpus'}", flush=True)


if __name__ == "__main__":
    main()
