"""The pages' progress bar for long work: ``st.progress`` with the count, the rate and
the time left.

:class:`StreamlitProgress` is the library's ``progress(n)`` callback (the CLI's is
:class:`reviewbert.progress.TqdmProgress`): n is what was just done, in the unit the
work counts (reviews, wordpieces read, passes). ``grow(n)`` adds work found on the way
(Integrated Gradients doubling its steps), ``describe(text)`` names a stage.

Each update sends an element, which is also where Streamlit stops a run that a newer
click has replaced: long work under a bar stops within one batch instead of running on
unseen beside the new run.

Work that cannot count its steps (UMAP) runs in :func:`in_background`: a worker thread
does it, once per key for the whole server, while the script thread shows a bar timed
against a guess. A run stopped by a newer click leaves the worker going, and the next run
that asks for the same key waits for that same job instead of starting another.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

import numpy as np
import streamlit as st

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="reviewbert-background")
_JOBS: dict[str, tuple[Future, float]] = {}
_LOCK = threading.Lock()


class StreamlitProgress:
    """``progress(n)`` callback drawing st.progress with the rate and the time left.
    ``guess`` (seconds, or None): what the starting text says before the first update;
    ``where``: the container (an ``st.empty()`` slot puts the bar in a button's place)."""

    def __init__(self, total: int, what: str, unit: str = "reviews", guess: float | None = None,
                 where=st):
        self.total, self.what, self.unit, self.done = max(int(total), 1), what, unit, 0
        self.before = 0         # done before this run (resumed): not in the rate
        self.t0 = time.perf_counter()
        self.waited = None      # the last waiting() (see there)
        first = f", {about(guess)}" if guess is not None else ""
        self.bar = where.progress(0.0, text=f"{what}: starting{first}…")

    def __call__(self, n: int) -> None:
        if self.waited is not None and n:
            # the work began after the last wait: time the rate from there, not from the bar
            self.t0, self.waited = self.waited, None
        self.done += n
        elapsed = time.perf_counter() - self.t0
        rate = (self.done - self.before) / elapsed if elapsed > 0 else 0.0
        left = max(self.total - self.done, 0) / rate if rate > 0 else float("nan")
        self.bar.progress(min(1.0, self.done / self.total),
                          text=f"{self.what}: {self.done:,} / {self.total:,} {self.unit} · "
                               f"{rate_text(rate, self.unit)} · {about(left)} left")

    def resumed(self, n: int) -> None:
        """``n`` were done before this run (resumed from a partial cache): shown as done,
        left out of the rate."""
        self.before += n
        self(n)

    def waiting(self) -> None:
        """Another session computes this very work: say so (the bar stays empty). Should
        that session stop and this one compute instead, its rate and time left are timed
        from the last wait, not from the bar's start."""
        self.waited = time.perf_counter()
        spent = self.waited - self.t0
        self.bar.progress(0.0, text=f"{self.what}: another session is computing the same; "
                                    f"waiting for it ({spent:.0f} s)…")

    def grow(self, n: int) -> None:
        """More work than planned (the bar steps back to the new share)."""
        self.total += max(int(n), 0)
        self(0)

    def describe(self, what: str) -> None:
        self.what = what
        self(0)

    def close(self) -> None:
        self.bar.empty()


def in_background(key: str, work: Callable[[], object], what: str, guess: float, where=st,
                  poll: float = 0.25):
    """``work()``'s result, computed in a worker thread (one job per ``key`` at a time, for
    every session), while a bar counts the seconds against ``guess``. The work's exception,
    if any, is raised here. ``work`` must not call Streamlit.

    A job finished while nobody waited (its page was stopped) is handed, result or
    exception, to the next run that asks; then the key is free again."""
    with _LOCK:
        job = _JOBS.get(key)
        if job is None:
            job = _JOBS[key] = (_POOL.submit(work), time.perf_counter())
    future, t0 = job
    wait_timed(future, t0, what, guess, where, poll)
    with _LOCK:
        if _JOBS.get(key) is job:
            del _JOBS[key]
    return future.result()


def wait_timed(future: Future, t0: float, what: str, guess: float, where=st,
               poll: float = 0.25) -> None:
    """Until ``future`` is done: a bar timed from ``t0`` (its start, ``time.perf_counter``)
    against ``guess`` seconds, gone when it is done. Nothing is drawn if it already is."""
    if future.done():
        return
    bar = where.progress(0.0, text=f"{what}: starting, {about(guess)}…")
    try:
        while not future.done():
            spent = time.perf_counter() - t0
            late = spent > guess
            bar.progress(min(0.99, spent / max(guess, 1e-3)),
                         text=f"{what}: {spent:.0f} s · " + (
                             f"longer than the {guess:.0f} s guessed" if late
                             else f"{about(guess - spent)} left"))
            wait_for([future], timeout=poll)
    finally:
        bar.empty()


def rate_text(rate: float, unit: str) -> str:
    """"1,234 wordpieces/s", "2.5 reviews/s", or, under one a second, "4.2 s each"."""
    if rate >= 10:
        return f"{rate:,.0f} {unit}/s"
    if rate >= 1:
        return f"{rate:.1f} {unit}/s"
    return f"{1 / rate:.1f} s each" if rate > 0 else f"? {unit}/s"


def about(s: float | None) -> str:
    """"about 12 s", "a few seconds" or "? s": a time left or a guess, in words."""
    text = seconds_text(s)
    return f"about {text}" if text[0].isdigit() else text


def seconds_text(s: float | None) -> str:
    if s is None or not np.isfinite(s):
        return "? s"
    if s < 5:
        return "a few seconds"
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"
