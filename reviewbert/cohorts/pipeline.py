"""From a split's predictions to its failing cohorts: the properties table, the error tree
and SliceLine's top slices, as one result the page, the command line and the report share.

The properties are cached beside the predictions (``properties.cached_table``); the tree
and the slices are cheap next to them (``bench/cohorts.py`` times both), so they are
recomputed for each target rather than cached on disk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reviewbert.cohorts import finder, properties

TARGETS = {"wrong": "a wrong prediction", "off_by_2": "a prediction off by 2 stars or more"}
DEPTH = 3
TOP = 20


@dataclass
class CohortsResult:
    target: str
    overall: finder.Cohort
    nodes: list = field(default_factory=list)      # the error tree, root first
    slices: list = field(default_factory=list)     # SliceLine's, worst first

    @property
    def leaves(self) -> list:
        return finder.leaves(self.nodes)

    def to_json(self) -> dict:
        """The command line's JSON: every item's definition as ``query`` (a pandas query over
        the saved properties table), n, errors, error_rate, ci_low, ci_high, and for slices
        p_adjusted."""
        by_rate = sorted(self.leaves, key=lambda c: -c.error_rate)
        return {"target": self.target, "n": self.overall.n, "errors": self.overall.errors,
                "error_rate": self.overall.to_json()["error_rate"],
                "leaves": [c.to_json() for c in by_rate],
                "slices": [c.to_json() for c in self.slices]}


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise ValueError(f"the target is one of {', '.join(TARGETS)} (got {str(target)[:40]!r})")
    return target


def review_properties(preds, *, progress=None, use_cache: bool = True,
                      lexicon=None) -> pd.DataFrame:
    """The split's properties table (cached beside its predictions). ``progress(n)`` is the
    project's bar (n more reviews done: ``reviewbert/progress.py``)."""
    step = _stepper(progress)
    if use_cache:
        return properties.cached_table(preds, progress=step, lexicon=lexicon)
    return properties.build_table(preds, progress=step, lexicon=lexicon)


def _stepper(progress):
    """The properties' ``(done, total)`` callback as increments of a project bar."""
    if progress is None:
        return None
    seen = [0]

    def step(done: int, total: int) -> None:
        progress(max(0, done - seen[0]))
        seen[0] = max(seen[0], done)
    return step


def find_cohorts(table: pd.DataFrame, target: str = "wrong", *, depth: int = DEPTH,
                 top: int = TOP) -> CohortsResult:
    """The error tree and the top slices of one properties table."""
    check_target(target)
    return CohortsResult(target, finder.overall(table, target),
                         finder.error_tree(table, target, max_depth=depth),
                         finder.top_slices(table, target, k=top))


# ------------------------------------------------------------------ a saved slice's reviews
def slice_mask(spec, preds, table: pd.DataFrame | None = None, *, progress=None,
               use_cache: bool = True) -> np.ndarray:
    """Which rows of ``preds`` a saved slice (``analysis.slices.SliceSpec``) holds. A cohort's
    conditions and cleanlab's flag are both read on the split's properties table, computed
    (or read from its cache) only when the slice needs it; raises ``SliceError``."""
    from reviewbert.analysis import slices
    if table is None and (spec.where or spec.label_issue is not None):
        table = review_properties(preds, progress=progress, use_cache=use_cache)
    flagged = table["label_issue"].to_numpy(dtype=bool) if table is not None else None
    return slices.mask_of(spec, preds, flagged, table)


def reviews_in(reviews, preds, mask) -> list:
    """The reviews among ``reviews`` that ``mask`` (row for row with ``preds``) keeps. The
    predictions must be of these very reviews in this order (a cache found by their
    fingerprint is); anything else is refused rather than matched loosely."""
    from reviewbert.analysis.slices import SliceError
    reviews = list(reviews)
    texts = preds.frame["text"].astype(str).tolist()
    if len(reviews) != len(texts) or any(r.text != t for r, t in zip(reviews, texts)):
        raise SliceError(f"the slice was saved on other reviews than these {len(reviews):,}")
    kept = [r for r, keep in zip(reviews, np.asarray(mask, dtype=bool)) if keep]
    if not kept:
        raise SliceError("the slice holds none of these reviews")
    return kept
