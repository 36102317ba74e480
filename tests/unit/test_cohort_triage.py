"""The triage (reviewbert/cohorts/triage.py) and the fix loop's export (reviewbert/cohorts/fix.py).

On a properties table built by hand and a SQLite store in tmp_path: the taxonomy and the
tag vocabulary, the queue in both orders with reviewed rows hidden or last, tagging a
cohort, the annotations of reviews, the corrected data file read back by reviewbert.data
with relabels, duplicates and tag drops applied, the annotations export (CSV cells that
would run as formulas quoted), and hostile texts: refused in one line, nothing half written.
"""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest

from reviewbert.cohorts import fix, triage
from reviewbert.cohorts.keys import review_key
from reviewbert.data import DataReport, iter_reviews
from reviewbert.store import db

from hostile_texts import LONG


@pytest.fixture(autouse=True)
def _fresh_engines():
    yield
    db.close_all()


@pytest.fixture
def store(tmp_path):
    return db.open_store(f"sqlite:///{tmp_path / 'store.db'}")


def one_line(error, fn, *args, **kw) -> str:
    with pytest.raises(error) as info:
        fn(*args, **kw)
    message = str(info.value)
    assert message and "\n" not in message, repr(message)
    return message


def properties() -> pd.DataFrame:
    """Eight reviews: five mistakes (one with no confidence), three right answers."""
    rows = [  # key, wrong, confidence, label_issue, true, pred
        ("a", True, 0.61, False, 1, 3),
        ("b", True, 0.97, True, 5, 1),
        ("c", False, 0.99, False, 4, 4),
        ("d", True, 0.80, True, 2, 5),
        ("e", False, 0.52, False, 3, 3),
        ("f", True, float("nan"), False, 4, 2),
        ("g", True, 0.97, False, 1, 2),
        ("h", False, 0.75, False, 5, 5),
    ]
    table = pd.DataFrame(rows, columns=["key", "wrong", "confidence", "label_issue",
                                        "true_stars", "pred_stars"])
    table.index = [f"row{i}" for i in range(len(table))]    # not 0..n: the index is kept
    return table


# ------------------------------------------------------------------ taxonomy
def test_the_taxonomy_is_documented_and_the_vocabulary_adds_the_stores_tags(store):
    assert list(triage.TAXONOMY) == ["sarcasm", "mixed", "seller-shipping", "label-noise",
                                     "comparison", "off-topic", "truncated", "other"]
    for tag, definition in triage.TAXONOMY.items():
        assert triage.tag_name(tag) == tag and len(tag) <= db.MAX_TAG
        assert definition[0].isupper() and definition.endswith(".") and "\n" not in definition
    assert triage.vocabulary(store) == list(triage.TAXONOMY)
    store.tag("k1", "battery")
    store.tag("k2", "sarcasm")
    store.tag("k2", "a-custom-one")
    assert triage.vocabulary(store) == list(triage.TAXONOMY) + ["a-custom-one", "battery"]
    assert triage.tag_name("  Battery  life_Issue ") == "battery-life-issue"
    assert "control" in one_line(db.StoreError, triage.tag_name, "bad\x00tag")
    assert "the most is 40" in one_line(db.StoreError, triage.tag_name, "t" * 41)


# ------------------------------------------------------------------ the queue
def test_the_queue_puts_the_surest_mistakes_first():
    table = properties()
    got = triage.queue(table)
    assert list(got["key"]) == ["b", "g", "d", "a", "f"]      # ties keep the table's order
    assert list(got.index) == ["row1", "row6", "row3", "row0", "row5"]
    assert not got["reviewed"].any() and list(table.columns) == list(properties().columns)
    every = triage.queue(table, only_wrong=False)
    # the right answers follow, the least sure first
    assert list(every["key"]) == ["b", "g", "d", "a", "f", "e", "h", "c"]


def test_reviewed_rows_are_hidden_or_shown_last():
    table = properties()
    assert list(triage.queue(table, reviewed={"b", "a", "c"})["key"]) == ["g", "d", "f"]
    shown = triage.queue(table, reviewed={"b": ("ann", None), "a": ("bob", None)},
                         hide_reviewed=False)
    assert list(shown["key"]) == ["g", "d", "f", "b", "a"]
    assert list(shown["reviewed"]) == [False, False, False, True, True]


