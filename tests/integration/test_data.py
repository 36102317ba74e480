"""reviewbert.data: the real files and their quirks, split invariants, streaming.

Real-data tests are marked ``integration``; the split invariants run on small
generated files so they are fast and their expected values are known.
"""
from __future__ import annotations

import csv
import gc
import hashlib
import json
import random
import shutil
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from reviewbert import data
from reviewbert.data import (
    DataError,
    DataReport,
    ReadOptions,
    build_splits,
    data_config,
    default_data_dir,
    fingerprint,
    iter_reviews,
    splits_from_meta,
)
from reviewbert.model.labels import FIVE, THREE

SPLITS = ("train", "validation", "test")


# ------------------------------------------------------------------ helpers
def read(path, **options):
    report = DataReport()
    rows = list(iter_reviews(path, ReadOptions(**options), report))
    return rows, report, report.files[0]


def star_counts(rows) -> list[int]:
    c = Counter(s for _, s in rows)
    return [c[s] for s in range(1, 6)]


WORDS = ("phone battery screen great terrible fine okay camera charger case price seller "
         "works broke returned love hate fast slow cheap").split()


def make_reviews(per_star: dict[int, int], seed: int = 0, tag: str = "") -> list[tuple[str, int]]:
    """Distinct texts with a known star distribution."""
    rnd = random.Random(seed)
    out = []
    for star, n in per_star.items():
        for i in range(n):
            words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 12)))
            out.append((f"{tag}review {star}-{i}: {words}", star))
    rnd.shuffle(out)
    return out


def write_csv(path: Path, reviews) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Brand", "Rating", "Reviews"])
        for text, star in reviews:
            w.writerow(["X", star, text])
    return path


def write_jsonl(path: Path, reviews) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for text, star in reviews:
            f.write(json.dumps({"text": text, "rating": float(star), "title": "t"}) + "\n")
    return path


def as_tuples(split):
    return [(e.text, e.stars, e.label) for e in split]


def class_counts(split, scheme=FIVE) -> list[int]:
    c = Counter(e.label for e in split)
    return [c[i] for i in range(scheme.num_labels)]


@pytest.fixture
def two_files(tmp_path):
    """A CSV and a JSONL file: 300/120/200/250/500 reviews by star, plus
    20 exact duplicates and 10 texts with conflicting ratings."""
    reviews = make_reviews({1: 300, 2: 120, 3: 200, 4: 250, 5: 500})
    dups = reviews[:20]
    conflicts = [(t, 4) for t, s in reviews[20:] if s == 5][:10]
    a = write_csv(tmp_path / "a.csv", reviews[:700] + dups)
    b = write_jsonl(tmp_path / "b.jsonl", reviews[700:] + conflicts)
    return a, b, reviews, {t for t, _ in conflicts}


# ------------------------------------------------------------ the real files
def test_cut_off_json_array_file(data_dir):
    rows, report, fr = read(data_dir / "cell_phones_and_accessories_5core_sample.json")
    assert fr.format == "json-array"
    assert fr.columns == {"text": "reviewText", "rating": "overall", "title": None}
    # 4,777 lines: 4,776 complete records (3 with an empty reviewText) + the cut-off tail
    assert fr.rows_read == 4777
    assert fr.skipped == Counter({"truncated last record": 1, "empty text": 3})
    assert len(rows) == fr.usable == 4773
    assert any("line 4777" in w and "cut off" in w for w in report.warnings)
    assert star_counts(rows) == [431, 338, 503, 1016, 2485]  # README, by star


def test_unlocked_10k_duplicates_and_conflicts(data_dir):
    path = data_dir / "unlocked_mobile_10k.csv"
    rows, _, fr = read(path)
    assert fr.rows_read == fr.usable == 10_000
    assert star_counts(rows) == [2155, 668, 831, 1385, 4961]  # README
    s = build_splits([path], FIVE)
    r = s.report
    # independent count with pandas: 6,243 distinct stripped texts, 41 with >1 rating
    df = pd.read_csv(path)
    groups = df.groupby(df["Reviews"].astype(str).str.strip())["Rating"].agg(["nunique", "size"])
    conflicting = groups[groups["nunique"] > 1]
    assert len(groups) == 6243
    assert r.unique_texts + r.conflicting_texts == len(groups)
    assert r.conflicting_texts == len(conflicting) == 41
    assert r.conflicts_dropped == conflicting["size"].sum() == 468
    assert r.duplicates_dropped == 10_000 - 468 - r.unique_texts == 3330
    assert r.skipped["duplicate"] == 3330 and r.skipped["conflicting ratings"] == 468


