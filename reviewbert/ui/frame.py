"""The frame every page runs inside: navigation + the shared sidebar (app.py calls run()).

Streamlit still treats a ``pages/`` folder beside app.py as a legacy (v1)
multipage app until the first ``st.navigation`` call of the server process.
On a fresh server whose first visitor opens a page URL directly (``/train``
after a restart, say), Streamlit runs that page file alone, without app.py and
so without the sidebar. Every page calls :func:`require` first: in that case it
calls ``st.navigation`` (which turns the legacy mode off for the process) and
reruns, so the page is drawn inside the frame from then on.
"""
from __future__ import annotations

import itertools
import time

import streamlit as st

from reviewbert.server import allocator, heap
from reviewbert.ui import checkpoints, state
from reviewbert.ui.runtime import cached_model
from reviewbert.ui.runtime import clicks as buttons
from reviewbert.viz import highlight

_FRAME_RAN = "_frame_ran"
_RUNS = itertools.count(1)      # full runs of this server, numbered (next() is thread-safe in CPython)


def pages() -> list:
    return [
        st.Page(state.PREDICT_PAGE, title="Predict", icon="⭐", default=True),
        st.Page(state.TRAIN_PAGE, title="Train", icon="🏋️"),
        st.Page(state.INSIDE_PAGE, title="Inside BERT", icon="🔍"),
        st.Page(state.ERROR_PAGE, title="Error analysis", icon="🔬"),
        st.Page(state.FAITH_PAGE, title="Faithfulness", icon="⚖️"),
        st.Page(state.HEADS_PAGE, title="Heads", icon="🧠"),
    ]


def skip_repl_check() -> None:
    """Streamlit (1.67) asks, when a process draws its first element, whether it runs in a
    Python REPL, to print a warning there: ``env_util.is_repl()`` calls ``inspect.stack()``,
    which reads the source lines of every frame on the stack and maps every loaded module
    to its file: 145 ms on this 2-core CPU, holding the GIL, in front of the first page's
    first element. Under ``streamlit run`` the answer is no, so the warning is marked as
    shown and the check skipped (a Streamlit without the flag is left alone)."""
    from streamlit import delta_generator
    if hasattr(delta_generator, "_use_warning_has_been_displayed"):
        delta_generator._use_warning_has_been_displayed = True


def run() -> None:
    number = start_full_run()
    skip_repl_check()
    allocator.fix_mmap_threshold()     # once per process: see reviewbert/server/allocator.py
    allocator.limit_arenas()
    nav = st.navigation(pages())
    # style only: takes no space
    st.html(f"<style>{highlight.HIGHLIGHT_CSS}{cached_model.PREFETCH_CSS}</style>")
    st.sidebar.header("Model")
    device = st.sidebar.empty()
    info = checkpoints.pick_checkpoint(checkpoints.checkpoints_root())
    st.session_state.pop(state.RERUN_WHEN_LOADED, None)   # set again by a page that wants it
    with device.container():        # the checkpoint's load (a thread, held until the page is drawn)
        job = cached_model.load_status(info)
    st.session_state[_FRAME_RAN] = True
    clicks, started = buttons.pending(), time.monotonic()
    try:
        nav.run()
    finally:                    # also after st.stop(), st.rerun() or an error
        cached_model.release(job)
        heap.freeze_if_imported()
    stop_if_superseded(number)
    # Only a run that returned: a run stopped for a newer one ends in an exception (its
    # unread clicks are the newer run's to read), and so does one that called st.stop().
    buttons.forget_unread(clicks, recorded_before=started)


def start_full_run() -> int:
    """Number this full run, as the session's newest."""
    number = next(_RUNS)
    st.session_state[state.LATEST_RUN] = number
    return number


def stop_if_superseded(number: int) -> None:
    """End a run that a newer full run of the session has replaced as stopped, not finished.

    Under Streamlit's fast reruns a click starts the new run in a thread beside the old
    one, and the old one runs on until its next element. If it has none left, it returns
    normally, and Streamlit then drops every fragment that *it* did not register: the new
    run's included. The next click inside such a fragment (a chart selection, *Add LIME
    and occlusion*) is then ignored ("The fragment … does not exist anymore"), as CI saw
    on the Search dashboard. A run that ends stopped leaves the fragments alone."""
    if st.session_state.get(state.LATEST_RUN, number) != number:
        st.stop()


def require() -> None:
    """First line of every page: rerun inside the frame if Streamlit ran the page alone."""
    if not st.session_state.pop(_FRAME_RAN, False):
        st.navigation(pages(), position="hidden")
        st.rerun()
