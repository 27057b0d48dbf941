"""How much of what Purity translates has a reference, and the command `python -m repair.data.demo`."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from repair.data.demo.build import DEFAULT_SIZES, DEMO_DOMAIN, build_demo
from repair.data.demo.references import load_references
from repair.errors import exit_on_user_error
from repair.fileio import read_text_lines


def span_coverage(sentences: list[str], references: dict[str, str], parser=None, data_dir: Path | None = None) -> dict:
    """How many of the texts Purity would translate (RTIs and their NP containers, as the spaCy
    parser and RTI extraction cut them) have a reference; with `data_dir`, also the mutants of the
    replacement relation (its lexicon and cleaned training English, as the loop reads them)."""
    from repair.purity.parsers.spacy import SpacyParser
    from repair.purity.relations import Parsed, ReplaceRelation
    from repair.purity.rti import extract

    parser = parser or SpacyParser()
    texts: dict[str, None] = {}
    sentence_covered = 0
    trees = parser.parse(sentences)
    mutants = {}
    if data_dir is not None and (data_dir / "lexicon.jsonl").is_file():
        corpus = data_dir / "clean" / "train.en"
        relation = ReplaceRelation(lexicon=str(data_dir / "lexicon.jsonl"),
                                   corpus=str(corpus) if corpus.is_file() else str(data_dir / "raw" / "train.en"))
        cases = relation.cases([Parsed(f"purity.en:{n}", s, t) for n, (s, t) in enumerate(zip(sentences, trees), 1)])
        lacking = [c.sides[1][1] for c in cases if c.sides[1][1] not in references]
        mutants = {"mutants": len(cases), "mutants_with_reference": len(cases) - len(lacking),
                   "mutants_missing": lacking}
    for sentence, tree in zip(sentences, trees):
        sentence_covered += sentence in references
        found = extract(tree, sentence)
        for text in found.rtis + found.containers:
            if text != found.sentence:
                texts.setdefault(text)
    missing = [t for t in texts if t not in references]
    return {
        "sentences": len(sentences), "sentences_with_reference": sentence_covered,
        "texts": len(texts), "texts_with_reference": len(texts) - len(missing),
        "coverage": round(1 - len(missing) / len(texts), 4) if texts else 1.0, "missing": missing, **mutants,
    }


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m repair.data.demo", description="Build the bundled demo corpus; --coverage: reference coverage of spaCy's RTIs")
    ap.add_argument("data_dir")
    ap.add_argument("--seed", type=int, default=1)
    for key, value in DEFAULT_SIZES.items():
        ap.add_argument("--" + key.replace("_", "-"), type=int, default=value)
    ap.add_argument("--domain", type=float, default=DEMO_DOMAIN,
                    help="share of the Purity sentences' nouns that are a field's words, rare in the corpus (0: none)")
    ap.add_argument("--coverage", action="store_true", help="parse purity.en with spaCy and report the reference coverage of RTIs, "
                    "containers and the replacement relation's mutants")
    ap.add_argument("--show-missing", type=int, default=20, help="how many texts without a reference to list")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = build_demo(args.data_dir, seed=args.seed, domain=args.domain, **{k: getattr(args, k) for k in DEFAULT_SIZES})
    print(json.dumps(result, ensure_ascii=False))
    if args.coverage:
        data_dir = Path(args.data_dir)
        sentences = [s for s in read_text_lines(data_dir / "purity.en") if s]
        cov = span_coverage(sentences, load_references(data_dir / "references.jsonl"), data_dir=data_dir)
        cov["missing"] = cov["missing"][:args.show_missing]
        if "mutants_missing" in cov:
            cov["mutants_missing"] = cov["mutants_missing"][:args.show_missing]
        print(json.dumps(cov, ensure_ascii=False, indent=1))