def test_unlocked_5k_columns(data_dir):
    rows, _, fr = read(data_dir / "unlocked_mobile_5k.csv")
    assert fr.columns["text"] == "review" and fr.columns["rating"] == "rating"
    assert fr.rows_read == len(rows) == 5000
    assert star_counts(rows) == [1296, 356, 391, 743, 2214]


def test_iphone_out_of_5_stars_and_titles(data_dir):
    path = data_dir / "iphone_xr_reviews_in.csv"
    rows, _, fr = read(path)
    assert fr.columns == {"text": "review_text", "rating": "review_rating", "title": None}
    assert fr.rows_read == 5010 and fr.skipped == Counter({"empty text": 3})
    assert star_counts(rows) == [319, 87, 153, 718, 3730]  # "N.0 out of 5 stars" parsed
    titled, _, fr2 = read(path, prepend_title=True)
    assert fr2.columns["title"] == "review_title"
    df = pd.read_csv(path, keep_default_na=False)
    has_any = (df.review_text.str.strip() != "") | (df.review_title.str.strip() != "")
    assert fr2.usable == has_any.sum() > fr.usable  # an empty body with a title: the title
    first = f"{df.review_title[0].strip()} {df.review_text[0].strip()}" \
        if df.review_title[0].strip()[-1] in ".!?" else \
        f"{df.review_title[0].strip()}. {df.review_text[0].strip()}"
    assert titled[0][0] == first


def test_earphones_embedded_newlines(data_dir):
    path = data_dir / "earphone_reviews_in.csv"
    rows, _, fr = read(path)
    assert fr.columns == {"text": "ReviewBody", "rating": "ReviewStar", "title": None}
    df = pd.read_csv(path, keep_default_na=False)
    assert fr.rows_read == len(df) == 14_337
    assert [t for t, _ in rows] == [t.strip() for t in df.ReviewBody]
    # almost every quoted field ends in a newline: 43k physical lines, 14k records
    assert path.read_bytes().count(b"\n") > 2.5 * fr.rows_read
    assert star_counts(rows) == [2493, 939, 1503, 3189, 6213]


def test_all_real_files_into_balanced_splits(data_dir):
    files = sorted(p for p in data_dir.iterdir() if p.suffix in (".csv", ".json"))
    assert len(files) == 5
    s = build_splits(files, FIVE, max_per_class=1000)
    r = s.report
    assert r.rows_read == 4777 + 10_000 + 5000 + 5010 + 14_337
    assert min(r.stars_before.values()) == r.stars_before[2]  # 2 stars is the rare class
    for name, (size, _) in zip(SPLITS, [(700, 0), (100, 0), (200, 0)]):
        assert class_counts(s[name]) == [size] * 5
    texts = [e.text for n in SPLITS for e in s[n]]
    assert len(texts) == len(set(texts)) == 5000
    assert {e.source for e in s.train} == {f.name for f in files}
    json.dumps(r.to_dict())
    text = r.format()
    assert "earphone_reviews_in.csv" in text and "truncated last record" in text


def test_three_labels_on_real_data(data_dir):
    s = build_splits([data_dir / "unlocked_mobile_5k.csv"], THREE, seed=3)
    for name in SPLITS:
        counts = class_counts(s[name], THREE)
        assert len(set(counts)) == 1 and counts[0] > 0
    negative = Counter(e.stars for e in s.train if e.label == 0)
    assert set(negative) == {1, 2}  # stars mixed naturally inside the class
    assert negative[1] > negative[2]  # ...in their natural (1-heavy) proportion


def test_min_tokens_matches_brute_force(data_dir):
    from reviewbert.model.checkpoint import load_tokenizer
    tok = load_tokenizer(None)
    path = data_dir / "unlocked_mobile_5k.csv"
    rows, _, _ = read(path)
    n_tokens = [len(tok(t, add_special_tokens=False)["input_ids"]) for t, _ in rows]
    expected_short = sum(n < 30 for n in n_tokens)
    # texts with fewer than 30 words but at least 30 tokens exist: the shortcut is not enough
    assert any(n >= 30 and len(t.split()) < 30 for n, (t, _) in zip(n_tokens, rows))
    s = build_splits([path], FIVE, min_tokens=30, tokenizer=tok)
    assert s.report.skipped["too few tokens"] == expected_short
    kept = [e for n in SPLITS for e in s[n]]
    assert all(len(tok(e.text, add_special_tokens=False)["input_ids"]) >= 30 for e in kept)
    assert s.report.usable == len(rows) - expected_short


