"""fairseq's end of the search at the output cap, on CTranslate2 (the fairseq family's CTranslate2 translator,
repair.nmt.fairseq.ct2). At the cap fairseq ends every open beam with the end token; CTranslate2 takes the best `beam`
of all continuations at its last step. A text that reaches the cap is decided as fairseq would (`_fairseq_rule`,
`_AtCap`); CTranslate2's own stop is `_own_rule`. A length penalty of 0 is searched as fairseq searches it too
(`_penalties`)."""

from __future__ import annotations

import logging
import math
from typing import Sequence

from repair.nmt.ct2.cache import ctranslate2_version

logger = logging.getLogger(__name__)

# score_batch computes the whole target vocabulary's log probabilities at every position of a batch: batches of at most
# this many target tokens keep them in the CPU's caches (the 684 hypotheses at the cap of Purity on the CNN 200, 2 cores:
# 0.77-0.82 s in batches of up to 2,000 source tokens, 0.57-0.60 s at 200 target tokens, 0.62-0.63 s at 400)
SCORE_TOKENS = 200
# fairseq's rule at the cap searches every text once keeping every hypothesis where at least this share of a
# translator's texts reach the cap, else searches those that reach it again (the same translations; 2 cores, one
# model: 500 Tatoeba sentences, 1% at the cap, 0.5 s searched again against 0.6-0.7 s in one search; the 582 texts
# of Purity on the CNN 200, 26% at the cap, 3.2 s against 2.6 s)
CAP_SHARE = 0.12
NO_EARLY_EXIT = 1e-30  # the coverage penalty given with translator.len_penalty=0 (see _penalties)


