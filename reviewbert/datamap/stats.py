"""Dataset cartography's statistics per training review, and its regions.

From the per-epoch probability of the true rating (Swayamdipta et al. 2020, section 2):

- **confidence**: its mean over the epochs the review was seen;
- **variability**: its standard deviation over those epochs (population, ddof 0, as the
  paper's code; 0 when seen in one epoch only);
- **correctness**: the mean over those epochs of the fraction of the epoch's views whose
  argmax was the true rating.

Epochs where a review was not seen (a balanced redraw per epoch) are NaN and left out; a
review never seen has NaN statistics and the region "not seen".

Regions, with fixed thresholds (the paper outlines them by eye; fixed numbers keep two runs
comparable, where quantiles would always call a third of any run ambiguous):

- **ambiguous**: variability >= :data:`AMBIGUOUS_VARIABILITY` (0.2: the true rating's
  probability swings by about 0.4 or more between epochs);
- **easy-to-learn**: not ambiguous, confidence >= :data:`EASY_CONFIDENCE` (0.5: the true
  rating holds most of the probability, whatever the number of classes);
- **hard-to-learn**: not ambiguous, confidence < :data:`EASY_CONFIDENCE`.

With a single recorded epoch every variability is 0, so no review is ambiguous.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from reviewbert.datamap.record import DataMapError

AMBIGUOUS_VARIABILITY = 0.2
EASY_CONFIDENCE = 0.5
EASY, AMBIGUOUS, HARD, UNSEEN = "easy-to-learn", "ambiguous", "hard-to-learn", "not seen"
REGIONS = (EASY, AMBIGUOUS, HARD)


def cartography(probability, correct) -> pd.DataFrame:
    """One row per review: confidence, variability, correctness, epochs_seen, region.

    ``probability`` and ``correct``: [epochs, n] (NaN = not seen that epoch)."""
    p = np.asarray(probability, dtype=np.float64)
    c = np.asarray(correct, dtype=np.float64)
    if p.ndim != 2 or p.shape != c.shape:
        raise DataMapError(f"probability and correct must both be [epochs, reviews]; got "
                           f"{p.shape} and {c.shape}")
    if np.any((p < 0) | (p > 1)) or np.any((c < 0) | (c > 1)):
        raise DataMapError("probabilities and correctness must lie in [0, 1]")
    seen = (~np.isnan(p)).sum(axis=0)
    with warnings.catch_warnings():  # a review never seen: all-NaN column, NaN statistics
        warnings.simplefilter("ignore", RuntimeWarning)
        conf = np.nanmean(p, axis=0) if len(p) else np.full(p.shape[1], np.nan)
        var = np.nanstd(p, axis=0) if len(p) else np.full(p.shape[1], np.nan)
        corr = np.nanmean(c, axis=0) if len(c) else np.full(c.shape[1], np.nan)
    frame = pd.DataFrame({"confidence": conf, "variability": var, "correctness": corr,
                          "epochs_seen": seen.astype(np.int32)})
    frame["region"] = regions(conf, var)
    return frame


def regions(confidence, variability, ambiguous_variability: float = AMBIGUOUS_VARIABILITY,
            easy_confidence: float = EASY_CONFIDENCE) -> np.ndarray:
    """Each review's region (see the module docstring); NaN statistics: "not seen"."""
    conf, var = np.asarray(confidence, dtype=float), np.asarray(variability, dtype=float)
    out = np.where(var >= ambiguous_variability, AMBIGUOUS,
                   np.where(conf >= easy_confidence, EASY, HARD)).astype(object)
    out[np.isnan(conf) | np.isnan(var)] = UNSEEN
    return out


def region_counts(frame: pd.DataFrame) -> dict[str, int]:
    """{region: reviews}, the three regions first, "not seen" only when there are some."""
    counts = frame["region"].value_counts()
    out = {r: int(counts.get(r, 0)) for r in REGIONS}
    if counts.get(UNSEEN, 0):
        out[UNSEEN] = int(counts[UNSEEN])
    return out
