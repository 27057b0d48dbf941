"""Building the demo corpus: the parallel splits, the sentences Purity tests and their references."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

from repair.data.demo.grammar import DemoGrammar, Sentence, en_text, random_span
from repair.data.demo.mutants import lexicon_groups, mutant_references
from repair.errors import UserError
from repair.fileio import read_json, write_json_atomic, write_jsonl_atomic, write_text_atomic
from repair.purity.rti import is_rti

logger = logging.getLogger("repair.data.demo")

# Bump when the grammar or lexicon changes, so that an existing build is regenerated.
DEMO_VERSION = 3

DEFAULT_SIZES = dict(n_train=30000, n_fragments=20000, n_valid=800, n_test=500, n_purity=345)


def _params(seed: int, sizes: dict[str, int], domain: float = 0.0) -> dict:
    return {"version": DEMO_VERSION, "seed": seed, **sizes, **({"domain": domain} if domain else {})}


# Purity sentences drawn along with the corpus; any beyond them are drawn after it, so that a larger Purity
# input (n_purity) leaves the training, validation and test sentences, and a model trained on them, as they were.
WITH_CORPUS = 150
# With domain nouns (`domain` > 0): the share of the corpus's nouns of their kinds that are domain nouns. The
# Purity sentences are then all drawn after the corpus, with the share `domain`.
DOMAIN_CORPUS_RATE = 0.001
DEMO_DOMAIN = 0.3  # the demo's own share (conf/data/demo.yaml, `python -m repair.data.demo`); build_demo's default: none


def generate(seed: int, n_train: int, n_fragments: int, n_valid: int, n_test: int, n_purity: int,
             domain: float = 0.0) -> dict:
    """Everything `build_demo` writes, in memory: {split: [(en, zh)]}, purity sentences, references.

    `domain` > 0: the corpus holds the lexicon's domain nouns rarely (DOMAIN_CORPUS_RATE) and the Purity
    sentences, all drawn after the corpus, hold them with that share: errors of a kind that recur."""
    rng = random.Random(seed)
    grammar = DemoGrammar(rng, domain_rate=DOMAIN_CORPUS_RATE if domain else 0.0)
    seen: dict[str, str] = {}
    purity: list[Sentence] = []
    rest: list[Sentence] = []
    n_rest = n_train + n_valid + n_test
    first = 0 if domain else min(n_purity, WITH_CORPUS)
    attempts = 0

    def testable(s: Sentence) -> bool:
        return any(is_rti(en_text(p).split()) for p in s.phrases)

    while len(purity) < first or len(rest) < n_rest:
        attempts += 1
        if attempts > 50 * (n_purity + n_rest) + 1000:
            raise RuntimeError("demo grammar: too few distinct sentences for the sizes asked")
        s = grammar.sentence()
        text = s.en_text
        if text in seen:
            continue
        seen[text] = s.zh
        if len(purity) < first and testable(s):
            purity.append(s)
        elif len(rest) < n_rest:
            rest.append(s)
    test, valid, train = rest[:n_test], rest[n_test:n_test + n_valid], rest[n_test + n_valid:]

    # Noun-phrase fragments so that the model also learns phrases on their own, as Purity asks them.
    fragments: dict[str, str] = {}
    if train and n_fragments:
        tries = 0
        while len(fragments) < n_fragments and tries < 20 * n_fragments:
            tries += 1
            en, zh = random_span(train[rng.randrange(len(train))], rng)
            if len(en.split()) >= 2 and en not in seen and en not in fragments:
                fragments[en] = zh
    train_pairs = [(s.en_text, s.zh) for s in train] + list(fragments.items())
    rng.shuffle(train_pairs)

    if domain:
        grammar.domain_rate = domain
    while len(purity) < n_purity:  # the Purity sentences beyond the first WITH_CORPUS, none in the corpus
        attempts += 1
        if attempts > 50 * (n_purity + n_rest) + 1000:
            raise RuntimeError("demo grammar: too few distinct sentences for the sizes asked")
        s = grammar.sentence()
        if s.en_text in seen or s.en_text in fragments:
            continue
        seen[s.en_text] = s.zh
        if testable(s):
            purity.append(s)

    references: dict[str, str] = {}
    for s in purity:
        for en, zh in s.references().items():
            if references.setdefault(en, zh) != zh:
                raise RuntimeError(f"demo grammar: {en!r} translates two ways: {references[en]!r} and {zh!r}")
    for s in purity:  # the word-replacement relation's mutants (purity.relations=[rti,replace])
        for en, zh in mutant_references(s).items():
            references.setdefault(en, zh)
    return {
        "train": train_pairs,
        "valid": [(s.en_text, s.zh) for s in valid],
        "test": [(s.en_text, s.zh) for s in test],
        "purity": [s.en_text for s in purity],
        "references": references,
        "fragments": len(fragments),
    }


def build_demo(data_dir: str | Path, *, seed: int = 1, n_train: int = DEFAULT_SIZES["n_train"],
               n_fragments: int = DEFAULT_SIZES["n_fragments"], n_valid: int = DEFAULT_SIZES["n_valid"],
               n_test: int = DEFAULT_SIZES["n_test"], n_purity: int = DEFAULT_SIZES["n_purity"],
               domain: float = 0.0) -> dict:
    """Write the demo corpus into data_dir (raw splits, purity.en, references.jsonl, build.json); return build.json.

    Deterministic for a seed; does nothing when build.json already records the same parameters.
    """
    sizes = dict(n_train=n_train, n_fragments=n_fragments, n_valid=n_valid, n_test=n_test, n_purity=n_purity)
    for key, value in sizes.items():
        if not isinstance(value, int) or value < 0:
            raise UserError(f"data.{key} must be a non-negative integer, got {value!r}")
    if n_purity < 1 or n_train < 1:
        raise UserError("data.n_train and data.n_purity must be at least 1")
    if not isinstance(domain, (int, float)) or not 0 <= domain <= 1:
        raise UserError(f"data.build.domain must be a share between 0 and 1, got {domain!r}")
    data_dir = Path(data_dir)
    params = _params(seed, sizes, float(domain))
    record = data_dir / "build.json"
    outputs = [data_dir / "raw" / f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("en", "zh")]
    outputs += [data_dir / "purity.en", data_dir / "references.jsonl", data_dir / "lexicon.jsonl"]
    if record.is_file() and all(p.is_file() for p in outputs):
        try:
            old = read_json(record)
        except UserError:
            old = None
        if isinstance(old, dict) and old.get("params") == params:
            logger.info("demo data in %s is up to date", data_dir)
            return old

    start = time.perf_counter()
    logger.info("building the demo corpus in %s (seed %d)", data_dir, seed)
    built = generate(seed, **sizes, domain=float(domain))
    for split in ("train", "valid", "test"):
        pairs = built[split]
        write_text_atomic(data_dir / "raw" / f"{split}.en", "".join(en + "\n" for en, _ in pairs))
        write_text_atomic(data_dir / "raw" / f"{split}.zh", "".join(zh + "\n" for _, zh in pairs))
    write_text_atomic(data_dir / "purity.en", "".join(s + "\n" for s in built["purity"]))
    write_jsonl_atomic(data_dir / "references.jsonl", ({"en": en, "zh": zh} for en, zh in built["references"].items()))
    write_jsonl_atomic(data_dir / "lexicon.jsonl", lexicon_groups())
    en_vocab = {t for split in ("train", "valid", "test") for en, _ in built[split] for t in en.split()}
    zh_chars = {c for split in ("train", "valid", "test") for _, zh in built[split] for c in zh}
    result = {
        "params": params,
        "counts": {
            "train": len(built["train"]), "train_sentences": len(built["train"]) - built["fragments"],
            "train_fragments": built["fragments"], "valid": len(built["valid"]), "test": len(built["test"]),
            "purity": len(built["purity"]), "references": len(built["references"]),
            "english_words": len(en_vocab), "chinese_characters": len(zh_chars),
        },
        "seconds": round(time.perf_counter() - start, 2),
    }
    write_json_atomic(record, result)   # last: its presence means the build is complete
    logger.info("demo corpus: %s", result["counts"])
    return result
