"""The sidebar's checkpoint, loaded once per server process in the background.

``server/model_loading.BackgroundLoad`` runs in an ``st.cache_resource``: the frame starts
the load on the first run that names the checkpoint, pages draw their controls without
waiting, and whatever needs the model waits for it here, under a "Loading the model…"
spinner. Pages reach the model through ``ui/checkpoints.require_predictor`` (or
``require_checkpoint`` and :func:`loading` when they draw something first), which use this.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import streamlit as st

from reviewbert.model.checkpoint import CheckpointInfo
from reviewbert.model.device import cpu_threads, threads_for_one_review
from reviewbert.server import heap
from reviewbert.server.admission import turn as admission_turn
from reviewbert.server.model_loading import BackgroundLoad
from reviewbert.training.catalog import checkpoints_root
from reviewbert.training.runs import device_busy
from reviewbert.ui import state
from reviewbert.ui.runtime.prefetch import code_fetched, prefetch_code

if TYPE_CHECKING:
    from reviewbert.data.examples import Review
    from reviewbert.model.inference import Predictor

LOADING = "Loading the model…"
RETRY_AFTER_S = 3.0     # a failed load is tried again by the first rerun this much later
_AFTER_MODEL: list[Callable[[], object]] = []     # run by the load's thread: after_model_loads


MTIME_TTL_S = 1.0
"""How long :func:`mtime` reuses what it read: a page run asks several times (the page's key,
each ``loading``, each ``load_predictor``), and each read globs the folder and stats its
files, a visible share of a Predict run's page CPU in a profile of the server. A checkpoint
re-saved in place is seen at most this much later."""
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
    return BackgroundLoad(path, after_load=heap.freeze_long_lived, after_model=_model_ready,
                          after_split=heap.freeze_new, hold=True)


def after_model_loads(work: Callable[[], object]) -> None:
    """Have the load's thread run ``work`` once the model is ready, for every load from
    now on (the frame registers the Predict page's views: imported there, the first click
    on Predict does not wait for them). Registered once, however often it is asked."""
    if work not in _AFTER_MODEL:
        _AFTER_MODEL.append(work)


def _model_ready() -> None:
    """The registered work, then the new objects frozen (``heap.freeze_new``) here rather
    than by the script run that follows."""
    for work in list(_AFTER_MODEL):
        work()
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
    torch import, started at once, slowed the first paint: ``bench/first_second.py``
    measures it). A click that needs the model starts it at once."""
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
    reruns the whole page if the page drew without the model (:func:`rerun_when_loaded`),
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


def rerun_when_loaded(info: CheckpointInfo) -> BackgroundLoad:
    """The checkpoint's load, and, while it runs, a wish that the sidebar's status rerun
    this page once it is done (a page that draws before the model is ready)."""
    job = loading(info)
    st.session_state[state.RERUN_WHEN_LOADED] = not job.ready and job.failed is None
    return job


def wait_for_predictor(info: CheckpointInfo) -> Predictor:
    """The checkpoint's cached predictor, waiting for its load; its CheckpointError if it
    cannot load. A click made while the model loads fetches the charts' code while it
    waits, not after (the sidebar's own prefetch cannot: its fragment does not run while
    this run waits)."""
    if not code_fetched() and not loading(info).ready:
        with st.sidebar:
            prefetch_code("while_loading")
    return load_predictor(str(info.path), mtime(info.path))


def turn(info: CheckpointInfo):
    """The block a heavy run (a prediction and its views) does in its turn among the
    sessions' (first come, first served: ``reviewbert/server/admission.py``); no turn while
    the model loads, which the run would only hold while waiting."""
    return admission_turn(enabled=loading(info).ready)


def review_threads(predictor: Predictor):
    """A block running the app's work for one click (a review's prediction, explanations
    and what-if edits; the Map's neighbours) with ``device.threads_for_one_review`` torch
    threads (half the cores, one fewer while a run trains on this CPU); unchanged on a GPU."""
    if predictor.device.type != "cpu":
        return cpu_threads(None)
    return cpu_threads(threads_for_one_review(device_busy(checkpoints_root())))
