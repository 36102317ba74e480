"""Nearest neighbours in the model's own vector space, and how far they agree with it.

"The model calls this 4 stars because its neighbours are 4s": for a review, its
``k`` nearest reviews of the split by cosine similarity of their sentence vectors
(``analysis/embeddings.py``), with their true ratings and predictions, and the
**agreement**: the share of those neighbours whose *true* rating is the review's
*predicted* one. Averaged over the split, agreement says how much the predictions
follow the neighbourhoods the model itself built; **k-NN accuracy** (each review's
true rating guessed by the majority of its neighbours' true ratings, leave-one-out)
says how well those neighbourhoods separate the ratings, without the classifier head.

Search is scikit-learn's ``NearestNeighbors`` (exact, brute force, cosine metric);
``tests/unit/test_split_map.py`` checks it against a plain double loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

K = 10


def _index(vectors):
    from sklearn.neighbors import NearestNeighbors
    x = np.asarray(vectors, dtype=np.float32)
    return NearestNeighbors(metric="cosine", algorithm="brute").fit(x)


def nearest(vectors, queries=None, *, k: int = K, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(indices [m, k], cosine similarities [m, k]), nearest first.

    Either ``queries`` (vectors from outside the split, e.g. the Predict page's review)
    or ``rows`` (rows of the split; each is left out of its own neighbours). Neither:
    every row of the split."""
    x = np.asarray(vectors, dtype=np.float32)
    n = len(x)
    if queries is not None:
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        k = min(k, n)
        dist, idx = _index(x).kneighbors(q, n_neighbors=k)
        return idx, 1.0 - dist
    rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    k = min(k, n - 1)
    dist, idx = _index(x).kneighbors(x[rows], n_neighbors=k + 1)
    out_i = np.empty((len(rows), k), dtype=np.int64)
    out_s = np.empty((len(rows), k), dtype=np.float64)
    for j, r in enumerate(rows):
        keep = idx[j] != r
        if keep.all():          # a duplicate vector pushed the row itself out: drop the last
            keep[-1] = False
        out_i[j], out_s[j] = idx[j][keep][:k], 1.0 - dist[j][keep][:k]
    return out_i, out_s


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
