"""`python -m repair.review.stress [--rounds N]`: kill -9 a review server at random points while it saves.

Each round starts `python -m repair.review` on one folder, checks the folder as the restarted server left it,
posts judgments (with emoji, right-to-left text, combining marks) one after another and kills the server
with SIGKILL after a random delay. After every restart, every save the server acknowledged must be the
latest judgment of its issue in judgments.jsonl (or be followed only by the save in flight at the kill),
corrections.jsonl must hold exactly the corrections of the latest judgments, and no temporary file or
hand-edit copy may be left. The last line printed is JSON: rounds, acknowledged saves, rounds whose kill
left the two files disagreeing (repaired on restart) and the violations found (0 when all is well).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import repair
from repair.fileio import iter_jsonl, read_jsonl
from repair.issues import make_issue, side
from repair.review.store import CORRECTIONS, JUDGMENTS, read_judgments

ROOT = Path(repair.__file__).resolve().parents[1]
# Texts a reviewer may paste: emoji, right-to-left script, combining marks, full-width punctuation.
ODD = ("😀👍🏽", "שלום", "مرحبا", "e\u0301", "\u200f", "，。！", "𠀀", "x\u0308")


def make_issues(n: int) -> list[dict]:
    issues = []
    for i in range(n):
        container, rti = f"the red book number {i} on the table", f"the red book number {i}"
        issues.append(make_issue("rti", container, [("container", container, f"桌子上的第{i}本书"),
                                                    ("rti", rti, f"第{i}本书")], 1, ["红"]))
    return issues


class Server:
    def __init__(self, run_dir: Path, timeout: float = 30):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "repair.review", str(run_dir), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(r"(http://\S+/)#token=([\w-]+)", line)
            if m:
                self.url, self.token = m.groups()
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"the review server did not start: {self.proc.stderr.read()[-2000:]}")
        else:
            self.proc.kill()
            raise RuntimeError("the review server did not print its address")
        for _ in range(100):  # the socket listens a moment before uvicorn answers
            try:
                urllib.request.urlopen(self.url, timeout=2).read()
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)

    def post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json", "X-Review-Token": self.token})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


def random_judgment(rng: random.Random, issue: dict, tag: str) -> dict:
    wrong = rng.choice([[], ["container"], ["rti"], ["container", "rti"]])
    corrections = {s: f"{side(issue, s)['translation']}的红书{tag}{rng.choice(ODD)}" for s in wrong}
    return {"issue": issue["id"], "wrong": wrong, "kind": "under-translation" if wrong else None,
            "corrections": corrections}


def check(review_dir: Path, issues: dict[str, dict], acked: dict[str, dict], in_flight: dict[str, dict]) -> list[str]:
    """What is wrong with the folder after a restart (empty when every acknowledged save is in both files)."""
    problems = []
    latest = read_judgments(review_dir) if (review_dir / JUDGMENTS).exists() else {}
    for issue_id, sent in acked.items():
        got = latest.get(issue_id)
        same = lambda j, b: j is not None and j["wrong"] == b["wrong"] and j["corrections"] == b["corrections"]
        if not same(got, sent) and not (issue_id in in_flight and same(got, in_flight[issue_id])):
            problems.append(f"acknowledged judgment of {issue_id} lost: log has {got}, acknowledged {sent}")
    expected = {(side(issues[i], s)["source"], j["corrections"][s]) for i, j in latest.items() for s in j["wrong"]}
    path = review_dir / CORRECTIONS
    found = {(c["source"], c["correction"]) for c in read_jsonl(path)} if path.exists() else set()
    if expected != found:
        problems.append(f"corrections.jsonl disagrees with the log: missing {sorted(expected - found)[:3]}, "
                        f"extra {sorted(found - expected)[:3]}")
    stray = [p.name for p in review_dir.iterdir() if p.name.endswith(".tmp") or p.name.startswith("corrections.edited")]
    if stray:
        problems.append(f"left behind: {stray}")
    return problems


def files_disagree(review_dir: Path, issues: dict[str, dict]) -> bool:
    if not (review_dir / JUDGMENTS).exists():
        return False
    latest = read_judgments(review_dir)
    expected = {(side(issues[i], s)["source"], j["corrections"][s]) for i, j in latest.items() for s in j["wrong"]}
    path = review_dir / CORRECTIONS
    found = {(c["source"], c["correction"]) for _, c in iter_jsonl(path)} if path.exists() else set()
    return expected != found


def kill_rounds(run_dir: str | os.PathLike, rounds: int = 20, *, seed: int = 0, max_delay: float = 0.25,
                n_issues: int = 12, log=print) -> dict:
    """Run the fault-injection rounds in `run_dir` (a fresh folder); return the figures and the violations."""
    run_dir = Path(run_dir)
    rng = random.Random(seed)
    issues = make_issues(n_issues)
    by_id = {i["id"]: i for i in issues}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "issues.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in issues),
                                          encoding="utf-8")
    review_dir = run_dir / "review"
    acked: dict[str, dict] = {}
    violations: list[str] = []
    saves = torn = 0
    start = time.perf_counter()
    for r in range(rounds + 1):
        in_flight: dict[str, dict] = {}
        if r and files_disagree(review_dir, by_id):
            torn += 1  # the kill fell between the two writes: the restart must repair it
        server = Server(run_dir)
        try:
            before = last_in_flight if r else {}
            problems = check(review_dir, by_id, acked, before)
            violations += [f"round {r}: {p}" for p in problems]
            latest = read_judgments(review_dir) if (review_dir / JUDGMENTS).exists() else {}
            for issue_id, body in before.items():  # a save made but killed before its answer: now the record
                j = latest.get(issue_id)
                if j is not None and j["wrong"] == body["wrong"] and j["corrections"] == body["corrections"]:
                    acked[issue_id] = body
            if r == rounds:
                break
            stop = threading.Event()
            box = {"n": 0}

            def client():
                k = 0
                while not stop.is_set():
                    issue = rng.choice(issues)
                    body = random_judgment(rng, issue, f"{r}.{k}")
                    in_flight[issue["id"]] = body
                    try:
                        server.post("api/judge", body)
                    except urllib.error.HTTPError as e:
                        violations.append(f"round {r}: a valid save was refused: {e.code} {e.read()[:200]!r}")
                        return
                    except (urllib.error.URLError, ConnectionError, OSError, http.client.HTTPException):
                        return  # killed mid-request or mid-answer (IncompleteRead): this one was not acknowledged
                    acked[issue["id"]] = body
                    del in_flight[issue["id"]]
                    box["n"] += 1
                    k += 1

            t = threading.Thread(target=client, daemon=True)
            t.start()
            time.sleep(rng.uniform(0.0, max_delay))
            server.kill()
            stop.set()
            t.join(15)
            saves += box["n"]
            last_in_flight = dict(in_flight)
        finally:
            if server.proc.poll() is None:
                server.kill()
        if log:
            log(f"round {r + 1}/{rounds}: {box['n']} saves acknowledged, {len(violations)} violations so far")
    return {"rounds": rounds, "acknowledged_saves": saves, "kills_between_writes": torn,
            "violations": len(violations), "problems": violations[:20],
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m repair.review.stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="kill -9 rounds (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-delay", type=float, default=0.25, help="longest time a server saves before its kill (s)")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a new temporary one)")
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="review-stress."))
    result = kill_rounds(work, args.rounds, seed=args.seed, max_delay=args.max_delay)
    print(json.dumps({**result, "dir": str(work)}, ensure_ascii=False))
    sys.exit(1 if result["violations"] else 0)


if __name__ == "__main__":
    main()
