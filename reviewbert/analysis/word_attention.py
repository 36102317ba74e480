"""Per-rating [CLS] attention over a whole split: the seed's §6.2, with every review
of each rating instead of one.

One batched pass with attentions (``evaluate.predict_probs`` with ``on_batch``; the
model must use eager attention, like the Predictor's) keeps, for every review and
layer, the mean-of-heads [CLS] row, merged into words exactly as the main page's
views do (``attention.merge_words`` sums a word's pieces, ``attention.drop_special``
removes [CLS]/[SEP] and renormalises). The result is cached beside the predictions
(``attention.parquet``; format in ``analysis/cache.py``).

Aggregation (:func:`top_words`), per rating and layer: a word's score in a review is
the attention it got there (summed over its occurrences); its score for the rating
is the mean over the reviews of that rating that contain it; its frequency is the
number of those reviews. Words in fewer than ``min_count`` reviews are left out, so
one odd review cannot top the chart.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Callable

import numpy as np
import pandas as pd
import torch
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from reviewbert.analysis import cache
from reviewbert.model import attention
from reviewbert.model.batch_predict import predict_in_order

BATCH_SIZE = 16     # attentions are [layers, batch, heads, T, T]: 16 x 128 tokens ~ 75 MB in fp32


def layer_columns(n_layers: int) -> list[str]:
    return [f"layer_{i + 1}" for i in range(n_layers)]


def _word_ids(tokenizer, texts: list[str], max_length: int):
    """Per review: (word id of each kept token, None for specials; the words' text)."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_length,
                    return_offsets_mapping=True, return_attention_mask=False,
                    return_token_type_ids=False)
    out = []
    for i, text in enumerate(texts):
        wids = enc.word_ids(i)
        spans: dict[int, list[int]] = {}
        for w, (s, e) in zip(wids, enc["offset_mapping"][i]):
            if w is not None:
                lo_hi = spans.setdefault(w, [s, e])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], s), max(lo_hi[1], e)
        words = {w: text[s:e] for w, (s, e) in spans.items()}
        out.append((wids, words))
    return out


