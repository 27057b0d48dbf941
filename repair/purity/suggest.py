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


def add_suggestions(issues: list[dict], cases: Mapping[str, Case], relations: Mapping[str, Relation],
                    translation: Mapping[str, str], translator, *, beam: int = 5, nbest: int | None = None) -> dict:
    """Give every issue its `suggestions` (in place); returns figures: seconds, searched, offered, and `skipped`
    (why no search ran) when the translator cannot search."""
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
    nbest = nbest or beam
    requests: list[Request] = []
    for k, issue in enumerate(issues):
        make = REQUESTS.get(issue["relation"])
        case = cases.get(issue["id"])
        if make is not None and case is not None:
            requests.extend(make(k, issue, case, translation, note))
    from repair.nmt.constrained import translate_constrained

    # each distinct (source, phrases) searched once: the same container or RTI is in many issues
    keys = list(dict.fromkeys((r.source, r.constraints) for r in requests))
    found = {}
    for constrained in (True, False):  # batches with constraints apart: plain beam search is much faster
        group = [key for key in keys if bool(key[1]) == constrained]
        if group:
            hyps = translate_constrained(fs, [s for s, _ in group], [list(c) for _, c in group], beam=beam, nbest=nbest,
                                         max_lengths=[length_cap(fs, translation[s], c) for s, c in group])
            found.update(zip(group, hyps))
    offered = 0
    for r in requests:
        issue = issues[r.issue]
        case = cases[issue["id"]]
        current = translation[r.source]
        for h in found[(r.source, r.constraints)]:
            if not h.met or not h.text.strip() or "".join(h.text.split()) == "".join(current.split()):
                continue
            if relations[issue["relation"]].check(case, {**translation, r.source: h.text}).distance != 0:
                continue
            issue["suggestions"].append({"role": r.role, "text": h.text, "origin": r.origin, "score": round(h.score, 4)})
            offered += 1
            break
    for issue in issues:
        issue["suggestions"].sort(key=lambda s: -s["score"])
    seconds = round(time.perf_counter() - start, 3)
    log.info("suggestions: %d for %d issues (%d searches, %.1f s)", offered, len(issues), len(keys), seconds)
    return {"seconds": seconds, "searched": len(keys), "offered": offered}
