"""The four numbers the seed report tracks, as pure functions of (y_true, probs).

- ``loss``: mean cross-entropy in nats (``sklearn.metrics.log_loss``).
- ``auc``: macro-averaged one-vs-rest AUC-ROC. ``None`` (with ``auc_note`` saying
  why) when it is undefined, e.g. a split that lacks a class: a class with no
  positives has no ROC curve, and averaging over the others would silently
  change what the number means.
- ``accuracy``: fraction of exact hits, 0..1.
- ``relaxed_accuracy``: fraction within one class of the truth (``|pred - true| <= 1``).
  Only for the 5-star scheme, where classes are ordered stars; ``None`` for 3
  labels (the seed report drops it there too).

The 3-label view of a 5-label model (:func:`three_label_view`) merges its
probabilities into {1, 2}, {3}, {4, 5} stars, the classes of the 3-label scheme,
and scores them with the same functions.

Everything is scikit-learn, imported by the functions: training, the CLI and the bulk
passes import this module, and so does the Predict page's chain (batch_predict), which
never computes a metric and should not wait for scikit-learn's import (scipy's with it).
Nothing here knows about torch or the model.
"""
from __future__ import annotations

import numpy as np

from reviewbert.model.labels import FIVE, THREE


def _as_arrays(y_true, probs, num_labels: int | None):
    y = np.asarray(y_true, dtype=np.int64).reshape(-1)
    # float64 and renormalised: roc_auc_score insists rows sum to 1, and a float32
    # or bf16 softmax is only close to that.
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != y.shape[0]:
        raise ValueError(f"probs must be [n, classes] with n={y.shape[0]}, got {p.shape}")
    k = num_labels or p.shape[1]
    if p.shape[1] != k:
        raise ValueError(f"probs has {p.shape[1]} columns, expected {k}")
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"labels must be in 0..{k - 1}")
    p = p / p.sum(axis=1, keepdims=True)
    return y, p, k


def macro_auc(y_true, probs, num_labels: int | None = None) -> tuple[float | None, str | None]:
    """(macro one-vs-rest AUC, None) or (None, reason) when it is undefined."""
    y, p, k = _as_arrays(y_true, probs, num_labels)
    missing = sorted(set(range(k)) - set(y.tolist()))
    if missing:
        return None, f"undefined: class(es) {missing} absent from this split"
    try:
        from sklearn.metrics import roc_auc_score
        return float(roc_auc_score(y, p, multi_class="ovr", average="macro",
                                   labels=list(range(k)))), None
    except ValueError as e:  # anything else sklearn refuses, reported rather than raised
        return None, f"undefined: {e}"


def relaxed_accuracy(y_true, y_pred, num_labels: int) -> float | None:
    """Share of predictions at most one star off; None unless the 5-star scheme."""
    if num_labels != 5:
        return None
    y, yp = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean(np.abs(yp - y) <= 1)) if y.size else None


def compute_metrics(y_true, probs, num_labels: int | None = None) -> dict:
    """Loss, AUC, accuracy and relaxed accuracy (plus ``n``) for one split.

    ``probs`` are class probabilities ([n, num_labels]); predictions are their argmax.
    """
    y, p, k = _as_arrays(y_true, probs, num_labels)
    if y.size == 0:
        return {"loss": None, "auc": None, "accuracy": None, "relaxed_accuracy": None,
                "n": 0, "auc_note": "undefined: empty split"}
    from sklearn.metrics import accuracy_score, log_loss
    pred = p.argmax(axis=1)
    auc, note = macro_auc(y, p, k)
    out = {
        # eps clipping is sklearn's; labels= keeps it defined when a class is absent
        "loss": float(log_loss(y, p, labels=list(range(k)))),
        "auc": auc,
        "accuracy": float(accuracy_score(y, pred)),
        "relaxed_accuracy": relaxed_accuracy(y, pred, k),
        "n": int(y.size),
    }
    if note:
        out["auc_note"] = note
    return out


def merge_to_three(y_true, probs) -> tuple[np.ndarray, np.ndarray]:
    """5-star labels and probabilities -> the 3-label scheme's (negative = 1-2 stars,
    neutral = 3, positive = 4-5): each merged probability is the sum of its stars'."""
    y, p, _ = _as_arrays(y_true, probs, FIVE.num_labels)
    merge = np.zeros((FIVE.num_labels, THREE.num_labels))
    for star, five_id in FIVE.star_to_id.items():
        merge[five_id, THREE.class_of(star)] = 1.0
    return merge.argmax(axis=1)[y], p @ merge


def three_label_view(y_true, probs) -> dict:
    """Accuracy and macro AUC (plus loss and ``n``) of a 5-label model read as 3 labels."""
    y3, p3 = merge_to_three(y_true, probs)
    m = compute_metrics(y3, p3, THREE.num_labels)
    out = {k: m[k] for k in ("accuracy", "auc", "loss", "n")}
    if m.get("auc_note"):
        out["auc_note"] = m["auc_note"]
    out["classes"] = {name: [int(s) for s in THREE.stars_of(c)] for c, name in enumerate(THREE.names)}
    return out


def confusion(y_true, probs, num_labels: int | None = None) -> list[list[int]]:
    """Confusion matrix as nested lists: row = true class, column = predicted class."""
    from sklearn.metrics import confusion_matrix
    y, p, k = _as_arrays(y_true, probs, num_labels)
    return confusion_matrix(y, p.argmax(axis=1), labels=list(range(k))).tolist()


def format_metrics(m: dict) -> str:
    """One line for the console: ``loss 1.234  auc 0.789  acc 51.2%  relaxed 83.0%``."""
    def pct(v):
        return "n/a" if v is None else f"{100 * v:.1f}%"
    auc = "n/a" if m.get("auc") is None else f"{m['auc']:.3f}"
    loss = "n/a" if m.get("loss") is None else f"{m['loss']:.3f}"
    s = f"loss {loss}  auc {auc}  acc {pct(m.get('accuracy'))}"
    if m.get("relaxed_accuracy") is not None:
        s += f"  relaxed {pct(m['relaxed_accuracy'])}"
    return s


def format_confusion(cm: list[list[int]], names: list[str] | tuple[str, ...]) -> str:
    """A plain-text table, true classes as rows, predictions as columns."""
    w = max(7, *(len(n) for n in names))
    lines = ["true \\ pred".ljust(w) + "".join(n.rjust(w + 1) for n in names)]
    for name, row in zip(names, cm):
        lines.append(name.ljust(w) + "".join(str(v).rjust(w + 1) for v in row))
    return "\n".join(lines)
