"""A whole split's predictions, computed once (batched, through
``reviewbert.model.batch_predict``) and kept in the prediction cache
(``reviewbert/analysis/cache.py``, where the format is written down).

:func:`predict_split` is the one entry point: the error-analysis page, ``evaluate``,
``report`` and the Predict page's "Only misclassified" sampler all go through it
(or through :func:`lookup`, which never computes).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from reviewbert.analysis import cache, embeddings
from reviewbert.model.batch_predict import predict_in_order
from reviewbert.model.device import resolve_precision
from reviewbert.model.labels import LabelScheme
from reviewbert.model.metrics import compute_metrics

FP32_CHECK = 256
"""bf16 runs re-score this many reviews (a seeded sample) in fp32 and record how
many got the same class: the price of checking is ~10% of a 2,000-review split."""


def planned_reviews(n: int, precision: str, fp32_check: int = FP32_CHECK) -> int:
    """How many reviews :func:`predict_split` will score for ``n`` (the progress total):
    a bf16 run re-scores a sample in fp32."""
    return n + (min(n, fp32_check) if precision == "bf16" else 0)


def prob_columns(k: int) -> list[str]:
    return [f"prob_{i}" for i in range(k)]


@dataclass
class SplitPredictions:
    """Predictions for one set of reviews (columns: see ``analysis/cache.py``)."""
    frame: pd.DataFrame
    scheme: LabelScheme
    meta: dict = field(default_factory=dict)
    folder: Path | None = None          # its cache folder, when it has one
    cached: bool = False                # read from the cache (no forward pass this time)
    vectors: dict = field(default_factory=dict)  # embeddings by name ("cls-L6"), float16 [n, d]

    @property
    def n(self) -> int:
        return len(self.frame)

    @property
    def names(self) -> list[str]:
        return list(self.scheme.names)

    @property
    def y(self) -> np.ndarray:
        return self.frame["label"].to_numpy(np.int64)

    @property
    def pred(self) -> np.ndarray:
        return self.frame["pred"].to_numpy(np.int64)

    @property
    def probs(self) -> np.ndarray:
        return self.frame[prob_columns(self.scheme.num_labels)].to_numpy(np.float64)

    @property
    def correct(self) -> np.ndarray:
        return self.y == self.pred

    @property
    def confidence(self) -> np.ndarray:
        return self.probs.max(axis=1)

    @property
    def n_tokens(self) -> np.ndarray:
        return self.frame["n_tokens"].to_numpy(np.int64)

    def metrics(self) -> dict:
        return compute_metrics(self.y, self.probs, self.scheme.num_labels)


def build_frame(reviews, scheme: LabelScheme, probs: np.ndarray, n_tokens) -> pd.DataFrame:
    k = scheme.num_labels
    stars = np.array([int(r.stars) for r in reviews], dtype=np.int8)
    frame = pd.DataFrame({
        "text": [r.text for r in reviews],
        "stars": stars,
        "label": np.array([scheme.class_of(s) for s in stars], dtype=np.int8),
        "pred": probs.argmax(axis=1).astype(np.int8) if len(probs) else np.zeros(0, np.int8),
    })
    for c, col in enumerate(prob_columns(k)):
        frame[col] = probs[:, c].astype(np.float32) if len(probs) else np.zeros(0, np.float32)
    frame["n_tokens"] = np.asarray(n_tokens, dtype=np.int32)
    frame["source"] = [str(getattr(r, "source", "") or "") for r in reviews]
    return frame


def keys(checkpoint, reviews, max_length: int, precision: str) -> tuple[str, str, str]:
    """(checkpoint sha256, data sha256, cache key)."""
    ck, ds = cache.checkpoint_fingerprint(checkpoint), cache.data_fingerprint(reviews)
    return ck, ds, cache.cache_key(ck, ds, max_length, precision)


def lookup(checkpoint, reviews, scheme: LabelScheme, max_length: int,
           precisions=("bf16", "fp32")) -> SplitPredictions | None:
    """Cached predictions of these very reviews by this very checkpoint, or None. Never computes.

    The first precision in ``precisions`` that is cached wins.
    """
    for precision in precisions:
        _, _, key = keys(checkpoint, reviews, max_length, precision)
        folder = cache.find(checkpoint, key)
        got = cache.read_predictions(folder) if folder is not None else None
        if got is not None:
            return SplitPredictions(got[0], scheme, got[1], folder, cached=True)
    return None


def predict_split(model, tokenizer, checkpoint, reviews, scheme: LabelScheme, *,
                  max_length: int, precision: str = "auto", batch_size: int = 64,
                  progress: Callable[[int], None] | None = None, source: dict | None = None,
                  accelerator=None, use_cache: bool = True,
                  fp32_check: int = FP32_CHECK, embed=None) -> SplitPredictions:
    """Predictions for ``reviews`` (objects with .text, .stars, .source), from the cache
    when this checkpoint already scored these reviews, else computed and cached.

    ``progress(n)`` is told each scored batch's size (a bf16 run then re-scores up to
    ``fp32_check`` reviews in fp32, also reported). Under ``accelerate launch`` every
    process scores its share and only the main process writes the cache.

    A computed pass also keeps each review's sentence vector (``embed``, an
    ``embeddings.EmbeddingSpec``; default the last layer's [CLS]) from the same forward
    pass and stores it beside the predictions; a cached result is returned as it is
    (``embeddings.vectors_for`` computes missing vectors when they are asked for).
    """
    device = accelerator.device if accelerator is not None else model.device
    prec = resolve_precision(precision, device)
    ck, ds, key = keys(checkpoint, reviews, max_length, prec)
    if use_cache:
        folder = cache.find(checkpoint, key)
        got = cache.read_predictions(folder) if folder is not None else None
        if got is not None:
            return SplitPredictions(got[0], scheme, got[1], folder, cached=True)
    texts = [r.text for r in reviews]
    spec = embed or embeddings.DEFAULT
    tap = embeddings.VectorTap(spec, embeddings.n_layers_of(model))
    t0 = time.perf_counter()
    probs, n_tokens, _ = predict_in_order(model, tokenizer, texts, max_length=max_length,
                                          batch_size=batch_size, precision=prec,
                                          accelerator=accelerator, progress=progress, tap=tap)
    seconds = time.perf_counter() - t0
    check = None
    if prec == "bf16" and fp32_check and texts:
        check = _fp32_agreement(model, tokenizer, texts, probs, fp32_check, max_length=max_length,
                                batch_size=batch_size, accelerator=accelerator, progress=progress)
    frame = build_frame(reviews, scheme, probs, n_tokens)
    meta = {"checkpoint": {"path": str(checkpoint), "sha256": ck},
            "data": {"sha256": ds, "n": len(frame), "source": source or {"kind": "reviews"}},
            "labels": list(scheme.names), "max_length": int(max_length), "precision": prec,
            "fp32_check": check, "device": str(device), "seconds": round(seconds, 3),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    folder = None
    main = accelerator is None or accelerator.is_main_process
    if use_cache and main:
        try:
            folder = cache.write_predictions(checkpoint, key, frame, meta)
        except OSError:
            folder = None       # nowhere writable: the result is still good, just not kept
    out = SplitPredictions(frame, scheme, {**meta, "format": cache.FORMAT, "key": key}, folder)
    embeddings.store(out, spec.name(embeddings.n_layers_of(model)), tap.vectors, spec,
                     embeddings.n_layers_of(model), prec, None, use_cache and main)
    if accelerator is not None:
        accelerator.wait_for_everyone()
    return out


def _fp32_agreement(model, tokenizer, texts, probs, n: int, **kw) -> dict:
    """{"n", "agree"}: a seeded sample of ``n`` reviews re-scored in fp32, how many got
    the class of the bf16 pass."""
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(len(texts), size=min(n, len(texts)), replace=False))
    p32, _, _ = predict_in_order(model, tokenizer, [texts[i] for i in idx], precision="fp32", **kw)
    return {"n": int(len(idx)), "agree": int((p32.argmax(1) == probs[idx].argmax(1)).sum())}


def export_frame(preds: SplitPredictions) -> pd.DataFrame:
    """The predictions as a user downloads them (CSV/Parquet): readable class names."""
    f, names = preds.frame, preds.names
    out = pd.DataFrame({
        "text": f["text"].to_numpy(),
        "stars": f["stars"].astype(int).to_numpy(),
        "true_label": [names[i] for i in f["label"]],
        "predicted_label": [names[i] for i in f["pred"]],
        "correct": preds.correct,
        "confidence": np.round(preds.confidence, 6),
    })
    for i, n in enumerate(names):
        out[f"prob {n}"] = f[f"prob_{i}"].astype(float).round(6).to_numpy()
    out["n_tokens"] = f["n_tokens"].astype(int).to_numpy()
    out["source"] = f["source"].to_numpy()
    return out


class ExportWriter:
    """Writes :func:`export_frame` chunks to one CSV or Parquet file (by the suffix:
    ``.parquet``/``.pq`` is Parquet through pyarrow, a streamlit dependency; anything
    else CSV). Chunks go to a temporary sibling, renamed over ``path`` on close: a
    reader never sees half a file, and a 10M-review evaluation never holds it whole."""

    def __init__(self, path):
        self.path = Path(path)
        self.parquet = self.path.suffix.lower() in (".parquet", ".pq")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.writer = None
        self.rows = 0

    def write(self, preds: SplitPredictions) -> None:
        frame = export_frame(preds)
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.tmp, table.schema)
            self.writer.write_table(table)
        else:
            frame.to_csv(self.tmp, index=False, mode="w" if self.rows == 0 else "a",
                         header=self.rows == 0)
        self.rows += len(frame)

    def close(self) -> Path:
        if self.writer is not None:
            self.writer.close()
        if not self.tmp.exists():               # nothing written: an empty file, not none
            self.tmp.touch()
        with open(self.tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.tmp.unlink(missing_ok=True)


def save_export(preds: SplitPredictions, path) -> Path:
    """Write :func:`export_frame` as Parquet (``.parquet``/``.pq``) or CSV (anything else)."""
    w = ExportWriter(path)
    try:
        w.write(preds)
    except BaseException:
        w.abort()
        raise
    return w.close()
