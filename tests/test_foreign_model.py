"""A model none of us made, through the whole loop: built with fairseq's own command line (tests/cli_model.py),
brought as a hub folder with no preprocessing.yaml, tested on a real corpus whose references are for sentences.

Every stage checks what it was given: the oracle judges by the sentence references, the fine-tune trains past the
time limit the base model stopped at and says why it stopped, and a target side encoded unlike the model's training
data stops the run before any training, naming the key that fixes it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_model import build_hub, tatoeba_corpus, tatoeba_pairs
from repair.nmt.fairseq.probe import TOLERANCE

REPO = Path(__file__).resolve().parents[1]
LOOP_SMALL = ["finetune.lr=3e-3", "finetune.replay=300", "finetune.keep=100", "finetune.patience=30",
              "finetune.max_epoch=30", "verify.bootstrap_samples=200", "translator.beam=2", "device=cpu",
              "model.threads=2"]


@pytest.fixture(scope="module")
def foreign(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("foreign")
    corpus = tatoeba_corpus(tatoeba_pairs(), out / "corpus", n_train=12000)
    hub = build_hub(corpus, out)
    sentences = out / "sentences"
    sentences.mkdir()
    for lang in ("en", "zh"):  # Purity on 300 test sentences; their Chinese beside them is what the oracle judges by
        lines = (corpus / f"test.{lang}").read_text(encoding="utf-8").splitlines(True)[:300]
        (sentences / f"test.{lang}").write_text("".join(lines), encoding="utf-8")
    return {"corpus": corpus, "hub": hub, "sentences": sentences / "test.en", "out": out}


def test_the_fixture_is_what_a_team_brings(foreign):
    from repair.nmt.fairseq.checkpoint import checkpoint_cfg, load_checkpoint

    hub = foreign["hub"]
    assert sorted(p.name for p in hub.iterdir()) == ["README.md", "bpecodes", "dict.en.txt", "dict.zh.txt", "model.pt"]
    state = load_checkpoint(hub / "model.pt")
    cfg = checkpoint_cfg(state)
    # fairseq-train stopped at its time limit, and the checkpoint says nothing of the text's preprocessing
    limit = cfg.optimization.stop_time_hours
    assert limit > 0 and state["extra_state"]["previous_training_time"] > limit * 3600
    assert cfg.tokenizer is None and cfg.bpe is None
    assert state["extra_state"]["best"] > 0


def test_the_fine_tune_resets_every_stop_the_base_model_had(foreign, tmp_path):
    from repair.nmt.fairseq.checkpoint import load_checkpoint
    from repair.nmt.fairseq.finetune import finetune_config

    state = load_checkpoint(foreign["hub"] / "model.pt")
    cfg = finetune_config(state, tmp_path, tmp_path / "ft", foreign["hub"] / "model.pt", lr=1e-3, patience=4,
                          max_epoch=7, seed=1, max_tokens=None, cuda=False, fp16=False, langs=("en", "zh"))
    o, c, d = cfg.optimization, cfg.checkpoint, cfg.dataset
    assert (o.stop_time_hours, o.max_update, o.stop_min_lr, o.max_epoch) == (0, 0, -1.0, 7)
    assert (c.patience, d.validate_after_updates, d.validate_interval, d.disable_validation) == (4, 0, 1, False)


def loop(args: list[str], run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repair.loop", *args, f"run_dir={run_dir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_a_model_none_of_us_made_goes_through_the_loop(foreign, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(foreign["corpus"], data)
    run_dir = tmp_path / "run"
    # as a fairseq user passes it to fairseq-interactive: one tokenizer for both sides
    args = [f"model.checkpoint={foreign['hub']}", "data=parallel", f"data.dir={data}",
            f"purity.input={foreign['sentences']}", "purity.holdout=60", "translator.tokenizer=moses",
            "review=oracle", "review.projection.enabled=true", *LOOP_SMALL]
    first = loop(args, run_dir)
    assert first.returncode == 2, first.stderr[-3000:]
    assert "zh side: tokenizer moses assumed" in first.stdout + first.stderr  # said at load
    error = first.stderr.strip().splitlines()[-1]
    assert error.startswith("error: the base model's validation loss") and "rerun with translator.tgt_tokenizer=jieba" \
        in error and "Nothing was trained" in error, error
    finetune = run_dir / "cycle1" / "finetune"
    assert not list(finetune.glob("checkpoint*.pt"))
    corrections = run_dir / "cycle1" / "review" / "corrections.jsonl"
    made = corrections.read_text(encoding="utf-8")
    assert made.strip()  # the oracle corrected sentences by their references

    # the key the message names, without Hydra's `+`, in the same folder: the review is kept
    second = loop([*args, "translator.tgt_tokenizer=jieba"], run_dir)
    assert second.returncode == 0, second.stderr[-3000:]
    assert corrections.read_text(encoding="utf-8") == made
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    review = report["review"]
    # every issue judged (by a sentence's reference or a phrase's projection of it) or said not judged
    assert review["judged"] + review["not_judged"] == review["total"] > 0 and review["with_error"] >= 5
    # the phrases have no reference of their own: judged by the projection of their sentence's, or not at all
    assert review["sides_by_projection"] + review["sides_not_judged"] > 0
    assert review["alignment"]["pairs"] > 0 and review["suggestions"]["by_projection"] <= review["sides_by_projection"]
    words = lambda text: " ".join(text.split())  # noqa: E731
    references = {words(en): words(zh) for en, zh in zip(*((foreign["corpus"] / f"test.{lang}").read_text(
        encoding="utf-8").splitlines() for lang in ("en", "zh")))}
    rows = [json.loads(line) for line in made.splitlines()]
    assert len(rows) == report["corrections"] >= 5
    projected = [r for r in rows if (r.get("reference") or {}).get("from") == "projection"]
    assert len(projected) == review["corrections_by_projection"]
    # a sentence's correction is its reference; a phrase's, a stretch of its sentence's reference
    assert all(words(r["correction"]) == references[words(r["source"])] != words(r["translation"])
               for r in rows if r not in projected)
    flat = [ref.replace(" ", "") for ref in references.values()]
    assert all(any(r["correction"].replace(" ", "") in ref for ref in flat) for r in projected)
    ft = report["finetune"]
    # the fixture's encoding is the model's: a loss within what another domain's text gives (TOLERANCE), well
    # below the check's bar, so no other tokenizer was even tried
    enc = ft["encoding"]
    assert enc["checked"] and enc["base_valid_loss"] <= TOLERANCE * enc["recorded_valid_loss"] and "tried" not in enc
    # it trained past the base model's time limit, and says why it stopped, as fairseq said it or as it counted
    stop = ft["stop"]
    assert ft["epochs"] > 1 and stop["reason"] in ("fix_rate", "patience", "loss_rise", "max_epoch"), stop
    if stop["reason"] == "max_epoch":
        assert stop["epoch"] == 30 == ft["epochs"]  # finetune.max_epoch
    elif stop["reason"] in ("patience", "loss_rise"):  # counted by the stage's stop rule (finetune.select=corrections)
        assert stop["rule"]["epoch"] == stop["epoch"] == ft["epochs"]
    else:  # the epoch that fixed the corrections ended it (measured: epoch 8, 14 corrections)
        assert stop["epoch"] == ft["epochs"] and stop["message"] == f"stopped after epoch {ft['epochs']}"
    assert report["fix_rate"] >= 0.9, (report["fixed"], report["corrections"])
    assert ft["probe_loss_after"] < ft["probe_loss_before"]
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert f"stopped: {ft['stop']['why']}" in md and "the encoding is the model's own" in md
    assert report["bleu"]["sentences"] > 0 and "heldout" in report


def test_every_per_side_preprocessing_key_is_set_without_a_plus():
    from hydra import compose, initialize_config_dir

    from repair.nmt.preprocessing import OPTION_KEYS

    keys = [k for k in OPTION_KEYS if k.startswith(("src_", "tgt_")) and not k.endswith("_dict")]
    assert len(keys) == 8
    for translator in ("fairseq", "ctranslate2"):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
            cfg = compose("loop", overrides=[f"translator={translator}", *(f"translator.{k}=x" for k in keys)])
        assert all(cfg.translator[k] == "x" for k in keys)


def test_a_fine_tune_that_never_validated_or_learnt_nothing_is_a_warning(tmp_path):
    from repair.stages.finetune import FinetuneSettings, with_warnings

    settings = FinetuneSettings(lr=1e-3, patience=3, max_epoch=5, repeat=1, replay=0, keep=0, seed=1)
    never = with_warnings({"best_checkpoint": str(tmp_path / "x.pt"), "curve": [], "epochs": 0,
                           "stop": {"reason": "stop_time_hours", "message": "Stopping training due to ..."}},
                          tmp_path, None, settings, 3)
    assert never["warnings"] == ["the fine-tune stopped before its first validation (time limit): nothing says it learnt"]
    fixed = with_warnings({"best_checkpoint": "x", "curve": [{"epoch": 2, "valid_loss": 3.0}], "stop":
                           {"reason": "stop_when", "epoch": 2}}, tmp_path, None, settings, 3)
    assert fixed["warnings"] == [] and fixed["stop"]["reason"] == "fix_rate" and "epoch 2" in fixed["stop"]["why"]


def test_the_stop_rule_goes_on_while_more_corrections_are_fixed(tmp_path):
    """finetune.select=corrections: the validation loss rising from the first epoch (the hub model's, measured: 5.88 to
    6.40 in 16 epochs while 1 to 14 of 14 corrections were fixed) does not end the fine-tune while epochs fix more
    corrections; `patience` epochs with neither a lower loss nor more fixed do, and so does a loss `loss_rise` above its
    lowest; each says why in the report's words."""
    from repair.fileio import append_jsonl
    from repair.stages.finetune import FinetuneSettings, StopRule, with_warnings

    settings = FinetuneSettings(lr=1e-3, patience=3, max_epoch=20, repeat=1, replay=0, keep=0, seed=1,
                                select="corrections", loss_rise=0.25)
    fixed = {1: 1, 2: 2, 3: 2, 4: 3, 5: 4, 6: 5, 7: 5, 8: 5, 9: 7, 10: 7, 11: 7, 12: 7}
    rule = StopRule(tmp_path, [{}] * 14, settings, fixed.__getitem__)
    said = {}
    for epoch in range(1, 13):
        (tmp_path / f"checkpoint{epoch}.pt").write_bytes(b"")
        append_jsonl(tmp_path / "curve.jsonl", {"epoch": epoch, "valid_loss": 5.88 + 0.04 * epoch})  # as fairseq logs
        append_jsonl(tmp_path / "curve.jsonl", {"epoch": epoch, "train_loss": 4.0 - 0.1 * epoch})  # its train row apart
        said[epoch] = rule(epoch)
    # patience 3 on the loss alone stops after epoch 4; the rule goes on to 3 epochs after the last more fixed (9)
    assert [e for e, stop in said.items() if stop] == [12]
    result = rule.explained({"best_checkpoint": "x", "curve": [], "stop": {"reason": "stop_when", "epoch": 12}})
    assert result["stop"]["reason"] == "patience" and result["stop"]["rule"]["fixed"] == 7
    why = with_warnings(result, tmp_path, None, settings, 14)["stop"]["why"]
    assert why == ("patience: no lower validation loss, no more corrections fixed and no fewer of their characters "
                   "missing for 3 epochs (finetune.patience); "
                   "7 of the 14 corrections fixed at epoch 12")
    fixed[9] = 14  # the fix rate at epoch 9
    assert rule.reason(rule.rows(9)) == "fix_rate"
    assert rule.reason([{"epoch": 1, "valid_loss": 4.0, "fixed": 1}, {"epoch": 2, "valid_loss": 5.01, "fixed": 9}]) \
        == "loss_rise"
    loss_rise = with_warnings({"best_checkpoint": "x", "curve": [], "stop": {
        "reason": "loss_rise", "epoch": 2, "rule": {"epoch": 2, "valid_loss": 5.01, "fixed": 9}}}, tmp_path, None,
        settings, 14)["stop"]["why"]
    assert loss_rise.startswith("validation loss rise: epoch 2's 5.010 is more than 25% above the fine-tune's lowest")
    # the corrections' missing characters falling (EpochFixes.missing) keep it going where the fixes stand still
    missing = {e: 100 - 5 * e for e in range(1, 13)}
    learning = StopRule(tmp_path, [{}] * 14, settings, {**fixed, 9: 7}.__getitem__, missing.__getitem__)
    assert learning.reason(learning.rows(12)) is None and learning.rows(12)[-1]["missing"] == 40
    # corrections the model cannot write (a character its vocabulary lacks): the fix rate counts the others
    fixed[9] = 12
    assert rule.reason(rule.rows(9)) is None  # 12 of 14: below 95%
    writable = StopRule(tmp_path, [{}] * 14, settings, fixed.__getitem__, unwritable=2)
    assert writable.reason(writable.rows(9)) == "fix_rate"
    said = with_warnings({"best_checkpoint": "x", "curve": [{"epoch": 9}], "stop": {"reason": "fix_rate", "epoch": 9}},
                         tmp_path, None, settings, 14, unwritable=["一", "二"])
    assert said["stop"]["why"] == ("fix rate reached: epoch 9 fixes at least 95% of the 12 corrections the model can "
                                   "write (finetune.select_fix_rate)")
    assert said["unwritable"] == ["一", "二"] and said["warnings"][0].startswith(
        "2 of the 14 corrections hold characters the model's vocabulary lacks")
