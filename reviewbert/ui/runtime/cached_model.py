"""The sidebar's checkpoint, loaded once per server process in the background
(``model_loading.BackgroundLoad`` in an ``st.cache_resource``): the frame starts the load
on the first run that names the checkpoint, pages draw their controls without waiting,
and whatever needs the model waits for it here, under a "Loading the model…" spinner.
Every page that needs a model starts with :func:`require_predictor`, or with
:func:`require_checkpoint` and :func:`loading` when it draws something first.
"""
from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import CheckpointInfo
from reviewbert.model.device import cpu_threads, threads_for_one_review
from reviewbert.server import heap
from reviewbert.server.model_loading import BackgroundLoad
from reviewbert.training.runs import device_busy
from reviewbert.ui import checkpoints, state

if TYPE_CHECKING:
    from reviewbert.data.examples import Review
    from reviewbert.model.inference import Predictor

LOADING = "Loading the model…"
RETRY_AFTER_S = 3.0     # a failed load is tried again by the first rerun this much later
# What draws a prediction: imported by the load's thread once the model is ready, so that
# the first click on Predict does not wait for them (none imports scipy or scikit-learn).
VIEW_MODULES = ("reviewbert.ui.prediction_card", "reviewbert.ui.explanations",
                "reviewbert.ui.nearest_reviews", "reviewbert.ui.whatif")


MTIME_TTL_S = 1.0
"""How long :func:`mtime` reuses what it read: a page run asks 6-8 times (the page's key, each
``loading``, each ``load_predictor``), and each read globbed the folder and stat'ed its files,
~3 ms of a Predict run's ~45 ms of page CPU (py-spy of the server). A checkpoint re-saved in
place is seen at most this much later."""
_MTIMES: dict[str, tuple[float, float]] = {}     # path -> (time.monotonic() read, mtime)


def mtime(path: Path) -> float:
    """Changes when a checkpoint is re-saved in place: part of the cache key."""
    key, now = str(path), time.monotonic()
    hit = _MTIMES.get(key)
    if hit is not None and now - hit[0] < MTIME_TTL_S:
        return hit[1]
    files = [path / "config.json", *path.glob("*.safetensors")]
    value = max((f.stat().st_mtime for f in files if f.exists()), default=0.0)
    _MTIMES[key] = (now, value)
    return value


@st.cache_resource(max_entries=3, show_spinner=False)
def start_loading(path: str, stamp: float) -> BackgroundLoad:
    """The checkpoint's load, shared by every session: started by the first call, returned
    at once (it runs in its own thread). It is held until the script run that started it
    has drawn its page (:func:`release`), or until something waits for the model."""
    return BackgroundLoad(path, after_load=heap.freeze_long_lived, after_model=import_views,
                          after_split=heap.freeze_new, hold=True)


def import_views() -> None:
    """The Predict page's view modules, imported, and the first prediction's one-off costs
    paid (``prediction.prepare``), then the new objects frozen (``heap.freeze_new``) here
    rather than by the script run that follows: run by the load's thread once the model
    is ready."""
    for name in VIEW_MODULES:
        importlib.import_module(name)
    importlib.import_module("reviewbert.ui.prediction_card").prepare()
    heap.freeze_new()


def loading(info: CheckpointInfo) -> BackgroundLoad:
    """The checkpoint's load, started now if nothing started it. A failed load is kept
    for RETRY_AFTER_S (every call of one script run sees the same failure), then tried
    again: a checkpoint fixed on disk loads on a later rerun."""
    path, stamp = str(info.path), mtime(info.path)
    job = start_loading(path, stamp)
    if job.failed_for() > RETRY_AFTER_S:
        start_loading.clear(path, stamp)
        job = start_loading(path, stamp)
    return job


PAINT_S = 1.0   # the browser's time to draw the first page (it loads each widget's code)


def release(job: BackgroundLoad | None) -> None:
    """The frame's last step, with the load :func:`load_status` returned: the page is
    sent; the held load starts PAINT_S later, once the browser has drawn it (the load's
    torch import slowed the first paint by 1-2 s on 2 cores). A click that needs the
    model starts it at once."""
    if job is not None:
        job.release(after=PAINT_S)


def load_predictor(path: str, stamp: float) -> Predictor:
    """The checkpoint's Predictor, waiting (with a spinner) while it loads; its
    CheckpointError if it cannot load."""
    job = start_loading(path, stamp)
    if not job.ready:
        with st.spinner(LOADING):
            job.predictor()
    return job.predictor()


def load_test_reviews(path: str, stamp: float) -> tuple[tuple[Review, ...] | None, str]:
    """(reviews, "") from the checkpoint's own test split, or (None, why not); waits for
    it. A resource shared read-only by every session: a tuple of frozen Reviews."""
    job = start_loading(path, stamp)
    if not job.split_ready():
        with st.spinner("Rebuilding the checkpoint's test split…"):
            job.test_reviews()
    return job.test_reviews()


