"""Clicks that survive a stopped run: buttons recorded in their callback, and requests.

Streamlit (1.67) reads a click as a one-run trigger: ``st.button`` returns True in the
run the click starts, and in no other. When another widget changes before that run
has drawn the button (a view's tab clicked right after *Launch*, as a class's load
slows each run), Streamlit stops the run at its next element and starts one that
carries only the newer change: read from the button in the page's body, the click was
lost, and the user had to click again. A button's ``on_click`` callback runs before
the page's body, though, so a click is recorded there, under ``state.CLICKS``, and the
body takes it from there: in the run the click started, or in the one that replaced it
if that run was stopped first. Two forms:

- :func:`button` / :func:`form_submit`: a click that starts work in the run that reads it.
  A recorded click is read once, within CLICK_S of the click, by the run it started or
  the one that replaced it. It is dropped rather than fired later: after CLICK_S, and at
  the end of any run of the whole page that returned normally (the frame's last step,
  :func:`forget_unread`), so a click whose page the user left, or whose button is no
  longer drawn, does not fire when the page draws that button again.
- :class:`Request`: work a click (or another page, or a callback) asks for that must be
  done even if the run doing it is stopped halfway (the Predict page's prediction). It is
  kept until the body says the work is done, whatever the age or the runs in between.

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

``tests/unit/test_ui_runtime.py`` fails on a button read in a page's body outside this
module: ``st.button`` and ``form_submit_button`` elsewhere only take an ``on_click``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from reviewbert.ui import state

CLICK_S = 5.0
"""How long a recorded click waits for the run that replaced the one it started: longer
than a page run takes under a class's load (the p95 of ``bench/load.py``'s classroom
profile), short enough that a click the user has forgotten does not fire."""


class Click(NamedTuple):
    """One recorded click: when (``time.monotonic()``), whether a fragment's run recorded
    it, and whether it is a :class:`Request` (kept until done, not dropped by age)."""
    at: float
    by_fragment: bool
    lasting: bool = False


def fragment_run() -> bool:
    """Is this script run the rerun of one or more fragments, not of the whole page?"""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def pending() -> dict:
    """The session's recorded clicks ({key: :class:`Click` or a plain (at, by_fragment)})."""
    return st.session_state.setdefault(state.CLICKS, {})


def _record(key: str, lasting: bool = False) -> None:
    pending()[key] = Click(time.monotonic(), fragment_run(), lasting)


def _clicked(key: str, on_click: Callable | None, args: tuple, kwargs: dict) -> None:
    """The button's callback: the click recorded, then the caller's own callback."""
    _record(key)
    if on_click is not None:
        on_click(*args, **kwargs)


def _read(key: str, clicked: bool, disabled: bool) -> bool:
    """``clicked`` (Streamlit's trigger, this run's own click) or a recorded click that
    this run may read; the record is dropped either way."""
    clicks = st.session_state.get(state.CLICKS)
    if not clicks or key not in clicks:
        return clicked and not disabled
    click = Click(*clicks.pop(key))
    recorded = time.monotonic() - click.at <= CLICK_S and not (click.by_fragment and fragment_run())
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


class Request:
    """Work asked for by a click, a sampled review or another page, that must be done
    even if the run doing it is stopped halfway: :meth:`ask` in a widget's callback (or
    anywhere before the page's body reads it), :meth:`asked` in the body, and
    :meth:`done` once the work is done. A run stopped between the two leaves the
    request for the run that replaced it."""

    def __init__(self, name: str):
        self.key = f"request:{name}"

    def ask(self) -> None:
        _record(self.key, lasting=True)

    def asked(self) -> bool:
        return self.key in (st.session_state.get(state.CLICKS) or {})

    def done(self) -> None:
        (st.session_state.get(state.CLICKS) or {}).pop(self.key, None)


def forget_unread(clicks: dict, recorded_before: float) -> None:
    """Drop the clicks no run has read that were recorded before ``recorded_before`` (the
    start of the frame's run; ``clicks``: :func:`pending`): the frame's last step of a
    whole page's run that returned normally. A click recorded since then belongs to a
    newer run: under fast reruns that run's thread starts beside this one, and its
    callbacks may record a click while this one is finishing. Requests stay until done."""
    for key, rec in list(clicks.items()):
        click = Click(*rec)
        if click.at < recorded_before and not click.lasting:
            clicks.pop(key, None)
