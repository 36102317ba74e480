"""reviewbert.data on bad and unusual inputs.

Every case ends in one of two ways: a DataError whose message names the file
(and the line where one applies), or a row skipped and counted by reason.
Never another exception type: ``read`` below lets only DataError escape.
"""
from __future__ import annotations

import csv
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from reviewbert.data import DataError, DataReport, ReadOptions, build_splits, iter_reviews, parse_stars
from reviewbert.model.labels import FIVE


def read(path, **options):
    """All usable rows, the report and the file's report. Only DataError may escape."""
    report = DataReport()
    try:
        rows = list(iter_reviews(path, ReadOptions(**options), report))
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{type(e).__name__} instead of DataError: {e}")
    return rows, report, report.files[0]


def expect_error(path, *needles, **options) -> str:
    with pytest.raises(DataError) as info:
        read(path, **options)
    msg = str(info.value)
    assert Path(path).name in msg
    for n in needles:
        assert n in msg, msg
    return msg


def csv_file(path: Path, header, rows, **kw) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, **kw)
        w.writerow(header)
        w.writerows(rows)
    return path


def jsonl_file(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


GOOD = [("fine phone", 5), ("broke in a week", 1), ("it is ok", 3)]


# ----------------------------------------------------------- errors, not skips
def test_nonexistent_path(tmp_path):
    p = tmp_path / "nope.csv"
    with pytest.raises(DataError, match="nope.csv: file not found"):
        iter_reviews(p)  # raised at call time, not at first next()
    with pytest.raises(DataError, match="nope.csv"):
        build_splits([p], FIVE)


def test_directory(tmp_path):
    d = tmp_path / "reviews_dir"
    d.mkdir()
    expect_error(d, "is a directory")


@pytest.mark.parametrize("content", [b"", b"   \n\n  \t\n", b"\xef\xbb\xbf"])
def test_empty_file(tmp_path, content):
    p = tmp_path / "empty.csv"
    p.write_bytes(content)
    expect_error(p, "is empty")


def test_missing_text_column(tmp_path):
    p = csv_file(tmp_path / "cols.csv", ["id", "score_given", "stars"], [[1, "a", 5]])
    msg = expect_error(p, "line 1", "text", "text_column", "'id'")
    assert "--text-column" in msg  # tells the CLI user what to do


def test_unknown_column_overrides(tmp_path):
    p = csv_file(tmp_path / "ok.csv", ["Reviews", "Rating"], [["good", 5]])
    expect_error(p, "'body'", "line 1", text_column="body")
    expect_error(p, "'stars'", rating_column="stars")
    expect_error(p, "'headline'", title_column="headline", prepend_title=True)
    j = jsonl_file(tmp_path / "ok.jsonl", [{"text": "good", "rating": 5}])
    expect_error(j, "'score'", "first records", rating_column="score")


def test_column_overrides_pick_the_column(tmp_path):
    p = csv_file(tmp_path / "two.csv", ["review", "other_text", "rating", "my_stars"],
                 [["a", "b", 1, 4]])
    rows, _, fr = read(p, text_column="other_text", rating_column="MY_STARS")
    assert rows == [("b", 4)] and fr.columns["rating"] == "my_stars"


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "reviews.csv.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00" + b"not really deflate data" * 50)
    expect_error(p, "corrupt")


