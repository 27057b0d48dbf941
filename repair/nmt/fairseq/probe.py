"""A model's loss on binarized pairs, as fairseq's validation computes it, and the checks the fine-tune makes with it.

fairseq logs a validation loss in bits per target token under the training criterion (label-smoothed cross
entropy for a translation model) and keeps the best one in the checkpoint (`extra_state["best"]`). The same
figure, measured on the fine-tune's own encoding of its validation split with the unchanged base model, says
whether that encoding is the one the model was trained on: a target side segmented unlike the training data
(Moses instead of jieba, say) gives a loss twice the recorded one, where a corpus of another domain gives a
loss a little above it. `check_encoding` measures it before any training and, where it is far worse, finds
which side's preprocessing keys bring it back (`translator.tgt_tokenizer=jieba`, `translator.bpe=sentencepiece
translator.sentencepiece_model=...` with a model found beside the checkpoint, ...) and stops the run. The model
check before testing (repair.nmt.fairseq.modelcheck) measures the same loss on a sample, with the same alternatives.
"""

from __future__ import annotations

import copy
import logging
import math
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from repair.errors import UserError
from repair.nmt.preprocessing import TOKENIZERS, ModelFiles

log = logging.getLogger(__name__)

# how much worse than the recorded best validation loss the base model may do on the fine-tune's encoding
DEFAULT_FACTOR = 1.5
# above this ratio to the recorded loss the other tokenizers are tried; one that gives a loss lower by BETTER bits
# per token than the encoding given names the side that is encoded wrongly (a wrong side costs several bits)
TOLERANCE, BETTER = 1.1, 1.0


def recorded_valid_loss(state: dict) -> float | None:
    """The best validation loss fairseq recorded in a checkpoint (`extra_state`: best, else the last epoch's)."""
    extra = state.get("extra_state") or {}
    for key in ("best", "val_loss"):
        value = extra.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            return float(value)
    return None


def _model_and_task(state: dict, data: Path, langs: tuple[str, str]):
    from fairseq import checkpoint_utils, tasks
    from omegaconf import open_dict

    from repair.nmt.fairseq.checkpoint import checkpoint_cfg

    state = dict(state)
    state["cfg"] = copy.deepcopy(checkpoint_cfg(state))  # the caller's configuration stays as it was
    state = checkpoint_utils._upgrade_state_dict(state)
    cfg = state["cfg"]
    with open_dict(cfg):
        cfg.task.data = str(data)
        cfg.task.source_lang, cfg.task.target_lang = langs
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model, from_checkpoint=True)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    model.eval()
    return model, task, cfg


def split_loss(state: dict, data: Path, split: str, langs: tuple[str, str], *, criterion_state: dict | None = None,
               max_tokens: int = 4000) -> float | None:
    """The loss (bits per target token, fairseq's `valid_loss`) of the model in `state` on data/<split>, under the
    criterion of `criterion_state`'s training configuration (default: its own); None where the split is empty."""
    import torch
    from fairseq import utils

    from repair.nmt.fairseq.checkpoint import checkpoint_cfg

    model, task, cfg = _model_and_task(state, data, langs)
    criterion_cfg = checkpoint_cfg(criterion_state).criterion if criterion_state is not None else cfg.criterion
    criterion = task.build_criterion(criterion_cfg)
    task.load_dataset(split, combine=False, epoch=1)
    batches = task.get_batch_iterator(dataset=task.dataset(split), max_tokens=max_tokens,
                                      max_positions=utils.resolve_max_positions(task.max_positions(),
                                                                                model.max_positions()),
                                      ignore_invalid_inputs=True, seed=1, num_workers=0).next_epoch_itr(shuffle=False)
    total = size = 0.0
    with torch.no_grad():
        for sample in batches:
            if not sample:
                continue
            _loss, sample_size, logged = task.valid_step(sample, model, criterion)
            total += float(logged["loss"])
            size += float(sample_size)
    return total / size / math.log(2) if size else None


