"""Reused memory for the large arrays a prediction returns: its [L, H, T, T] attention.

Why. The app server maps every block of 4 MB or more afresh and unmaps it on free
(:mod:`reviewbert.server.allocator` does it, so that the server's memory stops creeping).
So each new 256-token prediction's 19 MB attention array paid ~4,800 page faults (one
per 4 KiB page) as the forward pass first wrote it, a visible share of that pass's time
(``resource.getrusage`` counts the minor faults; bench/predict_latency.py times the
pass). Predictions shared by the sessions live in a cache
(``reviewbert/ui/predict.py``, ``shared_prediction``); once it is full,
every new prediction evicts one. Here the evicted array's memory goes back to a
small pool instead of to the system, already faulted in, and the next prediction
writes into it.

How it stays safe. A buffer is handed out as a view of a private 1-D array, and it
goes back to the pool only from a ``weakref.finalize`` on that view: numpy views
and ``torch.from_numpy`` tensors keep their base alive, so the finalizer runs only
once nothing can read the old prediction's attention any more.

What it costs. At most ``spare`` buffers are kept unused (the largest ones): one
19 MB buffer at a 256-token limit, made and touched when the predictor warms up,
so that the first long prediction of a fresh server also finds one.
"""
from __future__ import annotations

import collections
import math
import threading
import weakref

import numpy as np

MIN_BYTES = 4 << 20
"""Smaller arrays come from malloc's arenas and are reused there already."""


class BufferPool:
    """float32 arrays of a requested shape, from memory that earlier arrays gave back.

    ``take(shape)`` returns a writeable float32 array of ``shape`` (uninitialised, as
    ``np.empty``); when the last view of it is gone, its memory is kept for the next
    ``take`` if fewer than ``spare`` buffers are waiting and it is among the largest.
    """

    def __init__(self, spare: int = 1, min_bytes: int = MIN_BYTES):
        self.spare = spare
        self.min_bytes = min_bytes
        self._free: list[np.ndarray] = []       # 1-D float32, largest first
        # Finalizers only append here (atomic, no lock): one may run inside take() itself,
        # when an allocation there sets off the garbage collector.
        self._returned: collections.deque[np.ndarray] = collections.deque()
        self._lock = threading.Lock()
        self.reused = 0                          # takes served from the pool (tests, benches)
        self.made = 0                            # takes that needed new memory

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        n = math.prod(shape)
        if n * 4 < self.min_bytes or self.spare <= 0:
            return np.empty(shape, dtype=np.float32)
        raw = None
        with self._lock:
            self._settle()
            # the smallest waiting buffer that fits and is not more than twice too big
            for i in range(len(self._free) - 1, -1, -1):
                if n <= self._free[i].size <= 2 * n:
                    raw = self._free.pop(i)
                    break
            if raw is None:
                self.made += 1
            else:
                self.reused += 1
        if raw is None:
            raw = np.empty(n, dtype=np.float32)
        out = raw[:n].reshape(shape)
        weakref.finalize(out, self._give_back, raw).atexit = False
        return out

    def prefault(self, shape: tuple[int, ...]) -> None:
        """Make one buffer of ``shape`` now, its pages touched, and keep it waiting."""
        n = math.prod(shape)
        if n * 4 < self.min_bytes or self.spare <= 0:
            return
        with self._lock:
            self._settle()
            if any(b.size >= n for b in self._free):
                return
        raw = np.empty(n, dtype=np.float32)
        raw.fill(0.0)
        self._give_back(raw)

    def waiting(self) -> list[int]:
        """The sizes (floats) of the buffers waiting."""
        with self._lock:
            self._settle()
            return [b.size for b in self._free]

    def _give_back(self, raw: np.ndarray) -> None:
        self._returned.append(raw)
        if self._lock.acquire(blocking=False):   # else take() holds it, and settles next time
            try:
                self._settle()
            finally:
                self._lock.release()

    def _settle(self) -> None:
        """Under the lock: the returned buffers join the waiting ones; the largest
        ``spare`` stay, the others go back to the system."""
        while self._returned:
            self._free.append(self._returned.popleft())
        self._free.sort(key=lambda b: -b.size)
        del self._free[self.spare:]
