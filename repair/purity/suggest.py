"""Suggested corrections: for each side of an issue that may be the wrong one, a translation the model under test
can itself produce that makes the pair consistent (distance 0), for a person to confirm with one key.

After detection, in one batch over all issues:
- RTI: the container translated again with fairseq's lexically constrained beam search, forced to contain the
  RTI's translation; and for the RTI, the part of the container's translation the model scores best as its
  translation, and the best of its n-best translations that the container's translation contains.
- replace: the mutant translated again forced to contain the original's translation outside the replaced word's
  translation, with the new word's translation in its place; and the reverse for the original.
A candidate is offered only when the relation's own check gives the pair distance 0 with it in place of the
side's translation. Each issue gets `suggestions: [{role, text, origin, score}]`, best (highest score, fairseq's
length-normalized log-probability) first. A CTranslate2 model in float32 searches itself where the phrases begin the
translation (a target prefix: repair.nmt.ct2.search), else fairseq searches on the same checkpoint (CTranslate2
has no lexical constraints); the origin says which.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from repair.issues import best_suggestion  # noqa: F401 (where readers of suggestions find it)
from repair.purity.check import squeeze
from repair.purity.relations.base import Case, Relation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scored:
    """A candidate translation with the model's score (as constrained.Hypothesis, its phrases met)."""

    text: str
    score: float
    met: bool = True


@dataclass(frozen=True)
class Request:
    """A side to search for: its source, the phrases its translation must contain (none: an n-best list), and
    whether the first of them is to begin it."""

    issue: int
    role: str
    source: str
    constraints: tuple[str, ...]
    origin: str
    starts: bool = False


def length_cap(translator, current: str, phrases: Sequence[str], slack: int = 2, starts: bool = False) -> int:
    """Target tokens a suggestion may take: the longer of the side's translation and the phrases it must contain
    (spelled as the constrained search spells them: inside a sentence, the first at its beginning where `starts`),
    and a few more. A consistent translation of the same source is not much longer; a search past that is wasted
    (fairseq's search does not end a hypothesis before it has all its phrases)."""
    own = len(translator.tgt_codec.encode_all([current])[0].split())
    need = sum(translator.phrase_tokens(p, starts and i == 0) for i, p in enumerate(phrases))
    return max(own, need) + slack


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


def _spliced_context(theirs: str, pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], str] | None:
    """Of the word's contexts' translations (theirs, mine) in order, the first whose `theirs` the partner's
    translation holds: (the partner's translation around it, mine), or None."""
    for old, mine in pairs:
        around = _around(theirs, old)
        if around is not None:
            return around, mine
    return None


def replace_requests(k: int, issue: dict, case: Case, translation: Mapping[str, str], note: str) -> list[Request]:
    original, mutant, *contexts = case.texts
    # the word's contexts (the phrase, then the phrase closed as the sentence is), each (original's, mutant's)
    pairs = [(translation[a], translation[b]) for a, b in zip(contexts[::2], contexts[1::2])]
    out = []
    for role, source, theirs, own in (("mutant", mutant, translation[original], pairs),
                                      ("original", original, translation[mutant], [(b, a) for a, b in pairs])):
        spliced = _spliced_context(theirs, own)
        if spliced is None:
            continue
        around, mine = spliced
        phrases = tuple(p for p in (around[0], mine, around[1]) if p.strip())
        other = "original" if role == "mutant" else "mutant"
        # the first phrase begins the new translation as it begins the partner's: the text before the replaced
        # word, else the word's own translation (when there is one)
        out.append(Request(k, role, source, phrases,
                           f"the {role} translated again to keep the {other}'s translation outside the replaced word "
                           f"(constrained beam search{note})", starts=bool(around[0].strip() or mine.strip())))
    return out


