"""The statistics the loop reports: exact tests on paired yes/no outcomes and a bootstrap interval for a mean.

Every test here counts independent units (sentences or texts, one outcome each): the callers group
Purity's pairs by their sentence before testing.
"""

from __future__ import annotations

from typing import Sequence


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
