"""`python -m repair.bench align`: learn the word alignment (eflomal) of a training corpus and project the noun
phrases of sentences with references onto those references; prints the seconds to learn, and, where the phrases
have references of their own (the demo's references.jsonl), how often the projection equals them. The last line
is JSON.

    python -m repair.bench align --demo runs/bench-align/demo          # builds the demo corpus there (conf/data/demo)
    python -m repair.bench align --tatoeba ../shared/data/tatoeba-cmn-eng/cmn.txt --out runs/bench-align/tatoeba
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from repair.fileio import iter_jsonl, read_text_lines
from repair.review.align import PhraseAligner
from repair.stats import squeeze

DEMO_BUILD = {"seed": 1, "n_train": 30000, "n_fragments": 20000, "n_valid": 800, "n_test": 500, "n_purity": 225,
              "domain": 0.3}  # conf/data/demo.yaml's build block when measured (the demo's first 225 Purity sentences)


def demo_pairs(folder: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], dict[str, str]]:
    """The demo corpus built in `folder`: its training pairs, (sentence, reference, phrase) for every phrase of a
    Purity sentence that has a reference (the phrases a parser may cut), and the references."""
    from repair.data.demo.build import build_demo

    build_demo(folder, **DEMO_BUILD)
    train = list(zip(read_text_lines(folder / "raw" / "train.en"), read_text_lines(folder / "raw" / "train.zh")))
    refs = {r["en"]: r["zh"] for _, r in iter_jsonl(folder / "references.jsonl")}
    items = []
    for sentence in read_text_lines(folder / "purity.en"):
        if sentence in refs:
            padded = f" {sentence} "
            items += [(sentence, refs[sentence], en) for en in refs
                      if en != sentence and f" {en} " in padded]
    return train, items, refs


def tatoeba_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in read_text_lines(path):
        fields = line.lstrip("\ufeff").split("\t")
        if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
            pairs.append((fields[0].strip(), fields[1].strip()))
    return pairs


def agreement(items: list[tuple[str, str, str]], projections: list, refs: dict[str, str]) -> dict:
    rows = [(p.confidence if p else None, p is not None and squeeze(p.text) == squeeze(refs[phrase]))
            for (_, _, phrase), p in zip(items, projections)]
    found = [r for r in rows if r[0] is not None]
    return {"phrases": len(rows), "projected": len(found), "equal": sum(ok for _, ok in rows),
            "equal_share": round(sum(ok for _, ok in rows) / len(rows), 4) if rows else None,
            "by_confidence": {f">={t}": {"phrases": sum(c >= t for c, _ in found),
                                          "equal": sum(ok for c, ok in found if c >= t)} for t in (0.5, 0.8, 1.0)}}


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser(prog="python -m repair.bench align", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--demo", type=Path, help="a folder to build the demo corpus in (or where it is built)")
    args.add_argument("--tatoeba", type=Path, help="Tatoeba's cmn.txt (English, Chinese, attribution per line)")
    args.add_argument("--out", type=Path, help="where the alignment is kept (default: DEMO/align)")
    args.add_argument("--unit", default="word", choices=("word", "char"))
    args.add_argument("--max-sentences", type=int, default=100_000)
    opts = args.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if (opts.demo is None) == (opts.tatoeba is None):
        args.error("give one of --demo FOLDER or --tatoeba FILE")
    if opts.tatoeba is not None and not opts.tatoeba.is_file():
        reason = f"{opts.tatoeba} not found (Tatoeba's English-Chinese pairs lie in ../shared/data/tatoeba-cmn-eng)"
        print(f"skipped: {reason}")
        print(json.dumps({"benchmark": "align", "skipped": True, "reason": reason}))
        return
    items, refs = [], {}
    if opts.demo is not None:
        train, items, refs = demo_pairs(opts.demo)
    else:
        train = tatoeba_pairs(opts.tatoeba)
    out = opts.out or (opts.demo / "align" if opts.demo else Path("runs/bench-align/tatoeba"))
    for stale in (out / "align.json",):  # learnt anew: the seconds are this run's
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    aligner = PhraseAligner.train(train, out, unit=opts.unit, max_sentences=opts.max_sentences)
    learn = time.perf_counter() - started
    result = {"benchmark": "align", "corpus": "demo" if opts.demo else "tatoeba", "unit": opts.unit,
              "pairs": aligner.info["pairs"], "learn_seconds": round(learn, 2)}
    if items:
        started = time.perf_counter()
        projections = aligner.project(items)
        result["project_seconds"] = round(time.perf_counter() - started, 2)
        result["sentences"] = len({s for s, _, _ in items})
        result.update(agreement(items, projections, refs))
    print(json.dumps(result))
