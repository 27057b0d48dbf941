"""fileio: JSONL that any text survives, appends that survive short writes, one writer per folder."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import repair.fileio as fileio
from repair.errors import UserError
from repair.fileio import (FolderLock, append_jsonl, check_folder, iter_jsonl, read_jsonl, read_text_lines,
                           write_jsonl_atomic)

REPO = Path(__file__).resolve().parents[1]

# Every character str.splitlines() breaks a line on, and other text a reviewer may paste.
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
ODD = ["\x00", "\x07", "\x7f", "😀👍🏽", "שלום עולם", "مرحبا", "e\u0301\u0308", "\u200f\u200e", "\ufeff", "𠀀𪚥", "\t"]


def test_jsonl_round_trips_every_line_separator_and_odd_text(tmp_path):
    rows = [{"text": f"前{c}后"} for c in LINE_BREAKS + ODD] + [{"text": "长" * 100_000}]
    path = tmp_path / "a.jsonl"
    write_jsonl_atomic(path, rows[:5])
    for r in rows[5:]:
        append_jsonl(path, r)
    assert read_jsonl(path) == rows
    raw = path.read_bytes()
    assert raw.count(b"\n") == len(rows)
    # one line per row for every reader, str.splitlines included
    assert len(raw.decode("utf-8").splitlines()) == len(rows)
    assert "\u2028".encode() not in raw and "\x85".encode() not in raw
    assert "😀👍🏽".encode() in raw and "שלום".encode() in raw  # readable, not \u-escaped


def test_text_lines_break_only_at_newlines(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("a\u2028b\x85c\x0cd\r\ne\nf".encode("utf-8"))
    assert read_text_lines(path) == ["a\u2028b\x85c\x0cd", "e", "f"]


def test_a_lone_surrogate_is_refused_not_written(tmp_path):
    with pytest.raises(UserError, match="lone surrogate"):
        append_jsonl(tmp_path / "a.jsonl", {"text": "broken \ud800 paste"})
    assert not (tmp_path / "a.jsonl").exists() or (tmp_path / "a.jsonl").read_bytes() == b""


def test_append_writes_the_whole_line_when_the_system_takes_a_few_bytes_at_a_time(tmp_path, monkeypatch):
    real_write = os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(fileio.os, "write", short_write)
    row = {"text": "桌子上的三本红色的书 " * 20}
    append_jsonl(tmp_path / "a.jsonl", row)
    append_jsonl(tmp_path / "a.jsonl", row)
    monkeypatch.undo()
    assert len(calls) > 2
    assert read_jsonl(tmp_path / "a.jsonl") == [row, row]


def test_a_write_that_takes_nothing_is_an_error_not_a_silent_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio.os, "write", lambda fd, data: 0)
    with pytest.raises(OSError):
        append_jsonl(tmp_path / "a.jsonl", {"text": "x"})


def test_a_torn_last_line_is_left_out_only_when_asked(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": ')
    assert [o for _, o in iter_jsonl(path, skip_torn_tail=True)] == [{"a": 1}, {"a": 2}]
    with pytest.raises(UserError, match=r"log.jsonl:3: not valid JSON"):
        read_jsonl(path)


def test_deep_nesting_is_a_clear_error(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(UserError, match="a.jsonl:1: JSON nested too deeply"):
        read_jsonl(path)


def test_a_folder_under_a_file_is_one_clear_message(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match=r"out=.*f/x/y: .*f is a file, not a folder"):
        check_folder(tmp_path / "f" / "x" / "y", "out")
    check_folder(tmp_path / "new" / "x", "out")


HOLD = """
import sys, time
from repair.fileio import FolderLock
lock = FolderLock(sys.argv[1], "review folder").acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_one_writer_per_folder_and_a_killed_holder_is_taken_over(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=rf"open in process {proc.pid} on .*only one may write"):
            FolderLock(tmp_path).acquire()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        lock = FolderLock(tmp_path).acquire()  # the kernel dropped the dead holder's lock
        info = json.loads((tmp_path / FolderLock.NAME).read_text())
        assert info["pid"] == os.getpid()
        lock.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_locks_of_one_process_share_the_folder(tmp_path):
    a = FolderLock(tmp_path).acquire()
    b = FolderLock(tmp_path).acquire()
    a.release()
    b.release()
    with FolderLock(tmp_path):
        pass
