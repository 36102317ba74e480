"""Progress in the terminal: a ``progress(n)`` callback that draws tqdm on stderr.

The library's long work (evaluation, per-rating attention, distillation's teachers)
takes a ``progress(n)`` callback, called with the number of reviews just done; the
CLI passes a :class:`TqdmProgress`, the pages a Streamlit bar (``ui``).
"""
from __future__ import annotations

import sys


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
