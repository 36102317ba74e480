"""A button whose click is not lost when Streamlit stops the run that carries it.

Streamlit (1.67) reads a click as a one-run trigger: ``st.button`` returns True in the
run the click starts, and in no other. When another widget changes before that run
has drawn the button (a view's tab clicked right after *Launch*, as a class's load
slows each run), Streamlit stops the run at its next element and starts one that
carries only the newer change: read from the button in the page's body, the click was
lost, and the user had to click again. A button's ``on_click`` callback runs before
the page's body, though, so :func:`button` records the click there, under
``state.CLICKS``, and the body reads it from there: in the run the click started,
or in the one that replaced it if that run was stopped first.

A recorded click is read once, within CLICK_S of the click, by the
run it started, or the one that replaced it. It is dropped rather than fired later:
after CLICK_S, and at the end of any run of the whole page that returned normally (the
frame's last step, :func:`forget_unread`), so a click whose page the user left, or whose
button is no longer drawn, does not fire when the page draws that button again.

Streamlit's fast reruns (its default, kept in ``.streamlit/config.toml``) stop the old
run's thread with a StopException, the same exception as ``st.stop()``, while the new
run starts in a thread beside it: a run that ends in any exception therefore leaves its
unread clicks to CLICK_S. A click made before the run it starts has begun at all (a
second click within a few milliseconds) is dropped by Streamlit itself.

A run of one fragment (a button inside ``st.fragment``) reads only the click it carries
itself (Streamlit's trigger); a click such a run recorded is read by the whole page's
run that replaced it (a tab clicked right after *Compare*). A fragment's button that was
not drawn when clicked is thus never fired by a later run of that fragment. A click
stopped by another click in the same fragment is still lost, as before.

The Predict button keeps its own request, ``state.RUN_PREDICT``, which sampling and
other pages set too and which is cleared only once the prediction is stored
(reviewbert/ui/predict.py).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from reviewbert.ui import state

CLICK_S = 5.0
"""How long a recorded click waits for the run that replaced the one it started (a run on
a 2-core server serving a class: p95 1.3-1.9 s, bench/load.py)."""


def fragment_run() -> bool:
    """Is this script run the rerun of one or more fragments, not of the whole page?"""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _clicked(key: str, on_click: Callable | None, args: tuple, kwargs: dict) -> None:
    """The button's callback: the click recorded, then the caller's own callback."""
    pending()[key] = (time.monotonic(), fragment_run())
    if on_click is not None:
        on_click(*args, **kwargs)


def _read(key: str, clicked: bool, disabled: bool) -> bool:
    """``clicked`` (Streamlit's trigger, this run's own click) or a recorded click that
    this run may read; the record is dropped either way."""
    clicks = st.session_state.get(state.CLICKS)
    if not clicks or key not in clicks:
        return clicked and not disabled
    at, by_fragment = clicks.pop(key)
    recorded = time.monotonic() - at <= CLICK_S and not (by_fragment and fragment_run())
    return (clicked or recorded) and not disabled


def _drawn(draw: Callable, label: str, key: str, on_click: Callable | None, args: tuple,
           kwargs: dict | None, options: dict) -> bool:
    """``draw`` (a ``button`` or ``form_submit_button`` method) with the recording callback,
    then the click read."""
    clicked = draw(label, key=key, on_click=_clicked, args=(key, on_click, args, kwargs or {}),
                   **options)
    return _read(key, clicked, options.get("disabled", False))


def button(where: Any, label: str, *, key: str, on_click: Callable | None = None,
           args: tuple = (), kwargs: dict | None = None, **options) -> bool:
    """``where.button(label, key=key, ...)`` (``where``: ``st``, a column, an
    ``st.empty()`` slot): True once per click, in the run that reads it, even if the run
    the click started was stopped before it reached this line. A button drawn disabled
    drops a click recorded before it was disabled."""
    return _drawn(where.button, label, key, on_click, args, kwargs, options)


def form_submit(where: Any, label: str, *, key: str, on_click: Callable | None = None,
                args: tuple = (), kwargs: dict | None = None, **options) -> bool:
    """The same for a form's submit button (the form's values are already in the
    session's state, a stopped run or not)."""
    return _drawn(where.form_submit_button, label, key, on_click, args, kwargs, options)


def pending() -> dict:
    """The session's recorded clicks ({key: (time.monotonic(), by a fragment's run)})."""
    return st.session_state.setdefault(state.CLICKS, {})


def forget_unread(clicks: dict, recorded_before: float) -> None:
    """Drop the clicks no run has read that were recorded before ``recorded_before`` (the
    start of the frame's run; ``clicks``: :func:`pending`): the frame's last step of a
    whole page's run that returned normally. A click recorded since then belongs to a
    newer run: under fast reruns that run's thread starts beside this one, and its
    callbacks may record a click while this one is finishing."""
    for key in [k for k, (at, _) in clicks.items() if at < recorded_before]:
        clicks.pop(key, None)
