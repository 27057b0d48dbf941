"""The statistics of the loop: are the corrected translations fixed, did BLEU move significantly, what did
fine-tuning do to held-out sentences nobody corrected, which translations got better or worse, and the
review's figures per test relation. Issues come as read_issues gives them (in today's shape)."""

from __future__ import annotations

import os
from typing import Sequence

from repair.purity.check import bow_distance, same_translation, squeeze  # noqa: F401 (squeeze: where the review and measures find it)


def edit_distance(a: str, b: str) -> int:
    """Characters to insert, delete or replace to turn `a` into `b` (Levenshtein), whitespace aside."""
    a, b = squeeze(a), squeeze(b)
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def verify_fixes(corrections: list[dict], translations: list[str], unit: str = "char", threshold: int = 0) -> dict:
    """Compare the fine-tuned model's translations of the corrected sources with the corrections.

    `translations[i]` is the new translation of `corrections[i]["source"]`. A correction is fixed
    when the new translation equals it (whitespace and character width aside: repair.purity.check.same_translation),
    and fixed within d when the bag-of-words distance of the
    correction against the new translation (the correction's tokens it lacks, Purity's measure)
    is at most `threshold`.
    """
    rows = []
    for c, new in zip(corrections, translations, strict=True):
        fixed = same_translation(new, c["correction"])
        rows.append(
            {
                "source": c["source"],
                "before": c["translation"],
                "correction": c["correction"],
                "after": new,
                "kind": c["kind"],
                "fixed": fixed,
                "distance": bow_distance(c["correction"], new, unit=unit),
            }
        )
    n_fixed = sum(r["fixed"] for r in rows)
    return {
        "corrections": len(rows),
        "fixed": n_fixed,
        "fix_rate": n_fixed / len(rows) if rows else None,
        "fixed_within_d": sum(r["distance"] <= threshold for r in rows),
        "threshold": threshold,
        "rows": rows,
    }


def bleu_significance(
    references: list[str],
    base: list[str],
    finetuned: list[str],
    *,
    n_samples: int = 1000,
    seed: int = 12345,
    alpha: float = 0.05,
) -> dict:
    """Corpus BLEU (sacrebleu, tokenize zh) of both systems and paired bootstrap resampling.

    Returns both scores, the fine-tuned system's 95% interval, the p-value of the difference and
    whether it is significant at `alpha`, with sacrebleu's signature string.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if not (len(references) == len(base) == len(finetuned)):
        raise ValueError("references and both systems' outputs must be aligned")
    bleu = BLEU(tokenize="zh", references=[references])
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        test = PairedTest(
            [("base", base), ("finetuned", finetuned)],
            {"BLEU": bleu},
            references=None,
            test_type="bs",
            n_samples=n_samples,
        )
        signatures, scores = test()
    finally:
        if previous is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = previous
    before, after = scores["BLEU"]
    # sacrebleu's test calls identical outputs significant (p = 1/(n+1)): no change is no change.
    p_value = 1.0 if list(base) == list(finetuned) else float(after.p_value)

    def interval(result) -> list[float] | None:
        # sacrebleu gives the bootstrap mean and the half-width of its 95% interval
        if result.ci is None:
            return None
        return [round(float(result.mean - result.ci), 2), round(float(result.mean + result.ci), 2)]

    return {
        "before": round(float(before.score), 2),
        "after": round(float(after.score), 2),
        "delta": round(float(after.score) - float(before.score), 2),
        "before_ci95": interval(before),
        "after_ci95": interval(after),
        "p_value": p_value,
        "significant": p_value < alpha,
        "alpha": alpha,
        "bootstrap_samples": n_samples,
        "sentences": len(references),
        "signature": str(signatures["BLEU"]),
    }


def purity_regressions(before: list[dict], after: list[dict]) -> list[dict]:
    """Issues the fine-tuned model has that the base did not (matched by pair id)."""
    seen = {i["id"] for i in before}
    return [i for i in after if i["id"] not in seen]


def sign_test(up: int, down: int) -> float:
    """Two-sided exact sign test: `up` changes one way, `down` the other, p = 1/2 each under no change
    (SciPy's binomial test); 1.0 when nothing changed."""
    from scipy.stats import binomtest

    if up < 0 or down < 0:
        raise ValueError("counts must be >= 0")
    return 1.0 if up + down == 0 else float(binomtest(up, up + down, 0.5).pvalue)


def mcnemar_exact(before: Sequence[bool], after: Sequence[bool]) -> dict:
    """McNemar's exact test on paired yes/no outcomes: the sign test on the discordant units,
    yes -> no (`resolved`) against no -> yes (`new`)."""
    if len(before) != len(after):
        raise ValueError("paired outcomes must be aligned")
    gone = sum(bool(b) and not a for b, a in zip(before, after))
    new = sum(bool(a) and not b for b, a in zip(before, after))
    return {"pairs": len(before), "resolved": gone, "new": new, "p_value": sign_test(gone, new)}


def bootstrap_mean_ci(values: Sequence[float], *, samples: int = 1000, seed: int = 12345,
                      level: float = 0.95) -> list[float] | None:
    """The percentile bootstrap interval of the mean of `values` (units resampled with replacement);
    None when there are no values."""
    import numpy as np

    if len(values) == 0:
        return None
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    tail = (1 - level) / 2
    return [float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))]


