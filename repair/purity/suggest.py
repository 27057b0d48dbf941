"""Suggested corrections: for each side of an issue that may be the wrong one, a translation the model under test
can itself produce that makes the pair consistent (distance 0), for a person to confirm with one key.

After detection, in one batch over all issues:
- RTI: the container translated again with fairseq's lexically constrained beam search, forced to contain the
  RTI's translation; and for the RTI, the best of its n-best translations that the container's translation
  contains.
- replace: the mutant translated again forced to contain the original's translation outside the replaced word's
  translation, with the new word's translation in its place; and the reverse for the original.
A candidate is offered only when the relation's own check gives the pair distance 0 with it in place of the
side's translation. Each issue gets `suggestions: [{role, text, origin, score}]`, best (highest score, fairseq's
length-normalized log-probability) first. A CTranslate2 model is searched with fairseq on the same checkpoint
(CTranslate2 has no lexical constraints); its origin says so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from repair.issues import best_suggestion  # noqa: F401 (where readers of suggestions find it)
from repair.purity.relations.base import Case, Relation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """A side to search for: its source, the phrases its translation must contain (none: an n-best list)."""

    issue: int
    role: str
    source: str
    constraints: tuple[str, ...]
    origin: str


def searchless(translator) -> str | None:
    """Why no suggestion can be searched with this translator (None: one can)."""
    from repair.nmt.translator import FairseqTranslator

    if isinstance(translator, FairseqTranslator):
        return None
    files = getattr(translator, "files", None)
    if files is None or not getattr(files, "checkpoint", None) or not str(files.checkpoint).endswith(".pt"):
        return f"translator={getattr(translator, 'name', '?')} has no fairseq checkpoint to search"
    return None


def fairseq_for(translator, beam: int):
    """The FairseqTranslator that searches for suggestions, and a note for the origin (empty for fairseq itself);
    (None, why) when the translator has no fairseq checkpoint (a table of translations, a converted model alone)."""
    from repair.nmt.translator import FairseqTranslator

    if isinstance(translator, FairseqTranslator):
        return translator, ""
    why = searchless(translator)
    if why:
        return None, why
    files = translator.files
    threads = getattr(translator, "threads", None)
    workers = getattr(translator, "workers", 1) or 1
    device = getattr(translator, "device", "auto")
    device = device if isinstance(device, str) else getattr(device, "type", "auto")
    fs = FairseqTranslator(files=files, beam=beam, device=device, threads=(threads or 1) * workers)
    return fs, f", fairseq on the {translator.name} model's checkpoint"


def length_cap(translator, current: str, phrases: Sequence[str], slack: int = 3) -> int:
    """Target tokens a suggestion may take: the side's translation and the phrases it must contain, and a few
    more. A consistent translation of the same source is not much longer; a search past that is wasted."""
    texts = [current, *phrases]
    return sum(len(line.split()) for line in translator.tgt_codec.encode_all(texts)) + slack


def rti_requests(k: int, issue: dict, case: Case, translation: Mapping[str, str], note: str) -> list[Request]:
    container, rti = case.texts[:2]
    rt = translation[rti]
    out = []
    if rt.strip():
        out.append(Request(k, "container", container, (rt,),
                           f"the container translated again to contain the RTI's translation (constrained beam search{note})"))
    out.append(Request(k, "rti", rti, (), f"the RTI's n-best translation the container's translation contains (beam search{note})"))
    return out


def _around(text: str, part: str) -> tuple[str, str] | None:
    """`text` before and after the first occurrence of `part`, or None when it is not there."""
    if not part or part not in text:
        return None
    at = text.index(part)
    return text[:at], text[at + len(part):]


def replace_requests(k: int, issue: dict, case: Case, translation: Mapping[str, str], note: str) -> list[Request]:
    original, mutant, word, new = case.texts
    ot, mt, tw, tn = (translation[t] for t in (original, mutant, word, new))
    out = []
    for role, source, theirs, old, mine in (("mutant", mutant, ot, tw, tn), ("original", original, mt, tn, tw)):
        around = _around(theirs, old)
        if around is None:
            continue
        phrases = tuple(p for p in (around[0], mine, around[1]) if p.strip())
        other = "original" if role == "mutant" else "mutant"
        out.append(Request(k, role, source, phrases,
                           f"the {role} translated again to keep the {other}'s translation outside the replaced word "
                           f"(constrained beam search{note})"))
    return out


REQUESTS = {"rti": rti_requests, "replace": replace_requests}


def is_subsequence(short: str, long: str) -> bool:
    """Whether `short` is `long` with some characters left out."""
    it = iter(long)
    return all(ch in it for ch in short)


def together(requests: list[Request], issues: list[dict]) -> list[Request]:
    """The RTI container requests again, one per container with the translations of all its RTIs (those that
    are part of another left out): a container that lacks several is suggested with all of them, and each of its
    issues is consistent with that one suggestion."""
    phrases: dict[str, list[str]] = {}
    for r in requests:
        if issues[r.issue]["relation"] == "rti" and r.role == "container":
            phrases.setdefault(r.source, [])
            if r.constraints[0] not in phrases[r.source]:
                phrases[r.source].append(r.constraints[0])
    out = []
    for r in requests:
        if issues[r.issue]["relation"] == "rti" and r.role == "container" and len(phrases[r.source]) > 1:
            ps = phrases[r.source]
            kept = tuple(p for p in ps if not any(p != q and p in q for q in ps))
            out.append(Request(r.issue, r.role, r.source, kept, r.origin.replace(
                "to contain the RTI's translation", "to contain the translations of all its RTIs")))
    return out


def add_suggestions(issues: list[dict], cases: Mapping[str, Case], relations: Mapping[str, Relation],
                    translation: Mapping[str, str], translator, *, beam: int = 5, nbest_beam: int = 10,
                    min_score: float | None = None) -> dict:
    """Give every issue its `suggestions` (in place); returns figures: seconds, searched, offered, and `skipped`
    (why no search ran) when the translator cannot search.

    beam: of the constrained searches; nbest_beam: of the n-best lists (plain beam search, each hypothesis kept);
    min_score: hypotheses scored lower (log-probability per token) are not offered. A hypothesis that only leaves
    out part of the side's translation is not offered either: it agrees by translating less.

    Searches: first every side's own (an RTI container that lacks the translations of several RTIs: with all of
    them, in any order), then, for a container whose search with all of them gave nothing for an issue, with
    that issue's RTI alone."""
    start = time.perf_counter()
    for issue in issues:
        issue["suggestions"] = []
    fs, note = fairseq_for(translator, beam) if issues else (None, "")
    if fs is None and not issues:
        why = searchless(translator)
        return {"seconds": 0.0, "searched": 0, "offered": 0, **({"skipped": why} if why else {})}
    if fs is None:
        log.info("suggestions: none (%s)", note)
        return {"seconds": round(time.perf_counter() - start, 3), "searched": 0, "offered": 0, "skipped": note}
    requests: list[Request] = []
    for k, issue in enumerate(issues):
        make = REQUESTS.get(issue["relation"])
        case = cases.get(issue["id"])
        if make is not None and case is not None:
            requests.extend(make(k, issue, case, translation, note))
    from repair.nmt.constrained import translate_constrained

    searched = 0

    def search(reqs: list[Request], ordered: bool) -> dict:
        """Each distinct (source, phrases) once: the same container or RTI is in many issues; plain searches
        (an n-best list) apart from constrained ones, much faster."""
        nonlocal searched
        keys = list(dict.fromkeys((r.source, r.constraints) for r in reqs))
        searched += len(keys)
        found = {}
        for constrained in (True, False):
            group = [key for key in keys if bool(key[1]) == constrained]
            if group:
                width = beam if constrained else max(beam, nbest_beam)
                hyps = translate_constrained(fs, [s for s, _ in group], [list(c) for _, c in group], beam=width,
                                             nbest=width, ordered=ordered,
                                             max_lengths=[length_cap(fs, translation[s], c) for s, c in group])
                found.update(zip(group, hyps))
        return found

    def offer(r: Request, hyps) -> bool:
        """The best hypothesis that makes the pair consistent, as the issue's suggestion for the side."""
        issue = issues[r.issue]
        case = cases[issue["id"]]
        current = "".join(translation[r.source].split())
        for h in hyps:
            text = "".join(h.text.split())
            if not h.met or not text or text == current or (min_score is not None and h.score < min_score):
                continue
            if len(text) < len(current) and is_subsequence(text, current):
                continue
            if relations[issue["relation"]].check(case, {**translation, r.source: h.text}).distance != 0:
                continue
            issue["suggestions"].append({"role": r.role, "text": h.text, "origin": r.origin, "score": round(h.score, 4)})
            return True
        return False

    merged = together(requests, issues)
    alone = {(r.issue, r.role) for r in merged}
    first = [r for r in requests if (r.issue, r.role) not in alone]
    found = search(first, ordered=True)
    offered = sum(offer(r, found[(r.source, r.constraints)]) for r in first)
    if merged:
        found = search(merged, ordered=False)
        failed = {(r.issue, r.role) for r in merged if not offer(r, found[(r.source, r.constraints)])}
        offered += len(merged) - len(failed)
        again = [r for r in requests if (r.issue, r.role) in failed]
        if again:
            found = search(again, ordered=True)
            offered += sum(offer(r, found[(r.source, r.constraints)]) for r in again)
    for issue in issues:
        issue["suggestions"].sort(key=lambda s: -s["score"])
    seconds = round(time.perf_counter() - start, 3)
    log.info("suggestions: %d for %d issues (%d searches, %.1f s)", offered, len(issues), searched, seconds)
    return {"seconds": seconds, "searched": searched, "offered": offered}
