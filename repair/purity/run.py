"""The Purity stage: parse, build (container, RTI) pairs, translate every text once, report
the pairs whose translations disagree, at every threshold, into one run folder."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from tqdm import tqdm

from repair.errors import UserError
from repair.fileio import write_json_atomic, write_jsonl_atomic, write_text_atomic
from repair.purity.check import DEFAULT_STOP_TOKENS, UNITS, has_latin, missing_tokens
from repair.purity.parsers.base import Parser
from repair.purity.rti import TreeSyntaxError, extract, load_stopwords
from repair.purity.translators import MissingTranslations, Translator

log = logging.getLogger(__name__)

TO_TRANSLATE = "to_translate.txt"
TRANSLATIONS = "translations.tsv"  # every text and its translation, as translator=table reads them


def issue_id(container: str, rti: str) -> str:
    """12 hex characters, the same for the same pair in every run."""
    return hashlib.sha1(f"{container}\t{rti}".encode("utf-8")).hexdigest()[:12]


def _stopword_set(stopwords: str | Path | Iterable[str] | None) -> frozenset[str]:
    if stopwords is None or isinstance(stopwords, (str, Path)):
        return load_stopwords(str(stopwords) if stopwords is not None else None)
    return frozenset(w.lower() for w in stopwords)


def _check_settings(thresholds: Sequence[int], unit: str) -> list[int]:
    if unit not in UNITS:
        raise UserError(f"unit={unit!r}: choose one of {', '.join(UNITS)}")
    try:
        values = sorted({int(d) for d in thresholds})
    except (TypeError, ValueError):
        raise UserError(f"thresholds={list(thresholds)!r}: give whole numbers, e.g. thresholds=[0,1,2,3]") from None
    if not values or values[0] < 0:
        raise UserError(f"thresholds={list(thresholds)!r}: give one or more whole numbers >= 0")
    return values


def run_purity(
    sentences: Sequence[str],
    parser: Parser | None,
    translator: Translator,
    out_dir: str | Path,
    thresholds: Sequence[int] = (0, 1, 2, 3),
    unit: str = "char",
    skip_latin: bool = True,
    max_words: int = 10,
    min_content_words: int = 3,
    max_sentence_words: int = 200,
    stopwords: str | Path | Iterable[str] | None = None,
    trees: Sequence[str] | None = None,
    stop_tokens: Iterable[str] = DEFAULT_STOP_TOKENS,
    init_seconds: float = 0.0,
    source: str = "input",
    lines: Sequence[int] | None = None,
) -> dict:
    """Test `translator` on `sentences` (lines of an input; blank ones are skipped and counted).

    trees: one bracketed tree per entry of `sentences`, to use instead of `parser`.
    stopwords: a file of English stop words, a collection of them, or None for NLTK's list.
    init_seconds: the caller's time to build parser and translator (Table V's first column).
    source, lines: the input's name and each sentence's line number, for messages
    (`input.txt:7: ...`); lines default to 1, 2, ...

    Writes pairs.jsonl, trees.txt, then translations.tsv, issues.jsonl, issues.md and summary.json into
    `out_dir`, and returns the summary. When the translator lacks translations for some texts
    (a TableTranslator), writes them to `out_dir/to_translate.txt` and raises UserError.
    """
    thresholds = _check_settings(thresholds, unit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stop_words = _stopword_set(stopwords)
    stop_tokens = frozenset(stop_tokens)
    if trees is not None and len(trees) != len(sentences):
        raise UserError(f"{len(trees)} trees for {len(sentences)} sentences; give one tree per sentence")
    started = time.perf_counter()

    # ---- pair construction: pick the sentences, parse, extract
    kept: list[tuple[int, str]] = []
    kept_trees: list[str] = []
    blank = too_long = 0
    for index, line in enumerate(sentences):
        number = lines[index] if lines is not None else index + 1
        sentence = " ".join(line.split()) if "\t" in line else line.strip()
        if not sentence:
            blank += 1
            continue
        words = len(sentence.split())
        if words > max_sentence_words:
            too_long += 1
            log.warning("%s:%d: sentence of %d words skipped (max_sentence_words=%d)",
                        source, number, words, max_sentence_words)
            continue
        kept.append((number, sentence))
        if trees is not None:
            kept_trees.append(trees[index])
    if blank:
        log.info("%s: %d blank line(s) skipped", source, blank)
    if not kept:
        raise UserError(f"{source}: no sentences to test ({blank} blank, {too_long} over "
                        f"{max_sentence_words} words)")
    if trees is None:
        if parser is None:
            raise UserError("no parser and no trees: give one of them")
        log.info("parsing %d sentences with %s", len(kept), parser.name)
        kept_trees = parser.parse([s for _, s in kept])
        if len(kept_trees) != len(kept):
            raise RuntimeError(f"parser {parser.name} returned {len(kept_trees)} trees for {len(kept)} sentences")

    pair_sentence: dict[tuple[str, str], str] = {}
    rtis: set[str] = set()
    texts: dict[str, None] = {}  # every text to translate, in first-seen order
    for (number, sentence), tree in tqdm(list(zip(kept, kept_trees)), desc="pairs", unit="sent", disable=None):
        try:
            found = extract(tree, sentence, max_words=max_words, min_content_words=min_content_words,
                            stopwords=stop_words)
        except TreeSyntaxError as e:
            raise UserError(f"{source}:{number}: the tree for this sentence cannot be read ({e}): {tree[:120]!r}") from None
        texts.setdefault(found.sentence)
        rtis.update(found.rtis)
        for pair in found.pairs:
            if pair not in pair_sentence:
                pair_sentence[pair] = found.sentence
                texts.setdefault(pair[0])
                texts.setdefault(pair[1])
    pairs = list(pair_sentence)
    write_text_atomic(out / "trees.txt", "".join(" ".join(t.split()) + "\n" for t in kept_trees))
    write_jsonl_atomic(out / "pairs.jsonl", ({"id": issue_id(c, r), "sentence": pair_sentence[(c, r)],
                                              "container": c, "rti": r} for c, r in pairs))
    pair_seconds = time.perf_counter() - started
    log.info("%d sentences -> %d RTIs, %d pairs, %d texts to translate (%.2f s)",
             len(kept), len(rtis), len(pairs), len(texts), pair_seconds)

    # ---- translation: every unique text once, in one batch
    text_list = list(texts)
    characters = sum(len(t) for t in text_list)
    started = time.perf_counter()
    log.info("translating %d texts (%d characters) with %s", len(text_list), characters, translator.name)
    try:
        translated = translator.translate(text_list)
    except MissingTranslations as e:
        path = out / TO_TRANSLATE
        write_text_atomic(path, "".join(t + "\n" for t in e.missing))
        raise UserError(f"{e}. Wrote the {len(e.missing)} missing texts, one per line, to {path}: "
                        "translate them with any system, add the rows source<TAB>translation to a TSV file "
                        "and run again with translator.table=FILE.tsv") from None
    if len(translated) != len(text_list):
        raise RuntimeError(f"translator {translator.name} returned {len(translated)} translations "
                           f"for {len(text_list)} texts")
    translation = dict(zip(text_list, translated))
    translate_seconds = time.perf_counter() - started
    write_text_atomic(out / TRANSLATIONS, "".join(f"{t}\t{' '.join(translation[t].split())}\n" for t in text_list))

    # ---- detection: one distance per pair, swept over every threshold
    started = time.perf_counter()
    lowest = thresholds[0]
    distances: list[int] = []
    issues: list[dict] = []
    skipped = 0
    for container, rti in tqdm(pairs, desc="check", unit="pair", disable=None):
        c_tr, r_tr = translation[container], translation[rti]
        if skip_latin and (has_latin(c_tr) or has_latin(r_tr)):
            skipped += 1
            continue
        missing = missing_tokens(r_tr, c_tr, unit, stop_tokens)
        distances.append(len(missing))
        if len(missing) > lowest:
            issues.append({"id": issue_id(container, rti), "sentence": pair_sentence[(container, rti)],
                           "container": container, "container_translation": c_tr,
                           "rti": rti, "rti_translation": r_tr,
                           "distance": len(missing), "missing": missing})
    by_distance = Counter(distances)
    per_threshold = {str(d): sum(n for dist, n in by_distance.items() if dist > d) for d in thresholds}
    detect_seconds = time.perf_counter() - started

    summary = {
        "sentences": len(kept),
        "blank_lines_skipped": blank,
        "long_sentences_skipped": too_long,
        "rtis": len(rtis),
        "pairs": len(pairs),
        "texts": len(text_list),
        "characters_translated": characters,
        "skipped_pairs": skipped,
        "issues": per_threshold,
        "seconds": {
            "initialization": round(init_seconds, 3),
            "pair_construction": round(pair_seconds, 3),
            "translation": round(translate_seconds, 3),
            "detection": round(detect_seconds, 3),
            "total": round(init_seconds + pair_seconds + translate_seconds + detect_seconds, 3),
        },
        "settings": {
            "parser": parser.name if parser is not None and trees is None else "trees",
            "translator": translator.name,
            "thresholds": thresholds,
            "unit": unit,
            "skip_latin": skip_latin,
            "max_words": max_words,
            "min_content_words": min_content_words,
            "max_sentence_words": max_sentence_words,
            "stopwords": len(stop_words),
            "stop_tokens": sorted(stop_tokens),
        },
    }
    write_jsonl_atomic(out / "issues.jsonl", issues)
    write_text_atomic(out / "issues.md", issues_markdown(issues, translation, lowest, summary))
    write_json_atomic(out / "summary.json", summary)
    (out / TO_TRANSLATE).unlink(missing_ok=True)  # left by an earlier run that lacked translations
    log.info("%d issues at distance > %d (%s); %d pairs skipped for Latin letters; wrote %s",
             len(issues), lowest, ", ".join(f"d>{d}: {n}" for d, n in per_threshold.items()), skipped, out)
    return summary


def issues_markdown(issues: list[dict], translation: dict[str, str], lowest: int, summary: dict) -> str:
    """The issues for a person to read, grouped by the sentence they came from."""
    lines = ["# Purity issues", "",
             f"{len(issues)} suspicious pairs at distance > {lowest} from {summary['sentences']} sentences "
             f"({summary['pairs']} pairs, {summary['skipped_pairs']} skipped; "
             f"parser {summary['settings']['parser']}, translator {summary['settings']['translator']}, "
             f"unit {summary['settings']['unit']}).", ""]
    by_sentence: dict[str, list[dict]] = {}
    for issue in issues:
        by_sentence.setdefault(issue["sentence"], []).append(issue)
    for n, (sentence, group) in enumerate(by_sentence.items(), 1):
        lines += [f"## {n}. {sentence}", "", f"> {translation.get(sentence, '')}", ""]
        for issue in group:
            lines += [
                f"- `{issue['id']}` distance **{issue['distance']}**, missing: {' '.join(issue['missing'])}",
                f"  - RTI: {issue['rti']}",
                f"    → {issue['rti_translation']}",
                f"  - in: {issue['container']}",
                f"    → {issue['container_translation']}",
            ]
        lines.append("")
    return "\n".join(lines)
