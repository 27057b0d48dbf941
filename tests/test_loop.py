"""The repair loop end to end on a reduced demo: stages, resume after kills, file review, bad runs."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from repair.errors import UserError
from repair.loop import run_loop

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """Data and base checkpoints shared by the tests of this module: built and trained once."""
    return tmp_path_factory.mktemp("loop-shared")


def small(shared: Path) -> list[str]:
    return [
        f"data.dir={shared}/data",
        "data.build.n_train=8000",
        "data.build.n_fragments=5000",
        "data.build.n_valid=150",
        "data.build.n_test=120",
        "data.build.n_purity=60",
        "data.build.domain=0",  # the grammar's words only: a corpus this small would hold the field's words too seldom
        "data.holdout=0.3",  # the demo holds out 120 of its 225 sentences; this one has 60
        f"checkpoint_dir={shared}/base",
        "model.max_epoch=4",
        "finetune.max_epoch=4",
        "finetune.replay=300",
        "verify.bootstrap_samples=200",
        "translator.beam=2",
        "purity.relations=[rti,replace]",
    ]


def composed(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("loop", overrides=overrides)


def run_cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "repair.loop", *args], cwd=REPO, capture_output=True, text=True, timeout=900, **kw
    )


@pytest.fixture(scope="module")
def finished_run(shared) -> Path:
    run_dir = shared / "run-oracle"
    cfg = composed(small(shared) + [f"run_dir={run_dir}"])
    run_loop(cfg, run_dir)
    return run_dir


def model_checkpoint(run_dir: Path) -> str:
    return json.loads((run_dir / "model.json").read_text())["checkpoint"]


def test_demo_loop_end_to_end(finished_run, shared):
    report = json.loads((finished_run / "report.json").read_text())
    before, after = report["purity"]["before"], report["purity"]["after"]
    assert before["issues"] > 0
    # both relations tested, reviewed by the oracle and counted apart
    rel = before["by_relation"]
    assert set(rel) == {"rti", "replace"} and set(after["by_relation"]) == {"rti", "replace"}
    assert sum(f["issues"] for f in rel.values()) == before["issues"]
    for f in rel.values():
        assert f["cases"] > 0 and (f["precision"] is None or 0 <= f["precision"] <= 1)
        assert f["erroneous_translations"] is not None and f["judged"] <= f["issues"]
    corrected = {c["source"] for c in map(json.loads, (finished_run / "cycle1/review/corrections.jsonl").open())}
    issues = [json.loads(l) for l in (finished_run / "cycle1/test/issues.jsonl").open()]
    mutants = {s["source"] for i in issues if i["relation"] == "replace" for s in i["sides"] if s["role"] == "mutant"}
    assert corrected & mutants  # the loop fine-tunes on what the replacement relation found too
    assert "| replace |" in (finished_run / "report.md").read_text()
    # the report counts the corrections the review wrote, and the oracle's corrections are the data's references
    from repair.data.demo import load_references

    written = [json.loads(l) for l in (finished_run / "cycle1/review/corrections.jsonl").read_text().splitlines() if l]
    assert report["corrections"] == before["erroneous_translations"] == len(written) > 0
    references = load_references(shared / "data" / "references.jsonl")
    assert all(c["correction"] == references[c["source"]].strip() != c["translation"] for c in written)
    assert isinstance(after["issues"], int)
    assert 0 <= report["fixed"] <= report["corrections"]
    assert report["fix_rate"] == pytest.approx(report["fixed"] / report["corrections"])
    bleu = report["bleu"]
    assert 0 <= bleu["before"] <= 100 and 0 <= bleu["after"] <= 100
    assert 0 < bleu["p_value"] <= 1 and bleu["significant"] == (bleu["p_value"] < 0.05)
    assert "tok:zh" in bleu["signature"]
    ft = report["finetune"]
    assert 1 <= ft["epochs"] <= 4 and ft["best_valid_loss"] > 0
    assert len(ft["curve"]) == ft["epochs"]
    for stage in ("prepare", "train", "test", "review", "finetune", "verify"):
        assert report["seconds"][stage] >= 0
    assert report["versions"]["fairseq-fixed"] and report["parser"]["name"] == "spacy"
    assert report["model"]["trained_here"] and report["model"]["name"] == "transformer_tiny"
    for plot in report["plots"].values():
        assert (finished_run / plot).stat().st_size > 1000
    md = (finished_run / "report.md").read_text()
    assert "Fixed after fine-tuning" in md and "p =" in md and f"signature `{bleu['signature']}`" in md
    # held-out sentences: set aside from the 60, never tested before verify, tested with both models
    held = json.loads((finished_run / "heldout.json").read_text())
    h = report["heldout"]
    assert held["sentences"] == h["sentences"] == 18
    tested = json.loads((finished_run / "cycle1/test/slice.json").read_text())["lines"]
    assert tested and not set(tested) & set(held["lines"]) and len(tested) + 18 == 60
    assert report["cycles"][0]["tested"]["sentences"] == len(tested)
    assert h["issues_before"] >= 0 and h["issues_after"] >= 0 and 0 < h["p_value"] <= 1
    assert isinstance(h["erroneous_before"], int) and isinstance(h["erroneous_after"], int)
    held_texts = {json.loads(l)["sentence"] for l in (finished_run / "cycle1/verify/heldout_base/pairs.jsonl").open()}
    reviewed = {json.loads(l)["sentence"] for l in (finished_run / "cycle1/test/issues.jsonl").open()}
    assert held_texts and not held_texts & reviewed
    assert h["sentences_in_finetuning"] == 0 and 0 <= h["texts_in_finetuning"] <= h["texts"]
    changes = report["changes"]
    assert changes["improved"] + changes["unchanged"] + changes["degraded"] + changes["no_reference"] == changes["changed"]
    assert set(changes["by_set"]) == {"heldout", "test"} and changes["by_set"]["test"]["translations"] == 120
    assert len(changes["worst"]) == min(10, changes["degraded"])
    assert report["fixed"] <= report["fixed_within_d"] <= report["corrections"]
    assert "## Held-out sentences" in md and "McNemar" in md and "## Changed translations" in md
    # efficacy, generality (on sentences, beside the pairs), locality
    m = report["repair"]
    assert m["efficacy"] == {k: report[k] for k in ("corrections", "fixed", "fix_rate", "fixed_within_d")}
    g = m["generality"]
    assert g["sentences"]["sentences"] == 18 and g["pairs"]["pairs"] == h["pairs"]
    assert g["sentences"]["with_issues_before"] <= min(18, h["issues_before"])
    assert g["exact"]["texts"] > 18 and 0 <= g["exact"]["after"] <= g["exact"]["texts"]
    assert g["term_recall"]["terms"] > 0 and g["term_recall"]["sentences"] <= 120 + 18
    r = g["reach"]  # the oracle's references: held-out sentences whose errors a correction's change shows
    assert r["sentences_with_issues"] == g["sentences"]["with_issues_before"] and r["changes"] > 0
    assert 0 <= r["with_a_corrected_change"] <= r["sentences_with_issues"]
    loc = m["locality"]
    assert 0 < loc["texts"] <= 120 + h["texts"] and loc["changed"] <= loc["texts"]  # each text once
    assert loc["correct_to_wrong"] <= loc["correct_before"] and 0 < loc["p_value"] <= 1
    assert loc["chrf_delta_ci"][0] <= loc["chrf_delta"] <= loc["chrf_delta_ci"][1]
    assert report["bleu"]["excluded"] == 0 and report["bleu"]["lines"] == 120  # the demo's input is not its BLEU split
    assert "## Efficacy, generality, locality" in md and "- Reach: " in md
    # the default fine-tune is a scoped edit: every BLEU-test line outside its scope keeps the base model's
    # translation, character for character; the corrected sources are in it
    from repair.data.prepare import read_clean_pairs
    from repair.edit.scoped import scope_of

    scope = scope_of(ft["checkpoint"])
    assert scope is not None and {k: ft["scope"][k] for k in ("kind", "sources", "fallback", "defer")} == {
        "kind": "terms", "sources": len(corrected), "fallback": str(Path(model_checkpoint(finished_run)).resolve()),
        "defer": True}
    assert ft["scope"]["words"] == list(scope.words) and ft["scope"].get("words_checkpoint", "") == scope.words_checkpoint
    covers = scope.covers()
    assert all(covers(c) for c in corrected)
    test_en = [en for en, _ in read_clean_pairs(shared / "data", "test")]
    base, tuned = ((finished_run / f"cycle1/verify/bleu/{n}.txt").read_text(encoding="utf-8").splitlines()
                   for n in ("base", "finetuned"))
    outside = [k for k, en in enumerate(test_en) if not covers(en)]
    assert outside and all(base[k] == tuned[k] for k in outside)
    assert "A scoped edit (`finetune.scope=terms`)" in md
    # the tested checkpoint is never modified by fine-tuning
    model = json.loads((finished_run / "model.json").read_text())
    import hashlib

    assert hashlib.sha256(Path(model["checkpoint"]).read_bytes()).hexdigest() == model["sha256"]
    # corrections as the loop stores them
    for line in (finished_run / "cycle1/review/corrections.jsonl").read_text().splitlines():
        c = json.loads(line)
        assert {"source", "translation", "correction", "kind", "issues"} <= set(c)


def test_rerun_resumes_without_redoing(finished_run, shared):
    stamps = {p: p.stat().st_mtime_ns for p in finished_run.rglob("*.json") if "report" not in p.name}
    # Decoding batches side by side or one at a time gives the same translations: not another configuration.
    cfg = composed(small(shared) + [f"run_dir={finished_run}", "translator.workers=1"])
    run_loop(cfg, finished_run)
    for p, t in stamps.items():
        if p.name != "seconds.json":
            assert p.stat().st_mtime_ns == t, f"{p} was rewritten on resume"


def test_run_folder_from_another_configuration_is_refused(finished_run, shared):
    cfg = composed(small(shared) + [f"run_dir={finished_run}", "finetune.lr=3e-4"])
    with pytest.raises(UserError, match="finetune.lr"):
        run_loop(cfg, finished_run)


def test_corrections_edited_after_the_review_are_not_silently_mixed(finished_run, shared, tmp_path):
    import shutil

    run_dir = tmp_path / "copy"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "config.json").unlink()  # the copy is a new folder of the same configuration
    path = run_dir / "cycle1/review/corrections.jsonl"
    path.write_text(path.read_text() + "\n")
    cfg = composed(small(shared) + [f"run_dir={run_dir}"])
    with pytest.raises(UserError, match="changed after the review ended"):
        run_loop(cfg, run_dir)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    end = time.time() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"loop ended (rc {proc.returncode}) before {path} appeared:\n{err[-3000:]}")
        if time.time() > end:
            proc.kill()
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.2)


def kill_at(args: list[str], path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "repair.loop", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_resume_after_kills_between_stages_and_inside_finetuning(finished_run, shared, tmp_path):
    run_dir = tmp_path / "killed"
    args = small(shared) + [f"run_dir={run_dir}"]
    # killed right after Purity wrote its results
    kill_at(args, run_dir / "cycle1/test/summary.json")
    summary_stamp = (run_dir / "cycle1/test/summary.json").stat().st_mtime_ns
    # killed inside fine-tuning, once its first checkpoint is on disk
    kill_at(args, run_dir / "cycle1/finetune/checkpoint_last.pt")
    assert not (run_dir / "cycle1/finetune/result.json").exists()
    done = run_cli(args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == f"report: {run_dir / 'report.json'}"
    assert (run_dir / "cycle1/test/summary.json").stat().st_mtime_ns == summary_stamp
    report = json.loads((run_dir / "report.json").read_text())
    ours = json.loads((finished_run / "report.json").read_text())
    # the same seeds and data: the killed run reaches what the uninterrupted one did, to the last figure and weight
    assert report["purity"]["before"] == ours["purity"]["before"]
    assert report["corrections"] == ours["corrections"]
    assert ours["finetune"]["epochs"] >= 2  # the kill landed between two epochs
    from repair.bench.resume import differences, figures, leftovers

    # every figure of the report alike; only the command line differs (the uninterrupted run was called in-process)
    assert differences(figures(run_dir), figures(finished_run)) == ["command"]
    assert {"prepare", "train", "test", "review"} <= set(report["resumed"]) and "finetune" not in report["resumed"]
    assert "finetune" in report["seconds"] and "Resumed:" in (run_dir / "report.md").read_text()
    import torch

    a, b = (torch.load(d / "cycle1/finetune/checkpoint_best.pt", map_location="cpu", weights_only=False)["model"]
            for d in (finished_run, run_dir))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert leftovers(run_dir) == []


def test_purity_serves_a_scoped_edit_with_its_base_model(finished_run, shared, tmp_path):
    """python -m repair.purity on a scoped fine-tune's checkpoint: inside the scope the fine-tuned model's
    translation, outside it the base model's, as the loop's verify stage had them."""
    best = json.loads((finished_run / "cycle1/finetune/result.json").read_text())["best_checkpoint"]
    corrected = [json.loads(l)["source"] for l in (finished_run / "cycle1/review/corrections.jsonl").open()]
    from repair.data.prepare import read_clean_pairs

    test_en = [en for en, _ in read_clean_pairs(shared / "data", "test")][:6]
    sentences = tmp_path / "in.txt"
    sentences.write_text("\n".join(test_en) + "\n", encoding="utf-8")
    out = tmp_path / "purity"
    done = subprocess.run([sys.executable, "-m", "repair.purity", f"input={sentences}", "parser=spacy",
                           "translator=fairseq", f"translator.checkpoint={best}", "translator.beam=2",
                           "suggest.enabled=false", f"out={out}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["translator"]["name"] == "scoped"
    assert summary["translator"]["fallback"]["name"] == "fairseq" and summary["translator"]["corrected_sources"] == len(corrected)
    base = (finished_run / "cycle1/verify/bleu/base.txt").read_text(encoding="utf-8").splitlines()
    tuned = (finished_run / "cycle1/verify/bleu/finetuned.txt").read_text(encoding="utf-8").splitlines()
    rows = dict(line.split("\t", 1) for line in (out / "translations.tsv").read_text(encoding="utf-8").splitlines())
    for k, en in enumerate(test_en):
        assert rows[" ".join(en.split())] == tuned[k]  # the loop's scoped model, base model outside the scope
    assert any(base[k] == tuned[k] for k in range(6))


def test_file_review_round_trip(shared, finished_run, tmp_path):
    run_dir = tmp_path / "file-review"
    args = small(shared) + [f"run_dir={run_dir}", "review=file"]
    first = run_cli(args)
    assert first.returncode == 2
    assert "Traceback" not in first.stderr
    sheet = run_dir / "cycle1/review/sheet.csv"
    assert str(sheet) in first.stderr or "sheet.csv" in first.stderr
    with open(sheet, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert rows
    assert {r["relation"] for r in rows} == {"rti", "replace"}
    # the person judges every issue: the second side's translation of the first two is wrong, the rest are fine
    for i, row in enumerate(rows):
        row["wrong_1"] = "no"
        row["wrong_2"] = "yes" if i < 2 else "no"
        if i < 2:
            row["kind"] = "under-translation"
            row["corrected_2"] = "修正" + str(i)
    with open(sheet, "w", newline="", encoding="utf-8-sig") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    second = run_cli(args)
    assert second.returncode == 0, second.stderr[-3000:]
    corrections = [json.loads(l) for l in (run_dir / "cycle1/review/corrections.jsonl").read_text().splitlines() if l]
    # two corrections, or one where both rows share a source (the latest wins)
    corrected = {rows[0]["source_2"], rows[1]["source_2"]}
    assert {c["source"] for c in corrections} == corrected and len(corrections) == len(corrected)
    assert {c["correction"] for c in corrections} <= {"修正0", "修正1"}
    assert json.loads((run_dir / "report.json").read_text())["corrections"] == len(corrected)


def test_wmt18_without_its_data_says_what_to_put_where(tmp_path):
    done = run_cli(["model=transformer_wmt18", f"data.dir={tmp_path}/wmt18", f"run_dir={tmp_path}/run", "data.fetch=false"])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "error:" in done.stderr and "wmt18" in done.stderr and "data.devtest=FOLDER" in done.stderr
    assert not (tmp_path / "run" / "model.json").exists()


def test_multirun_sweep_gives_each_job_its_folder(finished_run, shared, tmp_path):
    # a job's folder is named by its overrides: fewer of them, to stay within a file name's 255 bytes
    args = [a for a in small(shared) if not a.startswith(("finetune.max_epoch", "purity.relations", "verify."))]
    done = run_cli(["-m", *args, "finetune.max_epoch=1", "finetune.lr=3e-4,1e-3", f"hydra.sweep.dir={tmp_path}"])
    assert done.returncode == 0, done.stderr[-3000:]
    reports = sorted(tmp_path.glob("*/report.json"))
    assert len(reports) == 2  # one folder per job, named by its overrides (paths left out)
    assert "finetune.lr=0.0003" in reports[0].parent.name and "finetune.lr=0.001" in reports[1].parent.name
    lrs = {json.loads((p.parent / "config.json").read_text())["finetune"]["lr"] for p in reports}
    assert lrs == {3e-4, 1e-3}
    # the sweep ends with one table of its runs
    assert done.stdout.strip().splitlines()[-1] == f"study: {tmp_path / 'study.md'}"
    md = (tmp_path / "study.md").read_text()
    assert "they differ in: `finetune.lr`" in md
    rows = list(csv.DictReader((tmp_path / "study.csv").open()))
    assert sorted(float(r["finetune.lr"]) for r in rows) == [3e-4, 1e-3]
    assert all(r["heldout_issues_after"] and r["degraded"] for r in rows)


def test_cycles_test_fresh_slices_until_the_input_runs_out(finished_run, shared, tmp_path):
    run_dir = tmp_path / "cycles"
    args = [a for a in small(shared) if not a.startswith("finetune.max_epoch")]
    # with the taught-words scope, through two cycles
    cfg = composed(args + [f"run_dir={run_dir}", "finetune.max_epoch=1", "cycles=3", "purity.per_cycle=25",
                           "finetune.scope=terms", "finetune.scope_defer=true", "finetune.scope_words_epoch=loss"])
    run_loop(cfg, run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    from repair.edit.scoped import scope_of, singular

    scopes = [scope_of(json.loads((run_dir / f"cycle{k}/finetune/result.json").read_text())["best_checkpoint"])
              for k in (1, 2)]
    assert [s.kind for s in scopes] == ["terms", "terms"] and set(scopes[0].words) <= set(scopes[1].words)
    assert scopes[1].fallback == scopes[0].fallback  # the first base model
    assert all(s.defer for s in scopes) and set(scopes[1].terms) == {singular(w) for w in scopes[1].words}
    assert report["cycles"][1]["finetune"]["scope"]["words"] == list(scopes[1].words)
    covers = scopes[1].covers()
    from repair.data.prepare import read_clean_pairs

    test_en = [en for en, _ in read_clean_pairs(shared / "data", "test")]
    base, tuned = ((run_dir / f"cycle2/verify/bleu/{n}.txt").read_text(encoding="utf-8").splitlines()
                   for n in ("base", "finetuned"))
    outside = [k for k, en in enumerate(test_en) if not covers(en)]
    assert outside and all(tuned[k] == base[k] for k in outside)  # verify served the scoped edit
    # 42 sentences not held out: 25, then 17, then nothing left
    assert [c["tested"]["sentences"] for c in report["cycles"]] == [25, 17]
    slices = [set(json.loads((run_dir / f"cycle{k}/test/slice.json").read_text())["lines"]) for k in (1, 2)]
    assert not slices[0] & slices[1]
    assert not (run_dir / "cycle3").exists()
    assert report["input_exhausted"] == {"after_cycle": 2, "tested": 42, "sentences": 42}
    md = (run_dir / "report.md").read_text()
    assert "input was used up after cycle 2" in md and "| 2 | 17 (" in md
    assert (run_dir / report["plots"]["cycles"]).stat().st_size > 1000
    # the whole run: the first base model against the last fine-tuned one, on the same held-out pairs
    c1, c2 = report["cycles"]
    assert c2["heldout"]["issues_before"] == c1["heldout"]["issues_after"]
    assert report["heldout"]["issues_before"] == c1["heldout"]["issues_before"]
    assert report["heldout"]["issues_after"] == c2["heldout"]["issues_after"]
    # the run's measures: every cycle's corrections, the first base model against the last fine-tuned one
    m = report["repair"]
    assert m["efficacy"]["corrections"] == c1["corrections"] + c2["corrections"]
    assert m["generality"]["sentences"]["with_issues_before"] == c1["repair"]["generality"]["sentences"]["with_issues_before"]
    assert m["generality"]["sentences"]["with_issues_after"] == c2["repair"]["generality"]["sentences"]["with_issues_after"]
    assert m["locality"]["texts"] <= min(c1["repair"]["locality"]["texts"], c2["repair"]["locality"]["texts"])


def test_ctranslate2_tests_and_verifies_the_finetuned_model(finished_run, shared, tmp_path):
    """translator=ctranslate2: the base and the fine-tuned checkpoint converted beside themselves; in
    float32 the base's Purity translations are fairseq's."""
    run_dir = tmp_path / "run-ct2"
    cfg = composed(small(shared) + [f"run_dir={run_dir}", "translator=ctranslate2", "translator.compute_type=float32"])
    run_loop(cfg, run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    assert report["corrections"] > 0 and 0 <= report["fixed"] <= report["corrections"]
    model = json.loads((run_dir / "model.json").read_text())
    assert (Path(model["checkpoint"] + ".ct2") / "converted.json").is_file()
    best = json.loads((run_dir / "cycle1/finetune/result.json").read_text())["best_checkpoint"]
    assert (Path(best + ".ct2") / "converted.json").is_file()

    def table(run: Path) -> dict:
        rows = (run / "cycle1/test/translations.tsv").read_text(encoding="utf-8").splitlines()
        return dict(r.split("\t", 1) for r in rows)

    ours, fairseq = table(run_dir), table(finished_run)
    assert ours.keys() == fairseq.keys()
    # all but degenerate translations that run into the output cap, where the two stop differently (README)
    assert sum(ours[k] == fairseq[k] for k in ours) >= 0.95 * len(ours)
    with pytest.raises(UserError, match="not fine-tuned"):
        run_loop(composed(small(shared) + [f"run_dir={tmp_path / 'other'}", "translator=ctranslate2",
                                           f"+translator.model_dir={tmp_path}"]), tmp_path / "other")
    assert not (tmp_path / "other").exists()  # refused before any work


def test_an_enforced_scope_makes_a_translation_in_scope_say_the_taught_term(finished_run, shared):
    """finetune.scope_enforce: a text in the scope whose translation lacks a taught word's terms is searched again by
    the edited model (here the trained base model itself, searched by fairseq) under the word's first term; a text
    outside the scope, or one that already holds the term, is translated as before."""
    from repair.edit.scoped import Scope, ScopedTranslator
    from repair.nmt.fairseq.translator import FairseqTranslator

    ckpt = model_checkpoint(finished_run)
    model = FairseqTranslator(checkpoint=ckpt, data_dir=f"{shared}/data", device="cpu")
    texts = ["the old teacher", "the red car", "three old teachers"]
    plain = model.translate(texts)
    term = "猫"  # a word of the grammar the model writes, which none of the plain translations holds
    assert not any(term in t for t in plain) and term in model.translate(["the black cat"])[0]
    scope = Scope("terms", (), 1.0, ckpt, ("teacher",), terms={"teacher": (term,)}, enforce=True)
    out = ScopedTranslator(model, model, scope).translate(texts)
    assert term in out[0] and term in out[2] and out[1] == plain[1]
    lax = ScopedTranslator(model, model, Scope("terms", (), 1.0, ckpt, ("teacher",), terms={"teacher": (term,)}))
    assert lax.translate(texts) == plain


def test_an_enforced_term_is_put_in_with_the_least_change_to_the_base_translation(finished_run, shared):
    """finetune.scope_enforce with an edited model other than the base: both models are searched under the term,
    and of the hypotheses that hold it the one closest to the base model's translation is taken, so that a sentence
    still reads as its phrases (which hold no taught word and stay with the base model) do."""
    from difflib import SequenceMatcher

    from repair.edit.scoped import Scope, ScopedTranslator
    from repair.nmt.fairseq.translator import FairseqTranslator

    base_ckpt = model_checkpoint(finished_run)
    tuned_ckpt = finished_run / "cycle1/finetune/checkpoint_best.pt"
    base = FairseqTranslator(checkpoint=base_ckpt, data_dir=f"{shared}/data", device="cpu")
    tuned = FairseqTranslator(checkpoint=str(tuned_ckpt), data_dir=f"{shared}/data", device="cpu")
    texts = ["the old teacher beside the red car", "the red car"]
    term = "猫"
    plain = base.translate(texts)
    assert not any(term in t for t in plain)
    scope = Scope("terms", (), 1.0, base_ckpt, ("teacher",), terms={"teacher": (term,)}, enforce=True)
    out = ScopedTranslator(tuned, base, scope).translate(texts)
    assert term in out[0] and out[1] == plain[1]

    def closeness(x: str) -> float:
        return SequenceMatcher(None, plain[0], x, autojunk=False).ratio()

    searched = {m: [h.text for h in m.translate_constrained(texts[:1], [[term]], ordered=False)[0] if h.met]
                for m in (tuned, base)}
    assert out[0] in searched[tuned] + searched[base]
    # at least as close to the base translation as the edited model's own best hypothesis that holds the term
    assert searched[tuned] and closeness(out[0]) >= closeness(searched[tuned][0])
    assert closeness(out[0]) == max(map(closeness, searched[tuned] + searched[base]))
