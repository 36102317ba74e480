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
A full freeze (:func:`freeze_long_lived`) happens when a model is loaded: the model it may
replace is freed then. After a script run that imported modules (the first one, and a
page's first run: pages import plotly figures or scikit-learn only when they need them)
and after the test split is rebuilt, :func:`freeze_new` collects and freezes only what is
not frozen yet: tens of milliseconds instead of a full collection's 300-400 ms, which
held the GIL while the first predictions were being drawn (py-spy: 1.5 s of the
Predict page's first six runs went to full collections after imports). Modules live for
good, so re-walking the frozen objects then would find nothing to free; a session's
reference cycles frozen along with them wait for the next full freeze.
"""
from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_frozen = 0       # len(sys.modules) at the last freeze
IMPORTS_WORTH_A_FREEZE = 20


def freeze_long_lived() -> int:
    """Collect everything, then freeze what survives; returns the number frozen."""
    return _freeze(full=True)


def freeze_new() -> int:
    """Collect what is not frozen, then freeze what survives (the frozen objects are not
    walked); returns the number frozen."""
    return _freeze(full=False)


def _freeze(full: bool) -> int:
    global _modules_frozen
    with _lock:
        _modules_frozen = len(sys.modules)
        if full:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        return gc.get_freeze_count()


def freeze_if_imported() -> bool:
    """Freeze the new objects after a script run that imported modules (at least
    IMPORTS_WORTH_A_FREEZE since the last freeze); True if it froze."""
    if len(sys.modules) < _modules_frozen + IMPORTS_WORTH_A_FREEZE:
        return False
    freeze_new()
    return True
