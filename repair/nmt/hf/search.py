"""Lexically constrained beam search and teacher-forced scoring on a transformers model, driven by the model's
own decoder step: what suggestions and the review memory ask of a model (the face's Searcher:
`translate_constrained`, `score`, `phrase_tokens`, `tgt_codec`).

transformers 5 has no constrained search that runs offline (its constrained beam search was removed; `force_words_ids`
now points at a hub repository), so this is the project's own: dynamic beam allocation (Post & Vilar 2018) over
target phrases spelled in the model's tokens. A hypothesis carries which phrases it has written and how far into
the one it is writing; each step offers every hypothesis's `beam` best next tokens and the next token of a phrase
it may write, and the beam is filled from banks of equal progress (the most progress first, in turns), so that
hypotheses that have written more of the phrases are not crowded out by freer ones. A hypothesis may end only when
it has written every phrase; at the output cap the open ones end unmet. `ordered`: the phrases in the order given.
Scores are fairseq's: log-probability of the tokens and the end token over their number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from repair.data.prepare import clean_text
from repair.nmt.search import SPM_SPACE, Hypothesis, contains_all
from repair.text import squash



@dataclass
class _State:
    tokens: list[int]
    logprob: float
    done: frozenset = frozenset()  # phrases written
    writing: int | None = None  # the phrase being written
    at: int = 0  # its tokens written so far
    progress: int = field(default=0)  # constraint tokens written in all


class TargetCodec:
    """The target side's tokens as space-separated pieces (what suggestions count an output's length by)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def encode_all(self, texts: Sequence[str]) -> list[str]:
        ids = self.tokenizer(text_target=list(texts), add_special_tokens=False)["input_ids"]
        return [" ".join(self.tokenizer.convert_ids_to_tokens(x)) for x in ids]


def phrase_ids(tok, phrase: str, start: bool = False) -> list[int] | None:
    """A phrase's target ids as inside a sentence (the leading word-boundary piece dropped), or at its `start`;
    None where the vocabulary cannot spell it (an unknown piece)."""
    ids = list(tok(text_target=[clean_text(phrase)], add_special_tokens=False)["input_ids"][0])
    if not start and ids:
        first = tok.convert_ids_to_tokens(ids[0])
        if first == SPM_SPACE:
            ids = ids[1:]
        elif first.startswith(SPM_SPACE) and tok.convert_tokens_to_ids(first[1:]) != tok.unk_token_id:
            ids[0] = tok.convert_tokens_to_ids(first[1:])
    return ids if ids and tok.unk_token_id not in ids else None


