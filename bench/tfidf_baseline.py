"""TF-IDF (1-2-grams) + logistic regression on a checkpoint's own balanced splits.

The yardstick of ../shared/data/README.md, rebuilt on exactly the train/test split
a ReviewBERT checkpoint used (read from its reviewbert.json), so the two can be
compared row for row:

    python bench/tfidf_baseline.py --checkpoint checkpoints/demo [--json]

Prints the same four metrics as `python -m reviewbert evaluate`, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from reviewbert.data import splits_from_meta  # noqa: E402
from reviewbert.model.checkpoint import checkpoint_info
from reviewbert.model.labels import get_scheme  # noqa: E402
from reviewbert.model.metrics import compute_metrics  # noqa: E402

C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _fit(texts, labels, C: float, class_weight: str | None = None):
    clf = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, strip_accents="unicode"),
        LogisticRegression(C=C, max_iter=2000, class_weight=class_weight),
    )
    return clf.fit(texts, labels)


def select_settings(train, validation, C: float | None = None):
    """((C, class_weight), validation accuracy of every pair tried): C from C_GRID (or the
    one given) and, only where the training classes are imbalanced, class_weight None or
    "balanced"; the pair with the best validation accuracy wins."""
    counts = Counter(e.label for e in train)
    weights = [None] if len(set(counts.values())) <= 1 else [None, "balanced"]
    train_x, train_y = [e.text for e in train], [e.label for e in train]
    val_x, val_y = [e.text for e in validation], [e.label for e in validation]
    val_acc = {}
    for w in weights:
        for c in ([C] if C else C_GRID):
            m = _fit(train_x, train_y, c, w)
            val_acc[(c, w)] = float((m.predict(val_x) == val_y).mean())
    return max(val_acc, key=val_acc.get), val_acc


def run(checkpoint: str, data_dir: str | None = None, C: float | None = None) -> dict:
    info = checkpoint_info(checkpoint)
    scheme = get_scheme(info.meta.get("labels", info.scheme.num_labels))
    t0 = time.time()
    splits = splits_from_meta(info.meta, data_dir=data_dir)
    # A fair baseline gets its own tuning: C is chosen on the validation split, then
    # the model is refitted on train+validation (it has no early stopping to spend it on).
    # Where the checkpoint trained on every review (class_balance resample/weighted), the
    # training split is imbalanced and validation/test are balanced: the baseline then
    # also tries sklearn's class_weight="balanced" (what "weighted" does), chosen on
    # validation like C, so it is not handicapped by a bias toward 5 stars.
    (C, weight), val_acc = select_settings(splits.train, splits.validation, C)
    fit_rows = splits.train + splits.validation
    clf = _fit([e.text for e in fit_rows], [e.label for e in fit_rows], C, weight)
    probs = clf.predict_proba([e.text for e in splits.test])
    m = compute_metrics([e.label for e in splits.test], probs, scheme.num_labels)
    by_c = {f"{c}" + ("" if w is None else f", class_weight={w}"): a
            for (c, w), a in val_acc.items()}
    return {"model": "tfidf-1-2gram+logreg", "checkpoint": str(info.path), "C": C,
            "class_weight": weight, "validation_accuracy_by_C": by_c,
            "n_train": len(fit_rows), "n_test": len(splits.test),
            "seconds": round(time.time() - t0, 1), "test": m}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="checkpoints/demo")
    ap.add_argument("--data-dir", default=None, help="folder holding the checkpoint's data files")
    ap.add_argument("--C", type=float, default=None,
                    help="inverse regularisation strength (default: best on validation of %s)" % (C_GRID,))
    args = ap.parse_args(argv)
    res = run(args.checkpoint, args.data_dir, args.C)
    t = res["test"]
    print(f"TF-IDF baseline on {res['n_test']} test reviews (trained on {res['n_train']}):", file=sys.stderr)
    for k in ("accuracy", "relaxed_accuracy", "auc", "loss"):
        if t.get(k) is not None:
            print(f"  {k:17s} {t[k]:.4f}", file=sys.stderr)
    print(json.dumps(res, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