REQUESTS = {"rti": rti_requests, "replace": replace_requests}
# Beam rows per batch of searches: a few dozen searches in one or two batches, each source still stopped at its own
# output cap (fairseq's search costs mostly a fixed amount per step and per batch). On the make demo slice its 32
# constrained searches took 0.61 s in one batch against 1.36 s in the translator's length buckets on two workers,
# its 31 n-best lists (310 rows) 0.20 s in one batch, 0.25 s in two, 0.28 s in buckets, with the same hypotheses.
# More than two batches' worth keep the translator's buckets and workers (314 n-best lists of the CNN sentences:
# 3.9 s that way, 5.0 s in rows of 256).
ROWS = 512
SPLICED = ("the container translated again to contain its RTIs' translations in place of the closest parts of its "
           "own translation, and the rest of it (constrained beam search")


def repeated(text: str, n: int) -> set[str]:
    """Spans of `n` characters (whitespace aside, punctuation-free) that occur at least twice in `text`."""
    text = squeeze(text)
    seen, twice = set(), set()
    for i in range(len(text) - n + 1):
        span = text[i:i + n]
        if not span.isalnum():
            continue
        (twice if span in seen else seen).add(span)
    return twice


def is_subsequence(short: str, long: str) -> bool:
    """Whether `short` is `long` with some characters left out."""
    it = iter(long)
    return all(ch in it for ch in short)


def best_window(text: str, part: str) -> tuple[int, int, int]:
    """(start, end, distance): the span of `text` closest to `part` in insertions and deletions (a replaced
    character counts two; approximate substring matching: the match may start and end anywhere in `text`)."""
    n = len(text)
    prev, prev_start = [0] * (n + 1), list(range(n + 1))
    for i, ch in enumerate(part, 1):
        cur, cur_start = [i] + [0] * n, [0] * (n + 1)
        for j in range(1, n + 1):
            best, start = prev[j - 1] + 2 * (ch != text[j - 1]), prev_start[j - 1]
            if prev[j] + 1 < best:
                best, start = prev[j] + 1, prev_start[j]
            if cur[j - 1] + 1 < best:
                best, start = cur[j - 1] + 1, cur_start[j - 1]
            cur[j], cur_start[j] = best, start
        prev, prev_start = cur, cur_start
    end = min(range(n + 1), key=lambda j: (prev[j], abs(j - prev_start[j] - len(part))))
    return prev_start[end], end, prev[end]


def closest_span(current: str, part: str, min_shared: int = 2, trim: int = 0) -> tuple[int, int] | None:
    """(start, end) of the span of `current` closest to `part` (best_window), when they have at least `min_shared`
    characters in common and at least half of the span's, else where `part` overlaps an end of `current`
    (edge_overlap); a character or two next to it that `part` has too is taken in (the model's own rendering of
    it, moved). None when no span is that close.
    `trim`: up to this many characters at the end of the span, while its last differs from `part`'s, are left
    out (a span that ends in the first characters of the next phrase: `…的一` of `…的一只猫` for `…的一张书桌`;
    trimming its beginning too changed no suggestion on the demo slice and searched 10 containers more)."""
    a, b, d = best_window(current, part)
    shared = (len(part) + b - a - d) / 2  # characters the span and the part have in common
    if shared < min_shared or shared * 2 < b - a:
        return edge_overlap(current, part)
    for _ in range(2):
        if a > 0 and current[a - 1] in part and current[a - 1] not in "，。":
            a -= 1
        if b < len(current) and current[b] in part and current[b] not in "，。":
            b += 1
    for _ in range(trim):
        if b - a > 1 and current[b - 1] != part[-1]:
            b -= 1
    return a, b


EDGE_STOP = set("的了，。、 ")
ENDING = "。！？.!?"


