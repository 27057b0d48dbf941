"""Review by reference translations: a flagged translation is wrong when it differs from its source's reference."""

from __future__ import annotations

import difflib
import logging
import os
from collections import Counter

from repair.issues import best_suggestion
from repair.review.store import CorrectionStore
from repair.stats import edit_distance, same_translation, squeeze

log = logging.getLogger(__name__)


def guess_kind(translation: str, reference: str) -> str:
    """The kind of error the difference suggests (whitespace aside).

    Only characters of the reference missing: under-translation; only extra characters: over-translation;
    the same characters in another order: incorrect modification; anything else: word/phrase mistranslation.
    """
    a, b = squeeze(translation), squeeze(reference)
    ops = {tag for tag, *_ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if tag != "equal"}
    if ops == {"insert"}:
        return "under-translation"
    if ops == {"delete"}:
        return "over-translation"
    if Counter(a) == Counter(b):
        return "incorrect modification"
    return "word/phrase mistranslation"


def phrase_sides(issues: list[dict], references: dict[str, str]) -> list[tuple[str, str, str]]:
    """(sentence, its reference, phrase) for each side cut from a sentence with a reference (RTI's container and
    RTI, not the sentence itself), each once, in issue order: what a projection gives a reference to."""
    out: dict[tuple[str, str, str], None] = {}
    for issue in issues:
        sentence = issue.get("sentence")
        reference = references.get(sentence) if sentence else None
        if not reference or not reference.strip():
            continue
        for s in issue["sides"]:
            if squeeze(s["source"]) != squeeze(sentence):
                out[(sentence, reference, s["source"])] = None
    return list(out)


def side_references(issue: dict, references: dict[str, str], projected: dict | None,
                    threshold: float) -> tuple[dict, dict]:
    """The reference of each side of `issue` (None where it has none) and, per role whose reference is a
    projection of its sentence's reference (the side has none of its own and the projection's confidence is
    `threshold` or more), that projection. `projected`: {(sentence, phrase): Projection}."""
    refs, via = {}, {}
    for s in issue["sides"]:
        ref = references.get(s["source"])
        if (ref is None or not ref.strip()) and projected:
            p = projected.get((issue.get("sentence"), s["source"]))
            if p is not None and p.text and p.confidence >= threshold:
                ref, via[s["role"]] = p.text, p
        refs[s["role"]] = ref
    return refs, via


def projection_agreement(issues: list[dict], references: dict[str, str], projected: dict,
                         threshold: float = 0.5) -> dict:
    """How often a phrase side's projection is its own reference, over the phrase sides that have one (the demo's
    every phrase): `sides`, `projected` (a projection found), `equal` (whitespace aside), and per confidence level
    (`threshold`, 0.8, 1) the projections that reach it and how many of them are equal."""
    rows = []
    for sentence, _, phrase in phrase_sides(issues, references):
        own = references.get(phrase)
        if own and own.strip():
            p = projected.get((sentence, phrase))
            rows.append((p.confidence if p else None, p is not None and squeeze(p.text) == squeeze(own)))
    found = [r for r in rows if r[0] is not None]
    equal = sum(ok for _, ok in rows)
    return {"sides": len(rows), "projected": len(found), "equal": equal, "threshold": threshold,
            "equal_share": round(equal / len(rows), 4) if rows else None,
            "by_confidence": {f">={t}": {"sides": sum(c >= t for c, _ in found),
                                          "equal": sum(ok for c, ok in found if c >= t)}
                              for t in sorted({threshold, 0.8, 1.0})}}


