"""One table across runs of the loop: `python -m repair.study RUN_DIR... [--out DIR]`.

Reads each run's report.json and config.json, finds the configuration keys whose values differ
between the runs (what the study varies) and writes study.csv, study.md and plots/study_*.png with
the runs' key figures side by side. A Hydra multirun of the loop ends with it (StudyCallback,
configured in conf/loop.yaml), so `python -m repair.loop -m finetune.lr=1e-4,3e-4` is a study.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import os
from pathlib import Path

from hydra.experimental.callback import Callback

from repair.errors import UserError, exit_on_user_error
from repair.fileio import flat, read_json, write_text_atomic

log = logging.getLogger("repair.study")

# keys that name places, not settings: never what a study varies
PLACES = ("run_dir", "checkpoint_dir", "data.dir", "model.checkpoint", "purity.input")

# column -> path in report.json
FIGURES = {
    "cycles": ("cycles",),
    "issues_before": ("purity", "before", "issues"),
    "issues_after": ("purity", "after", "issues"),
    "corrections": ("corrections",),
    "fixed": ("fixed",),
    "fixed_within_d": ("fixed_within_d",),
    "bleu_before": ("bleu", "before"),
    "bleu_after": ("bleu", "after"),
    "bleu_p": ("bleu", "p_value"),
    "heldout_issues_before": ("heldout", "issues_before"),
    "heldout_issues_after": ("heldout", "issues_after"),
    "heldout_erroneous_before": ("heldout", "erroneous_before"),
    "heldout_erroneous_after": ("heldout", "erroneous_after"),
    "heldout_p": ("heldout", "p_value"),
    "improved": ("changes", "improved"),
    "unchanged": ("changes", "unchanged"),
    "degraded": ("changes", "degraded"),
    "finetune_epochs": ("finetune", "epochs"),
    "bleu_excluded": ("bleu", "excluded"),
    "fix_rate": ("repair", "efficacy", "fix_rate"),
    "heldout_sentences": ("repair", "generality", "sentences", "sentences"),
    "heldout_sentences_with_issues_before": ("repair", "generality", "sentences", "with_issues_before"),
    "heldout_sentences_with_issues_after": ("repair", "generality", "sentences", "with_issues_after"),
    "heldout_sentences_p": ("repair", "generality", "sentences", "p_value"),
    "heldout_pairs_issues_before": ("repair", "generality", "pairs", "issues_before"),
    "heldout_pairs_issues_after": ("repair", "generality", "pairs", "issues_after"),
    "exact_texts": ("repair", "generality", "exact", "texts"),
    "exact_before": ("repair", "generality", "exact", "before"),
    "exact_after": ("repair", "generality", "exact", "after"),
    "exact_p": ("repair", "generality", "exact", "p_value"),
    "term_recall_sentences": ("repair", "generality", "term_recall", "sentences"),
    "term_recall_before": ("repair", "generality", "term_recall", "before"),
    "term_recall_after": ("repair", "generality", "term_recall", "after"),
    "term_recall_p": ("repair", "generality", "term_recall", "p_value"),
    "locality_texts": ("repair", "locality", "texts"),
    "locality_changed": ("repair", "locality", "changed"),
    "locality_correct_before": ("repair", "locality", "correct_before"),
    "locality_correct_to_wrong": ("repair", "locality", "correct_to_wrong"),
    "locality_wrong_to_correct": ("repair", "locality", "wrong_to_correct"),
    "locality_p": ("repair", "locality", "p_value"),
    "locality_chrf_delta": ("repair", "locality", "chrf_delta"),
}


def figure(report: dict, path: tuple[str, ...]):
    value = report
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return len(value) if isinstance(value, list) else value


def load_run(run_dir: Path) -> tuple[dict, dict]:
    report, config = run_dir / "report.json", run_dir / "config.json"
    for path in (report, config):
        if not path.is_file():
            raise UserError(f"{run_dir}: no {path.name}; give folders of finished runs of `python -m repair.loop`")
    return read_json(report), read_json(config)


def varied_keys(configs: list[dict]) -> list[str]:
    """Configuration keys (dotted) whose values are not the same in every run, places left out."""
    flats = [flat(c) for c in configs]
    keys = sorted(set().union(*flats))
    return [k for k in keys
            if not any(k == p or k.startswith(p + ".") for p in PLACES)
            and len({repr(f.get(k)) for f in flats}) > 1]


def study_rows(run_dirs: list[Path]) -> tuple[list[str], list[dict]]:
    """The varied keys and one row per run: its folder, its values of those keys, its figures."""
    if not run_dirs:
        raise UserError("no run folders given: python -m repair.study RUN_DIR [RUN_DIR ...]")
    loaded = [load_run(d) for d in run_dirs]
    keys = varied_keys([c for _, c in loaded])
    rows = []
    for d, (report, config) in zip(run_dirs, loaded):
        settings = flat(config)
        per_cycle = {}
        if len(report.get("cycles") or []) > 1:  # the repair measures of each cycle beside the run's
            for c in report["cycles"]:
                per_cycle.update({f"cycle{c['cycle']}_{name}": figure(c, path) for name, path in FIGURES.items()
                                  if path[0] == "repair"})
        rows.append({"run": str(d), **{k: settings.get(k) for k in keys},
                     **{name: figure(report, path) for name, path in FIGURES.items()}, **per_cycle})
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return keys, [{c: row.get(c) for c in columns} for row in rows]


def label(row: dict, keys: list[str]) -> str:
    return " ".join(f"{k}={row[k]}" for k in keys) or Path(row["run"]).name


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def value(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"
    return str(x)


def to_markdown(keys: list[str], rows: list[dict], plots: list[str]) -> str:
    lines = ["# Study", "",
             f"{len(rows)} runs of the loop; they differ in: {', '.join(f'`{k}`' for k in keys) or 'nothing'}.",
             "Issues at the lowest Purity threshold; held-out p: McNemar's exact test; BLEU p: paired bootstrap; "
             "improved / unchanged / degraded: changed translations by chrF against their references.", ""]
    columns = [*keys, *FIGURES]  # study.csv also has each cycle's repair measures
    lines += ["| " + " | ".join(["run", *columns]) + " |", "| " + " | ".join(["---"] * (len(columns) + 1)) + " |"]
    for row in rows:
        lines.append("| " + " | ".join([Path(row["run"]).name, *(value(row[c]) for c in columns)]) + " |")
    lines += [""] + [f"![{Path(p).stem}]({p})" for p in plots] + [""]
    return "\n".join(lines)


PLOTS = {
    "heldout": ("Held-out Purity issues", ["heldout_issues_before", "heldout_issues_after"]),
    "fixes": ("Corrections and fixes", ["corrections", "fixed", "fixed_within_d"]),
    "changes": ("Changed translations (chrF)", ["improved", "unchanged", "degraded"]),
    "bleu": ("BLEU", ["bleu_before", "bleu_after"]),
}


def plot(out: Path, keys: list[str], rows: list[dict]) -> list[str]:
    """One grouped bar chart per group of figures, a group of bars per run; returns paths relative to out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [label(r, keys) for r in rows]
    paths = []
    for name, (title, columns) in PLOTS.items():
        columns = [c for c in columns if all(r[c] is not None for r in rows)]
        if not columns:
            continue
        fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(rows) + 2), 3.4), dpi=120)
        width = 0.8 / len(columns)
        for j, c in enumerate(columns):
            ax.bar([i + (j - (len(columns) - 1) / 2) * width for i in range(len(rows))], [r[c] for r in rows],
                   width, label=c)
        ax.set_xticks(range(len(rows)), names, rotation=15, ha="right", fontsize=7)
        ax.set_title(title)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "plots" / f"study_{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        plt.close(fig)
        paths.append(str(path.relative_to(out)))
    return paths


