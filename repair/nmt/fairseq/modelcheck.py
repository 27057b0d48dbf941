"""Is the model read and written as it was trained? A check of a model and its preprocessing before Purity tests it.

A model given the wrong preprocessing still translates: every source word unknown to a dictionary of pieces, it
writes the same phrase for every sentence, with subword markers left in, and Purity finds "issues" in that garbage.
On a sample of the sentences to test (and of the validation split, where there is one), this measures:

- the share of source tokens (and of the validation split's target tokens) the model's dictionary does not know;
- the dictionaries' shape against the configured subwords: SentencePiece pieces (`▁`), subword-nmt continuations
  (`@@`), or whole words;
- the share of translations holding subword markers (`▁`, `@@`) or degenerate repetition (`房间里房间里`);
- where the checkpoint recorded one, the validation loss against it (repair.nmt.fairseq.probe, on a sample).

Far off is a problem (`problems`, each with its side); the other subword settings (SentencePiece, subword-nmt, none)
with the files found beside the model (its folder, the data folder the checkpoint records, their parents), and the
other tokenizers, are then tried, and the one that brings the measures (the loss first) back is named by the keys
that set it (`hint`). The loop stops before its test stage on a problem that changes what is tested; Purity's
command line warns (`model_check=stop` makes it fatal). The fairseq and CTranslate2 translators of a fairseq
checkpoint use it; the sample, the thresholds and the translations' measures are shared (repair.nmt.modelcheck) with
the transformers family's check (repair.nmt.hf.check).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from repair.nmt.modelcheck import LOSS_FACTOR, UNKNOWN_MAX, sample, translation_measures, translation_problems
from repair.nmt.preprocessing import Codec, ModelFiles, Side
from repair.nmt.fairseq.subwords import dictionary_shape, dictionary_symbols, shape_advice, shape_problem

log = logging.getLogger(__name__)


def unknown_share(side: Side, symbols: set, texts: Sequence[str]) -> float | None:
    """The share of the tokens `texts` encode to (the side's tokenizer and subwords) that the dictionary lacks."""
    tokens = [t for line in Codec(side).encode_all(texts) for t in line.split()]
    return sum(t not in symbols for t in tokens) / len(tokens) if tokens else None


def static_measures(files: ModelFiles, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]]) -> dict:
    """Unknown tokens and dictionary shape per side, and the problems they show (no model is run)."""
    out: dict = {"problems": []}
    for name, side, texts in (("src", files.src, list(sentences) + [p[0] for p in valid_pairs]),
                              ("tgt", files.tgt, [p[1] for p in valid_pairs])):
        symbols = dictionary_symbols(side.dict)
        shape = dictionary_shape(symbols)
        unknown = unknown_share(side, set(symbols), texts) if texts else None
        out[name] = {"dictionary": shape, "unknown": None if unknown is None else round(unknown, 3)}
        why = shape_problem(side, shape)
        if why:
            out["problems"].append({"side": name, "what": why})
        if unknown is not None and unknown > UNKNOWN_MAX:
            out["problems"].append({"side": name, "what": f"{unknown:.0%} of its {side.lang} tokens are unknown to "
                                                          f"{side.dict}"})
    return out


def sample_loss(files: ModelFiles, state: dict, pairs: Sequence[tuple[str, str]]) -> float | None:
    """The model's validation loss (bits per token) on `pairs` encoded with `files` (None: nothing measured)."""
    from repair.errors import UserError
    from repair.nmt.fairseq.finetune import binarize_pairs
    from repair.nmt.fairseq.probe import split_loss

    with tempfile.TemporaryDirectory(prefix="modelcheck-") as tmp:
        try:
            binarize_pairs({"valid": list(pairs)}, files, Path(tmp), fit=False)
        except UserError as e:
            log.warning("model check: the validation sample could not be encoded (%s)", e)
            return None
        return split_loss(state, Path(tmp), "valid", (files.src.lang, files.tgt.lang))


