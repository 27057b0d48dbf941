"""`python -m repair.bench purity --input FILE --checkpoint MODEL [--sizes 1,3,10]`: Purity on a file of sentences
as a user runs it, at one or more sizes.

Each size runs `python -m repair.purity input=SLICE parser=spacy translator=ctranslate2 translator.checkpoint=MODEL
out=DIR` (suggestions on, the command line's defaults) in a process of its own, after one run on the first 200
sentences that converts the checkpoint and makes the fidelity check where no cached conversion exists, so that every
size finds it cached. Size k of sizes up to K tests the first k/K of the file's sentences (K: the whole file). Per
size: the seconds of each stage (summary.json), the process's wall-clock and CPU seconds, its peak memory (the
largest resident set of its processes, ru_maxrss, and the largest sum of the process tree's sampled every 0.1 s),
pairs, texts, issues, suggestions and the suggestion step's share of the run's seconds; across sizes each stage's
growth exponent (log time ratio / log work ratio, the work being the sentences). Last line JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from repair.bench.scale import LINEAR, exponent, finish_process, load_average
from repair.errors import UserError
from repair.fileio import read_json, read_text_lines, write_text_atomic

STAGE_NAMES = ("initialization", "pair_construction", "translation", "detection", "suggestions", "total")


def tree_rss_mb(root: int) -> float:
    """The resident memory of process `root` and its descendants, summed (MB; /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21])  # pages
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def timed_run(cmd: list[str], log: Path, timeout: float) -> dict:
    """`cmd` in a session of its own, its output appended to `log`: finish_process's figures and the largest
    sum of its process tree's resident memory, sampled every 0.1 s."""
    peak = [0.0]
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.1):
                peak[0] = max(peak[0], tree_rss_mb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            row = finish_process(proc, started, timeout)
        finally:
            done.set()
            sampler.join()
    if row["rc"] != 0:
        raise UserError(f"{' '.join(cmd[:4])} ...: exit {row['rc']}; see {log}")
    return {**row, "peak_tree_rss_mb": round(peak[0], 1)}


def purity_command(input_path: Path, out: Path, checkpoint: Path, data_dir: Path | None, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "repair.purity", f"input={input_path}", "parser=spacy", "translator=ctranslate2",
            f"translator.checkpoint={checkpoint}", *([f"translator.data_dir={data_dir}"] if data_dir else []),
            f"out={out}", *extra]


def size_row(k: int, n: int, folder: Path, process: dict) -> dict:
    """One size's figures from its run folder's summary.json and its process."""
    summary = read_json(folder / "summary.json")
    seconds = summary["seconds"]
    suggestions = summary.get("suggestions") or {}
    return {"size": k, "sentences": n, "work": n, "pairs": summary["pairs"], "texts": summary["texts"],
            "issues": summary["issues"], "seconds_by_stage": seconds,
            "suggestions": {key: suggestions.get(key) for key in ("searched", "offered", "below_min_score", "skipped")
                            if key in suggestions},
            "suggestion_share": round(seconds.get("suggestions", 0.0) / seconds["total"], 3) if seconds["total"] else None,
            "compute_type": (summary.get("translator") or {}).get("compute_type"), **process}


def growth_by_stage(rows: list[dict]) -> dict:
    """Each stage's exponent from the first size to the last (the work: sentences), and the process's."""
    out = {}
    for stage in STAGE_NAMES:
        if all(stage in r["seconds_by_stage"] for r in rows):
            a, b = ({"work": r["work"], "seconds": r["seconds_by_stage"][stage]} for r in (rows[0], rows[-1]))
            out[stage] = exponent(a, b)
    out["process_cpu"] = exponent(rows[0], rows[-1], "cpu_seconds")
    out["peak_tree_rss_mb"] = exponent(rows[0], rows[-1], "peak_tree_rss_mb")
    return out


def table(rows: list[dict]) -> list[str]:
    lines = [f"{'':<26}" + "".join(f"{str(r['size']) + 'x':>12}" for r in rows)]

    def line(name, values):
        lines.append(f"{name:<26}" + "".join(f"{v:>12}" for v in values))

    line("sentences", [r["sentences"] for r in rows])
    line("pairs", [r["pairs"] for r in rows])
    line("texts translated", [r["texts"] for r in rows])
    line("issues at d > 0", [r["issues"].get("0", "") for r in rows])
    line("suggestions offered", [r["suggestions"].get("offered", "-") for r in rows])
    for stage in STAGE_NAMES:
        line(f"seconds: {stage.replace('_', ' ')}", [f"{r['seconds_by_stage'].get(stage, 0):.2f}" for r in rows])
    line("suggestion share", [f"{r['suggestion_share']:.1%}" for r in rows])
    line("process: wall seconds", [f"{r['process_seconds']:.2f}" for r in rows])
    line("process: CPU seconds", [f"{r['cpu_seconds']:.2f}" for r in rows])
    line("peak MB (largest process)", [f"{r['peak_rss_mb']:.0f}" for r in rows])
    line("peak MB (process tree)", [f"{r['peak_tree_rss_mb']:.0f}" for r in rows])
    return lines


def main(args) -> None:
    """args: repair.bench.purity's, with --input given."""
    if args.checkpoint is None:
        raise UserError("--input needs --checkpoint: the model to test (e.g. the `model` folder of "
                        "`python -m repair.examples.moses_bpe OUT`)")
    if not args.input.is_file():
        raise UserError(f"--input {args.input}: no such file (e.g. ../shared/data/wmt18-en-zh/newstest2018.en)")
    sentences = [line for line in read_text_lines(args.input) if line.strip()]
    sizes = sorted({int(k) for k in args.sizes.split(",")})
    if not sentences or sizes[0] < 1:
        raise UserError(f"--input {args.input} has no sentences, or --sizes {args.sizes} is not whole numbers >= 1")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "purity.log"
    extra = [*args.overrides, *([f"translator.compute_type={args.compute_type}"] if args.compute_type else [])]
    load_before, started = load_average(), time.perf_counter()
    warm = out / "input_warm.txt"  # converts and checks fidelity once where nothing is cached (the first 200)
    write_text_atomic(warm, "".join(s + "\n" for s in sentences[:200]))
    warmup = timed_run(purity_command(warm, out / "warm", args.checkpoint, args.data_dir,
                                      [*extra, "suggest.enabled=false"]), log, args.timeout)
    rows = []
    for _ in range(args.rounds):
        for k in sizes:
            n = max(1, round(len(sentences) * k / sizes[-1]))
            path = out / f"input_{k}x.txt"
            write_text_atomic(path, "".join(s + "\n" for s in sentences[:n]))
            folder = out / f"run_{k}x"
            process = timed_run(purity_command(path, folder, args.checkpoint, args.data_dir, extra), log, args.timeout)
            rows.append(size_row(k, n, folder, process))
    last = {r["size"]: r for r in rows}  # a later round's run of each size
    ordered = [last[k] for k in sizes]
    growth = growth_by_stage(ordered) if len(sizes) > 1 else {}
    print("\n".join(table(rows)))
    if growth:
        print("growth exponents (log time ratio / log sentences ratio, "
              f"{sizes[0]}x to {sizes[-1]}x): " + ", ".join(f"{s} {e}" for s, e in growth.items()))
    print(f"(load average before {load_before}, after {load_average()}; {os.cpu_count()} CPUs; the warm-up run on "
          f"200 sentences {warmup['process_seconds']:.1f} s; log: {log})")
    print(json.dumps({"benchmark": "purity", "input": str(args.input), "checkpoint": str(args.checkpoint),
                      "sizes": sizes, "cpus": os.cpu_count(), "load_average_before": load_before,
                      "load_average_after": load_average(), "seconds": round(time.perf_counter() - started, 1),
                      "warmup": warmup, "runs": rows, "growth": growth,
                      "not_linear": [s for s, e in growth.items() if e is not None and e > LINEAR],
                      "overrides": extra}))
