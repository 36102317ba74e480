"""One row of documented properties per review: what a failing cohort is defined by.

:data:`PROPERTIES` defines every column (the docs and the page read it). The text's own
properties come from :func:`text_properties` (length, negations, contrast words, VADER
sentiment, textstat readability, punctuation and capitals, the lexicon's aspects and
brands); :func:`build_table` adds what the model and the data say (cleanlab's flag,
near-duplicates, true and predicted stars, the error); :func:`cached_table` keeps the
table beside the split's predictions::

    <predictions folder>/properties.parquet   the table, one row per review, in order
    <predictions folder>/properties.json      written after it: {"format":
                                              "reviewbert-properties/1", "code_version",
                                              "lexicon" (the lexicon's fingerprint),
                                              "inputs" (fingerprint of given flags, or
                                              "default"), "n"}

A cache whose meta differs (another lexicon, a newer :data:`CODE_VERSION`) or that cannot be
read is recomputed; nothing here raises on a review's text, whatever it holds.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from reviewbert.cohorts.keys import review_key
from reviewbert.cohorts.lexicon import Lexicon, load_lexicon
from reviewbert.fsio import atomic_write, atomic_write_json, read_json

FORMAT = "reviewbert-properties/1"
CODE_VERSION = 1
"""Raised whenever a property's definition changes, so every cached table is recomputed."""
TABLE, META = "properties.parquet", "properties.json"
CHUNK = 500
"""Reviews per step: ``progress`` is called after each, and may stop the work by raising."""
SCORED_CHARS = 5_000
"""VADER and textstat read at most this many characters of a review: far more than the model
sees at its longest max_length, and VADER's time grows with the square of a long text's
length ("but" makes it rescan every sentiment), which a hostile file could exploit."""

PROPERTIES: dict[str, str] = {
    "key": "The review's key in the shared store (t1: and a hash of its whitespace-collapsed text).",
    "n_words": "Words in the review: runs of letters or digits, an apostrophe joining one (don't).",
    "n_tokens": "WordPiece tokens of the review before truncation, without [CLS] and [SEP] "
                "(missing when the caller gave none).",
    "truncated": "Whether the model saw only part of the review: n_tokens >= the max_length it "
                 "ran with (False when either is unknown).",
    "negations": "How many of the lexicon's negations the review holds (not, never, n't, ...).",
    "contrast": "How many of the lexicon's contrast words the review holds (but, however, ...).",
    "vader_compound": "VADER's compound sentiment of the first 5,000 characters, from -1 "
                      "(most negative) to +1 (most positive).",
    "vader_pos": "VADER's share of positive sentiment in the first 5,000 characters (0 to 1).",
    "vader_neg": "VADER's share of negative sentiment in the first 5,000 characters (0 to 1).",
    "readability": "textstat's Flesch reading ease of the first 5,000 characters (higher is easier; "
                   "missing for a review without a word).",
    "grade": "textstat's Flesch-Kincaid grade level of the first 5,000 characters (missing for "
             "a review without a word).",
    "exclamation_ratio": "The share of sentences that end in a run of . ! ? holding '!' (a "
                         "sentence ends at such a run before a space or the end; 0 without a word).",
    "question_ratio": "The share of sentences that end in a run of . ! ? holding '?' (counted as "
                      "exclamation_ratio is).",
    "caps_ratio": "Upper-case letters over all letters (0 for a review without a letter).",
    "aspect_<name>": "Whether the review holds any phrase of the lexicon's aspect <name> "
                     "(one column per aspect, in the lexicon's order).",
    "other_brand": "Whether the review names any phone brand of the lexicon (the data cannot say "
                   "which phone a review is about, so any brand named counts).",
    "source": "The file the review came from.",
    "label_issue": "Whether cleanlab flags the review's star rating as probably wrong (False "
                   "for every review when cleanlab cannot run on the split).",
    "near_duplicate": "Whether another review of the split is a near-duplicate of this one.",
    "true_stars": "The review's star rating (1 to 5).",
    "pred_stars": "The predicted stars: the predicted class + 1 with 5 labels; with 3 labels the "
                  "middle of the class's stars (1.5, 3 or 4.5).",
    "error_stars": "pred_stars - true_stars (positive: the model rated higher than the reviewer).",
    "abs_error": "The absolute value of error_stars.",
    "wrong": "Whether the predicted class is not the review's class.",
    "off_by_2": "Whether the predicted class is 2 or more classes from the true one (with 3 "
                "labels: negative for positive or positive for negative).",
    "confidence": "The model's highest class probability for the review.",
}

