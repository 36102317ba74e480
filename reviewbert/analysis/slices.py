"""Slices: groups of reviews with their own metrics, against the rest of the split.

A slice is a :class:`SliceSpec`: conditions on the source file, the length bucket,
cleanlab's label-issue flag, "contains the word or phrase W", a projector selection
(rows), the true and the predicted rating, and a *cohort*: conditions on the review
properties (``where``, a query of ``reviewbert.cohorts.conditions``, found on the Cohorts
page). Values of one attribute are alternatives
(file a *or* b); attributes combine (file a *and* contains "battery"). Specs are
plain JSON, so they can be named, saved beside the predictions (``slices.json``,
layout in ``analysis/cache.py``) and reused on the Compare tab.

Metrics: accuracy and relaxed accuracy of the slice and of the rest, each with a 95 %
percentile-bootstrap interval, and the *gap* (slice − rest) with its own interval,
the two groups resampled independently (``intervals.difference_interval``). A gap
whose interval lies below 0 is a slice the model is worse on beyond resampling noise;
with dozens of slices a few such will appear by chance (5 % each), so read the table
as where to look, not as proof.

:func:`single_slices` enumerates every one-attribute slice (each file, each length
bucket, flagged / not flagged, and "contains W" for the split's most common content
words) and :func:`slice_table` sorts them by how far their accuracy falls below the rest.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from reviewbert.analysis.breakdown import LENGTH_EDGES
from reviewbert.analysis.intervals import Interval, difference_interval, mean_interval
from reviewbert.cohorts import conditions
from reviewbert.fsio import atomic_write_json

FORMAT = "reviewbert-slices/1"
FILE = "slices.json"
MAX_NAME = 60
MAX_PHRASE = 200
MIN_SLICE = 20          # single-attribute slices smaller than this are left out of the table
WORD_SLICES = 30        # "contains W" slices for this many of the most common content words


class SliceError(ValueError):
    """A slice name or phrase that cannot be used (one line, for people)."""


# ------------------------------------------------------------------ inputs
def check_name(name) -> str:
    """A slice name as stored: whitespace collapsed, 1..60 characters, no control or
    invisible formatting characters (they would make two names look alike)."""
    s = " ".join(str(name or "").split())
    if not s:
        raise SliceError("give the slice a name")
    if len(s) > MAX_NAME:
        raise SliceError(f"a slice name has at most {MAX_NAME} characters ({len(s)} given)")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in s):
        raise SliceError("a slice name cannot hold control or invisible characters")
    return s


def check_phrase(phrase) -> str:
    """The "contains" phrase as matched: whitespace collapsed, 1..200 characters."""
    s = " ".join(str(phrase or "").split())
    if not s:
        raise SliceError("type a word or phrase")
    if len(s) > MAX_PHRASE:
        raise SliceError(f"a phrase has at most {MAX_PHRASE} characters ({len(s)} given)")
    return s


def phrase_pattern(phrase: str) -> re.Pattern:
    """Case-insensitive, whole words at the ends that are word characters ("bad" does not
    match "badly"; "!!" matches anywhere), any run of whitespace between words."""
    s = check_phrase(phrase)
    body = r"\s+".join(re.escape(w) for w in s.split(" "))
    start = r"(?<!\w)" if re.match(r"\w", s) else ""
    end = r"(?!\w)" if re.search(r"\w$", s) else ""
    return re.compile(start + body + end, re.IGNORECASE)


def contains_mask(texts, phrase: str) -> np.ndarray:
    pat = phrase_pattern(phrase)
    return np.fromiter((pat.search(str(t)) is not None for t in texts), dtype=bool,
                       count=len(texts))


def length_labels(max_length: int | None) -> list[str]:
    cut = max_length - 2 if max_length else None
    bounds = [0, *[e for e in LENGTH_EDGES if cut is None or e <= cut]]
    labels = [f"{lo}–{bounds[i + 1] - 1} tokens" for i, lo in enumerate(bounds[:-1])]
    labels.append(f"{bounds[-1]}–{cut} tokens" if cut is not None else f"≥ {bounds[-1]} tokens")
    if cut is not None:
        labels.append(f"> {cut} tokens (truncated)")
    return labels


def length_buckets(n_tokens, max_length: int | None) -> np.ndarray:
    """Each review's length bucket label (the Overview's bins, truncated ones apart)."""
    n = np.asarray(n_tokens)
    cut = max_length - 2 if max_length else None
    edges = [e for e in LENGTH_EDGES if cut is None or e <= cut]
    idx = np.searchsorted(np.asarray(edges), n, side="right")
    if cut is not None:
        idx = np.where(n > cut, len(edges) + 1, idx)
    return np.array(length_labels(max_length), dtype=object)[idx]


# ------------------------------------------------------------------ specs
@dataclass(frozen=True)
class SliceSpec:
    sources: tuple[str, ...] = ()
    lengths: tuple[str, ...] = ()
    label_issue: bool | None = None     # True: flagged by cleanlab; False: not flagged
    contains: str = ""
    rows: tuple[int, ...] = ()          # a projector selection
    true: tuple[int, ...] = ()          # class ids
    predicted: tuple[int, ...] = ()
    where: str = ""                     # a cohort: conditions on the review properties

    def is_empty(self) -> bool:
        return self == SliceSpec()

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict) -> "SliceSpec":
        tup = ("sources", "lengths", "rows", "true", "predicted")
        kw = {k: tuple(d.get(k) or ()) for k in tup}
        kw["rows"] = tuple(int(r) for r in kw["rows"])
        kw["true"], kw["predicted"] = (tuple(int(c) for c in kw["true"]),
                                       tuple(int(c) for c in kw["predicted"]))
        li = d.get("label_issue")
        where = str(d.get("where") or "")
        try:
            conditions.parse_query(where)
        except conditions.ConditionError as e:
            raise SliceError(f"the slice's cohort: {e}") from None
        return cls(**kw, label_issue=None if li is None else bool(li),
                   contains=str(d.get("contains") or ""), where=where)

    def describe(self, names) -> str:
        parts = []
        if self.sources:
            parts.append("file " + " or ".join(self.sources))
        if self.lengths:
            parts.append(" or ".join(self.lengths))
        if self.label_issue is not None:
            parts.append("flagged by cleanlab" if self.label_issue else "not flagged by cleanlab")
        if self.contains:
            parts.append(f"contains “{self.contains}”")
        if self.rows:
            parts.append(f"{len(self.rows):,} selected on the map")
        if self.true:
            parts.append("true " + " or ".join(names[c] for c in self.true))
        if self.predicted:
            parts.append("predicted " + " or ".join(names[c] for c in self.predicted))
        if self.where:
            parts.append(self.where)
        return " · ".join(parts) or "every review"


def mask_of(spec: SliceSpec, preds, flagged=None, properties=None) -> np.ndarray:
    """Which reviews of ``preds`` are in the slice. A cohort (``where``) is read on
    ``properties``, the split's properties table (``reviewbert.cohorts.properties``), row
    for row with ``preds``."""
    m = np.ones(preds.n, dtype=bool)
    f = preds.frame
    if spec.sources:
        m &= f["source"].astype(str).isin(spec.sources).to_numpy()
    if spec.lengths:
        m &= np.isin(length_buckets(preds.n_tokens, preds.meta.get("max_length")), spec.lengths)
    if spec.label_issue is not None:
        if flagged is None:
            raise SliceError("this slice needs cleanlab's label issues, which are not available")
        m &= np.asarray(flagged, dtype=bool) == spec.label_issue
    if spec.contains:
        m &= contains_mask(f["text"].to_numpy(), spec.contains)
    if spec.rows:
        sel = np.zeros(preds.n, dtype=bool)
        rows = np.asarray(spec.rows, dtype=np.int64)
        sel[rows[(rows >= 0) & (rows < preds.n)]] = True
        m &= sel
    if spec.true:
        m &= np.isin(preds.y, spec.true)
    if spec.predicted:
        m &= np.isin(preds.pred, spec.predicted)
    if spec.where:
        m &= _cohort_mask(spec.where, preds.n, properties)
    return m


def _cohort_mask(where: str, n: int, properties) -> np.ndarray:
    if properties is None:
        raise SliceError("this slice is a cohort of review properties, which are not available here")
    if len(properties) != n:
        raise SliceError(f"the properties table has {len(properties):,} rows for {n:,} reviews")
    try:
        return conditions.mask_of(conditions.parse_query(where, properties.columns), properties)
    except conditions.ConditionError as e:
        raise SliceError(f"the slice's cohort: {e}") from None


# ------------------------------------------------------------------ metrics
@dataclass
class SliceStats:
    name: str
    n: int
    n_rest: int
    accuracy: Interval | None
    rest_accuracy: Interval | None
    gap: Interval | None
    relaxed: Interval | None = None
    rest_relaxed: Interval | None = None
    relaxed_gap: Interval | None = None
    attribute: str = ""
    expected: float | None = None       # the slice's accuracy if each review had the rest's
                                        # accuracy for its true rating (its rating mix alone)


def slice_stats(mask, y, pred, name: str = "", *, relaxed: bool = True, n_resamples: int = 1000,
                seed: int = 0, attribute: str = "") -> SliceStats:
    """Accuracy (and relaxed accuracy, ±1 class) of the slice and of the rest, with 95 %
    bootstrap intervals, and the gap slice − rest with its own interval."""
    m = np.asarray(mask, dtype=bool)
    y, pred = np.asarray(y), np.asarray(pred)
    hit = (y == pred).astype(float)
    near = (np.abs(y - pred) <= 1).astype(float)
    kw = dict(n_resamples=n_resamples, seed=seed)
    out = SliceStats(name, int(m.sum()), int((~m).sum()), mean_interval(hit[m], **kw),
                     mean_interval(hit[~m], **kw), difference_interval(hit[m], hit[~m], **kw),
                     attribute=attribute)
    if relaxed:
        out.relaxed, out.rest_relaxed = mean_interval(near[m], **kw), mean_interval(near[~m], **kw)
        out.relaxed_gap = difference_interval(near[m], near[~m], **kw)
    out.expected = expected_accuracy(m, y, hit)
    return out


def expected_accuracy(mask, y, hit) -> float | None:
    """What the slice's accuracy would be if each of its reviews were as easy as the rest's
    reviews of the same true rating: a slice of mostly middle ratings (the hardest) is
    expected to score lower, and only the gap below *this* is the slice's own."""
    m = np.asarray(mask, dtype=bool)
    if not m.any() or m.all():
        return None
    rest_y, rest_hit = y[~m], hit[~m]
    per_class = {c: rest_hit[rest_y == c].mean() for c in np.unique(y[m]) if (rest_y == c).any()}
    vals = [per_class[c] for c in y[m] if c in per_class]
    return float(np.mean(vals)) if vals else None


