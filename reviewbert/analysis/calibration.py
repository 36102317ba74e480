"""Calibration: does a prediction made with 80 % confidence come true 80 % of the time?

Top-label reliability: each review's confidence is its highest class probability,
and it is "right" when that class is the true one. Confidences are put in
``n_bins`` equal-width bins over [0, 1] (``np.digitize`` on ``np.linspace`` edges:
bin i holds edges[i] <= c < edges[i+1], the last bin also holds 1.0).

Expected calibration error: ECE = sum over bins of (n_bin / n) * |accuracy_bin -
mean confidence_bin|. Written here because scikit-learn has no ECE and its
``calibration_curve`` returns no bin counts, which the ECE and the diagram's
bars need; using it beside our own counts would risk two binnings that disagree
at the edges.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_BINS = 10


@dataclass(frozen=True)
class Reliability:
    edges: np.ndarray        # [n_bins + 1]
    count: np.ndarray        # [n_bins] reviews per bin
    confidence: np.ndarray   # [n_bins] mean confidence per bin (nan when empty)
    accuracy: np.ndarray     # [n_bins] share right per bin (nan when empty)
    ece: float               # expected calibration error, 0..1
    n: int

    @property
    def gap(self) -> np.ndarray:
        """accuracy - confidence per bin: negative = over-confident."""
        return self.accuracy - self.confidence


def reliability(y_true, probs, n_bins: int = N_BINS) -> Reliability:
    y = np.asarray(y_true, dtype=np.int64)
    p = np.asarray(probs, dtype=np.float64)
    conf = p.max(axis=1)
    right = (p.argmax(axis=1) == y).astype(float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.digitize(conf, edges[1:-1])      # 0..n_bins-1; 1.0 falls in the last bin
    count = np.bincount(which, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(which, weights=conf, minlength=n_bins) / count
        acc = np.bincount(which, weights=right, minlength=n_bins) / count
    n = int(len(y))
    filled = count > 0
    ece = float(np.sum(count[filled] / n * np.abs(acc[filled] - mean_conf[filled]))) if n else 0.0
    return Reliability(edges, count, mean_conf, acc, ece, n)
