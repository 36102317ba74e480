"""Two checkpoints' runs of one suite, test by test: both fail rates, their difference and its interval.

The difference's 95 % interval is Newcombe's hybrid score interval (his method 10, 1998),
built from the two Wilson intervals: for d = p_b − p_a,

    low  = d − sqrt((p_b − l_b)² + (u_a − p_a)²)
    high = d + sqrt((u_b − p_b)² + (p_a − l_a)²)

A test is a regression when the whole interval lies above zero: checkpoint b fails it
significantly more often than a.
"""
from __future__ import annotations

import math

from reviewbert.behave.runner import SuiteResult
from reviewbert.behave.scoring import TestResult, wilson

COLUMNS = ("name", "capability", "type", "fail_rate_a", "fail_rate_b", "diff", "diff_low",
           "diff_high", "regression")


def newcombe(k_a: int, n_a: int, k_b: int, n_b: int, z: float = 1.96) -> tuple[float, float, float]:
    """(p_b − p_a, low, high): the difference of two proportions with Newcombe's hybrid
    score interval; nan for all three when either has no trials."""
    if n_a <= 0 or n_b <= 0:
        return math.nan, math.nan, math.nan
    p_a, p_b = k_a / n_a, k_b / n_b
    l_a, u_a = wilson(k_a, n_a, z)
    l_b, u_b = wilson(k_b, n_b, z)
    d = p_b - p_a
    return (d, d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2),
            d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2))


def _row(name: str, a: TestResult | None, b: TestResult | None) -> dict:
    first = a or b
    rate_a = a.fail_rate if a is not None else math.nan
    rate_b = b.fail_rate if b is not None else math.nan
    if a is not None and b is not None:
        d, low, high = newcombe(a.failed, a.scored, b.failed, b.scored)
    else:
        d = low = high = math.nan
    return {"name": name, "capability": first.capability, "type": first.type,
            "fail_rate_a": rate_a, "fail_rate_b": rate_b, "diff": d, "diff_low": low,
            "diff_high": high, "regression": bool(low > 0)}     # nan > 0 is False


def compare(a: SuiteResult, b: SuiteResult):
    """A pandas DataFrame, one row per test (matched by name; a's order, then b's own),
    with the columns of :data:`COLUMNS`; a test only one run has gets nan for the other."""
    import pandas as pd
    by_a = {t.name: t for t in a.tests}
    by_b = {t.name: t for t in b.tests}
    names = list(by_a) + [n for n in by_b if n not in by_a]
    return pd.DataFrame([_row(n, by_a.get(n), by_b.get(n)) for n in names], columns=list(COLUMNS))
