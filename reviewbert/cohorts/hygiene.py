"""Data hygiene: exact and near-duplicate reviews, train/test leakage, conflicting labels.

What the splits already do. ``_dedupe`` in ``reviewbert/data/splits.py`` hashes each
review's final text (outer whitespace stripped, nothing else) and keeps one copy of a text
whose copies agree on the star, dropping every copy of one whose copies disagree; a file
evaluated directly (``data.unique_reviews``) goes through the same rule. So a checkpoint's
own train and test splits never share a byte-identical text. What this module adds:

- **exact duplicates after** :func:`normalize` (case, Unicode compatibility forms, spaces,
  punctuation and emoji runs, zero-width characters): "Great phone!" and "great phone" are
  two texts to ``_dedupe`` and one here;
- **near duplicates**: a review copied with a word changed, found by the cosine of word
  1–2-gram vectors (below), at or above :data:`NEAR`;
- **leakage across two lists**: a test split against the checkpoint's train split
  (``analysis.sources.named_split(meta, "train")``), or a data file evaluated directly
  against the train split it may overlap, which no split-time rule can see;
- **conflicting labels**: duplicate groups whose members carry different star ratings.

Why not cleanlab's Datalab (2.9). Its ``near_duplicate`` check takes feature vectors and
builds a k-nearest-neighbour graph: the obvious features are the model's embeddings, a model
pass over the whole train split. TF-IDF vectors could be passed instead, but the check would
still be the wrong one: "near" is a distance below 0.13 times the data set's median
nearest-neighbour distance (a relative cut, so its meaning changes with the data), each
review keeps at most k neighbours, the k-NN search is brute force over all pairs, and it
looks inside one data set only, with no train-against-test query. Leakage here means a
textual near-copy, which the text alone decides, with an absolute threshold; so it is
computed here, with scikit-learn and scipy.

How near-duplicates are found (:func:`duplicate_pairs`):

1. Each distinct normalized text of at least :data:`MIN_WORDS` words becomes a vector of
   its word 1- and 2-grams (scikit-learn's ``HashingVectorizer``, 2**22 buckets), weighted
   1 + log(count) and scaled to unit length. Word n-grams rather than char_wb 3–5-grams:
   a review has about a fifth as many of them, and their generation (Python code in
   scikit-learn) is the bulk of the cost; bigrams also keep local word order. No IDF: with
   it a pair's similarity would depend on the rest of the list (in a list of two reviews
   the changed words get the largest weights), and a 20-word review with one word changed
   would fall from ~0.92 to ~0.86; hashing also skips building a vocabulary.
2. Candidates are found without the all-pairs product (a dense n x n result: common words
   are shared by nearly every pair). Each vector's features are ordered from the most to
   the least frequent in the list; the leading ones whose norm stays below the threshold t
   are its prefix, the rest its suffix. Since a.b = a_prefix.b + a_suffix.b and
   a_prefix.b <= |a_prefix| < t, a pair at or above t shares a suffix feature of a:
   ``suffix[chunk] @ X.T``, chunk by chunk, lists every such pair (exact, not a sample).
   A bound |a_suffix.b| + |a_prefix| * sqrt(1 - |b on a's suffix features|^2) drops most
   candidates before their cosine is computed.
3. Each review keeps its :data:`NEIGHBOURS` most similar later reviews, so a template
   repeated with small edits thousands of times cannot flood memory; the groups
   (connected components) stay whole.

Very short texts (fewer than :data:`MIN_WORDS` words once normalized) are only ever exact
duplicates: in one or two words a repeat or a single change is most of the text ("good" and
"good good" have a cosine of 0.86), and the thousands of "good" and "great phone" reviews of
a real split would join into a few huge groups. A text that normalizes to nothing (empty,
punctuation, zero-width characters) is never a duplicate.

Pairs are a spanning list, not every pair: m copies of one text are m - 1 pairs (each copy
with the first), and two near texts are one pair between their first copies. Every row
with a duplicate is in at least one pair, and the groups are the ones all pairs would give.
Across two lists (``other``), every row of ``texts`` with a copy in ``other`` is listed,
paired with the first such row of ``other``.

Cache (:func:`cached_report`), beside a split's predictions (``preds.folder``)::

    hygiene_pairs.parquet    one row per pair: scope ("within": row_b is a test row;
                             "train": row_b is a row of the train texts), row_a (int64,
                             test row), row_b (int64), similarity (float32, 1 for exact),
                             kind ("exact" | "near")
    hygiene.json             written last: {"format": FORMAT, "key", "pairs_sha256" (of the
                             parquet's bytes), "settings", and the counts of
                             HygieneReport.to_json()}

``key`` is a sha256 over the test texts, the train texts (or their absence), the
threshold and the settings; a file that does not match it, or a parquet whose bytes do not
match ``pairs_sha256``, is recomputed and overwritten (a folder keeps one hygiene result:
the last one asked for). The conflicts and the leakage table are rebuilt from the pairs
and the texts on reading.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from reviewbert.fsio import atomic_write, atomic_write_json, read_json

NEAR = 0.9
"""Cosine of two reviews' word 1–2-gram vectors at or above which they are near duplicates.
One word changed in a 20-word review (no word repeated) gives 36/39 = 0.923: 19 of 20
words and 17 of 19 word pairs kept. Two different reviews of the same phone share common
words, not runs of them, and stay far below."""
MIN_WORDS = 3
"""Normalized texts shorter than this (in words) are only ever exact duplicates."""
NEIGHBOURS = 20
"""Near pairs kept per review (its most similar later ones): a bound on the pairs table."""
CHUNK = 2_000
"""Reviews per sparse product, at most; progress is reported after each chunk."""
PRODUCT_BUDGET = 4_000_000
"""Stored values per sparse product (candidates of a chunk, or the rows of the pairs whose
cosine is computed): what bounds the search's memory, whatever the list holds."""
N_FEATURES = 2 ** 22
BLOCK = 20_000
"""Texts vectorized, and vectors split into prefix and suffix, at a time."""
FORMAT = "reviewbert-hygiene/1"
REPORT, PAIRS = "hygiene.json", "hygiene_pairs.parquet"
KINDS = ("exact", "near")
SCOPES = ("within", "train")
SETTINGS = {"min_words": MIN_WORDS, "neighbours": NEIGHBOURS, "n_features": N_FEATURES,
            "ngrams": [1, 2], "tf": "sublinear", "idf": False}
