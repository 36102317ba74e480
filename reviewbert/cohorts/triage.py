"""Triage of failing reviews: the error taxonomy, the review queue, cohort tags and annotations.

A reviewer works through the queue of a split's mistakes (the properties table: one row per
review, with its key in the shared store, whether the model was wrong, its confidence,
cleanlab's flag and the true and predicted stars), tags what each failure is, writes a
note, relabels a review whose stars are wrong and marks it reviewed. All of that lives in
the shared store (``reviewbert.store.db``), keyed by :func:`reviewbert.cohorts.keys.review_key`,
so a team triaging one split at once sees each other's work.

Tags are short lowercase words. :data:`TAXONOMY` documents the ones every team starts
with; anyone may add others (:func:`tag_name` turns "Battery life" into "battery-life"),
and :func:`vocabulary` lists both, the taxonomy first.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from reviewbert.store.db import MAX_TAG, Store, clean_name

TAXONOMY: dict[str, str] = {
    "sarcasm": "The review says the opposite of what it means (\"Great, it died in a week\"), "
               "so its words point one way and its stars the other.",
    "mixed": "The review praises some aspects and pans others, and its stars depend on which "
             "the writer weighed most.",
    "seller-shipping": "The stars rate the seller, the delivery or the packaging rather than "
                       "the product itself.",
    "label-noise": "The stars contradict the text itself: a slip of the finger, or a review "
                   "posted under the wrong rating.",
    "comparison": "The review judges the product against another one (\"not as good as my old "
                  "phone\"), so its words describe both.",
    "off-topic": "The review is not about the product at all: a question, an unrelated story "
                 "or spam.",
    "truncated": "The review is cut off, or its deciding part lies past the tokens the model "
                 "reads (the run's max length).",
    "other": "None of the above; the review's note says what it is.",
}
"""The documented error taxonomy: tag -> one-sentence definition (docs and the tag picker)."""

ORDERS = ("confidence", "cleanlab")
NEEDED = ("key", "wrong", "confidence")
ANNOTATION_COLUMNS = ("key", "tags", "tagged_by", "tagged_at", "note", "noted_by", "noted_at",
                      "relabel", "relabel_from", "relabelled_by", "relabelled_at", "reviewed",
                      "reviewed_by", "reviewed_at")
_BLANKS = re.compile(r"[\s_]+")


class TriageError(ValueError):
    """A queue or a cohort that cannot be built from what was given (one line, for people)."""


def tag_name(text: str) -> str:
    """A tag as stored: lowercase, each run of blanks and underscores one hyphen ("Battery
    life" is "battery-life"); other characters are kept. StoreError (one line) when it is
    empty, too long or holds control characters."""
    return _BLANKS.sub("-", clean_name(text, "tag", MAX_TAG).lower())


def vocabulary(store: Store) -> list[str]:
    """Every tag to offer: the taxonomy's, then every other tag already in the store, sorted."""
    return list(TAXONOMY) + [t for t in store.tag_names() if t not in TAXONOMY]


# ---------------------------------------------------------------------------- the queue
def _check_table(table: pd.DataFrame) -> None:
    if not isinstance(table, pd.DataFrame):
        raise TriageError(f"the properties table must be a DataFrame, got {type(table).__name__}")
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise TriageError(f"the properties table has no column {', '.join(map(repr, missing))}")


def _bools(values, what: str) -> np.ndarray:
    """True/False values (bools, or 0/1), never a missing one read as True."""
    series = pd.Series(values)
    if series.isna().any():
        raise TriageError(f"{what} has missing values; it must be True or False for every row")
    if series.dtype != bool and not series.isin([0, 1]).all():
        raise TriageError(f"{what} must be True or False, got {series.dtype} values")
    return series.to_numpy(dtype=bool)


def _label_quality(values, n: int) -> np.ndarray:
    if values is None:
        raise TriageError("the cleanlab order needs cleanlab's label-quality scores "
                          "(label_quality=, one per row of the table)")
    try:
        quality = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise TriageError("label_quality must be numbers, one per row of the table") from None
    if len(quality) != n:
        raise TriageError(f"label_quality has {len(quality):,} scores for {n:,} rows")
    return quality


def queue(table: pd.DataFrame, *, order: str = "confidence", reviewed: Iterable[str] = (),
          hide_reviewed: bool = True, only_wrong: bool = True,
          label_quality=None) -> pd.DataFrame:
    """The rows of ``table`` in the order to look at them, with a ``reviewed`` column
    (and ``label_quality`` for the cleanlab order); the table's index is kept.

    ``order="confidence"``: the mistakes the model was surest of first (they are the likely
    label errors and the systematic failures); with ``only_wrong=False`` the right answers
    follow, least sure first. ``order="cleanlab"``: cleanlab's label-quality score, lowest
    (likeliest mislabelled) first, right or wrong alike; ``label_quality`` holds one score
    per row of ``table``, in its order. Missing confidences or scores go last. Rows whose
    key is in ``reviewed`` are left out, or with ``hide_reviewed=False`` put after the rest
    in the same order. Ties keep the table's order."""
    _check_table(table)
    if order not in ORDERS:
        raise TriageError(f"order must be one of {', '.join(ORDERS)}, got {order!r}"[:200])
    out = table.copy()
    wrong = _bools(out["wrong"], "the wrong column")
    done = out["key"].isin(set(reviewed)).to_numpy()
    out["reviewed"] = done
    confidence = pd.to_numeric(out["confidence"], errors="coerce").to_numpy(dtype=float)
    # the sort keys, the most significant first: reviewed ones last, then the order's own
    if order == "cleanlab":
        score = _label_quality(label_quality, len(out))
        out["label_quality"] = score
        keys = [done, np.where(np.isnan(score), np.inf, score)]
    else:
        # wrong answers by falling confidence, then right ones by rising confidence
        signed = np.where(wrong, -confidence, confidence)
        keys = [done, ~wrong, np.where(np.isnan(confidence), np.inf, signed)]
    keep = np.ones(len(out), dtype=bool)
    if only_wrong:
        keep &= wrong
    if hide_reviewed:
        keep &= ~done
    # np.lexsort takes the most significant key last, and is stable: ties keep the table's order
    rank = np.lexsort(keys[::-1])
    rank = rank[keep[rank]]
    return out.iloc[rank]


# ---------------------------------------------------------------------------- tags
def _mask(mask, table: pd.DataFrame) -> np.ndarray:
    """A cohort's rows as booleans, one per row of ``table`` (a Series by its index)."""
    if isinstance(mask, pd.Series) and not mask.index.equals(table.index):
        if not mask.index.isin(table.index).all() or mask.index.has_duplicates:
            raise TriageError("the cohort's mask is indexed by rows that are not the table's")
        mask = mask.reindex(table.index, fill_value=False)
    values = _bools(mask, "the cohort's mask")
    if len(values) != len(table):
        raise TriageError(f"the cohort's mask has {len(values):,} values for {len(table):,} rows")
    return values


def tag_cohort(store: Store, table: pd.DataFrame, mask, tag: str, author: str = "") -> int:
    """Tag every review of a cohort (the rows of ``table`` where ``mask`` is True) in one
    transaction; how many gained the tag. The tag is stored as :func:`tag_name` writes it."""
    _check_table(table)
    rows = _mask(mask, table)
    return store.tag_many(table["key"].to_numpy()[rows].tolist(), tag_name(tag), author)


# ---------------------------------------------------------------------------- annotations
def _when(value) -> pd.Timestamp | None:
    return None if value is None else pd.Timestamp(value)


def annotations(store: Store, keys: Iterable[str]) -> pd.DataFrame:
    """One row per review key (in the order given, each once): its tags (joined by ", ")
    with who put them there and the latest time, its note, its relabel (the stars and the
    data's stars before), whether it was reviewed, and by whom and when. Columns:
    :data:`ANNOTATION_COLUMNS`; a review with none of these has empty cells."""
    keys = list(dict.fromkeys(keys))
    tags: dict[str, list] = {}
    for record in store.tag_records(keys):
        tags.setdefault(record.review_key, []).append(record)
    notes, relabels, reviewed = store.notes(keys), store.relabels(keys), store.reviewed(keys)
    rows = []
    for key in keys:
        held, note, relabel, mark = tags.get(key, []), notes.get(key), relabels.get(key), \
            reviewed.get(key)
        rows.append(dict(
            key=key, tags=", ".join(t.tag for t in held),
            tagged_by=", ".join(dict.fromkeys(t.author for t in held if t.author)),
            tagged_at=_when(max((t.created for t in held), default=None)),
            note=None if note is None else note.note,
            noted_by=None if note is None else note.author,
            noted_at=None if note is None else _when(note.updated),
            relabel=None if relabel is None else relabel.stars,
            relabel_from=None if relabel is None else relabel.previous,
            relabelled_by=None if relabel is None else relabel.author,
            relabelled_at=None if relabel is None else _when(relabel.updated),
            reviewed=mark is not None, reviewed_by=None if mark is None else mark[0],
            reviewed_at=None if mark is None else _when(mark[1])))
    frame = pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS))
    for column in ("relabel", "relabel_from"):
        frame[column] = frame[column].astype("Int64")
    frame["reviewed"] = frame["reviewed"].astype(bool)
    return frame
