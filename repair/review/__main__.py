"""`python -m repair.review RUN_DIR [--port N] [--host H --public] [--open]`: serve the review page for a run folder.

RUN_DIR is a folder with issues.jsonl, or with test/issues.jsonl (one cycle of the loop: RUN_DIR/cycleK),
or a loop run folder holding cycle*/test/issues.jsonl (the last cycle whose review is not done is served,
or --cycle K). Judgments go to review/ beside test/ (or inside RUN_DIR when issues.jsonl is at its top).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from repair.errors import UserError, exit_on_user_error
from repair.issues import read_issues


def locate(run_dir: Path, cycle: int | None = None) -> tuple[Path, Path]:
    """(issues.jsonl, review folder) for a run folder."""
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such folder")
    if cycle is not None:
        run_dir = run_dir / f"cycle{cycle}"
        if not run_dir.is_dir():
            raise UserError(f"{run_dir}: no such folder (no cycle {cycle} in this run)")
    if (run_dir / "issues.jsonl").is_file():
        return run_dir / "issues.jsonl", run_dir / "review"
    if (run_dir / "test" / "issues.jsonl").is_file():
        return run_dir / "test" / "issues.jsonl", run_dir / "review"
    cycles = sorted(
        (p for p in run_dir.glob("cycle*") if re.fullmatch(r"cycle\d+", p.name) and (p / "test" / "issues.jsonl").is_file()),
        key=lambda p: int(p.name[5:]),
    )
    if not cycles:
        raise UserError(
            f"{run_dir}: no issues.jsonl here, nor test/issues.jsonl, nor cycle*/test/issues.jsonl; "
            "run the test stage first (python -m repair.loop ...)"
        )
    open_cycles = [p for p in cycles if not (p / "review" / "done.json").exists()]
    chosen = (open_cycles or cycles)[-1]
    if len(cycles) > 1:
        print(f"review: serving {chosen.name} (of {', '.join(p.name for p in cycles)}; --cycle K for another)")
    return chosen / "test" / "issues.jsonl", chosen / "review"


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m repair.review", description="Serve the review page for a run folder.")
    ap.add_argument("run_dir", type=Path, help="run folder (with issues.jsonl, test/issues.jsonl or cycle*/)")
    ap.add_argument("--port", type=int, default=8765, help="port (0: any free one); default 8765")
    ap.add_argument("--host", default="127.0.0.1", help="address to serve on; default 127.0.0.1 (this machine only)")
    ap.add_argument("--public", action="store_true",
                    help="allow a --host beyond loopback (0.0.0.0, ::, a LAN address): anyone who can reach the port "
                         "sees the page; only the printed address (with its #token) can change the review")
    ap.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="another name the page is reached by (Host header), e.g. the machine's DNS name; repeatable")
    ap.add_argument("--cycle", type=int, default=None, help="which cycle of a loop run (default: the last open one)")
    ap.add_argument("--open", action="store_true", help="open the page in the default browser")
    args = ap.parse_args(argv)

    from repair.review.web import serve_review

    issues_path, review_dir = locate(args.run_dir, args.cycle)
    issues = read_issues(issues_path)
    serve_review(issues, review_dir, host=args.host, port=args.port, open_browser=args.open, public=args.public,
                 hosts=args.allow_host)


if __name__ == "__main__":
    main()