def test_the_cleanlab_order_puts_the_lowest_label_quality_first():
    table = properties()
    quality = np.array([0.30, 0.05, 0.01, 0.50, 0.20, np.nan, 0.05, 0.90])
    got = triage.queue(table, order="cleanlab", label_quality=quality)
    assert list(got["key"]) == ["b", "g", "a", "d", "f"]
    assert list(got["label_quality"])[:4] == [0.05, 0.05, 0.30, 0.50]
    every = triage.queue(table, order="cleanlab", label_quality=list(quality), only_wrong=False,
                         reviewed={"c"}, hide_reviewed=False)
    assert list(every["key"]) == ["b", "g", "e", "a", "d", "h", "f", "c"]


@pytest.mark.parametrize("kw, words", [
    (dict(order="cleanlab"), "needs cleanlab's label-quality scores"),
    (dict(order="cleanlab", label_quality=[0.1, 0.2]), "2 scores for 8 rows"),
    (dict(order="cleanlab", label_quality=["x"] * 8), "must be numbers"),
    (dict(order="random"), "order must be one of confidence, cleanlab"),
])
def test_a_queue_that_cannot_be_built_says_why_in_one_line(kw, words):
    assert words in one_line(triage.TriageError, triage.queue, properties(), **kw)


def test_a_table_without_the_columns_or_with_missing_flags_is_refused():
    assert "no column 'wrong'" in one_line(triage.TriageError, triage.queue,
                                            properties().drop(columns="wrong"))
    table = properties()
    table["wrong"] = table["wrong"].astype(object)
    table.loc["row2", "wrong"] = None
    assert "missing values" in one_line(triage.TriageError, triage.queue, table)
    assert "DataFrame" in one_line(triage.TriageError, triage.queue, [1, 2])


# ------------------------------------------------------------------ tags and annotations
def test_tag_cohort_tags_the_cohorts_reviews_once(store):
    table = properties()
    mask = table["label_issue"].to_numpy()
    assert triage.tag_cohort(store, table, mask, "Label noise", author="ann") == 2
    assert store.tags() == {"b": ["label-noise"], "d": ["label-noise"]}
    assert triage.tag_cohort(store, table, table["wrong"], "label-noise", author="bob") == 3
    assert triage.tag_cohort(store, table, table["wrong"], "label-noise") == 0
    # a Series mask counts by its index, whatever its order
    picked = pd.Series([True, True], index=["row7", "row2"])
    assert triage.tag_cohort(store, table, picked, "mixed") == 2
    assert store.tags(["c", "h"]) == {"c": ["mixed"], "h": ["mixed"]}
    assert "3 values for 8 rows" in one_line(triage.TriageError, triage.tag_cohort, store, table,
                                             [True] * 3, "mixed")
    assert "not the table's" in one_line(triage.TriageError, triage.tag_cohort, store, table,
                                         pd.Series([True], index=["nope"]), "mixed")
    assert "control" in one_line(db.StoreError, triage.tag_cohort, store, table,
                                 table["wrong"], "x\x00y")
    assert store.tag_names() == ["label-noise", "mixed"]


def test_annotations_give_every_reviews_tags_note_relabel_and_mark(store):
    store.tag("a", "sarcasm", author="ann")
    store.tag("a", "mixed", author="bob")
    store.set_note("a", "Irony about the battery.", author="ann")
    store.relabel("a", 1, previous=5, author="cy")
    store.mark_reviewed(["a", "b"], author="dee")
    got = triage.annotations(store, ["a", "b", "c", "a"])
    assert list(got.columns) == list(triage.ANNOTATION_COLUMNS)
    assert list(got["key"]) == ["a", "b", "c"]
    a, b, c = (got.iloc[i] for i in range(3))
    assert (a["tags"], a["tagged_by"], a["note"], a["noted_by"]) == (
        "mixed, sarcasm", "bob, ann", "Irony about the battery.", "ann")
    assert (a["relabel"], a["relabel_from"], a["relabelled_by"]) == (1, 5, "cy")
    assert a["reviewed"] and a["reviewed_by"] == "dee" and a["reviewed_at"].tzinfo is not None
    assert b["tags"] == "" and pd.isna(b["relabel"]) and b["reviewed"]
    assert not c["reviewed"] and pd.isna(c["note"]) and pd.isna(c["reviewed_at"])
    assert str(got["relabel"].dtype) == "Int64"


# ------------------------------------------------------------------ the corrected file
def read_back(path) -> list[tuple[str, int]]:
    """The reviews the project's own reader finds in ``path`` (none skipped)."""
    report = DataReport()
    got = list(iter_reviews(path, report=report))
    (file_report,) = report.files
    assert file_report.columns["text"] == "text" and file_report.columns["rating"] == "rating"
    assert sum(file_report.skipped.values()) == 0
    return got