_EPS = 1e-5     # float32 dot products: a pair at exactly the threshold must not be lost
_PAIR_COLUMNS = ("row_a", "row_b", "similarity", "kind")

Progress = Callable[[int, int], None]


# ------------------------------------------------------------------ normalizing
@functools.cache
def _table() -> dict[int, str | None]:
    """``str.translate``'s table: format characters (zero-width spaces and joiners), lone
    surrogates and the BMP's private-use characters dropped; punctuation, symbols (emoji
    too) and controls (NUL) made spaces. From the Unicode categories, built once per
    process: ``re`` has no \\p{..}, ``[^\\w\\s]`` would split words at combining marks
    (Devanagari vowel signs), and a regex class of these ranges is slow past the BMP."""
    table: dict[int, str | None] = {}
    # the planes with assigned characters: 0-3, and 14 (tags, variation selectors)
    for c in itertools.chain(range(0x32400), range(0xE0000, 0xE1000)):
        cat = unicodedata.category(chr(c))
        if cat in ("Cf", "Cs", "Co"):
            table[c] = None
        elif cat[0] in "PS" or cat == "Cc":
            table[c] = " "
    return table


def _as_text(x) -> str:
    if isinstance(x, str):
        return x
    if x is None:
        return ""
    try:
        if pd.isna(x):
            return ""
    except (TypeError, ValueError):     # an array-like: not a missing value
        pass
    return str(x)


def _strings(texts) -> pd.Series:
    """Texts as an object column: pandas' default string column is Arrow's, which refuses
    a lone surrogate ("\\ud800"), and a table must show any text it was given."""
    return pd.Series([_as_text(t) for t in texts], dtype=object)


def normalize(text) -> str:
    """The text as duplicates are compared: Unicode NFKC, case-folded, zero-width and format
    characters removed, each punctuation mark, symbol or control made a space, and the
    whitespace runs collapsed to one space. "Great  phone!!" and "great phone" are equal after it."""
    s = unicodedata.normalize("NFKC", _as_text(text))
    # NFKC again after casefold: folding can leave a decomposed sequence ("ǰ")
    s = unicodedata.normalize("NFKC", s.casefold())
    return " ".join(s.translate(_table()).split())


