"""The suggestion step's searcher for a CTranslate2 model: fairseq on the checkpoint, loaded only when a search is
asked for, and the model's scores from CTranslate2 itself where it computes as fairseq does (float32).

Importing torch and fairseq and loading the checkpoint is most of the step where the scores set every side aside
(`suggest.min_score`: a model whose translations of news text repeat themselves); a teacher-forced score is one
`score_batch` pass of CTranslate2, whose float32 scores are fairseq's up to rounding (tests/test_ct2.py compares them).
In float32 CTranslate2 also does the searches (repair.nmt.ct2.search), and this loads fairseq only for phrases in any
order (the review memory's terms).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from repair.data.prepare import clean_text
from repair.nmt.ct2.search import SCORE_BATCH_TOKENS


def ct2_scores(translator, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
    """What repair.nmt.fairseq.constrained.score_translations gives with fairseq, from a CTranslate2Translator: the
    log-probability of each target's tokens and the end token, over their number ** len_penalty; an empty source or
    target scores -inf."""
    out = [-math.inf] * len(sources)
    cleaned = [(clean_text(s or ""), clean_text(x or "")) for s, x in zip(sources, targets)]
    todo = [i for i, (s, x) in enumerate(cleaned) if s and x]
    if not todo:
        return out
    src = translator.source_tokens([cleaned[i][0] for i in todo])
    tgt = [line.split() for line in translator.tgt_codec.encode_all([cleaned[i][1] for i in todo])]
    results = translator.model.score_batch(src, tgt, max_batch_size=SCORE_BATCH_TOKENS, batch_type="tokens",
                                           asynchronous=True)
    for i, y, result in zip(todo, tgt, results):
        out[i] = sum(result.result().log_probs) / (len(y) + 1) ** translator.len_penalty
    return out


class FairseqOnDemand:
    """What searches for a CTranslate2 model (see Translator.searcher): `score` from `scorer` where given (no
    fairseq), everything else (translate_constrained, tgt_codec, phrase_tokens) from the FairseqTranslator that
    `build` makes on first use."""

    def __init__(self, build: Callable[[], object], scorer: Callable[[Sequence[str], Sequence[str]], list] | None):
        self._build, self._scorer, self._fairseq = build, scorer, None

    @property
    def loaded(self) -> bool:
        return self._fairseq is not None

    def fairseq(self):
        if self._fairseq is None:
            self._fairseq = self._build()
        return self._fairseq

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        if self._scorer is not None:
            return self._scorer(sources, targets)
        return self.fairseq().score(sources, targets)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.fairseq(), name)
