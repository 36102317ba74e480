"""The raw record of a data map (dataset cartography, Swayamdipta et al. 2020): each training
review's probability of its true rating, and whether the argmax was right, per epoch.

It comes from the forward pass the training step already makes (the softmax of its
logits, detached: no extra pass). Each batch carries its reviews' indices in the training
split (:class:`IndexedReviews`, :class:`IndexedCollator`), so the record is right whatever
the order: length-grouped batches, a balanced redraw per epoch (reviews not drawn are NaN,
reviews drawn twice are averaged), Accelerate's per-process shards, a mid-epoch resume.

On the device, one preallocated [3, n] tensor sums (probability, right, seen) per review
with one ``index_add_`` per step; at the epoch's end it is summed over processes, copied
to the CPU once and appended to the run folder's ``datamap.safetensors`` (atomically).
A mid-epoch save of last/ also keeps the sums so far (``last/datamap_partial.safetensors``,
swapped in with the weights), so a resumed run continues the epoch's record.

``datamap.safetensors`` (read by reviewbert/datamap/record.py): ``probability`` and
``correct`` float32 [epochs, n] (NaN: not seen that epoch), ``seen`` int32 [epochs, n]
(times seen that epoch), ``labels`` int64 [n] (true class), ``text_hash`` int64 [n]
(blake2b-64 of each review's text, to align the rows with predictions of the same
reviews); metadata: format, epochs (recorded), epochs_planned, n.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import Dataset

from reviewbert.fsio import atomic_write

FILE = "datamap.safetensors"
PARTIAL = "datamap_partial.safetensors"
FORMAT = "reviewbert-datamap/1"
INDEX_KEY = "review_index"


def text_hashes(texts) -> np.ndarray:
    """blake2b-64 of each text (as data/splits.py hashes reviews), as int64."""
    out = np.empty(len(texts), dtype=np.uint64)
    for i, t in enumerate(texts):
        out[i] = int.from_bytes(hashlib.blake2b(str(t).encode("utf-8", "surrogatepass"),
                                                digest_size=8).digest(), "little")
    return out.view(np.int64)


class IndexedReviews(Dataset):
    """Item i of ``base`` with i appended: (ids, label, i)."""

    def __init__(self, base):
        self.base = base
        self.lengths = base.lengths

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return (*self.base[i], i)


class IndexedCollator:
    """``base``'s batch plus ``review_index``: the rows of the training split."""

    def __init__(self, base):
        self.base = base

    def __call__(self, batch):
        out = self.base([item[:-1] for item in batch])
        out[INDEX_KEY] = torch.tensor([item[-1] for item in batch], dtype=torch.long)
        return out


