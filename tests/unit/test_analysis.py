"""reviewbert.analysis: intervals, McNemar, calibration, breakdowns, cleanlab, per-rating
attention and the prediction cache (tiny model; no real data)."""
from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from reviewbert.analysis import breakdown as B
from reviewbert.analysis import cache, lookup, predict_split
from reviewbert.analysis import word_attention as W
from reviewbert.analysis.calibration import reliability
from reviewbert.analysis.compare import compare, mcnemar, mcnemar_from_counts
from reviewbert.analysis.intervals import mean_interval, metric_intervals
from reviewbert.analysis.label_issues import find_issues
from reviewbert.analysis.predictions import SplitPredictions, build_frame
from reviewbert.data.examples import Review
from reviewbert.model.attention import word_scores
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.model.inference import Predictor
from reviewbert.model.labels import FIVE
from reviewbert.model.metrics import compute_metrics

from toyreviews import toy_rows


def synthetic(n: int, seed: int, flip: float = 0.0):
    """Labels and probabilities of a decent 5-class model; ``flip`` of the labels swapped."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n)
    logits = rng.normal(0, 1, (n, 5))
    logits[np.arange(n), y] += 2.5
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    flipped = rng.random(n) < flip
    y_given = np.where(flipped, (y + 2) % 5, y)
    return y_given, p, flipped


def preds_of(y, p, texts=None) -> SplitPredictions:
    reviews = [Review(texts[i] if texts else f"review {i}", int(c) + 1, "test")
               for i, c in enumerate(y)]
    return SplitPredictions(build_frame(reviews, FIVE, p, [10] * len(y)), FIVE,
                            {"max_length": 128, "data": {"sha256": "x", "n": len(y)}})


# ------------------------------------------------------------------ intervals
def test_bootstrap_intervals_cover_the_true_value():
    """Accuracy is 0.7 in the population; 95 % intervals from samples of 400 should
    contain it about 95 times in 100 (binomial: 88..99 with overwhelming probability)."""
    rng = np.random.default_rng(1)
    hits = 0
    for rep in range(100):
        sample = rng.random(400) < 0.7
        iv = mean_interval(sample, n_resamples=500, seed=rep)
        hits += iv.contains(0.7)
        assert iv.low < sample.mean() < iv.high
    assert 88 <= hits <= 99, hits


def test_metric_intervals_bracket_every_metric():
    y, p, _ = synthetic(600, seed=2)
    iv = metric_intervals(y, p, 5, n_resamples=300, auc_resamples=100)
    point = compute_metrics(y, p, 5)
    for m in ("loss", "auc", "accuracy", "relaxed_accuracy"):
        assert iv[m].value == pytest.approx(point[m])
        assert iv[m].low < iv[m].value < iv[m].high, (m, iv[m])
    # about ±1.96 standard errors for an accuracy on 600 reviews
    se = np.sqrt(point["accuracy"] * (1 - point["accuracy"]) / 600)
    assert iv["accuracy"].high - iv["accuracy"].low == pytest.approx(2 * 1.96 * se, rel=0.2)


# ------------------------------------------------------------------ McNemar
def test_mcnemar_on_a_hand_made_table():
    # b = 10 (A right, B wrong), c = 2: exact p = 2 * P(X <= 2 | n=12, 1/2) = 2 * 79 / 4096
    t = mcnemar_from_counts(10, 2, n=100)
    assert t.p_exact == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert t.chi2 == pytest.approx(49 / 12)
    assert t.p_chi2 == pytest.approx(stats.chi2.sf(49 / 12, 1))
    assert mcnemar_from_counts(5, 5).p_exact == pytest.approx(1.0)
    none = mcnemar_from_counts(0, 0, n=30)
    assert none.p_exact == 1.0 and none.chi2 is None
    # from "was right" vectors: both right 80, only A 10, only B 2, both wrong 8
    a = np.array([1] * 80 + [1] * 10 + [0] * 2 + [0] * 8, bool)
    b = np.array([1] * 80 + [0] * 10 + [1] * 2 + [0] * 8, bool)
    assert (mcnemar(a, b).b, mcnemar(a, b).c, mcnemar(a, b).n) == (10, 2, 100)


def test_compare_refuses_other_reviews_and_lists_disagreements():
    y, p, _ = synthetic(50, seed=3)
    a = preds_of(y, p)
    q = p.copy()
    q[:5] = np.roll(q[:5], 1, axis=1)          # B gets the first five differently
    b = preds_of(y, q)
    cmp = compare(a, b)
    disagree = np.flatnonzero(a.correct != b.correct)
    assert sorted([*cmp.only_a, *cmp.only_b]) == disagree.tolist()
    assert cmp.test.b == len(cmp.only_a) and cmp.test.c == len(cmp.only_b)
    with pytest.raises(ValueError):
        compare(a, preds_of(y[:40], p[:40]))


# ------------------------------------------------------------------ calibration
def test_reliability_bins_and_ece_by_hand():
    # confidences 0.95 (right), 0.95 (wrong), 0.55 (right), 0.35 (right)
    probs = np.array([[0.95, 0.05, 0.0], [0.95, 0.05, 0.0], [0.55, 0.45, 0.0],
                      [0.35, 0.33, 0.32]])
    y = np.array([0, 1, 0, 0])
    rel = reliability(y, probs, n_bins=10)
    assert rel.count.tolist() == [0, 0, 0, 1, 0, 1, 0, 0, 0, 2]
    assert rel.accuracy[9] == 0.5 and rel.confidence[9] == pytest.approx(0.95)
    assert rel.accuracy[5] == 1.0 and rel.confidence[5] == pytest.approx(0.55)
    assert np.isnan(rel.accuracy[0])
    # ECE = 2/4 * |0.5 - 0.95| + 1/4 * |1 - 0.55| + 1/4 * |1 - 0.35|
    assert rel.ece == pytest.approx(0.5 * 0.45 + 0.25 * 0.45 + 0.25 * 0.65)
    # perfectly calibrated: each bin's accuracy equals its confidence
    perfect = reliability([0, 0, 1, 0], [[0.75, 0.25]] * 4, n_bins=4)
    assert perfect.ece == pytest.approx(0.0)


# ------------------------------------------------------------------ breakdowns
def test_length_bins_and_the_seed_filter():
    n_tokens = np.array([5, 40, 80, 99, 100, 120, 126, 127, 300])
    correct = np.array([1, 1, 0, 0, 1, 1, 0, 1, 0], bool)
    bins = B.length_bins(n_tokens, correct, max_length=128)
    assert bins["n"].tolist() == [1, 1, 2, 3, 2]          # 0–31, 32–63, 64–99, 100–126, >126
    assert bins["tokens"].iloc[-1] == "> 126 (truncated)"
    assert bins["accuracy"].tolist()[:4] == [1.0, 1.0, 0.0, pytest.approx(2 / 3)]
    assert (bins["low"] <= bins["accuracy"]).all() and (bins["accuracy"] <= bins["high"]).all()
    y = np.array([0, 1, 2, 3, 4, 0, 1, 2, 3])
    p = np.eye(5)[np.where(correct, y, (y + 1) % 5)] * 0.9 + 0.02
    sf = B.seed_filter(y, p, n_tokens, FIVE.names)
    assert sf["n"].tolist() == [9, 5, 4]
    assert sf["accuracy"].tolist() == [pytest.approx(5 / 9), pytest.approx(3 / 5), 0.5]
    assert sf["n 1 star"].tolist() == [2, 1, 1]


def test_per_class_and_roc():
    y, p, _ = synthetic(300, seed=4)
    pc = B.per_class(y, p.argmax(1), FIVE.names)
    assert pc["support"].tolist()[:5] == np.bincount(y, minlength=5).tolist()
    curves = B.roc_curves(y, p, FIVE.names)
    from sklearn.metrics import roc_auc_score
    assert np.mean([c["auc"] for c in curves]) == pytest.approx(
        roc_auc_score(y, p, multi_class="ovr", average="macro"))
    assert len(B.roc_curves(np.zeros(10, int), p[:10], FIVE.names)) == 0  # one class: no curve


# ------------------------------------------------------------------ cleanlab
def test_cleanlab_ranks_flipped_labels_first():
    y, p, flipped = synthetic(1000, seed=5, flip=0.05)
    iss = find_issues(preds_of(y, p))
    top = iss.ranked[:30]
    assert flipped[top].mean() > 0.8                 # the flagged reviews are the flipped ones
    assert flipped[iss.ranked].mean() > 3 * flipped.mean()
    assert iss.metrics_clean["n"] == 1000 - iss.count
    assert iss.metrics_clean["accuracy"] > iss.metrics_all["accuracy"]
    q = iss.quality[iss.ranked]
    assert q[0] <= np.median(iss.quality)            # ranked by label quality, worst first
    t = iss.table(preds_of(y, p), top=5)
    assert t["rank"].tolist() == [1, 2, 3, 4, 5] and t["row"].tolist() == iss.ranked[:5].tolist()


# ------------------------------------------------------------------ per-rating attention
def test_top_words_by_hand():
    att = pd.DataFrame({
        "review": [0, 0, 0, 1, 1, 2, 2, 3],
        "word": ["great", "the", "great", "great", "!", "bad", "great", "bad"],
        "layer_1": [0.1, 0.5, 0.2, 0.4, 0.6, 0.7, 0.3, 0.9],
        "layer_2": [0.0] * 8})
    classes = np.array([4, 4, 0, 0])
    tops = W.top_words(att, classes, 0, 5, min_count=1, hide_stopwords=True)
    # "great" in class 4: review 0 sums its two occurrences (0.3), review 1 has 0.4 -> 0.35
    c4 = tops[4].set_index("word")
    assert c4.loc["great", "attention"] == pytest.approx(0.35) and c4.loc["great", "reviews"] == 2
    assert "the" not in c4.index and "!" not in c4.index      # stop-word, punctuation
    assert tops[0]["word"].tolist() == ["bad", "great"]        # 0.8 mean, then 0.3
    shown = W.top_words(att, classes, 0, 5, min_count=1, hide_stopwords=False)
    assert {"the", "!"} <= set(shown[4]["word"])
    assert W.top_words(att, classes, 0, 5, min_count=2)[0]["word"].tolist() == ["bad"]
    assert tops[1].empty
    hidden = [w for w in ("the", "!", "t", "don", "...", "battery", "5g", "x") if
              not W.is_shown_word(w, True)]
    assert hidden == ["the", "!", "t", "don", "...", "x"]


@pytest.fixture(scope="module")
def tiny_predictor(tiny_model_dir):
    torch.set_num_threads(1)
    return Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))


def test_attention_pass_matches_the_single_review_path(tiny_predictor):
    """The batched, padded pass gives each review the [CLS]->word attention the main
    page's exact single-review path gives it."""
    texts = ["Battery died, support never answered!", "Great phone.",
             "The screen is ok but the battery-life is awful " * 3, "okay"]
    att = W.attention_pass(tiny_predictor.model, tiny_predictor.tokenizer, texts,
                           max_length=24, batch_size=3)
    layers = W.layer_columns_of(att)
    assert len(layers) == 2
    for i, text in enumerate(texts):
        pred = Predictor(tiny_predictor.model, tiny_predictor.tokenizer, max_length=24).predict(text)
        part = att[att["review"] == i]
        assert part["word"].tolist() == [w.lower() for w in pred.words]
        for li, col in enumerate(layers):
            np.testing.assert_allclose(part[col].to_numpy(), word_scores(pred, li), atol=1e-5)
            assert part[col].sum() == pytest.approx(1.0, abs=1e-5)