def oracle_review(issues: list[dict], references: dict[str, str], review_dir: str | os.PathLike,
                  memory=None, projected: dict | None = None, threshold: float = 0.5) -> dict:
    """Judge the issues by the references of their sides' sources; return review stats.

    A side whose source has a reference is judged against it (wrong where it differs, whitespace aside) and a wrong
    one corrected with it; a side without one is not judged, never taken as right. An issue with a wrong judged side
    is recorded with its corrections; one whose every side was judged right, as no error; one with a side not judged
    and no wrong side, not at all: `not_judged` counts those issues (`not_judged_ids`), `sides_not_judged` the sides
    without a reference, and precision counts the judged issues only. A real corpus has references for its
    sentences, not for the phrases Purity cuts from them: its issues are judged by their sentence side.
    Running it again on the same folder adds nothing: equal judgments are not repeated.
    `memory`: a repair.review.memory.MemorySuggester whose memory learns each correction as it is made (its
    suggestions go before the issue's own, as the page offers them).
    `projected`: {(sentence, phrase): repair.review.align.Projection}: a phrase side with no reference of its own
    is judged and corrected by its projection when its confidence is `threshold` or more (`sides_by_projection`;
    the correction records the projection and its confidence under `reference`).
    """
    with CorrectionStore(review_dir, issues) as store:
        return _oracle_review(store, issues, references, memory, projected or {}, threshold)


def side_suggestions(issue: dict, memory) -> dict[str, dict | None]:
    """Per role of the issue, the suggestion the page offers first: the review memory's, else the issue's best."""
    remembered = memory.suggest([(s["source"], s["translation"]) for s in issue["sides"]]) if memory else []
    return {s["role"]: (remembered[k] if remembered and remembered[k] else best_suggestion(issue, s["role"]))
            for k, s in enumerate(issue["sides"])}


def _oracle_review(store: CorrectionStore, issues: list[dict], references: dict[str, str], memory,
                   projected: dict, threshold: float) -> dict:
    items, not_judged, sides_not_judged, by_projection = [], [], 0, 0
    if memory:
        memory.know([s["source"] for i in issues for s in i["sides"]])
    corrected: dict[str, str] = {}
    for issue in issues:
        all_refs, via = side_references(issue, references, projected, threshold)
        refs = {r: v for r, v in all_refs.items() if v is not None and v.strip()}
        sides_not_judged += len(all_refs) - len(refs)
        by_projection += len(via)
        model = {s["role"]: s["translation"] for s in issue["sides"]}
        wrong = [r for r in model if r in refs and not same_translation(model[r], refs[r])]
        if not wrong and len(refs) < len(all_refs):
            not_judged.append(issue["id"])
            continue
        kinds = {r: guess_kind(model[r], refs[r]) for r in wrong}
        corrections = {r: refs[r].strip() for r in wrong}
        how = {}
        sources = {s["role"]: s["source"] for s in issue["sides"]}
        offers = side_suggestions(issue, memory) if wrong else {}
        for r in wrong:  # how a person at the page would have made it (as suggestion_figures counts it)
            best = offers[r]
            earlier = corrected.get(sources[r])
            start = earlier if earlier is not None else best["text"] if best else model[r]
            typed = edit_distance(start, corrections[r])
            how[r] = {"origin": "suggestion" if best and earlier is None and typed == 0 else "edited", "typed": typed}
            if r in via:
                how[r]["reference"] = {"from": "projection", "confidence": via[r].confidence}
            corrected[sources[r]] = corrections[r]
            if memory:
                memory.memory.learn(sources[r], model[r], corrections[r])
        items.append((issue["id"], wrong, kinds[wrong[0]] if wrong else None, corrections, kinds, how))
    store.record_many(items)
    if sides_not_judged:
        log.warning("oracle review: %d side(s) have no reference and were not judged; %d of %d issue(s) not judged "
                    "(no wrong side with a reference)", sides_not_judged, len(not_judged), len(issues))
    stats = store.stats()
    return {
        **stats,
        "not_judged": len(not_judged),
        "not_judged_ids": not_judged,
        "sides_not_judged": sides_not_judged,
        "sides_by_projection": by_projection,
        "corrections_by_projection": sum("reference" in c for c in store.corrections()),
        "corrections": len(store.corrections()),
    }