_WORD = re.compile(r"\w+(?:['’]\w+)*")
# a run of sentence-ending punctuation, whole (possessive, so a long run is read once),
# followed by a non-word character or the end: "3.5" is not an ending
_ENDING = re.compile(r"(?<![.!?])[.!?]++(?!\w)")
_SCANNED = ("vader_compound", "vader_pos", "vader_neg", "readability", "grade",
            "exclamation_ratio", "question_ratio", "caps_ratio")


def columns(lexicon: Lexicon) -> list[str]:
    """The table's columns in order, ``aspect_<name>`` spelled out for ``lexicon``."""
    out = []
    for name in PROPERTIES:
        out += [f"aspect_{a}" for a in lexicon.aspects] if name == "aspect_<name>" else [name]
    return out


def definitions(lexicon: Lexicon | None = None) -> dict[str, str]:
    """:data:`PROPERTIES` for the columns of a table built with ``lexicon`` (each aspect's
    definition names its first phrases)."""
    lexicon = lexicon or load_lexicon()
    out = {}
    for name in columns(lexicon):
        if name.startswith("aspect_") and name[7:] in lexicon.aspects:
            phrases = lexicon.aspects[name[7:]]
            shown = ", ".join(phrases[:6]) + (", ..." if len(phrases) > 6 else "")
            out[name] = f"Whether the review holds any phrase of the aspect {name[7:]} ({shown})."
        else:
            out[name] = PROPERTIES[name]
    return out


# ------------------------------------------------------------------------- one text
@functools.lru_cache(maxsize=1)
def _vader():
    """VADER's analyzer, giving VADER's very scores without its repeated work.

    VADER's two neighbourhood checks lower-case the whole text's word list on each call, once
    per sentiment word and position: they read at most three words before the word and two
    after, so they are handed just that window, with the word's index moved to match.
    """
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    class WindowedVader(SentimentIntensityAnalyzer):
        @staticmethod
        def _negation_check(valence, words_and_emoticons, start_i, i):
            lo = i - start_i - 1        # the first word it reads (VADER calls it with i > start_i)
            return SentimentIntensityAnalyzer._negation_check(
                valence, words_and_emoticons[lo:i + 1], start_i, i - lo)

        @staticmethod
        def _special_idioms_check(valence, words_and_emoticons, i):
            lo = i - 3                  # VADER calls it with i > 2; it reads up to i + 2
            return SentimentIntensityAnalyzer._special_idioms_check(
                valence, words_and_emoticons[lo:i + 3], i - lo)

    return WindowedVader()


def _clean(text) -> str:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    return str(text)


