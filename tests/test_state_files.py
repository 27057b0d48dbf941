"""State files a kill or a hand may have broken (model.json, a fine-tune's settings.json, a run_dir under a
file): one clear message each, no traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

from repair.errors import UserError
from repair.stages import train
from repair.nmt.fairseq.finetune import finetune_model
from repair.nmt.preprocessing import ModelFiles, Side

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("content", ["{}", "[]", '{"checkpoint": 3}'])
def test_a_model_json_without_its_checkpoint_is_named(tmp_path, content):
    (tmp_path / "model.json").write_text(content)
    with pytest.raises(UserError, match=r"model.json: names no model .*delete it"):
        train.run(tmp_path, None, None, {})


@pytest.mark.parametrize("content, message", [('{"base_checkpoint": "a", "pai', "settings.json:1: not valid JSON"),
                                              ("[1]", "settings.json: not the settings of a fine-tune")])
def test_a_broken_fine_tune_settings_file_is_named(tmp_path, content, message):
    (tmp_path / "ft").mkdir()
    (tmp_path / "ft" / "settings.json").write_text(content)
    with pytest.raises(UserError, match=message):
        finetune_model(ModelFiles(str(tmp_path / "base.pt"), Side("en", "dict.en.txt"), Side("zh", "dict.zh.txt")),
                       [("a", "一")], [("b", "二")], tmp_path / "ft")


def test_a_run_dir_under_a_file_is_one_clear_message(tmp_path):
    (tmp_path / "file").write_text("x")
    r = subprocess.run([sys.executable, "-m", "repair.loop", f"run_dir={tmp_path / 'file' / 'run'}"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"{tmp_path / 'file'} is a file, not a folder; choose another run_dir" in r.stderr


def test_the_loop_reads_a_review_with_its_corrections_rebuilt_from_the_log(tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from helpers import make_issue
    from repair.fileio import append_jsonl, write_json_atomic
    from repair.stages import review
    from repair.review.store import CorrectionStore

    boy = make_issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩", "聪明")
    out = tmp_path / "cycle1" / "review"
    with CorrectionStore(out, [boy]) as store:
        store.record(boy["id"], [])
    # a web review finished, then a server killed after appending a judgment and before rewriting corrections
    write_json_atomic(out / "progress.json", {"finished": True})
    append_jsonl(out / "judgments.jsonl", {"issue": boy["id"], "wrong": ["rti"], "kind": "under-translation",
                                          "corrections": {"rti": "那个聪明的男孩"}, "time": "t"})
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("loop", overrides=["review=web"])
    corrections, stats = review.run(out, [boy], OmegaConf.to_container(cfg.review))
    assert [c["correction"] for c in corrections] == ["那个聪明的男孩"]
    assert stats["judged"] == 1 and stats["with_error"] == 1
