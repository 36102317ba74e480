"""Before and after a fix: two checkpoints on the same reviews, cohort by cohort.

The cohorts keep the definition found on the first checkpoint and its membership there:
the rows are chosen on the first checkpoint's properties table, so a cohort that names
the model's own outcome (``pred_stars``, ``confidence``) holds the same reviews for both.
Each accuracy has a 95 % bootstrap interval, and the change one over the paired
per-review differences (both checkpoints scored the same reviews).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from reviewbert.analysis.intervals import mean_interval
from reviewbert.cohorts import conditions

MIN_REVIEWS = 2


def _cell(iv) -> tuple[float, float, float]:
    return (float("nan"),) * 3 if iv is None else (iv.value, iv.low, iv.high)


def compare_on_cohorts(cohorts: dict, table: pd.DataFrame, correct_a, correct_b, *,
                       n_resamples: int = 1000) -> pd.DataFrame:
    """One row per cohort ({name: query}; "" is every review): n, each checkpoint's
    accuracy with its interval, and the change (after − before) with its interval."""
    a, b = np.asarray(correct_a, dtype=float), np.asarray(correct_b, dtype=float)
    if not len(a) == len(b) == len(table):
        raise ValueError(f"{len(table):,} reviews in the table, {len(a):,} and {len(b):,} scored")
    rows = []
    for name, query in cohorts.items():
        mask = conditions.mask_of(conditions.parse_query(query, table.columns), table)
        n = int(mask.sum())
        if n < MIN_REVIEWS:
            continue
        acc_a = _cell(mean_interval(a[mask], n_resamples=n_resamples))
        acc_b = _cell(mean_interval(b[mask], n_resamples=n_resamples))
        change = _cell(mean_interval(b[mask] - a[mask], n_resamples=n_resamples))
        rows.append({"cohort": name, "definition": query or "every review", "n": n,
                     "before": acc_a[0], "before_low": acc_a[1], "before_high": acc_a[2],
                     "after": acc_b[0], "after_low": acc_b[1], "after_high": acc_b[2],
                     "change": change[0], "change_low": change[1], "change_high": change[2]})
    return pd.DataFrame(rows, columns=["cohort", "definition", "n", "before", "before_low",
                                       "before_high", "after", "after_low", "after_high",
                                       "change", "change_low", "change_high"])


def verdict(row) -> str:
    """Better, worse, or within noise, from the change's interval."""
    if row["change_low"] > 0:
        return "better"
    if row["change_high"] < 0:
        return "worse"
    return "no clear change"
