"""reviewbert.cohorts.hygiene: exact and near duplicates, leakage, conflicting labels, the
metrics without some rows, and the cache (made-up reviews; no model)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reviewbert.analysis.predictions import SplitPredictions
from reviewbert.cohorts import hygiene as H
from reviewbert.model.labels import FIVE

from hostile_texts import CORPUS

# 20 different words: one changed keeps 19 of 20 words and 17 of 19 word pairs
BASE = ("battery of this phone lasts two whole days while its bright screen stays "
        "readable outside under strong summer sun today")
ONE_CHANGED = BASE.replace("bright", "sharp")
TWO_CHANGED = ONE_CHANGED.replace("summer", "winter")
SAME_TOPIC = ("my phone battery died after two days and the screen cracked when it fell "
              "so the seller sent a replacement phone quickly")
OTHER = "shipping was slow but the case fits well and feels solid in the hand"


def words(text: str) -> list[str]:
    return text.split()


def test_the_made_up_reviews_are_what_the_tests_assume():
    assert len(words(BASE)) == 20 and len(set(words(BASE))) == 20
    assert len(words(ONE_CHANGED)) == 20 and sum(a != b for a, b in zip(words(BASE), words(ONE_CHANGED))) == 1
    assert sum(a != b for a, b in zip(words(BASE), words(TWO_CHANGED))) == 2


# ------------------------------------------------------------------ normalize
@pytest.mark.parametrize("a, b", [
    ("Great phone!", "great phone"),
    ("Great phone, works well.", "Great phone, works well!!"),
    ("GREAT\tphone\n\n works   well", "great phone works well"),
    ("ＧＲＥＡＴ　ｐｈｏｎｅ！", "great phone"),          # full-width forms (NFKC)
    ("great\u200b phone\u00ad", "great phone"),        # zero-width space, soft hyphen
    ("Straße", "STRASSE"),                              # case folding, not lower()
    ("great phone 😀😀", "great phone"),
])
def test_normalize_makes_these_equal(a, b):
    assert H.normalize(a) == H.normalize(b)


def test_normalize_keeps_words_apart_and_marks_inside_words():
    assert H.normalize("great!works") == "great works"
    assert H.normalize("  Don't   STOP  ") == "don t stop"
    assert H.normalize("हिन्दी में") == "हिन्दी में"             # vowel signs are part of the word
    assert H.normalize("great phone") != H.normalize("great phones")


# --------------------------------------------------------------- exact / near
def pair_set(frame: pd.DataFrame) -> set[tuple[int, int, str]]:
    return {(int(a), int(b), k) for a, b, k in frame[["row_a", "row_b", "kind"]].itertuples(index=False)}


def test_exact_duplicates_after_normalize_are_exact_pairs():
    texts = ["Great phone, works well.", OTHER, "great PHONE works   well!!", "Great phone; works well"]
    pairs = H.duplicate_pairs(texts)
    assert pair_set(pairs) == {(0, 2, "exact"), (0, 3, "exact")}     # each copy with the first
    assert (pairs["similarity"] == 1).all()


def test_one_word_changed_in_twenty_is_a_near_pair_with_the_cosine_counted_by_hand():
    pairs = H.duplicate_pairs([BASE, OTHER, ONE_CHANGED])
    assert pair_set(pairs) == {(0, 2, "near")}
    assert pairs["similarity"].iloc[0] == pytest.approx(36 / 39, abs=1e-4)
    assert H.duplicate_pairs([BASE, ONE_CHANGED], threshold=0.95).empty


def test_a_repeated_word_weighs_one_plus_its_log_count():
    # "alpha" twice: weight 1 + ln 2; 4 words and 3 word pairs shared, one pair only in a
    pairs = H.duplicate_pairs(["alpha beta gamma delta alpha", "alpha beta gamma delta"], threshold=0.5)
    w = 1 + np.log(2)
    assert pairs["similarity"].iloc[0] == pytest.approx((w + 6) / np.sqrt((w * w + 7) * 7), abs=1e-5)


def test_same_topic_different_text_is_not_near():
    assert H.duplicate_pairs([BASE, SAME_TOPIC, OTHER]).empty


def test_short_texts_are_only_ever_exact_duplicates():
    texts = ["good", "good good", "Good!", "great phone", "great phones", "good, good."]
    assert pair_set(H.duplicate_pairs(texts, threshold=0.5)) == {(0, 2, "exact"), (1, 5, "exact")}


def test_texts_that_normalize_to_nothing_are_never_duplicates():
    assert H.duplicate_pairs(["", "!!!", "\u200b", "", "...", None]).empty


def test_a_chain_of_near_pairs_is_one_group():
    # BASE ~ ONE_CHANGED ~ TWO_CHANGED, but BASE and TWO_CHANGED are two words apart (33/39)
    texts = [BASE, OTHER, ONE_CHANGED, TWO_CHANGED, "fine", "fine."]
    pairs = H.duplicate_pairs(texts)
    assert pair_set(pairs) == {(0, 2, "near"), (2, 3, "near"), (4, 5, "exact")}
    assert H.groups(pairs, len(texts)).tolist() == [0, -1, 0, 0, 1, 1]
    assert H.near_duplicate_flags(texts).tolist() == [True, False, True, True, True, True]


def test_groups_are_connected_components_numbered_by_first_row():
    pairs = pd.DataFrame({"row_a": [5, 1, 2], "row_b": [6, 2, 3]})
    assert H.groups(pairs, 8).tolist() == [-1, 0, 0, 0, -1, 1, 1, -1]
    with pytest.raises(ValueError):
        H.groups(pairs, 6)
    assert H.groups(pairs.iloc[:0], 3).tolist() == [-1, -1, -1]


NEAR_ENOUGH = 0.85


@pytest.mark.parametrize("budget", [H.PRODUCT_BUDGET, 2_000])   # 2,000: many chunks and batches
def test_near_search_finds_every_pair_a_brute_force_finds(monkeypatch, budget):
    # Zipf-drawn words from small vocabularies: many pairs share only common words, at every
    # cosine, which is where a wrong prefix or bound in the candidate search loses pairs
    monkeypatch.setattr(H, "NEIGHBOURS", 10 ** 6)
    monkeypatch.setattr(H, "PRODUCT_BUDGET", budget)
    rng = np.random.default_rng(1)
    texts = []
    for size in (12, 60):
        vocab = [f"w{i}" for i in range(size)]
        p = 1 / np.arange(1, size + 1)
        drawn = [" ".join(rng.choice(vocab, rng.integers(3, 30), p=p / p.sum())) for _ in range(130)]
        texts += drawn + [f"{t} {vocab[k % size]}" for k, t in enumerate(drawn[:20])]   # + a word
    x = H._vectors(texts)
    dense = (x @ x.T).toarray()
    half, high = len(texts) // 2, 0
    sweep = np.linspace(0.5, 0.98, 13) if budget == H.PRODUCT_BUDGET else (0.6, 0.86, 0.9)
    for t in sweep:
        want = set(zip(*np.nonzero(np.triu(dense >= t - H._EPS, 1))))
        i, j, cos = H._near(x, None, t, lambda k: None)
        assert set(zip(i.tolist(), j.tolist())) == want, t
        high += len(want) if t >= NEAR_ENOUGH else 0
        assert np.allclose(cos, dense[i, j], atol=1e-5)
        across = set(zip(*np.nonzero(dense[:half, half:] >= t - H._EPS)))
        i, j, _ = H._near(x[:half], x[half:], t, lambda k: None)
        assert set(zip(i.tolist(), j.tolist())) == across, t
    assert high > 10                    # the test has pairs at the thresholds that matter


def test_each_review_keeps_its_strongest_neighbours_and_the_group_stays_whole(monkeypatch):
    monkeypatch.setattr(H, "NEIGHBOURS", 2)
    w = words(BASE)
    texts = [" ".join(w[:k] + [f"changed{k}"] + w[k + 1:]) for k in range(8)]
    pairs = H.duplicate_pairs(texts, threshold=0.8)
    assert pairs.groupby("row_a").size().max() == 2
    assert set(H.groups(pairs, len(texts)).tolist()) == {0}


# --------------------------------------------------------------------- leakage
def test_pairs_across_two_lists_are_only_across():
    test = ["Great phone!", "great phone", BASE, OTHER, SAME_TOPIC]
    train = [SAME_TOPIC.upper(), "nothing like the others at all here", ONE_CHANGED, "GREAT PHONE."]
    pairs = H.duplicate_pairs(test, other=train)
    assert pair_set(pairs) == {(0, 3, "exact"), (1, 3, "exact"), (2, 2, "near"), (4, 0, "exact")}


def test_the_report_counts_leaked_test_rows_and_shows_them():
    test = ["Great phone!", BASE, OTHER, "great phone", "battery died"]
    train = ["unrelated words about a charger cable", ONE_CHANGED, "GREAT phone"]
    r = H.hygiene_report(test, [5, 4, 2, 5, 1], train_texts=train)
    assert r.leaked_rows == [0, 1, 3] and r.leaked.tolist() == [0, 1, 3]
    assert r.n_train == 3 and r.to_json()["leaked_rows"] == 3 and r.to_json()["leaked_exact"] == 2
    leak = r.leakage.set_index("row_a")
    assert leak.loc[1, "row_b"] == 1 and leak.loc[1, "kind"] == "near"
    assert leak.loc[1, "train_text"] == ONE_CHANGED and leak.loc[3, "text"] == "great phone"
    assert H.hygiene_report(test, [5, 4, 2, 5, 1]).leaked_rows == []


# ------------------------------------------------------------------- conflicts
def test_conflicting_labels_are_found_with_the_right_rows():
    texts = ["Great phone!", BASE, "great phone", OTHER, ONE_CHANGED, "works fine", "Works fine."]
    stars = [5, 2, 4, 3, 2, 4, 4]
    pairs = H.duplicate_pairs(texts)
    bad = H.conflicts(texts, stars, pairs)
    assert bad[["group", "row", "stars"]].values.tolist() == [[0, 0, 5], [0, 2, 4]]
    assert bad["text"].tolist() == ["Great phone!", "great phone"]
    r = H.hygiene_report(texts, stars)
    assert (r.conflicting_groups, r.conflicting_rows) == (1, 2)
    assert (r.exact_pairs, r.near_pairs, r.rows_in_duplicates) == (2, 1, 6)
    stars[4] = 1                                 # the near pair now disagrees too
    assert H.hygiene_report(texts, stars).conflicts["row"].tolist() == [0, 2, 1, 4]


def test_mismatched_lengths_and_thresholds_are_refused():
    with pytest.raises(ValueError):
        H.hygiene_report(["a b c"], [1, 2])
    for t in (0, 1.5, float("nan"), -0.1):
        with pytest.raises(ValueError):
            H.duplicate_pairs(["a b c"], threshold=t)


# ------------------------------------------------------------ metrics without
def hand_built(texts=None, folder=None) -> SplitPredictions:
    """Six reviews: rows 0-3 predicted right, row 4 one star off, row 5 three stars off."""
    label = np.array([0, 1, 2, 3, 4, 0])
    pred = np.array([0, 1, 2, 3, 3, 3])
    probs = np.full((6, 5), 0.05, np.float32)
    probs[np.arange(6), pred] = 0.8
    texts = pd.Series(texts or [f"review number {i} here" for i in range(6)], dtype=object)
    frame = pd.DataFrame({"text": texts,
                          "stars": (label + 1).astype(np.int8), "label": label.astype(np.int8),
                          "pred": pred.astype(np.int8)})
    for c in range(5):
        frame[f"prob_{c}"] = probs[:, c]
    frame["n_tokens"] = np.full(6, 10, np.int32)
    frame["source"] = "made-up"
    return SplitPredictions(frame, FIVE, {"max_length": 128}, folder)


def test_metrics_without_drops_the_rows_and_the_accuracy_changes_as_counted_by_hand():
    m = H.metrics_without(hand_built(), [0, 1, 1])
    table = pd.DataFrame(m).set_index("metric")
    assert table.loc["n", "all"] == 6 and table.loc["n", "without"] == 4 and table.loc["n", "change"] == -2
    assert table.loc["accuracy", "all"] == pytest.approx(4 / 6)
    assert table.loc["accuracy", "without"] == pytest.approx(2 / 4)
    assert table.loc["accuracy", "change"] == pytest.approx(2 / 4 - 4 / 6)
    assert table.loc["relaxed_accuracy", "all"] == pytest.approx(5 / 6)
    assert table.loc["relaxed_accuracy", "without"] == pytest.approx(3 / 4)
    assert table.loc["accuracy", "without_low"] <= 0.5 <= table.loc["accuracy", "without_high"]
    assert table.loc["accuracy", "all_low"] < table.loc["accuracy", "all_high"]
    assert m["all_low"][0] is None                              # no interval for a count
    assert m["all"][3] is not None and m["without"][3] is None   # class 1 gone: no AUC
    quick = H.metrics_without(hand_built(), [5], intervals=False)
    assert quick["without_low"] == [None] * 5 and quick["without"][1] == pytest.approx(4 / 5)
    assert H.metrics_without(hand_built(), [])["change"][1] == 0
    with pytest.raises(ValueError):
        H.metrics_without(hand_built(), [6])


# ------------------------------------------------------------ hostile texts
HOSTILE = ["", "\x00", "\x00\x00\x00 nul in \x00 the middle", "\ud800", "lone \udfff surrogate here ok",
           "x" * 100_000, ("word " * 20_000), "\u200b\u200c\u200d\ufeff", "\u200b" * 50, "\U000F0000 private",
           "\u0301\u0301", "ｆｕｌｌ　ｗｉｄｔｈ", None, float("nan"), 5, *(h.text for h in CORPUS)]


def test_hostile_texts_never_raise(tmp_path):
    texts = HOSTILE + HOSTILE[:6]               # with copies of some, so pairs exist
    for t in texts:
        n = H.normalize(t)
        n.encode("utf-8")                       # no lone surrogate survives
        assert n == " ".join(n.split())
    r = H.hygiene_report(texts, [3] * len(texts), train_texts=HOSTILE[::-1])
    assert r.n == len(texts) and len(r.leaked_rows) > 0
    json.dumps(r.to_json())
    H.near_duplicate_flags(texts)
    preds = hand_built(["\ud800", "", "x" * 100_000, "\x00", "\u200b", "\ud800"], tmp_path)
    train = ["\ud800 is here", None, "X" * 100_000]
    first = H.cached_report(preds, train)         # the pairs file holds no text: it writes
    assert not first.cached and first.leaked.tolist() == [2]
    assert H.cached_report(preds, train).cached


def test_empty_lists():
    r = H.hygiene_report([], [], train_texts=[])
    assert (r.n, r.rows_in_duplicates, r.leaked_rows, len(r.pairs)) == (0, 0, [], 0)
    assert r.to_json()["groups"] == 0
    assert H.near_duplicate_flags([]).tolist() == []


# --------------------------------------------------------------------- cache
CACHED_TEXTS = ["Great phone!", BASE, "great phone", OTHER, ONE_CHANGED, "works fine"]


def test_the_cache_is_used_on_the_second_call_and_a_damaged_one_recomputes(tmp_path, monkeypatch):
    preds = hand_built(CACHED_TEXTS, tmp_path)
    train = ["GREAT PHONE", SAME_TOPIC]
    first = H.cached_report(preds, train)
    assert not first.cached and (tmp_path / H.REPORT).exists() and (tmp_path / H.PAIRS).exists()
    real = H._all_pairs
    monkeypatch.setattr(H, "_all_pairs", lambda *a, **k: pytest.fail("recomputed"))
    second = H.cached_report(preds, train)
    assert second.cached and second.to_json() == first.to_json()
    assert pd.testing.assert_frame_equal(second.pairs, first.pairs) is None
    assert second.leakage.equals(first.leakage) and second.conflicts.equals(first.conflicts)
    monkeypatch.setattr(H, "_all_pairs", real)

    (tmp_path / H.PAIRS).write_bytes(b"not a parquet file")
    third = H.cached_report(preds, train)
    assert not third.cached and third.to_json() == first.to_json()
    assert H.cached_report(preds, train).cached

    (tmp_path / H.REPORT).write_text("{ broken")
    assert not H.cached_report(preds, train).cached
    assert not H.cached_report(preds, None).cached          # other train texts: another key
    assert not H.cached_report(preds, None, threshold=0.8).cached
    assert H.cached_report(preds, None, threshold=0.8).cached


def test_a_cache_naming_rows_out_of_range_recomputes(tmp_path):
    preds = hand_built(CACHED_TEXTS, tmp_path)
    H.cached_report(preds)
    frame = pd.read_parquet(tmp_path / H.PAIRS)
    frame.loc[0, "row_b"] = 99
    frame.to_parquet(tmp_path / H.PAIRS, index=False)
    meta = json.loads((tmp_path / H.REPORT).read_text())
    meta["pairs_sha256"] = H._file_sha(tmp_path / H.PAIRS)      # a consistent but wrong file
    (tmp_path / H.REPORT).write_text(json.dumps(meta))
    assert not H.cached_report(preds).cached


def test_no_folder_means_no_cache():
    assert not H.cached_report(hand_built(CACHED_TEXTS)).cached
    assert not H.cached_report(hand_built(CACHED_TEXTS)).cached


# ------------------------------------------------------------------ progress
def test_progress_reports_each_chunk_and_an_exception_stops_the_work(monkeypatch):
    monkeypatch.setattr(H, "CHUNK", 2)
    texts = [" ".join(words(BASE)[k:] + words(BASE)[:k]) for k in range(10)]
    seen = []
    H.hygiene_report(texts, [1] * 10, train_texts=texts[:3], progress=lambda d, t: seen.append((d, t)))
    assert seen == [(d, 20) for d in range(2, 21, 2)]

    class Stop(Exception):
        pass

    calls = []

    def stop(done, total):
        calls.append(done)
        raise Stop

    chunks = []
    real = H._candidates
    monkeypatch.setattr(H, "_candidates", lambda *a: chunks.append(1) or real(*a))
    with pytest.raises(Stop):
        H.near_duplicate_flags(texts, progress=stop)
    assert calls == [2] and len(chunks) == 1        # no chunk after the one that raised