def test_the_corrected_file_applies_the_triage_and_reads_back_the_same(store, tmp_path):
    texts = ["Great phone, five stars.", "Terrible: the screen died.", "Great phone, five stars.",
             "Wow, a brick. Just what I wanted.", "Shipping took a month.", "Fine for the price.",
             "Battery lasts two days, camera is poor.", "Ok."]
    stars = [5, 1, 5, 5, 2, 3, 3, 4]
    sources = ["a.jsonl"] * 4 + ["b.csv"] * 4
    keys = [review_key(t) for t in texts]
    store.relabel(keys[3], 1, previous=5, author="ann")          # sarcasm labelled 5
    store.relabel(keys[5], 4, previous=3)
    store.relabel(review_key("not in this split"), 2, previous=4)
    store.tag(keys[4], "seller-shipping")
    store.tag(keys[7], "off-topic")
    store.tag(keys[7], "seller-shipping")
    store.tag(keys[6], "mixed")
    rows, summary = fix.corrected_reviews(
        texts, np.array(stars), sources, relabels=store.relabels(), drop_keys={keys[1]},
        duplicate_rows={2}, drop_tagged={"seller-shipping", "off-topic"}, tags=store.tags())
    assert rows == [{"text": texts[0], "rating": 5, "source": "a.jsonl"},
                    {"text": texts[3], "rating": 1, "source": "a.jsonl"},
                    {"text": texts[5], "rating": 4, "source": "b.csv"},
                    {"text": texts[6], "rating": 3, "source": "b.csv"}]
    assert summary == dict(rows_in=8, dropped_keys=1, dropped_duplicates=1, dropped_tagged=2,
                           dropped_by_tag={"off-topic": 1, "seller-shipping": 2}, relabelled=2,
                           relabels_not_in_data=1, rows_out=4)
    path = tmp_path / "out" / "corrected.jsonl"
    assert fix.write_corrected(rows, path) == 4
    assert read_back(path) == [(r["text"], r["rating"]) for r in rows]
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"text": texts[0], "rating": 5, "source": "a.jsonl"}
    # plain {key: stars} relabels and no sources work too
    rows, summary = fix.corrected_reviews(texts[:2], stars[:2], None, relabels={keys[1]: 2})
    assert rows == [{"text": texts[0], "rating": 5}, {"text": texts[1], "rating": 2}]
    assert summary["relabelled"] == 1 and summary["rows_out"] == 2


@pytest.mark.parametrize("kw, words", [
    (dict(stars=[5]), "2 texts, 1 stars"),
    (dict(stars=[5, 6]), "row 1: the stars must be whole stars 1-5, got 6"),
    (dict(relabels={"k": 0}), "the relabel of k must be whole stars 1-5"),
    (dict(duplicate_rows={2}), "duplicate rows must be row numbers 0-1, got 2"),
    (dict(drop_tagged={"x"}), "needs their tags"),
    (dict(texts=["ok", None]), "row 1: the text must be text, got NoneType"),
])
def test_corrections_that_cannot_apply_are_refused_in_one_line(kw, words):
    args = {**dict(texts=["ok", "fine"], stars=[1, 2], sources=None), **kw}
    texts, stars, sources = args.pop("texts"), args.pop("stars"), args.pop("sources")
    assert words in one_line(fix.FixError, fix.corrected_reviews, texts, stars, sources, **args)


