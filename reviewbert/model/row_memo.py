"""The logits of token-id rows a predictor has already read, so that word-deletion work
stopped halfway resumes where it stopped.

LIME and occlusion ask the model about a few hundred shortened copies of one review
(bench/whatif.py times them at 256 tokens). On the pages they run under a progress bar,
and a click elsewhere stops them at the next batch; before this memo, coming back started
them from nothing. Their rows are deterministic (occlusion deletes each word in turn,
LIME's samples are seeded), so a second run asks for the same rows: those read before are
taken from here and only the rest reach the model. The bar shows them as done before this
run (``reviewbert.progress.resumed``), so its time left is that of the rest.

Process-wide per predictor (one per checkpoint in the app), shared by its sessions,
bounded (least recently used rows go first), fp32 results only. A row is known by a
128-bit BLAKE2b digest of its ids, not kept itself: 20,000 rows hold about 5 MB.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

MAX_ROWS = 20_000
"""About forty 256-token reviews' LIME (200 samples) and occlusion (one row per word)."""


def row_key(row) -> bytes:
    return hashlib.blake2b(np.asarray(row, dtype=np.int64).tobytes(), digest_size=16).digest()


class RowMemo:
    """row (token ids) → logits [C], least recently used first out; thread-safe."""

    def __init__(self, max_rows: int = MAX_ROWS):
        self.max_rows = int(max_rows)
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get_many(self, rows) -> list[np.ndarray | None]:
        """Each row's logits, or None where it was never read (or was dropped since)."""
        keys = [row_key(r) for r in rows]
        with self._lock:
            out = []
            for k in keys:
                v = self._rows.get(k)
                if v is not None:
                    self._rows.move_to_end(k)
                out.append(v)
        return out

    def put_many(self, rows, logits: np.ndarray) -> None:
        keys = [row_key(r) for r in rows]
        values = np.array(logits, dtype=np.float32, copy=True)
        values.setflags(write=False)
        with self._lock:
            for k, v in zip(keys, values):
                self._rows[k] = v
                self._rows.move_to_end(k)
            while len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)
