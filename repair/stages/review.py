"""The review stage: the `review` config group's method judges a cycle's issues; the corrections and
the review's figures come back (read again from the folder on a resumed run)."""

from __future__ import annotations

from pathlib import Path

from repair.errors import UserError
from repair.fileio import file_sha256 as sha256, read_json, write_json_atomic
from repair.registry import build


class OracleReview:
    """Corrections from the data's reference translations (the demo, tests, studies)."""

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str) -> dict:
        from repair.review.oracle import oracle_review

        if references is None:
            raise UserError("review=oracle needs reference translations, and the data has none (data.references): "
                            "use review=file or review=web")
        return {"needs_person": oracle_review(issues, references, out).get("needs_person", 0)}


class FileReview:
    """A spreadsheet to fill in; the loop stops until it is (ReviewPending says what and where)."""

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str) -> dict:
        from repair.review.sheet import file_review

        file_review(issues, out, rerun_hint=rerun_hint)
        return {}


class WebReview:
    """A local page to judge and correct the issues; the loop goes on when Finish is clicked."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = False, public: bool = False,
                 hosts: list[str] | None = None):
        self.options = {"host": host, "port": port, "open_browser": open_browser, "public": public,
                        "hosts": list(hosts or [])}

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str) -> dict:
        from repair.review.web import serve_review

        progress = out / "progress.json"
        if not (progress.exists() and read_json(progress).get("finished")):
            serve_review(issues, out, **self.options)  # a review finished with `python -m repair.review` is not served again
        return {}


REVIEWS = {"oracle": OracleReview, "file": FileReview, "web": WebReview}


def run(out: Path, issues: list[dict], review: dict, references: dict | None = None,
        rerun_hint: str = "python -m repair.loop") -> tuple[list[dict], dict]:
    """The corrections of `issues` and the review's figures, by the `review` group's method, into `out`.
    A review once done (done.json) is not done again, and its corrections may not change afterwards."""
    from repair.review.store import CorrectionStore, load_corrections, review_stats
    from repair.stats import by_relation

    done = out / "done.json"
    corrections_path = out / "corrections.jsonl"
    if not done.exists():
        method = build("review", REVIEWS, review)
        extra = method(issues, out, references, rerun_hint)
        with CorrectionStore(out, issues) as store:  # corrections.jsonl rebuilt from the judgment log if they disagree
            stats = {**review_stats(out, issues), **extra, "by_relation": by_relation(issues, store.latest, references)}
        write_json_atomic(done, {"method": review["name"], "stats": stats, "corrections_sha256": sha256(corrections_path)})
    state = read_json(done)
    if sha256(corrections_path) != state["corrections_sha256"]:
        raise UserError(
            f"{corrections_path} changed after the review ended, and later stages were built on the old "
            f"content. Nothing is lost; to use the new corrections, delete {done} and the folders after it "
            f"({out.parent / 'finetune'}, {out.parent / 'verify'}) and rerun."
        )
    if corrections_path.exists() and corrections_path.stat().st_size:
        corrections, notes = load_corrections(corrections_path, {i["id"]: i for i in issues})
    else:
        corrections, notes = [], {}
    return corrections, {"method": state["method"], **state["stats"], "notes": notes}