def nearby_files(files: ModelFiles, state: dict | None = None, data_dir: str | Path | None = None) -> dict:
    """Subword models found beside a model: SentencePiece models (*.model) and subword-nmt codes (bpecodes, *codes*)
    in its folder and that folder's parent, in the data folder the checkpoint records (and its parent), and in
    `data_dir` (and its spm/). A few of each, nearest first."""
    from repair.nmt.fairseq.checkpoint import checkpoint_cfg, recorded_data_folders

    folder = Path(files.checkpoint).resolve().parent
    recorded = recorded_data_folders(checkpoint_cfg(state), files.checkpoint) if state is not None else []
    places = [folder, folder.parent, *recorded, *(d.parent for d in recorded)]
    if data_dir:
        places += [Path(data_dir), Path(data_dir) / "spm"]
    found: dict = {"sentencepiece": [], "codes": []}
    for place in dict.fromkeys(p.resolve() for p in places if p.is_dir()):
        for path in sorted(place.iterdir()):
            kind = "sentencepiece" if path.suffix == ".model" else "codes" if "codes" in path.name.lower() else None
            if kind and path.is_file() and str(path) not in found[kind] and len(found[kind]) < 6:
                found[kind].append(str(path))
    return found


def alternatives(files: ModelFiles, nearby: dict | None = None) -> list[tuple[dict, ModelFiles]]:
    """The model's files with other preprocessing, each with the keys that would set it: each side's (and both
    sides') subwords changed (SentencePiece with each model found `nearby`, subword-nmt with each codes file found,
    none), then each side's tokenizer changed."""
    nearby = nearby or {}
    subwords = [("none", {}), *(("sentencepiece", {"sentencepiece_model": m}) for m in nearby.get("sentencepiece", ())),
                *(("subword_nmt", {"bpe_codes": c}) for c in nearby.get("codes", ()))]
    out = []
    for scope, names in (("", ("src", "tgt")), ("src_", ("src",)), ("tgt_", ("tgt",))):
        for bpe, paths in subwords:
            sides = {n: replace(getattr(files, n), bpe=bpe, sentencepiece_model=paths.get("sentencepiece_model"),
                                bpe_codes=paths.get("bpe_codes")) for n in names}
            if all(sides[n] == getattr(files, n) for n in names):
                continue
            keys = {f"translator.{scope}bpe": bpe, **{f"translator.{scope}{k}": v for k, v in paths.items()}}
            out.append((keys, replace(files, **sides)))
    for name in ("tgt", "src"):
        side = getattr(files, name)
        for tokenizer in TOKENIZERS:
            if tokenizer != side.tokenizer:
                out.append(({f"translator.{name}_tokenizer": tokenizer},
                            replace(files, **{name: replace(side, tokenizer=tokenizer)})))
    return out


def check_encoding(base: ModelFiles, state: dict, data: Path, valid_pairs: Sequence[tuple[str, str]],
                   factor: float = DEFAULT_FACTOR, binarize=None) -> dict:
    """Whether the fine-tune's encoding (data/valid, made with `base`'s preprocessing) is the model's own: the base
    model's loss there against the best validation loss its checkpoint recorded. Where it is above it by more than a
    corpus of another domain would put it (TOLERANCE), each side is encoded with each other tokenizer and subword
    setting (with the subword models found beside the model; `binarize(splits, files, out)`, the fine-tune's
    binarizer): one that fits the model far better (BETTER) and within `factor` of the recorded loss, or a loss
    over `factor` times the recorded one, stops the run with one UserError naming the likely side and keys. Returns what was measured: `checked` is true only
    where a loss was measured, and an alternative that could not be tried is named (`failed`)."""
    langs = (base.src.lang, base.tgt.lang)
    recorded = recorded_valid_loss(state)
    if recorded is None or not factor:
        why = "finetune.encoding_check=0" if not factor else "the checkpoint records no validation loss"
        log.info("fine-tune: the encoding of the fine-tuning data is not checked (%s)", why)
        return {"checked": False, "why": why}
    measured = split_loss(state, data, "valid", langs)
    if measured is None:
        why = (f"nothing was measured: none of the {len(valid_pairs)} validation pairs fits the model (an empty split, "
               f"or every pair longer than its positions)")
        log.warning("fine-tune: the encoding of the fine-tuning data is not checked (%s)", why)
        return {"checked": False, "why": why, "recorded_valid_loss": round(recorded, 3)}
    record = {"checked": True, "recorded_valid_loss": round(recorded, 3), "base_valid_loss": round(measured, 3),
              "factor": factor}
    tried, failed = other_encodings(base, state, valid_pairs, binarize) \
        if measured > TOLERANCE * recorded and binarize is not None else ([], {})
    # what brings the loss back: far lower, and within `factor` of the recorded one (a tokenizer that only makes a
    # wrong encoding a little less wrong is not named)
    better = [(loss, key) for loss, key in tried if loss < measured - BETTER and loss <= factor * recorded]
    if tried:
        record["tried"] = {key: round(loss, 3) for loss, key in tried}
    if failed:
        record["failed"] = failed
    if measured <= factor * recorded and not better:
        log.info("fine-tune: the base model's validation loss on the fine-tune's encoding is %s (the checkpoint "
                 "recorded %.3f%s): the encoding is taken as the model's own", record["base_valid_loss"], recorded,
                 f"; no other encoding does better: {record['tried']}" if tried else "")
        return record
    raise UserError(encoding_message(base, measured, recorded, factor, better, failed))