def attention_pass(model, tokenizer, texts: list[str], *, max_length: int,
                   precision: str = "fp32", batch_size: int = BATCH_SIZE,
                   progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    """The long table of ``attention.parquet``: review, word, layer_1..layer_L."""
    rows: list[np.ndarray] = []         # [layers, tokens] per review, in scoring order

    def keep_cls_rows(batch, out):
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        # [layers, batch, heads, query, key] -> mean of heads, [CLS] query: [batch, layers, key]
        # (a pruned layer with no head left has none to average: zeros)
        cls = torch.stack([a[:, :, 0, :].float().mean(dim=1) if a.shape[1]
                           else a.new_zeros(a.shape[0], a.shape[-1]).float()
                           for a in out.attentions], dim=1)
        cls = cls.cpu().numpy()
        rows.extend(cls[b, :, :n] for b, n in enumerate(lengths))

    _, _, order = predict_in_order(model, tokenizer, texts, max_length=max_length,
                                   batch_size=batch_size, precision=precision,
                                   progress=progress, on_batch=keep_cls_rows)
    per_review: list[np.ndarray | None] = [None] * len(texts)
    for j, i in enumerate(order):
        per_review[i] = rows[j]
    words = _word_ids(tokenizer, texts, max_length)
    n_layers = rows[0].shape[0] if rows else 0
    review_col, word_col, values = [], [], []
    for i, (att, (wids, text_of)) in enumerate(zip(per_review, words)):
        if len(wids) != att.shape[1]:
            raise RuntimeError(f"review {i}: {att.shape[1]} attention columns for "
                               f"{len(wids)} tokens")
        merged, cols = attention.merge_words(att, wids)
        special = np.array([c is None for c in cols], dtype=bool)
        scores = attention.drop_special(merged, special)              # [layers, words]
        kept = [c for c in cols if c is not None]
        review_col.extend([i] * len(kept))
        word_col.extend(text_of[c].lower() for c in kept)
        values.append(scores.T)
    frame = pd.DataFrame({"review": np.asarray(review_col, dtype=np.int32),
                          "word": word_col})
    mat = np.concatenate(values).astype(np.float32) if values else np.zeros((0, n_layers), np.float32)
    for li, col in enumerate(layer_columns(n_layers)):
        frame[col] = mat[:, li]
    return frame


def word_attention(preds, model, tokenizer, *, batch_size: int = BATCH_SIZE,
                   progress: Callable[[int], None] | None = None,
                   use_cache: bool = True) -> pd.DataFrame:
    """The per-word [CLS] attention of ``preds``' reviews, from its cache folder when
    computed before, else computed (same precision and max_length as the predictions)
    and stored there."""
    if use_cache and preds.folder is not None:
        got = cache.read_attention(preds.folder)
        if got is not None:
            return got[0]
    t0 = time.perf_counter()
    precision = preds.meta.get("precision", "fp32")
    frame = attention_pass(model, tokenizer, preds.frame["text"].tolist(),
                           max_length=int(preds.meta.get("max_length") or 128),
                           precision=precision, batch_size=batch_size, progress=progress)
    if use_cache and preds.folder is not None:
        try:
            cache.write_attention(preds.folder, frame, {
                "layers": len(layer_columns_of(frame)),
                "heads": int(model.config.num_attention_heads), "precision": precision,
                "seconds": round(time.perf_counter() - t0, 3),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        except OSError:
            pass    # not kept; still shown
    return frame


def layer_columns_of(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("layer_")]


# BERT's tokenizer splits "don't" into "don", "'", "t": the pieces are stop-words too
CONTRACTION_PIECES = frozenset("don didn doesn isn wasn aren weren couldn wouldn shouldn won "
                               "haven hasn hadn ve ll re".split())


def is_shown_word(word: str, hide_stopwords: bool) -> bool:
    """False for what "hide stop-words and punctuation" hides: scikit-learn's English
    stop-words, contraction pieces, single letters and words without a letter or digit."""
    if not hide_stopwords:
        return True
    if not any(ch.isalnum() for ch in word) or (len(word) == 1 and word.isalpha()):
        return False
    return word not in ENGLISH_STOP_WORDS and word not in CONTRACTION_PIECES


def top_words(att: pd.DataFrame, classes, layer: int, num_classes: int, *, min_count: int = 5,
              top_k: int = 10, hide_stopwords: bool = True) -> dict[int, pd.DataFrame]:
    """{class: DataFrame(word, attention, reviews)} with the ``top_k`` words of highest
    mean [CLS] attention in ``layer`` (0-based) among reviews of that class.

    ``classes[i]`` is review i's class (true or predicted, as the caller chooses).
    """
    col = layer_columns_of(att)[layer]
    classes = np.asarray(classes)
    df = att[["review", "word", col]]
    if hide_stopwords:
        df = df[[is_shown_word(w, True) for w in df["word"]]]
    per_review = df.groupby(["review", "word"], sort=False)[col].sum().reset_index()
    per_review["class"] = classes[per_review["review"].to_numpy()]
    stats = (per_review.groupby(["class", "word"])[col]
             .agg(attention="mean", reviews="count").reset_index())
    stats = stats[stats["reviews"] >= min_count]
    out = {}
    for c in range(num_classes):
        part = stats[stats["class"] == c].sort_values(["attention", "reviews"],
                                                      ascending=[False, False])
        out[c] = part.head(top_k)[["word", "attention", "reviews"]].reset_index(drop=True)
    return out


def example_rows(preds) -> dict[int, int | None]:
    """Per class: the row of its most confident correct prediction (None if it has none)."""
    out = {}
    conf = preds.confidence
    for c in range(preds.scheme.num_labels):
        rows = np.flatnonzero((preds.y == c) & preds.correct)
        out[c] = int(rows[np.argmax(conf[rows])]) if len(rows) else None
    return out
