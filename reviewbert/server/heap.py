"""The server's long-lived objects, kept out of Streamlit's garbage collection after every run.

Streamlit calls ``gc.collect(2)`` when each script run ends (``runner.postScriptGC``),
so that garbage does not build up between runs. A full collection walks every object
the collector tracks: once torch, transformers, plotly and a model are loaded that is
hundreds of thousands of objects, and a profile of the server showed it costing more
than a 256-token prediction's own page work (``bench/load.py`` measures the server).

``gc.freeze()`` moves the objects alive now (modules, loaded models, caches) into a
permanent generation that collections skip; a collection then walks only what was made
since: under a millisecond. Objects in it are still freed by reference counting; only
reference *cycles* among them wait. So each freeze first unfreezes and collects fully:
a model dropped from a cache since the last freeze, cycles and all, is freed then.
A full freeze (:func:`freeze_long_lived`) happens when a model is loaded: the model it may
replace is freed then. After a script run that imported modules (the first one, and a
page's first run: pages import plotly figures or scikit-learn only when they need them)
and after the test split is rebuilt, :func:`freeze_new` collects and freezes only what is
not frozen yet, a fraction of a full collection, which held the GIL while the first
predictions were being drawn (``bench/first_second.py`` times them). Modules live for
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