# ------------------------------------------------------------ one list of texts
class _Side:
    """One list of texts: each row's normalized text as a code, the first row of each."""

    def __init__(self, texts):
        norms = np.array([normalize(t) for t in texts], dtype=object)
        self.n = len(norms)
        codes, uniques = pd.factorize(norms, sort=False) if self.n else (np.zeros(0, int), [])
        self.codes = np.asarray(codes, dtype=np.int64)
        self.uniques = np.asarray(uniques, dtype=object)
        self.first = np.unique(self.codes, return_index=True)[1].astype(np.int64)
        words = np.array([0 if not u else u.count(" ") + 1 for u in self.uniques], dtype=np.int64)
        self.valid = words > 0                      # "" is never a duplicate
        self.eligible = np.flatnonzero(words >= MIN_WORDS)     # uniques that get a vector
        if self.n:
            self.codes[~self.valid[self.codes]] = -1

    @functools.cached_property
    def vectors(self) -> sp.csr_matrix:
        return _vectors([self.uniques[u] for u in self.eligible])


def _vectors(texts: list[str]) -> sp.csr_matrix:
    """Unit-length word 1–2-gram vectors, 1 + log(count) weights (no IDF: see the module),
    made :data:`BLOCK` texts at a time so the vectorizer's temporaries stay small."""
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.preprocessing import normalize as unit_rows
    hv = HashingVectorizer(ngram_range=(1, 2), token_pattern=r"\S+", lowercase=False,
                           alternate_sign=False, norm=None, n_features=N_FEATURES,
                           dtype=np.float32)
    blocks = [sp.csr_matrix((0, N_FEATURES), dtype=np.float32)]
    for start in range(0, len(texts), BLOCK):
        x = hv.transform(texts[start:start + BLOCK]).tocsr()
        x.sum_duplicates()
        np.log(x.data, out=x.data)
        x.data += 1
        blocks.append(unit_rows(x, copy=False).astype(np.float32, copy=False))
    return sp.vstack(blocks, format="csr", dtype=np.float32)


# ------------------------------------------------------------------ exact pairs
def _exact_within(side: _Side) -> pd.DataFrame:
    rows = np.flatnonzero(side.codes >= 0)
    firsts = side.first[side.codes[rows]]
    copies = rows != firsts
    return _pairs_frame(firsts[copies], rows[copies], np.ones(int(copies.sum())), "exact")


def _exact_across(a: _Side, b: _Side) -> pd.DataFrame:
    match = pd.Index(b.uniques, dtype=object).get_indexer(a.uniques)
    match[~a.valid] = -1
    rows = np.flatnonzero(a.codes >= 0)
    m = match[a.codes[rows]] if len(rows) else np.zeros(0, np.int64)
    hit = m >= 0
    return _pairs_frame(rows[hit], b.first[m[hit]], np.ones(int(hit.sum())), "exact")


def _pairs_frame(row_a, row_b, similarity, kind) -> pd.DataFrame:
    n = len(row_a)
    kinds = kind if not isinstance(kind, str) else np.full(n, kind, dtype=object)
    return pd.DataFrame({"row_a": np.asarray(row_a, np.int64), "row_b": np.asarray(row_b, np.int64),
                         "similarity": np.asarray(similarity, np.float32),
                         "kind": pd.Series(kinds, dtype=object)})


# ------------------------------------------------------------------- near pairs
def _suffix(x: sp.csr_matrix, df: np.ndarray, threshold: float):
    """(suffix matrix, prefix norms): each row's features past its prefix of the most frequent
    ones whose norm stays below the threshold (see the module docstring); :data:`BLOCK` rows
    at a time, so the sort's temporaries stay small."""
    parts = [_suffix_block(x[start:start + BLOCK], df, threshold)
             for start in range(0, x.shape[0], BLOCK)]
    if not parts:
        return sp.csr_matrix(x.shape, dtype=np.float32), np.zeros(0)
    return (sp.vstack([p[0] for p in parts], format="csr", dtype=np.float32),
            np.concatenate([p[1] for p in parts]))