class FairseqCapRule:
    """The search at the cap, mixed into repair.nmt.fairseq.ct2.CTranslate2Translator (its model, beam, caps,
    `_batching`, `_end`, `_cap_counts` and `_cap_lock`)."""

    def _own_rule(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> dict[int, list[str]]:
        """CTranslate2's own stop at the cap: the best hypothesis of a search up to cap + 1 tokens, cut at the cap.
        One call per cap, all submitted before any is awaited: the workers take batches from every group."""
        calls = [(cap, group, self._first_search([tokens[k] for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen = {}
        for cap, group, results in calls:
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                chosen[k] = hypothesis[:-1] if self._ended(hypothesis) else hypothesis[:cap]
        return chosen

    def _penalties(self) -> dict:
        """The search's length penalty. At 0 CTranslate2 would end a search as soon as its best hypothesis ends,
        whatever the patience (it does so where the length and coverage penalties are both 0), unlike fairseq; a
        coverage penalty too small to change any score (NO_EARLY_EXIT times a sum of logs of attention weights, added
        to a score of order 1 in float32) keeps the search going as fairseq's does."""
        if self.len_penalty:
            return {"length_penalty": self.len_penalty}
        return {"length_penalty": 0.0, "coverage_penalty": NO_EARLY_EXIT}

    def _first_search(self, sources: list[list[str]], cap: int) -> list:
        """fairseq's search (patience 1: it ends once `beam` hypotheses ended) up to cap + 1 tokens: the best
        hypothesis."""
        return self.model.translate_batch(sources, beam_size=self.beam, **self._penalties(),
                                          max_decoding_length=cap + 1, return_end_token=True,
                                          **self._batching(sources))

    def _fairseq_rule(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> dict[int, list[str]]:
        """fairseq's translations, its end of the search at the cap included, in one of two ways that give the same
        translations at different costs: a text that reaches the cap must be searched keeping every hypothesis
        (see _AtCap). Where few do (a model that ends its sentences), each text is searched as fairseq searches and
        those few again (`_cap_searched_again`); where many do (a model that repeats itself), every text is searched
        once keeping every hypothesis (`_one_search`), which costs a little more per text and spares the second
        searches. Which: by the share of this translator's texts so far that reached the cap (CAP_SHARE), the
        second way for its first call."""
        seen, reached = self._cap_counts
        # with beam 1 CTranslate2 searches greedily, ignoring patience: its list tells nothing, always the second way
        together = self.beam > 1 and (seen == 0 or reached >= CAP_SHARE * seen)
        chosen, at_cap = (self._one_search if together else self._cap_searched_again)(tokens, by_cap)
        with self._cap_lock:  # Purity's sentences are translated in a thread of their own meanwhile (begin)
            seen, reached = self._cap_counts
            self._cap_counts = (seen + len(tokens), reached + at_cap)
        logger.debug("fairseq's rule (%s): %d sources, %d reached the cap", "one search" if together else
                     "searched again at the cap", len(tokens), at_cap)
        return chosen

    def _cap_searched_again(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> tuple[dict, int]:
        """Each source searched as fairseq searches (_first_search, up to cap + 1 tokens); one whose best hypothesis is
        still open there searched again up to the cap keeping every hypothesis, and decided as _AtCap says.
        Returns the hypotheses chosen and how many sources were searched again."""
        calls = [(cap, group, self._first_search([tokens[k] for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen: dict[int, list[str]] = {}
        again = []
        for cap, group, results in calls:
            still_open = []
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                if self._ended(hypothesis):
                    # Ended: fairseq's choice too (the same search and scores; one that ended at the cap beats
                    # every other hypothesis ended there by fairseq's forced end token, being better ranked).
                    chosen[k] = hypothesis[:-1]
                else:
                    still_open.append(k)
            if still_open:  # submitted while the next groups are still searched
                at_cap = [(k, _AtCap(tokens[k], cap)) for k in still_open]
                again.append((at_cap, self._search([c for _, c in at_cap], cap)))
        scoring = [(at_cap, self._score_open([c for _, c in at_cap], [r.result() for r in results]))
                   for at_cap, results in again]
        self._decide_at_cap(scoring, chosen)
        return chosen, sum(len(at_cap) for at_cap, _ in again)

    def _one_search(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> tuple[dict, int]:
        """Each cap's sources searched with patience 2 up to the cap, every hypothesis returned (_search): this tells
        fairseq's choice for a source whose search ends before the cap, and gives the hypotheses open at the cap of
        one that reaches it, scored with the end token (_AtCap). A list cut by CTranslate2 that cannot tell
        (`_ended_before_cap`) is searched again as fairseq searches (_first_search: these end before the cap).
        Returns the hypotheses chosen and how many sources reached the cap."""
        calls = [(cap, group, self._search([_AtCap(tokens[k], cap) for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen: dict[int, list[str]] = {}
        scoring, again = [], []
        for cap, group, results in calls:
            at_cap, unsure = [], []
            for k, result in zip(group, results):
                result = result.result()
                verdict, hypothesis = self._ended_before_cap(result)
                if verdict == "ended":
                    chosen[k] = hypothesis
                elif verdict == "cap":
                    at_cap.append((k, _AtCap(tokens[k], cap), result))
                else:
                    unsure.append(k)
            if at_cap:  # scored while the next groups are still searched
                scoring.append(([(k, c) for k, c, _ in at_cap],
                                self._score_open([c for _, c, _ in at_cap], [r for _, _, r in at_cap])))
            if unsure:
                again.append((cap, unsure, self._first_search([tokens[k] for k in unsure], cap)))
        late = []  # searched again, yet open at the cap: not expected (see _ended_before_cap), decided as at the cap
        for cap, group, results in again:
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                if self._ended(hypothesis):
                    chosen[k] = hypothesis[:-1]
                else:
                    late.append((cap, k))
        if late:
            logger.warning("%d text(s) searched again as fairseq searches (patience 1) were still open at the output cap, "
                           "which the search with patience 2 had ruled out (CTranslate2 %s did not search as this "
                           "translator assumes); each is decided by fairseq's rule at the cap", len(late),
                           ctranslate2_version())
        for cap, k in late:
            c = _AtCap(tokens[k], cap)
            scoring.append(([(k, c)], self._score_open([c], [r.result() for r in self._search([c], cap)])))
        self._decide_at_cap(scoring, chosen)
        return chosen, sum(len(group) for group, _ in scoring)

    def _ended_before_cap(self, result) -> tuple[str, list[str] | None]:
        """What fairseq's search (patience 1) of a source chooses, told from CTranslate2's search with patience 2 up
        to the cap (the same steps, going on until 2 * beam hypotheses ended; all returned, best first, up to
        2 * beam): ("ended", its hypothesis) where it ends before the cap, ("cap", None) where it reaches the cap,
        ("unsure", None) where the list was cut and the dropped hypotheses could change the choice.

        A hypothesis of n tokens (the end token included) ended at step n - 1; fairseq stops at the first step s*
        by which `beam` have ended and chooses the best ended by then. A whole list (under 2 * beam) tells s*. A cut
        list holds the best 2 * beam: the dropped ones score below all of them and ended at most at the last step
        t; fewer than n of them ended before t, n being the listed ones that ended at t (else the search had stopped
        before t). So the best listed hypothesis ended by the step where `beam` of the listed had ended is fairseq's
        choice when fewer than `beam` can have ended before it: those listed plus n - 1."""
        listed = list(zip(result.scores, result.hypotheses))
        ended = [len(h) - 1 for _, h in listed if self._ended(h)]
        if len(listed) < 2 * self.beam:
            if len(ended) < self.beam:
                return "cap", None
            stop = sorted(ended)[self.beam - 1]
            return "ended", next(h[:-1] for _, h in listed if self._ended(h) and len(h) - 1 <= stop)
        steps = [len(h) - 1 for _, h in listed]
        last = max(steps)
        stop = sorted(steps)[self.beam - 1]  # before `last`: at most `beam` end at a step
        best = next(h for _, h in listed if len(h) - 1 <= stop)
        if self._ended(best) and sum(s < len(best) - 1 for s in steps) + steps.count(last) <= self.beam:
            return "ended", best[:-1]
        return "unsure", None

    def _decide_at_cap(self, scoring: list, chosen: dict[int, list[str]]) -> None:
        """The sources at the cap, their open hypotheses being scored: each one's best; those a hypothesis fairseq
        keeps open and CTranslate2 did not return could beat searched one step further (_search_one_more_step)."""
        undecided = []
        for group, scored in scoring:
            self._take_scores(scored)
            undecided += [(k, c) for k, c in group if c.bound > c.score]
            for k, c in group:
                chosen[k] = c.hypothesis
        if undecided:
            self._search_one_more_step([c for _, c in undecided])
            for k, c in undecided:
                chosen[k] = c.hypothesis
            unsure = sum(c.bound > c.score for _, c in undecided)
            if unsure:
                logger.info("%d translation(s) reaching the output cap may differ from fairseq's: a hypothesis "
                            "fairseq keeps open there is not among those CTranslate2 returns", unsure)

    def _ended(self, hypothesis: Sequence[str]) -> bool:
        """Whether a hypothesis (returned with its end token) ended, rather than stopping open at the search's last step."""
        return bool(hypothesis) and hypothesis[-1] == self._end

    def _search(self, at_cap: list[_AtCap], cap: int, steps: int = 0) -> list:
        """The search again, up to cap + steps tokens, returning every hypothesis (patience 2: the same
        search, none dropped from the results), with scores."""
        if cap + steps == 0:
            return [_NoResult() for _ in at_cap]
        return self.model.translate_batch(
            [c.source for c in at_cap], beam_size=self.beam, patience=2, num_hypotheses=2 * self.beam,
            **self._penalties(), max_decoding_length=cap + steps, return_end_token=True,
            return_scores=True, **self._batching([c.source for c in at_cap]))

    def _score_open(self, at_cap: list[_AtCap], results: list) -> list:
        """Candidates from a search up to the cap: ended ones as they are, open ones scored with the end token
        (those that can beat the best ended one), being scored; a bound on what fairseq may keep open besides."""
        for c, result in zip(at_cap, results):
            shrink = (c.cap / (c.cap + 1)) ** self.len_penalty
            hypotheses = list(zip(result.scores, result.hypotheses))
            for score, hypothesis in hypotheses:
                if self._ended(hypothesis):
                    c.offer(score, hypothesis[:-1])
            # An open hypothesis's score grows at most from over cap ** len_penalty to over (cap + 1) ** len_penalty
            # once the end token's log probability (<= 0) is added.
            for score, hypothesis in hypotheses:
                if not self._ended(hypothesis) and score * shrink > c.score:
                    c.to_score.append(hypothesis)
            last = [(score, h) for score, h in hypotheses if len(h) == c.cap]  # the best `beam` of the last step
            c.open = {tuple(h) for _, h in last if not self._ended(h)}
            if len(c.open) < len(last):
                # fairseq keeps as many runners-up open as hypotheses ended there, which CTranslate2 does not
                # return; ranked below all of the last step's best, they score at most its worst with the end token.
                c.bound = min(score for score, _ in last) * shrink
        return self._score_batch(at_cap)

    def _score_batch(self, at_cap: list[_AtCap]) -> list:
        pairs = [(c, h) for c in at_cap for h in c.to_score if tuple(h) not in c.scored]
        for c in at_cap:
            c.scored.update(tuple(h) for h in c.to_score)
            c.to_score = []
        if not pairs:
            return []
        sources, targets = [c.source for c, _ in pairs], [h for _, h in pairs]
        size = max(1, SCORE_TOKENS // (max(map(len, targets)) + 1))
        results = self.model.score_batch(sources, targets, max_batch_size=size, batch_type="examples",
                                         asynchronous=True)
        return [(c, h, r) for (c, h), r in zip(pairs, results)]

    def _take_scores(self, scored: list) -> None:
        for c, hypothesis, result in scored:
            c.offer(sum(result.result().log_probs) / (c.cap + 1) ** self.len_penalty, hypothesis)

    def _search_one_more_step(self, at_cap: list[_AtCap]) -> None:
        """Undecided sources: searched to cap + 1 tokens, where CTranslate2 returns the best `beam` continuations
        of all hypotheses fairseq keeps open at the cap: those ended are fairseq's candidates as they are, the
        others' first cap tokens are scored with the end token."""
        for cap in sorted({c.cap for c in at_cap}):
            group = [c for c in at_cap if c.cap == cap]
            for c, result in zip(group, self._search(group, cap, steps=1)):
                result = result.result()
                last = []
                for score, hypothesis in zip(result.scores, result.hypotheses):
                    if self._ended(hypothesis):
                        c.offer(score, hypothesis[:-1])
                    elif hypothesis[:cap] not in c.to_score:
                        c.to_score.append(hypothesis[:cap])
                    if len(hypothesis) == cap + 1:
                        last.append(score)
                        c.open.add(tuple(hypothesis[:cap]))
                if len(c.open) == self.beam:  # all hypotheses fairseq keeps open at the cap: seen
                    c.bound = -math.inf
                elif last:  # one with no continuation among these scores at most their worst with the end token
                    c.bound = min(c.bound, min(last))
            self._take_scores(self._score_batch(group))


class _AtCap:
    """A source whose best hypothesis is still open at its cap. After `cap` tokens fairseq allows only the
    end token: each hypothesis still open is ended, scored with the end token's log probability, normalized by
    its length with the end token (cap + 1) and compared with those that ended before. CTranslate2 instead
    takes the best `beam` of all continuations at its last step. So the source is searched up to `cap` tokens
    keeping every hypothesis (_search), the open hypotheses are scored with the end token (score_batch includes
    it) and the best of all, as fairseq's finalize scores them, is its translation. `bound`: the best score a hypothesis fairseq kept
    open and CTranslate2 did not return can have (-inf: none)."""

    def __init__(self, source: list[str], cap: int):
        self.source, self.cap = source, cap
        self.score, self.hypothesis, self.bound = -math.inf, [], -math.inf
        self.to_score: list[list[str]] = []
        self.scored: set[tuple[str, ...]] = set()
        self.open: set[tuple[str, ...]] = set()  # hypotheses open at the cap seen so far

    def offer(self, score: float, hypothesis: list[str]) -> None:
        if score > self.score:
            self.score, self.hypothesis = score, hypothesis


class _NoResult:
    """The result of a search of no step (a cap of 0 tokens)."""

    scores: list = []
    hypotheses: list = []

    def result(self) -> "_NoResult":
        return self
