"""`python -m repair.bench parse`: parse the Purity paper's 200 input sentences and build their
pairs; prints sentences per second, RTIs and pairs, the last line in JSON."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from repair.fileio import read_text_lines
from repair.purity.parsers import make_parser
from repair.purity.rti import english_stopwords, extract

REPO = Path(__file__).resolve().parents[2]
DEFAULT_INPUTS = REPO.parent / "shared" / "data" / "purity-inputs"
FILES = ("politics.txt", "business.txt")


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser(prog="python -m repair.bench parse", description=__doc__)
    args.add_argument("--inputs", type=Path, default=DEFAULT_INPUTS,
                      help=f"folder with {' and '.join(FILES)} (default: %(default)s)")
    args.add_argument("--parser", default="spacy", help="parser backend (default: %(default)s)")
    args.add_argument("--model", default=None, help="spaCy model name or path (default: the backend's)")
    opts = args.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    paths = [opts.inputs / name for name in FILES]
    absent = [str(p) for p in paths if not p.is_file()]
    if absent:
        reason = f"input not found: {', '.join(absent)}"
        print(f"skipped: {reason} (the Purity paper's inputs lie in ../shared/data/purity-inputs)")
        print(json.dumps({"benchmark": "parse", "skipped": True, "reason": reason}))
        return
    sentences = [line.strip() for p in paths for line in read_text_lines(p) if line.strip()]

    started = time.perf_counter()
    cfg = {"name": opts.parser, **({"model": opts.model} if opts.model else {})}
    parser = make_parser(cfg)
    stopwords = english_stopwords()
    init_seconds = time.perf_counter() - started

    started = time.perf_counter()
    trees = parser.parse(sentences)
    parse_seconds = time.perf_counter() - started
    started = time.perf_counter()
    rtis: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    for sentence, tree in zip(sentences, trees):
        found = extract(tree, sentence, stopwords=stopwords)
        rtis.update(found.rtis)
        pairs.update(found.pairs)
    extract_seconds = time.perf_counter() - started

    total = parse_seconds + extract_seconds
    result = {
        "benchmark": "parse",
        "parser": parser.name,
        "sentences": len(sentences),
        "sentences_per_s": round(len(sentences) / total, 1),
        "rtis": len(rtis),
        "pairs": len(pairs),
        "init_seconds": round(init_seconds, 2),
        "parse_seconds": round(parse_seconds, 3),
        "extract_seconds": round(extract_seconds, 3),
    }
    print(f"{parser.name}: {len(sentences)} sentences in {total:.2f} s "
          f"({result['sentences_per_s']} sentences/s, model loaded in {init_seconds:.2f} s); "
          f"{len(rtis)} RTIs, {len(pairs)} pairs")
    print(json.dumps(result))