def _suffix_block(x: sp.csr_matrix, df: np.ndarray, threshold: float):
    lengths = np.diff(x.indptr)
    rows = np.repeat(np.arange(x.shape[0], dtype=np.int64), lengths)
    top = int(df.max(initial=0)) + 1
    # one int64 sort key (a lexsort is slower): rows stay in place, common features first
    order = np.argsort(rows * top + (top - 1 - df[x.indices]), kind="stable")
    sq = x.data[order].astype(np.float64) ** 2
    before = np.concatenate([[0.0], np.cumsum(sq)])
    inside = before[1:] - np.repeat(before[x.indptr[:-1]], lengths)
    # the margin only moves entries into the suffix: more candidates, never fewer pairs
    keep = inside >= threshold * threshold - 1e-4
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=x.shape[0]))])
    suffix = sp.csr_matrix((x.data[order[keep]], x.indices[order[keep]], indptr),
                           shape=x.shape, dtype=np.float32)
    prefix2 = np.bincount(rows[~keep], weights=sq[~keep], minlength=x.shape[0])
    return suffix, np.sqrt(prefix2)


def _near(a: sp.csr_matrix, b: sp.csr_matrix | None, threshold: float, tick) -> tuple:
    """(i, j, cosine) of rows of ``a`` and ``b`` (``b`` None: ``a`` with itself, j > i) at or
    above the threshold, each i keeping its :data:`NEIGHBOURS` most similar."""
    same = b is None
    b = a if same else b
    out = ([], [], [])
    if a.shape[0] == 0 or b.shape[0] == 0:
        tick(a.shape[0])
        return tuple(np.zeros(0, t) for t in (np.int64, np.int64, np.float32))
    df_b = np.bincount(b.indices, minlength=N_FEATURES)
    df = df_b if same else df_b + np.bincount(a.indices, minlength=N_FEATURES)
    suffix, prefix = _suffix(a, df, threshold)
    marks = suffix.copy()
    marks.data[:] = 1
    bt, b2t = b.T.tocsr(), b.multiply(b).T.tocsr()
    # a row's candidates are at most the summed frequencies of its suffix features
    for start, stop in _chunks(marks @ df_b.astype(np.float64)):
        i, j = _candidates(suffix[start:stop], marks[start:stop], bt, b2t, prefix[start:stop],
                           threshold, start if same else None)
        i += start
        cos = _cosines(a, b, i, j)
        ok = cos >= threshold - _EPS
        for part, v in zip(out, _strongest(i[ok], j[ok], np.minimum(cos[ok], 1.0))):
            part.append(v)
        tick(stop - start)
    return tuple(np.concatenate(p) for p in out)


def _chunks(cost: np.ndarray):
    """(start, stop) row ranges of at most :data:`CHUNK` rows and about :data:`PRODUCT_BUDGET`
    candidates each (a single row may exceed it): a list of short reviews made of common
    words has far more candidates per row than the average, and must not grow one product."""
    ends = np.cumsum(cost)
    start, n = 0, len(cost)
    while start < n:
        base = ends[start - 1] if start else 0.0
        fit = int(np.searchsorted(ends, base + PRODUCT_BUDGET, side="right"))
        stop = min(start + CHUNK, n, max(fit, start + 1))
        yield start, stop
        start = stop


def _cosines(a: sp.csr_matrix, b: sp.csr_matrix, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """a[i] . b[j] for each pair, in batches of about :data:`PRODUCT_BUDGET` stored values
    (a pair costs its two rows' lengths: a 100,000-character review is a long row)."""
    size = np.diff(a.indptr)[i] + np.diff(b.indptr)[j]
    ends = np.cumsum(size)
    out = np.empty(len(i), np.float32)
    start = 0
    while start < len(i):
        base = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, base + PRODUCT_BUDGET, side="right")), start + 1)
        rows = a[i[start:stop]].multiply(b[j[start:stop]])
        out[start:stop] = np.asarray(rows.sum(axis=1), dtype=np.float32).ravel()
        start = stop
    return out


def _candidates(suffix, marks, bt, b2t, prefix, threshold, offset):
    """(i within the chunk, j) pairs that share a suffix feature and whose upper bound of
    the cosine reaches the threshold (``offset``: the chunk's first row, when b is a)."""
    shared = (suffix @ bt).tocsr()
    weight = (marks @ b2t).tocsr()
    shared.sort_indices()
    weight.sort_indices()
    i = np.repeat(np.arange(shared.shape[0]), np.diff(shared.indptr))
    j = shared.indices.astype(np.int64)
    if np.array_equal(shared.indptr, weight.indptr) and np.array_equal(shared.indices, weight.indices):
        bound = shared.data + prefix[i] * np.sqrt(np.clip(1 - weight.data, 0, None))
        keep = bound >= threshold - _EPS
    else:       # both products have one pattern; if scipy ever disagrees, skip the bound
        keep = np.ones(len(j), bool)
    if offset is not None:
        keep &= j > i + offset
    return i[keep], j[keep]