def erroneous_translations(issues: list[dict], references: dict[str, str] | None) -> int | None:
    """Texts among the issues' sides whose translation differs from their reference (the
    oracle's judgment); None without references. Texts without a reference are not counted."""
    if references is None:
        return None
    wrong = set()
    for issue in issues:
        for s in issue["sides"]:
            ref = references.get(s["source"])
            if ref is not None and squeeze(s["translation"]) != squeeze(ref):
                wrong.add(s["source"])
    return len(wrong)


def by_relation(issues: list[dict], judgments: dict[str, dict], references: dict[str, str] | None) -> dict:
    """Per test relation: its issues, the erroneous translations among their sides (by reference; None without
    references) and the review's precision (issues judged with an error / issues judged; None if none judged)."""
    out: dict[str, dict] = {}
    groups: dict[str, list[dict]] = {}
    for issue in issues:
        groups.setdefault(issue["relation"], []).append(issue)
    for name, group in groups.items():
        judged = [judgments[i["id"]] for i in group if i["id"] in judgments]
        with_error = sum(1 for j in judged if j["wrong"])
        out[name] = {"issues": len(group), "erroneous_translations": erroneous_translations(group, references),
                     "judged": len(judged), "with_error": with_error,
                     "precision": with_error / len(judged) if judged else None}
    return out


def heldout_comparison(pair_ids: list[str], before: list[dict], after: list[dict],
                       references: dict[str, str] | None) -> dict:
    """Purity on the held-out sentences with the base and the fine-tuned model (issues at the
    lowest threshold, pair by pair): counts before/after and McNemar's exact test on whether each
    pair is an issue. A pair skipped for Latin letters counts as no issue, as in Purity's own counts."""
    flagged_before, flagged_after = {i["id"] for i in before}, {i["id"] for i in after}
    test = mcnemar_exact([p in flagged_before for p in pair_ids], [p in flagged_after for p in pair_ids])
    return {
        "pairs": len(pair_ids),
        "issues_before": len(before),
        "issues_after": len(after),
        "erroneous_before": erroneous_translations(before, references),
        "erroneous_after": erroneous_translations(after, references),
        "resolved": test["resolved"],
        "new": test["new"],
        "p_value": test["p_value"],
        "test": "McNemar exact (binomial on discordant pairs)",
    }


def chrf(hypothesis: str, reference: str) -> float:
    """Sentence-level chrF (sacrebleu; characters, so no Chinese word segmentation is needed)."""
    from sacrebleu.metrics import CHRF

    return round(float(CHRF().sentence_score(hypothesis, [reference]).score), 2)


def classify_changes(rows: list[dict], worst: int = 10) -> dict:
    """Class every translation that changed against its reference by sentence-level chrF.

    rows: {"set", "source", "reference" (or None), "before", "after"}. A changed translation with a
    reference is improved, unchanged or degraded as its chrF rises, stays or falls; one without a
    reference is only counted. Returns the counts, the same per set and the `worst` degradations.
    """
    counts = {"translations": 0, "changed": 0, "improved": 0, "unchanged": 0, "degraded": 0, "no_reference": 0}
    by_set: dict[str, dict] = {}
    degraded = []
    for r in rows:
        group = by_set.setdefault(r["set"], dict.fromkeys(counts, 0))
        changed = squeeze(r["before"]) != squeeze(r["after"])
        if not changed:
            klass = None
        elif r["reference"] is None:
            klass = "no_reference"
        else:
            b, a = chrf(r["before"], r["reference"]), chrf(r["after"], r["reference"])
            klass = "improved" if a > b else "degraded" if a < b else "unchanged"
            if klass == "degraded":
                degraded.append({**r, "chrf_before": b, "chrf_after": a, "delta": round(a - b, 2)})
        for c in (counts, group):
            c["translations"] += 1
            if changed:
                c["changed"] += 1
                c[klass] += 1
    degraded.sort(key=lambda d: (d["delta"], d["source"]))
    return {**counts, "metric": "chrF (sacrebleu, sentence level)", "by_set": by_set, "worst": degraded[:worst]}