def _head(text: str) -> str:
    """The text VADER and textstat score: at most SCORED_CHARS, cut at a space if there is one."""
    if len(text) <= SCORED_CHARS:
        return text
    cut = text.rfind(" ", SCORED_CHARS // 2, SCORED_CHARS)
    return text[:cut if cut > 0 else SCORED_CHARS]


def _sentiment(head: str) -> tuple[float, float, float]:
    try:
        v = _vader().polarity_scores(head)
        return float(v["compound"]), float(v["pos"]), float(v["neg"])
    except Exception:       # a library's failure on one odd text must not lose the table
        return math.nan, math.nan, math.nan


def _readability(head: str, n_words: int) -> tuple[float, float]:
    if not n_words:         # textstat answers 0.0 for no words: a real (very hard) score
        return math.nan, math.nan
    import textstat
    try:
        # the grade reuses the counts the reading ease cached for this very text
        return float(textstat.flesch_reading_ease(head)), float(textstat.flesch_kincaid_grade(head))
    except Exception:       # a library's failure on one odd text must not lose the table
        return math.nan, math.nan


def _punctuation(text: str, n_words: int) -> tuple[float, float]:
    if not n_words:
        return 0.0, 0.0
    endings = _ENDING.findall(text)
    last = max(text.rfind("."), text.rfind("!"), text.rfind("?"))
    trailing = _WORD.search(text, last + 1) is not None     # a last sentence without an ending
    sentences = max(len(endings) + trailing, 1)
    return (sum("!" in e for e in endings) / sentences, sum("?" in e for e in endings) / sentences)


def _caps(text: str) -> float:
    letters = sum(map(str.isalpha, text))
    return sum(map(str.isupper, text)) / letters if letters else 0.0


def _scan(text: str, n_words: int) -> tuple[float, ...]:
    """The per-text properties that no vectorised count gives (in ``_SCANNED``'s order)."""
    head = _head(text)
    return (*_sentiment(head), *_readability(head, n_words), *_punctuation(text, n_words),
            _caps(text))


# ------------------------------------------------------------------------ many texts
def _chunk(texts: list[str], lexicon: Lexicon) -> pd.DataFrame:
    """The text-only properties of a few hundred texts (without n_tokens, truncated, source)."""
    matcher = lexicon.matcher
    n_words = np.array([len(_WORD.findall(t)) for t in texts], dtype=np.int64)
    counts = np.array([matcher.count(t) for t in texts], dtype=np.int64).reshape(
        len(texts), len(matcher.names))
    by_list = dict(zip(matcher.names, counts.T))
    scanned = np.array([_scan(t, w) for t, w in zip(texts, n_words.tolist())],
                       dtype=np.float64).reshape(len(texts), len(_SCANNED))
    cols: dict = {"key": [review_key(t) for t in texts], "n_words": n_words,
                  "negations": by_list["negations"], "contrast": by_list["contrast"]}
    cols.update({name: scanned[:, i] for i, name in enumerate(_SCANNED)})
    cols.update({f"aspect_{name}": by_list[f"aspect_{name}"] > 0 for name in lexicon.aspects})
    cols["other_brand"] = by_list["brands"] > 0
    return pd.DataFrame(cols)


def _safe_text(value) -> str:
    """A string parquet can store: a lone surrogate becomes "?"."""
    text = _clean(value)
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def _given(values, n: int, name: str) -> list | None:
    if values is None:
        return None
    values = list(values)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} values for {n} reviews")
    return values


def text_properties(texts, *, n_tokens=None, max_length: int | None = None, sources=None,
                    lexicon: Lexicon | None = None, progress=None) -> pd.DataFrame:
    """The text's own properties (``key`` ... ``other_brand``, ``source``), one row per text.

    ``progress(done, total)`` is called after every :data:`CHUNK` texts; when it raises, the
    work stops there and the exception goes to the caller (a page stops a computation its
    user left this way).
    """
    texts = [_clean(t) for t in texts]
    n = len(texts)
    tokens, srcs = _given(n_tokens, n, "n_tokens"), _given(sources, n, "sources")
    lexicon = lexicon or load_lexicon()
    parts = []
    for start in range(0, max(n, 1), CHUNK):        # once with no text: the empty table's columns
        parts.append(_chunk(texts[start:start + CHUNK], lexicon))
        if progress is not None:
            progress(min(start + CHUNK, n), n)
    frame = pd.concat(parts, ignore_index=True)
    if tokens is None:
        frame.insert(2, "n_tokens", np.full(n, np.nan))
        frame.insert(3, "truncated", np.zeros(n, dtype=bool))
    else:
        counts = np.asarray(tokens, dtype=np.int64)
        frame.insert(2, "n_tokens", counts)
        frame.insert(3, "truncated", counts >= max_length if max_length else np.zeros(n, dtype=bool))
    frame["source"] = [_safe_text(s) for s in srcs] if srcs else [""] * n
    return frame


# ------------------------------------------------------------------ with the model
def _flags(preds, given, name: str, compute) -> np.ndarray:
    flags = compute() if given is None else given
    flags = np.asarray(flags, dtype=bool).reshape(-1)
    if len(flags) != preds.n:
        raise ValueError(f"{name} has {len(flags)} values for {preds.n} reviews")
    return flags


def _cleanlab_flags(preds) -> np.ndarray:
    from reviewbert.analysis.label_issues import find_issues
    try:
        return find_issues(preds).flagged
    except Exception:       # cleanlab fails in several ways on a tiny or one-class split
        return np.zeros(preds.n, dtype=bool)


def _near_duplicates(texts: list[str]) -> np.ndarray:
    from reviewbert.cohorts.hygiene import near_duplicate_flags
    return near_duplicate_flags(texts)


