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

A recorded click lives until the body reads it, or until the end of the next run that
was not stopped for a newer one (:func:`forget_unread`, the frame's last step): a click
whose page the user left before it was read, or whose button is no longer drawn, is
dropped rather than fired later, when the page draws that button again.

A run of one fragment (a button inside ``st.fragment``) does not end in the frame, so
its clicks are kept more narrowly: such a run reads only the click it carries itself
(Streamlit's own trigger), and a recorded one is read only by a whole page's run that
reads it within FRAGMENT_CLICK_S (the run that stopped it: a tab clicked right after
*Compare*). A fragment's button that was not drawn when clicked is thus never fired by
a later run of that fragment. A click stopped by another click in the same fragment is
still lost, as before.

A run that Streamlit stops for a newer one ends in a RerunException: the app's
``.streamlit/config.toml`` turns Streamlit's fast reruns off, which instead stopped the
old run with a StopException, the same as ``st.stop()``, in a thread of its own beside the
new run's.

A click read ``until_done`` (work that can be done again: a comparison, an explanation)
stays recorded until :func:`doing` around its work ends, so a run stopped during that work
leaves it to the run that replaced it.

The Predict button keeps its own request, ``state.RUN_PREDICT``, which sampling and
other pages set too and which is cleared only once the prediction is stored
(reviewbert/ui/predict.py).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from . import state

FRAGMENT_CLICK_S = 10.0
"""How long a click recorded by a fragment's run waits for the whole page's run that
replaced it (a run on a 2-core server serving a class: p95 1.3 s, bench/load.py)."""


def _fragment_run() -> bool:
    """Is this script run the rerun of one or more fragments, not of the whole page?"""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _clicked(key: str, on_click: Callable | None, args: tuple, kwargs: dict) -> None:
    """The button's callback: the click recorded, then the caller's own callback."""
    # None: recorded by a whole page's run; else when a fragment's run recorded it
    pending()[key] = time.monotonic() if _fragment_run() else None
    if on_click is not None:
        on_click(*args, **kwargs)


def _read(key: str, clicked: bool, disabled: bool, until_done: bool = False) -> bool:
    """``clicked`` (Streamlit's trigger, this run's own click) or a recorded click that
    this run may read; the record is dropped, unless this run reads it ``until_done``."""
    pending = st.session_state.get(state.CLICKS)
    if not pending or key not in pending:
        return clicked and not disabled
    at = pending[key]
    recorded = at is None or (not _fragment_run() and time.monotonic() - at <= FRAGMENT_CLICK_S)
    read = (clicked or recorded) and not disabled
    if not (read and until_done):
        del pending[key]
    return read


def button(where: Any, label: str, *, key: str, until_done: bool = False,
           on_click: Callable | None = None, args: tuple = (), kwargs: dict | None = None,
           **options) -> bool:
    """``where.button(label, key=key, ...)`` (``where``: ``st``, a column, an
    ``st.empty()`` slot): True once per click, in the run that reads it, even if the run
    the click started was stopped before it reached this line. A button drawn disabled
    drops a click recorded before it was disabled.

    ``until_done``: for work that can be done again (a comparison, an explanation): the
    click is kept until :func:`doing` around that work ends, so that a run stopped during
    the work (another click) leaves it to the run that replaced it, which does the work
    again."""
    clicked = where.button(label, key=key, on_click=_clicked,
                           args=(key, on_click, args, kwargs or {}), **options)
    return _read(key, clicked, options.get("disabled", False), until_done)


@contextmanager
def doing(key: str):
    """Around the work of a button read ``until_done``: its click is dropped when the work
    ends, or fails with an error; a run stopped during it for a newer one (Streamlit's
    RerunException, not an ``Exception``) leaves the click for that run."""
    clicks = pending()      # held: dropping the click must not be a read of the session state
    try:
        yield
    except Exception:
        clicks.pop(key, None)
        raise
    clicks.pop(key, None)


def form_submit(where: Any, label: str, *, key: str, on_click: Callable | None = None,
                args: tuple = (), kwargs: dict | None = None, **options) -> bool:
    """The same for a form's submit button (the form's values are already in the
    session's state, a stopped run or not)."""
    clicked = where.form_submit_button(label, key=key, on_click=_clicked,
                                       args=(key, on_click, args, kwargs or {}), **options)
    return _read(key, clicked, options.get("disabled", False))


def pending() -> dict:
    """The session's recorded clicks: the frame holds this dict from its start, because
    after ``st.stop()`` the session's state can no longer be read (every read raises
    Streamlit's StopException again)."""
    return st.session_state.setdefault(state.CLICKS, {})


def forget_unread(clicks: dict) -> None:
    """Drop the clicks no run has read (``clicks``: :func:`pending`): the frame's last
    step of a run that was not stopped for a newer one."""
    clicks.clear()
