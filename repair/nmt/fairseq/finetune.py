"""Fine-tune a trained checkpoint on extra sentence pairs until validation loss plateaus.

The base checkpoint is only read: fairseq's `finetune_from_model` loads its weights into a
fresh trainer (optimizer, learning-rate schedule, data loader and meters reset) and every
file is written under save_dir. A killed fine-tune starts again from the base model with the
same seed (its partial folder is set aside and removed first): on CPU that gives the weights an
uninterrupted fine-tune gives, bit for bit (docs/resume.md). A finished one (save_dir/finetune.json)
returns its result at once.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from repair.data.prepare import binarize_file, clean_text, load_dictionary
from repair.errors import UserError
from repair.fileio import append_jsonl, read_json, write_json_atomic, write_text_atomic
from repair.nmt.fairseq.checkpoint import checkpoint_cfg, load_checkpoint
from repair.nmt.device import set_threads, use_cuda, use_fp16
from repair.nmt.folders import discard_partial, finished_before, run_settings
from repair.nmt.preprocessing import Codec, ModelFiles, dictionary_symbols
from repair.nmt.fairseq.model_files import write_model_folder
from repair.nmt.fairseq.probe import DEFAULT_FACTOR, check_encoding, split_loss
from repair.nmt.fairseq.train import read_curve, run_training

logger = logging.getLogger(__name__)


def binarize_pairs(splits: dict[str, Sequence[tuple[str, str]]], files: ModelFiles, out_dir: str | os.PathLike,
                   *, workers: int = 1, fit: bool = True) -> Path:
    """Binarize text pairs with a model's own preprocessing and dictionaries (`files`): each split of `splits` into
    <out_dir>/{split}.{src}-{tgt}.{lang}.{bin,idx}, the dictionaries beside them. Returns out_dir,
    a folder fairseq's translation task can train on with the model's own vocabulary. `fit`: the targets spelt with
    the pieces the target dictionary holds (what the model can write; Codec's `fit`); the checks of an encoding
    measure it without (a wrong encoding re-spelt into the dictionary's pieces would look less wrong than it is).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = (files.src, files.tgt)
    codecs = [Codec(files.src), Codec(files.tgt, fit=dictionary_symbols(files.tgt.dict) if fit else None)]
    dicts = [load_dictionary(side.dict) for side in sides]
    prefix = f"{files.src.lang}-{files.tgt.lang}"
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".binarize.") as tmp:
        tmp = Path(tmp)
        for split, pairs in splits.items():
            if not pairs:
                raise UserError(f"no sentence pairs to binarize for {split} (the corrections and replay sample are empty)")
            cleaned = [(clean_text(en), clean_text(zh)) for en, zh in pairs]
            kept = [(en, zh) for en, zh in cleaned if en and zh]
            if not kept:
                raise UserError(f"all {len(pairs)} {split} pairs to binarize have an empty side; every pair needs "
                                "English and Chinese text")
            if len(kept) < len(pairs):
                # A replay sample drawn from raw text can meet an empty line; it carries nothing to learn.
                logger.warning("%d of %d pairs with an empty side left out of %s", len(pairs) - len(kept), len(pairs), split)
            for i, (side, codec, d) in enumerate(zip(sides, codecs, dicts)):
                text = tmp / f"{split}.{side.lang}"
                write_text_atomic(text, "".join(line + "\n" for line in codec.encode_all([p[i] for p in kept])))
                binarize_file(text, d, tmp / f"{split}.{prefix}.{side.lang}", workers)
                for ext in (".bin", ".idx"):
                    name = f"{split}.{prefix}.{side.lang}{ext}"
                    os.replace(tmp / name, out_dir / name)
    for side in sides:
        shutil.copyfile(side.dict, out_dir / f"dict.{side.lang}.txt")
    return out_dir


def finetune_config(base_state: dict, data: Path, save_dir: Path, base_checkpoint: Path, *, lr: float, patience: int,
                    max_epoch: int, seed: int, max_tokens: int | None, cuda: bool, fp16: bool, langs: tuple[str, str],
                    l2: float = 0.0, trainable: Sequence[str] = (), epoch_checkpoints: bool = False):
    """The base model's own training config, turned into a fine-tuning run with a fixed learning rate;
    with l2 or trainable, the loss anchored to the base model (repair.nmt.fairseq.anchored)."""
    from omegaconf import open_dict

    cfg = checkpoint_cfg(base_state)
    with open_dict(cfg):
        if l2 or trainable:
            from repair.nmt.fairseq.anchored import NAME

            crit = cfg.criterion
            cfg.criterion = {"_name": NAME, "label_smoothing": float(crit.get("label_smoothing", 0.0) or 0.0),
                             "report_accuracy": False, "ignore_prefix_size": int(crit.get("ignore_prefix_size", 0) or 0),
                             "sentence_avg": bool(cfg.optimization.get("sentence_avg", False)),
                             "anchor_l2": float(l2), "anchor_checkpoint": str(base_checkpoint),
                             "trainable": ",".join(trainable)}
        cfg.task.data = str(data)
        cfg.task.source_lang, cfg.task.target_lang = langs  # the languages its files are named by
        c = cfg.checkpoint
        c.save_dir, c.finetune_from_model, c.restore_file = str(save_dir), str(base_checkpoint), "checkpoint_last.pt"
        c.reset_optimizer = c.reset_lr_scheduler = c.reset_dataloader = c.reset_meters = False
        c.patience, c.no_epoch_checkpoints, c.best_checkpoint_metric = int(patience), not epoch_checkpoints, "loss"
        c.maximize_best_checkpoint_metric, c.save_interval, c.save_interval_updates = False, 1, 0
        c.no_save, c.no_last_checkpoints, c.keep_best_checkpoints = False, False, -1
        o = cfg.optimization  # every stop the base model's training had is reset: the fine-tune has its own
        o.max_epoch, o.max_update, o.lr, o.stop_min_lr = int(max_epoch), 0, [float(lr)], -1.0
        o.stop_time_hours = 0  # else the base model's cumulative training time ends the fine-tune at once
        # an update per batch: a base trained with --update-freq N would give a fine-tune of a few hundred pairs N times
        # fewer updates per epoch (a joint model's, N = 2: 3 updates an epoch, nothing learnt in 20 epochs)
        o.update_freq = [1]
        cfg.lr_scheduler = {"_name": "fixed", "force_anneal": None, "lr_shrink": 0.1, "warmup_updates": 0, "lr": [float(lr)]}
        if cfg.optimizer is not None and "lr" in cfg.optimizer:
            cfg.optimizer.lr = [float(lr)]
        cfg.common.seed, cfg.common.cpu, cfg.common.fp16 = int(seed), not cuda, fp16
        cfg.common.memory_efficient_fp16, cfg.common.bf16 = False, False
        cfg.common.log_format, cfg.common.log_interval = "json", 50
        cfg.common.tensorboard_logdir, cfg.common.wandb_project = None, None
        d = cfg.dataset
        if max_tokens:
            d.max_tokens = d.max_tokens_valid = int(max_tokens)
        d.num_workers = 0 if not cuda else min(2, d.num_workers or 0)
        d.train_subset, d.valid_subset, d.disable_validation = "train", "valid", False
        d.validate_interval, d.validate_interval_updates, d.validate_after_updates = 1, 0, 0
        if "max_valid_steps" in d:
            d.max_valid_steps = None
        dt = cfg.distributed_training
        import torch

        world = max(1, torch.cuda.device_count()) if cuda else 1
        dt.distributed_world_size, dt.distributed_num_procs, dt.nprocs_per_node = world, world, world
        dt.distributed_rank, dt.distributed_init_method, dt.device_id, dt.distributed_port = 0, None, 0, -1
    return cfg


PROBE = "corrections"  # the split of the fine-tune's data folder that holds the corrections once each


def probe_loss(state: dict, base: ModelFiles, save_dir: str | os.PathLike, base_state: dict | None = None) -> float | None:
    """The corrections' loss (bits per token) under the model in `state`, by the base model's criterion; None where
    the fine-tune in save_dir binarized no corrections."""
    data = Path(save_dir) / "data"
    if not (data / f"{PROBE}.{base.src.lang}-{base.tgt.lang}.{base.tgt.lang}.bin").is_file():
        return None
    loss = split_loss(state, data, PROBE, (base.src.lang, base.tgt.lang), criterion_state=base_state or state)
    return None if loss is None else round(loss, 4)


def finetune_lr(base_checkpoint: Path, lr: float, share: float | None) -> tuple[float, dict]:
    """The fine-tune's learning rate: `lr`, or `share` of the one the base model was trained with where that is
    higher (a model trained briefly at a high rate barely moves at a rate far below it: the joint-SentencePiece
    fixture, trained at 5e-3 for 50 updates, fixed 3 of 6 corrections in 20 epochs at 1e-3 and 6 of 6 by epoch 17
    at 2.5e-3; the demo's and the examples' models, trained at 2e-3, keep 1e-3). With what it was and why."""
    from repair.nmt.fairseq.checkpoint import trained_lr

    record = {"lr": float(lr), "given": float(lr), "trained": None, "lr_from_model": share}
    if not share:
        return float(lr), {**record, "why": "finetune.lr"}
    trained = trained_lr(base_checkpoint)
    record["trained"] = trained
    if trained is None or share * trained <= lr:
        return float(lr), {**record, "why": "finetune.lr" + ("" if trained is None else
                                                              f" (at least {share:g} x the {trained:g} it was trained with)")}
    used = share * trained
    logger.info("fine-tune learning rate %g: %g x the %g %s was trained with (finetune.lr_from_model), above "
                "finetune.lr=%g", used, share, trained, base_checkpoint, lr)
    return used, {**record, "lr": used, "why": f"finetune.lr_from_model: {share:g} x the {trained:g} the base model "
                                                 f"was trained with, above finetune.lr={lr:g}"}


def finetune_model(
    base: ModelFiles,
    train_pairs: Sequence[tuple[str, str]],
    valid_pairs: Sequence[tuple[str, str]],
    save_dir: str | os.PathLike,
    *,
    lr: float = 1e-3, patience: int = 15, max_epoch: int = 20, seed: int = 1, max_tokens: int | None = None,
    device: str = "auto", fp16: bool | str = "auto", threads: int | None = None,
    l2: float = 0.0, trainable: Sequence[str] = (), epoch_checkpoints: bool = False,
    stop_when: Callable[[int], bool] | None = None,
    probe_pairs: Sequence[tuple[str, str]] = (), encoding_check: float = DEFAULT_FACTOR,
    lr_from_model: float | None = 0.5,
) -> dict:
    """Fine-tune the model `base` names on train_pairs, validating each epoch on valid_pairs.

    Both are encoded with the base model's own preprocessing and dictionaries, and save_dir gets
    them beside the fine-tuned checkpoints (dict files, subword models, preprocessing.yaml): the
    folder is a model that replaces the base one as it is. Returns {"best_checkpoint", "epochs",
    "best_valid_loss", "curve": [{"epoch", "train_loss", "valid_loss"}, ...], "seconds"} and writes it
    to save_dir/finetune.json. stop_when(epoch): asked after each epoch is saved; True ends the fine-tune
    there, before validation loss would (finetune.select=corrections: the corrections are fixed). The result also
    says why training ended (`stop`) and what checked_data measured before it (`encoding_check`, `probe_pairs`).
    lr_from_model: the learning rate is at least this share of the one the base checkpoint records it was trained
    with (`learning_rate` in the result says which was used and why).
    """
    start = time.time()
    base_checkpoint, save_dir = Path(base.checkpoint), Path(save_dir)
    lr, learning_rate = finetune_lr(base_checkpoint, lr, lr_from_model)
    if save_dir.resolve() == base_checkpoint.parent.resolve():
        raise UserError(f"fine-tune folder {save_dir} is the base checkpoint's folder; fine-tune into a folder of its own")
    settings = run_settings(base_checkpoint, train_pairs, valid_pairs, lr=lr, patience=patience, max_epoch=max_epoch,
                            seed=seed, max_tokens=max_tokens, l2=l2, trainable=trainable,
                            epoch_checkpoints=epoch_checkpoints)
    result_path, settings_path = save_dir / "finetune.json", save_dir / "settings.json"
    if finished_before(save_dir, settings):
        logger.info("fine-tune in %s already finished", save_dir)
        return read_json(result_path)
    if settings_path.is_file() or (save_dir.is_dir() and not any(save_dir.iterdir())):
        discard_partial(save_dir)
    base_state = load_checkpoint(base_checkpoint)
    save_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(settings_path, settings)

    data, checked = checked_data(base, base_state, save_dir, train_pairs, valid_pairs, probe_pairs, encoding_check)
    cuda = use_cuda(device)
    set_threads(threads, cuda)
    max_tokens = max_tokens or small_batches(base_state, data, (base.src.lang, base.tgt.lang))
    cfg = finetune_config(base_state, data, save_dir, base_checkpoint, lr=lr, patience=patience, max_epoch=max_epoch,
                          seed=seed, max_tokens=max_tokens, cuda=cuda, fp16=use_fp16(fp16, cuda),
                          langs=(base.src.lang, base.tgt.lang), l2=l2, trainable=tuple(trainable),
                          epoch_checkpoints=epoch_checkpoints)
    if l2 or trainable:
        import repair.nmt.fairseq.anchored  # noqa: F401  (registers the criterion with fairseq)
    del base_state
    logger.info("fine-tuning %s on %d pairs in %s (lr %g, patience %d, at most %d epochs)",
                base_checkpoint, len(train_pairs), save_dir, lr, patience, max_epoch)
    stop: dict = {}
    run_training(cfg, on_epoch=lambda row: append_jsonl(save_dir / "curve.jsonl", row), stop_when=stop_when, stop=stop)

    best = save_dir / "checkpoint_best.pt"
    if not best.is_file():
        raise UserError(f"fine-tuning finished without writing {best} ({stop.get('message') or stop.get('reason')}); "
                        f"see fairseq's log above")
    curve = [{"epoch": r["epoch"], "train_loss": r.get("train_loss"), "valid_loss": r.get("valid_loss")}
             for r in read_curve(save_dir) if "valid_loss" in r]
    write_model_folder(base.with_checkpoint(best), save_dir)
    result = {
        "best_checkpoint": str(best),
        "epochs": len(curve),
        "best_valid_loss": min(r["valid_loss"] for r in curve) if curve else None,
        "curve": curve,
        "seconds": round(time.time() - start, 2),
        "stop": stop,
        "learning_rate": learning_rate,
        **({"max_tokens": max_tokens} if max_tokens else {}),
        **checked,
    }
    write_json_atomic(result_path, result)
    return result


MIN_UPDATES = 4  # updates an epoch of a fine-tune has at least (small_batches)


def small_batches(base_state: dict, data: Path, langs: tuple[str, str], updates: int = MIN_UPDATES) -> int | None:
    """The batch size (max_tokens) that gives an epoch of the fine-tune's training split at least `updates` updates,
    where the base model's own batches would give fewer (None: the base model's). A fine-tune of a few corrections
    and no replay fits one batch of a model trained in large ones: one update an epoch, nothing learnt in 20."""
    from fairseq.data import data_utils

    base = checkpoint_cfg(base_state).dataset.max_tokens
    sizes = []
    for lang in langs:  # copied while the dataset is open: its sizes are a view of a file it unmaps when closed
        dataset = data_utils.load_indexed_dataset(str(data / f"train.{langs[0]}-{langs[1]}.{lang}"), None)
        sizes.append([int(n) for n in dataset.sizes])
        del dataset
    longest = [max(a, b) for a, b in zip(*sizes)]
    if not base or not longest or sum(longest) >= updates * base:
        return None
    return max(sum(longest) // updates, max(longest))


def unfitted_binarize(splits, files: ModelFiles, out_dir) -> Path:
    return binarize_pairs(splits, files, out_dir, fit=False)


def checked_data(base: ModelFiles, base_state: dict, save_dir: Path, train_pairs, valid_pairs, probe_pairs,
                 encoding_check: float) -> tuple[Path, dict]:
    """The fine-tune's data folder (train, valid and the corrections alone, encoded as the base model's own), checked
    against the base model's recorded validation loss (a UserError where the encoding is unlike its own), and what
    the checks measured: `encoding`, and `probe_loss_before` (the corrections' loss under the base model)."""
    data = save_dir / "data"
    if not (data / f"valid.{base.src.lang}-{base.tgt.lang}.{base.tgt.lang}.bin").is_file():
        splits = {"train": list(train_pairs), "valid": list(valid_pairs)}
        binarize_pairs({**splits, **({PROBE: list(probe_pairs)} if probe_pairs else {})}, base, data)
    # the encoding is checked as the base model's preprocessing writes it, the targets not fitted to the dictionary
    check = data / "encoding_check"
    if encoding_check and valid_pairs and not (check / f"valid.{base.src.lang}-{base.tgt.lang}.{base.tgt.lang}.bin").is_file():
        binarize_pairs({"valid": list(valid_pairs)}, base, check, fit=False)
    checked: dict = {"encoding": check_encoding(base, base_state, check if check.is_dir() else data, valid_pairs,
                                                encoding_check, unfitted_binarize)}
    before = probe_loss(base_state, base, save_dir, base_state) if probe_pairs else None
    if before is not None:
        checked["probe_loss_before"] = before
    return data, checked
