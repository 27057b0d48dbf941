"""Fine-tune a transformers model folder on sentence pairs, by default as a LoRA adapter (PEFT), with the fairseq
fine-tune's meaning: a fixed learning rate, validation loss (bits per target token) after every epoch, the epoch of
the lowest kept as `checkpoint_best/`, patience on it, `max_epoch`, `stop_when(epoch)` after each epoch is saved
(finetune.select=corrections, with `checkpoint<epoch>/` per epoch), settings.json / finetune.json as
repair.nmt.fairseq.finetune writes them (a finished fine-tune returns at once; an unfinished one starts again).

An adapter's folder is PEFT's `save_pretrained` (adapter_config.json, adapter_model.safetensors) beside `base.json`,
the note naming the base model's folder; `adapter="none"` trains every weight and saves a whole model folder (the
tokenizer beside it). Marian ties its output layer to the embeddings, whose decoder-start row CTranslate2 does not
use: that row is kept as it was, so that a converted model still agrees with this one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import shutil
import time
from pathlib import Path
from typing import Callable, Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.fileio import append_jsonl, read_json, write_json_atomic, write_jsonl_atomic
from repair.nmt.hf.folder import BASE_NOTE, Folder, load_model, load_tokenizer, resolve

logger = logging.getLogger(__name__)

ADAPTERS = ("lora", "none")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")  # Marian, M2M100/NLLB, mBART
BATCH = 32  # sentence pairs per update


def trainable_model(folder: Folder, adapter: str, rank: int, alpha: int, targets: Sequence[str], device: str):
    """The model to train: a new LoRA adapter on the base model (or the base's own adapter, trained on, for a base
    that is an adapter), or every weight (an adapter base merged into its model first)."""
    if adapter == "none":
        model = load_model(folder, device)
        if folder.adapter is not None:
            model = model.merge_and_unload()
        model.train()
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    model = load_model(Folder(folder.base, folder.base), device)
    if folder.adapter is not None:
        model = PeftModel.from_pretrained(model, str(folder.adapter), is_trainable=True)
    else:
        config = LoraConfig(r=int(rank), lora_alpha=int(alpha), target_modules=list(targets), lora_dropout=0.0,
                            bias="none", task_type="SEQ_2_SEQ_LM")
        try:
            model = get_peft_model(model, config)
        except ValueError as e:
            raise UserError(f"finetune.lora_targets={list(targets)}: {str(e).splitlines()[0][:200]}") from None
    model.train()
    return model


def keep_start_row(model) -> None:
    """Gradients never reach the embedding row the decoder starts from (Marian's <pad>, tied to the output layer)."""
    start = getattr(model.config, "decoder_start_token_id", None)
    embed = model.get_input_embeddings().weight
    if start is not None and embed.requires_grad and start != getattr(model.config, "eos_token_id", None):
        embed.register_hook(lambda g: g.index_fill(0, g.new_tensor([start], dtype=int), 0.0))


def encoded(tok, pairs: Sequence[tuple[str, str]], prefix: str = "") -> list[tuple[list[int], list[int]]]:
    """Each pair's source and target ids; pairs with an empty side left out."""
    kept = [(clean_text(s), clean_text(t)) for s, t in pairs]
    kept = [(s, t) for s, t in kept if s and t]
    if not kept:
        return []
    enc = tok([prefix + s for s, _ in kept], text_target=[t for _, t in kept], truncation=True, max_length=256)
    return list(zip(enc["input_ids"], enc["labels"]))


def unspellable(tok, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Targets the tokenizer cannot write back as they are, its normalization aside (NFKC: ？ is ?): a character
    missing from its vocabulary becomes <unk> and is dropped on decoding."""
    import unicodedata

    def same(text: str) -> str:
        return "".join(unicodedata.normalize("NFKC", text).split())

    out = []
    for _, t in pairs:
        ids = tok(text_target=[clean_text(t)])["input_ids"][0]
        back = tok.decode(ids, skip_special_tokens=True)
        if same(back) != same(clean_text(t)) or tok.unk_token_id in ids:
            out.append(t)
    return out


def batch_loss(model, rows, pad: int, device, reduce: bool = True):
    """The summed cross entropy (nats) of a batch and its number of target tokens."""
    import torch

    src_w, tgt_w = max(len(s) for s, _ in rows), max(len(t) for _, t in rows)
    ids = torch.tensor([s + [pad] * (src_w - len(s)) for s, _ in rows], device=device)
    mask = torch.tensor([[1] * len(s) + [0] * (src_w - len(s)) for s, _ in rows], device=device)
    labels = torch.tensor([t + [-100] * (tgt_w - len(t)) for _, t in rows], device=device)
    logits = model(input_ids=ids, attention_mask=mask, labels=labels).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1),
                                             ignore_index=-100, reduction="sum" if reduce else "none")
    return loss, int((labels != -100).sum())


PROBE = "probe.jsonl"  # the corrections, once each: their loss before and after (repair.stages.finetune's warning)


def probe_loss(checkpoint, save_dir, source_prefix: str | None = None, device: str = "cpu") -> float | None:
    """The corrections' loss (bits per target token) under the model or adapter at `checkpoint` (the fine-tune in
    save_dir kept them in probe.jsonl); None where there were none."""
    from repair.fileio import read_jsonl

    path = Path(save_dir) / PROBE
    pairs = [(r["source"], r["target"]) for r in read_jsonl(path)] if path.is_file() else []
    if not pairs:
        return None
    folder = resolve(checkpoint)
    tok, _ = load_tokenizer(folder)
    rows = encoded(tok, pairs, (source_prefix.strip() + " ") if source_prefix else "")
    loss = split_loss(load_model(folder, device), rows, tok.pad_token_id, device)
    return None if loss is None else round(loss, 4)


def split_loss(model, rows, pad: int, device) -> float | None:
    """Mean loss per target token in bits, as fairseq reports it."""
    import torch

    if not rows:
        return None
    total, tokens = 0.0, 0
    was = model.training
    model.eval()
    with torch.no_grad():
        for k in range(0, len(rows), BATCH):
            loss, n = batch_loss(model, rows[k:k + BATCH], pad, device)
            total, tokens = total + float(loss), tokens + n
    model.train(was)
    return total / max(1, tokens) / math.log(2)


def save(model, folder: Path, base: Folder, tok, adapter: str) -> None:
    """An adapter folder (PEFT's files and base.json) or, for adapter=none, a whole model folder."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    if adapter == "none":
        tok.save_pretrained(str(tmp))
    else:
        write_json_atomic(tmp / BASE_NOTE, {"base": str(base.base), "adapter": adapter})
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def run_epochs(model, train_rows, valid_rows, save_dir: Path, base: Folder, tok, *, lr: float, patience: int,
               max_epoch: int, seed: int, adapter: str, epoch_checkpoints: bool,
               stop_when: Callable[[int], bool] | None, device) -> tuple[list[dict], dict]:
    """The training loop: the curve (one row per epoch) and why it stopped."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=float(lr), weight_decay=0.0)
    pad, rng = tok.pad_token_id, random.Random(seed)
    curve, best, since = [], math.inf, 0
    for epoch in range(1, int(max_epoch) + 1):
        order = list(range(len(train_rows)))
        rng.shuffle(order)
        total, tokens = 0.0, 0
        for k in range(0, len(order), BATCH):
            loss, n = batch_loss(model, [train_rows[i] for i in order[k:k + BATCH]], pad, device)
            (loss / max(1, n)).backward()
            opt.step()
            opt.zero_grad()
            total, tokens = total + float(loss.detach()), tokens + n
        valid = split_loss(model, valid_rows, pad, device)
        row = {"epoch": epoch, "train_loss": round(total / max(1, tokens) / math.log(2), 4),
               "valid_loss": round(valid, 4)}
        curve.append(row)
        append_jsonl(save_dir / "curve.jsonl", row)
        logger.info("fine-tune epoch %s: train loss %.3f, valid loss %.3f", epoch, row["train_loss"], valid)
        if epoch_checkpoints:
            save(model, save_dir / f"checkpoint{epoch}", base, tok, adapter)
        if valid <= best:  # the later of ties, as fairseq keeps it
            best, since = valid, 0
            save(model, save_dir / "checkpoint_best", base, tok, adapter)
        else:
            since += 1
        if stop_when is not None and stop_when(epoch):
            return curve, {"reason": "stop_when", "epoch": epoch}
        if patience and since >= patience:
            return curve, {"reason": "patience", "epoch": epoch}
    return curve, {"reason": "max_epoch", "epoch": len(curve)}


NO_CHECK = "a transformers model is encoded by its own tokenizer and records no validation loss to check against"


def unsupported(l2: float, trainable: Sequence[str], encoding_check: float | None) -> None:
    """One UserError naming every fairseq-only fine-tune option set for a transformers model (finetune.l2, an L2 pull
    toward the base weights; finetune.trainable, parameter prefixes), which this fine-tune cannot honour; the
    encoding check (finetune.encoding_check) is logged as not made."""
    keys = ([f"finetune.l2={l2}"] if l2 else []) + ([f"finetune.trainable={list(trainable)}"] if trainable else [])
    if keys:
        raise UserError(f"{', '.join(keys)}: fairseq models only; a transformers model's fine-tune trains a LoRA "
                        f"adapter (finetune.adapter=lora) or every weight (finetune.adapter=none), with no L2 pull "
                        f"and no choice of parameters. Set finetune.l2=0 and finetune.trainable=[] (finetune=anchored "
                        f"and finetune=decoder set them)")
    if encoding_check:
        logger.info("fine-tune: finetune.encoding_check=%s is not checked: %s", encoding_check, NO_CHECK)


def finetune_model(base, train_pairs: Sequence[tuple[str, str]], valid_pairs: Sequence[tuple[str, str]],
                   save_dir, *, lr: float = 3e-4, patience: int = 15, max_epoch: int = 20, seed: int = 1,
                   device: str = "auto", threads: int | None = None, epoch_checkpoints: bool = False,
                   stop_when: Callable[[int], bool] | None = None, probe_pairs: Sequence[tuple[str, str]] = (),
                   adapter: str = "lora", lora_rank: int = 4, lora_alpha: int = 8,
                   lora_targets: Sequence[str] = LORA_TARGETS, source_prefix: str | None = None, l2: float = 0.0,
                   trainable: Sequence[str] = (), encoding_check: float | None = None) -> dict:
    """Fine-tune the transformers model `base` (ModelFiles) names on train_pairs into save_dir (see the module).
    Returns what repair.nmt.fairseq.finetune.finetune_model returns, with `adapter`, `trained_parameters` and the
    corrections' loss under the base model and the kept checkpoint (`probe_loss_before`, `probe_loss_after`).
    fairseq's l2 and trainable are refused (see unsupported); the encoding check is recorded as not made."""
    import torch

    from repair.nmt.device import set_threads, torch_device
    from repair.nmt.folders import discard_partial, finished_before, run_settings

    if adapter not in ADAPTERS:
        raise UserError(f"finetune.adapter={adapter!r}: choose one of {', '.join(ADAPTERS)}")
    unsupported(l2, trainable, encoding_check)
    start = time.time()
    folder, save_dir = resolve(base.checkpoint, "model.checkpoint"), Path(save_dir)
    settings = {**run_settings(folder.path, train_pairs, valid_pairs, lr=lr, patience=patience, max_epoch=max_epoch,
                               seed=seed, max_tokens=None, l2=l2, trainable=tuple(trainable),
                               epoch_checkpoints=epoch_checkpoints),
                "adapter": adapter, **({"lora": [int(lora_rank), int(lora_alpha), list(lora_targets)]}
                                       if adapter == "lora" else {})}
    if finished_before(save_dir, settings):
        return read_json(save_dir / "finetune.json")
    if (save_dir / "settings.json").is_file() or (save_dir.is_dir() and not any(save_dir.iterdir())):
        discard_partial(save_dir)  # an unfinished fine-tune (what the stage wrote there before it is kept)
    save_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(save_dir / "settings.json", settings)
    dev = torch_device(device, "device")
    set_threads(threads, dev.startswith("cuda"))
    torch.manual_seed(seed)
    tok, _ = load_tokenizer(folder)
    prefix = (source_prefix.strip() + " ") if source_prefix else ""
    train_rows, valid_rows = encoded(tok, train_pairs, prefix), encoded(tok, valid_pairs, prefix)
    probe_rows = encoded(tok, probe_pairs, prefix)
    if not train_rows:
        raise UserError(f"no sentence pairs to fine-tune {folder.path} on (every pair has an empty side)")
    model = trainable_model(folder, adapter, lora_rank, lora_alpha, lora_targets, dev)
    if adapter == "none":
        keep_start_row(model)
    logger.info("fine-tuning %s on %d pairs in %s (%s; lr %g, patience %d, at most %d epochs)", folder.path,
                len(train_rows), save_dir, adapter, lr, patience, max_epoch)
    with (model.disable_adapter() if adapter == "lora" and folder.adapter is None else contextlib.nullcontext()):
        before = split_loss(model, probe_rows, tok.pad_token_id, dev)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    curve, stop = run_epochs(model, train_rows, valid_rows, save_dir, folder, tok, lr=lr, patience=patience,
                             max_epoch=max_epoch, seed=seed, adapter=adapter, epoch_checkpoints=epoch_checkpoints,
                             stop_when=stop_when, device=dev)
    del model
    best = save_dir / "checkpoint_best"
    write_jsonl_atomic(save_dir / PROBE, ({"source": a, "target": b} for a, b in probe_pairs))
    after = probe_loss(best, save_dir, source_prefix, dev)
    result = {"best_checkpoint": str(best), "epochs": len(curve),
              "best_valid_loss": min(r["valid_loss"] for r in curve) if curve else None, "curve": curve,
              "seconds": round(time.time() - start, 2), "stop": stop, "adapter": adapter,
              "trained_parameters": trained, **({"source_prefix": source_prefix} if source_prefix else {}),
              **({"probe_loss_before": round(before, 4), "probe_loss_after": after}
                 if before is not None and after is not None else {}), "encoding": {"checked": False, "why": NO_CHECK}}
    write_json_atomic(save_dir / "finetune.json", result)
    return result
