"""Phrase references from sentence references: word alignment learnt on the run's own training corpus (eflomal,
trained on the corpus itself, no pretrained weights), and the projection of a phrase cut from a sentence onto the
sentence's reference.

The corpus is aligned once (English words; Chinese in jieba's words, or characters with unit=char), in both
directions; the links give eflomal's priors (lexical, jump and fertility counts), cached in the data folder with a
fingerprint of the corpus and the settings. A new pair (a sentence and its reference, or a reviewer's correction)
is aligned with those priors, the two directions joined by grow-diag-final-and. A phrase's projection is the
shortest stretch of the reference that covers every link of the phrase's words (as consistent phrase extraction
takes it) by the links both directions agree on (by the joined links where none of the phrase's words has one); its
confidence is the share of the phrase's words that have a link (a word without one counting by how often the corpus
leaves that word without a link: an article Chinese does not write) times the share of the links into that stretch
that come from the phrase.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from repair.errors import UserError
from repair.fileio import json_line, read_json, write_all, write_json_atomic, write_text_atomic

log = logging.getLogger(__name__)

ALIGN_VERSION = 3
UNITS = ("word", "char")
_EN_TOKEN = re.compile(r"\w+|[^\w\s]")
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Projection:
    """A phrase's stretch of the reference and how far the alignment vouches for it (0 to 1)."""

    text: str
    confidence: float
    covered: float     # share of the phrase's words with a link (a word the corpus seldom links counting less)
    consistent: float  # share of the links into the stretch that come from the phrase


def english_tokens(text: str) -> list[Token]:
    return [Token(m.group().lower(), m.start(), m.end()) for m in _EN_TOKEN.finditer(text)]


def chinese_tokens(text: str, unit: str = "word") -> list[Token]:
    """jieba's words (unit=word) or the characters (unit=char) of a Chinese text, whitespace left out, with their
    character offsets in `text`."""
    if unit == "char":
        return [Token(c.lower(), k, k + 1) for k, c in enumerate(text) if not c.isspace()]
    import jieba

    return [Token(w.lower(), a, b) for w, a, b in jieba.tokenize(text) if w.strip()]


