"""A model's loss on binarized pairs, as fairseq's validation computes it, and the checks the fine-tune makes with it.

fairseq logs a validation loss in bits per target token under the training criterion (label-smoothed cross
entropy for a translation model) and keeps the best one in the checkpoint (`extra_state["best"]`). The same
figure, measured on the fine-tune's own encoding of its validation split with the unchanged base model, says
whether that encoding is the one the model was trained on: a target side segmented unlike the training data
(Moses instead of jieba, say) gives a loss twice the recorded one, where a corpus of another domain gives a
loss a little above it. `check_encoding` measures it before any training and, where it is far worse, finds
which side's preprocessing key brings it back (`translator.tgt_tokenizer=jieba`, ...) and stops the run.
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

    from repair.nmt.checkpoint import checkpoint_cfg

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

    from repair.nmt.checkpoint import checkpoint_cfg

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


def _alternatives(files: ModelFiles) -> list[tuple[str, ModelFiles]]:
    """The model's files with one side's tokenizer changed, each named by the key that would set it."""
    out = []
    for name in ("tgt", "src"):
        side = getattr(files, name)
        for tokenizer in TOKENIZERS:
            if tokenizer != side.tokenizer:
                out.append((f"translator.{name}_tokenizer={tokenizer}", replace(files, **{name: replace(side, tokenizer=tokenizer)})))
    return out


def check_encoding(base: ModelFiles, state: dict, data: Path, valid_pairs: Sequence[tuple[str, str]],
                   factor: float = DEFAULT_FACTOR, binarize=None) -> dict:
    """Whether the fine-tune's encoding (data/valid, made with `base`'s preprocessing) is the model's own: the base
    model's loss there against the best validation loss its checkpoint recorded. Where it is above it by more than a
    corpus of another domain would put it (TOLERANCE), each side is encoded with each other tokenizer
    (`binarize(splits, files, out)`, the fine-tune's binarizer): one that fits the model far better (BETTER), or a loss
    over `factor` times the recorded one, stops the run with one UserError naming the likely side and key.
    Returns what was measured."""
    langs = (base.src.lang, base.tgt.lang)
    recorded = recorded_valid_loss(state)
    if recorded is None or not factor:
        why = "finetune.encoding_check=0" if not factor else "the checkpoint records no validation loss"
        log.info("fine-tune: the encoding of the fine-tuning data is not checked (%s)", why)
        return {"checked": False, "why": why}
    measured = split_loss(state, data, "valid", langs)
    record = {"checked": True, "recorded_valid_loss": round(recorded, 3),
              "base_valid_loss": None if measured is None else round(measured, 3), "factor": factor}
    tried = other_tokenizers(base, state, valid_pairs, binarize) \
        if measured is not None and measured > TOLERANCE * recorded and binarize is not None else []
    better = [(loss, key) for loss, key in tried if loss < measured - BETTER]
    if tried:
        record["tried"] = {key: round(loss, 3) for loss, key in tried}
    if measured is None or (measured <= factor * recorded and not better):
        log.info("fine-tune: the base model's validation loss on the fine-tune's encoding is %s (the checkpoint "
                 "recorded %.3f%s): the encoding is taken as the model's own", record["base_valid_loss"], recorded,
                 f"; no other tokenizer does better: {record['tried']}" if tried else "")
        return record
    sides = f"src: {base.src.tokenizer}/{base.src.bpe}, tgt: {base.tgt.tokenizer}/{base.tgt.bpe}"
    if better:
        loss, key = better[0]
        side = "Chinese (target)" if ".tgt_" in key else "English (source)"
        hint = (f"with {key} it is {loss:.2f}: the {side} side is likely encoded unlike the model's training data; "
                f"rerun with {key}")
    else:
        hint = ("no other tokenizer brings it down: check translator.src_tokenizer / tgt_tokenizer, src_bpe / tgt_bpe, "
                "src_bpe_codes / tgt_bpe_codes, src_sentencepiece_model / tgt_sentencepiece_model and the dictionaries")
    raise UserError(
        f"the base model's validation loss on the fine-tuning data as encoded here ({sides}) is {measured:.2f}, where "
        f"its checkpoint {base.checkpoint} recorded {recorded:.2f}: fine-tuning on this encoding would teach the model "
        f"another one. {hint[0].upper() + hint[1:]}. Nothing was trained (finetune.encoding_check={factor}: the largest ratio to the recorded "
        f"loss allowed; 0 turns the check off).")


def other_tokenizers(base: ModelFiles, state: dict, valid_pairs, binarize) -> list[tuple[float, str]]:
    """The base model's validation loss with one side's tokenizer changed, lowest first, each with its key."""
    langs, tried = (base.src.lang, base.tgt.lang), []
    with tempfile.TemporaryDirectory(prefix="encoding-") as tmp:
        for k, (key, files) in enumerate(_alternatives(base)):
            try:
                binarize({"valid": list(valid_pairs)}, files, Path(tmp) / str(k))
            except UserError:
                continue
            loss = split_loss(state, Path(tmp) / str(k), "valid", langs)
            if loss is not None:
                tried.append((loss, key))
    return sorted(tried)
