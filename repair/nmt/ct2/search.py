"""The suggestion step's searches on a model run with CTranslate2, by CTranslate2 itself: a fairseq model in float32
(fairseq's own translations and scores) without loading fairseq, a transformers model without loading it in-process.

CTranslate2 has no lexical constraints, but it takes a target prefix. Nearly every search the suggestion step asks for
begins its translation with its phrases (`starts`: an RTI container's own translation up to the span where the RTI's
translation goes, the partner's translation up to the replaced word, then the word's): such a search is CTranslate2's
beam search from the phrases but the last as its forced beginning (`prefix_tokens`: spelt as the model spells the
whole), the model writing the rest; the phrases joined as they are (the splice itself) are a candidate too. Phrases
that need not begin the translation (a container none of whose spans is close to its RTI's translation) are put after
each beginning of the model's own translation in turn, each such prefix searched for its best continuation. An n-best
list (no phrases) is CTranslate2's beam search. Every candidate is scored teacher-forced by CTranslate2 (the
score as the family's own search scores it) and marked met where it holds every phrase in order; the best `nbest` are
returned, those that hold them first, best first. Only two or more phrases in any order (the review memory's terms)
go to the family's own search (`fallback`: fairseq on the checkpoint, loaded on first use; the transformers model
in-process).

A lexically constrained search may put words between the phrases, and choose the words before a phrase freely, which
these prefixes do not; the review figures of both, on the demo's models: docs/suggestions.md.

What the translator gives (repair.nmt.fairseq.ct2, repair.nmt.hf.ct2): `model` (a ctranslate2.Translator), `tgt_codec`,
`files`, `translate`, `source_tokens(cleaned texts)`, `target_tokens(texts)`, `text_of(tokens)`, `target_vocabulary()`,
`decoder_prefix` (tokens every target begins with: a language token), `search_caps(source tokens)`,
`search_options(batch)` (translate_batch's length penalty and batching) and `teacher_scores(sources, targets)`.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.nmt.search import Hypothesis, contains_all

log = logging.getLogger(__name__)

# tokens per score_batch batch (CTranslate2 sorts a call's examples by length first): small batches keep the whole
# vocabulary's log probabilities at every position in the CPU's caches (2 cores, 300 of the CNN 200's Purity texts and
# their translations, encoded: 0.45-0.52 s at 2,000, 0.42 at 1,000, 0.28 at 400, 0.25 at 200, 0.25-0.26 at 100)
SCORE_BATCH_TOKENS = 200


def teacher_forced(translator, sources: Sequence[str], targets: Sequence[str], target_tokens, per) -> list[float]:
    """Each target scored as its source's translation in one score_batch pass of the translator's CTranslate2 model:
    `per(log_probs, target tokens)` of each, the targets' tokens from `target_tokens(texts)`; -inf where the source
    or the target is empty."""
    out = [-math.inf] * len(sources)
    cleaned = [(clean_text(s or ""), clean_text(x or "")) for s, x in zip(sources, targets)]
    todo = [i for i, (s, x) in enumerate(cleaned) if s and x]
    if not todo:
        return out
    src = translator.source_tokens([cleaned[i][0] for i in todo])
    tgt = target_tokens([cleaned[i][1] for i in todo])
    results = translator.model.score_batch(src, tgt, max_batch_size=SCORE_BATCH_TOKENS, batch_type="tokens",
                                           asynchronous=True)
    for i, y, result in zip(todo, tgt, results):
        out[i] = per(result.result().log_probs, y)
    return out


def converted_vocabulary(path) -> list[str]:
    """A converted model's target tokens (CTranslate2's own files: target_vocabulary or shared_vocabulary, .json or
    .txt)."""
    from pathlib import Path

    for name in ("target_vocabulary", "shared_vocabulary"):
        for ext in ("json", "txt"):
            f = Path(path) / f"{name}.{ext}"
            if f.exists():
                text = f.read_text(encoding="utf-8")
                return json.loads(text) if ext == "json" else text.splitlines()
    raise UserError(f"{path}: no target_vocabulary or shared_vocabulary file (not a CTranslate2 model folder)")


class OnDemand:
    """A Searcher built on first use (`build`): the family's own search, for what a prefix cannot do."""

    def __init__(self, build):
        self._build, self._searcher = build, None

    @property
    def loaded(self) -> bool:
        return self._searcher is not None

    def searcher(self):
        if self._searcher is None:
            self._searcher = self._build()
        return self._searcher

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.searcher(), name)


