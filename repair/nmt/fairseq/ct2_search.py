"""The suggestion step's searches on a fairseq model run with CTranslate2 (float32: fairseq's own translations and
scores), without loading fairseq where CTranslate2 can do the search itself.

CTranslate2 has no lexical constraints, but it takes a target prefix. Nearly every search the suggestion step asks for
begins its translation with its phrases (`starts`: an RTI container's own translation up to the span where the RTI's
translation goes, the partner's translation up to the replaced word, then the word's): such a search is CTranslate2's
beam search from the phrases but the last as its forced beginning (`prefix_tokens`: spelt as the model spells the
whole), the model writing the rest; the phrases joined as they are (the splice itself) are a candidate too. An n-best list (no phrases) is CTranslate2's beam search. Every
candidate is scored teacher-forced by CTranslate2 (fairseq's score, `ct2_scores`) and marked met where it holds every
phrase in order; the best `nbest` are returned, best first. A search whose phrases do not begin the translation goes
to fairseq on the checkpoint (FairseqOnDemand: loaded on first use).

Where the phrases are consecutive (a splice of the whole translation), fairseq's constrained search may still put
words between them, which a prefix does not; the review figures of both, on the demo model: docs/suggestions.md.
"""

from __future__ import annotations

import logging
from typing import Sequence

from repair.data.prepare import clean_text
from repair.nmt.fairseq.ondemand import FairseqOnDemand, ct2_scores
from repair.nmt.search import Hypothesis, contains_all

log = logging.getLogger(__name__)


class PrefixSearch:
    """The face's Searcher for a float32 CTranslate2Translator: prefix searches and n-best lists on CTranslate2,
    scores by CTranslate2, the rest by fairseq on demand. `searched` counts the searches each way."""

    def __init__(self, translator, fallback: FairseqOnDemand):
        self.t, self.fallback = translator, fallback
        self.tgt_codec = translator.tgt_codec
        self.files = translator.files
        self.searched = {"ctranslate2": 0, "fairseq": 0}
        self._vocabulary: set[str] | None = None

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        return ct2_scores(self.t, sources, targets)

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        """Target tokens of a phrase (the length caps' estimate; spelt as at a sentence's start either way)."""
        return len(self.tgt_codec.encode_all([clean_text(phrase)])[0].split())

    def translate(self, texts: list[str]) -> list[str]:
        return self.t.translate(texts)

    def __getattr__(self, name: str):  # anything else a Searcher user asks for: fairseq's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.fallback, name)

    def translate_constrained(self, sources: Sequence[str], constraints: Sequence[Sequence[str]], *, beam: int = 5,
                              nbest: int = 1, ordered: bool = True, max_lengths: Sequence[int | None] | None = None,
                              starts: Sequence[bool] | None = None, rows: int | None = None) -> list[list[Hypothesis]]:
        """As repair.nmt.fairseq.constrained.translate_constrained: `nbest` hypotheses per source, best first, each
        with its score and whether it holds its phrases (in order)."""
        n = len(sources)
        starts = list(starts) if starts is not None else [False] * n
        caps = list(max_lengths) if max_lengths is not None else [None] * n
        phrases = [[p for p in (clean_text(c) for c in cs) if p] for cs in constraints]
        here = [k for k in range(n) if not phrases[k] or (ordered and starts[k])]
        there = [k for k in range(n) if k not in set(here)]
        out: list[list[Hypothesis]] = [[] for _ in range(n)]
        if there:
            found = self.fallback.translate_constrained(
                [sources[k] for k in there], [list(constraints[k]) for k in there], beam=beam, nbest=nbest,
                ordered=ordered, max_lengths=[caps[k] for k in there], starts=[starts[k] for k in there], rows=rows)
            for k, hyps in zip(there, found):
                out[k] = hyps
            self.searched["fairseq"] += len(there)
        if here:
            for k, hyps in zip(here, self._search([sources[k] for k in here], [phrases[k] for k in here],
                                                  [caps[k] for k in here], beam, nbest)):
                out[k] = hyps
            self.searched["ctranslate2"] += len(here)
        return out

    def vocabulary(self) -> set[str]:
        """The model's target tokens (its fairseq dictionary's)."""
        if self._vocabulary is None:
            with open(self.files.tgt.dict, encoding="utf-8") as f:
                self._vocabulary = {line.split()[0] for line in f if line.strip()}
        return self._vocabulary

    def prefix_tokens(self, phrases: Sequence[str]) -> list[str]:
        """The target tokens a search begins with: the phrases joined (the candidate they make) tokenized as a whole, as
        the model spells that text, cut after the last token that ends within the phrases but the last (all of them,
        where there is one). A phrase tokenized alone is spelt as a text of its own (SentencePiece's `▁高 大` for the
        `▁高大的` of the model's own translation, jieba's words cut at its edge), which the model writes seldom; nor past a
        token the model's dictionary lacks (a piece of a word it only knows whole)."""
        if not phrases:
            return []
        forced = "".join("".join(phrases[:-1] if len(phrases) > 1 else phrases).split())
        tokens = self.tgt_codec.encode_all(["".join(phrases)])[0].split()
        vocabulary = self.vocabulary()
        cut = 0
        for i in range(1, len(tokens) + 1):
            if tokens[i - 1] not in vocabulary:  # forced as an unknown token, the model would write it as one
                break
            text = "".join(self.t._text(tokens[:i]).split())
            if len(text) > len(forced):
                break
            if forced.startswith(text):
                cut = i
        return tokens[:cut]

    def _search(self, sources: list[str], phrases: list[list[str]], caps: list[int | None], beam: int,
                nbest: int) -> list[list[Hypothesis]]:
        t = self.t
        cleaned = [clean_text(s or "") for s in sources]
        todo = [k for k, s in enumerate(cleaned) if s]
        src = t.source_tokens([cleaned[k] for k in todo])
        own_caps = t.caps(t.source_lengths(src))
        prefixes = [self.prefix_tokens(phrases[k]) for k in todo]
        groups: dict[int, list[int]] = {}
        for j, k in enumerate(todo):
            cap = caps[k] if caps[k] is not None else own_caps[j]
            groups.setdefault(max(int(cap), len(prefixes[j]) + 1), []).append(j)
        width = max(beam, nbest)
        calls = []
        for cap, group in sorted(groups.items()):
            batch = [src[j] for j in group]
            calls.append((group, t.model.translate_batch(
                batch, target_prefix=[prefixes[j] or None for j in group], beam_size=width, num_hypotheses=width,
                **t._penalties(), max_decoding_length=cap, **t._batching(batch))))
        candidates: list[list[str]] = [[] for _ in sources]
        for group, results in calls:
            for j, result in zip(group, results):
                k = todo[j]
                texts = [t._text(h) for h in result.result().hypotheses]
                if len(phrases[k]) > 1:
                    texts.append("".join(phrases[k]))  # the phrases as they are, one after the other
                candidates[k] = [x for x in dict.fromkeys(texts) if x.strip()]
        pairs = [(sources[k], x) for k in range(len(sources)) for x in candidates[k]]
        scores = dict(zip(pairs, self.score([s for s, _ in pairs], [x for _, x in pairs]))) if pairs else {}
        out = []
        for k in range(len(sources)):
            hyps = [Hypothesis(x, scores[(sources[k], x)], contains_all(x, phrases[k])) for x in candidates[k]]
            out.append(sorted(hyps, key=lambda h: -h.score)[:nbest])
        return out
