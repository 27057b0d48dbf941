"""The suggestion step's searcher for a CTranslate2 model: fairseq on the checkpoint, loaded only when a search is
asked for, and the model's scores from CTranslate2 itself where it computes as fairseq does (float32).

Importing torch and fairseq and loading the checkpoint is most of the step where the scores set every side aside
(`suggest.min_score`: a model whose translations of news text repeat themselves); a teacher-forced score is one
`score_batch` pass of CTranslate2, whose float32 scores are fairseq's up to rounding (tests/test_ct2.py compares them).
In float32 CTranslate2 also does the searches (repair.nmt.ct2.search), and this loads fairseq only for phrases in any
order (the review memory's terms).
"""

from __future__ import annotations

from typing import Callable, Sequence

from repair.nmt.ct2.search import OnDemand, teacher_forced


def ct2_scores(translator, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
    """What repair.nmt.fairseq.constrained.score_translations gives with fairseq, from a CTranslate2Translator: the
    log-probability of each target's tokens and the end token, over their number ** len_penalty; an empty source or
    target scores -inf."""
    return teacher_forced(translator, sources, targets, translator.target_tokens,
                          lambda log_probs, y: sum(log_probs) / (len(y) + 1) ** translator.len_penalty)


class FairseqOnDemand(OnDemand):
    """What searches for a CTranslate2 model (see Translator.searcher): `score` from `scorer` where given (no
    fairseq), everything else (translate_constrained, tgt_codec, phrase_tokens) from the FairseqTranslator that
    `build` makes on first use."""

    def __init__(self, build: Callable[[], object], scorer: Callable[[Sequence[str], Sequence[str]], list] | None):
        super().__init__(build)
        self._scorer = scorer

    def fairseq(self):
        return self.searcher()

    def score(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        if self._scorer is not None:
            return self._scorer(sources, targets)
        return self.fairseq().score(sources, targets)
