"""Pass or fail for each case of an MFT, INV or DIR test, and a test's fail rate with its interval.

Everything is read from class probabilities (arrays [n, classes]), so the rules are
testable without a model. E★ is the expected rating Σ p(class) · value(class), a class's
value being the mean of the stars it covers (5 labels: 1..5; 3 labels: 1.5, 3, 4.5).

- MFT: a case passes when the predicted class's stars overlap its expected range (for 5
  labels a class is one star: it lies inside the range; for 3 labels "negative" covers 1–2
  stars and passes a [1, 1] or [2, 3] range).
- INV: a case fails when the top class changes or |ΔE★| > tolerance.
- DIR up: a case is filtered (not scored) when the original's top class is already the
  highest, and fails when ΔE★ < −tolerance; DIR down mirrors it (the lowest class,
  ΔE★ > +tolerance).

A test's fail rate is failed / (cases − filtered), with a Wilson 95 % interval; nan and
the interval (0, 1) when nothing was scored.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reviewbert.model.labels import LabelScheme

MAX_EXAMPLES = 3


def star_values(scheme: LabelScheme) -> np.ndarray:
    """Each class's value in stars: the mean of the stars it covers."""
    return np.array([float(np.mean(scheme.stars_of(c))) for c in range(scheme.num_labels)])


def expected_stars(probs, scheme: LabelScheme) -> np.ndarray:
    """E★ of each row of ``probs`` [n, classes] (or of one row [classes])."""
    return np.asarray(probs, dtype=np.float64) @ star_values(scheme)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n; (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class TestResult:
    """One test's outcome: counts, fail rate, interval, a few failing examples, every case."""

    __test__ = False            # a name pytest would otherwise try to collect

    name: str
    capability: str
    type: str
    n: int
    filtered: int
    failed: int
    fail_rate: float
    ci_low: float
    ci_high: float
    examples: list[dict] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)

    @property
    def scored(self) -> int:
        """Cases that count: all but the filtered."""
        return self.n - self.filtered


# ------------------------------------------------------------------- the rules
def mft_passes(class_id: int, stars: tuple[int, int], scheme: LabelScheme) -> bool:
    """Whether a prediction of ``class_id`` passes an MFT case expecting ``stars`` [min, max]:
    the class's stars overlap the range (one star each for 5 labels: it lies inside)."""
    low, high = stars
    return any(low <= s <= high for s in scheme.stars_of(int(class_id)))


def mft_status(probs, ranges: Sequence[tuple[int, int]], scheme: LabelScheme) -> list[str]:
    """"pass" or "fail" per case: the top class's stars overlap the case's [min, max]."""
    top = np.asarray(probs).argmax(axis=1)
    return ["pass" if mft_passes(k, r, scheme) else "fail" for k, r in zip(top, ranges)]


def inv_status(orig_probs, probs, scheme: LabelScheme, tol: float) -> list[str]:
    """"pass" or "fail" per case: fails when the top class changes or |ΔE★| > ``tol``."""
    orig_probs, probs = np.asarray(orig_probs), np.asarray(probs)
    delta = expected_stars(probs, scheme) - expected_stars(orig_probs, scheme)
    changed = orig_probs.argmax(axis=1) != probs.argmax(axis=1)
    return ["fail" if c or abs(d) > tol else "pass" for c, d in zip(changed, delta)]


def dir_status(orig_probs, probs, scheme: LabelScheme, tol: float, direction: str) -> list[str]:
    """"pass", "fail" or "filtered" per case (see the module docstring)."""
    orig_probs, probs = np.asarray(orig_probs), np.asarray(probs)
    delta = expected_stars(probs, scheme) - expected_stars(orig_probs, scheme)
    top = orig_probs.argmax(axis=1)
    edge = scheme.num_labels - 1 if direction == "up" else 0
    sign = 1.0 if direction == "up" else -1.0
    return ["filtered" if k == edge else "fail" if sign * d < -tol else "pass"
            for k, d in zip(top, delta)]


# ----------------------------------------------------------------- one test
def _rows(cases, probs, orig_probs, status, scheme: LabelScheme) -> list[dict]:
    """Every case as the drill-down shows it (floats rounded: the cache stays small)."""
    probs = np.asarray(probs)
    e = expected_stars(probs, scheme)
    top = probs.argmax(axis=1) if len(probs) else np.zeros(0, dtype=int)
    if orig_probs is not None:
        orig_probs = np.asarray(orig_probs)
        oe = expected_stars(orig_probs, scheme)
        otop = orig_probs.argmax(axis=1)
    rows = []
    for i, c in enumerate(cases):
        k = int(top[i])
        stars = scheme.stars_of(k)
        row = {"text": c.text, "original": c.original,
               "stars": list(c.stars) if c.stars else None,
               "pred": scheme.names[k], "pred_stars": [stars[0], stars[-1]],
               "e_stars": round(float(e[i]), 4), "orig_pred": None, "orig_e_stars": None,
               "delta": None, "status": status[i]}
        if orig_probs is not None:
            row["orig_pred"] = scheme.names[int(otop[i])]
            row["orig_e_stars"] = round(float(oe[i]), 4)
            row["delta"] = round(float(e[i] - oe[i]), 4)
        rows.append(row)
    return rows


def score_test(test, cases, probs, orig_probs, scheme: LabelScheme) -> TestResult:
    """The :class:`TestResult` of one test (a ``suite.TestSpec``) from its cases' class
    probabilities ``probs`` [n, classes] and, for INV/DIR, their originals' ``orig_probs``."""
    n = len(cases)
    probs = np.asarray(probs, dtype=np.float64).reshape(n, scheme.num_labels)
    if test.type == "MFT":
        orig_probs = None
        status = mft_status(probs, [c.stars for c in cases], scheme)
    else:
        orig_probs = np.asarray(orig_probs, dtype=np.float64).reshape(n, scheme.num_labels)
        status = (inv_status(orig_probs, probs, scheme, test.tol) if test.type == "INV" else
                  dir_status(orig_probs, probs, scheme, test.tol, test.direction))
    rows = _rows(cases, probs, orig_probs, status, scheme)
    return summarize(test.name, test.capability, test.type, rows)


def summarize(name: str, capability: str, type_: str, rows: list[dict]) -> TestResult:
    """A test's counts, fail rate and interval from its rows' statuses."""
    n = len(rows)
    filtered = sum(r["status"] == "filtered" for r in rows)
    failed = sum(r["status"] == "fail" for r in rows)
    scored = n - filtered
    low, high = wilson(failed, scored)
    examples = [r for r in rows if r["status"] == "fail"][:MAX_EXAMPLES]
    return TestResult(name, capability, type_, n, filtered, failed,
                      failed / scored if scored else float("nan"), low, high, examples, rows)