def grow_diag_final_and(forward: set[tuple[int, int]], reverse: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The two directions' links joined: their intersection grown by neighbouring links of their union that
    align a word not yet aligned, then links of either direction between two words neither aligned."""
    union, links = forward | reverse, set(forward & reverse)
    src, tgt = {i for i, _ in links}, {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                p = (i + di, j + dj)
                if p in union and p not in links and (p[0] not in src or p[1] not in tgt):
                    links.add(p)
                    src.add(p[0])
                    tgt.add(p[1])
                    grown = True
    for direction in (forward, reverse):
        for i, j in sorted(direction):
            if i not in src and j not in tgt:
                links.add((i, j))
                src.add(i)
                tgt.add(j)
    return links


def phrase_words(sentence: str, tokens: Sequence[Token], phrase: str) -> tuple[int, int] | None:
    """The first and last of the sentence's tokens that a phrase cut from it covers (spaces aside: a parser may
    space the phrase's words otherwise), or None where the phrase is not in the sentence."""
    squeezed, at = [], []
    for k, c in enumerate(sentence):
        if not c.isspace():
            squeezed.append(c.lower())
            at.append(k)
    needle = "".join(phrase.lower().split())
    found = "".join(squeezed).find(needle) if needle else -1
    if found < 0:
        return None
    first_char, last_char = at[found], at[found + len(needle) - 1]
    inside = [k for k, t in enumerate(tokens) if t.start <= last_char and t.end > first_char]
    return (inside[0], inside[-1]) if inside else None


def project(links: Iterable[tuple[int, int]], first: int, last: int, source: Sequence[Token],
            target: Sequence[Token], reference: str, unlinked: dict[str, float] | None = None) -> Projection | None:
    """The stretch of `reference` (its `target` tokens) that source tokens first..last align to; None where none
    of them has a link. Punctuation of the phrase is not counted in its share of linked words, and a word without
    a link counts as linked by the share of its corpus occurrences that have none (`unlinked`: an article the
    other language does not write is no sign of a poor alignment)."""
    links = set(links)
    inside = [(i, j) for i, j in links if first <= i <= last]
    if not inside:
        return None
    lo, hi = min(j for _, j in inside), max(j for _, j in inside)
    into = [i for i, j in links if lo <= j <= hi]
    words = [k for k in range(first, last + 1) if any(c.isalnum() for c in source[k].text)] or [first]
    linked = {i for i, _ in inside}
    covered = sum(1.0 if k in linked else (unlinked or {}).get(source[k].text, 0.0) for k in words) / len(words)
    consistent = sum(first <= i <= last for i in into) / len(into)
    text = reference[target[lo].start:target[hi].end].strip()
    return Projection(text, round(covered * consistent, 4), round(covered, 4), round(consistent, 4))


def _read_links(path: str) -> list[set[tuple[int, int]]]:
    with open(path, encoding="utf-8") as f:
        return [{tuple(int(x) for x in link.split("-")) for link in line.split()} for line in f]


SMALL_CORPUS = 20_000  # pairs: a corpus this small is aligned by three samplers (_eflomal_links)


def _eflomal_links(src: list[str], trg: list[str], priors: str | None = None) -> tuple[list, list]:
    """eflomal's forward and reverse links of tokenized lines (with a priors file when given). A large corpus is
    aligned by one sampler (on the demo's 50,000 pairs as many of its phrases projected right as with eflomal's
    default three, in three quarters of the time on 2 busy cores: 76 s against 105 s); a small one (SMALL_CORPUS
    pairs or fewer) and new pairs by three: on the tests' corpus of 1,836 pairs one sampler's priors projected a
    phrase short in 4 of 100 trainings, three samplers' in none."""
    from eflomal import Aligner

    with tempfile.TemporaryDirectory(prefix="align-") as tmp:
        fwd, rev = os.path.join(tmp, "fwd"), os.path.join(tmp, "rev")
        if priors is None:
            Aligner(n_samplers=1 if len(src) > SMALL_CORPUS else 3).align(src, trg, links_filename_fwd=fwd,
                                                                         links_filename_rev=rev, quiet=True)
        else:
            with open(priors, encoding="utf-8") as p:
                Aligner(n_samplers=3).align(src, trg, links_filename_fwd=fwd, links_filename_rev=rev, priors_input=p,
                                            quiet=True)
        return _read_links(fwd), _read_links(rev)


LINKS = "links.jsonl"  # the links of pairs aligned after the corpus, one JSON line each, keyed by priors and text


def _append_lines(path: Path, lines: Sequence[str]) -> None:
    """The lines appended in one write and fsynced (another run may append to the same file: each write whole)."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size > 0:  # a line a crash cut short: start on a fresh line (it is skipped when read)
            with open(path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                data = data if f.read(1) == b"\n" else b"\n" + data
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class PhraseAligner:
    """Word alignment of the run's training corpus (its priors in `folder`), applied to new pairs."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.info = read_json(self.folder / "align.json")
        self.unit = self.info["unit"]
        self.priors = str(self.folder / "priors.txt")
        nulls = self.folder / "unlinked.json"
        self.unlinked: dict[str, float] = read_json(nulls) if nulls.exists() else {}
        self._links: dict[str, tuple[set, set]] | None = None  # LINKS, read when first needed

    @classmethod
    def train(cls, pairs: Sequence[tuple[str, str]], folder: str | os.PathLike, *, unit: str = "word",
              max_sentences: int = 100_000) -> "PhraseAligner":
        """Align the first `max_sentences` pairs and keep their priors in `folder`; a folder whose fingerprint
        matches (the same pairs and settings) is used as it is."""
        if unit not in UNITS:
            raise UserError(f"review.projection.unit={unit!r}: choose one of {', '.join(UNITS)}")
        folder = Path(folder)
        pairs = list(pairs)[:max_sentences]
        digest = hashlib.sha256(repr((ALIGN_VERSION, unit, pairs)).encode("utf-8")).hexdigest()
        info = folder / "align.json"
        if info.exists() and read_json(info).get("fingerprint") == digest and (folder / "priors.txt").exists():
            return cls(folder)
        started = time.perf_counter()
        src, trg = [], []
        for en, zh in pairs:
            s, t = english_tokens(en), chinese_tokens(zh, unit)
            if s and t:
                src.append(" ".join(x.text for x in s))
                trg.append(" ".join(x.text for x in t))
        if not src:
            raise UserError(f"no sentence pairs to learn a word alignment from (for {folder})")
        forward, reverse = _eflomal_links(src, trg)
        (folder / LINKS).unlink(missing_ok=True)  # links made with other priors
        write_text_atomic(folder / "priors.txt", _priors_text(src, trg, forward, reverse))
        write_json_atomic(folder / "unlinked.json", unlinked_shares(src, forward, reverse))
        seconds = round(time.perf_counter() - started, 2)
        write_json_atomic(info, {"fingerprint": digest, "unit": unit, "pairs": len(src), "seconds": seconds,
                                 "version": ALIGN_VERSION})
        log.info("word alignment: %d pairs aligned by eflomal in %.1f s (%s)", len(src), seconds, folder)
        return cls(folder)

    def links(self, pairs: Sequence[tuple[Sequence[Token], Sequence[Token]]]) -> list[tuple[set, set]]:
        """Per tokenized pair (each side non-empty), aligned with the corpus's priors: the links both directions
        agree on, and the two directions joined by grow-diag-final-and. eflomal samples and takes no seed, so a
        pair's links are kept in the folder (LINKS) once made and read back by every later run on the same corpus:
        two reviews of the same issues project, judge and correct them alike."""
        if not pairs:
            return []
        src = [" ".join(t.text for t in s) for s, _ in pairs]
        trg = [" ".join(t.text for t in t_) for _, t_ in pairs]
        fingerprint = self.info.get("fingerprint", "")
        keys = [hashlib.sha1(f"{fingerprint}\n{a}\n{b}".encode("utf-8")).hexdigest() for a, b in zip(src, trg)]
        known = self._known_links()
        todo = list({k: i for i, k in reversed(list(enumerate(keys))) if k not in known}.values())
        if todo:
            forward, reverse = _eflomal_links([src[i] for i in todo], [trg[i] for i in todo], self.priors)
            rows = []
            for i, f, r in zip(todo, forward, reverse):
                known[keys[i]] = (f, r)
                rows.append(json_line({"key": keys[i], "forward": sorted(f), "reverse": sorted(r)}).rstrip("\n"))
            _append_lines(self.folder / LINKS, rows)
        return [(f & r, grow_diag_final_and(f, r)) for f, r in (known[k] for k in keys)]

    def _known_links(self) -> dict[str, tuple[set, set]]:
        if self._links is None:
            self._links = {}
            path = self.folder / LINKS
            lines = path.read_bytes().decode("utf-8", "replace").splitlines() if path.is_file() else []
            for line in lines:
                try:
                    row = json.loads(line)
                    links = ({tuple(x) for x in row["forward"]}, {tuple(x) for x in row["reverse"]})
                    self._links.setdefault(row["key"], links)  # two runs at once may both add a pair: the first holds
                except (KeyError, TypeError, ValueError):  # a line a crash cut short: its pair is aligned again
                    continue
        return self._links

    def project(self, items: Sequence[tuple[str, str, str]]) -> list[Projection | None]:
        """Per (sentence, its reference, a phrase cut from the sentence), the phrase's projection (None where the
        phrase is not in the sentence or none of its words has a link)."""
        tokenized = {}
        for sentence, reference, _ in items:
            if (sentence, reference) not in tokenized:
                s, t = english_tokens(sentence), chinese_tokens(reference, self.unit)
                if s and t:
                    tokenized[(sentence, reference)] = (s, t)
        keys = list(tokenized)
        links = dict(zip(keys, self.links([tokenized[k] for k in keys])))
        out: list[Projection | None] = []
        for sentence, reference, phrase in items:
            if (sentence, reference) not in tokenized:
                out.append(None)
                continue
            s, t = tokenized[(sentence, reference)]
            span = phrase_words(sentence, s, phrase)
            sure, grown = links[(sentence, reference)]
            # the links both directions agree on place a phrase best (on the demo's phrases: 60% of projections
            # equal to their reference, against 56% by the grown links); where none of its words has one, the grown
            out.append((project(sure, *span, s, t, reference, self.unlinked)
                        or project(grown, *span, s, t, reference, self.unlinked)) if span else None)
        return out


def unlinked_shares(src: list[str], forward: list, reverse: list) -> dict[str, float]:
    """Per English word of the aligned lines, the share of its occurrences with no link both directions agree on."""
    seen: dict[str, int] = {}
    bare: dict[str, int] = {}
    for line, f, r in zip(src, forward, reverse):
        linked = {i for i, _ in f & r}
        for k, word in enumerate(line.split()):
            seen[word] = seen.get(word, 0) + 1
            bare[word] = bare.get(word, 0) + (k not in linked)
    return {w: round(bare.get(w, 0) / n, 4) for w, n in sorted(seen.items()) if bare.get(w)}


def _priors_text(src: list[str], trg: list[str], forward: list, reverse: list) -> str:
    """eflomal's priors (lexical, jump and fertility counts) of aligned lines, as its priors file holds them."""
    from eflomal import calculate_priors, write_priors

    fwd = [" ".join(f"{i}-{j}" for i, j in sorted(x)) for x in forward]
    rev = [" ".join(f"{i}-{j}" for i, j in sorted(x)) for x in reverse]
    buffer = io.StringIO()
    write_priors(buffer, *calculate_priors(src, trg, fwd, rev))
    return buffer.getvalue()


class ProjectedPrefills:
    """What the review page and sheet pre-fill a phrase side with: the projection of the reviewer's correction of
    the sentence the phrase was cut from (its sides whose source is not the sentence itself), so a person corrects
    a sentence once. Projections are made once per (sentence, correction)."""

    def __init__(self, aligner: PhraseAligner | None, issues: Iterable[dict]):
        from repair.stats import squeeze

        self.aligner, self.squeeze = aligner, squeeze
        self.phrases: dict[str, dict[str, None]] = {}
        for issue in issues:
            sentence = issue.get("sentence")
            for s in issue["sides"] if sentence else ():
                if squeeze(s["source"]) != squeeze(sentence):
                    self.phrases.setdefault(squeeze(sentence), {})[s["source"]] = None
        self.made: dict[tuple[str, str], dict[str, Projection | None]] = {}

    def __call__(self, corrected: dict[str, str | None]) -> dict[str, dict]:
        """{phrase: {"text", "confidence", "sentence"}} for the phrases of each corrected sentence of `corrected`
        ({source: its latest correction}; a phrase of several corrected sentences: the last one's)."""
        if self.aligner is None:
            return {}
        wanted = [(source, fixed) for source, fixed in corrected.items()
                  if fixed and self.phrases.get(self.squeeze(source))]
        todo = [(s, f, p) for s, f in wanted if (s, f) not in self.made for p in self.phrases[self.squeeze(s)]]
        for (s, f, p), x in zip(todo, self.aligner.project(todo)):
            self.made.setdefault((s, f), {})[p] = x
        out = {}
        for s, f in wanted:
            for p, x in self.made.get((s, f), {}).items():
                if x is not None and x.text:
                    out[p] = {"text": x.text, "confidence": x.confidence, "sentence": s}
        return out
