"""Translation forced to contain given target phrases: fairseq's lexically constrained beam search
(Post & Vilar 2018, Hu et al. 2019), as `fairseq-interactive --constraints` runs it, on a loaded
`FairseqTranslator`'s model and preprocessing.

    translate_constrained(translator, sources, constraints, beam=5, nbest=1)
        -> per source, `nbest` Hypothesis(text, score, met) best first

`constraints[i]` are plain target-language phrases (Chinese text) for `sources[i]`, encoded with the
model's own tokenizer and subword model; an empty list is plain beam search (its n-best list). `met` says
whether the text really contains every phrase: a phrase the model's dictionary cannot spell, or one the
output cap cut off, is reported unmet, never dropped in silence.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.nmt.preprocessing import fit_pieces
from repair.nmt.search import SPM_SPACE, Hypothesis, contains_all
from repair.text import squash


def _as_translator(model):
    """The loaded fairseq translator the search runs on (repair.nmt.fairseq.translator imports this module, not the other
    way round: a model's files or checkpoint are loaded by the caller, FairseqTranslator(files=...))."""
    from repair.nmt.preprocessing import ModelFiles

    if isinstance(model, (ModelFiles, str, os.PathLike)):
        raise TypeError(f"translate_constrained needs a loaded FairseqTranslator, not {type(model).__name__}")
    return model


@functools.lru_cache(maxsize=8)
def _spm_inside(model_path: str):
    """The SentencePiece model without its dummy prefix: a phrase segmented as inside a sentence."""
    import sentencepiece as spm

    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:  # protobuf missing: the caller strips the prefix itself
        return None
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(Path(model_path).read_bytes())
    proto.normalizer_spec.add_dummy_prefix = False
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def encode_phrase(translator, phrase: str, start: bool = False) -> list[int] | None:
    """Target token ids of a phrase as it would appear inside a sentence (`start`: at its beginning, as the model
    writes a first word: SentencePiece's leading "▁"); None when the dictionary cannot spell it (an unknown
    token)."""
    tgt, codec = translator.tgt_dict, translator.tgt_codec
    text = clean_text(phrase)
    inside = _spm_inside(str(codec.side.sentencepiece_model)) if codec.side.bpe == "sentencepiece" else None
    if start:
        pieces = codec.encode_all([text])[0].split()
    elif inside is not None:
        if codec.tokenizer is not None:
            text = codec.tokenizer.encode(text)
        pieces = inside.encode(text, out_type=str)
        if codec.fit is not None:
            pieces = fit_pieces(pieces, codec.fit, codec.separator, codec.cjk_breaks)
    else:
        pieces = codec.encode_all([text])[0].split()
        if codec.side.bpe == "sentencepiece" and pieces and pieces[0].startswith(SPM_SPACE):
            # SentencePiece marks the start of a text with "▁"; inside a Chinese sentence the phrase has none.
            rest = pieces[0][1:]
            pieces = ([rest] if rest in tgt.indices else list(rest)) + pieces[1:]
    ids = [tgt.indices.get(p, tgt.unk()) for p in pieces if p]
    if not ids or tgt.unk() in ids:
        return None
    return ids


def _ordered_positions(sequence, at: list[int], tokens: list[int]) -> list[int]:
    """OrderedConstraintState.advance on plain numbers: each candidate's position in the constraint sequence
    after its token, from its beam item's position `at` (-1: none met)."""
    seq, ends = sequence.sequences, sequence.endpoints
    n = len(seq)
    positions = []
    for a, t in zip(at, tokens):
        if a + 1 == n or ends[a]:  # finished, or between constraints (ends[-1]: at the root)
            positions.append(a if a + 1 == n or seq[a + 1] != t else a + 1)
        elif seq[a + 1] == t:
            positions.append(a + 1)
        else:
            positions.append(0 if t == seq[0] else -1)
    return positions


def _choose(banks: list[int], scores: list[float], beams: list[int], tokens: list[int], total: int, size: int) -> list[int]:
    """fairseq's steps 4-7: candidates by bank (furthest first), then score; the same (beam, token) once;
    round-robin stripes across banks; the first `size` of them."""
    order = sorted(range(len(banks)), key=lambda i: (total - banks[i]) * 100 - scores[i])
    kept, last = [], None
    for i in order:
        key = (beams[i], tokens[i])
        if key != last:
            kept.append(i)
        last = key
    stripe, count, bank = {}, -1, None
    width = len(kept) + 1
    for i in kept:
        b = banks[i]
        count = count + 1 if b == bank else 0
        bank = b
        stripe[i] = total - b + count * width
    return sorted(kept, key=lambda i: stripe[i])[:size]


class _Ended:
    """The constraint state of a hypothesis at its own output cap: finished, nothing more to write."""

    finished = True

    def next_tokens(self):
        return ()


ENDED = _Ended()


def _only_end(lprobs, rows: list[int], eos: int) -> None:
    """At a source's own cap: only the end token is allowed to its hypotheses (what fairseq's generator does to
    every source at the batch's cap). lprobs: (batch, beam, vocab), changed in place."""
    if rows:
        lprobs[rows, :, :eos] = -math.inf
        lprobs[rows, :, eos + 1:] = -math.inf


def _capped(step: int, caps: list[int] | None, original_batch_idxs) -> list[int]:
    """Sentences (positions in the current batch) whose own output cap is reached at this step."""
    if caps is None or original_batch_idxs is None:
        return []
    return [k for k, o in enumerate(original_batch_idxs.tolist()) if step >= caps[o]]


def _plain(tgt_dict, caps: list[int]):
    """fairseq's beam search with an output cap per source: at its cap a source's hypotheses can only end."""
    from fairseq.search import BeamSearch

    class Search(BeamSearch):
        def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
            _only_end(lprobs, _capped(step, caps, original_batch_idxs), tgt_dict.eos())
            return super().step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)

    return Search(tgt_dict)


