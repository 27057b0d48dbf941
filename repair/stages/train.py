"""The train stage: the model under test with its files, trained here or brought along, recorded in
the run folder's model.json (a resumed run reads it and loads nothing here)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from repair.errors import UserError
from repair.fileio import read_json, write_json_atomic

if TYPE_CHECKING:
    from repair.nmt.preprocessing import ModelFiles
    from repair.stages import Translators

log = logging.getLogger("repair.loop")


def run(run_dir: Path, data_dir: Path | None, translators: "Translators", model: dict, checkpoint: str | None = None,
        checkpoint_dir: str = "checkpoints", seed: int = 1, device: str = "auto") -> "ModelFiles":
    """The model under test: the one model.json records, the `checkpoint` brought along, or one trained
    on data_dir with the `model` group's settings into checkpoint_dir. A checkpoint is loaded once, into
    the translator that tests it (which resolves and checks its preprocessing). Where the translator's
    preprocessing keys differ from those model.json was resolved with, its checkpoint is resolved again."""
    from repair.nmt.preprocessing import ModelFiles

    marker = run_dir / "model.json"
    saved = read_json(marker) if marker.exists() else None
    if saved is not None and not (isinstance(saved, dict) and (isinstance(saved.get("files"), dict)
                                                                or isinstance(saved.get("checkpoint"), str))):
        raise UserError(f"{marker}: names no model (\"checkpoint\": PATH, or \"files\"); delete it to train or "
                        "load the model again")
    options = translators.preprocessing()  # the translator group's preprocessing keys
    if saved is not None:
        again = saved.get("options", options) != options and isinstance(saved.get("checkpoint"), str)
        if saved.get("files") and not again:
            return ModelFiles.from_dict(saved["files"])
        if again:
            log.info("%s: the translator's preprocessing keys changed (%s -> %s): the model's files resolved again",
                     marker, saved.get("options"), options)
        path = Path(saved["checkpoint"])
    elif checkpoint:
        path = Path(checkpoint)
        if not path.exists():
            raise UserError(f"model.checkpoint={path}: no such file or folder ({translators.family.model_help})")
    else:
        path = translators.family.train(data_dir, Path(checkpoint_dir), model, seed, device)
    files = translators.load(path, data_dir)
    log.info("model %s; %s; %s", files.checkpoint, files.src.describe(), files.tgt.describe())
    digest = translators.family_of(files).digest(files.checkpoint)
    write_json_atomic(marker, {"checkpoint": files.checkpoint, "sha256": digest,
                               "files": files.to_dict(), "options": options})
    return files