def edge_overlap(current: str, part: str) -> tuple[int, int] | None:
    """The span where `part` overlaps an end of `current`: `current` (its final punctuation aside) ends with
    `part`'s first characters, or begins with its last ones (`…后面的桥` and `桥旁边的朋友`: a translation that
    stops before the words the part goes on with), the longest such overlap of characters other than 的, 了 and
    punctuation alone; None when there is none."""
    end = len(current.rstrip(ENDING))
    for n in range(min(len(part), end) - 1, 0, -1):
        if current[:end].endswith(part[:n]) and not set(part[:n]) <= EDGE_STOP:
            return end - n, end
        if current.startswith(part[-n:]) and not set(part[-n:]) <= EDGE_STOP:
            return 0, n
    return None


PUNCTUATION = set("，。、；：！？,.;:!?“”\"'（）() ")


def span_candidates(current: str, part: str, reach: int = 2) -> list[str]:
    """Parts of `current` that may be another rendering of `part`: beginning and ending within `reach` characters
    of the span closest to it (best_window), at most three characters longer or shorter than it (another
    rendering of one phrase is about as long), beginning or ending with its first or last character, with at
    least two characters in common with it, not beginning or ending with punctuation, nor with a 的 that `part`
    does not begin or end with; `part` itself left out."""
    current, part = squeeze(current), squeeze(part)
    if not current or not part:
        return []
    a, b, _ = best_window(current, part)
    out = []
    for i in range(max(0, a - reach), min(len(current), a + reach + 1)):
        for j in range(max(i + 1, b - reach), min(len(current), b + reach) + 1):
            span = current[i:j]
            if abs(len(span) - len(part)) > 3 or span == part:
                continue
            if span[0] in PUNCTUATION or span[-1] in PUNCTUATION:
                continue
            if (span[0] == "的" and part[0] != "的") or (span[-1] == "的" and part[-1] != "的"):
                continue
            if (span[0] == part[0] or span[-1] == part[-1]) and len(set(span) & set(part)) >= 2:
                out.append(span)
    return out


def spliced(current: str, parts: Sequence[str], margin: int = 0, trim: int = 0) -> tuple[tuple[str, ...], bool]:
    """The phrases a container's new translation must contain, in order: each RTI's translation in place of the
    span of the container's translation that is closest to it, and the container's own translation around them.
    An RTI's translation with no close span (one with at least two characters in common and at least half of its
    own), or whose span overlaps an earlier one's, is left out (its issue is searched again with it alone); parts inside another part are left to that
    one. With no span at all: the parts themselves. `margin` characters of the container's translation on either
    side of a span may be left to the search to fill (on the demo 1 or 2 gave fewer right suggestions than 0).
    Returns the phrases and whether the first begins the new translation (the container's own first words, or the
    part whose span begins it; not where the search fills a margin or where no span was found)."""
    parts = [p for p in dict.fromkeys(parts) if not any(p != q and p in q for q in parts)]
    spans = []
    for p in parts:
        span = closest_span(current, p, trim=trim)
        if span is not None and not any(span[0] < y and x < span[1] for x, y, _ in spans):
            spans.append((*span, p))
    if not spans:
        return tuple(parts), False
    out, pos = [], 0
    for a, b, p in sorted(spans):
        out += [current[pos:max(pos, a - margin)], p]
        pos = min(len(current), b + margin)
    out.append(current[pos:])
    return tuple(x for x in out if x.strip()), margin == 0