def suggestion_figures(issues: list[dict], references: dict[str, str], memory=None, projected: dict | None = None,
                       threshold: float = 0.5) -> dict:
    """What the suggestions save a reviewer, judged by the references, over the sides whose translation differs
    from its reference (the sides a review marks wrong): how many had a suggestion (`offered`), how many
    suggestions are the reference itself (`accepted` as they are), and the characters to edit to reach the
    reference (edit distance, whitespace aside) from what the page offers: `chars_to_edit_with` from the best
    suggestion (else the pre-fill), `chars_to_edit_without` from the pre-fill alone, as the page makes it: an
    earlier correction of the same source in review order, else the projection of the correction of the sentence
    the side was cut from, in an earlier issue or in this one (the page projects a sentence's correction onto the
    issue's phrase sides as soon as it is made: the sentence side is corrected first; `projected`: {(sentence,
    phrase): Projection}, the oracle's correction being the reference), else the model's translation. Where an earlier correction or a projection pre-fills the box,
    that is what the reviewer starts from in both counts. A phrase side without a reference of its own is judged by
    its projection as oracle_review judges it (`by_projection` of the wrong sides). `projected_prefills`: the sides
    a projection pre-filled, `projected_equal` of them the reference as it is, `chars_to_edit_without_projection`:
    the pre-fill's characters had the projections not been made."""
    f = dict.fromkeys(("wrong_sides", "offered", "accepted", "with", "without", "bare", "remembered", "remembered_ok",
                       "by_projection", "projected_prefills", "projected_equal"), 0)
    corrected: dict[str, str] = {}
    projected = projected or {}
    if memory:
        memory.know([s["source"] for i in issues for s in i["sides"]])
    for issue in issues:
        refs, via = side_references(issue, references, projected, threshold)
        if not any(refs[s["role"]] and squeeze(s["translation"]) != squeeze(refs[s["role"]]) for s in issue["sides"]):
            continue  # only the sides a review marks wrong: judged, and unlike their reference
        offers, made = side_suggestions(issue, memory), {}
        sentence = issue.get("sentence")
        for s in sorted(issue["sides"], key=lambda side: side["source"] != sentence):  # the sentence first
            ref = (refs[s["role"]] or "").strip()
            if not ref or squeeze(s["translation"]) == squeeze(ref):
                continue
            f["wrong_sides"] += 1
            f["by_projection"] += s["role"] in via
            earlier = corrected.get(s["source"])
            projection = projected.get((sentence, s["source"])) if sentence in corrected or sentence in made \
                else None
            if earlier is None and projection is not None and projection.text:
                earlier = projection.text
                f["projected_prefills"] += 1
                f["projected_equal"] += squeeze(earlier) == squeeze(ref)
            prefill = earlier if earlier is not None else s["translation"]
            best = offers[s["role"]]
            _count_offer(f, best, ref)
            start = best["text"] if best is not None and earlier is None else prefill
            f["with"] += edit_distance(start, ref)
            f["without"] += edit_distance(prefill, ref)
            f["bare"] += edit_distance(corrected.get(s["source"], s["translation"]), ref)
            made[s["source"]] = ref
            if memory:
                memory.memory.learn(s["source"], s["translation"], ref)
        corrected.update(made)  # the page pre-fills from an issue's corrections once it is saved
    return _suggestion_result(f, memory)


def _count_offer(f: dict, best: dict | None, ref: str) -> None:
    if best is not None:
        f["offered"] += 1
        f["accepted"] += squeeze(best["text"]) == squeeze(ref)
        if "terms" in best:
            f["remembered"] += 1
            f["remembered_ok"] += squeeze(best["text"]) == squeeze(ref)


def _suggestion_result(f: dict, memory) -> dict:
    wrong, with_, without = f["wrong_sides"], f["with"], f["without"]
    return {"wrong_sides": wrong, "offered": f["offered"], "accepted": f["accepted"],
            "accepted_share": round(f["accepted"] / wrong, 4) if wrong else None,
            "chars_to_edit_with": with_, "chars_to_edit_without": without,
            "chars_saved_share": round(1 - with_ / without, 4) if without else None,
            "by_projection": f["by_projection"], "projected_prefills": f["projected_prefills"],
            "projected_equal": f["projected_equal"], "chars_to_edit_without_projection": f["bare"],
            **({"from_memory": f["remembered"], "memory_accepted": f["remembered_ok"],
                "memory_seconds": round(memory.cost["seconds"], 3), "memory_searched": memory.cost["searched"]}
               if memory else {})}
