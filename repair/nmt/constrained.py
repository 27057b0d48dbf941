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


def translate_constrained(
    model,
    sources: Sequence[str],
    constraints: Sequence[Sequence[str]],
    *,
    beam: int = 5,
    nbest: int = 1,
    ordered: bool = True,
) -> list[list[Hypothesis]]:
    """Each source translated with its constraints (target phrases it must contain), `nbest`
    hypotheses each, best first. `model`: a FairseqTranslator (its model, codecs, batching and
    output caps are reused), ModelFiles or a checkpoint path. Sources are batched as the translator
    batches them (length buckets up to max_tokens); `ordered` phrases appear in the order given."""
    import torch
    from fairseq import search
    from fairseq.data import data_utils
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.token_generation_constraints import pack_constraints

    if isinstance(sources, str):
        raise TypeError("translate_constrained() takes a list of sources")
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

    for batch in t._batches([len(encoded[i]) for i in todo]):
        idx = [todo[b] for b in batch]
        tokens = [encoded[i] for i in idx]
        constrained = any(spelled[i] for i in idx)
        strategy = search.LexicallyConstrainedBeamSearch(t.tgt_dict, "ordered" if ordered else "unordered") \
            if constrained else None
        generator = SequenceGenerator([t.model], t.tgt_dict, beam_size=beam, max_len_a=caps.max_len_a,
                                      max_len_b=caps.max_len_b, max_len=caps.max_len, len_penalty=caps.len_penalty,
                                      search_strategy=strategy)
        sample = {"net_input": {
            "src_tokens": data_utils.collate_tokens(tokens, pad, eos, left_pad=True,
                                                    pad_to_length=t.bucket(max(len(x) for x in tokens))).to(t.device),
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
    return out