def write_study(run_dirs: list[Path], out: Path | None = None) -> Path:
    """study.csv, study.md and plots/ in `out` (default: the runs' common parent folder); returns study.md."""
    run_dirs = [Path(d) for d in run_dirs]
    keys, rows = study_rows(run_dirs)
    if out is None:
        out = Path(os.path.commonpath([d.resolve() for d in run_dirs]))
        if len(run_dirs) == 1:
            out = out.parent
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "study.csv", to_csv(rows))
    path = out / "study.md"
    write_text_atomic(path, to_markdown(keys, rows, plot(out, keys, rows)))
    return path


class StudyCallback(Callback):
    """At the end of a multirun of the loop: the study of its jobs' runs in the sweep folder."""

    def __init__(self) -> None:
        self.reports: list[Path] = []

    def on_job_end(self, config, job_return, **kwargs) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status == JobStatus.COMPLETED and job_return.return_value:
            self.reports.append(Path(job_return.return_value))

    def on_multirun_end(self, config, **kwargs) -> None:
        if not self.reports:  # the jobs ran elsewhere (another launcher) or none finished
            log.warning("no finished runs reached this process: no study written; "
                        "run python -m repair.study on the job folders")
            return
        path = write_study([p.parent for p in self.reports], Path(config.hydra.sweep.dir))
        print(f"study: {path}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m repair.study", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="folders of finished runs of python -m repair.loop")
    ap.add_argument("--out", type=Path, help="where study.csv, study.md and plots/ go (default: the runs' parent)")
    args = ap.parse_args(argv)
    print(f"study: {exit_on_user_error(write_study)(args.runs, args.out)}", flush=True)


if __name__ == "__main__":
    main()
