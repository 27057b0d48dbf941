"""A fine-tune's folder, whatever the family that writes it: what makes it the same fine-tune (settings.json),
whether it finished, and what a killed one left (discarded atomically). Shared by every family's fine-tune."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Sequence

from repair.errors import UserError
from repair.fileio import read_json

logger = logging.getLogger(__name__)


def pairs_digest(pairs: Sequence[tuple[str, str]]) -> str:
    return hashlib.sha1(json.dumps([list(p) for p in pairs], ensure_ascii=False).encode("utf-8")).hexdigest()


STALE = ".stale"


def discard_partial(save_dir: Path) -> None:
    """Remove an unfinished fine-tune in save_dir, and what an earlier removal left when killed.

    The folder is renamed first (one atomic step) and removed after: a kill at any moment leaves
    either the partial folder, which the next run discards again, or a `<name>.stale` folder,
    removed here, never a folder half removed under the fine-tune's own name.
    """
    stale = save_dir.with_name(save_dir.name + STALE)
    if save_dir.exists():
        logger.info("%s holds an unfinished fine-tune: starting it again from the base model", save_dir)
        if stale.exists():
            shutil.rmtree(stale)
        os.replace(save_dir, stale)
    if stale.exists():
        shutil.rmtree(stale)


def finished_before(save_dir: Path, settings: dict) -> bool:
    """Whether save_dir holds this fine-tune finished; a UserError when it holds one with other settings."""
    settings_path = save_dir / "settings.json"
    if not settings_path.is_file():
        return False
    old = read_json(settings_path)
    if not isinstance(old, dict):
        raise UserError(f"{settings_path}: not the settings of a fine-tune (a JSON object); remove {save_dir}")
    changed = sorted(k for k in settings if old.get(k) != settings[k])
    if changed:
        raise UserError(f"{save_dir} holds a fine-tune with other settings ({', '.join(changed)} differ); "
                        f"remove the folder or fine-tune into another one")
    return (save_dir / "finetune.json").is_file()


def run_settings(base_checkpoint: Path, train_pairs, valid_pairs, *, l2: float, trainable: Sequence[str],
                 epoch_checkpoints: bool, **kept) -> dict:
    """What makes a fine-tune the same one (settings.json): its base, its data's digests and its options."""
    settings = {"base_checkpoint": str(base_checkpoint), "pairs_sha1": pairs_digest(train_pairs),
                "pairs": len(train_pairs), "valid_sha1": pairs_digest(valid_pairs),
                **{k: kept[k] for k in ("lr", "patience", "max_epoch", "seed", "max_tokens")}}
    if l2 or trainable or epoch_checkpoints:  # settings of fine-tunes from before these keys stay as they were
        settings.update(l2=l2, trainable=list(trainable), epoch_checkpoints=epoch_checkpoints)
    return settings
