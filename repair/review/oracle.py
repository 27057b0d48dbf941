"""Review by reference translations: a flagged translation is wrong when it differs from its source's reference."""

from __future__ import annotations

import difflib
import logging
import os
from collections import Counter

from repair.review.store import CorrectionStore
from repair.stats import squeeze

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


def oracle_review(issues: list[dict], references: dict[str, str], review_dir: str | os.PathLike) -> dict:
    """Judge every issue whose sources all have references; return review stats.

    An issue with a source that has no reference is left for a person (counted in `needs_person`).
    Running it again on the same folder adds nothing: equal judgments are not repeated.
    """
    with CorrectionStore(review_dir, issues) as store:
        return _oracle_review(store, issues, references)


def _oracle_review(store: CorrectionStore, issues: list[dict], references: dict[str, str]) -> dict:
    items, needs_person = [], []
    for issue in issues:
        refs = {s["role"]: references.get(s["source"]) for s in issue["sides"]}
        if any(r is None for r in refs.values()):
            needs_person.append(issue["id"])
            continue
        model = {s["role"]: s["translation"] for s in issue["sides"]}
        wrong = [r for r in model if squeeze(model[r]) != squeeze(refs[r])]
        kinds = {r: guess_kind(model[r], refs[r]) for r in wrong}
        corrections = {r: refs[r].strip() for r in wrong}
        items.append((issue["id"], wrong, kinds[wrong[0]] if wrong else None, corrections, kinds))
    store.record_many(items)
    if needs_person:
        log.warning("oracle review: %d issue(s) have a source without a reference and need a person", len(needs_person))
    stats = store.stats()
    return {
        **stats,
        "needs_person": len(needs_person),
        "needs_person_ids": needs_person,
        "corrections": len(store.corrections()),
    }
