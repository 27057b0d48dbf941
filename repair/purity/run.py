"""The Purity stage: pick and parse the sentences, let each test relation propose its cases, translate every
text once, report the cases whose translations disagree, at every threshold, into one run folder."""

from __future__ import annotations

import logging
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from tqdm import tqdm

from repair.errors import UserError
from repair.fileio import write_json_atomic, write_jsonl_atomic, write_text_atomic
from repair.issues import make_issue
from repair.purity.check import DEFAULT_STOP_TOKENS, UNITS, has_latin
from repair.purity.parsers.base import Parser
from repair.purity.relations import Case, Parsed, Relation, describe, make_relations
from repair.purity.translators import MissingTranslations, Translator

log = logging.getLogger(__name__)

TO_TRANSLATE = "to_translate.txt"
TRANSLATIONS = "translations.tsv"  # every text and its translation, as translator=table reads them


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


def as_sentence(line: str) -> str:
    """An input line as the sentence tested (tabs as spaces, ends stripped)."""
    return " ".join(line.split()) if "\t" in line else line.strip()


def select_sentences(sentences: Sequence[str], lines: Sequence[int] | None, max_sentence_words: int,
                     source: str) -> tuple[list[tuple[int, str]], list[int], dict]:
    """(line number, sentence) of the sentences to test, their indexes in `sentences`, and what was skipped."""
    kept: list[tuple[int, str]] = []
    indexes: list[int] = []
    blank = too_long = 0
    for index, line in enumerate(sentences):
        number = lines[index] if lines is not None else index + 1
        sentence = as_sentence(line)
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
        indexes.append(index)
    if blank:
        log.info("%s: %d blank line(s) skipped", source, blank)
    if not kept:
        raise UserError(f"{source}: no sentences to test ({blank} blank, {too_long} over "
                        f"{max_sentence_words} words)")
    return kept, indexes, {"blank_lines_skipped": blank, "long_sentences_skipped": too_long}


def parse_sentences(kept: list[tuple[int, str]], parser: Parser | None, trees: Sequence[str] | None,
                    source: str) -> list[Parsed]:
    """Each kept sentence with its tree: from `trees` (one per kept sentence) or from the parser."""
    if trees is None:
        if parser is None:
            raise UserError("no parser and no trees: give one of them")
        log.info("parsing %d sentences with %s", len(kept), parser.name)
        trees = parser.parse([s for _, s in kept])
        if len(trees) != len(kept):
            raise RuntimeError(f"parser {parser.name} returned {len(trees)} trees for {len(kept)} sentences")
    return [Parsed(f"{source}:{number}", sentence, tree) for (number, sentence), tree in zip(kept, trees)]


def build_cases(relations: Sequence[Relation], parsed: list[Parsed]) -> tuple[list[Case], list[str]]:
    """Every relation's cases, and every text they need translated, each once, in first-seen order."""
    cases: list[Case] = []
    for relation in relations:
        cases.extend(relation.cases(parsed))
    by_sentence: dict[str, list[Case]] = {}
    for case in cases:
        by_sentence.setdefault(case.sentence, []).append(case)
    texts: dict[str, None] = {}
    for p in parsed:  # a sentence, then the texts of its cases
        texts.setdefault(p.sentence)
        for case in by_sentence.pop(p.sentence, ()):
            texts.update(dict.fromkeys(case.texts))
    for rest in by_sentence.values():
        for case in rest:
            texts.update(dict.fromkeys(case.texts))
    return cases, list(texts)


def begin_sentences(translator: Translator, sentences: Sequence[str], max_sentence_words: int):
    """The sentences to test, most of the texts' length, begun in the background while their pairs are built
    (Translator.begin): (the sentences, a function that waits for their translations), or None."""
    early = list(dict.fromkeys(s for s in map(as_sentence, sentences) if s and len(s.split()) <= max_sentence_words))
    wait = translator.begin(early) if early else None
    return (early, wait) if wait else None


@contextmanager
def settled(begun):
    """An error in the block waits for the sentences begun in the background (begin_sentences) before it goes on:
    a process that ends while CTranslate2's threads still translate is aborted ("terminate called without an
    active exception") instead of printing the error and exiting."""
    try:
        yield
    except BaseException:
        if begun:
            try:
                begun[1]()
            except BaseException:  # noqa: BLE001 - the block's own error is the one to report
                pass
        raise