# Ordered constraints are searched by _ordered_search (all sentences of a step at once); False: by _search's
# per-sentence step, which gives the same hypotheses (tests compare the two).
TENSOR_STEPS = True


def _ordered_search(tgt_dict, final_step: int, caps: list[int] | None = None):
    """_search's ordered constrained beam search on tensors: the batch's constraint states are positions in each
    sentence's constraint sequence, and one step chooses every sentence's candidates at once (the same candidates,
    banks, de-duplication and round-robin stripes as fairseq's per-sentence step; the same hypotheses, several
    times faster where a batch holds dozens of sentences)."""
    from fairseq.search import Search

    class Ordered(_OrderedSteps, Search):
        def __init__(self):
            Search.__init__(self, tgt_dict)
            self.supports_constraints, self.num_cands, self.seq = True, 0, None
            self.final_step, self.caps = final_step, caps

    return Ordered()


def _cumulative(step: int, lprobs, scores):
    """fairseq's beam search: the first step from the first beam item alone, later ones added to each item's score."""
    if step == 0:
        return lprobs[:, ::lprobs.size(1), :].contiguous()
    return lprobs + scores[:, :, step - 1].unsqueeze(-1)


class _OrderedSteps:
    """The steps of _ordered_search (a mixin of fairseq's Search: eos, the generator's calls)."""

    def init_constraints(self, batch_constraints, beam_size: int):
        import torch
        from fairseq.token_generation_constraints import OrderedConstraintState

        self.seq = None
        if batch_constraints is None:
            return
        sequences = [OrderedConstraintState.create(c).sequence for c in batch_constraints]
        width = max(1, max(len(x) for x in sequences))
        device = batch_constraints.device
        self.seq = torch.full((len(sequences), width), -1, dtype=torch.long, device=device)
        self.ends = torch.ones((len(sequences), width), dtype=torch.bool, device=device)
        for k, x in enumerate(sequences):
            self.seq[k, :len(x)] = torch.tensor(x.sequences, dtype=torch.long)
            self.ends[k, :len(x)] = torch.tensor(x.endpoints, dtype=torch.bool)
            self.ends[k, width - 1] = True  # a position -1 reads the last: the root is between constraints
        self.length = torch.tensor([len(x) for x in sequences], device=device)
        self.distinct = torch.tensor([len(x.tokens) for x in sequences], device=device)
        self.ended = torch.zeros(len(sequences), dtype=torch.bool, device=device)
        self.pos = torch.full((len(sequences), beam_size), -1, dtype=torch.long, device=device)

    def prune_sentences(self, batch_idxs):
        if self.seq is not None:
            for name in ("seq", "ends", "length", "distinct", "ended", "pos"):
                setattr(self, name, getattr(self, name)[batch_idxs])

    def update_constraints(self, active_hypos):
        if self.seq is not None:
            self.pos = self.pos.gather(1, active_hypos)

    def _positions(self, at, tokens):
        """OrderedConstraintState.advance: each candidate's position after its token, from its beam item's."""
        import torch

        width = self.seq.size(1)
        finished = at + 1 == self.length.unsqueeze(1)
        between = finished | self.ends.gather(1, at.remainder(width))  # at -1: the root
        following = self.seq.gather(1, (at + 1).clamp(max=width - 1))
        match = ~finished & (following == tokens)
        restart = torch.where(tokens == self.seq[:, :1], torch.zeros_like(at), torch.full_like(at, -1))
        return torch.where(match, at + 1, torch.where(between, at, restart))

    def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        bsz, beam, _ = lprobs.size()
        self.num_cands = min(beam * 2, lprobs.view(bsz, -1).size(1) - 1)
        if self.seq is None or step >= self.final_step:  # at the cap every hypothesis may end: plain beam search
            return self._plain_step(step, lprobs, scores)
        capped = _capped(step, self.caps, original_batch_idxs)
        _only_end(lprobs, capped, self.eos)
        if capped:
            self.ended[capped] = True
        finished = (self.pos + 1 == self.length.unsqueeze(1)) | self.ended.unsqueeze(1)
        if step > 0:  # no end of sentence before the constraints are met
            rows = (~finished).view(-1).nonzero().squeeze(1)
            lprobs.view(bsz * beam, -1)[rows, self.eos] = -math.inf
        return self._choose(*self._candidates(step, _cumulative(step, lprobs, scores), finished))

    def _candidates(self, step, lprobs, finished):
        """fairseq's steps 1-3 for every sentence: the best 2 x beam, each beam item's best token and its next
        constraint tokens (the next of its sequence, and the first once past it), with their scores, beams,
        whether each is one, and each one's position after it."""
        import torch

        bsz, width, vocab = lprobs.size()
        top_scores, top = torch.topk(lprobs.view(bsz, -1), self.num_cands)
        scores_, tokens, beams = [top_scores], [top.fmod(vocab)], [top // vocab]
        valid = [torch.ones_like(top, dtype=torch.bool)]
        every = torch.arange(width, device=lprobs.device).repeat(bsz, 1)
        if step > 0:
            best_scores, best = torch.topk(lprobs.view(bsz * width, -1), k=1, dim=1)
            scores_.append(best_scores.view(bsz, -1))
            tokens.append(best.view(bsz, -1))
            beams.append(every)
            valid.append(torch.ones_like(every, dtype=torch.bool))
        pos, seqw = self.pos[:, :width], self.seq.size(1)
        for token, ok in ((self.seq.gather(1, (pos + 1).clamp(max=seqw - 1)), ~finished[:, :width]),
                          (self.seq[:, :1].expand(-1, width), (pos > 0) & ~self.ended.unsqueeze(1))):
            token = torch.where(ok, token, torch.zeros_like(token))
            scores_.append(lprobs.gather(2, token.unsqueeze(-1)).squeeze(-1))
            tokens.append(token)
            beams.append(every)
            valid.append(ok)
        scores_, tokens, beams, valid = (torch.cat(x, dim=1) for x in (scores_, tokens, beams, valid))
        return scores_, tokens, beams, valid, self._positions(self.pos.gather(1, beams), tokens)

    def _choose(self, scores_, tokens, beams, valid, positions):
        """fairseq's steps 4-7 (as _choose): banks furthest first, then score; the same (beam, token) once; the
        kept ones striped round-robin across banks; the first num_cands. The chosen positions become the states."""
        import torch

        ended = self.ended.unsqueeze(1)
        banks = torch.where(ended, torch.zeros_like(positions), positions + 1)
        total = torch.where(self.ended, torch.zeros_like(self.distinct), self.distinct).unsqueeze(1)
        # in double precision as _choose's Python floats; those that are no candidate last
        key = ((total - banks).double() * 100 - scores_.double()).masked_fill(~valid, math.inf)
        order = torch.sort(key, dim=1, stable=True).indices
        scores_, tokens, beams, banks, positions, valid = (x.gather(1, order) for x in
                                                           (scores_, tokens, beams, banks, positions, valid))
        same = torch.zeros_like(valid)
        same[:, 1:] = (beams[:, 1:] == beams[:, :-1]) & (tokens[:, 1:] == tokens[:, :-1]) & valid[:, :-1]
        kept = valid & ~same
        # the kept ones first, in order; a stripe: the rank in a run of one bank times (kept + 1), plus the bank's
        # distance from the total
        order = torch.sort((~kept).to(torch.uint8), dim=1, stable=True).indices
        scores_, tokens, beams, banks, positions, kept = (x.gather(1, order) for x in
                                                          (scores_, tokens, beams, banks, positions, kept))
        j = torch.arange(kept.size(1), device=kept.device).expand_as(banks)
        starts = torch.ones_like(kept)
        starts[:, 1:] = banks[:, 1:] != banks[:, :-1]
        count = j - torch.cummax(torch.where(starts, j, torch.zeros_like(j)), dim=1).values
        stripes = (total - banks) + count * (kept.sum(1, keepdim=True) + 1)
        stripes = stripes.masked_fill(~kept, torch.iinfo(torch.long).max)
        chosen = torch.sort(stripes, dim=1, stable=True).indices[:, :self.num_cands]
        self.pos = positions.gather(1, chosen)
        return scores_.gather(1, chosen), tokens.gather(1, chosen), beams.gather(1, chosen)

    def _plain_step(self, step, lprobs, scores):
        import torch

        bsz, _, vocab = lprobs.size()
        lprobs = _cumulative(step, lprobs, scores)
        top_scores, top = torch.topk(lprobs.view(bsz, -1), self.num_cands)
        beams = top // vocab
        if self.seq is not None:
            self.pos = self.pos.gather(1, beams.clamp(max=self.pos.size(1) - 1))
        return top_scores, top.fmod(vocab), beams


def _search(tgt_dict, ordered: bool, final_step: int, caps: list[int] | None = None):
    """fairseq's LexicallyConstrainedBeamSearch, with two changes.

    - Every hypothesis may end at the output cap. fairseq's search forbids the end of sentence until a hypothesis
      has met its constraints, also at the cap's step, where the generator allows nothing else: no hypothesis
      ends and the generator's assertion fails. At that step this one searches as plain beam search, so that
      unmet hypotheses end there (and are reported unmet).
    - Its per-sentence step (step_sentence) does the same on Python lists instead of one tensor element at a
      time: the same candidates, banks, de-duplication and round-robin stripes, several times faster.
    - `caps`: an output cap per source (by its position in the batch): at its own cap a source's hypotheses can
      only end, met or not, as every source's can at the batch's cap; so a batch can hold sources of other caps.
    """
    import torch
    from fairseq.search import LexicallyConstrainedBeamSearch
    from fairseq.token_generation_constraints import OrderedConstraintState

    class Search(LexicallyConstrainedBeamSearch):
        def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
            if step < final_step:
                capped = _capped(step, caps, original_batch_idxs)
                _only_end(lprobs, capped, tgt_dict.eos())
                for k in capped:  # ended: the end token is not held back for unmet constraints
                    self.constraint_states[k] = [ENDED] * len(self.constraint_states[k])
                return super().step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)
            states, self.constraint_states = self.constraint_states, []
            try:
                return super().step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)
            finally:
                self.constraint_states = states

        def step_sentence(self, step, sentno, lprobs, constraint_states, beams_buf, indices_buf, scores_buf):
            device = lprobs.device
            beams, indices, scores = beams_buf.tolist(), indices_buf.tolist(), scores_buf.tolist()
            if constraint_states and constraint_states[0] is ENDED:  # at its own cap: the best endings
                chosen = _choose([0] * len(scores), scores, beams, indices, 0, self.num_cands)
                return (torch.tensor([scores[i] for i in chosen], device=device),
                        torch.tensor([indices[i] for i in chosen], device=device, dtype=torch.long),
                        torch.tensor([beams[i] for i in chosen], device=device, dtype=torch.long),
                        [ENDED] * len(chosen))
            # STEP 2: every beam item's next constraint tokens are candidates too
            extra_beams, extra_tokens = [], []
            for beamno, state in enumerate(constraint_states):
                tokens = list(state.next_tokens())
                extra_tokens += tokens
                extra_beams += [beamno] * len(tokens)
                if step == 0:  # one beam item at the first step
                    break
            if extra_tokens:
                beams += extra_beams
                indices += extra_tokens
                scores += lprobs[extra_beams, extra_tokens].tolist()
            # STEP 3: each candidate's state and bank (constraint tokens met)
            if ordered:  # OrderedConstraintState.advance on plain numbers: the state objects only for those kept
                sequence = constraint_states[0].sequence
                positions = _ordered_positions(sequence, [constraint_states[b].state for b in beams], indices)
                banks, states = [at + 1 for at in positions], None
            else:
                states = [constraint_states[b].advance(t) for b, t in zip(beams, indices)]
                banks = [x.bank for x in states]
            chosen = _choose(banks, scores, beams, indices, len(constraint_states[0].tokens), self.num_cands)
            return (torch.tensor([scores[i] for i in chosen], device=device),
                    torch.tensor([indices[i] for i in chosen], device=device, dtype=torch.long),
                    torch.tensor([beams[i] for i in chosen], device=device, dtype=torch.long),
                    [states[i] for i in chosen] if states is not None else
                    [OrderedConstraintState(sequence, positions[i]) for i in chosen])

    return Search(tgt_dict, "ordered" if ordered else "unordered")


