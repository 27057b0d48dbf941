"""What CI runs says what it skipped: `make test` prints each skip's reason, and `.ci/run` (REPAIR_NO_SKIP=1) fails
a test that would skip, the real-data tests without ../shared/data first of all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL_DATA_TEST = "tests/test_purity_rti.py::test_stopwords_match_the_reference_list"  # skips without the real data


def pytest_run(env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("REPAIR_NO_SKIP", "PYTEST_XDIST_WORKER")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args], cwd=REPO,
                          env={**base, **env}, capture_output=True, text=True, timeout=300)


def test_without_the_real_data_a_user_s_run_skips_and_says_why_and_ci_fails(tmp_path):
    absent = tmp_path / "no-shared-data"
    user = pytest_run({"REPAIR_SHARED_DATA": str(absent)}, REAL_DATA_TEST)
    assert user.returncode == 0, user.stdout[-2000:]
    assert "SKIPPED" in user.stdout and "nltk-stopwords/english.txt is absent" in user.stdout
    ci = pytest_run({"REPAIR_SHARED_DATA": str(absent), "REPAIR_NO_SKIP": "1"}, REAL_DATA_TEST)
    assert ci.returncode == 1, ci.stdout[-2000:]
    # a skip at set-up (a marker, a fixture) is an error there, in the test itself a failure: either fails the run
    assert "1 error" in ci.stdout and "REPAIR_NO_SKIP=1 (CI runs every test) and this test would skip" in ci.stdout
    assert "nltk-stopwords/english.txt is absent" in ci.stdout
    here = pytest_run({"REPAIR_NO_SKIP": "1"}, REAL_DATA_TEST)  # with the data it runs
    assert here.returncode == 0 and "1 passed" in here.stdout, here.stdout[-2000:]


def test_a_module_skipped_whole_fails_under_ci_too(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tests / "test_gone.py").write_text("import pytest\n\npytest.importorskip('no_such_module_here')\n\n\n"
                                        "def test_x():\n    pass\n", encoding="utf-8")
    (tests / "test_here.py").write_text("def test_y():\n    pass\n", encoding="utf-8")
    user = pytest_run({}, str(tests), "--rootdir", str(tmp_path))
    assert user.returncode == 0 and "no_such_module_here" in user.stdout, user.stdout[-2000:]
    ci = pytest_run({"REPAIR_NO_SKIP": "1"}, str(tests), "--rootdir", str(tmp_path))
    assert ci.returncode != 0 and "would skip" in ci.stdout and "no_such_module_here" in ci.stdout, ci.stdout[-2000:]


def test_make_test_prints_skip_reasons_and_ci_sets_no_skip(tmp_path):
    commands = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    pytest_line = [line for line in commands.splitlines() if "-m pytest" in line]
    assert len(pytest_line) == 1 and " -rfEs " in pytest_line[0] + " ", commands
    # .ci/run with a `make` that records how it was called, ahead of the real one on PATH
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "make").write_text(f'#!/bin/sh\necho "$REPAIR_NO_SKIP $*" > {tmp_path}/called\n', encoding="utf-8")
    (fake / "make").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    env.pop("REPAIR_NO_SKIP", None)
    done = subprocess.run(["bash", str(REPO / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (tmp_path / "called").read_text() == "1 test\n", done.stderr
    absent = subprocess.run(["bash", str(REPO / ".ci" / "run")], env={**env, "REPAIR_SHARED_DATA": str(tmp_path / "x")},
                            capture_output=True, text=True, timeout=60)
    assert absent.returncode == 1 and "is absent: CI runs the real-data tests" in absent.stderr
