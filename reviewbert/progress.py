"""Progress in the terminal: a ``progress(n)`` callback that draws tqdm on stderr.

The library's long work (evaluation, per-rating attention, distillation's teachers)
takes a ``progress(n)`` callback, called with the number of reviews just done; the
CLI passes a :class:`TqdmProgress`, the pages a Streamlit bar (``ui``).
"""
from __future__ import annotations

import sys


def resumed(progress, n: int) -> None:
    """Tell ``progress`` that ``n`` units were done before this run (a run resumed from its
    partial cache): its ``resumed(n)`` where it has one (the bars count them as done but
    not in the rate, so the time left is that of the work still to do), else ``progress(n)``."""
    if progress is not None and n > 0:
        getattr(progress, "resumed", progress)(n)


class TqdmProgress:
    """A progress callback (``progress(n)``) drawing tqdm on stderr, created on the first
    update, so that a cache hit draws nothing. Main process only under ``accelerate``."""

    def __init__(self, total: int, desc: str, enabled: bool = True, unit: str = "review"):
        self.total, self.desc, self.enabled, self.bar = total, desc, enabled, None
        self.unit = unit

    def __call__(self, n: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr)
        self.bar.update(n)

    def resumed(self, n: int) -> None:
        """``n`` done before this run: the bar starts there (tqdm's ``initial``), its rate
        counts only what this run does."""
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr,
                            initial=n)
        else:
            self.bar.update(n)

    def grow(self, n: int) -> None:
        """More work than planned (Integrated Gradients doubling its steps)."""
        self.total += int(n)
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def describe(self, desc: str) -> None:
        """Name what the bar counts now (a stage of a longer job)."""
        self.desc = desc
        if self.bar is not None:
            self.bar.set_description(desc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
