"""Review memory: what a reviewer's corrections taught, carried to the sides reviewed after them as suggestions.

A team's own text repeats its field's words, and a model that gets such a word wrong gets it wrong in every
sentence that holds it: once a reviewer has corrected it, the next side holding the word should not have to be
typed again. The memory learns, from each correction in review order, the terms it put in (words of the
correction the model's translation lacked, as the measures' term recall counts them) for the English words of
its source. A word's terms are those that every correction so far whose source holds the word contains, and
that no correction whose source lacks the word contains: one correction teaches its terms to all its words
(水手 for "hungry", "old" and "sailor" of "a hungry old sailor"), and the next corrections sort them out.
Only words the model seldom saw are learnt (fewer than `rare` times in the training English, where it is
known): a term for a common word is more likely the sentence's than the word's.

A later side whose source holds a learnt word, and whose translation lacks its terms, is offered the model's best
translation that holds them (lexically constrained beam search) among the hypotheses that stay near its own
translation (at most the terms' characters + `slack` edits away): the word put right, the rest as it was.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from repair.stats import edit_distance, squeeze

log = logging.getLogger(__name__)

ORIGIN = "the model's translation made to hold {terms}: what earlier corrections taught for {words} (review memory)"


class ReviewMemory:
    """The terms learnt so far, per English word (a final s aside). `seen`: word counts of the training English
    (None: every word may be learnt); `rare`: only words seen fewer times are learnt (0: any word)."""

    def __init__(self, stop_tokens: Sequence[str] = (), seen: Mapping[str, int] | None = None, rare: int = 100):
        from repair.purity.rti import english_stopwords

        self.stop_tokens = tuple(stop_tokens)
        self.stopwords = english_stopwords()
        self.seen, self.rare = seen, rare
        self.candidates: dict[str, set[str]] = {}
        self.learnt: list[tuple[frozenset[str], str]] = []  # (a corrected source's words, its correction squeezed)
        self._known: set[str] = set()  # sources learnt from (a source corrected twice counts once)

    def words(self, source: str) -> frozenset[str]:
        from repair.purity.scoped import content_words, singular

        return frozenset(singular(w) for w in content_words(source, self.stopwords))

    def learn(self, source: str, translation: str, correction: str) -> None:
        """One correction of `source`, whose model translation was `translation`."""
        from repair.measures import correction_terms

        if source in self._known or not correction.strip():
            return
        self._known.add(source)
        words = self.words(source)
        self.learnt.append((words, squeeze(correction)))
        terms = correction_terms([{"translation": translation, "correction": correction}], self.stop_tokens)
        for w in words:
            if terms and (self.seen is None or not self.rare or self.seen.get(w, 0) < self.rare):
                self.candidates.setdefault(w, set()).update(terms)

    def terms(self, source: str, translation: str) -> dict[str, list[str]]:
        """{word: its terms that `translation` lacks}, for the learnt words of `source`."""
        have = squeeze(translation)
        out: dict[str, list[str]] = {}
        for w in sorted(self.words(source) & set(self.candidates)):
            ts = [t for t in sorted(self.candidates[w]) if t not in have
                  and all((t in corrected) == (w in ws) for ws, corrected in self.learnt)]
            if ts:
                out[w] = ts
        return out


class MemorySuggester:
    """Suggestions from a ReviewMemory, searched by `searcher` (a Translator's searcher: fairseq's constrained
    beam search); `cost` adds up what it took (seconds, searched), over this suggester and its fresh() ones."""

    def __init__(self, searcher, memory: ReviewMemory, beam: int = 5, slack: int = 2):
        self.fs, self.memory, self.beam, self.slack = searcher, memory, beam, slack
        self.cost = {"seconds": 0.0, "searched": 0}
        self._cache: dict[tuple[str, str, tuple[str, ...]], dict | None] = {}

    def fresh(self) -> "MemorySuggester":
        """The same searcher with an empty memory (of the same settings); the searches already made are reused."""
        m = self.memory
        other = MemorySuggester(self.fs, ReviewMemory(m.stop_tokens, m.seen, m.rare), self.beam, self.slack)
        other._cache, other.cost = self._cache, self.cost
        return other

    def suggest(self, sides: Sequence[tuple[str, str]]) -> list[dict | None]:
        """For each (source, translation): a suggestion {"text", "origin", "terms", "score"}, or None."""
        began = time.perf_counter()
        wanted = [self.memory.terms(s, t) for s, t in sides]
        keys = [(s, t, tuple(sorted({x for ts in w.values() for x in ts}))) for (s, t), w in zip(sides, wanted)]
        todo = [k for k in dict.fromkeys(keys) if k[2] and k not in self._cache]
        if todo:
            found = self.fs.translate_constrained([k[0] for k in todo], [list(k[2]) for k in todo],
                                                  beam=self.beam, nbest=self.beam, ordered=False)
            self.cost["searched"] += len(todo)
            for (source, translation, terms), hyps in zip(todo, found):
                near = [h for h in hyps if h.met and squeeze(h.text) != squeeze(translation)
                        and edit_distance(h.text, translation) <= sum(map(len, terms)) + self.slack]
                self._cache[(source, translation, terms)] = (
                    {"text": near[0].text, "terms": list(terms), "score": round(float(near[0].score), 4)} if near else None)
        out = []
        for key, w in zip(keys, wanted):
            got = self._cache.get(key) if key[2] else None
            out.append(None if got is None else
                       {**got, "origin": ORIGIN.format(terms="、".join(got["terms"]), words=", ".join(sorted(w)))})
        self.cost["seconds"] += time.perf_counter() - began
        return out


class PageMemory:
    """The review page's memory: it learns the corrections saved so far in `store` (a CorrectionStore; each
    once, in the order saved) and offers its suggestions for the sides of the issues not judged yet (which the
    page offers before the issue's own). `suggester` None: no memory, nothing offered."""

    def __init__(self, suggester: MemorySuggester | None, issues: Sequence[dict], store):
        self.suggester, self.issues, self.store = suggester, issues, store
        self.learnt: set[tuple[str, str]] = set()

    def offers(self) -> dict[str, dict[str, dict]]:
        """{issue id: {role: suggestion}} for the issues not judged yet."""
        if self.suggester is None:
            return {}
        issues, judged = self.issues, self.store.latest
        for c in self.store.corrections():
            if (c["source"], c["correction"]) not in self.learnt:
                self.learnt.add((c["source"], c["correction"]))
                self.suggester.memory.learn(c["source"], c.get("translation") or "", c["correction"])
        sides = [(i["id"], s["role"], s["source"], s["translation"]) for i in issues if i["id"] not in judged
                 for s in i["sides"]]
        found = self.suggester.suggest([(src, tr) for _, _, src, tr in sides]) if sides else []
        out: dict[str, dict[str, dict]] = {}
        for (iid, role, _, _), got in zip(sides, found):
            if got is not None:
                out.setdefault(iid, {})[role] = {**got, "role": role}
        return out