def frequent_words(texts, top: int = WORD_SLICES, min_reviews: int = MIN_SLICE) -> list[str]:
    """The content words (scikit-learn's English stop-words removed) in the most reviews."""
    from sklearn.feature_extraction.text import CountVectorizer
    if len(texts) == 0:
        return []
    cv = CountVectorizer(binary=True, stop_words="english", token_pattern=r"(?u)\b[^\W\d_]{3,}\b")
    try:
        counts = np.asarray(cv.fit_transform(texts).sum(axis=0)).ravel()
    except ValueError:              # no word at all
        return []
    words = cv.get_feature_names_out()
    order = np.argsort(-counts, kind="stable")
    return [str(words[i]) for i in order[:top] if counts[i] >= min_reviews]


def single_slices(preds, flagged=None, *, words: int = WORD_SLICES,
                  min_size: int = MIN_SLICE) -> list[tuple[str, str, SliceSpec]]:
    """(attribute, slice name, spec) for every one-attribute slice of at least ``min_size``
    reviews that leaves a rest of at least ``min_size``."""
    out = []
    f = preds.frame
    for s in sorted(set(f["source"].astype(str))):
        out.append(("source file", f"file {s}", SliceSpec(sources=(s,))))
    present = set(length_buckets(preds.n_tokens, preds.meta.get("max_length")))
    for label in length_labels(preds.meta.get("max_length")):
        if label in present:
            out.append(("length", label, SliceSpec(lengths=(label,))))
    if flagged is not None:
        out.append(("label issue", "flagged by cleanlab", SliceSpec(label_issue=True)))
    for w in frequent_words(f["text"].astype(str).tolist(), words, min_size):
        out.append(("contains", f"contains “{w}”", SliceSpec(contains=w)))
    keep = []
    for attr, name, spec in out:
        n = int(mask_of(spec, preds, flagged).sum())
        if min_size <= n <= preds.n - min_size:
            keep.append((attr, name, spec))
    return keep


