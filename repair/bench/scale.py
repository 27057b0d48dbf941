"""`python -m repair.bench scale [--out DIR] [--sizes 1,3,10] [--finetune-epochs N] [--model-epochs N] [-- LOOP_OVERRIDES...]`

How the loop's cost grows with its work, on one machine: the demo's stages at 1x, 3x and 10x its work. The demo's
data is built once with enough Purity sentences for the largest size (data.build.n_purity = holdout + tested x the
largest size; the grammar draws them after the corpus, so the corpus and the model are the demo's own) and its model
trained once (`--out`/checkpoints, reused by every size and by a later run of the benchmark). Size k tests the first
holdout + tested x k sentences (purity.input): 120 held out, 105 x k tested; 1x is the demo's input as measured
(it holds out 240 since; `--holdout 240` for that).
Each stage of each size runs in a process of its own (`python -m repair.bench.stage`, the loop's code stopped after
that stage), so that its wall-clock seconds, CPU seconds and peak resident memory (the process's ru_maxrss) are its
own: test (Purity), review (the oracle, with the review memory), page (the issues served by `python -m
repair.review` and judged one by one in Chromium through Playwright: a suggestion taken where there is one, else
no error, then Finish), finetune, verify, report. A stage's seconds are the loop's own (seconds.json, the time
inside the stage); its growth exponent is log(time ratio) / log(work ratio) between the smallest and largest size
(none where its work did not grow: `linear` is then null and the stage is listed in `not_measured`).
The fine-tune's epochs are capped (--finetune-epochs, said in the JSON) and the model trains 5 epochs (--model-epochs;
the demo's trains 8) to keep the run within 30 minutes.
Writes scale.json and scale.png into --out; the last line printed is the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from repair.errors import UserError
from repair.fileio import read_json, read_jsonl, read_text_lines, write_json_atomic, write_text_atomic

LOOP_STAGES = ("test", "review", "finetune", "verify", "report")
STAGES = ("test", "review", "page", "finetune", "verify", "report")
WORK = {"test": "tested sentences", "review": "issues", "page": "issues", "finetune": "corrections",
        "verify": "corrections", "report": "corrections"}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
LINEAR = 1.1  # the largest growth exponent that counts as linear


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def finish_process(proc: subprocess.Popen, started: float, timeout: float) -> dict:
    """Wait for `proc` (killing its session after `timeout` s); its wall-clock and CPU seconds and peak memory."""
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"process_seconds": round(time.perf_counter() - started, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "rc": proc.returncode}


def run_process(cmd: list[str], log: Path, timeout: float) -> dict:
    """`cmd` in a session of its own, its output appended to `log`; see finish_process."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        row = finish_process(proc, started, timeout)
    if row["rc"] != 0:
        raise UserError(f"{' '.join(cmd[:5])} ...: exit {row['rc']}; see {log}")
    return row


def loop_stage(run_dir: Path, stage: str, overrides: list[str], log: Path, timeout: float) -> dict:
    """One loop stage in its own process: the process's figures, and the stage's seconds from seconds.json."""
    path = run_dir / "seconds.json"
    before = read_json(path) if path.is_file() else {}
    row = run_process([sys.executable, "-m", "repair.bench.stage", str(run_dir), stage, *overrides], log, timeout)
    return {"seconds": stage_seconds(path, before, stage), **row}


def stage_seconds(path: Path, before: dict, stage: str) -> float:
    """The seconds seconds.json gained for `stage` (the loop writes a stage's time there as it ends): a stage it
    holds no time for is an error, not 0 s."""
    after = read_json(path) if path.is_file() else {}
    if stage not in after:
        raise UserError(f"{path} holds no time for the {stage} stage after it ran (it has {sorted(after)}); see the "
                        f"stage's log")
    return round(after[stage] - before.get(stage, 0.0), 2)


