"""Plain-file I/O shared by every stage: atomic writes, fsynced appends, JSONL that names bad lines."""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from repair.errors import UserError


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a whole file so that a reader sees the old content or the new, never a half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def check_folder(path: str | os.PathLike, what: str) -> None:
    """UserError when `path` cannot become a folder because it, or a folder above it, is a file."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise UserError(f"{what}={path}: {p} is a file, not a folder; choose another {what}")
            return


def check_folder_overrides(argv: list[str], keys: Iterable[str]) -> None:
    """Check the `key=PATH` folder overrides of a Hydra command line before Hydra creates the folders."""
    keys = set(keys)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") in keys and value:
            check_folder(value, key.lstrip("+~"))


def remove_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files write_text_atomic leaves when killed mid-write; call only as the folder's
    one writer (FolderLock), when no write of this process is under way."""
    removed = []
    for p in Path(folder).glob(".*.tmp"):
        try:
            p.unlink()
            removed.append(p)
        except FileNotFoundError:
            pass
    return removed


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


# Characters some readers take for a line end (str.splitlines, editors, browsers' JSON): written escaped, so
# that a JSONL line is one line for every reader. json.dumps escapes the C0 controls itself.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_LINE_BREAK_RE = re.compile("[\x85\u2028\u2029]")


def json_line(obj: Any) -> str:
    """One JSONL line (with its newline): UTF-8 text kept readable, every line-breaking character escaped.

    Text that cannot be stored as UTF-8 (a lone surrogate, say from a broken paste) raises UserError.
    """
    text = json.dumps(obj, ensure_ascii=False)
    text = _LINE_BREAK_RE.sub(lambda m: _LINE_BREAKS[m.group()], text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UserError(
            f"text with a lone surrogate (U+{ord(e.object[e.start]):04X}) cannot be saved as UTF-8; paste it again"
        ) from None
    return text + "\n"


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[Any]) -> None:
    write_text_atomic(path, "".join(json_line(r) for r in rows))


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written: a write may take fewer bytes than asked (a signal, a full pipe)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(f"write returned {n}")
        view = view[n:]


def append_jsonl(path: str | os.PathLike, row: Any) -> None:
    """Append one JSON line and fsync it: the whole line is on disk when this returns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json_line(row).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A previous crash may have left a line without its newline: start on a fresh line.
        if os.fstat(fd).st_size > 0:
            with open(path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def split_lines(text: str) -> list[str]:
    """Lines ended by \\n (or \\r\\n), the one line end every writer here uses; unlike str.splitlines, U+2028,
    U+0085, form feeds and the like stay inside their line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [s[:-1] if s.endswith("\r") else s for s in lines]


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 (byte 0x{raw[e.start]:02x}); save the file as UTF-8") from None


def read_text_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a UTF-8 text file (BOM dropped, \\n or \\r\\n stripped); a clear error if it is not UTF-8."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return split_lines(_decode(path, path.read_bytes()))


def iter_text_lines(path: str | os.PathLike) -> Iterator[str]:
    """Lines of a UTF-8 file, streamed as read_text_lines reads them (a BOM at the start dropped); a clear error names a bad line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"{path}:{n}: not UTF-8 (byte 0x{raw[e.start]:02x}); save the file as UTF-8") from None
            if n == 1:
                line = line.removeprefix("\ufeff")
            yield line.rstrip("\r\n")


def torn_tail(data: bytes) -> int | None:
    """Where a last line cut short by a crash mid-append starts, or None when the data ends whole.

    A line is on disk whole once append_jsonl returns; a last line without its newline that is not JSON
    was never acknowledged to anyone, so it can go.
    """
    if not data or data.endswith(b"\n"):
        return None
    cut = data.rfind(b"\n") + 1
    try:
        json.loads(data[cut:].decode("utf-8"))
        return None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return cut


def drop_torn_tail(path: str | os.PathLike) -> bool:
    """Cut an append-only JSONL file back to its last whole line; True when something was cut."""
    path = Path(path)
    if not path.exists():
        return False
    cut = torn_tail(path.read_bytes())
    if cut is None:
        return False
    with open(path, "r+b") as f:
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    return True


def iter_jsonl(path: str | os.PathLike, *, skip_torn_tail: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, object) for every non-blank line; a bad line raises UserError naming it.

    `skip_torn_tail`: for an append-only log, leave out a last line a crash cut short (see torn_tail).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    raw = path.read_bytes()
    if skip_torn_tail:
        cut = torn_tail(raw)
        raw = raw if cut is None else raw[:cut]
    for n, line in enumerate(split_lines(_decode(path, raw)), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise UserError(f"{path}:{n}: JSON nested too deeply") from None


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    return [obj for _, obj in iter_jsonl(path)]


def read_json(path: str | os.PathLike) -> Any:
    """A whole JSON file; a clear error naming the file (and line) when it is not JSON."""
    path = Path(path)
    text = "\n".join(read_text_lines(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None


# ---------------------------------------------------------------- one writer per folder

_held_locks: dict[Path, list] = {}  # folder -> [open lock file, holders in this process]
_held_guard = threading.Lock()


def _command_line() -> str:
    """This process's command as a person typed it: `python -m repair.review RUN` rather than a path to __main__.py."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = f"python -m {spec.name.removesuffix('.__main__')}" if spec is not None and spec.name else \
        (Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python")
    return " ".join([head, *sys.argv[1:]])[:300]


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {info['pid']} on {info['host']} ({info['command']}, since {info['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


class FolderLock:
    """An OS lock (flock) that makes this process the one writer of a folder until release().

    A second process gets UserError naming the holder (pid, host, command, since when). The kernel drops the
    lock when its process dies, however it dies, so a killed holder's lock is simply taken over. Locks of the
    same folder within one process share the OS lock (a store and a server in one process do not exclude
    each other).
    """

    NAME = ".writer.lock"

    def __init__(self, folder: str | os.PathLike, what: str = "folder"):
        self.folder = Path(folder).resolve()
        self.what = what
        self.held = False

    def acquire(self) -> "FolderLock":
        if self.held:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        with _held_guard:
            entry = _held_locks.get(self.folder)
            if entry is None:
                entry = [self._lock_file(), 0]
                _held_locks[self.folder] = entry
            entry[1] += 1
        self.held = True
        return self

    def _lock_file(self):
        path = self.folder / self.NAME
        f = open(path, "a+b")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _describe_holder(f.read().decode("utf-8", "replace"))
            f.close()
            raise UserError(
                f"{self.folder}: this {self.what} is open in {holder}; only one may write to it at a time. "
                "Finish or stop that one (or wait for it), then run again."
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command_line(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        f.truncate(0)
        f.write(json.dumps(info).encode("utf-8"))
        f.flush()
        return f

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with _held_guard:
            entry = _held_locks.get(self.folder)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del _held_locks[self.folder]
                f = entry[0]
                try:
                    f.truncate(0)
                    fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                finally:
                    f.close()

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def file_sha256(path: str | os.PathLike) -> str | None:
    """The SHA-256 of a file's bytes, read a block at a time (a model's checkpoint may be gigabytes); None when
    there is no such file."""
    import hashlib

    path = Path(path)
    if not path.exists():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def flat(cfg: dict, prefix: str = "") -> dict:
    """A nested configuration as dotted keys: {"a": {"b": 1}} -> {"a.b": 1}."""
    out = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out