def encoding_message(base: ModelFiles, measured: float, recorded: float, factor: float, better: list,
                     failed: dict) -> str:
    sides = f"src: {base.src.tokenizer}/{base.src.bpe}, tgt: {base.tgt.tokenizer}/{base.tgt.bpe}"
    if better:
        loss, key = better[0]
        side = ("both sides are" if "translator.bpe=" in key else
                "the Chinese (target) side is" if "tgt_" in key else "the English (source) side is")
        hint = f"with {key} it is {loss:.2f}: {side} likely encoded unlike the model's training data; rerun with {key}"
    else:
        hint = ("no other tokenizer or subword setting brings it down: check translator.src_tokenizer / tgt_tokenizer, "
                "src_bpe / tgt_bpe, src_bpe_codes / tgt_bpe_codes, src_sentencepiece_model / tgt_sentencepiece_model "
                "and the dictionaries")
    from repair.nmt.fairseq.subwords import shape_hint

    shape = None if better else shape_hint(base)
    if shape:
        hint += f". {shape}"
    if failed:
        hint += f" (could not be tried: {'; '.join(f'{k}: {v}' for k, v in failed.items())})"
    return (f"the base model's validation loss on the fine-tuning data as encoded here ({sides}) is {measured:.2f}, "
            f"where its checkpoint {base.checkpoint} recorded {recorded:.2f}: fine-tuning on this encoding would teach "
            f"the model another one. {hint[0].upper() + hint[1:]}. Nothing was trained (finetune.encoding_check="
            f"{factor}: the largest ratio to the recorded loss allowed; 0 turns the check off).")


def other_encodings(base: ModelFiles, state: dict, valid_pairs, binarize) -> tuple[list[tuple[float, str]], dict]:
    """The base model's validation loss with one side's (or both sides') tokenizer or subwords changed, lowest
    first, each with its keys; and the alternatives that could not be tried, each with why."""
    from repair.nmt.fairseq.subwords import dictionary_shape, dictionary_symbols, shape_problem

    langs, tried, failed = (base.src.lang, base.tgt.lang), [], {}
    shapes = {n: dictionary_shape(dictionary_symbols(getattr(base, n).dict)) for n in ("src", "tgt")}
    with tempfile.TemporaryDirectory(prefix="encoding-") as tmp:
        for k, (keys, files) in enumerate(alternatives(base, nearby_files(base, state))):
            if any(shape_problem(getattr(files, n), shapes[n]) for n in shapes):
                continue  # subwords unlike the dictionary's (pieces read without SentencePiece): not the fix
            key = " ".join(f"{name}={value}" for name, value in keys.items())
            try:
                binarize({"valid": list(valid_pairs)}, files, Path(tmp) / str(k))
            except Exception as e:  # a tokenizer or model that cannot run here: named in the record and the log
                failed[key] = f"{type(e).__name__}: {str(e)[:200]}"
                log.warning("fine-tune: %s could not be tried (%s)", key, failed[key])
                continue
            loss = split_loss(state, Path(tmp) / str(k), "valid", langs)
            if loss is not None:
                tried.append((loss, key))
    return sorted(tried), failed