def start_server(folder: Path, log: Path) -> tuple[subprocess.Popen, str, float]:
    """`python -m repair.review FOLDER --port 0`: the process, the address it prints, when it started."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "repair.review", str(folder), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    with log.open("a") as out:
        for line in proc.stdout:
            out.write(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/#token=[\w-]+", line)
            if found:
                return proc, found.group(0), started
    proc.wait()
    raise UserError(f"the review server did not start (exit {proc.returncode}); see {log}")


def drive_page(browser, url: str, issues: list[dict]) -> dict:
    """Chromium judges every issue on the page with the keyboard (a suggestion taken where there is one, else no
    error; Enter saves and shows the next), then finishes the review. Seconds to the first issue, then for all."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    began = time.perf_counter()
    page.goto(url)
    position = page.locator("#position")
    expect(position).to_have_text(re.compile(rf"^Issue 1 of {len(issues)}\b"), timeout=60_000)
    opened = time.perf_counter() - began
    for k, issue in enumerate(issues):
        for key in (("a", "1") if issue.get("suggestions") else ("n",)) + ("Enter",):
            page.keyboard.press(key)
        if k + 1 < len(issues):
            expect(position).to_have_text(re.compile(rf"^Issue {k + 2} of"), timeout=60_000)
    expect(page.locator("#progress-text")).to_contain_text(f"Judged {len(issues)} of {len(issues)}", timeout=60_000)
    judged = time.perf_counter() - began - opened
    page.keyboard.press("Shift+F")
    page.keyboard.press("Enter")
    expect(page.locator("#done")).to_be_visible(timeout=60_000)
    if errors:
        raise UserError(f"the review page raised: {errors[0]}")
    return {"open_seconds": round(opened, 2), "judge_seconds": round(judged, 2),
            "ms_per_issue": round(1000 * judged / max(1, len(issues)), 1)}