# ----------------------------------------------------------- split invariants
def test_balanced_disjoint_and_fractions(two_files):
    a, b, reviews, conflicts = two_files
    s = build_splits([a, b], FIVE)
    r = s.report
    # 2 stars: 120 reviews, so 120 per class: 84 / 12 / 24 (0.7 / 0.1 / 0.2)
    assert r.per_class == 120
    assert [class_counts(s[n]) for n in SPLITS] == [[84] * 5, [12] * 5, [24] * 5]
    texts = [e.text for n in SPLITS for e in s[n]]
    assert len(texts) == len(set(texts))  # disjoint, and no duplicate within a split
    assert not conflicts & set(texts)
    assert r.duplicates_dropped == 20 and r.conflicting_texts == 10
    assert r.conflicts_dropped == 20
    assert all(e.label == FIVE.class_of(e.stars) for e in s.train)
    truth = dict(reviews)
    assert all(truth[e.text] == e.stars for e in s.test)
    assert {e.source for e in s.train} == {"a.csv", "b.jsonl"}
    assert r.split_counts["test"] == {n: 24 for n in FIVE.names}


def test_other_fractions_and_cap(two_files):
    a, b, _, _ = two_files
    s = build_splits([a, b], FIVE, fractions=(0.5, 0.25, 0.25), max_per_class=50)
    assert [class_counts(s[n]) for n in SPLITS] == [[25] * 5, [12] * 5, [13] * 5] \
        or [class_counts(s[n]) for n in SPLITS] == [[25] * 5, [13] * 5, [12] * 5]
    s0 = build_splits([a, b], FIVE, fractions=(1.0, 0.0, 0.0), max_per_class=7)
    assert class_counts(s0.train) == [7] * 5 and not s0.validation and not s0.test


def test_three_label_classes_are_balanced(two_files):
    a, b, _, _ = two_files
    s = build_splits([a, b], THREE)
    # negative = 300 + 120 (minus dropped), neutral = 200: neutral is the limit
    assert s.report.per_class == s.report.classes_before["neutral"]
    for n in SPLITS:
        counts = class_counts(s[n], THREE)
        assert counts == [counts[0]] * 3


def test_deterministic_and_seed_dependent(two_files):
    a, b, _, _ = two_files
    one = build_splits([a, b], FIVE, seed=7)
    two = build_splits([a, b], FIVE, seed=7)
    other = build_splits([a, b], FIVE, seed=8)
    for n in SPLITS:
        assert as_tuples(one[n]) == as_tuples(two[n])
    assert {e.text for e in one.test} != {e.text for e in other.test}


def test_independent_of_file_and_row_order(tmp_path, two_files):
    a, b, reviews, _ = two_files
    base = build_splits([a, b], FIVE, seed=1)
    swapped = build_splits([b, a], FIVE, seed=1)
    for n in SPLITS:
        assert [(e.text, e.source) for e in base[n]] == [(e.text, e.source) for e in swapped[n]]
    # the same reviews, in another order and cut into files differently
    rows = list(csv.reader(open(a, encoding="utf-8")))[1:]
    rows = [(t, int(s)) for _, s, t in rows] + [(t, s) for t, s in read(b)[0]]
    random.Random(5).shuffle(rows)
    d = tmp_path / "again"
    d.mkdir()
    c1 = write_jsonl(d / "x.jsonl", rows[:400])
    c2 = write_csv(d / "y.csv", rows[400:])
    moved = build_splits([c2, c1], FIVE, seed=1)
    for n in SPLITS:
        assert [(e.text, e.stars) for e in base[n]] == [(e.text, e.stars) for e in moved[n]]


def test_splits_are_shuffled_not_grouped(two_files):
    a, b, _, _ = two_files
    s = build_splits([a, b], FIVE)
    labels = [e.label for e in s.train]
    changes = sum(x != y for x, y in zip(labels, labels[1:]))
    assert changes > 0.5 * len(labels)  # ~0.8 expected at random; 0.01 if grouped