class Search:
    """The searches for one batch of issues, and the offers made from what they find."""

    def __init__(self, fs, issues: list[dict], cases: Mapping[str, Case], relations: Mapping[str, Relation],
                 translation: Mapping[str, str], *, beam: int, nbest_beam: int, min_score: float | None,
                 repeat_chars: int | None = None):
        self.fs, self.issues, self.cases, self.relations, self.translation = fs, issues, cases, relations, translation
        self.beam, self.nbest_beam, self.min_score, self.repeat_chars = beam, nbest_beam, min_score, repeat_chars
        self.searched = 0
        self.low: set[str] = set()  # sources whose own translation scores below min_score: no constrained search
        self.scores: dict[tuple[str, str], float] = {}  # (source, translation) -> the model's score

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The model's scores of (source, translation) pairs, those not scored before in one teacher-forced pass."""
        missing = [p for p in dict.fromkeys(pairs) if p not in self.scores]
        if missing:
            began = time.perf_counter()
            self.scores.update(zip(missing, self.fs.score([p[0] for p in missing], [p[1] for p in missing])))
            log.debug("suggestions: %d translations scored, %.2f s", len(missing), time.perf_counter() - began)
        return [self.scores[p] for p in pairs]

    def skip_low(self, reqs: list[Request]) -> int:
        """Sources whose constrained search could not give an offer: the model's own translation of the side
        scores below `min_score`, and a translation forced to contain phrases the model did not choose scores
        lower still (on the demo's and a news slice's searches, 5 of 55 scored higher, none past min_score).
        Scored in one teacher-forced pass, far cheaper than the searches. Returns how many were set aside."""
        self.low = self.below_min(r.source for r in reqs if r.constraints)
        return len(self.low)

    def below_min(self, sources) -> set[str]:
        """The sources whose own translation the model scores below `min_score` (none when it is None), scored in
        one teacher-forced pass (cached)."""
        if self.min_score is None:
            return set()
        sources = list(dict.fromkeys(sources))
        own = self.score([(s, self.translation[s]) for s in sources])
        return {s for s, score in zip(sources, own) if score < self.min_score}

    def spans(self, margin: float, reach: int, note: str) -> set[int]:
        """For each RTI issue, the parts of the container's translation that may render the RTI (span_candidates),
        scored by the model as the RTI's translation in one teacher-forced pass: the best that scores at least the
        RTI's own translation's score less `margin` is offered for the RTI. Returns the issues given one: there
        the model finds the container's rendering about as likely as its own (on the demo slice the RTI was the
        wrong side in 7 of 8 such issues, all of them with the reference among the parts)."""
        # the searched sides' own translations first (skip_low asks for them): a container whose
        # own translation scores below min_score is not looked in for parts either (on news text a model that
        # writes word salad: 288 of 290 containers of the CNN sentences)
        searched = {"rti": 1}  # an RTI gets an n-best list, not a constrained search: its own score comes with its parts
        low = self.below_min(source for issue in self.issues
                             for source in self.cases[issue["id"]].texts[:searched.get(issue["relation"], 2)]
                             if self.translation.get(source, "").strip())
        todo = []
        for k, issue in enumerate(self.issues):
            case = self.cases[issue["id"]]
            if issue["relation"] != "rti":
                continue
            container, rti = case.texts[:2]
            rt, ct = self.translation[rti], self.translation[container]
            if not rt.strip() or container in low:  # (an empty container translation has no parts)
                continue
            todo.append((k, rti, span_candidates(ct, rt, reach)))
        pairs = [(rti, text) for _, rti, parts in todo if parts for text in (self.translation[rti], *parts)]
        scores = dict(zip(pairs, self.score(pairs)))
        origin = f"the part of the container's translation the model scores best as the RTI's translation (scored{note})"
        given = set()
        for k, rti, parts in todo:
            if not parts:
                continue
            own = scores[(rti, self.translation[rti])]
            hyps = sorted((Scored(p, scores[(rti, p)]) for p in parts if scores[(rti, p)] >= own - margin),
                          key=lambda h: -h.score)
            if hyps and self.offer(Request(k, "rti", rti, (), origin), hyps):
                given.add(k)
        return given

    def search(self, reqs: list[Request], ordered: bool = True) -> dict:
        """Each distinct (source, phrases) once: the same container or RTI is in many issues; plain searches
        (an n-best list) apart from constrained ones, much faster."""
        keys = list(dict.fromkeys((r.source, r.constraints, r.starts) for r in reqs
                                  if not (r.constraints and r.source in self.low)))
        self.searched += len(keys)
        found = {}
        for constrained in (True, False):
            group = [key for key in keys if bool(key[1]) == constrained]
            if group:
                began = time.perf_counter()
                width = self.beam if constrained else max(self.beam, self.nbest_beam)
                caps = [length_cap(self.fs, self.translation[s], c, starts=st) for s, c, st in group]
                hyps = self.fs.translate_constrained([s for s, _, _ in group], [list(c) for _, c, _ in group],
                                                     beam=width, nbest=width, ordered=ordered, max_lengths=caps,
                                                     starts=[starts for _, _, starts in group],
                                                     rows=ROWS if len(group) * width <= 2 * ROWS else None)
                found.update(zip(group, hyps))
                log.debug("suggestions: %d %s searches, beam %d, %.1f s", len(group),
                          "constrained" if constrained else "n-best", width, time.perf_counter() - began)
        return found

    def offer(self, r: Request, hyps) -> bool:
        """The best hypothesis that makes the pair consistent, as the issue's suggestion for the side."""
        issue = self.issues[r.issue]
        case = self.cases[issue["id"]]
        current = squeeze(self.translation[r.source])
        for h in hyps:
            text = squeeze(h.text)
            if not h.met or not text or text == current or (self.min_score is not None and h.score < self.min_score):
                continue
            if len(text) < len(current) and is_subsequence(text, current):
                continue
            if self.repeat_chars and repeated(text, self.repeat_chars) - repeated(current, self.repeat_chars):
                continue  # says a span twice that the model's translation says once: over-translation
            if self.relations[issue["relation"]].check(case, {**self.translation, r.source: h.text}).distance != 0:
                continue
            issue["suggestions"].append({"role": r.role, "text": h.text, "origin": r.origin, "score": round(h.score, 4)})
            return True
        return False

    def run(self, reqs: list[Request]) -> list[bool]:
        """Search the requests and offer what they find: whether each got a suggestion."""
        found = self.search(reqs)
        return [self.offer(r, found.get((r.source, r.constraints, r.starts), ())) for r in reqs]


