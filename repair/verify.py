"""Verify a fine-tuned model: are the corrected translations fixed, and did BLEU move significantly?"""

from __future__ import annotations

import os

from repair.purity import bow_distance
from repair.review.store import squeeze


def verify_fixes(corrections: list[dict], translations: list[str], unit: str = "char") -> dict:
    """Compare the fine-tuned model's translations of the corrected sources with the corrections.

    `translations[i]` is the new translation of `corrections[i]["source"]`. A correction is fixed
    when the new translation equals it; the BoW distance of the correction against the new
    translation says how far an unfixed one still is.
    """
    rows = []
    for c, new in zip(corrections, translations, strict=True):
        fixed = squeeze(new) == squeeze(c["correction"])
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