def page_stage(issues_path: Path, folder: Path, log: Path, timeout: float) -> dict:
    """The page stage: the issues served from a folder of their own (the loop's review is left as it is) and judged
    in Chromium (started before the server); its seconds from the server's start to the review finished, the
    server process's figures."""
    from playwright.sync_api import sync_playwright

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copyfile(issues_path, folder / "issues.jsonl")
    issues = list(read_jsonl(folder / "issues.jsonl"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            proc, url, started = start_server(folder, log)
            try:
                figures = drive_page(browser, url, issues)
            except BaseException:
                os.killpg(proc.pid, signal.SIGKILL)
                raise
            seconds = round(time.perf_counter() - started, 2)
        finally:
            browser.close()
    with log.open("a") as out:
        out.write(proc.stdout.read())  # the server ends on Finish
    row = finish_process(proc, started, timeout)
    judged = read_json(folder / "review" / "progress.json")
    if row["rc"] != 0 or judged.get("judged") != len(issues):
        raise UserError(f"the review page of {folder}: exit {row['rc']}, {judged.get('judged')} of {len(issues)} "
                        f"judged; see {log}")
    return {"seconds": seconds, **row, **figures}


def page_available() -> str | None:
    """Why the page stage cannot run here (None: it can)."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def work_done(run_dir: Path) -> dict:
    """Each stage's work in a size's run: tested sentences, issues, corrections (and the fine-tune's epochs)."""
    cycle = run_dir / "cycle1"
    tested = len(read_json(cycle / "test" / "slice.json")["lines"])
    issues = sum(1 for _ in read_jsonl(cycle / "test" / "issues.jsonl"))
    corrections_path, done = cycle / "review" / "corrections.jsonl", cycle / "review" / "done.json"
    if corrections_path.is_file():
        corrections = sum(1 for _ in read_jsonl(corrections_path))
    elif done.is_file() and read_json(done).get("corrections_sha256", "") is None:
        corrections = 0  # the review ended without writing one (its done.json says the file was absent)
    else:
        raise UserError(f"{corrections_path} is absent and {done} does not say the review ended without corrections")
    return {"tested sentences": tested, "issues": issues, "corrections": corrections}


def size_run(k: int, out: Path, overrides: list[str], timeout: float, browser: bool) -> dict:
    """Every stage of size k, each in its own process: {stage: its figures and work}."""
    run_dir, log = out / "runs" / f"{k}x", out / "runs" / f"{k}x.log"
    rows: dict = {}
    for stage in STAGES:
        print(f"size {k}x: {stage} (load {load_average()})", file=sys.stderr, flush=True)
        if stage == "page":
            if browser:
                rows[stage] = page_stage(run_dir / "cycle1" / "test" / "issues.jsonl", out / "runs" / f"{k}x-page",
                                         log, timeout)
            continue
        rows[stage] = loop_stage(run_dir, stage, overrides, log, timeout)
    work = work_done(run_dir)
    for stage, row in rows.items():
        row["work"] = work[WORK[stage]]
    epochs = read_json(run_dir / "cycle1" / "finetune" / "result.json").get("epochs")
    rows["finetune"]["epochs"] = epochs
    if epochs:
        rows["finetune"]["seconds_per_epoch"] = round(rows["finetune"]["seconds"] / epochs, 2)
    return rows


def exponent(a: dict, b: dict, key: str = "seconds") -> float | None:
    """log(time ratio) / log(work ratio) from row a to row b (None where the work or a time did not change sign)."""
    if b["work"] == a["work"] or min(a["work"], b["work"], a[key], b[key]) <= 0:
        return None
    return round(math.log(b[key] / a[key]) / math.log(b["work"] / a["work"]), 2)


def growth(by_size: dict[int, dict]) -> dict:
    """Per stage: its rows by size, and its growth exponents (first to last size, and each step)."""
    sizes = sorted(by_size)
    stages = {}
    for stage in STAGES:
        rows = [{"size": k, **by_size[k][stage]} for k in sizes if stage in by_size[k]]
        if not rows:
            continue
        stages[stage] = {
            "work": WORK[stage], "runs": rows,
            "exponent": exponent(rows[0], rows[-1]), "exponent_cpu": exponent(rows[0], rows[-1], "cpu_seconds"),
            "exponent_steps": [exponent(a, b) for a, b in zip(rows, rows[1:])],
        }
        if all(r.get("seconds_per_epoch") for r in rows):  # the fine-tune: its epochs may differ from size to size
            stages[stage]["exponent_per_epoch"] = exponent(rows[0], rows[-1], "seconds_per_epoch")
        # None: no exponent (the work or a time did not grow), so neither linear nor not
        stages[stage]["linear"] = None if stages[stage]["exponent"] is None else stages[stage]["exponent"] <= LINEAR
    return stages


def plot(stages: dict, path: Path) -> None:
    """scale.png: each stage's time and peak memory against its work, both as ratios to the smallest size, on
    log-log axes with the line of linear growth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    top = 1.0
    for stage, s in stages.items():
        first = s["runs"][0]
        x = [r["work"] / first["work"] for r in s["runs"] if first["work"]]
        if not x:
            continue
        top = max(top, *x)
        label = f"{stage} ({s['work']}, exponent {s['exponent']})"
        left.plot(x, [r["seconds"] / first["seconds"] for r in s["runs"]], "o-", label=label)
        right.plot(x, [r["peak_rss_mb"] for r in s["runs"]], "o-", label=stage)
    left.plot([1, top], [1, top], "k--", label="linear")
    left.set(xscale="log", yscale="log", xlabel="work / work at 1x", ylabel="seconds / seconds at 1x",
             title="time against work")
    right.set(xscale="log", xlabel="work / work at 1x", ylabel="peak resident memory, MB",
              title="memory against work (the stage's process)")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def defaults(given: list[str], keys: dict) -> list[str]:
    """`keys` as overrides, less those the command line gives (it wins), then the command line's."""
    named = {o.split("=", 1)[0].lstrip("+") for o in given}
    return [f"{k}={v}" for k, v in keys.items() if k not in named] + list(given)


def write_inputs(data_dir: Path, folder: Path, holdout: int, tested: int, sizes: list[int]) -> dict[int, Path]:
    """Size k's input: the first holdout + tested x k of the data's Purity sentences."""
    sentences = read_text_lines(data_dir / "purity.en")
    need = holdout + tested * max(sizes)
    if len(sentences) < need:
        raise UserError(f"{data_dir / 'purity.en'} has {len(sentences)} sentences; the sizes need {need}")
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for k in sizes:
        paths[k] = folder / f"input-{k}x.txt"
        write_text_atomic(paths[k], "".join(s + "\n" for s in sentences[:holdout + tested * k]))
    return paths


def override(overrides: list[str], key: str) -> str:
    return next(o.split("=", 1)[1] for o in reversed(overrides) if o.split("=", 1)[0].lstrip("+") == key)


def base_model(out: Path, overrides: list[str], timeout: float) -> dict:
    """The demo's data built and its model trained once (both kept under --out and reused by a later run)."""
    run_dir = out / "model"
    trained = not (Path(override(overrides, "checkpoint_dir")) / "checkpoint_best.pt").is_file()
    path = run_dir / "seconds.json"
    before = read_json(path) if path.is_file() else {}
    row = run_process([sys.executable, "-m", "repair.bench.stage", str(run_dir), "train", *overrides],
                      out / "model.log", timeout)
    seconds = {s: stage_seconds(path, before, s) for s in ("prepare", "train")}
    return {"trained_here": trained, "seconds": seconds, **row}


def report_lines(stages: dict) -> list[str]:
    lines = [f"{'stage':<9}{'work':>18}" + "".join(f"{'size ' + str(r['size']) + 'x':>24}" for r in
                                                   next(iter(stages.values()))["runs"]) + f"{'exponent':>10}"]
    for stage, s in stages.items():
        cells = "".join(f"{r['work']:>6} {r['seconds']:>7.1f}s {r['peak_rss_mb']:>6.0f}MB  " for r in s["runs"])
        lines.append(f"{stage:<9}{s['work']:>18}  {cells}{s['exponent']!s:>8}")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m repair.bench scale", description=__doc__.split("\n\n")[1])
    p.add_argument("--out", type=Path, default=Path("/tmp/repair-bench-scale"),
                   help="data/, checkpoints/ and model/ (reused), runs/ (emptied at the start), scale.json, scale.png")
    p.add_argument("--sizes", default="1,3,10", help="multiples of the demo's work, comma-separated")
    p.add_argument("--tested", type=int, default=105, help="sentences tested at 1x (the demo's 105)")
    p.add_argument("--holdout", type=int, default=120, help="sentences held out at every size (120, as measured)")
    p.add_argument("--finetune-epochs", type=int, default=8,
                   help="finetune.max_epoch at every size (the cap; the demo's 1x run stops at 8 here)")
    p.add_argument("--model-epochs", type=int, default=5,
                   help="model.max_epoch of the model trained once (the demo's 8 cost 3 more minutes; a stage's cost "
                        "follows its work, not the model's quality)")
    p.add_argument("--no-browser", action="store_true", help="leave out the page stage")
    p.add_argument("--timeout", type=float, default=3600, help="seconds one stage's process may take")
    p.add_argument("overrides", nargs="*", help="the loop's overrides (after --), for every size")
    args = p.parse_args(argv)
    args.sizes = sorted({int(k) for k in args.sizes.split(",")})
    if args.sizes[0] < 1 or args.tested < 1 or args.holdout < 1:
        raise UserError("scale benchmark: sizes, --tested and --holdout must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "runs", ignore_errors=True)
    (out / "runs").mkdir()
    started, load_before = time.perf_counter(), load_average()
    common = defaults(args.overrides, {
        "data.dir": out / "data", "checkpoint_dir": out / "checkpoints", "purity.holdout": args.holdout,
        "data.build.n_purity": args.holdout + args.tested * max(args.sizes),
        "finetune.max_epoch": args.finetune_epochs, "model.max_epoch": args.model_epochs})
    model = base_model(out, common, args.timeout)
    data_dir = Path(override(common, "data.dir"))
    inputs = write_inputs(data_dir, out / "inputs", args.holdout, args.tested, args.sizes)
    why_not = None if args.no_browser else page_available()
    browser = not args.no_browser and why_not is None
    by_size = {k: size_run(k, out, [*common, f"purity.input={inputs[k]}"], args.timeout, browser)
               for k in args.sizes}
    stages = growth(by_size)
    plot(stages, out / "scale.png")
    summary = {
        "benchmark": "scale", "sizes": args.sizes, "cpus": os.cpu_count(), "load_average_before": load_before,
        "load_average_after": load_average(), "seconds": round(time.perf_counter() - started, 1),
        "model": model, "finetune_max_epoch": args.finetune_epochs, "model_max_epoch": int(override(common, "model.max_epoch")),
        "page": "run" if browser else f"left out ({'--no-browser' if args.no_browser else why_not})",
        "not_linear": [s for s, v in stages.items() if v["linear"] is False],
        "not_measured": [s for s, v in stages.items() if v["linear"] is None], "stages": stages,
        "plot": str(out / "scale.png"), "overrides": common,
    }
    write_json_atomic(out / "scale.json", summary)
    print("\n".join(report_lines(stages)))
    print(f"(fine-tune capped at {args.finetune_epochs} epochs; exponent: log time ratio / log work ratio, "
          f"{args.sizes[0]}x to {args.sizes[-1]}x; model: {model['seconds']}, trained here: {model['trained_here']})")
    print(json.dumps(summary))