def translate_texts(translator: Translator, texts: list[str], out: Path, begun=None) -> dict[str, str]:
    """{text: translation}, one batch; a table translator's missing texts go to out/to_translate.txt. `begun`:
    what begin_sentences started (those texts' translations are waited for, the rest translated)."""
    wanted = texts
    if begun:  # the rest is searched while the begun sentences' last searches run (one queue of the translator's)
        early = set(begun[0])
        texts = [t for t in texts if t not in early]
    log.info("translating %d texts (%d characters) with %s", len(texts), sum(map(len, texts)), translator.name)
    try:
        with settled(begun):
            translated = translator.translate(texts)
    except MissingTranslations as e:
        path = out / TO_TRANSLATE
        write_text_atomic(path, "".join(t + "\n" for t in e.missing))
        raise UserError(f"{e}. Wrote the {len(e.missing)} missing texts, one per line, to {path}: "
                        "translate them with any system, add the rows source<TAB>translation to a TSV file "
                        "and run again with translator.table=FILE.tsv") from None
    if len(translated) != len(texts):
        raise RuntimeError(f"translator {translator.name} returned {len(translated)} translations "
                           f"for {len(texts)} texts")
    done: dict[str, str] = {}
    if begun:
        early, wait = begun
        wanted = set(wanted)
        done = {t: x for t, x in zip(early, wait()) if t in wanted}
        log.info("%d sentences translated while their pairs were built", len(done))
    return {**dict(zip(texts, translated)), **done}


def detect(relations: Sequence[Relation], cases: list[Case], translation: dict[str, str], thresholds: list[int],
           skip_latin: bool) -> tuple[list[dict], dict]:
    """Issues at distance > the lowest threshold, and per relation: cases, skipped, issues at each threshold."""
    by_name = {r.name: r for r in relations}
    distances: dict[str, Counter] = {r.name: Counter() for r in relations}
    figures = {r.name: {"cases": 0, "skipped": 0} for r in relations}
    issues: list[dict] = []
    for case in tqdm(cases, desc="check", unit="case", disable=None):
        f = figures[case.relation]
        f["cases"] += 1
        if skip_latin and any(has_latin(translation[text]) for text in case.texts):  # the sides and what judges them
            f["skipped"] += 1
            continue
        check = by_name[case.relation].check(case, translation)
        distances[case.relation][check.distance] += 1
        if check.distance > thresholds[0]:
            issues.append(make_issue(case.relation, case.sentence,
                                     [(role, source, translation[source]) for role, source in case.sides],
                                     check.distance, check.evidence, **case.info))
    for relation in relations:
        dist = distances[relation.name]
        figures[relation.name]["issues"] = {str(d): sum(n for k, n in dist.items() if k > d) for d in thresholds}
        figures[relation.name].update(relation.counts())
    return issues, figures


def suggest_corrections(issues: list[dict], cases: list[Case], relations: Sequence[Relation],
                        translation: dict[str, str], translator: Translator, suggest: Mapping | None) -> dict | None:
    """Suggested corrections for every issue (in place), as `suggest` asks; their figures, or None when not asked."""
    options = dict(suggest or {})
    if not suggest or not options.pop("enabled", True):
        return None
    from repair.purity.suggest import add_suggestions

    by_id = {(c.relation, c.id): c for c in cases}
    return add_suggestions(issues, {i["id"]: by_id[(i["relation"], i["id"])] for i in issues},
                           {r.name: r for r in relations}, translation, translator, **options)


def summarize(sentences: int, skipped_lines: dict, cases: list[Case], texts: list[str], by_relation: dict,
              seconds: dict, relations: Sequence[Relation], settings: dict) -> dict:
    """summary.json: the paper's Table III and V figures, per relation and in all, and the settings."""
    return {
        "sentences": sentences,
        **skipped_lines,
        "rtis": by_relation.get("rti", {}).get("rtis", 0),
        "pairs": len(cases),
        "texts": len(texts),
        "characters_translated": sum(len(t) for t in texts),
        "skipped_pairs": sum(f["skipped"] for f in by_relation.values()),
        "issues": {str(d): sum(f["issues"][str(d)] for f in by_relation.values()) for d in settings["thresholds"]},
        "by_relation": by_relation,
        "seconds": {**{k: round(v, 3) for k, v in seconds.items()}, "total": round(sum(seconds.values()), 3)},
        "settings": {**settings, "relations": [r.name for r in relations],
                     "stopwords": len(getattr(relations[0], "stopwords", ()))},
    }


