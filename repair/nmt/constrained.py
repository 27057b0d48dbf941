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
import os
from concurrent.futures import ThreadPoolExecutor
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError

SPM_SPACE = "\u2581"


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float  # fairseq's: log-probability per token (length-normalized, len_penalty applied)
    met: bool  # every constraint phrase appears in `text`


def _squash(text: str, zh: bool) -> str:
    return re.sub(r"\s+", "", text) if zh else " ".join(text.split())


def contains_all(text: str, phrases: Sequence[str], zh: bool = True) -> bool:
    """Whether `text` contains every phrase, in order, each after the previous one (ordered constraints)."""
    text, pos = _squash(text, zh), 0
    for p in phrases:
        p = _squash(clean_text(p), zh)
        if not p:
            continue
        at = text.find(p, pos)
        if at < 0:
            return False
        pos = at + len(p)
    return True


def _as_translator(model):
    from repair.nmt.translator import FairseqTranslator

    if isinstance(model, FairseqTranslator):
        return model
    from repair.nmt.preprocessing import ModelFiles

    if isinstance(model, ModelFiles):
        return FairseqTranslator(files=model)
    if isinstance(model, (str, os.PathLike)):
        return FairseqTranslator(model)
    raise TypeError(f"translate_constrained needs a FairseqTranslator, ModelFiles or checkpoint path, not {type(model).__name__}")


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


def encode_phrase(translator, phrase: str) -> list[int] | None:
    """Target token ids of a phrase as it would appear inside a sentence; None when the dictionary
    cannot spell it (an unknown token)."""
    tgt, codec = translator.tgt_dict, translator.tgt_codec
    text = clean_text(phrase)
    inside = _spm_inside(str(codec.side.sentencepiece_model)) if codec.side.bpe == "sentencepiece" else None
    if inside is not None:
        if codec.tokenizer is not None:
            text = codec.tokenizer.encode(text)
        pieces = inside.encode(text, out_type=str)
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


def _search(tgt_dict, ordered: bool, final_step: int):
    """fairseq's LexicallyConstrainedBeamSearch, with two changes.

    - Every hypothesis may end at the output cap. fairseq's search forbids the end of sentence until a hypothesis
      has met its constraints, also at the cap's step, where the generator allows nothing else: no hypothesis
      ends and the generator's assertion fails. At that step this one searches as plain beam search, so that
      unmet hypotheses end there (and are reported unmet).
    - Its per-sentence step (step_sentence) does the same on Python lists instead of one tensor element at a
      time: the same candidates, banks, de-duplication and round-robin stripes, several times faster.
    """
    import torch
    from fairseq.search import LexicallyConstrainedBeamSearch
    from fairseq.token_generation_constraints import OrderedConstraintState

    class Search(LexicallyConstrainedBeamSearch):
        def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
            if step < final_step:
                return super().step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)
            states, self.constraint_states = self.constraint_states, []
            try:
                return super().step(step, lprobs, scores, prev_output_tokens, original_batch_idxs)
            finally:
                self.constraint_states = states

        def step_sentence(self, step, sentno, lprobs, constraint_states, beams_buf, indices_buf, scores_buf):
            device = lprobs.device
            beams, indices, scores = beams_buf.tolist(), indices_buf.tolist(), scores_buf.tolist()
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
                seq, ends = sequence.sequences, sequence.endpoints
                n = len(seq)
                positions = []
                for b, t in zip(beams, indices):
                    at = constraint_states[b].state
                    if at + 1 == n or ends[at]:  # finished, or between constraints (ends[-1]: at the root)
                        positions.append(at if at + 1 == n or seq[at + 1] != t else at + 1)
                    elif seq[at + 1] == t:
                        positions.append(at + 1)
                    else:
                        positions.append(0 if t == seq[0] else -1)
                banks = [at + 1 for at in positions]
                states = None
            else:
                states = [constraint_states[b].advance(t) for b, t in zip(beams, indices)]
                banks = [x.bank for x in states]
            total = len(constraint_states[0].tokens)
            # STEP 4: by bank (furthest first), then score
            order = sorted(range(len(banks)), key=lambda i: (total - banks[i]) * 100 - scores[i])
            # STEP 5: the same (beam, token) once
            kept, last = [], None
            for i in order:
                key = (beams[i], indices[i])
                if key != last:
                    kept.append(i)
                last = key
            # STEP 6-7: round-robin stripes across banks, then truncate to the candidates' size
            stripe, count, bank = {}, -1, None
            width = len(kept) + 1
            for i in kept:
                b = banks[i]
                count = count + 1 if b == bank else 0
                bank = b
                stripe[i] = total - b + count * width
            chosen = sorted(kept, key=lambda i: stripe[i])[: self.num_cands]
            return (torch.tensor([scores[i] for i in chosen], device=device),
                    torch.tensor([indices[i] for i in chosen], device=device, dtype=torch.long),
                    torch.tensor([beams[i] for i in chosen], device=device, dtype=torch.long),
                    [states[i] for i in chosen] if states is not None else
                    [OrderedConstraintState(sequence, positions[i]) for i in chosen])

    return Search(tgt_dict, "ordered" if ordered else "unordered")


