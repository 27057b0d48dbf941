"""`python -m repair.bench resume --out DIR [--rounds N] [--kills K] [--stages A,B] [--seed S] -- LOOP_OVERRIDES...`

Kill rounds: is a resumed loop run exact? The loop is run once uninterrupted (DIR/ref, reused when its
report is there), then N times into DIR/roundR, each killed K times with SIGKILL of its whole process group
at a random moment inside a chosen stage (the stages taken in turn, round by round, so every stage gets its
kills) and rerun with the same command until it finishes. Each round's report is compared with the
uninterrupted one on every figure (timings and the `resumed` list aside, the run folder's path written as
RUN), and its folder searched for leftovers (temporary `*.tmp` files, `*.stale` folders). One JSON line per
round; the last line sums them up.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from repair.errors import UserError

STAGE = re.compile(r"== (\w+)")


def untimed(value):
    """A report's figures less every wall-clock measure (keys naming seconds)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def figures(run_dir: Path) -> dict:
    """report.json less what a restart changes by design: the timings and the list of resumed stages."""
    report = json.loads((run_dir / "report.json").read_text())
    report.pop("resumed", None)
    return untimed(json.loads(json.dumps(report).replace(str(run_dir), "RUN")))


def differences(a, b, path: str = "") -> list[str]:
    """The dotted keys where two reports differ (lists compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [path or "(all)"]


def leftovers(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*")
                  if p.name.endswith(".tmp") or p.name.endswith(".stale"))


class Loop:
    """`python -m repair.loop` in a session of its own, its log in a file we read while it runs."""

    def __init__(self, overrides: list[str], run_dir: Path, log: Path):
        self.log = log
        self.file = log.open("a")
        overrides = [o.replace("{run}", str(run_dir)) for o in overrides]  # a folder of each run's own, e.g. its data
        self.proc = subprocess.Popen([sys.executable, "-m", "repair.loop", *overrides, f"run_dir={run_dir}"],
                                     stdout=self.file, stderr=subprocess.STDOUT, start_new_session=True)

    def stage(self) -> str | None:
        """The stage the run is in: the last `== stage` line of its log."""
        found = STAGE.findall(self.log.read_text(errors="replace"))
        return found[-1] if found else None

    def wait_for(self, stage: str, deadline: float) -> bool:
        """Wait until the run logs `stage` (True) or ends (False)."""
        seen = len(STAGE.findall(self.log.read_text(errors="replace")))
        while self.proc.poll() is None and time.time() < deadline:
            new = STAGE.findall(self.log.read_text(errors="replace"))[seen:]
            if stage in new:
                return True
            time.sleep(0.05)
        return False

    def kill(self) -> str | None:
        stage = self.stage()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.file.close()
        return stage

    def finish(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.file.close()
        if self.proc.returncode != 0:
            raise UserError(f"the loop failed (exit {self.proc.returncode}); see {self.log}")


def reference(overrides: list[str], out: Path, timeout: float) -> dict:
    ref = out / "ref"
    if not (ref / "report.json").is_file():
        Loop(overrides, ref, out / "ref.log").finish(timeout)
    return json.loads((ref / "report.json").read_text())


def kill_round(overrides: list[str], run_dir: Path, targets: list[str], seconds: dict, rng: random.Random,
               timeout: float) -> dict:
    """One round: a kill inside each target stage (a random moment within the uninterrupted run's time for it),
    then the run finished; what was killed where, and how its report compares."""
    kills = []
    for target in targets:
        loop = Loop(overrides, run_dir, run_dir.parent / f"{run_dir.name}.log")
        if not loop.wait_for(target, time.time() + timeout):
            loop.finish(timeout)  # it ended (or passed the stage) before the kill: nothing left to kill
            kills.append({"target": target, "killed_in": None})
            break
        delay = rng.uniform(0, max(0.5, float(seconds.get(target, 1.0))))
        time.sleep(delay)
        if loop.proc.poll() is not None:
            loop.finish(timeout)
            kills.append({"target": target, "killed_in": None, "delay": round(delay, 2)})
            break
        kills.append({"target": target, "killed_in": loop.kill(), "delay": round(delay, 2)})
    if not (run_dir / "report.json").is_file():
        Loop(overrides, run_dir, run_dir.parent / f"{run_dir.name}.log").finish(timeout)
    return {"kills": kills, "left_over": leftovers(run_dir)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m repair.bench resume", description=__doc__.split("\n\n")[1])
    p.add_argument("--out", required=True, help="folder for the uninterrupted run (ref) and the rounds")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--first", type=int, default=1, help="number of the first round (more rounds into the same --out)")
    p.add_argument("--kills", type=int, default=2, help="kills per round, each inside another stage")
    p.add_argument("--stages", default=None, help="comma-separated stages to kill in (default: every stage)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600, help="seconds a loop run may take")
    p.add_argument("overrides", nargs="*", help="the loop's overrides (after --); {run} stands for each run's folder "
                                                "(data.dir={run}/data: each run prepares its own data)")
    args = p.parse_args(argv)
    if any(o.startswith("run_dir=") for o in args.overrides):
        raise UserError("resume benchmark: leave run_dir= out; the runs go under --out")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ref_report = reference(args.overrides, out, args.timeout)
    ref = figures(out / "ref")
    stages = args.stages.split(",") if args.stages else list(ref_report["seconds"])
    rng = random.Random(args.seed)
    rows, turn = [], 0
    for r in range(args.first, args.first + args.rounds):
        run_dir = out / f"round{r}"
        if run_dir.exists():
            raise UserError(f"{run_dir} exists: give another --out or remove it")
        targets = [stages[(turn + i) % len(stages)] for i in range(args.kills)]
        turn += args.kills
        started = time.time()
        row = {"round": r, **kill_round(args.overrides, run_dir, targets, ref_report["seconds"], rng, args.timeout)}
        row["differs"] = differences(ref, figures(run_dir))
        row["equal"] = not row["differs"]
        row["seconds"] = round(time.time() - started, 1)
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    killed = [k["killed_in"] for row in rows for k in row["kills"] if k["killed_in"]]
    print(json.dumps({
        "rounds": len(rows), "equal": sum(row["equal"] for row in rows), "kills": len(killed),
        "kills_by_stage": {s: killed.count(s) for s in dict.fromkeys(killed)},
        "left_over": sum(len(row["left_over"]) for row in rows),
        "differing_keys": sorted({k for row in rows for k in row["differs"]}),
    }))
