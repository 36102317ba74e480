"""Where the errors are: per class, per (true, predicted) pair, per review length.

Everything is scikit-learn (``confusion_matrix``, ``precision_recall_fscore_support``,
``roc_curve``/``roc_auc_score``) or scipy (Wilson intervals for a bin's accuracy);
this module only arranges their output into tables the page and the report draw.

Review length is ``n_tokens``: wordpieces without [CLS]/[SEP], before truncation,
the count the seed's filter ("reviews under 100 tokens are dropped") used.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support, roc_auc_score, roc_curve

from reviewbert.model.metrics import compute_metrics

SEED_MIN_TOKENS = 100
LENGTH_EDGES = (32, 64, 100)


def confusion(y, pred, num_labels: int) -> np.ndarray:
    """Counts [true, predicted]."""
    return confusion_matrix(y, pred, labels=list(range(num_labels)))


def row_normalised(cm: np.ndarray) -> np.ndarray:
    """Each true class's row as shares (a row with no reviews stays 0)."""
    cm = np.asarray(cm, dtype=float)
    total = cm.sum(axis=1, keepdims=True)
    return np.divide(cm, total, out=np.zeros_like(cm), where=total > 0)


def per_class(y, pred, names) -> pd.DataFrame:
    """Precision, recall, F1 and support per class, then macro and weighted averages."""
    k = len(names)
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=list(range(k)), zero_division=0)
    rows = [{"class": n, "precision": p[i], "recall": r[i], "f1": f[i], "support": int(s[i])}
            for i, n in enumerate(names)]
    for avg in ("macro", "weighted"):
        ap, ar, af, _ = precision_recall_fscore_support(y, pred, labels=list(range(k)),
                                                        average=avg, zero_division=0)
        rows.append({"class": f"{avg} average", "precision": ap, "recall": ar, "f1": af,
                     "support": int(np.sum(s))})
    return pd.DataFrame(rows)


def roc_curves(y, probs, names) -> list[dict]:
    """One-vs-rest ROC per class: {"name", "fpr", "tpr", "auc"}; a class absent from
    the split (or the only one present) has no curve and is left out."""
    y = np.asarray(y)
    probs = np.asarray(probs, dtype=float)
    out = []
    for i, name in enumerate(names):
        pos = y == i
        if pos.all() or not pos.any():
            continue
        fpr, tpr, _ = roc_curve(pos, probs[:, i])
        out.append({"name": name, "fpr": fpr, "tpr": tpr,
                    "auc": float(roc_auc_score(pos, probs[:, i]))})
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def length_bins(n_tokens, correct, max_length: int | None = None,
                edges=LENGTH_EDGES) -> pd.DataFrame:
    """Accuracy per token-count bin, with a 95 % Wilson interval.

    Bins: below edges[0], edges[i]..edges[i+1]-1, ..., and the rest; with
    ``max_length`` the reviews the model saw truncated (more than max_length - 2
    pieces) get a bin of their own.
    """
    n_tokens = np.asarray(n_tokens)
    correct = np.asarray(correct, dtype=bool)
    cut = max_length - 2 if max_length else None
    bounds = [0, *[e for e in edges if cut is None or e <= cut]]
    rows = []
    for i, lo in enumerate(bounds):
        hi = bounds[i + 1] if i + 1 < len(bounds) else (cut + 1 if cut is not None else None)
        mask = (n_tokens >= lo) & ((n_tokens < hi) if hi is not None else True)
        label = f"{lo}–{hi - 1}" if hi is not None else f"≥ {lo}"
        rows.append((label, lo, hi, mask))
    if cut is not None:
        rows.append((f"> {cut} (truncated)", cut + 1, None, n_tokens > cut))
    out = []
    for label, lo, hi, mask in rows:
        n, k = int(mask.sum()), int(correct[mask].sum())
        low, high = _wilson(k, n)
        out.append({"tokens": label, "from": lo, "to": None if hi is None else hi - 1, "n": n,
                    "accuracy": k / n if n else float("nan"), "low": low, "high": high})
    return pd.DataFrame(out)


def seed_filter(y, probs, n_tokens, names, min_tokens: int = SEED_MIN_TOKENS) -> pd.DataFrame:
    """What the seed's "at least ``min_tokens`` tokens" filter changes: the four metrics
    and the class counts for all reviews, the ones it keeps and the ones it drops."""
    y = np.asarray(y)
    probs = np.asarray(probs, dtype=float)
    n_tokens = np.asarray(n_tokens)
    keep = n_tokens >= min_tokens
    rows = []
    for label, mask in (("all reviews", np.ones_like(keep)),
                        (f"≥ {min_tokens} tokens (kept by the seed)", keep),
                        (f"< {min_tokens} tokens (dropped by the seed)", ~keep)):
        m = compute_metrics(y[mask], probs[mask], len(names))
        row = {"reviews": label, "n": int(mask.sum()),
               "share": float(mask.mean()) if len(mask) else float("nan"),
               "accuracy": m["accuracy"], "relaxed_accuracy": m["relaxed_accuracy"],
               "auc": m["auc"], "loss": m["loss"]}
        counts = np.bincount(y[mask], minlength=len(names))
        row.update({f"n {name}": int(c) for name, c in zip(names, counts)})
        rows.append(row)
    return pd.DataFrame(rows)