def test_cap_larger_than_data_and_getitem(two_files):
    a, b, _, _ = two_files
    s = build_splits([a, b], FIVE, max_per_class=10_000)
    assert s.report.per_class == 120
    assert s["train"] is s.train
    with pytest.raises(KeyError):
        s["dev"]


def test_min_tokens_synthetic(tmp_path):
    from reviewbert.model.checkpoint import load_tokenizer
    tok = load_tokenizer(None)
    long_words = "unbelievably extraordinarily incomprehensibly"  # several tokens per word
    reviews = []
    for star in range(1, 6):
        reviews += [(f"ok {star} {i}", star) for i in range(30)]                  # < 8 tokens
        reviews += [(f"{long_words} {star} {i}", star) for i in range(20)]        # 5 words, >= 8
        reviews += [(" ".join(["good"] * 8) + f" {star} {i}", star) for i in range(10)]
    path = write_csv(tmp_path / "r.csv", reviews)
    s = build_splits([path], FIVE, min_tokens=8, tokenizer=tok)
    assert s.report.skipped["too few tokens"] == 150
    assert s.report.per_class == 30
    kept = {e.text for n in SPLITS for e in s[n]}
    assert not any(t.startswith("ok ") for t in kept)
    assert any(t.startswith("unbelievably") for t in kept)


def test_bad_split_settings(two_files):
    a, b, _, _ = two_files
    for fr in [(0.5, 0.5, 0.5), (0.0, 0.5, 0.5), (0.7, 0.4, -0.1), (1, 0)]:
        with pytest.raises(DataError, match="fractions"):
            build_splits([a], FIVE, fractions=fr)
    with pytest.raises(DataError, match="no data files"):
        build_splits([], FIVE)


def test_missing_class_is_a_clear_error(tmp_path):
    path = write_csv(tmp_path / "no2.csv", make_reviews({1: 5, 3: 5, 4: 5, 5: 5}))
    with pytest.raises(DataError, match="2 stars"):
        build_splits([path], FIVE)


# ------------------------------------------------- config, fingerprints, rebuild
def test_fingerprint(tmp_path, two_files):
    a, _, _, _ = two_files
    fp = fingerprint(a)
    raw = a.read_bytes()
    assert fp == {"name": "a.csv", "path": str(a.absolute()), "size": len(raw),
                  "sha256": hashlib.sha256(raw).hexdigest()}
    data.read._SHA_CACHE.clear()
    build_splits([a], FIVE, max_per_class=5)
    assert fingerprint(a)["sha256"] == hashlib.sha256(raw).hexdigest()  # from pass 1's cache


def test_gz_fingerprint_is_of_the_compressed_file(tmp_path, two_files):
    import gzip
    a, _, _, _ = two_files
    gz = tmp_path / "a.csv.gz"
    gz.write_bytes(gzip.compress(a.read_bytes()))
    data.read._SHA_CACHE.clear()
    build_splits([gz], FIVE, max_per_class=5)
    cached = fingerprint(gz)["sha256"]
    data.read._SHA_CACHE.clear()
    assert cached == fingerprint(gz)["sha256"] == hashlib.sha256(gz.read_bytes()).hexdigest()


def test_rebuild_from_meta(tmp_path, two_files):
    a, b, _, _ = two_files
    opts = ReadOptions(prepend_title=True)
    s = build_splits([a, b], THREE, seed=3, max_per_class=90, options=opts)
    cfg = data_config([a, b], THREE, seed=3, fractions=(0.7, 0.1, 0.2), max_per_class=90,
                      min_tokens=0, options=opts)
    meta = json.loads(json.dumps({"data": cfg}))  # as stored in reviewbert.json
    again = splits_from_meta(meta)
    for n in SPLITS:
        assert as_tuples(again[n]) == as_tuples(s[n])
    assert again.report.warnings == ["a.csv: no title column found; prepend_title has no effect"]
    # moved: found by basename in data_dir, with a note
    moved = tmp_path / "moved"
    moved.mkdir()
    for p in (a, b):
        shutil.move(p, moved / p.name)
    again = splits_from_meta(meta, data_dir=moved)
    assert as_tuples(again.test) == as_tuples(s.test)
    assert any("a.csv" in w and "stored path" in w for w in again.report.warnings)
    # changed content: warned
    with open(moved / "a.csv", "a", encoding="utf-8") as f:
        f.write('X,5,"one more review"\n')
    changed = splits_from_meta(meta, data_dir=moved)
    assert any("a.csv" in w and "sha256" in w for w in changed.report.warnings)
    # missing everywhere: a DataError naming the file
    (moved / "b.jsonl").unlink()
    with pytest.raises(DataError, match="b.jsonl"):
        splits_from_meta(meta, data_dir=moved)
    with pytest.raises(DataError, match="no data section"):
        splits_from_meta({"hyperparameters": {}})


