"""The scale benchmark: growth exponents from its rows, and the whole benchmark on a tiny demo (its JSON's keys)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from repair.bench.scale import LINEAR, exponent, growth, page_available, stage_seconds, work_done
from repair.errors import UserError
from repair.fileio import write_json_atomic

REPO = Path(__file__).resolve().parents[1]


def row(work, seconds, cpu=None):
    return {"work": work, "seconds": seconds, "cpu_seconds": seconds if cpu is None else cpu, "peak_rss_mb": 100.0}


def test_the_exponent_is_the_log_of_the_time_ratio_over_the_log_of_the_work_ratio():
    assert exponent(row(105, 2.0), row(1050, 20.0)) == 1.0
    assert exponent(row(105, 2.0), row(1050, 200.0)) == 2.0
    assert exponent(row(10, 4.0), row(30, 6.0)) == round(math.log(1.5) / math.log(3), 2)
    assert exponent(row(10, 4.0), row(10, 6.0)) is None  # no more work: no exponent
    assert exponent(row(0, 4.0), row(10, 6.0)) is None


def test_growth_takes_the_first_and_last_size_and_flags_what_is_not_linear():
    by_size = {1: {"test": row(105, 3.0), "finetune": row(67, 40.0)},
               3: {"test": row(315, 9.0), "finetune": row(201, 100.0)},
               10: {"test": row(1050, 30.0), "finetune": row(670, 40.0 * 10 ** 1.3)}}
    stages = growth(by_size)
    assert list(stages) == ["test", "finetune"]  # the benchmark's order, stages without rows left out
    assert [r["size"] for r in stages["test"]["runs"]] == [1, 3, 10]
    assert stages["test"]["exponent"] == 1.0 and stages["test"]["linear"] is True
    assert stages["finetune"]["exponent"] == 1.3 > LINEAR and stages["finetune"]["linear"] is False
    assert stages["finetune"]["exponent_steps"][0] == round(math.log(2.5) / math.log(3), 2)
    assert stages["finetune"]["work"] == "corrections" and stages["test"]["work"] == "tested sentences"


def test_a_stage_whose_work_did_not_grow_is_not_called_linear():
    by_size = {1: {"review": row(4, 3.0), "test": row(105, 3.0)}, 3: {"review": row(4, 9.0), "test": row(315, 9.0)}}
    stages = growth(by_size)
    assert stages["review"]["exponent"] is None and stages["review"]["linear"] is None
    assert stages["test"]["linear"] is True


def test_a_missing_stage_time_or_corrections_file_is_an_error_not_zero(tmp_path):
    seconds = tmp_path / "seconds.json"
    write_json_atomic(seconds, {"test": 5.0, "review": 2.5})
    assert stage_seconds(seconds, {"test": 1.0}, "test") == 4.0 and stage_seconds(seconds, {}, "review") == 2.5
    with pytest.raises(UserError, match="holds no time for the finetune stage"):
        stage_seconds(seconds, {}, "finetune")
    cycle = tmp_path / "run" / "cycle1"
    (cycle / "review").mkdir(parents=True)
    (cycle / "test").mkdir()
    write_json_atomic(cycle / "test" / "slice.json", {"lines": [1, 2, 3]})
    (cycle / "test" / "issues.jsonl").write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(UserError, match="corrections.jsonl is absent"):
        work_done(tmp_path / "run")
    write_json_atomic(cycle / "review" / "done.json", {"method": "oracle", "stats": {}, "corrections_sha256": None})
    assert work_done(tmp_path / "run") == {"tested sentences": 3, "issues": 1, "corrections": 0}
    (cycle / "review" / "corrections.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n', encoding="utf-8")
    assert work_done(tmp_path / "run")["corrections"] == 2


@pytest.mark.slow
def test_the_benchmark_runs_on_a_tiny_demo_and_prints_its_json_last(tmp_path):
    out = tmp_path / "scale"
    tiny = ["data.build.n_train=2000", "data.build.n_fragments=1000", "data.build.n_valid=50", "data.build.n_test=40",
            "data.build.domain=0", "model.max_epoch=1", "finetune.replay=50", "finetune.keep=20",
            "verify.bootstrap_samples=50", "translator.beam=2"]
    run = subprocess.run([sys.executable, "-m", "repair.bench", "scale", "--out", str(out), "--sizes", "1,2",
                          "--tested", "6", "--holdout", "3", "--finetune-epochs", "1", "--", *tiny],
                         cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout.strip().splitlines()[-1])
    assert printed == json.loads((out / "scale.json").read_text())
    assert printed["benchmark"] == "scale" and printed["sizes"] == [1, 2] and printed["finetune_max_epoch"] == 1
    assert printed["model"]["trained_here"] and printed["model"]["seconds"]["train"] > 0
    expected = ["test", "review", "finetune", "verify", "report"]
    if page_available() is None:
        expected.insert(2, "page")
    else:
        assert printed["page"].startswith("left out")
    assert list(printed["stages"]) == expected
    stages = printed["stages"]
    assert [r["work"] for r in stages["test"]["runs"]] == [6, 12]  # tested sentences: 6 x the size
    for name, stage in stages.items():
        assert [r["size"] for r in stage["runs"]] == [1, 2], name
        for r in stage["runs"]:
            assert r["seconds"] > 0 and r["peak_rss_mb"] > 0 and r["cpu_seconds"] > 0 and r["rc"] == 0, (name, r)
        assert stage["exponent"] == exponent(*stage["runs"]), name
    issues = [sum(1 for _ in (out / "runs" / f"{k}x" / "cycle1" / "test" / "issues.jsonl").open()) for k in (1, 2)]
    assert [r["work"] for r in stages["review"]["runs"]] == issues
    assert all(r["epochs"] == 1 for r in stages["finetune"]["runs"])
    assert (out / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
