"""The review stage: the `review` config group's method judges a cycle's issues; the corrections and
the review's figures come back (read again from the folder on a resumed run)."""

from __future__ import annotations

import logging
from pathlib import Path

from repair.errors import UserError
from repair.fileio import file_sha256 as sha256, read_json, write_json_atomic
from repair.registry import build

log = logging.getLogger(__name__)


class OracleReview:
    """Corrections from the data's reference translations (the demo, tests, studies)."""

    uses_memory = True  # review.memory: its suggestions counted in the review's figures

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str,
                 memory=None, aligner=None, threshold: float = 0.5) -> dict:
        from repair.review.oracle import oracle_review, phrase_sides, projection_agreement, suggestion_figures

        if references is None:
            raise UserError("review=oracle needs reference translations, and the data has none (data.references): "
                            "use review=file or review=web")
        projected, agreement = {}, None
        items = phrase_sides(issues, references) if aligner is not None else []
        if items:
            projected = {(s, p): x for (s, _, p), x in zip(items, aligner.project(items)) if x is not None}
            agreement = projection_agreement(issues, references, projected, threshold)
        judged = oracle_review(issues, references, out, memory.fresh() if memory else None, projected, threshold)
        return {"not_judged": judged["not_judged"], "sides_not_judged": judged["sides_not_judged"],
                "sides_by_projection": judged["sides_by_projection"],
                "corrections_by_projection": judged["corrections_by_projection"],
                **({"projection": agreement} if agreement else {}),
                "suggestions": suggestion_figures(issues, references, memory.fresh() if memory else None, projected,
                                                  threshold)}


class FileReview:
    """A spreadsheet to fill in; the loop stops until it is (ReviewPending says what and where)."""

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str,
                 memory=None, aligner=None, threshold: float = 0.5) -> dict:
        # the sheet is written at once: no correction to learn from before it
        from repair.review.sheet import file_review

        file_review(issues, out, rerun_hint=rerun_hint, aligner=aligner)
        return {}


class WebReview:
    """A local page to judge and correct the issues; the loop goes on when Finish is clicked."""

    uses_memory = True  # review.memory: its suggestions on the page

    def __init__(self, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = False, public: bool = False,
                 hosts: list[str] | None = None):
        self.options = {"host": host, "port": port, "open_browser": open_browser, "public": public,
                        "hosts": list(hosts or [])}

    def __call__(self, issues: list[dict], out: Path, references: dict | None, rerun_hint: str,
                 memory=None, aligner=None, threshold: float = 0.5) -> dict:
        from repair.review.web import serve_review

        progress = out / "progress.json"
        if not (progress.exists() and read_json(progress).get("finished")):
            serve_review(issues, out, memory=memory, aligner=aligner, **self.options)  # a review finished with `python -m repair.review` is not served again
        return {}


PROJECTION_DEFAULTS = {"enabled": True, "threshold": 0.8, "unit": "word", "max_sentences": 30_000}


def option_block(key: str, block, defaults: dict) -> dict:
    """A settings block (`review.KEY`: true, false or a block of `defaults`' keys) with its defaults filled in;
    a bad block, an unknown key or an `enabled` not true or false is one UserError naming it."""
    if block is None:
        block = {}
    if isinstance(block, bool):
        block = {"enabled": block}
    if not isinstance(block, dict):
        raise UserError(f"review.{key} must be true, false or a block of {', '.join(defaults)}; got {block!r}")
    unknown = sorted(set(block) - set(defaults))
    if unknown:
        raise UserError(f"review.{key} has no key {unknown[0]!r}; its keys: {', '.join(defaults)}")
    options = {**defaults, **block}
    if not isinstance(options["enabled"], bool):
        raise UserError(f"review.{key}.enabled must be true or false, got {options['enabled']!r}")
    return options


