"""Nearest neighbours in the model's own vector space, and how far they agree with it.

"The model calls this 4 stars because its neighbours are 4s": for a review, its
``k`` nearest reviews of the split by cosine similarity of their sentence vectors
(``analysis/embeddings.py``), with their true ratings and predictions, and the
**agreement**: the share of those neighbours whose *true* rating is the review's
*predicted* one. Averaged over the split, agreement says how much the predictions
follow the neighbourhoods the model itself built; **k-NN accuracy** (each review's
true rating guessed by the majority of its neighbours' true ratings, leave-one-out)
says how well those neighbourhoods separate the ratings, without the classifier head.

Search is exact and brute force: every cosine similarity as one matrix product of the
unit vectors (torch, in row blocks of at most 64 MB), then ``torch.topk``. The issue
allowed scikit-learn's ``NearestNeighbors`` or an exact matrix product; the product is
several times quicker than scikit-learn's brute cosine search, and it is what the Map
tab's first open waits for (bench/split_map.py times that first open).
``tests/unit/test_split_map.py`` checks it against a plain double loop and against
``NearestNeighbors``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

K = 10
BLOCK_BYTES = 64 << 20


def _unit(x):
    """A float32 torch tensor of the rows scaled to unit length (zero rows stay zero)."""
    import torch
    a = np.asarray(x, dtype=np.float32)
    if not a.flags.writeable:     # a shared, read-only array: torch would warn (and may not write)
        a = a.copy()
    t = torch.as_tensor(a)
    return t / t.norm(dim=1, keepdim=True).clamp(min=1e-12)


def _top(x, q, k: int, own=None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``x`` most similar to each row of ``q`` (both unit), nearest
    first, ties by row number; ``own[j]`` (a row of ``x``) is left out of row j's."""
    import torch
    step = max(1, BLOCK_BYTES // (4 * max(len(x), 1)))
    out_i, out_s = [], []
    with torch.no_grad():
        for a in range(0, len(q), step):
            sim = q[a:a + step] @ x.T
            if own is not None:
                rows = torch.arange(sim.shape[0])
                sim[rows, torch.as_tensor(own[a:a + step])] = -torch.inf
            vals, idx = torch.topk(sim, k, dim=1)
            out_i.append(idx.numpy())
            out_s.append(vals.double().numpy())
    idx, sim = np.concatenate(out_i), np.concatenate(out_s)
    order = np.lexsort((idx, -sim), axis=1)     # nearest first; equal similarity: lower row
    return np.take_along_axis(idx, order, 1), np.take_along_axis(sim, order, 1)


def nearest(vectors, queries=None, *, k: int = K, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(indices [m, k], cosine similarities [m, k]), nearest first.

    Either ``queries`` (vectors from outside the split, e.g. the Predict page's review)
    or ``rows`` (rows of the split; each is left out of its own neighbours). Neither:
    every row of the split."""
    x = _unit(vectors)
    n = len(x)
    if queries is not None:
        q = _unit(np.atleast_2d(np.asarray(queries, dtype=np.float32)))
        if n == 0:
            return np.zeros((len(q), 0), np.int64), np.zeros((len(q), 0))
        return _top(x, q, min(k, n))
    rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((len(rows), 0), np.int64), np.zeros((len(rows), 0))
    return _top(x, x[rows], k, own=rows)


def agreement(neighbour_labels, predicted) -> np.ndarray:
    """Per review, the share of its neighbours whose true class is its predicted class."""
    nl = np.atleast_2d(np.asarray(neighbour_labels))
    return (nl == np.asarray(predicted).reshape(-1, 1)).mean(axis=1)


def majority(neighbour_labels, num_classes: int) -> np.ndarray:
    """Each row's most common class (a tie goes to the class of the nearest neighbour
    among the tied ones: the j-th nearest votes 1 + 2^-(j+2), and one power of 2
    outweighs all the smaller ones together, which stay below one whole vote)."""
    nl = np.atleast_2d(np.asarray(neighbour_labels, dtype=np.int64))
    k = nl.shape[1]
    votes = np.zeros((len(nl), num_classes))
    weights = 1.0 + 0.5 ** (np.arange(k) + 2)
    for j in range(k):
        np.add.at(votes, (np.arange(len(nl)), nl[:, j]), weights[j])
    return votes.argmax(axis=1)


@dataclass
class SplitNeighbours:
    idx: np.ndarray            # [n, k] every review's neighbours
    sim: np.ndarray            # [n, k] their cosine similarities
    agreement: np.ndarray      # [n] share of neighbours whose true class = the prediction
    knn_pred: np.ndarray       # [n] majority true class of the neighbours
    k: int

    @property
    def mean_agreement(self) -> float:
        return float(self.agreement.mean()) if len(self.agreement) else float("nan")

    def knn_accuracy(self, y) -> float:
        return float((self.knn_pred == np.asarray(y)).mean()) if len(y) else float("nan")

    def knn_agrees_with_model(self, pred) -> float:
        """Share of reviews whose neighbours' majority is the model's own prediction."""
        return float((self.knn_pred == np.asarray(pred)).mean()) if len(pred) else float("nan")


def split_neighbours(vectors, y, pred, num_classes: int, k: int = K) -> SplitNeighbours:
    idx, sim = nearest(vectors, k=k)
    y = np.asarray(y)
    return SplitNeighbours(idx, sim, agreement(y[idx], pred), majority(y[idx], num_classes),
                           idx.shape[1])
