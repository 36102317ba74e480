"""The server's long-lived objects, kept out of Streamlit's garbage collection after every run.

Streamlit calls ``gc.collect(2)`` when each script run ends (``runner.postScriptGC``),
so that garbage does not build up between runs. A full collection walks every object
the collector tracks: once torch, transformers, plotly and a model are loaded that is
about 480,000 objects and 280-370 ms on this 2-core CPU, more than half of the CPU a
256-token prediction costs the Predict page (py-spy on the server; bench/load.py).

``gc.freeze()`` moves the objects alive now (modules, loaded models, caches) into a
permanent generation that collections skip; a collection then walks only what was made
since: under a millisecond. Objects in it are still freed by reference counting; only
reference *cycles* among them wait. So each freeze first unfreezes and collects fully:
a model dropped from a cache since the last freeze, cycles and all, is freed then.
Freezing happens when something long-lived arrives (a model is loaded) and after the
first script run of the process (the imports), rarely enough that the full collection
it costs does not matter.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_first_run_done = False


def freeze_long_lived() -> int:
    """Collect everything, then freeze what survives; returns the number frozen."""
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        return gc.get_freeze_count()


def freeze_after_first_run() -> None:
    """Freeze once per process, after the first script run has imported the app."""
    global _first_run_done
    if _first_run_done:
        return
    _first_run_done = True
    freeze_long_lived()