def _row(s: SliceStats) -> dict:
    def v(iv, part):
        return float("nan") if iv is None else float(getattr(iv, part))
    return {"slice": s.name, "attribute": s.attribute, "n": s.n,
            "accuracy": v(s.accuracy, "value"), "low": v(s.accuracy, "low"),
            "high": v(s.accuracy, "high"), "rest_accuracy": v(s.rest_accuracy, "value"),
            "gap": v(s.gap, "value"), "gap_low": v(s.gap, "low"), "gap_high": v(s.gap, "high"),
            "relaxed": v(s.relaxed, "value"), "relaxed_gap": v(s.relaxed_gap, "value"),
            "expected": float("nan") if s.expected is None else s.expected}


def slice_table(preds, flagged=None, specs=None, *, n_resamples: int = 1000) -> pd.DataFrame:
    """Every slice of ``specs`` ((attribute, name, spec); default :func:`single_slices`)
    with its metrics, sorted by how far its accuracy falls below the rest (worst first)."""
    specs = single_slices(preds, flagged) if specs is None else specs
    rows = [_row(slice_stats(mask_of(spec, preds, flagged), preds.y, preds.pred, name,
                             n_resamples=n_resamples, attribute=attr))
            for attr, name, spec in specs]
    cols = ["slice", "attribute", "n", "accuracy", "low", "high", "rest_accuracy", "gap",
            "gap_low", "gap_high", "relaxed", "relaxed_gap", "expected"]
    table = pd.DataFrame(rows, columns=cols)
    return table.sort_values(["gap", "n"], ascending=[True, False]).reset_index(drop=True)


