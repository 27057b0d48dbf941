"""A model converted for CTranslate2, cached: `<model>.ct2/` beside the model (or `cache_dir/<name>-<hash>.ct2/`),
converted into a temporary folder beside it and renamed into place, with `converted.json` written last: the sha256 of
what it was converted from (the family says what: a fairseq checkpoint and its dictionaries, a transformers folder and
its adapter), the CTranslate2 version, the sha256 of every converted file, and the fidelity records measured for it.
A cache whose sources changed is stale, one whose files do not match their hashes (or with no marker: a conversion
that was stopped) is corrupt; either is converted again, never used. Shared by every family that converts."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from repair.errors import UserError
from repair.fileio import file_sha256

logger = logging.getLogger(__name__)

MARKER = "converted.json"


MARKER_FORMAT = 2  # 2: the checkpoint's facts and the fidelity records kept in the marker


def ctranslate2_version() -> str:
    import ctranslate2

    return ctranslate2.__version__


def cache_folder(checkpoint: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    checkpoint = Path(checkpoint)
    if not cache_dir:
        return checkpoint.parent / f"{checkpoint.name}.ct2"
    # one folder for many models: checkpoints of the same name (checkpoint_best.pt) kept apart by their path
    where = hashlib.sha256(str(checkpoint.resolve()).encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{checkpoint.name}-{where}.ct2"


def cache_problem(folder: Path, sources: dict) -> str | None:
    """Why a converted cache cannot be used (None: it can): missing, stale or corrupt."""
    import ctranslate2

    marker = folder / MARKER
    if not folder.is_dir():
        return "missing"
    if not marker.is_file():
        return "corrupt (no marker: a conversion that did not finish)"
    try:
        saved = json.loads(marker.read_text(encoding="utf-8"))
        converted_from, hashes = saved["from"], saved["files"]
    except (ValueError, KeyError, TypeError) as e:
        return f"corrupt (unreadable {MARKER}: {e})"
    if saved.get("format") != MARKER_FORMAT:
        return "stale (converted by an earlier version, without the checkpoint's facts)"
    if converted_from != sources:
        changed = [k for k in sources if converted_from.get(k) != sources[k]]
        return f"stale ({', '.join(changed)} changed since it was converted)"
    if saved.get("ctranslate2") != ctranslate2.__version__:
        return f"stale (converted with CTranslate2 {saved.get('ctranslate2')}, this is {ctranslate2.__version__})"
    for name, digest in hashes.items():
        path = folder / name
        if not path.is_file():
            return f"corrupt ({name} is missing)"
        if file_sha256(path) != digest:
            return f"corrupt ({name} does not match its hash)"
    return None


def conversion_folder(out: Path) -> Path:
    """A temporary folder beside `out` for a conversion, renamed into place when it is done; one message where
    that folder cannot be written."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise UserError(f"cannot write the converted model to {out.parent} ({e.strerror}): "
                        f"give translator.cache_dir=DIR, a folder that can be written") from None


def read_marker(folder: Path) -> dict:
    return json.loads((folder / MARKER).read_text(encoding="utf-8"))


def save_fidelity(folder: Path, key: str, record: dict) -> None:
    """A fidelity record into the marker (the converted files and their hashes unchanged)."""
    from repair.fileio import write_json_atomic

    marker = read_marker(folder)
    marker.setdefault("fidelity", {})[key] = record
    try:
        write_json_atomic(folder / MARKER, marker)
    except OSError as e:  # a cache that cannot be written (a shared model): measured again next time
        logger.warning("could not keep the fidelity record in %s (%s): it is measured again next time",
                       folder / MARKER, e.strerror or e)