def test_hostile_texts_in_the_corrected_file_are_kept_or_refused_whole(tmp_path):
    path = tmp_path / "corrected.jsonl"
    nul = "before\x00after \x1b[31mred\x1b[0m\r\nline two\u2028sep 'q' \"dq\" 😀"
    rows = [{"text": nul, "rating": 2, "source": "s"}, {"text": LONG, "rating": 4, "source": "s"}]
    assert fix.write_corrected(rows, path) == 2
    assert read_back(path) == [(nul, 2), (LONG, 4)]             # verbatim: the keys stay
    before = path.read_bytes()
    for bad, words in [({"text": "lone \ud800 half", "rating": 3}, "review 2 is not valid Unicode"),
                       ({"text": " \n ", "rating": 3}, "review 2: the text is empty"),
                       ({"text": "ok", "rating": 7}, "review 2: the rating must be whole stars"),
                       ({"text": "é" * 600_000, "rating": 3}, "skips lines over 1,048,576")]:
        assert words in one_line(fix.FixError, fix.write_corrected, [rows[0], bad], path)
        assert path.read_bytes() == before                       # the old file, whole
    assert "every row was dropped" in one_line(fix.FixError, fix.write_corrected, [], path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrected.jsonl"]   # no temp left


# ------------------------------------------------------------------ the annotations export
def annotated(store) -> dict[str, str]:
    texts = {review_key(t): t for t in ["=HYPERLINK(\"http://evil.example\",\"x\")",
                                        "-1 stars, would not buy", "Plain review.", "Untouched."]}
    k1, k2, k3, _ = texts
    store.tag(k1, "+sum", author="@mallory")
    store.tag(k2, "sarcasm", author="ann")
    store.set_note(k2, "=1+1 'note' \x00 with NUL", author="ann")
    store.relabel(k3, 2, previous=5, author="bob")
    store.mark_reviewed([k3], author="bob")
    store.tag(review_key("another split"), "sarcasm")               # not exported
    return texts


def test_the_csv_export_quotes_cells_that_would_run_as_formulas(store, tmp_path):
    texts = annotated(store)
    k1, k2, k3, _ = texts
    path = tmp_path / "notes.csv"
    assert fix.export_annotations(store, texts, path) == 5
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(fix.EXPORT_COLUMNS)
    got = [(r["key"], r["kind"], r["value"], r["author"]) for r in rows]
    assert got == [(k1, "tag", "'+sum", "'@mallory"), (k2, "tag", "sarcasm", "ann"),
                   (k2, "note", "'=1+1 'note'  with NUL", "ann"),
                   (k3, "relabel", "2 (was 5)", "bob"), (k3, "mark", "reviewed", "bob")]
    assert rows[0]["text"] == "'" + texts[k1] and rows[1]["text"] == "'-1 stars, would not buy"
    assert all(r["time"].endswith("+00:00") for r in rows)
    for row in rows:
        assert all(not cell.startswith(("=", "+", "-", "@")) for cell in row.values())
    assert fix.annotations_bytes(store, texts, ".csv") == path.read_bytes()   # for a download


def test_the_jsonl_export_keeps_every_value_verbatim(store, tmp_path):
    texts = annotated(store)
    k1, k2, _, _ = texts
    path = tmp_path / "notes.jsonl"
    assert fix.export_annotations(store, texts, path) == 5
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == {"key": k1, "text": texts[k1], "kind": "tag", "value": "+sum",
                       "author": "@mallory", "time": rows[0]["time"]}
    assert rows[2]["value"] == "=1+1 'note'  with NUL"              # the store strips the NUL
    assert "CSV (.csv) or JSON lines" in one_line(fix.FixError, fix.export_annotations, store,
                                                  texts, tmp_path / "notes.xlsx")
    # the same bytes for a download
    assert fix.annotations_bytes(store, texts, ".JSONL") == path.read_bytes()


def test_hostile_texts_in_the_triage_are_refused_in_one_line_and_nothing_is_half_written(
        store, tmp_path):
    surrogate, long_key, nul = "lone \ud800 half", review_key(LONG), "a\x00b review"
    # what the store refuses is refused in one line, and nothing of it is stored
    assert "Unicode" in one_line(db.StoreError, store.set_note, long_key, surrogate)
    assert "100,000 characters long; the most is 5,000" in one_line(db.StoreError, store.set_note,
                                                                    long_key, LONG)
    assert "Unicode" in one_line(db.StoreError, store.tag_many, [long_key, "t1:\ud800"], "mixed")
    assert store.notes() == {} and store.tags() == {}
    # a hostile review's key is a plain hash: it takes tags, a relabel, a mark
    texts = {review_key(t): t for t in (surrogate, LONG, nul)}
    for key in texts:
        store.tag(key, "other")
    store.relabel(review_key(nul), 1, previous=3)
    path = tmp_path / "notes.csv"
    path.write_text("old export\n")
    message = one_line(fix.FixError, fix.export_annotations, store, texts, path)
    assert f"the text of review {review_key(surrogate)} is not valid Unicode" in message
    assert path.read_text() == "old export\n"                          # untouched
    del texts[review_key(surrogate)]
    assert fix.export_annotations(store, texts, path) == 3
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(io.StringIO(f.read())))
    # the CSV strips control characters, as the store does
    assert [(r["text"], r["kind"]) for r in rows] == [(LONG, "tag"), ("ab review", "tag"),
                                                      ("ab review", "relabel")]
    assert not [p.name for p in tmp_path.iterdir() if not p.name.startswith(("notes.csv", "store.db"))]
