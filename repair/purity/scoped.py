"""A scoped edit: the fine-tuned model translates the inputs a repair is about, the base model everything else.

Model editing keeps an edit local by deciding, per input, whether the edit applies (SERAC's scope classifier,
GRACE's deferral radius); outside the scope the unedited model answers, so what was right stays right. Here the
scope is read off the corrected English sources:

- `source`: the input contains a corrected source as a run of whole tokens (case and spacing aside): the texts
  the locality measure calls related;
- `words`: the input contains at least `share` of some corrected source's content words (not stop words or
  punctuation), in any order: wider, so that a fix can reach other phrasings of the same words;
- `terms`: the input contains a corrected source, or one of the words the edit taught (`Scope.words`, found by
  the fine-tune stage: words of the corrected sources the model seldom saw in training whose own translation by
  the fine-tuned model is mostly words a correction put in; a final s aside).

A fine-tune with `finetune.scope` other than `all` writes `scope.json` beside its checkpoint; the loop then
serves that checkpoint as a `ScopedTranslator` over it and the base model the scope names (`fallback`).
"""

from __future__ import annotations

import logging
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from repair.errors import UserError
from repair.purity.translators import Translator

log = logging.getLogger(__name__)

SCOPE_FILE = "scope.json"
KINDS = ("all", "source", "words", "terms")
PUNCTUATION = set(string.punctuation) | set("，。、；：？！“”‘’（）《》【】…—·")


def source_key(text: str) -> str:
    """English normalized for containment: lower case, tokens joined by one space."""
    return " ".join(text.lower().split())


def contains_any(text: str, sources: Iterable[str]) -> bool:
    """Whether the English `text` contains one of `sources` (normalized keys) as a run of whole tokens."""
    padded = f" {source_key(text)} "
    return any(f" {s} " in padded for s in sources if s)


def content_words(text: str, stopwords: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in source_key(text).split() if w not in stopwords and not set(w) <= PUNCTUATION)


def singular(word: str) -> str:
    """A word with a final s aside (otter, otters), so that a taught noun covers its other number."""
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