def requests_for(issues: list[dict], cases: Mapping[str, Case], translation: Mapping[str, str], note: str) -> list[Request]:
    """The sides to search, issue by issue (relations with no request maker get none)."""
    requests: list[Request] = []
    for k, issue in enumerate(issues):
        make = REQUESTS.get(issue["relation"])
        case = cases.get(issue["id"])
        if make is not None and case is not None:
            requests.extend(make(k, issue, case, translation, note))
    return requests


def splice_containers(requests: list[Request], issues: list[dict], translation: Mapping[str, str],
                      note: str, trim: int = 0) -> tuple[list[Request], list[Request]]:
    """An RTI container once, with all its RTIs' translations spliced into its own translation."""
    def is_container(r: Request) -> bool:
        return issues[r.issue]["relation"] == "rti" and r.role == "container"

    parts: dict[str, list[str]] = {}
    for r in filter(is_container, requests):
        parts.setdefault(r.source, []).append(r.constraints[0])
    splices = {source: spliced(translation[source], ps) for source, ps in parts.items()}  # once per container
    trimmed = {source: spliced(translation[source], ps, trim=trim) for source, ps in parts.items()} if trim else {}
    out, extra = [], []
    for r in requests:
        if is_container(r):
            pieces, begins = splices[r.source]
            if r.source in trimmed and trimmed[r.source][0] != pieces:
                extra.append(Request(r.issue, r.role, r.source, trimmed[r.source][0], SPLICED + note + ")",
                                     starts=trimmed[r.source][1]))
            r = Request(r.issue, r.role, r.source, pieces, SPLICED + note + ")", starts=begins)
        out.append(r)
    return out, extra