def _strongest(i, j, cos):
    """Each i's :data:`NEIGHBOURS` highest-cosine pairs."""
    order = np.lexsort((-cos, i))
    i, j, cos = i[order], j[order], cos[order]
    starts = np.flatnonzero(np.r_[True, i[1:] != i[:-1]]) if len(i) else np.zeros(0, int)
    rank = np.arange(len(i)) - np.repeat(starts, np.diff(np.r_[starts, len(i)]))
    keep = rank < NEIGHBOURS
    return i[keep], j[keep], cos[keep]


def _near_within(side: _Side, threshold: float, tick) -> pd.DataFrame:
    i, j, cos = _near(side.vectors, None, threshold, tick)
    ua, ub = side.eligible[i], side.eligible[j]
    a, b = side.first[ua], side.first[ub]
    return _pairs_frame(np.minimum(a, b), np.maximum(a, b), cos, "near")


def _near_across(a: _Side, b: _Side, threshold: float, tick) -> pd.DataFrame:
    i, j, cos = _near(a.vectors, b.vectors, threshold, tick)
    ua, ub = a.eligible[i], b.eligible[j]
    differ = a.uniques[ua] != b.uniques[ub]         # equal texts are the exact pairs
    ua, ub, cos = ua[differ], ub[differ], cos[differ]
    order = np.argsort(a.codes, kind="stable")      # every test row of each unique text
    counts = np.bincount(a.codes[a.codes >= 0], minlength=len(a.uniques))
    starts = np.searchsorted(a.codes[order], np.arange(len(a.uniques)))
    rep = counts[ua]
    pair = np.repeat(np.arange(len(ua)), rep)
    within = np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)
    rows = order[starts[ua][pair] + within]
    return _pairs_frame(rows, b.first[ub][pair], cos[pair], "near")


# --------------------------------------------------------------------- the API
class _Ticker:
    def __init__(self, total: int, progress: Progress | None):
        self.done, self.total, self.progress = 0, total, progress

    def __call__(self, k: int) -> None:
        self.done += k
        if self.progress is not None:
            self.progress(self.done, self.total)    # raises to stop: the work ends with it


def _check_threshold(threshold: float) -> float:
    t = float(threshold)
    if not 0 < t <= 1:
        raise ValueError(f"the near-duplicate threshold is a cosine in (0, 1], got {threshold!r}")
    return t


def _sorted(pairs: list[pd.DataFrame]) -> pd.DataFrame:
    out = pd.concat(pairs, ignore_index=True) if pairs else _pairs_frame([], [], [], "exact")
    return out.sort_values(["row_a", "row_b", "kind"], kind="stable").reset_index(drop=True)


def duplicate_pairs(texts, threshold: float = NEAR, other=None, *,
                    progress: Progress | None = None) -> pd.DataFrame:
    """Duplicate pairs (row_a, row_b, similarity, kind "exact"|"near") within ``texts``
    (row_a < row_b), or with ``other`` given, across the two lists only (row_a a row of
    ``texts``, row_b of ``other``). A spanning list: see the module docstring.

    ``progress(done, total)`` is called after each chunk of the near-duplicate search
    (texts counted once per distinct normalized text); an exception it raises stops the work.
    """
    t = _check_threshold(threshold)
    a = _Side(texts)
    if other is None:
        tick = _Ticker(len(a.eligible), progress)
        return _sorted([_exact_within(a), _near_within(a, t, tick)])
    b = _Side(other)
    tick = _Ticker(len(a.eligible), progress)
    return _sorted([_exact_across(a, b), _near_across(a, b, t, tick)])


