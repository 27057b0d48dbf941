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

A `terms` scope may name a second checkpoint of the same fine-tune for the taught words (`words_checkpoint`):
the epoch that fixes the corrections translates the inputs holding a corrected source, an earlier epoch (the
lowest validation loss, which has learned the words and memorized less) the inputs holding only a taught word.
With `defer`, an input holding only taught words keeps the base model's translation where that already holds
each word's taught term (`Scope.terms`: what the fine-tuned model says for the word alone): the edit applies where
the base model errs on what it taught, and what was right stays as it was.
Where the words checkpoint misses a term too, the edited model's translation is taken if it holds them
(`ScopedTranslator.second_opinion`). With `enforce`, a text holding a taught word (and no corrected source) whose
translation still lacks each of the word's terms is searched again by the edited and the base model with the word's
term as a constraint, as a glossary is enforced, and the hypothesis closest to the base model's translation taken
(`ScopedTranslator.enforced`): a fine-tune that says 水手 for "sailor" in the sentences it was corrected in may still
say 护士 in a phrase it never saw, and Purity then finds the phrase and its sentence at odds.

A fine-tune with `finetune.scope` other than `all` writes `scope.json` beside its checkpoint; the loop then
serves that checkpoint as a `ScopedTranslator` over it and the base model the scope names (`fallback`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from repair.errors import UserError
from repair.face import Translator
from repair.text import PUNCTUATION, content_words, contains_any, english_tokens, inner, singular, source_key  # noqa: F401

log = logging.getLogger(__name__)

SCOPE_FILE = "scope.json"
KINDS = ("all", "source", "words", "terms")
EDITED, FALLBACK, WORDS = 0, 1, 2  # Scope.route's answers: the models of a ScopedTranslator, in its order
KEPT = -1  # ScopedTranslator.routes: the fallback's translation, already made by the deferral check


@dataclass(frozen=True)
class Scope:
    """Which inputs an edit applies to (see the module's docstring)."""

    kind: str
    sources: tuple[str, ...]  # the corrected sources, normalized (source_key)
    share: float = 1.0  # kind=words: the least share of a corrected source's content words an input must hold
    fallback: str = ""  # the checkpoint that translates outside the scope (the unedited base model)
    words: tuple[str, ...] = ()  # kind=terms: English words whose translation the edit taught (lower case)
    words_checkpoint: str = ""  # kind=terms: the checkpoint for inputs holding only a taught word ("": the edit's)
    terms: dict = field(default_factory=dict)  # kind=terms: taught word (a final s aside) -> its Chinese terms
    defer: bool = False  # kind=terms: the base model's translation kept where it holds each taught word's term
    enforce: bool = False  # kind=terms: a text holding taught words and no corrected source whose translation lacks
    #                        a taught word's terms is searched again under the word's term as a constraint

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

    def route(self) -> Callable[[str], int]:
        """Which model translates an English text: EDITED, FALLBACK, or for kind=terms WORDS (a text that holds
        a taught word and no corrected source: the words_checkpoint's, else the edited model's)."""
        covers = self.covers()
        if self.kind != "terms":
            return lambda text: EDITED if covers(text) else FALLBACK
        keys = [s for s in self.sources if s]
        return lambda text: (EDITED if contains_any(text, keys) else WORDS if covers(text) else FALLBACK)

    def held_right(self) -> Callable[[str, str], bool]:
        """kind=terms: whether a translation of an English text holds a taught term for each taught word the
        text holds (and the text holds one); a word with no terms recorded is never held right."""
        from repair.purity.check import squeeze

        taught = frozenset(map(singular, self.words))

        def right(text: str, translation: str) -> bool:
            held = {singular(w) for w in source_key(text).split()} & taught
            said = squeeze(translation)
            return bool(held) and all(any(t and t in said for t in self.terms.get(w, ())) for w in held)

        return right

    def as_json(self) -> dict:
        return {"kind": self.kind, "share": self.share, "fallback": self.fallback, "sources": list(self.sources),
                **({"words": list(self.words)} if self.words else {}),
                **({"words_checkpoint": self.words_checkpoint} if self.words_checkpoint else {}),
                **({"terms": {w: list(t) for w, t in self.terms.items()}} if self.terms else {}),
                **({"defer": True} if self.defer else {}),
                **({"enforce": True} if self.enforce else {})}

    @classmethod
    def read(cls, path: Path) -> "Scope":
        from repair.fileio import read_json

        raw = read_json(path)
        try:
            return cls(kind=raw["kind"], sources=tuple(raw["sources"]), share=float(raw.get("share", 1.0)),
                       fallback=str(raw["fallback"]), words=tuple(str(w) for w in raw.get("words", ())),
                       words_checkpoint=str(raw.get("words_checkpoint") or ""),
                       terms={str(w): tuple(str(t) for t in ts) for w, ts in (raw.get("terms") or {}).items()},
                       defer=bool(raw.get("defer", False)), enforce=bool(raw.get("enforce", False)))
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
    if scope.words_checkpoint and not Path(scope.words_checkpoint).exists():
        raise UserError(f"{path}: the checkpoint that translates the taught words, {scope.words_checkpoint}, is "
                        f"missing; put it back there, or write its new path as \"words_checkpoint\" in {path}")
    return scope


def extended(previous: Scope | None, kind: str, share: float, base_checkpoint: str, sources: Sequence[str],
             words: Sequence[str] | Mapping[str, Sequence[str]] = (), words_checkpoint: str = "",
             defer: bool = False, enforce: bool = False) -> Scope:
    """The scope of a fine-tune on `sources`: a model that is already a scoped edit keeps its fallback and adds
    these sources and taught words (a mapping: each with its terms) to its own; words_checkpoint: this
    fine-tune's checkpoint for the taught words (all of them, an earlier cycle's too)."""
    keys = [source_key(s) for s in sources]
    taught = [w.lower() for w in words]
    terms = {singular(w.lower()): tuple(ts) for w, ts in words.items()} if isinstance(words, Mapping) else {}
    if previous is not None:
        return Scope(kind, tuple(dict.fromkeys([*previous.sources, *keys])), share, previous.fallback,
                     tuple(dict.fromkeys([*previous.words, *taught])), words_checkpoint,
                     {**previous.terms, **terms}, defer, enforce)
    return Scope(kind, tuple(dict.fromkeys(keys)), share, base_checkpoint, tuple(dict.fromkeys(taught)),
                 words_checkpoint, terms, defer, enforce)


class ScopedTranslator(Translator):
    """The edited model's translation for the inputs in scope, the fallback model's for the others (and a
    words model's for the inputs that hold only a taught word, where the scope names one); each group
    translated in one batch."""

    name = "scoped"

    def __init__(self, edited: Translator, fallback: Translator, scope: Scope, words: Translator | None = None):
        self.edited, self.fallback, self.scope = edited, fallback, scope
        self.words = words if scope.words_checkpoint else None
        if scope.words_checkpoint and words is None:
            raise ValueError(f"the scope names {scope.words_checkpoint} for its taught words: give its translator")
        self.models = (edited, fallback, self.words or edited)  # by Scope.route's answers
        self.router = scope.route()
        self.right = scope.held_right() if scope.defer else None

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir=None) -> dict | None:
        """The edited model's check (the scoped edit serves it and its base)."""
        return self.edited.check_model(sentences, valid_pairs, data_dir)

    def split(self, texts: Sequence[str]) -> list[bool]:
        """Whether each text is in the scope (translated by a fine-tuned model)."""
        return [self.router(t) != FALLBACK for t in texts]

    def routes(self, sources: Sequence[str], deferred: bool = False, kept: dict[int, str] | None = None,
               bases: dict[int, str] | None = None) -> list[int]:
        """Scope.route's answer for each source; deferred (with scope.defer): FALLBACK for a text holding only
        taught words whose base translation already holds their terms, as translate() serves it (KEPT, with
        that translation put in `kept`, where kept is given; every such text's base translation in `bases`)."""
        routes = [self.router(s) for s in sources]
        idx = [i for i, r in enumerate(routes) if r == WORDS] if deferred and self.right is not None else []
        for i, base in zip(idx, self.fallback.translate([sources[i] for i in idx]) if idx else ()):
            if bases is not None:
                bases[i] = base
            if self.right(sources[i], base):
                if kept is None:
                    routes[i] = FALLBACK
                else:
                    routes[i], kept[i] = KEPT, base
        return routes

    def routed(self, sources: Sequence[str], models: tuple, call: Callable[[object, list[int]], list],
               deferred: bool = False, kept: dict[int, str] | None = None, bases: dict[int, str] | None = None) -> list:
        """`call(model, indices)` for the sources each of `models` translates (in self.models' order), each
        group in one call; its results back in the sources' order (deferred, kept, bases: see routes; a kept
        source's result is its kept translation)."""
        routes = self.routes(sources, deferred, kept, bases)
        out: list = [kept.get(i) for i in range(len(sources))] if kept else [None] * len(sources)
        for which, model in enumerate(models):
            idx = [i for i, r in enumerate(routes) if r == which]
            if idx:
                for i, result in zip(idx, call(model, idx)):
                    out[i] = result
        return out

    def translate(self, texts: list[str]) -> list[str]:
        # with defer, the texts holding only taught words go to the base model first, and on where it missed a term
        kept: dict[int, str] = {}
        bases: dict[int, str] = {}
        out = self.routed(texts, self.models, lambda model, idx: model.translate([texts[i] for i in idx]),
                          deferred=True, kept=kept, bases=bases)
        if self.right is not None and self.words is not None:
            self.second_opinion(texts, out, kept, bases)
        if self.scope.enforce and self.scope.terms:
            self.enforced(texts, out, bases)
        return out

    def missing_terms(self, text: str, translation: str) -> list[str]:
        """The term of each taught word `text` holds whose terms `translation` all lacks: the word's longest term (a
        word's terms may include a suffix a correction put in beside it, 们 beside 水手 for "sailor"), and no word
        whose longest terms are several (a sentence correction's other words, learnt along with the word: which one
        is its translation the terms do not say)."""
        from repair.purity.check import squeeze

        said = squeeze(translation)
        held = dict.fromkeys(singular(w) for w in source_key(text).split())
        out = []
        for w in held:
            ts = [t for t in self.scope.terms.get(w, ()) if t]
            longest = [t for t in ts if len(t) == max(map(len, ts))] if ts else []
            if len(longest) == 1 and not any(t in said for t in ts):
                out.append(longest[0])
        return out

    def enforced(self, texts: Sequence[str], out: list[str], bases: dict[int, str] | None = None,
                 beam: int = 5) -> None:
        """scope.enforce: each text in the scope holding taught words and no corrected source whose translation
        lacks every term of a taught word it holds is searched again under those words' terms (the longest of
        each word's, in any order), by the edited model and by the base model (a glossary on the model that
        translates the text's phrases that hold no taught word); of the hypotheses that hold them all, the one
        closest to the base model's translation is taken (the least changed besides the taught words, so that
        the text still reads as its phrases do). Where none holds them (or no model can search), the
        translation stays. `bases`: the base model's translations already made (routes(deferred=True))."""
        from difflib import SequenceMatcher

        # texts holding a corrected source say what its correction says (which may write the word otherwise)
        todo = [(i, m) for i, t in enumerate(texts) if self.router(t) == WORDS and (m := self.missing_terms(t, out[i]))]
        if not todo:
            return
        sources, constraints = [texts[i] for i, _ in todo], [m for _, m in todo]
        found: list[list] = [[] for _ in todo]
        why = ""
        for model in dict.fromkeys((self.edited, self.fallback)):  # one model where both are the same
            searcher, why_not = model.searcher(beam)
            if searcher is None:
                why = why or why_not
                continue
            for hyps, more in zip(found, searcher.translate_constrained(sources, constraints, ordered=False)):
                hyps.extend(more)
        if not any(found):
            log.info("scope: %d translation(s) lack a taught term, not enforced (%s)", len(todo), why)
            return
        bases = dict(bases or {})
        missing = [i for i, _ in todo if i not in bases]
        for i, b in zip(missing, self.fallback.translate([texts[i] for i in missing]) if missing else ()):
            bases[i] = b
        taken = 0
        for (i, _), hyps in zip(todo, found):
            held = [h.text for h in hyps if h.met and not self.missing_terms(texts[i], h.text)]
            if held:
                out[i] = max(held, key=lambda x: SequenceMatcher(None, bases[i], x, autojunk=False).ratio())
                taken += 1
        log.info("scope: %d of %d translation(s) that lacked a taught term now hold it (finetune.scope_enforce)",
                 taken, len(todo))

    def second_opinion(self, texts: Sequence[str], out: list[str], kept: dict[int, str], bases: dict[int, str]) -> None:
        """defer with a words checkpoint: a text holding only taught words that the base model misses is
        translated by the edited model too (the words model, an earlier epoch, says a word alone right but not
        always in a phrase: "the tall young sailor" -> 护士), and of the two translations those holding every
        taught term compete: the one closest to the base model's translation (the least changed besides the
        taught words, so that its phrases, which hold no taught word and stay with the base model, still read
        the same) is taken; neither holding them: the words model's, as before. A function of the text alone.
        `bases`: the base model's translations routes(deferred=True) made of every text holding only taught words."""
        from difflib import SequenceMatcher

        idx = [i for i, t in enumerate(texts) if i not in kept and self.router(t) == WORDS]
        if not idx:
            return
        base = [bases[i] for i in idx]
        edited = self.edited.translate([texts[i] for i in idx])
        taken = 0
        for i, b, e in zip(idx, base, edited):
            held = [x for x in (out[i], e) if self.right(texts[i], x)]
            if held:
                best = max(held, key=lambda x: SequenceMatcher(None, b, x, autojunk=False).ratio())
                taken += best is e and e != out[i]
                out[i] = best
        log.info("%d text(s) holding only taught words the base model missed: the edited model's translation taken "
                 "for %d (finetune.scope_defer)", len(idx), taken)

    def __getattr__(self, name):  # the edited model's files, codecs and settings (its preprocessing is the base's)
        if name in ("edited", "fallback", "scope", "router", "words", "models", "right"):
            raise AttributeError(name)
        return getattr(self.edited, name)

    def describe(self) -> dict:
        return {"name": self.name, "scope": {k: v for k, v in self.scope.as_json().items() if k != "sources"},
                "corrected_sources": len(self.scope.sources),
                "edited": self.edited.describe(), "fallback": self.fallback.describe(),
                **({"words": self.words.describe()} if self.words is not None else {})}

    def why_no_search(self) -> str | None:
        return next((why for why in (m.why_no_search() for m in self.models) if why), None)

    def searcher(self, beam: int):
        searchers, note = [], None
        for model in dict.fromkeys(self.models):  # the edited model may stand for the words model too
            found, why = model.searcher(beam)
            if found is None:
                return None, why
            searchers.append(found)
            note = note or why
        by_model = dict(zip(dict.fromkeys(self.models), searchers))
        return _ScopedSearch(self, tuple(by_model[m] for m in self.models)), note


