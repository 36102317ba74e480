"""What the map shows, in plain words, backed by numbers measured in the vectors
themselves (the projection's *input* space), not read off the picture.

- **neighbour purity**: for the reviews of each true rating, the share of their
  nearest neighbours that have each true rating ([k, k], rows sum to 1). A rating
  whose reviews mostly neighbour their own "stands apart"; one whose neighbours are
  mostly other ratings "overlaps" them.
- **k-NN accuracy**: each review's rating guessed by the majority of its neighbours'
  ratings (leave-one-out), against the classifier's own accuracy and chance.
- **silhouette** by true rating (scikit-learn, cosine; on a seeded sample of at most
  3,000 reviews): near 1 compact, separate clusters; near 0 overlapping ones.
- **where the errors sit**: among the model's mistakes, the share whose neighbours'
  majority is the (wrong) class the model predicted. A high share says the mistakes
  sit in the other rating's region of the model's own space: the review reads like
  that rating (or its rating is noisy), rather than the head misreading a clear vector.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reviewbert.analysis.neighbours import SplitNeighbours
from reviewbert.viz.markdown import md_escape

SILHOUETTE_SAMPLE = 3000
APART = 0.5         # a rating "stands apart" when at least half its neighbours share it


@dataclass
class MapReading:
    purity: np.ndarray            # [k, k] share of class-i reviews' neighbours in class j
    knn_accuracy: float
    model_accuracy: float
    chance: float                 # accuracy of always guessing the most common rating
    silhouette: float | None
    silhouette_per_class: list    # mean silhouette of each true class (None if absent)
    mean_agreement: float         # neighbours whose true rating = the prediction, mean
    errors_in_predicted_region: float | None
    k: int
    text: str = ""                # Markdown (class names escaped)
    plain: str = ""               # the same as plain text


def purity_matrix(y, neighbour_idx, num_classes: int) -> np.ndarray:
    y = np.asarray(y)
    nl = y[np.asarray(neighbour_idx)]
    out = np.zeros((num_classes, num_classes))
    for c in range(num_classes):
        rows = nl[y == c]
        if len(rows):
            out[c] = np.bincount(rows.ravel(), minlength=num_classes) / rows.size
    return out


def silhouettes(vectors, y, num_classes: int, seed: int = 0):
    """(overall, per class) silhouette by true class, cosine, on a seeded sample."""
    from sklearn.metrics import silhouette_samples
    y = np.asarray(y)
    if len(np.unique(y)) < 2 or len(y) < 3:
        return None, [None] * num_classes
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(y), size=min(len(y), SILHOUETTE_SAMPLE), replace=False)
    s = silhouette_samples(np.asarray(vectors, dtype=np.float32)[idx], y[idx], metric="cosine")
    per = [float(s[y[idx] == c].mean()) if (y[idx] == c).any() else None
           for c in range(num_classes)]
    return float(s.mean()), per


def read_map(vectors, y, pred, names, nb: SplitNeighbours) -> MapReading:
    y, pred = np.asarray(y), np.asarray(pred)
    k = len(names)
    wrong = y != pred
    sil, per = silhouettes(vectors, y, k)
    r = MapReading(
        purity=purity_matrix(y, nb.idx, k), knn_accuracy=nb.knn_accuracy(y),
        model_accuracy=float((~wrong).mean()) if len(y) else float("nan"),
        chance=float(np.bincount(y, minlength=k).max() / max(len(y), 1)),
        silhouette=sil, silhouette_per_class=per, mean_agreement=nb.mean_agreement,
        errors_in_predicted_region=float((nb.knn_pred[wrong] == pred[wrong]).mean())
        if wrong.any() else None, k=nb.k)
    r.text = reading_text(r, names)
    r.plain = reading_text(r, names, markdown=False)
    return r


def _names(names, idx, markdown: bool = True) -> str:
    items = [md_escape(str(names[i])) if markdown else str(names[i]) for i in idx]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.0%}" if round(lo, 2) == round(hi, 2) else f"{lo:.0%}–{hi:.0%}"


def reading_text(r: MapReading, names, markdown: bool = True) -> str:
    """Markdown, class names escaped (``markdown=False``: plain text): e.g. "1 star and 5
    stars stand apart (…); 2, 3 and 4 stars overlap (…), mostly with …"."""
    b = "**" if markdown else ""
    own = np.diag(r.purity)
    present = [c for c in range(len(names)) if r.purity[c].sum() > 0]
    apart = [c for c in present if own[c] >= APART]
    mixed = [c for c in present if own[c] < APART]
    parts = []
    if apart:
        parts.append(f"{_names(names, apart, markdown)} stand{'s' if len(apart) == 1 else ''} apart "
                     f"({_span(own[apart])} of {'its' if len(apart) == 1 else 'their'} "
                     f"{r.k} nearest neighbours share the rating)")
    if mixed:
        def partner(c):
            return int(np.argmax(np.where(np.arange(len(names)) == c, -1, r.purity[c])))
        pairs = ", ".join(f"{_names(names, [c], markdown)} with {_names(names, [partner(c)], markdown)}"
                          for c in mixed)
        parts.append(f"{_names(names, mixed, markdown)} overlap{'s' if len(mixed) == 1 else ''} "
                     f"({_span(own[mixed])} share the rating; most often {pairs})")
    text = ("; ".join(parts) + ". ") if parts else ""
    text += (f"Guessing each review's rating from its {r.k} neighbours (k-NN, in the model's "
             f"vector space) is right {b}{r.knn_accuracy:.1%}{b} of the time, against "
             f"{r.model_accuracy:.1%} for the classifier and {r.chance:.1%} for always guessing "
             "the most common rating.")
    if r.silhouette is not None:
        shape = ("compact, separate clusters" if r.silhouette >= 0.5 else
                 "loose clusters" if r.silhouette >= 0.2 else "overlapping regions, not clusters")
        text += f" Silhouette by true rating {r.silhouette:.2f}: {shape}."
    text += (f" On average {r.mean_agreement:.0%} of a review's neighbours have the rating the "
             "model predicts for it.")
    if r.errors_in_predicted_region is not None:
        text += (f" {r.errors_in_predicted_region:.0%} of the mistakes sit among reviews of the "
                 "rating the model (wrongly) predicted: they read like that rating to the model.")
    return text


def axis_reading(coords, y, names, markdown: bool = True) -> str:
    """How well the first projected axis orders the reviews by rating (Spearman's ρ with
    the true class, sign-free): PCA's first axis is a straight line through the vectors,
    so a high ρ says the model's space lays the ratings out in order."""
    from scipy.stats import spearmanr
    x = np.asarray(coords)[:, 0]
    y = np.asarray(y)
    if len(np.unique(y)) < 2 or np.ptp(x) == 0:
        return ""
    rho = abs(float(spearmanr(x, y).statistic))
    how = "orders" if rho >= 0.6 else "loosely orders" if rho >= 0.3 else "does not order"
    lo, hi = (md_escape(str(names[0])), md_escape(str(names[-1]))) if markdown else (names[0], names[-1])
    return (f"The first axis {how} the reviews by rating, from {lo} to {hi} "
            f"(Spearman ρ = {rho:.2f} with the true rating).")