def translate_constrained(
    model,
    sources: Sequence[str],
    constraints: Sequence[Sequence[str]],
    *,
    beam: int = 5,
    nbest: int = 1,
    ordered: bool = True,
    max_lengths: Sequence[int | None] | None = None,
) -> list[list[Hypothesis]]:
    """Each source translated with its constraints (target phrases it must contain), `nbest`
    hypotheses each, best first. `model`: a FairseqTranslator (its model, codecs, batching and
    output caps are reused), ModelFiles or a checkpoint path. Sources are batched as the translator
    batches them (length buckets up to max_tokens), decoded by the translator's workers side by side;
    `ordered` phrases appear in the order given. `max_lengths`: per source, at most this many target tokens
    (a batch stops at the longest of its sources'; None: the translator's output cap)."""
    import torch
    from fairseq.data import data_utils
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.token_generation_constraints import pack_constraints

    if isinstance(sources, str):
        raise TypeError("translate_constrained() takes a list of sources")
    if max_lengths is not None and len(max_lengths) != len(sources):
        raise UserError(f"{len(max_lengths)} max_lengths for {len(sources)} sources: give one per source")
    if len(constraints) != len(sources):
        raise UserError(f"{len(constraints)} constraint lists for {len(sources)} sources: give one list per source")
    if beam < 1 or not 1 <= nbest <= beam:
        raise UserError(f"constrained translation: beam ({beam}) must be >= 1 and nbest ({nbest}) between 1 and beam")
    t = _as_translator(model)
    zh = t.files.tgt.lang.startswith("zh")
    phrases = [[clean_text(p) for p in ps if clean_text(p)] for ps in constraints]
    out: list[list[Hypothesis]] = [[] for _ in sources]
    cleaned = [clean_text(s or "") for s in sources]
    todo = [i for i, s in enumerate(cleaned) if s]
    for i, s in enumerate(cleaned):
        if not s:
            out[i] = [Hypothesis("", 0.0, not phrases[i])]
    if not todo:
        return out
    encoded = dict(zip(todo, t.encode_all([cleaned[i] for i in todo], cleaned=True)))
    spelled: dict[int, list] = {}
    for i in todo:
        ids = [encode_phrase(t, p) for p in phrases[i]]
        spelled[i] = [torch.tensor(x, dtype=torch.long) for x in ids if x is not None]
    pad, eos = t.src_dict.pad(), t.src_dict.eos()
    symbols = t.tgt_dict.symbols
    ignore = {t.tgt_dict.unk(), t.tgt_dict.pad(), t.tgt_dict.bos(), t.tgt_dict.eos()}
    caps = t.generator
    if t.threads and torch.get_num_threads() != t.threads:
        torch.set_num_threads(t.threads)

    def run(batch: list[int]) -> None:
        idx = [todo[b] for b in batch]
        tokens = [encoded[i] for i in idx]
        constrained = any(spelled[i] for i in idx)
        width = t.bucket(max(len(x) for x in tokens))
        cap = min(int(caps.max_len_a * width + caps.max_len_b), caps.max_len - 1)  # the generator's cap
        if max_lengths is not None:
            cap = min(cap, max(cap if max_lengths[i] is None else max(1, int(max_lengths[i])) for i in idx))
        strategy = _search(t.tgt_dict, ordered, cap) if constrained else None
        generator = SequenceGenerator([t.model], t.tgt_dict, beam_size=beam, max_len_a=0, max_len_b=cap,
                                      max_len=caps.max_len, len_penalty=caps.len_penalty, search_strategy=strategy)
        sample = {"net_input": {
            "src_tokens": data_utils.collate_tokens(tokens, pad, eos, left_pad=True,
                                                    pad_to_length=width).to(t.device),
            "src_lengths": torch.tensor([len(x) for x in tokens], device=t.device),
        }}
        packed = pack_constraints([spelled[i] for i in idx]).to(t.device) if constrained else None
        with torch.inference_mode():
            hypos = generator.generate([t.model], sample, constraints=packed)
        for i, hyps in zip(idx, hypos):
            for h in hyps[:nbest]:
                text = t.tgt_codec.decode(" ".join(symbols[x] for x in h["tokens"].tolist() if x not in ignore))
                out[i].append(Hypothesis(text, float(h["score"]), contains_all(text, phrases[i], zh)
                                         if ordered else all(_squash(p, zh) in _squash(text, zh) for p in phrases[i])))

    batches = t._batches([len(encoded[i]) for i in todo])
    if t.workers == 1 or len(batches) < 2:
        for batch in batches:
            run(batch)
        return out
    # beam search spends much of each step in Python: a second batch computes while the first is between
    # operations (each batch has its own generator and search state; the model is shared, read-only)
    batches.sort(key=lambda b: -len(b) * t.bucket(max(len(encoded[todo[i]]) for i in b)))
    with ThreadPoolExecutor(t.workers, thread_name_prefix="constrained") as pool:
        list(pool.map(run, batches))
    return out