def test_example_rows_pick_the_most_confident_correct():
    y = np.array([0, 0, 1, 2, 2])
    p = np.full((5, 5), 0.05)
    p[0, 0], p[1, 0], p[2, 3], p[3, 2], p[4, 2] = 0.6, 0.8, 0.8, 0.7, 0.65
    rows = W.example_rows(preds_of(y, p / p.sum(1, keepdims=True)))
    assert rows == {0: 1, 1: None, 2: 3, 3: None, 4: None}


# ------------------------------------------------------------------ the cache
REVIEWS = [Review(t, s, "toy.csv") for t, s in toy_rows(30)]


@pytest.fixture
def ckpt(tmp_path, tiny_model_dir):
    d = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, d)
    return d


def _run(path, reviews, **kw):
    model, tok, info = load_checkpoint(path, torch.device("cpu"))
    return predict_split(model, tok, path, reviews, info.scheme, max_length=32,
                         precision="fp32", **kw)


def test_cache_written_reused_and_never_stale(ckpt):
    first = _run(ckpt, REVIEWS)
    assert not first.cached and first.folder.parent == ckpt / ".analysis"
    files = sorted(p.name for p in first.folder.iterdir())
    # the sentence vectors come with the predictions (issue 26: the split map)
    assert files == ["embeddings-cls-L2.json", "embeddings-cls-L2.npy", "meta.json",
                     "predictions.parquet"]
    meta = json.loads((first.folder / "meta.json").read_text())
    assert meta["data"]["n"] == 30 and meta["precision"] == "fp32" and meta["max_length"] == 32
    again = _run(ckpt, REVIEWS)
    assert again.cached and again.folder == first.folder
    pd.testing.assert_frame_equal(again.frame, first.frame)
    assert lookup(ckpt, REVIEWS, FIVE, 32).cached

    # other data: one review's rating changed -> a new evaluation, not the old one
    edited = [Review(REVIEWS[0].text, REVIEWS[0].stars % 5 + 1, "toy.csv"), *REVIEWS[1:]]
    assert lookup(ckpt, edited, FIVE, 32) is None
    other = _run(ckpt, edited)
    assert not other.cached and other.folder != first.folder
    # other settings: max_length is part of the key
    assert lookup(ckpt, REVIEWS, FIVE, 16) is None

    # the checkpoint re-saved with other weights: nothing old is served
    model, tok, _ = load_checkpoint(ckpt, torch.device("cpu"))
    with torch.no_grad():
        model.classifier.bias[0] += 1.0      # class 1 becomes likelier
    model.save_pretrained(ckpt, safe_serialization=True)
    assert lookup(ckpt, REVIEWS, FIVE, 32) is None
    changed = _run(ckpt, REVIEWS)
    assert not changed.cached and changed.folder != first.folder
    assert not np.allclose(changed.probs, first.probs)

    # the same bytes written again (new mtime): still found, by content
    (ckpt / "config.json").write_bytes((ckpt / "config.json").read_bytes())
    assert lookup(ckpt, REVIEWS, FIVE, 32).folder == changed.folder


