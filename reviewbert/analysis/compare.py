"""Two checkpoints on the same reviews: whose mistakes, and is the difference real?

McNemar's test looks only at the reviews the two models disagree on being right
about: ``b`` = A right and B wrong, ``c`` = A wrong and B right. If the models were
equally good, each such review would be b or c with probability 1/2. statsmodels
(whose ``mcnemar`` this mirrors) is not installed, so the exact test is
``scipy.stats.binomtest(b, b + c, 0.5)`` (two-sided), and the chi-square version
with continuity correction is (|b - c| - 1)^2 / (b + c) against ``scipy.stats.chi2``
with one degree of freedom. The exact p-value is the one to quote (statsmodels'
default); chi-square is shown beside it for readers who know that form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class McNemar:
    b: int                 # A right, B wrong
    c: int                 # A wrong, B right
    n: int                 # reviews compared
    p_exact: float         # two-sided exact binomial p-value
    chi2: float | None     # continuity-corrected statistic (None when b + c == 0)
    p_chi2: float | None


def mcnemar_from_counts(b: int, c: int, n: int | None = None) -> McNemar:
    b, c = int(b), int(c)
    if b + c == 0:
        return McNemar(b, c, n if n is not None else 0, 1.0, None, None)
    p_exact = float(stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)
    chi2 = (abs(b - c) - 1) ** 2 / (b + c)
    return McNemar(b, c, n if n is not None else b + c, min(p_exact, 1.0), float(chi2),
                   float(stats.chi2.sf(chi2, df=1)))


def mcnemar(a_correct, b_correct) -> McNemar:
    """McNemar's test from two boolean "was right" vectors over the same reviews."""
    a = np.asarray(a_correct, dtype=bool)
    bb = np.asarray(b_correct, dtype=bool)
    if a.shape != bb.shape:
        raise ValueError("both models must be scored on the same reviews")
    return mcnemar_from_counts(int(np.sum(a & ~bb)), int(np.sum(~a & bb)), int(a.size))


@dataclass
class Comparison:
    metrics_a: dict
    metrics_b: dict
    test: McNemar
    only_a: np.ndarray     # rows A gets right and B gets wrong
    only_b: np.ndarray     # rows B gets right and A gets wrong


def compare(a, b) -> Comparison:
    """Compare two :class:`~reviewbert.analysis.predictions.SplitPredictions` of the same reviews."""
    da, db = a.meta.get("data", {}).get("sha256"), b.meta.get("data", {}).get("sha256")
    if a.n != b.n or (da and db and da != db):
        raise ValueError("the two checkpoints were not scored on the same reviews")
    if not np.array_equal(a.y, b.y):
        raise ValueError("the two evaluations disagree on the true labels")
    ca, cb = a.correct, b.correct
    return Comparison(a.metrics(), b.metrics(), mcnemar(ca, cb),
                      np.flatnonzero(ca & ~cb), np.flatnonzero(~ca & cb))