@dataclass(frozen=True)
class Scope:
    """Which inputs an edit applies to (see the module's docstring)."""

    kind: str
    sources: tuple[str, ...]  # the corrected sources, normalized (source_key)
    share: float = 1.0  # kind=words: the least share of a corrected source's content words an input must hold
    fallback: str = ""  # the checkpoint that translates outside the scope (the unedited base model)
    words: tuple[str, ...] = ()  # kind=terms: English words whose translation the edit taught (lower case)

    def __post_init__(self):
        if self.kind not in KINDS[1:]:
            raise UserError(f"scope kind {self.kind!r}: choose one of {', '.join(KINDS[1:])}")
        if not 0 < self.share <= 1:
            raise UserError(f"scope share {self.share}: give a number above 0 and at most 1")

    def covers(self) -> Callable[[str], bool]:
        """A predicate on English texts: whether the edit applies to it."""
        keys = [s for s in self.sources if s]
        if self.kind == "source":
            return lambda text: contains_any(text, keys)
        if self.kind == "terms":
            taught = frozenset(map(singular, self.words))
            return lambda text: (contains_any(text, keys)
                                 or not taught.isdisjoint(map(singular, source_key(text).split())))
        from repair.purity.rti import english_stopwords

        stop = english_stopwords()
        wanted = [w for w in (content_words(s, stop) for s in keys) if w]

        def covered(text: str) -> bool:
            words = content_words(text, stop)
            return any(len(w & words) >= self.share * len(w) for w in wanted)

        return covered

    def as_json(self) -> dict:
        return {"kind": self.kind, "share": self.share, "fallback": self.fallback, "sources": list(self.sources),
                **({"words": list(self.words)} if self.words else {})}

    @classmethod
    def read(cls, path: Path) -> "Scope":
        from repair.fileio import read_json

        raw = read_json(path)
        try:
            return cls(kind=raw["kind"], sources=tuple(raw["sources"]), share=float(raw.get("share", 1.0)),
                       fallback=str(raw["fallback"]), words=tuple(str(w) for w in raw.get("words", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"{path}: not a scope file ({e}); it needs kind, sources and fallback") from None
        except UserError as e:  # a kind or share it cannot mean
            raise UserError(f"{path}: {e}") from None


def scope_of(checkpoint: str | Path) -> Scope | None:
    """The scope written beside a fine-tuned checkpoint, or None for a model that is not a scoped edit."""
    path = Path(checkpoint).parent / SCOPE_FILE
    if not path.is_file():
        return None
    scope = Scope.read(path)
    if not Path(scope.fallback).exists():
        raise UserError(f"{path}: the base model that translates outside the scope, {scope.fallback}, is missing; "
                        f"put it back there, or write its new path as \"fallback\" in {path}")
    return scope


def extended(previous: Scope | None, kind: str, share: float, base_checkpoint: str, sources: Sequence[str],
             words: Sequence[str] = ()) -> Scope:
    """The scope of a fine-tune on `sources`: a model that is already a scoped edit keeps its fallback and adds
    these sources (and taught words) to its own."""
    keys = [source_key(s) for s in sources]
    taught = [w.lower() for w in words]
    if previous is not None:
        return Scope(kind, tuple(dict.fromkeys([*previous.sources, *keys])), share, previous.fallback,
                     tuple(dict.fromkeys([*previous.words, *taught])))
    return Scope(kind, tuple(dict.fromkeys(keys)), share, base_checkpoint, tuple(dict.fromkeys(taught)))


class ScopedTranslator(Translator):
    """The edited model's translation for the inputs in scope, the fallback model's for the others; each
    group translated in one batch."""

    name = "scoped"

    def __init__(self, edited: Translator, fallback: Translator, scope: Scope):
        self.edited, self.fallback, self.scope = edited, fallback, scope
        self.covers = scope.covers()

    def split(self, texts: Sequence[str]) -> list[bool]:
        return [self.covers(t) for t in texts]

    def routed(self, sources: Sequence[str], models: tuple, call: Callable[[object, list[int]], list]) -> list:
        """`call(model, indices)` for the sources in scope with `models[0]` and for the others with `models[1]`,
        each group in one call; its results back in the sources' order."""
        inside = self.split(sources)
        out: list = [None] * len(sources)
        for model, want in zip(models, (True, False)):
            idx = [i for i, x in enumerate(inside) if x == want]
            if idx:
                for i, result in zip(idx, call(model, idx)):
                    out[i] = result
        return out

    def translate(self, texts: list[str]) -> list[str]:
        return self.routed(texts, (self.edited, self.fallback), lambda model, idx: model.translate([texts[i] for i in idx]))

    def __getattr__(self, name):  # the edited model's files, codecs and settings (its preprocessing is the base's)
        if name in ("edited", "fallback", "scope", "covers"):
            raise AttributeError(name)
        return getattr(self.edited, name)

    def describe(self) -> dict:
        return {"name": self.name, "scope": {k: v for k, v in self.scope.as_json().items() if k != "sources"},
                "corrected_sources": len(self.scope.sources),
                "edited": self.edited.describe(), "fallback": self.fallback.describe()}

    def why_no_search(self) -> str | None:
        return self.edited.why_no_search() or self.fallback.why_no_search()

    def searcher(self, beam: int):
        edited, note = self.edited.searcher(beam)
        fallback, why = self.fallback.searcher(beam)
        if edited is None or fallback is None:
            return None, note if edited is None else why
        return _ScopedSearch(self, edited, fallback), note


class _ScopedSearch:
    """Constrained search routed as translation is: each source by the model that would translate it."""

    def __init__(self, scoped: ScopedTranslator, edited, fallback):
        self.scoped, self.edited, self.fallback = scoped, edited, fallback
        self.tgt_codec = edited.tgt_codec

    def translate_constrained(self, sources: list[str], constraints: list[list[str]], **options) -> list:
        caps, starts = options.pop("max_lengths", None), options.pop("starts", None)

        def search(model, idx: list[int]) -> list:
            return model.translate_constrained([sources[i] for i in idx], [constraints[i] for i in idx],
                                               max_lengths=[caps[i] for i in idx] if caps is not None else None,
                                               starts=[starts[i] for i in idx] if starts is not None else None,
                                               **options)

        return self.scoped.routed(sources, (self.edited, self.fallback), search)

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        return self.edited.phrase_tokens(phrase, start)  # both models share their dictionaries and codecs

    def score(self, sources: list[str], targets: list[str]) -> list[float]:
        return self.scoped.routed(sources, (self.edited, self.fallback),
                                  lambda model, idx: model.score([sources[i] for i in idx], [targets[i] for i in idx]))


def served(cfg: dict, translator: Translator) -> Translator:
    """`translator` as the model it loaded is meant to be served: a scoped edit's checkpoint (scope.json beside
    it) with its fallback model, built from the same `translator` config, outside the scope; else as it is."""
    files = getattr(translator, "files", None)
    scope = scope_of(files.checkpoint) if files is not None else None
    if scope is None:
        return translator
    from repair.purity.translators import make_translator

    log.info("%s is a scoped edit: inputs outside the scope of its %s corrected sources go to %s",
             files.checkpoint, len(scope.sources), scope.fallback)
    # the base model has the fine-tuned one's preprocessing (a fine-tune keeps it), and a base checkpoint the loop
    # trained has no dictionaries beside it: the fine-tuned model's files, on the base checkpoint
    preprocessing = {k: None for k in getattr(type(translator), "extra_options", ())}
    fallback = make_translator(cfg, files=files.with_checkpoint(scope.fallback), checkpoint=None, data_dir=None,
                               **preprocessing)
    return ScopedTranslator(translator, fallback, scope)