def test_unfinished_cache_folder_is_ignored(ckpt):
    first = _run(ckpt, REVIEWS)
    (first.folder / "meta.json").unlink()           # as if killed before the last write
    assert lookup(ckpt, REVIEWS, FIVE, 32) is None
    assert not _run(ckpt, REVIEWS).cached
    assert lookup(ckpt, REVIEWS, FIVE, 32) is not None


def test_read_only_checkpoint_caches_elsewhere(ckpt, tmp_path, monkeypatch):
    monkeypatch.setenv("REVIEWBERT_ANALYSIS_CACHE", str(tmp_path / "elsewhere"))
    # a file where .analysis/ would be: no user can create the folder there, root included
    # (root writes into a chmod 0o555 folder, and these tests may run as root)
    (ckpt / cache.FOLDER).write_text("a file, not a folder")
    got = _run(ckpt, REVIEWS)
    assert str(got.folder).startswith(str(tmp_path / "elsewhere"))
    assert _run(ckpt, REVIEWS).cached


def test_attention_is_cached_with_the_predictions(ckpt, tiny_predictor):
    preds = _run(ckpt, REVIEWS[:8])
    model = Predictor.from_checkpoint(ckpt, torch.device("cpu")).model
    att = W.word_attention(preds, model, tiny_predictor.tokenizer)
    assert (preds.folder / "attention.parquet").exists()
    assert json.loads((preds.folder / "attention.json").read_text())["layers"] == 2
    again = W.word_attention(preds, None, None)          # no model needed: read back
    pd.testing.assert_frame_equal(again, att)
    assert set(att["review"]) == set(range(8))