def _check_arguments(sources, constraints, beam: int, nbest: int, max_lengths, starts) -> None:
    if isinstance(sources, str):
        raise TypeError("translate_constrained() takes a list of sources")
    if starts is not None and len(starts) != len(sources):
        raise UserError(f"{len(starts)} starts for {len(sources)} sources: give one per source")
    if max_lengths is not None and len(max_lengths) != len(sources):
        raise UserError(f"{len(max_lengths)} max_lengths for {len(sources)} sources: give one per source")
    if len(constraints) != len(sources):
        raise UserError(f"{len(constraints)} constraint lists for {len(sources)} sources: give one list per source")
    if beam < 1 or not 1 <= nbest <= beam:
        raise UserError(f"constrained translation: beam ({beam}) must be >= 1 and nbest ({nbest}) between 1 and beam")


class _Job:
    """One call's sources, encoded, with their phrases spelled in target tokens, and the hypotheses found."""

    def __init__(self, t, sources, constraints, *, beam: int, nbest: int, ordered: bool, max_lengths, starts):
        import torch

        self.t, self.beam, self.nbest, self.ordered, self.max_lengths = t, beam, nbest, ordered, max_lengths
        self.zh = t.files.tgt.lang.startswith("zh")
        self.phrases = [[clean_text(p) for p in ps if clean_text(p)] for ps in constraints]
        self.out: list[list[Hypothesis]] = [[] for _ in sources]
        cleaned = [clean_text(s or "") for s in sources]
        self.todo = [i for i, s in enumerate(cleaned) if s]
        for i, s in enumerate(cleaned):
            if not s:
                self.out[i] = [Hypothesis("", 0.0, not self.phrases[i])]
        self.encoded = dict(zip(self.todo, t.encode_all([cleaned[i] for i in self.todo], cleaned=True))) if self.todo else {}
        self.spelled = {i: [torch.tensor(x, dtype=torch.long) for x in
                            (encode_phrase(t, p, start=k == 0 and bool(starts and starts[i]))
                             for k, p in enumerate(self.phrases[i])) if x is not None] for i in self.todo}
        self.ignore = {t.tgt_dict.unk(), t.tgt_dict.pad(), t.tgt_dict.bos(), t.tgt_dict.eos()}

    def own_cap(self, i: int) -> int | None:
        """Source i's own output cap, when one was given."""
        given = self.max_lengths[i] if self.max_lengths is not None else None
        return None if given is None else max(1, int(given))

    def cap(self, idx: list[int], width: int) -> int:
        """The batch's output cap: the generator's, or the longest of its sources' own caps when given."""
        caps = self.t.generator
        cap = min(int(caps.max_len_a * width + caps.max_len_b), caps.max_len - 1)
        return min(cap, max(cap if self.own_cap(i) is None else self.own_cap(i) for i in idx))

    def by_caps(self, rows: int) -> list[list[int]]:
        """Positions in `todo` in batches of at most `rows` beam rows, sources of the nearest caps together."""
        def cap(b: int) -> int:
            own = self.own_cap(self.todo[b])
            return own if own is not None else 1 << 30

        order = sorted(range(len(self.todo)), key=lambda b: (cap(b), len(self.encoded[self.todo[b]])))
        size = max(1, rows // self.beam)
        return [order[k:k + size] for k in range(0, len(order), size)]

    def met(self, text: str, phrases: list[str]) -> bool:
        if self.ordered:
            return contains_all(text, phrases, self.zh)
        return all(squash(p, self.zh) in squash(text, self.zh) for p in phrases)

    def run(self, batch: list[int]) -> None:
        import torch
        from fairseq.sequence_generator import SequenceGenerator
        from fairseq.token_generation_constraints import pack_constraints

        t = self.t
        idx = [self.todo[b] for b in batch]
        tokens = [self.encoded[i] for i in idx]
        constrained = any(self.spelled[i] for i in idx)
        width = t.bucket(max(len(x) for x in tokens))
        cap = self.cap(idx, width)
        own = [cap if self.own_cap(i) is None else min(cap, self.own_cap(i)) for i in idx]
        own = own if min(own) < cap else None  # each source's own cap where the batch holds shorter ones
        if constrained:
            strategy = (_ordered_search(t.tgt_dict, cap, own) if self.ordered and TENSOR_STEPS
                        else _search(t.tgt_dict, self.ordered, cap, own))
        else:
            strategy = _plain(t.tgt_dict, own) if own is not None else None
        generator = SequenceGenerator([t.model], t.tgt_dict, beam_size=self.beam, max_len_a=0, max_len_b=cap,
                                      max_len=t.generator.max_len, len_penalty=t.generator.len_penalty,
                                      search_strategy=strategy)
        sample = {"net_input": t.source_input(tokens)}
        packed = pack_constraints([self.spelled[i] for i in idx]).to(t.device) if constrained else None
        with torch.inference_mode():
            hypos = generator.generate([t.model], sample, constraints=packed)
        symbols = t.tgt_dict.symbols
        for i, hyps in zip(idx, hypos):
            for h in hyps[:self.nbest]:
                text = t.tgt_codec.decode(" ".join(symbols[x] for x in h["tokens"].tolist() if x not in self.ignore))
                self.out[i].append(Hypothesis(text, float(h["score"]), self.met(text, self.phrases[i])))


def spread(batches: list[list[int]], at_least: int) -> list[list[int]]:
    """The batches, the largest cut in halves until there are `at_least` of them (or none has two sources): a few
    searches (suggestions search a few dozen) would otherwise land in one or two batches and leave workers idle.
    The halves keep their bucket's width; each source's output cap is still its own or its batch's longest."""
    batches = [list(b) for b in batches]
    while len(batches) < at_least:
        big = max(range(len(batches)), key=lambda k: len(batches[k]), default=None)
        if big is None or len(batches[big]) < 2:
            break
        b = batches.pop(big)
        batches[big:big] = [b[: len(b) // 2], b[len(b) // 2:]]
    return batches


def translate_constrained(
    model,
    sources: Sequence[str],
    constraints: Sequence[Sequence[str]],
    *,
    beam: int = 5,
    nbest: int = 1,
    ordered: bool = True,
    max_lengths: Sequence[int | None] | None = None,
    starts: Sequence[bool] | None = None,
    rows: int | None = None,
) -> list[list[Hypothesis]]:
    """Each source translated with its constraints (target phrases it must contain), `nbest`
    hypotheses each, best first. `model`: a FairseqTranslator (its model, codecs, batching and
    output caps are reused), ModelFiles or a checkpoint path. Sources are batched as the translator
    batches them (length buckets up to max_tokens), decoded by the translator's workers side by side;
    `ordered` phrases appear in the order given. `max_lengths`: per source, at most this many target tokens
    (None: the translator's output cap); at its own cap a source's hypotheses can only end, whatever its batch. `starts`: per source, whether
    its first phrase is the beginning of the output (ordered): spelled as the model writes a sentence's first
    word (with a SentencePiece model, its leading "▁"), so that the search can begin with the model's own first
    tokens instead of writing them twice, once its way and once the phrase's. `rows`: batch as many sources as
    fit in this many beam rows (sources x beam), those with the nearest output caps together, each batch padded to
    its longest source and decoded with all the translator's threads, instead of the translator's length buckets
    and workers: fairseq's search costs mostly a fixed amount per step and per batch, so a few dozen searches
    (suggestions) run about twice as fast in one batch as in a handful, with the same hypotheses."""
    _check_arguments(sources, constraints, beam, nbest, max_lengths, starts)
    t = _as_translator(model)
    job = _Job(t, sources, constraints, beam=beam, nbest=nbest, ordered=ordered, max_lengths=max_lengths,
               starts=starts)
    if not job.todo:
        return job.out
    if rows is not None:
        if rows < 1:
            raise UserError(f"constrained translation: rows ({rows}) must be at least 1")
        with t.all_threads():
            for batch in job.by_caps(rows):
                job.run(batch)
        return job.out
    t.use_threads()
    batches = t._batches([len(job.encoded[i]) for i in job.todo])
    if t.workers > 1:
        batches = spread(batches, 2 * t.workers)
    if t.workers == 1 or len(batches) < 2:
        for batch in batches:
            job.run(batch)
        return job.out
    # beam search spends much of each step in Python: a second batch computes while the first is between
    # operations (each batch has its own generator and search state; the model is shared, read-only)
    batches.sort(key=lambda b: -len(b) * t.bucket(max(len(job.encoded[job.todo[i]]) for i in b)))
    with ThreadPoolExecutor(t.workers, thread_name_prefix="constrained") as pool:
        list(pool.map(job.run, batches))
    return job.out


def score_translations(model, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
    """The model's score of each target as the translation of its source, as fairseq's search scores a
    hypothesis: the log-probability of its tokens and the end token, over their number ** len_penalty (one
    teacher-forced pass per batch, no search). An empty source or target scores -inf."""
    import torch
    from fairseq.data import data_utils

    if len(sources) != len(targets):
        raise UserError(f"{len(targets)} targets for {len(sources)} sources: give one per source")
    t = _as_translator(model)
    out = [-math.inf] * len(sources)
    cleaned = [(clean_text(s or ""), clean_text(x or "")) for s, x in zip(sources, targets)]
    todo = [i for i, (s, x) in enumerate(cleaned) if s and x]
    if not todo:
        return out
    src = t.encode_all([cleaned[i][0] for i in todo], cleaned=True)
    tgt_dict, eos, pad = t.tgt_dict, t.tgt_dict.eos(), t.tgt_dict.pad()
    tgt = [torch.tensor([tgt_dict.indices.get(p, tgt_dict.unk()) for p in line.split()] + [eos], dtype=torch.long)
           for line in t.tgt_codec.encode_all([cleaned[i][1] for i in todo])]
    penalty = t.generator.len_penalty
    # batch after batch, each with every core the workers share (2 cores: 0.10 s for the demo's 273 suggestion
    # pairs instead of 0.15 s with one worker's thread)
    with t.all_threads():
        for batch in t._batches([len(x) + len(y) for x, y in zip(src, tgt)]):
            y = [tgt[b] for b in batch]
            net_input = {**t.source_input([src[b] for b in batch]),
                         "prev_output_tokens": data_utils.collate_tokens(y, pad, eos, left_pad=False,
                                                                         move_eos_to_beginning=True).to(t.device)}
            target = data_utils.collate_tokens(y, pad, eos, left_pad=False).to(t.device)
            with torch.inference_mode():
                lprobs = t.model.get_normalized_probs(t.model(**net_input), log_probs=True).float()
                picked = lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(target.eq(pad), 0.0)
            for b, row, n in zip(batch, picked.sum(-1).tolist(), (len(x) for x in y)):
                out[todo[b]] = row / n ** penalty
    return out