class PrefixSearch:
    """The face's Searcher for a CTranslate2 translator: prefix searches and n-best lists on CTranslate2, scores by
    CTranslate2, phrases in any order by `fallback` (a Searcher). `searched` counts the searches each way."""

    def __init__(self, translator, fallback):
        self.t, self.fallback = translator, fallback
        self.tgt_codec = translator.tgt_codec
        self.files = translator.files
        self.searched = {"ctranslate2": 0, "fallback": 0}
        self._vocabulary: set[str] | None = None

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        return self.t.teacher_scores(sources, targets)

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        """Target tokens of a phrase (the length caps' estimate; spelt as at a sentence's start either way)."""
        return len(self.t.target_tokens([clean_text(phrase)])[0])

    def translate(self, texts: list[str]) -> list[str]:
        return self.t.translate(texts)

    def __getattr__(self, name: str):  # anything else a Searcher user asks for: the fallback's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.fallback, name)

    def translate_constrained(self, sources: Sequence[str], constraints: Sequence[Sequence[str]], *, beam: int = 5,
                              nbest: int = 1, ordered: bool = True, max_lengths: Sequence[int | None] | None = None,
                              starts: Sequence[bool] | None = None, rows: int | None = None) -> list[list[Hypothesis]]:
        """As repair.nmt.fairseq.constrained.translate_constrained: `nbest` hypotheses per source, best first, each
        with its score and whether it holds its phrases (in order). Two or more phrases in any order go to the
        fallback."""
        n = len(sources)
        starts = list(starts) if starts is not None else [False] * n
        caps = list(max_lengths) if max_lengths is not None else [None] * n
        phrases = [[p for p in (clean_text(c) for c in cs) if p] for cs in constraints]
        # one phrase is in order whatever the order asked (the review memory's single terms)
        here = [k for k in range(n) if len(phrases[k]) < 2 or ordered]
        there = [k for k in range(n) if len(phrases[k]) >= 2 and not ordered]
        out: list[list[Hypothesis]] = [[] for _ in range(n)]
        if there:
            found = self.fallback.translate_constrained(
                [sources[k] for k in there], [list(constraints[k]) for k in there], beam=beam, nbest=nbest,
                ordered=ordered, max_lengths=[caps[k] for k in there], starts=[starts[k] for k in there], rows=rows)
            for k, hyps in zip(there, found):
                out[k] = hyps
            self.searched["fallback"] += len(there)
        if here:
            for k, hyps in zip(here, self._search([sources[k] for k in here], [phrases[k] for k in here],
                                                  [caps[k] for k in here], [starts[k] for k in here], beam, nbest)):
                out[k] = hyps
            self.searched["ctranslate2"] += len(here)
        return out

    def vocabulary(self) -> set[str]:
        """The model's target tokens."""
        if self._vocabulary is None:
            self._vocabulary = set(self.t.target_vocabulary())
        return self._vocabulary

    def prefix_tokens(self, phrases: Sequence[str], every: bool = False) -> list[str]:
        """The target tokens a search begins with: the phrases joined (the candidate they make) tokenized as a whole, as
        the model spells that text, cut after the last token that ends within the phrases but the last (`every`: all
        of them; all where there is one). A phrase tokenized alone is spelt as a text of its own (SentencePiece's
        `▁高 大` for the `▁高大的` of the model's own translation, jieba's words cut at its edge), which the model writes
        seldom; nor past a token the model's dictionary lacks (a piece of a word it only knows whole)."""
        if not phrases:
            return []
        forced = "".join("".join(phrases[:-1] if len(phrases) > 1 and not every else phrases).split())
        tokens = self.t.target_tokens(["".join(phrases)])[0]
        vocabulary = self.vocabulary()
        cut = 0
        for i in range(1, len(tokens) + 1):
            if tokens[i - 1] not in vocabulary:  # forced as an unknown token, the model would write it as one
                break
            text = "".join(self.t.text_of(tokens[:i]).split())
            if len(text) > len(forced):
                break
            if forced.startswith(text):
                cut = i
        return tokens[:cut]

    def heads(self, translation: str) -> list[str]:
        """The beginnings of a translation at each of its tokens' ends, the empty one first (where a phrase that need
        not begin the translation may go)."""
        tokens = self.t.target_tokens([translation])[0]
        whole = "".join(translation.split())
        out = [""]
        for i in range(1, len(tokens)):
            head = "".join(self.t.text_of(tokens[:i]).split())
            if head and whole.startswith(head) and head != out[-1]:
                out.append(head)
        return out

    def _search(self, sources: list[str], phrases: list[list[str]], caps: list[int | None], starts: list[bool],
                beam: int, nbest: int) -> list[list[Hypothesis]]:
        """Searches: (source, prefix, hypotheses kept) each. An n-best list: no prefix, `width` kept. Phrases that begin
        the translation: the prefix of all but the last, `width` kept, and the phrases joined a candidate. Phrases that
        need not: the model's own translation up to each of its tokens (`heads`) then the phrases, each prefix searched
        keeping its best continuation (where the model would put them: a constrained search decides it by the same
        scores)."""
        t = self.t
        width = max(beam, nbest)
        cleaned = [clean_text(s or "") for s in sources]
        todo = [k for k, s in enumerate(cleaned) if s]
        inserting = [k for k in todo if phrases[k] and not starts[k]]
        own = dict(zip(inserting, t.translate([sources[k] for k in inserting]))) if inserting else {}
        candidates: list[list[str]] = [[] for _ in sources]
        items: list[tuple[int, list[str], int]] = []
        for k in todo:
            if not phrases[k]:
                items.append((k, [], width))
            elif starts[k]:
                items.append((k, self.prefix_tokens(phrases[k]), width))
                if len(phrases[k]) > 1:
                    candidates[k].append("".join(phrases[k]))  # the phrases as they are, one after the other
            else:
                for head in self.heads(own[k]):
                    items.append((k, self.prefix_tokens([head, *phrases[k]], every=True), 1))
        src = dict(zip(todo, t.source_tokens([cleaned[k] for k in todo])))
        own_caps = dict(zip(todo, t.search_caps([src[k] for k in todo])))
        first = list(t.decoder_prefix)
        groups: dict[tuple[int, int], list[int]] = {}
        for j, (k, prefix, kept) in enumerate(items):
            cap = caps[k] if caps[k] is not None else own_caps[k]
            groups.setdefault((max(int(cap), len(prefix) + 1), kept), []).append(j)
        calls = []
        for (cap, kept), group in sorted(groups.items()):
            batch = [src[items[j][0]] for j in group]
            calls.append((group, t.model.translate_batch(
                batch, target_prefix=[first + items[j][1] or None for j in group], beam_size=width,
                num_hypotheses=kept, max_decoding_length=cap + len(first), **t.search_options(batch))))
        for group, results in calls:
            for j, result in zip(group, results):
                candidates[items[j][0]] += [t.text_of(h[len(first):]) for h in result.result().hypotheses]
        candidates = [[x for x in dict.fromkeys(c) if x.strip()] for c in candidates]
        pairs = [(sources[k], x) for k in range(len(sources)) for x in candidates[k]]
        scores = dict(zip(pairs, self.score([s for s, _ in pairs], [x for _, x in pairs]))) if pairs else {}
        out = []
        for k in range(len(sources)):
            hyps = [Hypothesis(x, scores[(sources[k], x)], contains_all(x, phrases[k])) for x in candidates[k]]
            out.append(sorted(hyps, key=lambda h: (not h.met, -h.score))[:nbest])  # those that hold the phrases first
        return out