class Searcher:
    """Constrained search and scoring with a TransformersTranslator's model (its adapter on)."""

    def __init__(self, translator, beam: int, adapter: bool = True):
        self.t, self.beam, self.adapter = translator, beam, adapter
        self.tok = translator.tokenizer
        self.tgt_codec = TargetCodec(self.tok)
        self.files = translator.files

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        ids = phrase_ids(self.tok, phrase, start)
        return len(ids) if ids is not None else len(self.tgt_codec.encode_all([phrase])[0].split())

    def translate(self, texts: list[str]) -> list[str]:
        return self.t.translate(texts, adapter=self.adapter)

    def _encoder(self, source: str):
        import torch

        ids = torch.tensor([self.t.encode([source])[0]], device=self.t.device)
        return ids, self.t.model.get_encoder()(input_ids=ids, attention_mask=torch.ones_like(ids))

    def _step(self, encoder, ids, rows: list[list[int]]):
        """Next-token log-probabilities after each row of target ids (one batched decoder pass)."""
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        n = len(rows)
        hidden = encoder.last_hidden_state.expand(n, -1, -1)
        out = self.t.model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
                           attention_mask=torch.ones(n, ids.shape[1], dtype=torch.long, device=self.t.device),
                           decoder_input_ids=torch.tensor(rows, device=self.t.device), use_cache=False)
        return torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)

    def translate_constrained(self, sources: list[str], constraints: list[list[str]], *, beam: int = 5,
                              nbest: int = 1, ordered: bool = True, max_lengths=None, starts=None,
                              rows: int | None = None) -> list[list[Hypothesis]]:
        import torch

        out = []
        with self.t.threads_set(), self.t.edit(self.adapter), torch.inference_mode():
            for i, (source, phrases) in enumerate(zip(sources, constraints)):
                cap = self.t.max_len if max_lengths is None or max_lengths[i] is None else max(1, int(max_lengths[i]))
                out.append(self._one(clean_text(source or ""), [clean_text(p) for p in phrases if clean_text(p)],
                                     beam, nbest, ordered, min(cap, self.t.max_len), bool(starts and starts[i])))
        return out

    def _one(self, source: str, phrases: list[str], beam: int, nbest: int, ordered: bool, cap: int,
             start: bool) -> list[Hypothesis]:
        if not source:
            return [Hypothesis("", 0.0, not phrases)]
        spelled = [phrase_ids(self.tok, p, start and k == 0) for k, p in enumerate(phrases)]
        spelled = [s for s in spelled if s is not None]
        ids, encoder = self._encoder(source)
        first = [self.t.model.config.decoder_start_token_id]
        if self.t.forced_bos is not None:
            first.append(self.t.forced_bos)
        open_, ended = [_State(first, 0.0)], []
        eos = self.t.model.config.eos_token_id
        for step in range(cap - (len(first) - 1)):
            lprobs = self._step(encoder, ids, [h.tokens for h in open_])
            if step == cap - len(first):  # the cap: every open hypothesis ends here
                for h, row in zip(open_, lprobs):
                    ended.append(_State(h.tokens + [eos], h.logprob + float(row[eos]), h.done, h.writing, h.at,
                                        h.progress))
                break
            candidates = self._candidates(open_, lprobs, spelled, beam, ordered, eos)
            open_ = []
            for c in _allot(candidates, beam):
                (ended if c.tokens[-1] == eos else open_).append(c)
            if len([e for e in ended if len(e.done) == len(spelled)]) >= beam or not open_:
                break
        return self._hypotheses(ended, phrases, spelled, nbest, ordered, len(first))

    def _candidates(self, open_, lprobs, spelled, beam: int, ordered: bool, eos: int) -> list[_State]:
        out = []
        for h, row in zip(open_, lprobs):
            complete = len(h.done) == len(spelled)
            if h.writing is not None:  # inside a phrase: its next token, or give it up
                nxt = spelled[h.writing][h.at]
                out.append(_advance(h, nxt, float(row[nxt]), spelled))
            free = row.clone()
            if not complete:
                free[eos] = -math.inf
            for tok_id in torch_topk(free, beam):
                out.append(_State(h.tokens + [tok_id], h.logprob + float(row[tok_id]), h.done, None, 0,
                                  h.progress - h.at))
            if h.writing is None and not complete:
                waiting = [k for k in range(len(spelled)) if k not in h.done]
                for k in (waiting[:1] if ordered else waiting):
                    nxt = spelled[k][0]
                    out.append(_advance(_State(h.tokens, h.logprob, h.done, k, 0, h.progress), nxt,
                                        float(row[nxt]), spelled))
        return out

    def _hypotheses(self, ended, phrases, spelled, nbest: int, ordered: bool, skip: int) -> list[Hypothesis]:
        seen, out = set(), []
        for h in sorted(ended, key=lambda h: -h.logprob / max(1, len(h.tokens) - skip)):
            text = self.tok.decode(h.tokens[skip:], skip_special_tokens=True).strip()
            if text in seen:
                continue
            seen.add(text)
            met = contains_all(text, phrases) if ordered else all(squash(p, True) in squash(text, True)
                                                                  for p in phrases)
            out.append(Hypothesis(text, h.logprob / max(1, len(h.tokens) - skip), met))
        out.sort(key=lambda h: (not h.met, -h.score))
        return out[:nbest]

    def score(self, sources: list[str], targets: list[str]) -> list[float]:
        """Each target's log-probability (its tokens and the end token) over their number; -inf where empty."""
        import torch

        from repair.nmt.hf.finetune import batch_loss

        out = [-math.inf] * len(sources)
        pairs = [(clean_text(s or ""), clean_text(x or "")) for s, x in zip(sources, targets)]
        todo = [i for i, (s, x) in enumerate(pairs) if s and x]
        if not todo:
            return out
        enc = self.tok([self.t.source_prefix + pairs[i][0] for i in todo],
                       text_target=[pairs[i][1] for i in todo], truncation=True)
        rows = list(zip(enc["input_ids"], enc["labels"]))
        with self.t.threads_set(), self.t.edit(self.adapter), torch.inference_mode():
            for i, row in zip(todo, rows):
                loss, n = batch_loss(self.t.model, [row], self.tok.pad_token_id, self.t.device)
                out[i] = -float(loss) / max(1, n)
        return out


def torch_topk(row, k: int) -> list[int]:
    return [int(x) for x in row.topk(k).indices if row[int(x)] > -math.inf]


def _advance(h: _State, token: int, lp: float, spelled) -> _State:
    """h after writing the next token of the phrase it writes."""
    at = h.at + 1
    if at == len(spelled[h.writing]):
        return _State(h.tokens + [token], h.logprob + lp, h.done | {h.writing}, None, 0, h.progress + 1)
    return _State(h.tokens + [token], h.logprob + lp, h.done, h.writing, at, h.progress + 1)


def _allot(candidates: list[_State], beam: int) -> list[_State]:
    """`beam` candidates (one of each token sequence) taken in turns from banks of equal progress, the most
    progress first, each bank best score first."""
    unique: dict[tuple, _State] = {}
    for c in candidates:
        key = (tuple(c.tokens), c.done, c.writing, c.at)
        if key not in unique or unique[key].logprob < c.logprob:
            unique[key] = c
    banks: dict[int, list[_State]] = {}
    for c in sorted(unique.values(), key=lambda c: -c.logprob):
        banks.setdefault(c.progress, []).append(c)
    order = [banks[p] for p in sorted(banks, reverse=True)]
    chosen: list[_State] = []
    while len(chosen) < beam and any(order):
        for bank in order:
            if bank and len(chosen) < beam:
                chosen.append(bank.pop(0))
    return chosen
