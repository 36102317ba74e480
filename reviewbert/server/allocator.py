"""The app server's C heap: a fixed glibc mmap threshold, so the RSS stops creeping.

Why. glibc's malloc serves a request of at least the *mmap threshold* with a mapping
of its own and gives it back to the system on ``free``. The threshold is dynamic:
each time such a block is freed it rises to that block's size (up to 32 MB). A
prediction frees blocks of several MB (the [L, H, T, T] attention array of a
256-token review is 19 MB), so after the first few the threshold sits far above
the model's activations, and those are then carved out of the malloc arenas. The
Streamlit server runs every script run in a new thread, and threads get arenas of
their own, so the freed space is spread over a dozen arenas in pieces that the next
run does not quite fit: the server's RSS grew from the 10th to the 100th prediction
while the memory malloc had in use stayed flat (``malloc_stats`` showed much more held
than in use; Python's own objects did not grow under ``tracemalloc``).

Setting the threshold once, by ``mallopt``, also turns off its dynamic rise: big
blocks then always come from ``mmap`` and go back on ``free``. Measured with
``bench/memory.py --only app`` (docs/performance.md): the growth drops to a few MB, the
whole RSS is lower. A prediction's one large block, its attention array, comes from a
pool of reused buffers (reviewbert/model/buffers.py), so it does not pay for fresh pages; its
activations stay under the threshold.

Fixing the threshold also stops glibc from raising the *trim* threshold with it, which
stays at 128 KB: the freed top of an arena goes back to the system, and a long
forward pass faults some pages in again (a small share of its time, seen with
``getrusage``). A 16 MB trim threshold removed them, but kept up to 16 MB per arena and
pushed the server's RSS with 20 sessions past the 1 GB target (``bench/load.py``,
classroom profile): left at glibc's default.

Only the app server calls this. Training keeps glibc's default: its big blocks are
reused step after step and fresh pages would cost every step.

Also fewer malloc arenas (:func:`limit_arenas`): glibc gives each new thread an arena
of its own, up to 8 per core, and Streamlit runs every script run in a new thread, so
20 sessions spread their freed blocks over that many arenas. One per core lowered the
server's RSS, its growth over the sessions and its peak, at the same latencies
(``bench/load.py``, classroom profile).

No effect (and False) where the C library is not glibc or has no ``mallopt``:
macOS, musl, Windows.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

M_MMAP_THRESHOLD = -3          # <malloc.h>
M_ARENA_MAX = -8
MMAP_THRESHOLD = 4 << 20
"""Blocks of 4 MB and more are mapped and unmapped (a review's attention array, 19 MB at
256 tokens); smaller ones, the model's activations (1.5 MB at most at 256 tokens), come
from the arenas. Of the thresholds tried on the app server (glibc's default and three
fixed ones, through the env MALLOC_MMAP_THRESHOLD_), this one kept the server's memory
flattest over 100 predictions (``bench/memory.py --only app``)."""

THRESHOLD_ENV = "REVIEWBERT_MMAP_THRESHOLD"
"""Bytes, to try another threshold; ``glibc`` leaves glibc's dynamic default (A/B runs)."""

_lock = threading.Lock()
_applied: bool | None = None
_arenas: bool | None = None


def _libc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version          # noqa: B018 - glibc only: AttributeError elsewhere
        return libc
    except (OSError, AttributeError):
        return None


def fix_mmap_threshold(nbytes: int | None = None) -> bool:
    """Set glibc's mmap threshold once per process: ``nbytes``, else the environment's
    :data:`THRESHOLD_ENV`, else :data:`MMAP_THRESHOLD`. Later calls return the first
    call's result: True when glibc accepted it."""
    global _applied
    with _lock:
        if _applied is None:
            wanted = os.environ.get(THRESHOLD_ENV, "").strip() if nbytes is None else str(nbytes)
            libc = None if wanted == "glibc" else _libc()
            try:
                size = int(wanted) if wanted else MMAP_THRESHOLD
            except ValueError:
                size = MMAP_THRESHOLD
            _applied = bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, size) == 1)
        return _applied


def limit_arenas(n: int | None = None) -> bool:
    """At most ``n`` malloc arenas (default: one per usable core) for the threads created
    from now on, unless ``MALLOC_ARENA_MAX`` is set (glibc read it at start). Once per
    process; later calls return the first call's result: True when glibc accepted it."""
    global _arenas
    with _lock:
        if _arenas is None:
            from reviewbert.model.device import usable_cores
            libc = None if os.environ.get("MALLOC_ARENA_MAX") else _libc()
            _arenas = bool(libc is not None and libc.mallopt(M_ARENA_MAX, max(1, n or usable_cores())) == 1)
        return _arenas
