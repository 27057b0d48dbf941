"""A model family written outside the package (tests/families/wordtable.py, its config file in
tests/families/conf) runs the whole loop, registered by its own config file alone (docs/families.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repair.errors import UserError
from repair.text import source_key

REPO = Path(__file__).resolve().parents[1]
FAMILY_CONF = REPO / "tests" / "families" / "conf"


def test_a_family_outside_the_package_runs_the_loop_with_the_oracle(tmp_path):
    run_dir = tmp_path / "run"
    args = [f"hydra.searchpath=[file://{FAMILY_CONF}]", "translator=wordtable", "review=oracle",
            f"run_dir={run_dir}", f"data.dir={tmp_path}/data", f"checkpoint_dir={tmp_path}/base",
            "data.build.n_train=4000", "data.build.n_fragments=3000", "data.build.n_valid=100",
            "data.build.n_test=100", "data.build.n_purity=60", "data.holdout=0.3", "finetune.replay=100",
            "finetune.keep=50", "verify.bootstrap_samples=100"]
    done = subprocess.run([sys.executable, "-m", "repair.loop", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((run_dir / "report.json").read_text())
    model = json.loads((run_dir / "model.json").read_text())
    assert Path(model["checkpoint"]).name == "wordtable.json"  # trained by the family, not by fairseq
    assert report["corrections"] > 0 and report["fix_rate"] >= 0.9
    ft = json.loads((run_dir / "cycle1" / "finetune" / "result.json").read_text())
    best = Path(ft["best_checkpoint"])
    assert best.name == "checkpoint_selected.json" and (best.parent / "scope.json").is_file()
    learnt = json.loads(best.read_text())["phrases"]
    corrections = [json.loads(line) for line in (run_dir / "cycle1" / "review" / "corrections.jsonl").open()]
    assert corrections and all(c["source"] for c in corrections)
    assert {source_key(c["source"]) for c in corrections} <= set(learnt)  # each correction learnt as an entry
    assert report["bleu"]["before"] is not None and report["heldout"] is not None
    assert report["purity"]["after"]["issues"] < report["purity"]["before"]["issues"]


def test_the_family_is_unknown_without_its_config_file(tmp_path):
    done = subprocess.run([sys.executable, "-m", "repair.loop", "translator=wordtable", f"run_dir={tmp_path}/r"],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120)
    assert done.returncode != 0 and "wordtable" in done.stderr


def test_the_family_s_fine_tune_learns_what_it_translated_otherwise(tmp_path):
    sys.path.insert(0, str(REPO))
    from tests.families.wordtable import WordTableFamily, WordTableTranslator, model_files, train_table

    from repair.fileio import write_json_atomic

    pairs = [("the old teacher", "老教师"), ("the old sailor", "老水手"), ("a teacher", "一个教师"),
             ("a sailor", "一个水手"), ("the sailor sings", "水手唱歌")] * 3
    write_json_atomic(tmp_path / "wordtable.json", train_table(pairs))
    base = model_files(tmp_path / "wordtable.json")
    before = WordTableTranslator(files=base).translate(["the young sailor"])[0]
    result = WordTableFamily().finetune(base, [("the young sailor", "年轻的水手")], pairs[:5], tmp_path / "ft", None,
                                        None, max_epoch=2)
    after = WordTableTranslator(result["best_checkpoint"])
    assert before != "年轻的水手" and after.translate(["the young sailor", "The young sailor sings"]) == \
        ["年轻的水手", after.translate(["the young sailor"])[0] + after.translate(["sings"])[0]]


def test_the_group_picks_the_family_and_a_twin_serves_another_family_s_model(tmp_path):
    from repair.face import NotSupported, family_for, owner_of

    folder = tmp_path / "marian"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    checkpoint = tmp_path / "checkpoint_best.pt"
    checkpoint.write_bytes(b"")
    assert family_for({"name": "fairseq"}).name == "fairseq"
    assert family_for({"name": "fairseq"}, folder).name == "transformers"  # translator=fairseq given a folder
    assert family_for({"name": "ctranslate2"}, folder).name == "ctranslate2-transformers"
    assert family_for({"name": "ctranslate2"}, checkpoint).name == "ctranslate2"
    assert owner_of(folder).name == "transformers" and owner_of(checkpoint).name in ("fairseq", "ctranslate2")
    with pytest.raises(NotSupported, match="translator=transformers: this model family cannot train a model"):
        family_for({"name": "transformers"}).train(tmp_path, tmp_path, {}, 1, "cpu")
    with pytest.raises(UserError, match="translator=opennmt: .*choose one of fairseq, ctranslate2, transformers$"):
        family_for({"name": "opennmt"})
