"""Which reviews go into which optimizer step: length-grouped, class-mixed batches, and
the fresh balanced draw of ``class_balance="resample"``.

Both orders are pure functions of (seed, epoch), so a resumed run replays the same
epoch and skips the batches it already did.
"""
from __future__ import annotations

import numpy as np
from torch.utils.data import Sampler


def balanced_draw(labels, per_class: int, seed: int, epoch: int) -> np.ndarray:
    """The training reviews of one epoch under ``class_balance="resample"``: ``per_class``
    indices of each class, a pure function of (labels, seed, epoch), so a resumed run
    draws the same ones.

    Each class walks through seeded permutations of its reviews, ``per_class`` at a
    time: a class with m reviews shows m // per_class disjoint draws before any review
    comes back (then a new permutation). The rarest class (m == per_class) is all of
    it every epoch. Indices come out by class, in draw order.
    """
    labels = np.asarray(labels)
    out = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        per_cycle = max(1, len(members) // per_class)
        cycle, slot = divmod(int(epoch), per_cycle)
        order = np.random.default_rng([int(seed), int(c), cycle, 0x7E5A]).permutation(len(members))
        out.append(members[order[slot * per_class:(slot + 1) * per_class]])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


class LengthGroupedSampler(Sampler[int]):
    """Indices in a random order where consecutive batches have similar lengths.

    The order is a pure function of (seed, epoch): a resumed run replays the same
    epoch and skips the batches it already did. Set ``.epoch`` before iterating.
    ``group`` = batch_size * num_processes, the samples of one optimizer step
    across all processes, so every process gets a batch of similar length.

    With ``labels``, each step also mixes the classes. Review length goes with
    the rating (1-star reviews run longer than 5-star ones), so batches of
    neighbours in plain length order are mostly one class, and a run of such
    steps pulls the classifier from class to class: after one epoch on 700
    reviews that cost ~3 accuracy points against random batches of the same size
    (bench/train_throughput.py). Here a mega-batch is ordered by each review's
    length *rank within its class* (0 = shortest of its class ... 1 = longest),
    so a step takes the classes in proportion, each at a similar length quantile:
    nearly the padding saving, without the class runs.

    With ``resample_per_class`` (``class_balance="resample"``, needs ``labels``) an
    epoch orders only :func:`balanced_draw`'s reviews for that epoch, not all of them.
    """

    def __init__(self, lengths: list[int], group: int, seed: int, grouped: bool = True,
                 mega_batches: int = 50, labels: list[int] | None = None,
                 resample_per_class: int | None = None):
        self.lengths, self.group, self.seed = lengths, group, seed
        self.grouped, self.mega = grouped, mega_batches
        self.labels = None if labels is None else np.asarray(labels)
        self.per_class = resample_per_class
        if self.per_class is not None and self.labels is None:
            raise ValueError("resampling needs the labels")
        self.epoch = 0

    def __len__(self):
        if self.per_class is None:
            return len(self.lengths)
        return self.per_class * len(np.unique(self.labels))

    def _epoch_order(self, rng: np.random.Generator) -> np.ndarray:
        """This epoch's reviews in a random order: all of them, or the balanced draw."""
        if self.per_class is None:
            return rng.permutation(len(self.lengths))
        drawn = balanced_draw(self.labels, self.per_class, self.seed, self.epoch)
        return drawn[rng.permutation(len(drawn))]

    def _by_length(self, part: np.ndarray) -> np.ndarray:
        lengths = np.asarray(self.lengths)[part]
        if self.labels is None:
            return part[np.argsort(-lengths, kind="stable")]
        key = np.zeros(len(part))
        labels = self.labels[part]
        for c in np.unique(labels):
            members = np.flatnonzero(labels == c)
            ranks = np.argsort(np.argsort(-lengths[members], kind="stable"), kind="stable")
            key[members] = (ranks + 0.5) / len(members)
        return part[np.argsort(key, kind="stable")]

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        idx = self._epoch_order(rng)
        if self.grouped:
            size = self.group * self.mega
            idx = np.concatenate([self._by_length(idx[i:i + size])
                                  for i in range(0, len(idx), size)] or [idx])
            steps = [idx[i:i + self.group] for i in range(0, len(idx), self.group)]
            # sorted mega-batches would run long->short; shuffle the steps so the
            # model does not see a length (and so label) trend inside an epoch.
            # A short last step stays last.
            full = [s for s in steps if len(s) == self.group]
            tail = steps[len(full):]
            idx = np.concatenate([full[i] for i in rng.permutation(len(full))] + tail) \
                if steps else idx
        return iter(idx.tolist())

