"""The kill-round benchmark's comparison: what counts as the same report, and what is left over."""

import json

from repair.bench.resume import differences, figures, leftovers


def test_reports_compare_without_timings_resumed_stages_or_the_run_folder(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for run, seconds, resumed in ((a, 3.0, []), (b, 9.5, ["prepare", "test"])):
        run.mkdir()
        report = {"seconds": {"test": seconds}, "resumed": resumed, "fix_rate": 0.9,
                  "review": {"suggestions": {"seconds": seconds, "accepted": 4}},
                  "finetune": {"best_checkpoint": f"{run}/cycle1/finetune/checkpoint_best.pt", "epochs": 3}}
        (run / "report.json").write_text(json.dumps(report))
    assert differences(figures(a), figures(b)) == []
    report = json.loads((b / "report.json").read_text())
    report["finetune"]["epochs"] = 4
    report["review"]["suggestions"]["accepted"] = 5
    (b / "report.json").write_text(json.dumps(report))
    assert differences(figures(a), figures(b)) == ["finetune.epochs", "review.suggestions.accepted"]


def test_leftovers_are_temporary_files_and_stale_folders(tmp_path):
    (tmp_path / "cycle1/finetune.stale").mkdir(parents=True)
    (tmp_path / "cycle1/.issues.jsonl.x1.tmp").write_text("")
    (tmp_path / "cycle1/issues.jsonl").write_text("")
    assert leftovers(tmp_path) == ["cycle1/.issues.jsonl.x1.tmp", "cycle1/finetune.stale"]