def groups(pairs: pd.DataFrame, n: int) -> np.ndarray:
    """Group id of each of ``n`` rows: the connected components of the pairs (a~b and b~c
    put a, b, c in one group), numbered 0, 1, ... by their first row; -1 for a row in no pair."""
    from scipy.sparse.csgraph import connected_components
    a = np.asarray(pairs["row_a"], np.int64) if len(pairs) else np.zeros(0, np.int64)
    b = np.asarray(pairs["row_b"], np.int64) if len(pairs) else np.zeros(0, np.int64)
    if len(a) and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
        raise ValueError(f"pairs name rows outside 0..{n - 1}")
    graph = sp.coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n)).tocsr()
    _, label = connected_components(graph, directed=False)
    size = np.bincount(label, minlength=label.max() + 1 if n else 0)
    out = np.full(n, -1, np.int64)
    paired = size[label] > 1
    if paired.any():
        _, first = np.unique(label[paired], return_index=True)     # renumber by first row
        order = np.argsort(np.flatnonzero(paired)[first], kind="stable")
        renum = np.empty(len(order), np.int64)
        renum[order] = np.arange(len(order))
        out[paired] = renum[np.unique(label[paired], return_inverse=True)[1]]
    return out


def near_duplicate_flags(texts, threshold: float = NEAR, *,
                         progress: Progress | None = None) -> np.ndarray:
    """True for every review with an exact or near duplicate elsewhere in ``texts``."""
    texts = list(texts)
    return groups(duplicate_pairs(texts, threshold, progress=progress), len(texts)) >= 0


def conflicts(texts, stars, pairs: pd.DataFrame) -> pd.DataFrame:
    """The members (group, row, text, stars) of each duplicate group whose members carry
    different star ratings, sorted by group and row."""
    texts, stars = list(texts), np.asarray(stars)
    if len(stars) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(stars)} star ratings")
    g = groups(pairs, len(texts))
    rows = np.flatnonzero(g >= 0)
    members = pd.DataFrame({"group": g[rows], "row": rows, "stars": stars[rows]})
    kinds = members.groupby("group")["stars"].nunique()
    members = members[members["group"].isin(kinds.index[kinds > 1])]
    members = members.sort_values(["group", "row"]).reset_index(drop=True)
    members.insert(2, "text", _strings(texts[r] for r in members["row"]))
    return members


# ------------------------------------------------------------------ the report
@dataclass
class HygieneReport:
    """Hygiene of one list of test reviews (and its leakage from a train list)."""
    n: int
    n_train: int | None                 # None: no train texts were given
    threshold: float
    exact_pairs: int                    # listed pairs (m copies of a text: m - 1)
    near_pairs: int
    rows_in_duplicates: int             # test rows with an exact or near duplicate in the test rows
    conflicting_groups: int
    conflicting_rows: int
    leaked_rows: list[int]              # test rows with an exact or near duplicate in train, sorted
    pairs: pd.DataFrame                 # within the test rows: row_a, row_b, similarity, kind
    conflicts: pd.DataFrame             # group, row, text, stars
    leakage: pd.DataFrame               # row_a (test), row_b (train), similarity, kind, stars,
                                        # text, train_text
    group: np.ndarray = field(repr=False)   # per test row: its duplicate group, -1 for none
    cached: bool = False                # read from the cache (nothing computed)

    @property
    def near_duplicate(self) -> np.ndarray:
        return self.group >= 0

    @property
    def leaked(self) -> np.ndarray:
        """The leaked test rows, sorted."""
        return np.asarray(self.leaked_rows, dtype=np.int64)

    def to_json(self) -> dict:
        """The counts as a JSON-able dict (the tables are not in it; ``leaked_rows`` is the
        number of leaked test rows)."""
        return {"n": self.n, "n_train": self.n_train, "threshold": self.threshold,
                "exact_pairs": self.exact_pairs, "near_pairs": self.near_pairs,
                "rows_in_duplicates": self.rows_in_duplicates,
                "groups": int(self.group.max() + 1) if self.n else 0,
                "conflicting_groups": self.conflicting_groups,
                "conflicting_rows": self.conflicting_rows, "leaked_rows": len(self.leaked_rows),
                "leaked_exact": int(self.leakage.loc[self.leakage["kind"] == "exact", "row_a"].nunique())}