def test_truncated_gzip(tmp_path):
    body = "Reviews,Rating\n" + "".join(f"review number {i},{i % 5 + 1}\n" for i in range(20000))
    whole = gzip.compress(body.encode())
    p = tmp_path / "cut.csv.gz"
    p.write_bytes(whole[: len(whole) // 2])
    msg = expect_error(p, "corrupt or truncated", "near line")
    assert "line 0" not in msg


def test_all_lines_bad_json(tmp_path):
    p = tmp_path / "garbage.jsonl"
    p.write_text("{this is not json\n{neither is this\n", encoding="utf-8")
    expect_error(p, "line 1", "not valid JSON")


def test_binary_file(tmp_path):
    p = tmp_path / "photo.json"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 10)
    expect_error(p, "binary")


def test_broken_pretty_printed_json(tmp_path):
    p = tmp_path / "pretty.json"
    p.write_text(json.dumps([{"text": "a", "rating": 5}] * 3, indent=2)[:-20],
                 encoding="utf-8")
    expect_error(p, "line ", "not valid JSON")


def test_no_class_left_after_skips(tmp_path):
    p = csv_file(tmp_path / "fives.csv", ["Reviews", "Rating"], [[f"r{i}", 5] for i in range(9)])
    with pytest.raises(DataError, match="1 star"):
        build_splits([p], FIVE)


# ---------------------------------------------------------- counted skips
@pytest.mark.parametrize("rating, reason", [
    (0, "rating out of range"), (6, "rating out of range"), ("-1", "rating out of range"),
    ("abc", "rating not a number"), ("", "rating missing"), ("NaN", "rating missing"),
    ("3.5", "rating not a whole number"), ("4.5 out of 5 stars", "rating not a whole number"),
])
def test_bad_ratings_are_counted(tmp_path, rating, reason):
    rows = [[t, s] for t, s in GOOD] + [["the bad one", rating]]
    p = csv_file(tmp_path / "ratings.csv", ["Reviews", "Rating"], rows)
    got, report, fr = read(p)
    assert got == GOOD
    assert fr.skipped == Counter({reason: 1}) and fr.rows_read == 4
    assert report.skipped[reason] == 1


def test_bad_ratings_in_json(tmp_path):
    recs = [{"reviewText": t, "overall": s} for t, s in GOOD] + [
        {"reviewText": "a", "overall": None}, {"reviewText": "b", "overall": True},
        {"reviewText": "c", "overall": 7.0}, {"reviewText": "d"}, {"reviewText": "e", "overall": [5]},
        {"reviewText": "f", "overall": 2.25}]
    rows, _, fr = read(jsonl_file(tmp_path / "r.jsonl", recs))
    assert rows == GOOD
    assert fr.skipped == Counter({"rating missing": 2, "rating not a number": 2,
                                  "rating out of range": 1, "rating not a whole number": 1})


@pytest.mark.parametrize("value, stars", [
    (4, 4), (4.0, 4), ("4", 4), ("4.0", 4), (" 4.0 ", 4), ("4.0 out of 5 stars", 4),
    ("1 out of 5", 1), ("5 stars", 5), ("3/5", 3), ("2 Stars", 2)])
def test_rating_formats(value, stars):
    assert parse_stars(value) == stars


def test_empty_and_non_string_text(tmp_path):
    recs = [{"text": t, "rating": s} for t, s in GOOD] + [
        {"text": "", "rating": 5}, {"text": "   \n ", "rating": 4}, {"text": None, "rating": 2},
        {"rating": 1}, {"text": 12345, "rating": 3}, {"text": {"a": 1}, "rating": 3}]
    rows, _, fr = read(jsonl_file(tmp_path / "t.jsonl", recs))
    assert rows == GOOD
    assert fr.skipped == Counter({"empty text": 4, "text not a string": 2})


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    p = tmp_path / "latin1.csv"
    p.write_bytes(b"Reviews,Rating\n" + "café ok".encode("latin-1") + b",4\nplain,5\n")
    rows, report, fr = read(p)
    assert rows == [("caf\ufffd ok", 4), ("plain", 5)]
    assert fr.invalid_utf8 == 1
    assert any("latin1.csv" in w and "UTF-8" in w for w in report.warnings)
    j = tmp_path / "latin1.jsonl"
    j.write_bytes(b'{"text": "na\xefve", "rating": 3}\n{"text": "ok", "rating": 1}\n')
    rows, _, fr = read(j)
    assert rows == [("na\ufffdve", 3), ("ok", 1)] and fr.invalid_utf8 == 1


def test_bad_json_line_in_the_middle_vs_truncated_tail(tmp_path):
    good = [json.dumps({"text": t, "rating": s}) for t, s in GOOD]
    p = tmp_path / "mid.jsonl"
    p.write_text("\n".join([good[0], '{"text": "x", "rat', good[1], "42", good[2]]) + "\n",
                 encoding="utf-8")
    rows, report, fr = read(p)
    assert rows == GOOD
    assert fr.skipped == Counter({"bad JSON": 1, "not a JSON object": 1})
    assert not report.warnings
    p.write_text("\n".join(good + ['{"text": "cut off here", "rati']), encoding="utf-8")
    rows, report, fr = read(p)
    assert rows == GOOD and fr.skipped == Counter({"truncated last record": 1})
    assert any("line 4" in w for w in report.warnings)


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_ten_megabyte_line(tmp_path, kind):
    huge = "word " * (2 * 1024 * 1024)  # 10 MiB
    if kind == "jsonl":
        p = jsonl_file(tmp_path / "huge.jsonl", [{"text": "before", "rating": 1},
                                                 {"text": huge, "rating": 5},
                                                 {"text": "after", "rating": 2}])
    else:
        p = csv_file(tmp_path / "huge.csv", ["Reviews", "Rating"],
                     [["before", 1], [huge, 5], ["after", 2]])
    rows, _, fr = read(p)
    assert rows == [("before", 1), ("after", 2)]
    assert fr.skipped == Counter({"line too long": 1})


def test_short_csv_row(tmp_path):
    p = tmp_path / "short.csv"
    p.write_text("Brand,Rating,Reviews\nA,5,good\nB,4\nC,1,bad\n", encoding="utf-8")
    rows, _, fr = read(p)
    assert rows == [("good", 5), ("bad", 1)] and fr.skipped == Counter({"bad CSV row": 1})


# ------------------------------------------------------ formats that must work
def test_bom_csv(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbfReviews,Rating\ngood phone,5\n")
    rows, _, fr = read(p)
    assert rows == [("good phone", 5)] and fr.columns["text"] == "Reviews"


@pytest.mark.parametrize("name", ["reviews.tsv", "reviews.txt"])
def test_tsv(tmp_path, name):
    p = csv_file(tmp_path / name, ["review_text", "review_rating"],
                 [["a, with commas, inside", "4.0 out of 5 stars"], ["b", "2"]], delimiter="\t")
    rows, _, _ = read(p)
    assert rows == [("a, with commas, inside", 4), ("b", 2)]


def test_embedded_newlines_and_quotes(tmp_path):
    p = csv_file(tmp_path / "nl.csv", ["ReviewTitle", "ReviewBody", "ReviewStar"],
                 [["Nice\n", 'line one\nline "two"\n', 4], ["Bad", "x", 1]])
    rows, _, fr = read(p)
    assert rows == [('line one\nline "two"', 4), ("x", 1)] and fr.rows_read == 2
    rows, _, _ = read(p, prepend_title=True)
    assert rows[0] == ('Nice. line one\nline "two"', 4)


@pytest.mark.parametrize("indent", [None, 2])
def test_json_array_document(tmp_path, indent):
    p = tmp_path / "array.json"
    p.write_text(json.dumps([{"reviewText": t, "overall": s} for t, s in GOOD] + [7],
                            indent=indent), encoding="utf-8")
    rows, _, fr = read(p)
    assert rows == GOOD and fr.format == "json-document"
    assert fr.skipped == Counter({"not a JSON object": 1})


def test_json_array_one_record_per_line(tmp_path):
    lines = [json.dumps({"reviewText": t, "overall": float(s), "summary": "S"}) for t, s in GOOD]
    p = tmp_path / "lines.json"
    p.write_text("[" + ",\n".join(lines) + "]\n", encoding="utf-8")
    rows, _, fr = read(p)
    assert rows == GOOD and fr.format == "json-array" and fr.skipped == Counter()


def test_amazon_2023_jsonl_with_title(tmp_path):
    recs = [{"rating": 5.0, "title": "Love it!", "text": "Works great", "asin": "B1",
             "images": [], "helpful_vote": 0, "verified_purchase": True},
            {"rating": 1.0, "title": "Broken", "text": "Dead on arrival", "asin": "B2"},
            {"rating": 3.0, "title": "", "text": "Meh", "asin": "B3"}]
    p = jsonl_file(tmp_path / "Cell_Phones_and_Accessories.jsonl", recs)
    rows, _, fr = read(p, prepend_title=True)
    assert fr.columns == {"text": "text", "rating": "rating", "title": "title"}
    assert rows == [("Love it! Works great", 5), ("Broken. Dead on arrival", 1), ("Meh", 3)]


@pytest.mark.parametrize("name", ["reviews.csv.gz", "reviews.csv", "reviews.data"])
def test_gzipped_csv_sniffed_by_content(tmp_path, name):
    body = "Reviews,Rating\n" + "".join(f'"{t}",{s}\n' for t, s in GOOD)
    p = tmp_path / name
    p.write_bytes(gzip.compress(body.encode()))
    rows, _, fr = read(p)
    assert rows == GOOD and fr.format == "csv"


def test_gzipped_jsonl_with_bom(tmp_path):
    p = tmp_path / "r.json.gz"
    p.write_bytes(gzip.compress(b"\xef\xbb\xbf" + "".join(
        json.dumps({"reviewText": t, "overall": s}) + "\n" for t, s in GOOD).encode()))
    rows, _, fr = read(p)
    assert rows == GOOD and fr.format == "jsonl"


def test_same_file_twice_counts_once(tmp_path):
    p = csv_file(tmp_path / "a.csv", ["Reviews", "Rating"],
                 [[f"text {s} {i}", s] for s in range(1, 6) for i in range(4)])
    s = build_splits([p, str(p), tmp_path / "." / "a.csv"], FIVE)
    assert s.report.rows_read == 20 and s.report.duplicates_dropped == 0


def test_file_changed_between_the_two_passes(tmp_path, monkeypatch):
    """Pass 2 re-reads the chosen rows; if the file changed meanwhile it must say so."""
    from reviewbert.data import splits as splits_mod
    p = csv_file(tmp_path / "moving.csv", ["Reviews", "Rating"],
                 [[f"text {s} {i}", s] for s in range(1, 6) for i in range(4)])
    real_select = splits_mod._select

    def select_then_edit(*args, **kw):
        chosen = real_select(*args, **kw)
        csv_file(p, ["Reviews", "Rating"],
                 [[f"other {s} {i}", s] for s in range(1, 6) for i in range(4)])
        return chosen

    monkeypatch.setattr(splits_mod, "_select", select_then_edit)
    with pytest.raises(DataError, match="moving.csv: changed while it was being read"):
        build_splits([p], FIVE)