def model_columns(preds) -> dict[str, np.ndarray]:
    """true_stars ... confidence (see :data:`PROPERTIES`) of a split's predictions."""
    scheme = preds.scheme
    y, pred = preds.y, preds.pred
    middle = np.array([float(np.mean(scheme.stars_of(c))) for c in range(scheme.num_labels)])
    true_stars = preds.frame["stars"].to_numpy(dtype=np.int64)
    pred_stars = middle[pred]
    error = pred_stars - true_stars
    return {"true_stars": true_stars, "pred_stars": pred_stars, "error_stars": error,
            "abs_error": np.abs(error), "wrong": pred != y, "off_by_2": np.abs(pred - y) >= 2,
            "confidence": preds.confidence.astype(np.float64)}


def build_table(preds, *, flagged=None, near_duplicate=None, lexicon: Lexicon | None = None,
                progress=None) -> pd.DataFrame:
    """The whole properties table of a split's predictions (columns: :func:`columns`).

    ``flagged`` defaults to cleanlab's label issues (all False when cleanlab cannot run),
    ``near_duplicate`` to the hygiene module's near-duplicate flags of the texts.
    """
    lexicon = lexicon or load_lexicon()
    frame = preds.frame
    texts = [_clean(t) for t in frame["text"].tolist()]
    table = text_properties(texts, n_tokens=frame["n_tokens"].to_numpy(),
                            max_length=(preds.meta or {}).get("max_length"),
                            sources=frame["source"].tolist() if "source" in frame else None,
                            lexicon=lexicon, progress=progress)
    table["label_issue"] = _flags(preds, flagged, "flagged", lambda: _cleanlab_flags(preds))
    table["near_duplicate"] = _flags(preds, near_duplicate, "near_duplicate",
                                     lambda: _near_duplicates(texts))
    for name, values in model_columns(preds).items():
        table[name] = values
    return table[columns(lexicon)]


# ---------------------------------------------------------------------------- cache
def _inputs(flagged, near_duplicate) -> str:
    """What the caller gave instead of the defaults, as a fingerprint ("default": nothing)."""
    if flagged is None and near_duplicate is None:
        return "default"
    h = hashlib.sha256()
    for flags in (flagged, near_duplicate):
        h.update(b"-" if flags is None else np.packbits(np.asarray(flags, dtype=bool)).tobytes() + b"|")
    return h.hexdigest()[:20]


def _read_cache(folder: Path, meta: dict, lexicon: Lexicon, preds) -> pd.DataFrame | None:
    """The cached table when its meta is ``meta`` and it is whole, else None."""
    if read_json(folder / META) != meta:
        return None
    try:
        table = pd.read_parquet(folder / TABLE)
    except Exception:       # a damaged file reads as any of pyarrow's errors: recompute it
        return None
    if list(table.columns) != columns(lexicon) or len(table) != preds.n:
        return None
    # the keys are the texts': a table left by other reviews in this folder is not theirs
    if table["key"].tolist() != [review_key(_clean(t)) for t in preds.frame["text"].tolist()]:
        return None
    return table


def cached_table(preds, *, flagged=None, near_duplicate=None, lexicon: Lexicon | None = None,
                 progress=None) -> pd.DataFrame:
    """:func:`build_table`, kept in ``preds.folder`` (see the module docstring) when the
    predictions have one: the second call reads it. A cache that cannot be written is
    skipped; the table is still returned."""
    lexicon = lexicon or load_lexicon()
    kw = dict(flagged=flagged, near_duplicate=near_duplicate, lexicon=lexicon, progress=progress)
    if preds.folder is None:
        return build_table(preds, **kw)
    folder = Path(preds.folder)
    meta = {"format": FORMAT, "code_version": CODE_VERSION, "lexicon": lexicon.fingerprint,
            "inputs": _inputs(flagged, near_duplicate), "n": int(preds.n)}
    table = _read_cache(folder, meta, lexicon, preds)
    if table is not None:
        if progress is not None:
            progress(preds.n, preds.n)
        return table
    table = build_table(preds, **kw)
    try:
        (folder / META).unlink(missing_ok=True)     # unfinished until the new meta lands
        atomic_write(folder / TABLE, lambda tmp: table.to_parquet(tmp, index=False))
        atomic_write_json(folder / META, meta)
    except Exception:       # a read-only folder, a full disk: the table is good, just not kept
        pass
    return table


def save_properties(table: pd.DataFrame, path) -> Path:
    """Write the table as Parquet (``.parquet``/``.pq``) or CSV (anything else), atomically."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        atomic_write(path, lambda tmp: table.to_parquet(tmp, index=False))
    else:
        atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return path