def projection_options(block) -> dict:
    """review.projection's settings (repair.review.align), checked; its defaults where a key is not given."""
    options = option_block("projection", block, PROJECTION_DEFAULTS)
    t = options["threshold"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 1:
        raise UserError(f"review.projection.threshold must be a number from 0 to 1; got {t!r}")
    if options["unit"] not in ("word", "char"):
        raise UserError(f"review.projection.unit must be word (jieba's words) or char; got {options['unit']!r}")
    m = options["max_sentences"]
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise UserError(f"review.projection.max_sentences must be a whole number, 1 or more; got {m!r}")
    return options


def phrase_aligner(data_dir: Path | None):
    """A callable giving the word alignment of the run's training corpus (repair.review.align.PhraseAligner,
    trained once and cached in DATA/align) for review.run's `aligner`; None where the data folder has no
    cleaned training pairs (the log says so)."""
    def make(unit: str, max_sentences: int):
        from repair.data.prepare import read_clean_pairs
        from repair.review.align import PhraseAligner

        try:
            pairs = read_clean_pairs(data_dir, "train") if data_dir is not None else []
        except (OSError, UserError):
            pairs = []
        if not pairs:
            log.info("phrase projection: off (no cleaned training pairs in %s)", data_dir)
            return None
        return PhraseAligner.train(pairs, Path(data_dir) / "align", unit=unit, max_sentences=max_sentences)
    return make


MEMORY_DEFAULTS = {"enabled": True, "rare": 100, "beam": 5, "slack": 2, "swaps": 8}


def memory_options(block) -> dict:
    """review.memory's settings (repair.review.memory), checked; its defaults where a key is not given."""
    options = option_block("memory", block, MEMORY_DEFAULTS)
    for key, least in (("rare", 0), ("beam", 1), ("slack", 0), ("swaps", 0)):
        v = options[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise UserError(f"review.memory.{key} must be a whole number, {least} or more; got {v!r}")
    return options


def memory_suggester(translator, stop_tokens, data_dir: Path | None):
    """A callable giving the MemorySuggester of `translator` (None where it cannot search: the memory is then off,
    and the log says why) for review.run's `memory`."""
    def make(enabled: bool, rare: int, beam: int, slack: int, swaps: int = 0):
        from repair.review.memory import MemorySuggester, ReviewMemory, Substitutes

        fs, why = translator.searcher(beam)
        if fs is None:
            log.info("review memory: off (%s)", why)
            return None
        seen = None
        if data_dir is not None:
            from repair.stages.finetune import word_counts

            try:
                seen = word_counts(data_dir)
            except (OSError, UserError):
                seen = None  # no training English here: every word may be learnt, and none swapped in
        substitutes = None
        if swaps and seen:
            substitutes = Substitutes(lambda: training_english(data_dir), seen, rare or MEMORY_DEFAULTS["rare"], k=swaps)
        return MemorySuggester(fs, ReviewMemory(stop_tokens, seen if rare else None, rare), beam, slack, substitutes)
    return make


def training_english(data_dir: Path) -> list[str]:
    from repair.data.prepare import read_clean_pairs

    return [src for src, _ in read_clean_pairs(data_dir, "train")]


REVIEWS = {"oracle": OracleReview, "file": FileReview, "web": WebReview}


def run(out: Path, issues: list[dict], review: dict, references: dict | None = None,
        rerun_hint: str = "python -m repair.loop", memory=None, aligner=None) -> tuple[list[dict], dict]:
    """The corrections of `issues` and the review's figures, by the `review` group's method, into `out`.
    A review once done (done.json) is not done again, and its corrections may not change afterwards.
    `memory`: a callable giving a repair.review.memory.MemorySuggester (review.memory; None: no review memory),
    called only when there is a review to do. `aligner`: a callable giving a repair.review.align.PhraseAligner
    (review.projection; None: phrase sides get no projected reference), likewise."""
    from repair.review.store import CorrectionStore, load_corrections, review_stats
    from repair.stats import by_relation

    done = out / "done.json"
    corrections_path = out / "corrections.jsonl"
    if not done.exists():
        review = dict(review)
        options = memory_options(review.pop("memory", None))
        projection = projection_options(review.pop("projection", None))
        method = build("review", REVIEWS, review)
        wanted = memory and options["enabled"] and issues and getattr(method, "uses_memory", False)
        suggester = memory(**options) if wanted else None
        project = aligner and projection["enabled"] and issues
        phrases = aligner(projection["unit"], projection["max_sentences"]) if project else None
        if suggester is not None and phrases is not None:
            suggester.memory.aligner = phrases  # a word learns the terms it aligns to (repair.review.memory)
        extra = method(issues, out, references, rerun_hint, memory=suggester, aligner=phrases,
                       threshold=projection["threshold"])
        if phrases is not None:  # the seconds it took to learn (when this review learnt it, else the cached one's)
            extra["alignment"] = {k: phrases.info[k] for k in ("pairs", "unit", "seconds")}
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
