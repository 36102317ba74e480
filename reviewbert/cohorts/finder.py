"""Finding failing cohorts: an error tree, SliceLine's top slices and error-rate heat maps.

Every cohort is a definition (:mod:`reviewbert.cohorts.conditions`) on the properties table,
one row per review, and its numbers are counted on that table through ``mask_of``, so the
query a reader copies into a notebook (``table.query(cohort.query)``) selects exactly the
rows behind n, errors and the error rate. The root's query is "" (every review), which
``DataFrame.query`` refuses: use the whole table there.

The target is a per-review bool, ``wrong`` (predicted stars differ) or ``off_by_2`` (by two
or more). The model's outcomes (``FEATURES_EXCLUDED``) are never features: they are the
target seen from another side, and a "cohort" of low-confidence reviews explains nothing.
``true_stars`` is a feature: "the true 3-star reviews" is a cohort worth knowing.

- :func:`error_tree`: a scikit-learn decision tree fitted to the target; every node is a
  cohort (its path, each property keeping its tightest bounds). Microsoft's
  ``erroranalysis`` package does the same, but it needs numpy<2 and pandas<2, which our
  pins exclude; scikit-learn's tree is what it wraps anyway.
- :func:`top_slices`: SliceLine (``sliceline``) over binned properties (numbers in quantile
  bins, bools, the source file and the true stars as categories); each slice's numeric
  conditions widened to the best run of adjacent bins, near copies of a better slice
  dropped, and a one-sided exact binomial p-value against the overall error rate,
  adjusted by Benjamini–Hochberg over the family SliceLine evaluated (see :func:`top_slices`).
- :func:`heatmap`: the error rate over two properties, cell by cell.

A review whose value of a property is missing meets no ``<``, ``<=``, ``>``, ``>=`` or ``==``
condition on it (as in ``DataFrame.query``), so the children of a tree node split on that
property may hold fewer reviews than their parent.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import special, stats

from reviewbert.cohorts.conditions import _NAME, Condition, describe, mask_of, to_query

TARGETS = ("wrong", "off_by_2")
FEATURES_EXCLUDED = frozenset({"key", "pred_stars", "error_stars", "abs_error", "wrong", "off_by_2",
                               "confidence", "label_issue"})
"""The review's key and the model's outcomes: features made of the target would 'explain' it.
cleanlab's flag is one of them: it marks the reviews whose given label the model's own
probabilities doubt, so on the demo it holds 87 % of the errors at a 100 % error rate and
every tree and slice would be "label_issue == True". It stays a property (a filter, a
slice, the triage queue's order), not a feature."""
CLASS_COLUMNS = ("true_stars",)
"""Numbers that are classes: sliced and mapped one value at a time (``true_stars == 3``)."""
CONFIDENCE = 0.95
ALPHA_FDR = 0.05
RANDOM_STATE = 0
MIN_ROWS = 50
"""Below this many reviews a slice search finds only noise: :func:`top_slices` returns []."""
MAX_CATEGORIES = 40
"""Text properties (the source file) keep their most frequent values; rarer ones are not cohorts."""
NEAR_COPY = 0.9
"""A slice with this share of its reviews inside a better one, and no higher error rate, is a copy."""
CANDIDATES_PER_SLICE = 10
"""SliceLine candidates asked per slice returned: most of its best are near copies of a few
cohorts (the cohort and one more near-universal condition), dropped before the k are chosen."""
MIN_CELL = 5
"""Heat-map cells with fewer reviews show no error rate: one wrong review of two is not 50 %."""


@dataclass(frozen=True)
class Cohort:
    """A set of reviews given by its conditions, with its error statistics.

    ``kind``: "leaf" or "node" (error tree), "slice" (SliceLine) or "all". ``coverage``: the
    share of all errors that fall in it; ``lift``: its error rate over the overall one.
    ``p_value``/``p_adjusted``/``significant``/``score`` are for slices (None for tree
    nodes); ``node_id``/``parent`` for tree nodes; ``depth`` is the tree depth of a node and
    the number of properties of a slice; ``extra`` holds the rest, for a slice ``family``
    (how many slices the Benjamini–Hochberg correction counted)."""
    kind: str
    conditions: tuple[Condition, ...]
    query: str
    n: int
    errors: int
    error_rate: float
    ci_low: float
    ci_high: float
    coverage: float
    lift: float
    p_value: float | None = None
    p_adjusted: float | None = None
    significant: bool | None = None
    score: float | None = None
    node_id: int | None = None
    parent: int | None = None
    depth: int = 0
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def mask(self, table: pd.DataFrame) -> np.ndarray:
        """Which rows of ``table`` are in the cohort."""
        return mask_of(self.conditions, table)

    def describe(self) -> str:
        return describe(self.conditions)

    def to_json(self) -> dict:
        """A plain dict: conditions as {prop, op, value}, floats rounded, NaN as None."""
        out = {"kind": self.kind,
               "conditions": [{"prop": c.prop, "op": c.op, "value": _plain(c.value)}
                              for c in self.conditions],
               "query": self.query}
        for name in ("n", "errors", "error_rate", "ci_low", "ci_high", "coverage", "lift",
                     "p_value", "p_adjusted", "significant", "score", "node_id", "parent",
                     "depth"):
            out[name] = _plain(getattr(self, name))
        out.update({k: _plain(v) for k, v in self.extra.items()})
        return out


def _plain(value):
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    if not math.isfinite(value):
        return None
    # p-values keep their small magnitudes: rounding 3e-9 to 6 places would print 0
    return float(f"{value:.6g}") if abs(value) < 1e-3 else round(value, 6)


# ------------------------------------------------------------------------- counting
def wilson(errors, n, confidence: float = CONFIDENCE):
    """The Wilson score interval of errors/n (NaN, NaN for n = 0), element-wise for arrays:
    the formula of scipy's ``binomtest(k, n).proportion_ci(method="wilson")`` (Newcombe's
    form, exactly 0 at k = 0 and 1 at k = n), written out because scipy's takes one
    interval per call and a slice search needs hundreds."""
    k, n = np.asarray(errors, dtype=float), np.asarray(n, dtype=float)
    z = special.ndtri(0.5 + 0.5 * confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 2 * (n + z**2)
        center = (2 * n * p + z**2) / denom
        delta = z / denom * np.sqrt(np.maximum(4 * n * p * (1 - p), 0) + z**2)
        lo = np.where(k == 0, 0.0, center - delta)
        hi = np.where(k == n, 1.0, center + delta)
    bad = n <= 0
    lo, hi = np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def _target(table: pd.DataFrame, target: str) -> np.ndarray:
    if target not in table.columns:
        raise ValueError(f"no target column {target!r} (one of {', '.join(TARGETS)})")
    col = table[target]
    return np.asarray(col.fillna(False) if col.hasnans else col, dtype=bool)


class _Masks:
    """The rows each condition selects in one table, computed once: the candidates of a
    slice search share most of their conditions. The AND of them is ``mask_of``."""

    def __init__(self, table: pd.DataFrame):
        self.table, self.memo = table, {}

    def __call__(self, conditions) -> np.ndarray:
        m = np.ones(len(self.table), dtype=bool)
        for c in conditions:
            if c not in self.memo:
                self.memo[c] = c.mask(self.table)
            m &= self.memo[c]
        return m


def _cohort(kind: str, conditions, table: pd.DataFrame, err: np.ndarray, *, masks=None,
            **extra) -> Cohort:
    """A cohort with its numbers counted on ``table`` through ``mask_of`` (or ``masks``,
    a ``_Masks`` of the table: the same AND of the same conditions' masks)."""
    conditions = tuple(conditions)
    m = masks(conditions) if masks is not None else mask_of(conditions, table)
    n, e, total = int(m.sum()), int(err[m].sum()), int(err.sum())
    rate = e / n if n else float("nan")
    base = total / len(err) if len(err) else float("nan")
    lo, hi = wilson(e, n)
    return Cohort(kind=kind, conditions=conditions, query=to_query(conditions), n=n, errors=e,
                  error_rate=rate, ci_low=lo, ci_high=hi,
                  coverage=e / total if total else float("nan"),
                  lift=rate / base if n and base > 0 else float("nan"), **extra)


def overall(table: pd.DataFrame, target: str = "wrong") -> Cohort:
    """Every review, as a cohort (kind "all")."""
    return _cohort("all", (), table, _target(table, target))


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (scipy's ``false_discovery_control``)."""
    p = np.asarray(p_values, dtype=float).ravel()
    if p.size == 0:
        return p
    return stats.false_discovery_control(p, method="bh")


# ------------------------------------------------------------------------- features
def _kind(col: pd.Series) -> str | None:
    if pd.api.types.is_bool_dtype(col):
        return "bool"
    if pd.api.types.is_numeric_dtype(col):
        return "number"
    if col.dtype == object or pd.api.types.is_string_dtype(col):
        return "text"
    return None         # dates and the like: not a property the grammar can compare


def feature_columns(table: pd.DataFrame, features=None, target: str | None = None) -> list[str]:
    """The properties the finder may use: every column (or those of ``features``) that is
    not the key, a model outcome or the ``target``, has a property name, a bool, number or
    text type, and more than one value (a constant column cannot separate anything)."""
    excluded = FEATURES_EXCLUDED | ({target} if target else set())
    if features is not None:
        leaking = sorted(set(features) & excluded)
        if leaking:
            raise ValueError(f"{', '.join(leaking)} cannot be features: they are the model's "
                             f"outcome (or the key), so they leak the target")
        missing = [f for f in features if f not in table.columns]
        if missing:
            raise ValueError(f"no property {missing[0]!r} in this table")
    names = list(table.columns if features is None else features)
    out = []
    for name in names:
        if name in excluded or not isinstance(name, str) or not _NAME.fullmatch(name):
            continue
        col = table[name]
        if _kind(col) is not None and col.nunique(dropna=True) > 1:
            out.append(name)
    return out


def nice_threshold(values, t: float):
    """The roundest number that cuts the sorted unique ``values`` where ``t`` does: any
    number from the last value at or below ``t`` up to (not including) the next one cuts
    alike, so ``n_words <= 150`` rather than ``n_words <= 150.5``. An int when whole."""
    u = np.asarray(values, dtype=float)
    k = int(np.searchsorted(u, t, side="right"))
    if k > 0:
        low = float(u[k - 1])
        for digits in range(0, 7):
            r = round(low, digits)
            if r < low:     # round up: the cut must keep ``low`` on its left
                r = round(r + 10.0**-digits, digits)
            if int(np.searchsorted(u, r, side="right")) == k:
                return _number(r)
    # no 6-decimal number cuts there: the query prints 6 decimals, the condition holds what it prints
    return _number(round(float(t), 6))


def _number(r: float):
    return int(r) if float(r).is_integer() and abs(r) < 2**53 else float(r)


# ------------------------------------------------------------------------- the error tree
@dataclass(frozen=True)
class _Split:
    """What one column of the tree's design matrix is: a property, or one of its values."""
    prop: str
    kind: str                       # "number", "bool" or "onehot"
    value: str | None = None        # the text value of a one-hot column
    values: np.ndarray | None = None    # sorted unique values of a number, for thresholds


def _top_values(col: pd.Series) -> list[str]:
    counts = col.dropna().astype(str).value_counts()
    # ties broken by the value, so the same table gives the same columns in the same order
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [v for v, _ in ordered[:MAX_CATEGORIES]]


def _tree_design(table: pd.DataFrame, columns) -> tuple[np.ndarray, list[_Split]]:
    """The float matrix the tree is fitted on (NaN where a value is missing) and what each
    of its columns means: bools as 0/1, numbers as they are, texts one-hot."""
    blocks, splits = [], []
    for name in columns:
        col = table[name]
        kind = _kind(col)
        if kind == "text":
            text = col.astype(object)
            for v in _top_values(col):
                blocks.append(np.where(col.isna(), np.nan, (text == v).to_numpy(dtype=float)))
                splits.append(_Split(name, "onehot", value=v))
            continue
        x = col.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        blocks.append(x)
        splits.append(_Split(name, kind, values=np.unique(x[np.isfinite(x)])))
    if not blocks:
        return np.zeros((len(table), 0)), []
    return np.column_stack(blocks), splits


def _split_conditions(split: _Split, threshold: float) -> tuple[Condition, Condition]:
    """The (left, right) conditions of a tree split ``x <= threshold``."""
    if split.kind == "bool":
        return Condition(split.prop, "==", False), Condition(split.prop, "==", True)
    if split.kind == "onehot":
        return Condition(split.prop, "!=", split.value), Condition(split.prop, "==", split.value)
    t = nice_threshold(split.values, threshold)
    return Condition(split.prop, "<=", t), Condition(split.prop, ">", t)


def merge_conditions(conditions) -> tuple[Condition, ...]:
    """A path's conditions with each property keeping only its tightest bounds (and no
    ``!=`` beside an ``==`` on the same property), in order of first appearance."""
    upper, lower, equal, unequal, order = {}, {}, {}, {}, []
    for c in conditions:
        if c.prop not in order:
            order.append(c.prop)
        if c.op in ("<", "<="):
            old = upper.get(c.prop)
            upper[c.prop] = c if old is None or (c.value, c.op == "<=") < (old.value, old.op == "<=") \
                else old
        elif c.op in (">", ">="):
            old = lower.get(c.prop)
            lower[c.prop] = c if old is None or (c.value, c.op == ">") > (old.value, old.op == ">") \
                else old
        elif c.op == "==":
            equal[c.prop] = c
        elif c not in unequal.setdefault(c.prop, []):
            unequal[c.prop].append(c)
    out = []
    for prop in order:
        if prop in equal:
            out.append(equal[prop])
            continue
        out.extend(c for c in (lower.get(prop), upper.get(prop)) if c is not None)
        out.extend(unequal.get(prop, ()))
    return tuple(out)


def _fit_tree(x: np.ndarray, err: np.ndarray, max_depth: int, min_leaf: int):
    from sklearn.tree import DecisionTreeClassifier
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_leaf,
                                  random_state=RANDOM_STATE)
    return tree.fit(x, err.astype(int)).tree_


def error_tree(table: pd.DataFrame, target: str = "wrong", *, max_depth: int = 3,
               min_leaf: int | None = None, features=None) -> list[Cohort]:
    """Every node of a decision tree fitted to ``target`` on the properties, root first
    (node ids are scikit-learn's, depth-first). ``min_leaf``: the fewest reviews a leaf may
    hold, by default max(20, 1 % of the reviews). Empty table: []."""
    err = _target(table, target)
    if len(table) == 0:
        return []
    x, splits = _tree_design(table, feature_columns(table, features, target))
    root = _cohort("leaf", (), table, err, node_id=0, parent=None, depth=0)
    if not splits or err.all() or not err.any() or max_depth < 1:
        return [root]
    min_leaf = int(min_leaf or max(20, math.ceil(0.01 * len(table))))
    tree = _fit_tree(x, err, max_depth, min_leaf)
    nodes, stack = [], [(0, None, 0, ())]
    while stack:
        node, parent, depth, path = stack.pop()
        left, right = int(tree.children_left[node]), int(tree.children_right[node])
        leaf = left == -1
        nodes.append(_cohort("leaf" if leaf else "node", path, table, err, node_id=node,
                             parent=parent, depth=depth))
        if not leaf:
            go_left, go_right = _split_conditions(splits[int(tree.feature[node])],
                                                  float(tree.threshold[node]))
            stack.append((right, node, depth + 1, merge_conditions((*path, go_right))))
            stack.append((left, node, depth + 1, merge_conditions((*path, go_left))))
    return sorted(nodes, key=lambda c: c.node_id)


def leaves(nodes) -> list[Cohort]:
    """The leaves of an error tree, worst error rate first (ties: the larger first)."""
    out = [c for c in nodes if c.kind == "leaf"]
    return sorted(out, key=lambda c: (-np.nan_to_num(c.error_rate, nan=-1.0), -c.n, c.node_id))


# ------------------------------------------------------------------------- binning
@dataclass(frozen=True)
class Bins:
    """One property cut into categories: each row's code (-1: missing, or a rare text
    value), and each code's conditions and label."""
    prop: str
    codes: np.ndarray
    conditions: tuple[tuple[Condition, ...], ...]
    labels: tuple[str, ...]
    cuts: tuple = ()        # quantile bins: code i is cuts[i-1] < prop <= cuts[i]

    @property
    def ordered(self) -> bool:
        return bool(self.cuts)

    def range_conditions(self, a: int, z: int) -> tuple[Condition, ...]:
        """The conditions of codes a..z: one category, or a run of adjacent quantile bins."""
        if a == z or not self.ordered:
            return self.conditions[a]
        lo = () if a == 0 else (Condition(self.prop, ">", self.cuts[a - 1]),)
        hi = () if z == len(self.cuts) else (Condition(self.prop, "<=", self.cuts[z]),)
        return lo + hi


def _fmt(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _whole(values) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(np.all(np.isfinite(v)) and np.all(v == np.round(v)))


def _value_bins(col: pd.Series, prop: str, kind: str) -> Bins | None:
    """One category per value: bools, texts (their most frequent values), whole numbers."""
    if kind == "text":
        values = _top_values(col)
        text = col.astype(object)
        text = text.where(text.isna(), text.astype(str))
        codes = pd.Categorical(text, categories=values).codes.astype(np.int64)
    else:
        x = col.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        u = np.unique(x[~np.isnan(x)])
        values = [bool(v) for v in u] if kind == "bool" else [int(v) for v in u]
        codes = np.searchsorted(u, x).astype(np.int64)
        codes[np.isnan(x)] = -1
    if len(values) < 2:
        return None
    return Bins(prop, codes, tuple((Condition(prop, "==", v),) for v in values),
                tuple(str(v) for v in values))


def _quantile_bins(col: pd.Series, prop: str, bins: int) -> Bins | None:
    """Quantile bins ``lo < prop <= hi`` (open at both ends). The cut points are the
    quantiles ``pandas.qcut`` cuts at, duplicates dropped, but a cut at the minimum is kept:
    qcut would merge a heavy minimum (most reviews have no contrast word) with the rest."""
    x = col.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    finite = x[np.isfinite(x)]
    if finite.size == 0 or bins < 2:
        return None
    u = np.unique(finite)
    raw = np.quantile(finite, np.linspace(0, 1, bins + 1)[1:-1])
    cuts = sorted({nice_threshold(u, float(q)) for q in raw})
    cuts = [c for c in cuts if u[0] <= c < u[-1]]     # a cut at the maximum leaves an empty bin
    if not cuts:
        return None
    codes = np.searchsorted(np.asarray(cuts, dtype=float), x, side="left").astype(np.int64)
    codes[np.isnan(x)] = -1
    conds, labels = [], []
    for i in range(len(cuts) + 1):
        lo = cuts[i - 1] if i > 0 else None
        hi = cuts[i] if i < len(cuts) else None
        conds.append(tuple(c for c in (None if lo is None else Condition(prop, ">", lo),
                                       None if hi is None else Condition(prop, "<=", hi)) if c))
        labels.append(f"≤ {_fmt(hi)}" if lo is None else f"> {_fmt(lo)}" if hi is None
                      else f"{_fmt(lo)} – {_fmt(hi)}")
    return Bins(prop, codes, tuple(conds), tuple(labels), cuts=tuple(cuts))


def bin_property(table: pd.DataFrame, prop: str, bins: int = 4, *,
                 by_value: bool | None = None) -> Bins | None:
    """``prop`` cut into categories: bools and texts by value, numbers in quantile bins,
    except ``by_value`` numbers (default: the ``CLASS_COLUMNS``), which must be whole.
    None when the property has fewer than two categories."""
    col = table[prop]
    kind = _kind(col)
    if kind is None:
        return None
    if kind == "number":
        if by_value is None:
            by_value = prop in CLASS_COLUMNS
        if by_value and not _whole(col.dropna().to_numpy(dtype=float)):
            by_value = False        # a value printed to 6 decimals might not equal itself
        if not by_value:
            return _quantile_bins(col, prop, bins)
    return _value_bins(col, prop, kind)


# ------------------------------------------------------------------------- SliceLine
PACK_CHUNK = 8192
"""Slices evaluated at once by the bitset evaluation (bounds its memory to a few tens of MB)."""


def _packed(x_encoded) -> np.ndarray:
    """Each one-hot column of SliceLine's encoded matrix as a row of 64-bit words."""
    dense = np.asarray(x_encoded.toarray(), dtype=bool)
    packed = np.packbits(dense, axis=0)
    packed = np.pad(packed, ((0, -packed.shape[0] % 8), (0, 0)))
    return np.ascontiguousarray(packed.T).view(np.uint64)


def _eval_packed(finder, x_encoded, errors, slices, level):
    """SliceLine's ``_eval_slice`` for 0/1 errors, on bitsets: its sparse product of the
    reviews by the candidates is nearly dense at level 3 and holds hundreds of millions of
    entries on 10,000 reviews; AND-ing the candidates' columns as bitsets gives the same
    [score, errors, max error, size] rows. None where the fast path does not apply."""
    from scipy import sparse
    slices = sparse.csr_matrix(slices)
    errors = np.asarray(errors, dtype=float).ravel()
    if slices.shape[0] == 0 or not np.isin(errors, (0.0, 1.0)).all() \
            or not (np.diff(slices.indptr) == level).all() or not np.asarray(slices.data).all():
        return None
    cache = getattr(finder, "_packed_cache", None)
    if cache is None or cache[0] is not x_encoded:
        ebits = _packed(sparse.csr_matrix(errors.reshape(-1, 1) > 0))[0]
        cache = finder._packed_cache = (x_encoded, _packed(x_encoded), ebits)
    _, columns, ebits = cache
    idx = slices.indices.reshape(-1, level)
    sizes, errs = np.empty(len(idx)), np.empty(len(idx))
    for start in range(0, len(idx), PACK_CHUNK):
        part = idx[start:start + PACK_CHUNK]
        acc = columns[part[:, 0]].copy()
        for j in range(1, level):
            acc &= columns[part[:, j]]
        sizes[start:start + len(part)] = np.bitwise_count(acc).sum(axis=1)
        errs[start:start + len(part)] = np.bitwise_count(acc & ebits).sum(axis=1)
    scores = finder._score(sizes, errs, x_encoded.shape[0])
    return np.column_stack([scores, errs, (errs > 0).astype(float), sizes])


@functools.cache
def _counting_slicefinder():
    """sliceline's Slicefinder, counting the slices it evaluates (the BH family) and
    evaluating them on bitsets. The hooks are private methods of sliceline 0.3.0 (pinned);
    under another version they may not be called: the search is then slower, and the family
    falls back to the one-property slices (see ``top_slices``)."""
    from sliceline.slicefinder import Slicefinder

    class CountingSlicefinder(Slicefinder):
        def fit(self, X, errors):
            self.n_evaluated_ = 0
            self._packed_cache = None
            try:
                return super().fit(X, errors)
            finally:
                self._packed_cache = None       # a copy of the data: not kept on the estimator

        def _create_and_score_basic_slices(self, x_encoded, n_col_x_encoded, errors):
            self.n_evaluated_ += int(n_col_x_encoded)
            return super()._create_and_score_basic_slices(x_encoded, n_col_x_encoded, errors)

        def _eval_slice(self, x_encoded, errors, slices, level):
            self.n_evaluated_ += int(slices.shape[0])
            fast = _eval_packed(self, x_encoded, errors, slices, level)
            return fast if fast is not None else super()._eval_slice(x_encoded, errors, slices, level)

    return CountingSlicefinder


def _search(binned: list[Bins], err: np.ndarray, *, k: int, max_l: int, min_sup: int,
            alpha: float) -> tuple[list[dict[int, tuple[int, int]]], int]:
    """SliceLine's candidates, each {property index: (code, code)}, and how many slices it
    evaluated. A slice on a "missing" code (-1) has no condition in the grammar: left out."""
    codes = np.column_stack([b.codes for b in binned])
    finder = _counting_slicefinder()(alpha=alpha, k=k, max_l=max_l, min_sup=min_sup,
                                     verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # numba's and scikit-learn's notes, not ours to act on
        finder.fit(codes, err.astype(float))
    out = []
    for row in np.asarray(finder.top_slices_, dtype=object):
        chosen = {j: (int(code), int(code)) for j, code in enumerate(row) if code is not None}
        if chosen and min(a for a, _ in chosen.values()) >= 0:
            out.append(chosen)
    one_property = sum(len(np.unique(b.codes)) for b in binned)
    return out, max(getattr(finder, "n_evaluated_", 0), one_property)


def _score(n, e, total_n: int, base: float, alpha: float):
    """SliceLine's score: ``alpha`` weighs the lift, ``1 - alpha`` the size."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return alpha * ((e / n) / base - 1) - (1 - alpha) * (total_n / n - 1)


def _widen(chosen: dict[int, tuple[int, int]], binned: list[Bins], err: np.ndarray,
           alpha: float) -> tuple[dict[int, tuple[int, int]], int]:
    """The slice with each quantile-binned property widened to the run of adjacent bins
    that scores best, the others held (one pass, in property order), and how many widened
    slices were scored. SliceLine sees single bins, so "contrast >= 1" spread over the
    bins (0, 1] and (1, 3] is found as one of them; this finds the whole of it."""
    n_all, base = len(err), float(err.mean())
    chosen, tried = dict(chosen), 0
    for j in sorted(chosen):
        b = binned[j]
        if not b.ordered:
            continue
        rest = np.ones(n_all, dtype=bool)
        for i, (a, z) in chosen.items():
            if i != j:
                rest &= (binned[i].codes >= a) & (binned[i].codes <= z)
        nb = len(b.labels)
        inside = rest & (b.codes >= 0)
        n = np.bincount(b.codes[inside], minlength=nb)
        e = np.bincount(b.codes[inside], weights=err[inside].astype(float), minlength=nb)
        a0, z0 = chosen[j]
        best, best_score = (a0, z0), _score(n[a0:z0 + 1].sum(), e[a0:z0 + 1].sum(), n_all, base, alpha)
        for a in range(a0, -1, -1):
            for z in range(z0, nb):
                if (a, z) == (a0, z0):
                    continue
                tried += 1
                s = _score(n[a:z + 1].sum(), e[a:z + 1].sum(), n_all, base, alpha)
                if s > best_score:
                    best, best_score = (a, z), s
        chosen[j] = best
    return chosen, tried


def _definition(chosen: dict[int, tuple[int, int]], binned: list[Bins]) -> tuple[Condition, ...]:
    return tuple(c for j in sorted(chosen) for c in binned[j].range_conditions(*chosen[j]))


def _candidates(found, binned, table, err, alpha, masks) -> tuple[list[Cohort], int]:
    """The widened candidates as cohorts, one per distinct set of reviews (the shortest
    definition kept: ``n_tokens > 198`` may select exactly the reviews ``n_words > 151``
    does), and how many widened slices were scored."""
    by_rows, tried = {}, 0
    for chosen in found:
        wide, t = _widen(chosen, binned, err, alpha)
        tried += t
        c = _cohort("slice", _definition(wide, binned), table, err, masks=masks, depth=len(wide))
        if c.n == 0:
            continue
        key = np.packbits(masks(c.conditions)).tobytes()
        old = by_rows.get(key)
        if old is None or (len(c.conditions), c.query) < (len(old.conditions), old.query):
            by_rows[key] = c
    return list(by_rows.values()), tried


def top_slices(table: pd.DataFrame, target: str = "wrong", *, k: int = 20, max_l: int = 3,
               min_sup: int | None = None, bins: int = 4, alpha: float = 0.95,
               features=None) -> list[Cohort]:
    """Up to ``k`` slices (conjunctions of at most ``max_l`` binned properties, each of at
    least ``min_sup`` reviews, by default max(20, 1 % of them)) where ``target`` is more
    frequent than overall, best SliceLine score first (``score``): ``alpha`` weighs the lift
    against the size, so a large slice with a high rate ranks above a small one with a
    slightly higher rate that noise alone could give.

    Statistics: each slice's p-value is a one-sided exact binomial test that its error
    rate exceeds the overall one. SliceLine returns ``CANDIDATES_PER_SLICE * k`` candidates
    (then widened, see ``_widen``, and near copies dropped, see ``_drop_near_copies``), but
    it looked at many more slices to pick them, so Benjamini–Hochberg runs over every slice
    it evaluated (the one-property slices and each level's candidates, counted from its
    lattice) and every widened slice scored; those not returned enter with p = 1, which
    can only make the correction stricter. That is still not the whole family: SliceLine
    prunes the lattice by upper bounds computed from the errors, and the pruned slices
    were, in a sense, looked at too. Read ``significant`` (p_adjusted ≤ 0.05) as "unlikely
    to be noise", not as a guarantee. ``extra["family"]`` is the count used.
    Fewer than ``MIN_ROWS`` reviews, no error or no correct review: []."""
    err = _target(table, target)
    n, total = len(table), int(err.sum())
    if n < MIN_ROWS or total in (0, n) or k < 1:
        return []
    binned = [b for b in (bin_property(table, p, bins)
                          for p in feature_columns(table, features, target)) if b is not None]
    if not binned:
        return []
    min_sup = int(min_sup or max(20, math.ceil(0.01 * n)))
    found, evaluated = _search(binned, err, k=CANDIDATES_PER_SLICE * k, max_l=max(1, max_l),
                               min_sup=min_sup, alpha=alpha)
    masks = _Masks(table)
    cands, widened = _candidates(found, binned, table, err, alpha, masks)
    if not cands:
        return []
    family = evaluated + widened
    base = total / n
    # binomtest(e, n, base, alternative="greater").pvalue, for all candidates in one call
    p = stats.binom.sf(np.array([c.errors for c in cands]) - 1, [c.n for c in cands], base)
    adjusted = benjamini_hochberg([*p, *[1.0] * max(0, family - len(cands))])
    out = [replace(c, p_value=float(pv), p_adjusted=float(pa), significant=bool(pa <= ALPHA_FDR),
                   score=float(_score(c.n, c.errors, n, base, alpha)), extra={"family": family})
           for c, pv, pa in zip(cands, p, adjusted) if c.lift > 1]
    out.sort(key=lambda c: (-c.score, -c.error_rate, c.query))
    return _drop_near_copies(out, masks, k)


def _drop_near_copies(slices: list[Cohort], masks: _Masks, k: int) -> list[Cohort]:
    """The slices, best first, less each one whose reviews lie mostly (``NEAR_COPY``) in a
    slice kept before it without an error rate beyond that slice's (its Wilson lower bound
    at or below that slice's rate): "long reviews with a contrast, and no seller
    mentioned" says nothing that "long reviews with a contrast" does not, and neither does
    ``n_words > 151`` beside ``n_tokens > 198``. At most ``k`` kept."""
    kept, kept_rows = [], []
    for c in slices:
        if len(kept) == k:
            break
        m = masks(c.conditions)
        if not any((m & rows).sum() >= NEAR_COPY * c.n and d.error_rate >= c.ci_low
                   for d, rows in zip(kept, kept_rows)):
            kept.append(c)
            kept_rows.append(m)
    return kept


# ------------------------------------------------------------------------- heat maps
HEATMAP_COLUMNS = ("x_bin", "y_bin", "x_order", "y_order", "n", "errors", "error_rate", "query")


def _single_bin(col: pd.Series, prop: str) -> Bins | None:
    """A property with one value: one category, ``prop == value`` where it can be written."""
    values = col.dropna().unique()
    if len(values) != 1 or _kind(col) is None:
        return None
    v = values[0]
    v = bool(v) if isinstance(v, (bool, np.bool_)) else str(v) if _kind(col) == "text" \
        else int(v) if _whole([v]) else float(v)
    written = not isinstance(v, float) or float(repr(round(v, 6))) == v
    codes = np.where(col.notna().to_numpy(), 0, -1).astype(np.int64)
    return Bins(prop, codes, ((Condition(prop, "==", v),) if written else (),), (_fmt(v),))


def _heat_bins(table: pd.DataFrame, prop: str, bins: int) -> Bins | None:
    if prop not in table.columns:
        raise ValueError(f"no property {prop!r} in this table")
    if not isinstance(prop, str) or not _NAME.fullmatch(prop):
        raise ValueError(f"{str(prop)[:40]!r} is not a property name")
    col = table[prop]
    few = _kind(col) == "number" and col.nunique(dropna=True) <= bins \
        and _whole(col.dropna().to_numpy(dtype=float))
    return bin_property(table, prop, bins, by_value=few or None) or _single_bin(col, prop)


def heatmap(table: pd.DataFrame, x: str, y: str, target: str = "wrong",
            bins: int = 5) -> pd.DataFrame:
    """The error rate over two properties, one row per cell (long format): ``x_bin``,
    ``y_bin`` (labels), ``x_order``/``y_order`` (their places on the axes), n, errors,
    ``error_rate`` (NaN below ``MIN_CELL`` reviews) and the cell's ``query``. Numbers are
    cut at quantiles (whole numbers with at most ``bins`` values: one cell per value),
    bools and texts by value (the ``MAX_CATEGORIES`` most frequent texts). Reviews missing
    either property, or holding a rarer text, are in no cell; how many is
    ``cells.attrs["n_missing"]``."""
    err = _target(table, target)
    bx, by = _heat_bins(table, x, bins), _heat_bins(table, y, bins)
    if bx is None or by is None:
        out = pd.DataFrame({c: [] for c in HEATMAP_COLUMNS})
        out.attrs["n_missing"] = len(table)
        return out
    nx, ny = len(bx.labels), len(by.labels)
    known = (bx.codes >= 0) & (by.codes >= 0)
    cell = bx.codes[known] * ny + by.codes[known]
    n = np.bincount(cell, minlength=nx * ny)
    e = np.bincount(cell, weights=err[known].astype(float), minlength=nx * ny).astype(int)
    rows = []
    for i in range(nx):
        for j in range(ny):
            c = i * ny + j
            rate = e[c] / n[c] if n[c] >= MIN_CELL else float("nan")
            query = to_query(merge_conditions((*bx.conditions[i], *by.conditions[j])))
            rows.append((bx.labels[i], by.labels[j], i, j, int(n[c]), int(e[c]), rate, query))
    out = pd.DataFrame(rows, columns=list(HEATMAP_COLUMNS))
    out.attrs["n_missing"] = int((~known).sum())
    return out
