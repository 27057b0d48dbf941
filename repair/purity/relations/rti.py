"""Purity's relation: a referentially transparent input (a noun phrase) should translate the same alone and
inside the phrases and the sentence that contain it."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

from repair.errors import UserError
from repair.purity.check import DEFAULT_STOP_TOKENS, missing_tokens
from repair.purity.relations.base import Case, Check, Parsed, Relation, Role
from repair.purity.rti import DEFAULT_MAX_WORDS, DEFAULT_MIN_CONTENT_WORDS, TreeSyntaxError, extract, load_stopwords


def stopword_set(stopwords: str | Path | Iterable[str] | None) -> frozenset[str]:
    """A file of English stop words, a collection of them, or None for NLTK's list."""
    if stopwords is None or isinstance(stopwords, (str, Path)):
        return load_stopwords(str(stopwords) if stopwords is not None else None)
    return frozenset(w.lower() for w in stopwords)


class RTIRelation(Relation):
    name = "rti"
    description = "a noun phrase (RTI) translates the same alone and in the phrases containing it"
    roles = (Role("container", "Container", "the whole phrase", "c"),
             Role("rti", "RTI", "the part inside it", "r"))
    evidence_label = "Missing from the container's translation:"

    def __init__(self, *, unit: str = "char", max_words: int = DEFAULT_MAX_WORDS,
                 min_content_words: int = DEFAULT_MIN_CONTENT_WORDS,
                 stopwords: str | Path | Iterable[str] | None = None,
                 stop_tokens: Iterable[str] = DEFAULT_STOP_TOKENS):
        self.unit = unit
        self.max_words = max_words
        self.min_content_words = min_content_words
        self.stopwords = stopword_set(stopwords)
        self.stop_tokens = frozenset(stop_tokens)
        self._rtis = 0

    def cases(self, parsed: Sequence[Parsed]) -> list[Case]:
        seen: dict[tuple[str, str], Case] = {}
        rtis: set[str] = set()
        for p in parsed:
            try:
                found = extract(p.tree, p.sentence, max_words=self.max_words,
                                min_content_words=self.min_content_words, stopwords=self.stopwords)
            except TreeSyntaxError as e:
                raise UserError(f"{p.where}: the tree for this sentence cannot be read ({e}): {p.tree[:120]!r}") from None
            rtis.update(found.rtis)
            for container, rti in found.pairs:
                if (container, rti) not in seen:
                    seen[(container, rti)] = Case(self.name, found.sentence, (("container", container), ("rti", rti)),
                                                  (container, rti))
        self._rtis = len(rtis)
        return list(seen.values())

    def check(self, case: Case, translation: Mapping[str, str]) -> Check:
        container, rti = (source for _, source in case.sides)
        missing = missing_tokens(translation[rti], translation[container], self.unit, self.stop_tokens)
        return Check(len(missing), tuple(missing))

    def counts(self) -> dict:
        return {"rtis": self._rtis}