def load_status(info: CheckpointInfo | None) -> BackgroundLoad | None:
    """The sidebar's "Device: …" line. While the checkpoint loads it is a fragment that
    redraws itself every half second (device, seconds so far). Once the load is done it
    reruns the whole page if the page drew without the model (:func:`stop_if_failed`),
    so that what waited for it (the sampler's test split, a broken checkpoint's message)
    appears without a click; any other page (the Train page's live view, say) is left
    alone. Returns the checkpoint's load (None without a checkpoint), for :func:`release`."""
    if info is None:           # nothing loads: asked directly (torch is imported here)
        from reviewbert.model.device import describe_device, pick_device
        st.caption(f"Device: {describe_device(pick_device())}")
        return None
    job = loading(info)
    if job.ready:
        st.caption(f"Device: {job.device}")
    else:
        _watch_load(str(info.path), mtime(info.path))
    return job


@st.fragment(run_every=0.5)
def _watch_load(path: str, stamp: float) -> None:
    job = start_loading(path, stamp)
    if job.ready:
        if st.session_state.pop(state.RERUN_WHEN_LOADED, False):
            st.rerun(scope="app")
        st.caption(f"Device: {job.device}")
        return
    st.caption(f"Device: {job.device or 'detecting…'} · loading the model "
               f"({job.elapsed():.0f} s)")
    if job.elapsed() > 2 * PAINT_S:     # the page is drawn: now the charts' code
        prefetch_code("prefetch_sidebar")


PREFETCH_CSS = '[class*="st-key-rb_prefetch_"]{visibility:hidden}'
"""Hides :func:`prefetch_code`'s elements (their 1-pixel box showed the slider's top
pixels); set by the app's frame. Hidden, they still mount, and their code is fetched."""


def prefetch_code(key: str, plotly: bool = True) -> None:
    """Hidden elements whose JavaScript Streamlit's page fetches only when one is first
    drawn, drawn while nothing waits for them rather than on the click that needs them:
    - an empty Plotly chart: Streamlit's Plotly bundle (several MB, ~0.5 s here), for the
      first click that draws a chart;
    - a disabled slider: its code (moment.js, numbro, sprintf: ~0.25 s), for the first
      review longer than the head view's window, which shows the window slider;
    - an empty HTML-in-Markdown element: the code that draws the prediction card's stars.
    Drawn by the sidebar's status once the first page is drawn (pandas and plotly cost
    that page 0.5 s), by the Predict page while nothing is predicted yet (each with its
    own ``key``: both may draw in one run), and, the slider alone (``plotly=False``), in
    the head view's slot when it first shows a short review in a session."""
    with st.container(height=1, border=False, key=f"rb_prefetch_{key}"):
        if plotly:
            import pandas  # noqa: F401 - whole before plotly peeks at it (model_loading.py)
            import plotly.graph_objects as go
            st.plotly_chart(go.Figure(layout={"height": 10, "width": 10}), key=key,
                            config={"staticPlot": True, "displayModeBar": False})
        st.slider("preloaded slider", 0, 1, key=f"{key}_slider", disabled=True,
                  label_visibility="collapsed")
        # HTML inside Markdown (the prediction card's stars): Streamlit fetches the code
        # that draws it when the first such element comes, and the first card's stars
        # came 0.1-0.5 s after the rest of the first prediction
        st.markdown("<span></span>", unsafe_allow_html=True)
    st.session_state[state.SLIDER_CODE] = True      # the page keeps the fetched code


def stop_if_failed(info: CheckpointInfo) -> None:
    """A checkpoint whose background load failed: its message, and the page stops here
    (a page that draws before the model is ready calls this instead of waiting)."""
    job = loading(info)
    if job.failed is not None:
        checkpoints.load_error(job.failed)
        st.stop()
    st.session_state[state.RERUN_WHEN_LOADED] = not job.ready


def require_checkpoint() -> CheckpointInfo:
    """The sidebar's checkpoint; with none the page shows the training guide and stops."""
    info = state.current_checkpoint()
    if info is None:
        checkpoints.training_guide(checkpoints.checkpoints_root())
        st.stop()
    return info


def require_predictor() -> tuple[CheckpointInfo, Predictor]:
    """The sidebar's checkpoint and its cached predictor, for a page that needs a model;
    with none (the training guide) or a broken one (its message) the page stops here."""
    info = require_checkpoint()
    if not st.session_state.get(state.SLIDER_CODE) and not loading(info).ready:
        # A click made while the model loads: the page's code for the charts is fetched
        # while this run waits for the model, not after it. The sidebar's own prefetch
        # cannot: its fragment does not run while this run waits.
        with st.sidebar:
            prefetch_code("while_loading")
    try:
        return info, load_predictor(str(info.path), mtime(info.path))
    except CheckpointError as e:
        checkpoints.load_error(e)
        st.stop()


def review_threads(predictor: Predictor):
    """A block running the app's work for one click (a review's prediction, explanations
    and what-if edits; the Map's neighbours) with ``device.threads_for_one_review`` torch
    threads (half the cores, one fewer while a run trains on this CPU); unchanged on a GPU."""
    if predictor.device.type != "cpu":
        return cpu_threads(None)
    return cpu_threads(threads_for_one_review(device_busy(checkpoints.checkpoints_root())))