def test_sampler_reads_the_cache(ckpt, tiny_predictor):
    from reviewbert.ui.predict import _cached_mistakes
    preds = _run(ckpt, REVIEWS)
    model, tok, _ = load_checkpoint(ckpt, torch.device("cpu"))
    pred = SimpleNamespace(scheme=FIVE, max_length=32)
    wrong = _cached_mistakes(REVIEWS, pred, str(ckpt))
    assert wrong == [r for r, ok in zip(REVIEWS, preds.correct) if not ok]
    assert _cached_mistakes(REVIEWS[:5], pred, str(ckpt)) is None     # never evaluated


def test_the_cache_stamp_changes_when_an_evaluation_or_its_vectors_are_written(tmp_path, monkeypatch):
    """A page may cache what it found in the prediction cache until the stamp changes."""
    import os
    import time
    monkeypatch.setenv("REVIEWBERT_ANALYSIS_CACHE", str(tmp_path / "fallback"))
    ck = tmp_path / "ckpt"
    ck.mkdir()
    empty = cache.stamp(ck)
    assert cache.stamp(ck) == empty                     # asking again changes nothing
    key_dir = ck / cache.FOLDER / "k1"
    key_dir.mkdir(parents=True)
    first = cache.stamp(ck)
    assert first != empty                               # a new evaluation's folder
    later = time.time() + 5
    (key_dir / "embeddings-cls-L6.npy").write_bytes(b"x")
    os.utime(key_dir, (later, later))                   # what the file's creation does, visibly
    assert cache.stamp(ck) != first                     # its vectors, written beside it