def _leakage_table(texts, stars, train_texts, across: pd.DataFrame) -> pd.DataFrame:
    rows, train_rows = across["row_a"].to_numpy(np.int64), across["row_b"].to_numpy(np.int64)
    # row_a/row_b as in duplicate_pairs(texts, other=train): the test row, the train row
    out = pd.DataFrame({"row_a": rows, "row_b": train_rows,
                        "similarity": across["similarity"].to_numpy(np.float32),
                        "kind": across["kind"].to_numpy(object), "stars": np.asarray(stars)[rows],
                        "text": _strings(texts[r] for r in rows),
                        "train_text": _strings(train_texts[r] for r in train_rows)})
    return out.sort_values(["row_a", "similarity", "row_b"], ascending=[True, False, True],
                           kind="stable").reset_index(drop=True)


def _assemble(texts, stars, train_texts, within: pd.DataFrame, across: pd.DataFrame | None,
              threshold: float, cached: bool = False) -> HygieneReport:
    texts = list(texts)
    g = groups(within, len(texts))
    bad = conflicts(texts, stars, within)
    if across is None:
        across = _pairs_frame([], [], [], "exact")
    leak = _leakage_table(texts, stars, list(train_texts or []), across)
    kind = within["kind"].to_numpy(object)
    return HygieneReport(
        n=len(texts), n_train=None if train_texts is None else len(train_texts),
        threshold=threshold, exact_pairs=int((kind == "exact").sum()),
        near_pairs=int((kind == "near").sum()), rows_in_duplicates=int((g >= 0).sum()),
        conflicting_groups=int(bad["group"].nunique()), conflicting_rows=len(bad),
        leaked_rows=sorted(int(r) for r in leak["row_a"].unique()), pairs=within, conflicts=bad, leakage=leak,
        group=g, cached=cached)


def _all_pairs(texts, train_texts, threshold: float, progress) -> tuple:
    """(pairs within the test texts, pairs across to the train texts or None)."""
    a = _Side(texts)
    b = None if train_texts is None else _Side(train_texts)
    tick = _Ticker(len(a.eligible) * (1 if b is None else 2), progress)
    within = _sorted([_exact_within(a), _near_within(a, threshold, tick)])
    if b is None:
        return within, None
    return within, _sorted([_exact_across(a, b), _near_across(a, b, threshold, tick)])


def hygiene_report(test_texts, test_stars, train_texts=None, threshold: float = NEAR,
                   progress: Progress | None = None) -> HygieneReport:
    """Duplicates, conflicting labels and (with ``train_texts``) leakage of ``test_texts``.

    ``progress(done, total)``: after each chunk of the near-duplicate search; an exception
    it raises stops the work and comes out of this call."""
    t = _check_threshold(threshold)
    texts = list(test_texts)
    stars = np.asarray(test_stars)
    if len(stars) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(stars)} star ratings")
    train = None if train_texts is None else list(train_texts)
    within, across = _all_pairs(texts, train, t, progress)
    return _assemble(texts, stars, train, within, across, t)


# ---------------------------------------------------------- metrics without rows
METRIC_ROWS = ("n", "accuracy", "relaxed_accuracy", "auc", "loss")


def _metrics_of(y, probs, k: int, intervals: bool) -> tuple[dict, dict]:
    """(compute_metrics' dict, {metric: Interval or None}; empty without ``intervals``)."""
    from reviewbert.analysis.intervals import metric_intervals
    from reviewbert.model.metrics import compute_metrics
    return compute_metrics(y, probs, k), (metric_intervals(y, probs, k) if intervals else {})


def metrics_without(preds, rows, *, intervals: bool = True) -> dict[str, list]:
    """The split's metrics on every row and on the rows not in ``rows`` (the leaked ones,
    say), side by side, as a dict of columns (``pd.DataFrame(result)`` is the table, one row
    per metric): metric ("n", "accuracy", "relaxed_accuracy", "auc", "loss"), all, all_low,
    all_high, without, without_low, without_high, change (without minus all). The values are
    ``model.metrics.compute_metrics``'; low and high its 95 % bootstrap interval
    (``analysis.intervals.metric_intervals``), None without ``intervals``, for "n", or where
    a metric is undefined (an AUC with a class missing, relaxed accuracy of 3 labels)."""
    drop = np.unique(np.asarray(list(rows), dtype=np.int64))
    if len(drop) and (drop[0] < 0 or drop[-1] >= preds.n):
        raise ValueError(f"rows outside 0..{preds.n - 1}")
    keep = np.ones(preds.n, bool)
    keep[drop] = False
    y, probs, k = preds.y, preds.probs, preds.scheme.num_labels
    out: dict[str, list] = {"metric": list(METRIC_ROWS)}
    for side, mask in (("all", slice(None)), ("without", keep)):
        values, ivs = _metrics_of(y[mask], probs[mask], k, intervals)
        out[side] = [values.get(m) for m in METRIC_ROWS]
        out[f"{side}_low"] = [getattr(ivs.get(m), "low", None) for m in METRIC_ROWS]
        out[f"{side}_high"] = [getattr(ivs.get(m), "high", None) for m in METRIC_ROWS]
    out["change"] = [None if a is None or b is None else b - a
                     for a, b in zip(out["all"], out["without"])]
    return out


