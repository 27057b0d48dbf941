"""The reduced demo of test_loop.py. A loop killed inside fine-tuning resumes to the report and the weights of a run that was never killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repair.bench.resume import figures

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def tiny(shared: Path, run_dir: Path) -> list[str]:
    return [
        f"data.dir={shared}/data",
        "data.build.n_train=8000",
        "data.build.n_fragments=5000",
        "data.build.n_valid=150",
        "data.build.n_test=120",
        "data.build.n_purity=60",
        "data.build.domain=0",  # the grammar's words only, as the loop tests' small demo
        "data.holdout=0.3",  # the demo holds out 120 of its 225 sentences; this one has 60
        f"checkpoint_dir={shared}/base",
        "model.max_epoch=4",
        "finetune.max_epoch=4",
        "finetune.patience=10",  # every epoch runs: the kill lands between two of them
        "finetune.replay=200",
        "verify.bootstrap_samples=100",
        "translator.beam=2",
        "purity.relations=[rti,replace]",
        f"run_dir={run_dir}",
    ]


def loop(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "repair.loop", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=2400)
    assert proc.returncode == 0, err[-3000:]


def finished_epochs(folder: Path) -> int:
    path = folder / "curve.jsonl"
    if not path.is_file():
        return 0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip().endswith("}")]
    return len({r["epoch"] for r in rows if "train_loss" in r})


def weights(run_dir: Path) -> dict:
    return torch.load(run_dir / "cycle1/finetune/checkpoint_best.pt", map_location="cpu", weights_only=False)["model"]


def test_a_loop_killed_inside_finetuning_resumes_to_the_uninterrupted_result(tmp_path):
    shared = tmp_path / "shared"
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    finish(loop(tiny(shared, ref)))  # builds the data and trains the base model, then the loop uninterrupted
    assert json.loads((ref / "report.json").read_text())["resumed"] == []
    ref_epochs = json.loads((ref / "cycle1/finetune/result.json").read_text())["epochs"]
    assert ref_epochs >= 2

    proc = loop(tiny(shared, killed))
    ft = killed / "cycle1/finetune"
    deadline = time.time() + 600
    while finished_epochs(ft) < 1:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (ft / "finetune.json").exists(), "the kill came after the fine-tune had finished"
    assert (ft / "checkpoint_last.pt").is_file()

    finish(loop(tiny(shared, killed)))
    assert figures(killed) == figures(ref)
    report = json.loads((killed / "report.json").read_text())
    assert {"prepare", "train", "test", "review"} <= set(report["resumed"]) and "finetune" not in report["resumed"]
    assert isinstance(report["seconds"], dict) and "finetune" in report["seconds"]  # timings kept, only not compared
    assert "Resumed:" in (killed / "report.md").read_text()
    a, b = weights(ref), weights(killed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not list(killed.rglob("*.stale")) and not list(killed.rglob("*.tmp*"))