def add_suggestions(issues: list[dict], cases: Mapping[str, Case], relations: Mapping[str, Relation],
                    translation: Mapping[str, str], translator, *, beam: int = 2, nbest_beam: int = 6,
                    min_score: float | None = -1.0, retry: bool = False, repeat_chars: int | None = 4,
                    span_margin: float | None = 0.1, span_reach: int = 2, trim: int = 0) -> dict:
    """Give every issue its `suggestions` (in place); returns figures: seconds, searched, offered, and `skipped`
    (why no search ran) when the translator cannot search.

    beam: of the constrained searches; nbest_beam: of the n-best lists (plain beam search, each hypothesis kept);
    min_score: hypotheses scored lower (log-probability per token) are not offered, and a side whose own translation
    the model scores lower is not searched with constraints (`below_min_score` counts them); retry: search an RTI
    container again with one RTI's translation alone where the search with all of them gave that issue nothing;
    repeat_chars: a hypothesis that repeats a span of this many characters (whitespace and punctuation aside) that
    the side's translation does not repeat is not offered (over-translation: `一位歌手写了一位歌手写的`; None: off).
    A hypothesis that only leaves out part of the side's translation is not offered either: it agrees by
    translating less.

    An RTI container is searched once, for all its issues: forced to contain each RTI's translation where the
    container's translation has the span closest to it, and the rest of its own translation around them; where
    that gives an issue nothing, again with that issue's RTI's translation alone."""
    start = time.perf_counter()
    if not issues:
        why = translator.why_no_search()
        return {"seconds": 0.0, "searched": 0, "offered": 0, **({"skipped": why} if why else {})}
    fs, note = translator.searcher(beam)  # note: for the origin (empty for fairseq itself), or why none can search
    if fs is None:
        log.info("suggestions: none (%s)", note)
        return {"seconds": round(time.perf_counter() - start, 3), "searched": 0, "offered": 0, "skipped": note}
    for issue in issues:
        issue["suggestions"] = []
    search = Search(fs, issues, cases, relations, translation, beam=beam, nbest_beam=nbest_beam, min_score=min_score,
                    repeat_chars=repeat_chars)
    doubted = search.spans(span_margin, span_reach, note) if span_margin is not None else set()
    requests = requests_for(issues, cases, translation, note)
    # an issue whose RTI got a part of its container's translation: neither the container searched nor the RTI's
    # n-best list (the same suggestions on the demo slice, 6 of 31 n-best lists fewer)
    requests = [r for r in requests if r.issue not in doubted or (r.role == "rti" and r.constraints)]
    low = search.skip_low(requests)
    # nor an n-best list for an RTI whose container's own translation scores below min_score: what it looks for
    # is a translation that container contains (on the CNN sentences 314 lists, 2.7 s, none offered)
    requests = [r for r in requests if r.constraints or issues[r.issue]["relation"] != "rti"
                or cases[issues[r.issue]["id"]].texts[0] not in search.low]
    # nor a constrained search of a side set aside: its phrases are not spliced either (closest_span's alignment of
    # every RTI's translation with its container's, in Python: most of the step's own time on news text)
    requests = [r for r in requests if not (r.constraints and r.source in search.low)]
    first, extra = splice_containers(requests, issues, translation, note, trim)
    got = search.run(first + extra)[:len(first)]
    again = [requests[k] for k, ok in enumerate(got) if not ok and requests[k].constraints != first[k].constraints]
    if again and retry:
        search.run(again)
    for issue in issues:  # best first; a text found two ways once, with the higher score
        issue["suggestions"].sort(key=lambda s: -s["score"])
        seen = set()
        issue["suggestions"] = [s for s in issue["suggestions"]
                                if (s["role"], squeeze(s["text"])) not in seen and not seen.add((s["role"], squeeze(s["text"])))]
    offered = sum(len(issue["suggestions"]) for issue in issues)
    seconds = round(time.perf_counter() - start, 3)
    log.info("suggestions: %d for %d issues (%d searches, %.1f s)%s", offered, len(issues), search.searched, seconds,
             f"; {low} side(s) not searched: the model's own translation scores below suggest.min_score" if low else "")
    return {"seconds": seconds, "searched": search.searched, "offered": offered, "below_min_score": low}