def build_relations(relations: Sequence[str | Relation], shared: Mapping,
                    relation_options: Mapping[str, Mapping] | None) -> list[Relation]:
    """The relations to run, in order: a name built by make_relations from the shared settings and its
    options block, a Relation object as it is."""
    names = [r for r in relations if isinstance(r, str)]
    built = iter(make_relations(names, shared, relation_options)) if names else iter(())
    return [next(built) if isinstance(r, str) else r for r in relations]


def run_purity(
    sentences: Sequence[str],
    parser: Parser | None,
    translator: Translator,
    out_dir: str | Path,
    thresholds: Sequence[int] = (0, 1, 2, 3),
    unit: str = "char",
    skip_latin: bool = True,
    max_sentence_words: int = 200,
    stopwords: str | Path | Iterable[str] | None = None,
    trees: Sequence[str] | None = None,
    stop_tokens: Iterable[str] = DEFAULT_STOP_TOKENS,
    init_seconds: float = 0.0,
    source: str = "input",
    lines: Sequence[int] | None = None,
    relations: Sequence[str | Relation] = ("rti",),
    relation_options: Mapping[str, Mapping] | None = None,
    suggest: Mapping | None = None,
    begun=None,
) -> dict:
    """Test `translator` on `sentences` (lines of an input; blank ones are skipped and counted).

    relations: names (built with `make_relations`, each from `relation_options[name]`, e.g. RTI's
    {"max_words": 10, "min_content_words": 3}) or Relation objects; every text of every relation is translated once.
    trees: one bracketed tree per entry of `sentences`, to use instead of `parser`.
    suggest: {"beam": ...} to give every issue suggested corrections after detection (repair.purity.suggest;
    their time is seconds["suggestions"]); None or {"enabled": False}: none.
    stopwords: a file of English stop words, a collection of them, or None for NLTK's list.
    init_seconds: the caller's time to build parser and translator (Table V's first column).
    begun: begin_sentences' answer where the caller began the sentences already (None: they are begun here).
    source, lines: the input's name and each sentence's line number, for messages
    (`input.txt:7: ...`); lines default to 1, 2, ...

    Writes trees.txt, pairs.jsonl (every case), then translations.tsv, issues.jsonl, issues.md and
    summary.json into `out_dir`, and returns the summary. When the translator lacks translations for some
    texts (a TableTranslator), writes them to `out_dir/to_translate.txt` and raises UserError.
    """
    thresholds = _check_settings(thresholds, unit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if trees is not None and len(trees) != len(sentences):
        raise UserError(f"{len(trees)} trees for {len(sentences)} sentences; give one tree per sentence")
    shared = {"unit": unit, "stop_tokens": tuple(stop_tokens), "stopwords": stopwords}
    relations = build_relations(relations, shared, relation_options)

    started = time.perf_counter()
    if begun is None:
        begun = begin_sentences(translator, sentences, max_sentence_words)
    with settled(begun):
        kept, skipped_lines, cases, text_list = pair_up(sentences, lines, trees, parser, relations, out,
                                                        max_sentence_words=max_sentence_words, source=source)
    pair_seconds = time.perf_counter() - started

    started = time.perf_counter()
    translation = translate_texts(translator, text_list, out, begun)
    translate_seconds = time.perf_counter() - started
    write_text_atomic(out / TRANSLATIONS, "".join(f"{t}\t{' '.join(translation[t].split())}\n" for t in text_list))

    started = time.perf_counter()
    issues, by_relation = detect(relations, cases, translation, thresholds, skip_latin)
    detect_seconds = time.perf_counter() - started

    seconds = {"initialization": init_seconds, "pair_construction": pair_seconds, "translation": translate_seconds,
               "detection": detect_seconds}
    suggested = suggest_corrections(issues, cases, relations, translation, translator, suggest)
    if suggested is not None and "skipped" not in suggested:
        seconds["suggestions"] = suggested["seconds"]
    summary = summarize(len(kept), skipped_lines, cases, text_list, by_relation, seconds, relations, {
        "parser": parser.name if parser is not None and trees is None else "trees",
        "translator": translator.name, "thresholds": thresholds, "unit": unit, "skip_latin": skip_latin,
        **rti_limits(relations), "max_sentence_words": max_sentence_words,
        "stop_tokens": sorted(shared["stop_tokens"]), **{name: dict(o) for name, o in (relation_options or {}).items()}})
    # after translating: what the translator measured and chose (CTranslate2: its compute type and fidelity)
    summary["translator"] = translator.describe()
    if trees is None and getattr(parser, "process", None):
        summary["parser_process"] = parser.process
    if suggested is not None:
        summary["suggestions"] = suggested
    write_results(out, issues, translation, thresholds, summary)
    return summary


def pair_up(sentences, lines, trees, parser, relations, out: Path, *, max_sentence_words: int, source: str):
    """The sentences kept, the lines skipped, the cases and the texts to translate; writes trees.txt and
    pairs.jsonl."""
    started = time.perf_counter()
    kept, indexes, skipped_lines = select_sentences(sentences, lines, max_sentence_words, source)
    parsed = parse_sentences(kept, parser, [trees[i] for i in indexes] if trees is not None else None, source)
    cases, text_list = build_cases(relations, parsed)
    write_text_atomic(out / "trees.txt", "".join(" ".join(p.tree.split()) + "\n" for p in parsed))
    write_jsonl_atomic(out / "pairs.jsonl", ({"id": c.id, "relation": c.relation, "sentence": c.sentence,
                                              "sides": [{"role": r, "source": s} for r, s in c.sides]}
                                             for c in cases))
    log.info("%d sentences -> %d cases (%s), %d texts to translate (%.2f s)", len(kept), len(cases),
             ", ".join(f"{r.name}: {sum(c.relation == r.name for c in cases)}" for r in relations),
             len(text_list), time.perf_counter() - started)
    return kept, skipped_lines, cases, text_list


def write_results(out: Path, issues: list[dict], translation: dict, thresholds: list, summary: dict) -> None:
    """issues.jsonl, issues.md and summary.json (an earlier run's to_translate.txt removed)."""
    write_jsonl_atomic(out / "issues.jsonl", issues)
    write_text_atomic(out / "issues.md", issues_markdown(issues, translation, thresholds[0], summary))
    write_json_atomic(out / "summary.json", summary)
    (out / TO_TRANSLATE).unlink(missing_ok=True)  # left by an earlier run that lacked translations
    log.info("%d issues at distance > %d (%s); %d cases skipped for Latin letters; wrote %s",
             len(issues), thresholds[0], ", ".join(f"d>{d}: {n}" for d, n in summary["issues"].items()),
             summary["skipped_pairs"], out)


def rti_limits(relations: Sequence[Relation]) -> dict:
    """The RTI relation's size limits for the summary's settings (empty when RTI did not run)."""
    rti = next((r for r in relations if r.name == "rti"), None)
    return {"max_words": rti.max_words, "min_content_words": rti.min_content_words} if rti is not None else {}


def issues_markdown(issues: list[dict], translation: dict[str, str], lowest: int, summary: dict) -> str:
    """The issues for a person to read, grouped by the sentence they came from."""
    settings = summary["settings"]
    lines = ["# Purity issues", "",
             f"{len(issues)} suspicious cases at distance > {lowest} from {summary['sentences']} sentences "
             f"({summary['pairs']} cases, {summary['skipped_pairs']} skipped; relations {', '.join(settings['relations'])}; "
             f"parser {settings['parser']}, translator {settings['translator']}, unit {settings['unit']}).", ""]
    by_sentence: dict[str, list[dict]] = {}
    for issue in issues:
        by_sentence.setdefault(issue["sentence"], []).append(issue)
    for n, (sentence, group) in enumerate(by_sentence.items(), 1):
        lines += [f"## {n}. {sentence}", "", f"> {translation.get(sentence, '')}", ""]
        for issue in group:
            about = describe(issue["relation"])
            labels = {r["role"]: r["label"] for r in about["roles"]}
            lines.append(f"- `{issue['id']}` {issue['relation']}, distance **{issue['distance']}**; "
                         f"{about['evidence'].rstrip(':').lower()}: {' '.join(issue['evidence'])}")
            for s in issue["sides"]:
                lines += [f"  - {labels.get(s['role'], s['role'])}: {s['source']}", f"    → {s['translation']}"]
            for x in issue.get("suggestions") or ():
                lines.append(f"  - suggested for the {labels.get(x['role'], x['role'])}: {x['text']} "
                             f"(score {x['score']:.2f})")
        lines.append("")
    return "\n".join(lines)
