"""One table across runs: the keys that differ between runs and their figures side by side."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from repair.study import write_study

REPO = Path(__file__).resolve().parents[1]


def fake_run(path: Path, lr: float, keep: int, degraded: int, heldout_after: int) -> Path:
    """A finished run's two files, as the loop writes them (only the keys the study reads)."""
    path.mkdir(parents=True)
    config = {"run_dir": str(path), "seed": 1, "finetune": {"lr": lr, "keep": keep, "patience": 3},
              "data": {"dir": f"/data/{path.name}", "name": "demo"}}
    report = {"purity": {"before": {"issues": 40}, "after": {"issues": 30}}, "corrections": 12, "fixed": 9,
              "fixed_within_d": 10, "bleu": {"before": 60.0, "after": 61.5, "p_value": 0.2},
              "heldout": {"issues_before": 20, "issues_after": heldout_after, "erroneous_before": 8,
                          "erroneous_after": 5, "p_value": 0.04},
              "changes": {"improved": 7, "unchanged": 2, "degraded": degraded}, "finetune": {"epochs": 4},
              "cycles": [{"cycle": 1}, {"cycle": 2}]}
    (path / "config.json").write_text(json.dumps(config))
    (path / "report.json").write_text(json.dumps(report))
    return path


def test_study_table_names_what_the_runs_vary(tmp_path):
    runs = [fake_run(tmp_path / "a", 1e-4, 0, 3, 12), fake_run(tmp_path / "b", 3e-4, 0, 5, 9),
            fake_run(tmp_path / "c", 3e-4, 300, 1, 15)]
    md = write_study(runs)
    assert md == tmp_path / "study.md"
    with open(tmp_path / "study.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # the varied settings, not the folders that differ too (run_dir, data.dir)
    assert list(rows[0])[:3] == ["run", "finetune.keep", "finetune.lr"]
    assert [(r["finetune.lr"], r["finetune.keep"], r["degraded"], r["heldout_issues_after"]) for r in rows] == [
        ("0.0001", "0", "3", "12"), ("0.0003", "0", "5", "9"), ("0.0003", "300", "1", "15")]
    assert rows[0]["cycles"] == "2" and rows[0]["heldout_p"] == "0.04"
    text = md.read_text()
    assert "`finetune.keep`, `finetune.lr`" in text and "| c | 300 | 0.0003 |" in text
    for name in ("heldout", "fixes", "changes", "bleu"):
        assert (tmp_path / "plots" / f"study_{name}.png").stat().st_size > 1000
        assert f"plots/study_{name}.png" in text


def test_study_of_a_folder_without_a_report_says_which(tmp_path):
    good = fake_run(tmp_path / "a", 1e-4, 0, 3, 12)
    (tmp_path / "unfinished").mkdir()
    done = subprocess.run([sys.executable, "-m", "repair.study", str(good), str(tmp_path / "unfinished"),
                           "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "unfinished: no report.json" in done.stderr
    assert not (tmp_path / "out" / "study.md").exists()


def test_a_multirun_ends_with_the_study_of_its_finished_jobs(tmp_path):
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from repair.study import StudyCallback

    callback = StudyCallback()
    for name, lr in (("finetune.lr=0.0001", 1e-4), ("finetune.lr=0.0003", 3e-4)):
        run = fake_run(tmp_path / name, lr, 0, 3, 12)
        callback.on_job_end(None, JobReturn(status=JobStatus.COMPLETED, _return_value=str(run / "report.json")))
    failed = JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("job failed"))
    callback.on_job_end(None, failed)  # a failed job is left out, not raised again
    callback.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    rows = list(csv.DictReader((tmp_path / "study.csv").open()))
    assert [r["finetune.lr"] for r in rows] == ["0.0001", "0.0003"]