def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("REVIEWBERT_DATA_DIR", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.delenv("REVIEWBERT_DATA_DIR")
    repo = Path(__file__).resolve().parents[2]
    assert default_data_dir() == repo.parent / "shared" / "data"


def test_report_to_dict_and_format(two_files):
    a, b, _, _ = two_files
    r = build_splits([a, b], FIVE).report
    d = json.loads(json.dumps(r.to_dict()))
    assert d["rows_read"] == (700 + 20) + (670 + 10)
    assert d["skipped"] == {"duplicate": 20, "conflicting ratings": 20}
    assert d["split_counts"]["train"]["2 stars"] == 84
    assert sum(d["stars_before"].values()) == d["unique_texts"]
    text = r.format()
    for needle in ("a.csv", "b.jsonl", "duplicate", "conflicting ratings", "validation"):
        assert needle in text


# ------------------------------------------------------------------ streaming
def test_streaming_memory_stays_bounded(tmp_path):
    """Pass 1 keeps ~13 bytes per row, not the texts (dedup briefly needs ~35):
    peak traced memory for a 200k-review file (~100 MB of text) must be a small
    fraction of what holding the texts needs, and not grow with text length."""
    path = tmp_path / "big.jsonl"
    rnd = random.Random(0)
    bodies = [" ".join(rnd.choice(WORDS) for _ in range(70)) for _ in range(1000)]
    text_bytes = 0
    with open(path, "w", encoding="utf-8") as f:
        for i in range(200_000):
            text = f"review {i} {bodies[i % 1000]}"
            text_bytes += sys.getsizeof(text)
            f.write(json.dumps({"reviewText": text, "overall": i % 5 + 1, "summary": "s"}) + "\n")
    gc.collect()
    tracemalloc.start()
    try:
        s = build_splits([path], FIVE, max_per_class=100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.report.rows_read == 200_000 and s.report.per_class == 100
    assert text_bytes > 90e6
    assert peak < 0.15 * text_bytes, (peak, text_bytes)
    assert peak / 200_000 < 64  # bytes per review read (13 kept + dedup temporaries)


def test_min_tokens_with_a_tokenizer_without_rust_backend(tmp_path):
    """Slow (pure Python) tokenizers go through the plain __call__ path."""
    class CharTokenizer:  # one token per character, so words != tokens
        def __call__(self, texts, **kw):
            assert kw.get("add_special_tokens") is False
            return {"input_ids": [list(t) for t in texts]}

    # "xxxxx 1" .. "xxxxxxxxxxxxxx 1": 7..16 characters, 2 words each
    reviews = [("x" * (5 + i) + f" {star}", star) for star in range(1, 6) for i in range(10)]
    path = write_csv(tmp_path / "c.csv", reviews)
    s = build_splits([path], FIVE, min_tokens=10, tokenizer=CharTokenizer())
    kept = [e for n in SPLITS for e in s[n]]
    assert s.report.skipped["too few tokens"] == 5 * 3  # 7, 8 and 9 characters
    assert len(kept) == 5 * 7 and all(len(e.text) >= 10 for e in kept)


def test_unique_reviews_streams_every_row_once_in_chunks(tmp_path):
    from reviewbert.data import unique_reviews
    rows = ["review,rating"] + [f"text number {i},{i % 5 + 1}" for i in range(23)]
    rows += ["text number 3,4", "text number 4,5", "text number 4,5",  # dup x1, dup x2
             "disputed,1", "disputed,5", "bad rating,9", ",3"]          # conflict, skips
    f = tmp_path / "r.csv"
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report, chunks = unique_reviews([f], 5, chunk_size=10)
    assert report.duplicates_dropped == 3 and report.conflicting_texts == 1
    sizes, seen = [], []
    for chunk in chunks:
        sizes.append(len(chunk))
        seen += [(e.text, e.stars, e.label) for e in chunk]
    assert sizes == [10, 10, 3]
    assert seen == [(f"text number {i}", i % 5 + 1, i % 5) for i in range(23)]  # file order