class DataMapRecorder:
    """Per-review sums of the current epoch on the device; finished epochs on the CPU."""

    def __init__(self, out_dir, labels, hashes: np.ndarray, device, epochs_planned: int):
        self.path = Path(out_dir) / FILE
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=device)
        self.hashes = np.asarray(hashes, dtype=np.int64)
        self.sums = torch.zeros(3, len(self.hashes), dtype=torch.float32, device=device)
        self.epochs: list[np.ndarray] = []   # each [3, n]: probability, correct, seen
        self.epochs_planned = epochs_planned

    @torch.no_grad()
    def observe(self, logits: torch.Tensor, rows: torch.Tensor) -> None:
        """Add one batch: its logits (any dtype) and its rows in the training split."""
        rows = rows.to(self.sums.device)
        y = self.labels[rows]
        p = torch.softmax(logits.detach().float(), dim=-1)
        p_true = p.gather(1, y[:, None]).squeeze(1)
        hit = (p.argmax(dim=-1) == y).float()
        self.sums.index_add_(1, rows, torch.stack([p_true, hit, torch.ones_like(p_true)]))

    def _total(self, accelerator) -> np.ndarray:
        """The sums of every process (a collective: all processes call it), on the CPU."""
        sums = self.sums
        if accelerator.num_processes > 1:
            sums = accelerator.reduce(sums.clone(), reduction="sum")
        return sums.cpu().numpy()

    def finish_epoch(self, accelerator, main: bool) -> None:
        """The epoch's averages appended and written (main process); the sums reset."""
        s = self._total(accelerator)
        seen = s[2]
        with np.errstate(invalid="ignore", divide="ignore"):
            row = np.stack([np.where(seen > 0, s[0] / seen, np.nan),
                            np.where(seen > 0, s[1] / seen, np.nan), seen]).astype(np.float32)
        self.epochs.append(row)
        self.sums.zero_()
        if main:
            self.write()

    def write(self) -> None:
        e = np.stack(self.epochs) if self.epochs else np.zeros((0, 3, len(self.hashes)), np.float32)
        tensors = {"probability": torch.from_numpy(np.ascontiguousarray(e[:, 0])),
                   "correct": torch.from_numpy(np.ascontiguousarray(e[:, 1])),
                   "seen": torch.from_numpy(np.ascontiguousarray(e[:, 2])).to(torch.int32),
                   "labels": self.labels.cpu(), "text_hash": torch.from_numpy(self.hashes.copy())}
        meta = {"format": FORMAT, "epochs": str(len(self.epochs)),
                "epochs_planned": str(self.epochs_planned), "n": str(len(self.hashes))}
        atomic_write(self.path, lambda tmp: save_file(tensors, tmp, metadata=meta))

    def partial_writer(self, accelerator, batches_done: int):
        """``write(folder)`` keeping this epoch's sums so far in a last/ being saved
        mid-epoch (all processes call this: the sums are reduced), else a no-op."""
        if not batches_done:
            return lambda folder: None
        total = torch.from_numpy(self._total(accelerator))
        return lambda folder: save_file({"sums": total}, str(Path(folder) / PARTIAL),
                                        metadata={"format": FORMAT})

    def restore(self, last: Path, epochs_done: int, batches_done: int, main: bool) -> None:
        """A resumed run: the epochs last/ counts as done, and (main process, mid-epoch)
        the sums of the current epoch so far. Epochs recorded after last/ are dropped (they
        are trained again); epochs never recorded (a run from before the data map) are NaN."""
        n = len(self.hashes)
        try:
            t = load_file(str(self.path))
            old = np.stack([t["probability"].numpy(), t["correct"].numpy(),
                            t["seen"].numpy().astype(np.float32)], axis=1)
            if old.shape[2] != n:
                old = old[:0]
        except (OSError, KeyError, ValueError, RuntimeError):
            old = np.zeros((0, 3, n), np.float32)
        blank = np.stack([np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)]).astype(np.float32)
        self.epochs = [old[e] if e < len(old) else blank for e in range(epochs_done)]
        if main and batches_done and (last / PARTIAL).is_file():
            try:
                sums = load_file(str(last / PARTIAL))["sums"]
            except (OSError, KeyError, ValueError, RuntimeError):
                return
            if tuple(sums.shape) == tuple(self.sums.shape):
                self.sums.copy_(sums)


def indexed_loader_parts(train_set, collator):
    """(dataset, collate_fn) whose batches carry ``review_index``."""
    return IndexedReviews(train_set), IndexedCollator(collator)


def open_recorder(run, state: dict | None, train_reviews) -> DataMapRecorder:
    """The run's recorder for ``train_reviews`` (the training split's examples, in the
    order of ``run.datasets["train"]``); on resume, the record so far
    (:meth:`DataMapRecorder.restore`)."""
    hashes = text_hashes([e.text for e in train_reviews])
    rec = DataMapRecorder(run.out_dir, run.datasets["train"].labels, hashes,
                          run.accelerator.device, run.cfg.epochs)
    if state:
        existed = rec.path.is_file()
        rec.restore(run.paths.last, run.epochs_done, run.batches_done, run.main)
        if existed and run.main:  # drop epochs recorded after last/ from the file too
            rec.write()
    return rec