def worst_reading(table: pd.DataFrame, top: int = 3) -> list[str]:
    """One plain line per worst slice (Markdown-free text; slice names are data)."""
    out = []
    for _, r in table.head(top).iterrows():
        sure = ("below the rest beyond resampling noise" if r["gap_high"] < 0 else
                "within resampling noise of the rest")
        line = (f"{r['slice']}: {r['n']:,} reviews, accuracy {r['accuracy']:.1%} "
                f"[{r['low']:.1%}, {r['high']:.1%}] vs {r['rest_accuracy']:.1%} for the rest, "
                f"gap {r['gap']:+.1%} [{r['gap_low']:+.1%}, {r['gap_high']:+.1%}]: {sure}")
        if np.isfinite(r["expected"]) and r["attribute"] != "label issue":
            line += (f"; its mix of ratings alone predicts {r['expected']:.1%}, so "
                     f"{r['accuracy'] - r['expected']:+.1%} is the slice's own")
        if r["attribute"] == "label issue":
            line += (" (by construction: cleanlab flags the reviews whose given rating the "
                     "model confidently disputes, so read it as a reading list, not a finding)")
        out.append(line)
    return out


# ------------------------------------------------------------------ saved slices
def load_saved(folder) -> dict[str, SliceSpec]:
    """{name: spec} saved beside these predictions; a missing or torn file is none."""
    if folder is None:
        return {}
    try:
        d = json.loads((Path(folder) / FILE).read_text(encoding="utf-8"))
        if d.get("format") != FORMAT:
            return {}
        return {check_name(k): SliceSpec.from_json(v) for k, v in (d.get("slices") or {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def save_slice(folder, name: str, spec: SliceSpec) -> str:
    """Save (or replace) ``name``; returns the name as stored."""
    name = check_name(name)
    if spec.is_empty():
        raise SliceError("this slice has no condition: it is every review")
    saved = load_saved(folder)
    saved[name] = spec
    atomic_write_json(Path(folder) / FILE, {
        "format": FORMAT, "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "slices": {k: v.to_json() for k, v in saved.items()}})
    return name


def delete_slice(folder, name: str) -> None:
    saved = load_saved(folder)
    saved.pop(name, None)
    atomic_write_json(Path(folder) / FILE, {"format": FORMAT, "slices": {
        k: v.to_json() for k, v in saved.items()}})
