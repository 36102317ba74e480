"""The whole page's runs: numbered, wrapped by the frame, and ended stopped when superseded.

Streamlit still treats a ``pages/`` folder beside app.py as a legacy (v1) multipage app
until the first ``st.navigation`` call of the server process. On a fresh server whose
first visitor opens a page URL directly (``/train`` after a restart, say), Streamlit runs
that page file alone, without app.py and so without the sidebar: :func:`inside_frame`
tells the page so (the frame's ``require`` then calls ``st.navigation`` and reruns).
"""
from __future__ import annotations

import itertools
import time

import streamlit as st

from reviewbert.server import allocator, heap
from reviewbert.ui import state
from reviewbert.ui.runtime import cached_model, clicks

_FRAME_RAN = "_frame_ran"
_RUNS = itertools.count(1)      # full runs of this server, numbered (next() is thread-safe in CPython)


def skip_repl_check() -> None:
    """Streamlit (1.67) asks, when a process draws its first element, whether it runs in a
    Python REPL, to print a warning there: ``env_util.is_repl()`` calls ``inspect.stack()``,
    which reads the source lines of every frame on the stack and maps every loaded module
    to its file, holding the GIL, in front of the first page's first element. Under
    ``streamlit run`` the answer is no, so the warning is marked as shown and the check
    skipped (a Streamlit without the flag is left alone)."""
    from streamlit import delta_generator
    if hasattr(delta_generator, "_use_warning_has_been_displayed"):
        delta_generator._use_warning_has_been_displayed = True


def start_full_run() -> int:
    """Number this full run, as the session's newest."""
    number = next(_RUNS)
    st.session_state[state.LATEST_RUN] = number
    return number


def begin() -> int:
    """The frame's first step: the run numbered, the process's one-off settings made (see
    ``reviewbert/server/allocator.py``), the load's "rerun when loaded" wish cleared (a page
    that wants it sets it again). Returns the run's number, for :func:`run_page`."""
    number = start_full_run()
    skip_repl_check()
    allocator.fix_mmap_threshold()
    allocator.limit_arenas()
    st.session_state.pop(state.RERUN_WHEN_LOADED, None)
    return number


def run_page(page, number: int, load) -> None:
    """The frame's last step: run the page (``st.navigation``'s), then release the held
    load (``load``: what ``cached_model.load_status`` returned) and freeze what the run
    imported, also after ``st.stop()``, ``st.rerun()`` or an error. A run that returned
    drops the clicks no run read; a run a newer one superseded ends stopped."""
    st.session_state[_FRAME_RAN] = True
    recorded, started = clicks.pending(), time.monotonic()
    try:
        page.run()
    finally:
        cached_model.release(load)
        heap.freeze_if_imported()
    stop_if_superseded(number)
    # Only a run that returned: a run stopped for a newer one ends in an exception (its
    # unread clicks are the newer run's to read), and so does one that called st.stop().
    clicks.forget_unread(recorded, recorded_before=started)


def stop_if_superseded(number: int) -> None:
    """End a run that a newer full run of the session has replaced as stopped, not finished.

    Under Streamlit's fast reruns a click starts the new run in a thread beside the old
    one, and the old one runs on until its next element. If it has none left, it returns
    normally, and Streamlit then drops every fragment that *it* did not register: the new
    run's included. The next click inside such a fragment (a chart selection, *Add LIME
    and occlusion*) is then ignored ("The fragment … does not exist anymore"). A run that
    ends stopped leaves the fragments alone."""
    if st.session_state.get(state.LATEST_RUN, number) != number:
        st.stop()


def inside_frame() -> bool:
    """Did the frame run this page (once per run: the flag is taken)?"""
    return bool(st.session_state.pop(_FRAME_RAN, False))
