"""State files a kill or a hand may have broken (model.json, a fine-tune's settings.json, a run_dir under a
file): one clear message each, no traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

from repair.errors import UserError
from repair.loop import Run, stage_train
from repair.nmt.finetune import finetune_model

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("content", ["{}", "[]", '{"checkpoint": 3}'])
def test_a_model_json_without_its_checkpoint_is_named(tmp_path, content):
    (tmp_path / "model.json").write_text(content)
    with pytest.raises(UserError, match=r"model.json: names no checkpoint .*delete it"):
        stage_train(Run(cfg=None, dir=tmp_path), data=None)


@pytest.mark.parametrize("content, message", [('{"base_checkpoint": "a", "pai', "settings.json:1: not valid JSON"),
                                              ("[1]", "settings.json: not the settings of a fine-tune")])
def test_a_broken_fine_tune_settings_file_is_named(tmp_path, content, message):
    (tmp_path / "ft").mkdir()
    (tmp_path / "ft" / "settings.json").write_text(content)
    with pytest.raises(UserError, match=message):
        finetune_model(tmp_path / "base.pt", tmp_path / "data", [("a", "一")], tmp_path / "ft")


def test_a_run_dir_under_a_file_is_one_clear_message(tmp_path):
    (tmp_path / "file").write_text("x")
    r = subprocess.run([sys.executable, "-m", "repair.loop", f"run_dir={tmp_path / 'file' / 'run'}"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"{tmp_path / 'file'} is a file, not a folder; choose another run_dir" in r.stderr