def check_fairseq_model(files: ModelFiles, translate: Callable[[list[str]], list[str]] | None,
                        sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (), *,
                        data_dir: str | Path | None = None, state: dict | None = None) -> dict:
    """The check of a fairseq model (see the module's doc): what was measured, the problems found and, where there
    are any, the keys that bring the measures back (`hint`) and one message naming the sides and the keys."""
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.probe import recorded_valid_loss

    sentences, valid_pairs = sample(sentences), sample(valid_pairs, words=lambda p: p[0])
    record = static_measures(files, sentences, valid_pairs)
    problems = record["problems"]
    if valid_pairs and Path(files.checkpoint).is_file():
        state = state if state is not None else load_checkpoint(files.checkpoint)
        recorded = recorded_valid_loss(state)
        measured = sample_loss(files, state, valid_pairs) if recorded is not None else None
        if measured is not None:
            record["loss"] = {"recorded_valid_loss": round(recorded, 3), "sample_valid_loss": round(measured, 3),
                              "pairs": len(valid_pairs), "factor": LOSS_FACTOR}
            if measured > LOSS_FACTOR * recorded:
                problems.append({"side": "both", "what": f"its validation loss on a sample of {len(valid_pairs)} pairs "
                                                         f"is {measured:.2f} where its checkpoint recorded {recorded:.2f}"})
    if translate is not None and sentences and not any(p["side"] == "src" for p in problems):
        record["translations"] = translation_measures(translate(list(sentences)))
        problems += translation_problems(record["translations"])
    record["checked"] = bool(sentences or valid_pairs)
    if problems:
        record["hint"] = best_fix(files, state, sentences, valid_pairs, data_dir, record)
    record["stop"] = stops(record)
    record["message"] = message(files, record) if problems else None
    return record


def stops(record: dict) -> bool:
    """Whether the problems change what Purity tests. A target tokenizer changes nothing a translation says (Chinese
    is joined back without spaces): where it alone brings the loss back, the fine-tune's check stops, not the test."""
    if not record["problems"]:
        return False
    keys = (record.get("hint") or {}).get("keys") or {}
    if keys and set(keys) == {"translator.tgt_tokenizer"}:
        return False
    # a loss far above the recorded one that no other encoding brings back, and nothing else off: a corpus unlike the
    # model's own, not its preprocessing (the fine-tune's check, on all of the validation split, decides)
    return bool(keys) or any(p["side"] != "both" for p in record["problems"])


def message(files: ModelFiles, record: dict) -> str:
    """One message: what is far off, per side, and the keys to set."""
    names = {"src": f"the {files.src.lang} (source) side", "tgt": f"the {files.tgt.lang} (target) side",
             "both": "the model"}
    sides = dict.fromkeys(p["side"] for p in record["problems"])
    found = "; ".join(f"{names[side]}: " + ", ".join(p["what"] for p in record["problems"] if p["side"] == side)
                      for side in sides)
    hint = record.get("hint") or {}
    return (f"the model {files.checkpoint} does not read or write text as it was trained to ({found}). "
            f"{hint.get('text') or nothing_fits(files)}")


def nothing_fits(files: ModelFiles) -> str:
    return ("No other subword setting or tokenizer found beside the model fits it: check translator.bpe / src_bpe / "
            "tgt_bpe, translator.sentencepiece_model / bpe_codes (per side with src_ / tgt_), translator.src_tokenizer "
            "/ tgt_tokenizer and the dictionaries (translator.src_dict / tgt_dict)")


def best_fix(files: ModelFiles, state: dict | None, sentences, valid_pairs, data_dir, record: dict) -> dict:
    """The other preprocessing (repair.nmt.fairseq.probe.alternatives) that fits best: no static problem, the lowest loss
    where one is measured (else the fewest unknown tokens); its keys and a sentence saying what it brings back."""
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.probe import alternatives, nearby_files

    if state is None and Path(files.checkpoint).is_file():  # for the data folder it records
        state = load_checkpoint(files.checkpoint)
    tried, failed = [], {}
    for keys, other in alternatives(files, nearby_files(files, state, data_dir)):
        try:
            measured = static_measures(other, sentences, valid_pairs)
        except Exception as e:  # a tokenizer or subword model that cannot run here is named, not skipped silently
            failed[" ".join(f"{k}={v}" for k, v in keys.items())] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        if not measured["problems"]:
            unknown = sum(measured[s]["unknown"] or 0 for s in ("src", "tgt"))
            tried.append([unknown, keys, other, None])
    tried.sort(key=lambda t: t[0])
    if record.get("loss") and state is not None:
        for entry in tried[:4]:  # the loss of the few that fit best: what actually brings the model back
            entry[3] = sample_loss(entry[2], state, valid_pairs)
        recorded = record["loss"]["recorded_valid_loss"]
        tried = sorted((t for t in tried[:4] if t[3] is not None and t[3] <= LOSS_FACTOR * recorded),
                       key=lambda t: t[3])
    out: dict = {"failed": failed} if failed else {}
    if failed:
        log.warning("model check: alternatives that could not be tried: %s", failed)
    if not tried:
        out["text"] = shape_advice(files, record)
        return out
    unknown, keys, _other, loss = tried[0]
    setting = " ".join(f"{k}={v}" for k, v in keys.items())
    measure = (f"the validation loss {loss:.2f} (recorded {record['loss']['recorded_valid_loss']:.2f})"
               if loss is not None else f"{unknown:.1%} unknown tokens")
    return {**out, "keys": keys, "loss": loss,
            "text": f"With {setting} it fits ({measure}): rerun with {setting}"}