# ------------------------------------------------------------------------ cache
def fingerprint(texts, train_texts, threshold: float) -> str:
    """sha256 over the texts, the train texts (or their absence), threshold and settings."""
    h = hashlib.sha256(json.dumps({"format": FORMAT, "threshold": float(threshold),
                                   "settings": SETTINGS}, sort_keys=True).encode())
    for name, part in (("test", texts), ("train", train_texts)):
        h.update(f"\0{name}:{'none' if part is None else len(part)}\0".encode())
        for t in part if part is not None else ():
            b = _as_text(t).encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little") + b)      # length-prefixed: no ambiguity
    return h.hexdigest()


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_cache(folder: Path, key: str, n: int, n_train: int | None):
    """(within, across or None) from the cache, or None when it is missing, stale or damaged."""
    meta = read_json(folder / REPORT)
    if not meta or meta.get("format") != FORMAT or meta.get("key") != key:
        return None
    try:
        if _file_sha(folder / PAIRS) != meta.get("pairs_sha256"):
            return None
        frame = pd.read_parquet(folder / PAIRS)
        scope, kind = frame["scope"].astype(str), frame["kind"].astype(str)
        a, b = frame["row_a"].to_numpy(np.int64), frame["row_b"].to_numpy(np.int64)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    limit_b = np.where(scope == "within", n, -1 if n_train is None else n_train)
    if not (scope.isin(SCOPES).all() and kind.isin(KINDS).all() and (a >= 0).all()
            and (a < n).all() and (b >= 0).all() and (b < limit_b).all()):
        return None
    parts = []
    for s in SCOPES:
        part = frame[scope == s]
        parts.append(_pairs_frame(part["row_a"], part["row_b"], part["similarity"],
                                  part["kind"].astype(str).to_numpy(object)))
    return parts[0], (parts[1] if n_train is not None else None)


def _write_cache(folder: Path, key: str, report: HygieneReport, within, across) -> None:
    parts = [within.assign(scope="within")]
    if across is not None:
        parts.append(across.assign(scope="train"))
    frame = pd.concat(parts, ignore_index=True)[["scope", *_PAIR_COLUMNS]]
    (folder / REPORT).unlink(missing_ok=True)     # unfinished until the new JSON lands
    atomic_write(folder / PAIRS, lambda tmp: frame.to_parquet(tmp, index=False))
    atomic_write_json(folder / REPORT, {"format": FORMAT, "key": key,
                                        "pairs_sha256": _file_sha(folder / PAIRS),
                                        "settings": SETTINGS, **report.to_json()})


def cached_report(preds, train_texts=None, threshold: float = NEAR,
                  progress: Progress | None = None) -> HygieneReport:
    """:func:`hygiene_report` of a split's predictions (its texts and stars), read from or
    written to ``preds.folder`` (see the module docstring); without a folder, or one that
    cannot be written, it is computed each time."""
    t = _check_threshold(threshold)
    texts = preds.frame["text"].tolist()
    stars = preds.frame["stars"].to_numpy()
    train = None if train_texts is None else list(train_texts)
    folder = None if preds.folder is None else Path(preds.folder)
    key = fingerprint(texts, train, t)
    got = _read_cache(folder, key, len(texts), None if train is None else len(train)) \
        if folder is not None else None
    if got is not None:
        return _assemble(texts, stars, train, got[0], got[1], t, cached=True)
    within, across = _all_pairs(texts, train, t, progress)
    report = _assemble(texts, stars, train, within, across, t)
    if folder is not None:
        try:
            _write_cache(folder, key, report, within, across)
        except OSError:
            pass        # nowhere writable: the report is still good, just not kept
    return report
