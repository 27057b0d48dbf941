"""`python -m repair.purity.sample RUN --cases 100 --issues 50 --seed 1`: a seeded random sample of a Purity run's
cases and issues of one relation (default `replace`), as Markdown tables for a person to judge (docs/real-text.md).

Cases are drawn from RUN/pairs.jsonl, issues from RUN/issues.jsonl; each row shows the sides with their
translations (RUN/translations.tsv) and, for an issue, its distance, evidence and the phrases it was judged by.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from repair.errors import UserError, exit_on_user_error
from repair.fileio import read_jsonl
from repair.purity.translators import read_table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def sample(run: str | Path, cases: int, issues: int, seed: int, relation: str = "replace") -> str:
    run = Path(run)
    for name in ("pairs.jsonl", "issues.jsonl", "translations.tsv"):
        if not (run / name).is_file():
            raise UserError(f"{run / name}: not found; give the folder of a Purity run (its `out`)")
    tr = read_table(run / "translations.tsv", empty_ok=True)
    pairs = [p for p in read_jsonl(run / "pairs.jsonl") if p["relation"] == relation]
    found = [i for i in read_jsonl(run / "issues.jsonl") if i["relation"] == relation]
    rng = random.Random(seed)
    picked_cases = rng.sample(pairs, min(cases, len(pairs)))
    picked_issues = rng.sample(found, min(issues, len(found)))
    lines = [f"Cases: {len(picked_cases)} of {len(pairs)} (seed {seed})", "",
             "| # | original → mutant | translations |", "| --- | --- | --- |"]
    for n, p in enumerate(picked_cases, 1):
        o, m = (s["source"] for s in p["sides"])
        lines.append(f"| {n} | {_cell(o)} → **{_cell(m)}** | {_cell(tr.get(o, ''))} / {_cell(tr.get(m, ''))} |")
    lines += ["", f"Issues: {len(picked_issues)} of {len(found)} (seed {seed})", "",
              "| # | original → mutant | translations | judged by | d, evidence |", "| --- | --- | --- | --- | --- |"]
    for n, i in enumerate(picked_issues, 1):
        o, m = i["sides"][0], i["sides"][1]
        phrases = list(i.get("phrases") or [])
        phrases += [phrase + i["closing"] for phrase in phrases if i.get("closing")]  # also closed as the sentence
        by = (f"{i.get('in_context')}: " + "; ".join(f"{_cell(q)} = {_cell(tr.get(q, ''))}" for q in phrases)
              if phrases else i.get("in_context", "word"))
        lines.append(f"| {n} | {_cell(o['source'])} → **{_cell(m['source'])}** | {_cell(o['translation'])} / "
                     f"{_cell(m['translation'])} | {by} | {i['distance']}: {' '.join(i['evidence'])} |")
    return "\n".join(lines) + "\n"


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a Purity run folder (pairs.jsonl, issues.jsonl, translations.tsv)")
    p.add_argument("--cases", type=int, default=100)
    p.add_argument("--issues", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--relation", default="replace")
    args = p.parse_args(argv)
    print(sample(args.run, args.cases, args.issues, args.seed, args.relation), end="")


if __name__ == "__main__":
    main()
