"""Turns for the server's heavy page work: first come, first served, a few at a time.

Why. Streamlit runs every session's script in a thread of its own, and Python shares
the cores among all of them: when 20 students press Predict in the same second, the 20
runs progress together and are drawn together, each after the whole burst's work
(``bench/load.py``, stress profile). Served in turns, the first ones are drawn after their own work and
the queue's, the last ones no later than before.

``turn()`` blocks until one of ``slots`` turns is free (one per usable core: a run's
Python holds one core, its forward pass can use the other), in arrival order
(``threading.Condition`` wakes its oldest waiter first). A run that waited ``timeout``
seconds goes ahead anyway: a turn is a courtesy, never a lock that can hang a page.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

TIMEOUT_S = 10.0

_lock = threading.Lock()
_gate: threading.Semaphore | None = None


def slots() -> int:
    from reviewbert.model.device import usable_cores
    return max(1, usable_cores())


def _semaphore() -> threading.Semaphore:
    global _gate
    with _lock:
        if _gate is None:
            _gate = threading.Semaphore(slots())
        return _gate


@contextmanager
def turn(enabled: bool = True, timeout: float = TIMEOUT_S):
    """Run the block in a turn (see the module doc); True inside if a turn was had.
    ``enabled=False`` runs it at once (a run that will wait for the model anyway should
    not hold a turn while it does)."""
    gate = _semaphore()
    had = enabled and gate.acquire(timeout=timeout)
    try:
        yield had
    finally:
        if had:
            gate.release()
