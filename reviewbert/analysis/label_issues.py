"""Reviews whose star rating is probably wrong, found with cleanlab.

Amazon ratings are noisy: a 1-star "great phone, but shipping took a month" is
common, and a model that calls it 4 stars is not the one making the mistake.
cleanlab's ``find_label_issues`` (confident learning) estimates, from the model's
out-of-sample probabilities, how often each given class is really another, and
flags the reviews most likely mislabelled; ``get_label_quality_scores`` gives
every review a score in [0, 1] (low = the given rating is doubtful).

The probabilities must be held out: the test split was never trained on, so the
checkpoint's probabilities on it qualify; on training data cleanlab would see
memorised labels and flag almost nothing. Nothing here trains or changes a model.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reviewbert.model.metrics import compute_metrics

RANK_BY = "self_confidence"    # cleanlab's default score: the probability of the given label


@dataclass
class LabelIssues:
    ranked: np.ndarray          # rows flagged by cleanlab, most likely mislabelled first
    quality: np.ndarray         # [n] label-quality score of every review (0..1, low = doubtful)
    metrics_all: dict           # the four metrics on every review
    metrics_clean: dict         # ... on the reviews cleanlab did not flag
    n: int

    @property
    def flagged(self) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[self.ranked] = True
        return mask

    @property
    def count(self) -> int:
        return int(len(self.ranked))

    def table(self, preds, top: int | None = None) -> pd.DataFrame:
        """The flagged reviews, ranked: text, given and predicted class, scores."""
        rows = self.ranked if top is None else self.ranked[:top]
        f = preds.frame.iloc[rows]
        probs = preds.probs[rows]
        given = preds.y[rows]
        names = preds.names
        return pd.DataFrame({
            "rank": np.arange(1, len(rows) + 1),
            "row": rows,
            "given rating": [names[i] for i in given],
            "predicted": [names[i] for i in probs.argmax(axis=1)],
            "label quality": np.round(self.quality[rows], 4),
            "p(given)": np.round(probs[np.arange(len(rows)), given], 4),
            "p(predicted)": np.round(probs.max(axis=1), 4),
            "text": f["text"].to_numpy(),
        })


def find_issues(preds) -> LabelIssues:
    """cleanlab over a :class:`~reviewbert.analysis.predictions.SplitPredictions`.

    Raises ValueError when cleanlab cannot run (e.g. a class with no review).
    """
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    y, probs, k = preds.y, preds.probs, preds.scheme.num_labels
    present = np.bincount(y, minlength=k)
    if (present == 0).any():
        missing = [preds.names[i] for i in np.flatnonzero(present == 0)]
        raise ValueError(f"cleanlab needs every class in the split; missing: {', '.join(missing)}")
    probs = probs / probs.sum(axis=1, keepdims=True)
    # n_jobs=1: cleanlab's default forks a process pool, unwelcome inside Streamlit's server
    ranked = np.asarray(find_label_issues(y, probs, return_indices_ranked_by=RANK_BY,
                                          n_jobs=1), dtype=np.int64)
    quality = np.asarray(get_label_quality_scores(y, probs, method=RANK_BY), dtype=float)
    keep = np.ones(len(y), dtype=bool)
    keep[ranked] = False
    return LabelIssues(ranked, quality, compute_metrics(y, probs, k),
                       compute_metrics(y[keep], probs[keep], k), int(len(y)))