class _ScopedSearch:
    """Constrained search routed as translation is: each source by the model that would translate it."""

    def __init__(self, scoped: ScopedTranslator, searchers: tuple):
        self.scoped, self.searchers = scoped, searchers
        self.tgt_codec = getattr(searchers[0], "tgt_codec", None)

    def translate_constrained(self, sources: list[str], constraints: list[list[str]], **options) -> list:
        caps, starts = options.pop("max_lengths", None), options.pop("starts", None)

        def search(model, idx: list[int]) -> list:
            return model.translate_constrained([sources[i] for i in idx], [constraints[i] for i in idx],
                                               max_lengths=[caps[i] for i in idx] if caps is not None else None,
                                               starts=[starts[i] for i in idx] if starts is not None else None,
                                               **options)

        return self.scoped.routed(sources, self.searchers, search, deferred=True)  # the model whose output it is

    def translate_like(self, texts: list[str], like: str) -> list[str]:
        """The texts translated by the model that translates the source `like` (variants of a sentence by the
        sentence's model: the review memory's swapped words)."""
        return self.scoped.routed([like], self.searchers, lambda model, idx: [model.translate(texts)], deferred=True)[0]

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        return self.searchers[0].phrase_tokens(phrase, start)  # the models share their dictionaries and codecs

    def score(self, sources: list[str], targets: list[str]) -> list[float]:
        return self.scoped.routed(sources, self.searchers,
                                  lambda model, idx: model.score([sources[i] for i in idx], [targets[i] for i in idx]),
                                  deferred=True)


def served(cfg: dict, translator: Translator) -> Translator:
    """`translator` as the model it loaded is meant to be served: a scoped edit's checkpoint (scope.json beside
    it) with its fallback model (and its words model, where it names one), built from the same `translator`
    config, outside the scope; else as it is."""
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

    def load(checkpoint: str) -> Translator:
        return make_translator(cfg, files=files.with_checkpoint(checkpoint), checkpoint=None, data_dir=None,
                               **preprocessing)

    fallback = getattr(translator, "without_edit", lambda _: None)(scope.fallback)  # an adapter, switched off
    return ScopedTranslator(translator, fallback or load(scope.fallback), scope,
                            load(scope.words_checkpoint) if scope.words_checkpoint else None)
