"""Attention arithmetic for the views: [CLS] rows, head averaging, word merging.

Everything takes plain numpy arrays (or a :class:`~reviewbert.model.inference.Prediction`)
and returns plain arrays plus column labels, so it is testable without a model.

Order of operations for a [CLS] view: pick layers → average heads (or pick one) →
take the [CLS] query row → merge wordpieces into words (sum: a word gets all the
attention its pieces got) → drop [CLS]/[SEP] and renormalise each row to 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLS_ROW = 0


def last_layers(num_layers: int, n: int = 6) -> list[int]:
    """The last ``n`` layer indices (all of them when there are fewer)."""
    return list(range(max(0, num_layers - n), num_layers))


def head_average(att: np.ndarray) -> np.ndarray:
    """[layer, head, query, key] → [layer, query, key], the mean over heads.

    A head removed from a pruned checkpoint (``reviewbert heads prune``) is an all-zero
    matrix, which no softmax gives: it is left out of its layer's mean (a layer with no
    head left averages to zeros)."""
    alive = att[:, :, 0, :].any(axis=-1)    # [layer, head]: a softmax row is never all zero
    if alive.all():
        return att.mean(axis=1)
    n = np.maximum(alive.sum(axis=1), 1).astype(att.dtype)
    return att.sum(axis=1) / n[:, None, None]


def select_heads(att: np.ndarray, head: int | None) -> np.ndarray:
    """[layer, head, q, k] → [layer, q, k]: one head, or the head average (``None``)."""
    if head is None:
        return head_average(att)
    if not 0 <= head < att.shape[1]:
        raise ValueError(f"head {head} out of range 0..{att.shape[1] - 1}")
    return att[:, head]


def query_rows(att: np.ndarray, layers: list[int], head: int | None,
               query: int = 0) -> np.ndarray:
    """[layer, head, q, k] → [len(layers), k]: one query's attention row in each of
    ``layers``, one head's or the head average. Sliced before averaging: one row per head
    is read, not the whole [T, T] matrix (a 256-token review's is 12 × 256 × 256)."""
    return select_heads(att[:, :, query:query + 1, :][layers], head)[:, 0, :]


def merge_words(rows: np.ndarray, word_ids: list[int | None]) -> tuple[np.ndarray, list[int | None]]:
    """Sum the key columns of each word's pieces. Special tokens stay their own column.

    ``rows`` is [..., key]. Returns (merged [..., n_columns], column key) where a
    column key is the word index, or ``None`` for a special token (kept in place).
    """
    cols: list[int | None] = []
    groups: list[list[int]] = []
    seen: dict[int, int] = {}
    for t, w in enumerate(word_ids):
        if w is None:
            cols.append(None)
            groups.append([t])
        elif w in seen:
            groups[seen[w]].append(t)
        else:
            seen[w] = len(groups)
            cols.append(w)
            groups.append([t])
    merged = np.stack([rows[..., g].sum(axis=-1) for g in groups], axis=-1)
    return merged, cols


def drop_special(rows: np.ndarray, special: np.ndarray) -> np.ndarray:
    """Remove special-token columns and renormalise each row to sum 1."""
    special = np.asarray(special, dtype=bool)
    kept = rows[..., ~special]
    total = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, total, out=np.zeros_like(kept), where=total > 0)


@dataclass
class ClsView:
    """A [CLS]→token (or →word) matrix ready to draw."""
    values: np.ndarray          # [n_layers, n_columns]
    labels: list[str]           # one per column
    layers: list[int]           # layer index of each row (0-based)
    head: int | None            # None = average of heads
    level: str                  # "token" or "word"
    include_special: bool


def cls_view(pred, layers: list[int] | None = None, head: int | None = None,
             level: str = "token", include_special: bool = True, query: int = CLS_ROW) -> ClsView:
    """[CLS]→token attention for ``layers`` (default: the last six)."""
    if level not in ("token", "word"):
        raise ValueError("level must be 'token' or 'word'")
    att = pred.attentions
    layers = last_layers(att.shape[0]) if layers is None else list(layers)
    rows = query_rows(att, layers, head, query)                  # [n_layers, T]
    return _columns(pred, rows, layers, head, level, include_special)


def heads_view(pred, layer: int, level: str = "token", include_special: bool = True,
               query: int = CLS_ROW) -> ClsView:
    """[CLS]→token attention of every head of one layer: rows = heads."""
    rows = pred.attentions[layer, :, query, :]                    # [H, T]
    return _columns(pred, rows, [layer] * rows.shape[0], None, level, include_special)


def _columns(pred, rows, layers, head, level, include_special) -> ClsView:
    special = np.array([w is None for w in pred.word_ids], dtype=bool)
    if level == "word":
        rows, cols = merge_words(rows, pred.word_ids)
        labels = [pred.words[c] if c is not None else _special_name(pred, i, cols)
                  for i, c in enumerate(cols)]
        special = np.array([c is None for c in cols], dtype=bool)
    else:
        labels = list(pred.tokens)
    if not include_special:
        rows = drop_special(rows, special)
        labels = [lab for lab, s in zip(labels, special) if not s]
    return ClsView(np.asarray(rows, dtype=np.float32), labels, list(layers), head, level,
                   include_special)


def _special_name(pred, col: int, cols: list[int | None]) -> str:
    # Special columns keep their order: the n-th None column is the n-th special token.
    nth = sum(1 for c in cols[:col] if c is None)
    specials = [t for t, w in zip(pred.tokens, pred.word_ids) if w is None]
    return specials[nth] if nth < len(specials) else "[?]"


def word_scores(pred, layer: int, head: int | None = None, query: int = CLS_ROW) -> np.ndarray:
    """[CLS]→word attention for one layer (one head or the average), specials dropped
    and renormalised: one score per word of ``pred.words``, summing to 1."""
    rows = query_rows(pred.attentions, [layer], head, query)[0]
    merged, cols = merge_words(rows, pred.word_ids)
    special = np.array([c is None for c in cols], dtype=bool)
    scores = drop_special(merged, special)
    out = np.zeros(len(pred.words), dtype=np.float32)
    for s, c in zip(scores, [c for c in cols if c is not None]):
        out[c] = s
    return out
