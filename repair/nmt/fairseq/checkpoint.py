"""Load fairseq checkpoints with torch's weights-only unpickler.

torch >= 2.6 loads with weights_only=True and refuses fairseq checkpoints because they pickle
an argparse.Namespace (and, in older ones, a few plain-Python helpers). We allowlist exactly
those classes, process-wide, so that fairseq's own loading (resuming a training, loading an
ensemble) works too, and anything else in a pickle is still refused. torch is imported where a
checkpoint is loaded, not with this module: a run that needs no checkpoint (a cached CTranslate2 model)
never imports it.
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
from pathlib import Path
from typing import Any

from repair.errors import UserError

# What fairseq 0.12 checkpoints contain besides tensors, dicts, lists and numbers:
# the legacy argparse arguments (state["args"], and Namespaces nested inside state["cfg"]).
FAIRSEQ_SAFE_GLOBALS: list[Any] = [argparse.Namespace, collections.OrderedDict, collections.defaultdict]


def _numpy_globals() -> list[Any]:
    # Meters of older fairseq versions stored numpy scalars in extra_state["metrics"].
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return []
    out: list[Any] = [np.dtype, np.ndarray]
    try:
        out.append(np._core.multiarray.scalar)  # numpy >= 2
    except AttributeError:  # pragma: no cover
        out.append(np.core.multiarray.scalar)
    out += [type(np.dtype(t)) for t in ("float64", "float32", "float16", "int64", "int32")]
    try:
        out.append(np._core.multiarray._reconstruct)
    except AttributeError:  # pragma: no cover
        out.append(np.core.multiarray._reconstruct)
    return out


def allow_fairseq_globals():
    """torch, with fairseq's pickled classes allowlisted process-wide (for fairseq's and CTranslate2's own
    loading of checkpoints too)."""
    import torch

    if not getattr(allow_fairseq_globals, "done", False):
        torch.serialization.add_safe_globals(FAIRSEQ_SAFE_GLOBALS + _numpy_globals())
        allow_fairseq_globals.done = True
    return torch


def _refused(path, e: pickle.UnpicklingError) -> UserError:
    text = str(e)
    if "Weights only load failed" not in text:
        return UserError(f"{path}: not a readable PyTorch checkpoint ({text.strip()[:200]})")
    found = [l.strip() for l in text.splitlines() if "Unsupported global" in l or "not an allowed global" in l]
    return UserError(
        f"{path}: refused to load, it pickles an object that fairseq checkpoints never contain "
        f"({found[0] if found else 'unsupported global'}). Load checkpoints only from a source you trust; "
        f"this loader never runs code from a checkpoint."
    )


class _WeightsOnlyTorch:
    """torch as fairseq's checkpoint_utils sees it: `load` always passes weights_only=True, which torch honours
    over TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (that variable only changes loads that leave weights_only unset)."""

    def __init__(self, module):
        self._torch = module

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def load(self, f, *args, **kwargs):
        kwargs["weights_only"] = True
        try:
            return self._torch.load(f, *args, **kwargs)
        except pickle.UnpicklingError as e:
            raise _refused(getattr(f, "name", f), e) from None


def force_weights_only() -> None:
    """Make fairseq's own checkpoint loading (resuming a training, fine-tuning from a model) weights-only,
    whatever the environment says."""
    from fairseq import checkpoint_utils

    allow_fairseq_globals()
    if not isinstance(checkpoint_utils.torch, _WeightsOnlyTorch):
        checkpoint_utils.torch = _WeightsOnlyTorch(checkpoint_utils.torch)


def load_checkpoint(path: str | os.PathLike) -> dict:
    """The state dict of a fairseq checkpoint, loaded on CPU with weights_only=True.

    A missing file, a file that is not a checkpoint, or a checkpoint that pickles any object
    outside the allowlist gives a UserError that names the file.
    """
    torch = allow_fairseq_globals()
    path = Path(path)
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.pt"))
            hint = f" ({path.parent} holds: {', '.join(found)})" if found else f" ({path.parent} holds no .pt file)"
        raise UserError(f"checkpoint {path} not found{hint}; give a fairseq checkpoint file or model folder "
                        f"(model.checkpoint= for the loop, translator.checkpoint= for repair.purity)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise _refused(path, e) from None
    except Exception as e:  # torch raises many types for a file that is not a checkpoint at all
        raise UserError(f"{path}: not a readable PyTorch checkpoint ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(state, dict) or "model" not in state or not ("cfg" in state or "args" in state):
        raise UserError(f"{path}: a PyTorch file but not a fairseq checkpoint (no 'model' and 'cfg' entries)")
    return state


def trained_lr(path: str | os.PathLike) -> float | None:
    """The (peak) learning rate a fairseq checkpoint records it was trained with, or None where it records none.
    Read with the tensors memory-mapped where the file allows (a large model's weights are not read for it)."""
    torch = allow_fairseq_globals()
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # a file from before torch's zip format cannot be memory-mapped
            state = load_checkpoint(path)
        lr = checkpoint_cfg(state).optimization.lr
    except (UserError, pickle.UnpicklingError, AttributeError, KeyError, TypeError, ValueError, OSError):
        return None
    try:
        lr = float(lr if isinstance(lr, (int, float)) else lr[0])  # fairseq records a list (one per update stage)
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return lr if lr > 0 else None


def checkpoint_cfg(state: dict):
    """The training configuration stored in a checkpoint, as an OmegaConf DictConfig."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    if state.get("cfg") is not None:
        cfg = state["cfg"]
        return cfg if OmegaConf.is_config(cfg) else OmegaConf.create(cfg, flags={"allow_objects": True})
    from repair.nmt.fairseq.config import hydra_isolated

    with hydra_isolated():
        return convert_namespace_to_omegaconf(state["args"])


def recorded_data_folders(cfg: Any, checkpoint: str | os.PathLike) -> list[Path]:
    """The folders holding the binarized data a checkpoint was trained on, as fairseq recorded them (`task.data`,
    several joined by `:`), each found as written: absolute, else relative to the checkpoint's folder or its parent
    (fairseq-train is usually run beside `checkpoints/`). Only folders that exist, each once."""
    recorded = None
    for key in ("task", "data"):
        cfg = None if cfg is None else (cfg.get(key) if hasattr(cfg, "get") else getattr(cfg, key, None))
        recorded = cfg
    if not isinstance(recorded, str) or not recorded.strip():
        return []
    folder = Path(checkpoint).resolve().parent
    found: list[Path] = []
    for part in recorded.split(":"):
        path = Path(part.strip()).expanduser()
        if not part.strip():
            continue
        candidates = [path] if path.is_absolute() else [folder / path, folder.parent / path]
        for candidate in candidates:
            candidate = candidate.resolve()
            if candidate.is_dir() and candidate not in found:
                found.append(candidate)
                break
    return found


def is_complete(path: str | os.PathLike) -> bool:
    """Whether a checkpoint file is whole: torch writes a zip archive, whose directory comes last."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def heal_checkpoints(save_dir: str | os.PathLike) -> list[Path]:
    """Set aside checkpoints a kill left half-written, and put back the state they were copying.

    fairseq writes the first checkpoint of a save atomically, then copies it to the other names
    (checkpoint_best.pt, checkpoint_last.pt) with a plain copy: a kill during that copy leaves a
    truncated file, and resuming would fail on it. Each such file is renamed to <name>.partial
    (kept, never deleted) and replaced, through a temporary file and a rename, by the newest whole
    checkpoint, which is the file the copy was made from. Returns the files set aside.
    """
    import logging
    import shutil

    save_dir = Path(save_dir)
    files = sorted(save_dir.glob("checkpoint*.pt"), key=lambda p: p.stat().st_mtime_ns)
    broken = [p for p in files if not is_complete(p)]
    whole = [p for p in files if p not in broken]
    for path in broken:
        aside = path.with_name(path.name + ".partial")
        os.replace(path, aside)
        if whole:
            tmp = path.with_name(path.name + ".tmp")
            shutil.copyfile(whole[-1], tmp)
            os.replace(tmp, path)
        logging.getLogger(__name__).warning(
            "%s was half-written (the run was stopped while saving): kept as %s%s", path, aside.name,
            f", replaced by a copy of {whole[-1].name}" if whole else "")
    return broken
