"""The split map (reviewbert.analysis: embeddings, projection, neighbours, map reading,
drivers, slices) on the tiny random BERT and toy tables; no real data."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import strategies as hst

from reviewbert.analysis import drivers as D
from reviewbert.analysis import embeddings as E
from reviewbert.analysis import map_figures, map_reading, neighbours, predict_split
from reviewbert.analysis import projection as P
from reviewbert.analysis import slices as S
from reviewbert.analysis.predictions import SplitPredictions, build_frame
from reviewbert.data.examples import Review
from reviewbert.explain import methods as explain
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.model.inference import Predictor
from reviewbert.model.labels import FIVE

from fuzzing import time_limit, twins
from hostile_texts import CORPUS

TEXTS = ["great phone, love it", "battery died after a week. terrible!!", "ok",
         "meh " * 60, "The screen cracked on day two and support never answered.",
         "five stars", "Works fine. Battery lasts two days.", "refund please", "😀 good",
         "not bad at all, honestly better than my old one"]


@pytest.fixture
def ckpt(tmp_path, tiny_model_dir):
    path = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, path)
    return path


def reviews_of(texts):
    return [Review(t, i % 5 + 1, "a.csv" if i % 2 else "b.csv") for i, t in enumerate(texts)]


# ------------------------------------------------------------------ embeddings
def test_stored_vectors_are_plain_transformers_cls_within_fp16(ckpt):
    """The cached vectors (batched, padded, through the evaluation pass) equal plain
    transformers' last-layer [CLS] hidden state of each review alone, within fp16
    rounding (half a unit in the last place: |x| * 2^-11)."""
    from transformers import AutoModel
    model, tok, _ = load_checkpoint(ckpt)
    preds = predict_split(model, tok, ckpt, reviews_of(TEXTS), FIVE, max_length=64,
                          precision="fp32", batch_size=4)
    name = E.DEFAULT.name(E.n_layers_of(model))
    assert name == "cls-L2"
    stored = E.read_vectors(preds.folder, name)          # written by the evaluation itself
    assert stored is not None and stored.dtype == np.float16 and stored.shape == (len(TEXTS), 32)
    plain = AutoModel.from_pretrained(ckpt).eval()
    eager = load_checkpoint(ckpt, attn_implementation="eager")[0]   # the Predictor's model
    for i, text in enumerate(TEXTS):
        enc = tok(text, truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            ref = plain(**enc).last_hidden_state[0, 0].numpy()
        err = np.abs(stored[i].astype(np.float32) - ref)
        assert (err <= np.abs(ref) * 2.0 ** -11 + 1e-6).all(), (i, err.max())
        # the Predict page's one-review paths give the same vector: the prediction's own
        # pass (FastBertForward and the eager fallback), and the module-by-module pass
        q = E.query_vector(model, tok, text, max_length=64)
        assert np.array_equal(q, stored[i]) or np.abs(q.astype(np.float32) - ref).max() <= \
            np.abs(ref).max() * 2.0 ** -10
        for fast in (True, False):
            own = Predictor(eager, tok, max_length=64, fast=fast).predict(text).cls_vector
            assert own.dtype == np.float32 and np.abs(own - ref).max() <= 1e-5, (fast, i)


def test_mean_pooling_and_other_layers(ckpt):
    from transformers import AutoModel
    model, tok, _ = load_checkpoint(ckpt)
    plain = AutoModel.from_pretrained(ckpt).eval()
    spec = E.EmbeddingSpec("mean", 1)
    got = E.embed_texts(model, tok, TEXTS[:4], spec=spec, max_length=64, batch_size=3)
    for i, text in enumerate(TEXTS[:4]):
        enc = tok(text, truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            ref = plain(**enc, output_hidden_states=True).hidden_states[1][0].mean(0).numpy()
        assert np.abs(got[i].astype(np.float32) - ref).max() <= np.abs(ref).max() * 2.0 ** -10
    with pytest.raises(ValueError, match="does not exist"):
        E.EmbeddingSpec("cls", 9).name(2)
    with pytest.raises(ValueError):
        E.EmbeddingSpec("max")


def test_the_tap_hooks_one_layer_and_falls_back_to_every_hidden_state(ckpt, monkeypatch):
    """The tap reads its layer through a hook on that layer alone (no hidden states asked
    of the model), removes the hook afterwards, and gives the same rows as the fallback
    that asks for every hidden state (a model whose layers it cannot find)."""
    model, tok, _ = load_checkpoint(ckpt)
    for spec in (E.DEFAULT, E.EmbeddingSpec("mean", 1), E.EmbeddingSpec("cls", 0)):
        tap = E.VectorTap(spec, E.n_layers_of(model))
        module = E.layer_module(model, tap.layer)
        assert module is not None
        before = dict(module._forward_hooks)   # transformers' own output-capturing hook
        with tap.attached(model):
            assert tap.forward_kwargs() == {} and len(module._forward_hooks) == len(before) + 1
        assert dict(module._forward_hooks) == before
        assert tap.forward_kwargs() == {"output_hidden_states": True}
        hooked = E.embed_texts(model, tok, TEXTS, spec=spec, max_length=64, batch_size=4)
        with monkeypatch.context() as m:
            m.setattr(E, "layer_module", lambda *_: None)
            fallback = E.embed_texts(model, tok, TEXTS, spec=spec, max_length=64, batch_size=4)
        assert np.array_equal(hooked, fallback), spec


def test_old_cache_without_embeddings_reads_and_computes_only_when_asked(ckpt):
    model, tok, _ = load_checkpoint(ckpt)
    reviews = reviews_of(TEXTS)
    first = predict_split(model, tok, ckpt, reviews, FIVE, max_length=64, precision="fp32")
    for f in first.folder.glob("embeddings-*"):      # as a cache from before embeddings
        f.unlink()
    again = predict_split(model, tok, ckpt, reviews, FIVE, max_length=64, precision="fp32")
    assert again.cached and again.vectors == {}
    assert E.vectors_for(again, model, tok, compute=False) is None
    calls = []
    vecs = E.vectors_for(again, model, tok, progress=calls.append)
    assert sum(calls) == len(TEXTS)                   # one pass, now
    assert np.array_equal(vecs, E.read_vectors(again.folder, "cls-L2"))
    third = predict_split(model, tok, ckpt, reviews, FIVE, max_length=64, precision="fp32")
    calls.clear()
    assert np.array_equal(E.vectors_for(third, model, tok, progress=calls.append), vecs)
    assert calls == []                                # read, not computed
    assert E.available(third) == ["cls-L2"]


def test_npy_row_writer_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(n, 7)).astype(np.float16) for n in (3, 0, 11)]
    w = E.NpyRowWriter(tmp_path / "v.npy", 7)
    for p in parts:
        w.write(p)
    assert not (tmp_path / "v.npy").exists()          # only on close
    w.close()
    got = np.load(tmp_path / "v.npy", allow_pickle=False)
    assert got.dtype == np.float16 and np.array_equal(got, np.concatenate(parts))
    w = E.NpyRowWriter(tmp_path / "x.npy", 7)
    with pytest.raises(ValueError):
        w.write(np.zeros((2, 5)))
    w.abort()
    assert not list(tmp_path.glob(".x.npy*"))


# ------------------------------------------------------------------ projection
def test_pca_recovers_known_structure(tmp_path):
    """Three tight clusters along two known directions in 40-D: PCA's 2-D map keeps them
    apart (each point nearest its own centre) and finds almost all the variance."""
    rng = np.random.default_rng(0)
    centres = np.zeros((3, 40))
    centres[1, 3], centres[2, 17] = 5.0, 5.0
    labels = np.repeat(np.arange(3), 50)
    x = centres[labels] + rng.normal(0, 0.05, (150, 40)) + 10.0 * np.eye(40)[0]
    p = P.project(x, "pca", 2, folder=tmp_path, vectors_name="toy")
    assert p.coords.shape == (150, 2) and not p.cached
    assert sum(p.explained) > 0.95
    mean = np.stack([p.coords[labels == c].mean(0) for c in range(3)])
    nearest = np.argmin(((p.coords[:, None] - mean[None]) ** 2).sum(-1), axis=1)
    assert (nearest == labels).all()
    again = P.project(x, "pca", 2, folder=tmp_path, vectors_name="toy")
    assert again.cached and np.array_equal(again.coords, p.coords)
    three = P.project(x, "pca", 3, folder=tmp_path, vectors_name="toy")
    assert three.coords.shape == (150, 3) and not three.cached
    with pytest.raises(ValueError):
        P.project(x, "tsne", 2)


@pytest.mark.umap
def test_umap_runs_on_a_small_toy_set():
    """UMAP's first call compiles its numba code: ~67 s on a 2-core AVX2 CPU, so it runs with
    `make umap` (CI's step after make test), beside UMAP of 10,000 real reviews."""
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(2), 40)
    x = rng.normal(0, 0.1, (80, 16)) + 3.0 * np.eye(16)[labels]
    p = P.project(x, "umap", 2, n_neighbors=10)
    assert p.coords.shape == (80, 2) and np.isfinite(p.coords).all()
    nb, _ = neighbours.nearest(p.coords, k=5)
    assert (labels[nb] == labels[:, None]).mean() > 0.95   # the clusters stay apart
    with pytest.raises(ValueError, match="use PCA"):
        P.project(x[:8], "umap", 2)


# ------------------------------------------------------------------ neighbours
def brute_force(x, q, k, skip=None):
    """The reference: every cosine similarity, by a plain double loop."""
    sims = []
    for i, v in enumerate(x):
        if i == skip:
            continue
        sims.append((float(np.dot(v, q) / (np.linalg.norm(v) * np.linalg.norm(q))), i))
    sims.sort(key=lambda t: -t[0])
    return [i for _, i in sims[:k]], [s for s, _ in sims[:k]]


def test_neighbours_equal_brute_force():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 24)).astype(np.float32)
    idx, sim = neighbours.nearest(x, k=10)
    for r in range(len(x)):
        ref_i, ref_s = brute_force(x, x[r], 10, skip=r)
        assert list(idx[r]) == ref_i
        assert np.allclose(sim[r], ref_s, atol=1e-5)
    q = rng.normal(size=(3, 24))
    qi, qs = neighbours.nearest(x, q, k=7)
    for j in range(3):
        ref_i, ref_s = brute_force(x, q[j], 7)
        assert list(qi[j]) == ref_i and np.allclose(qs[j], ref_s, atol=1e-5)


def test_neighbours_match_scikit_learn_and_keep_duplicates():
    """The blocked matrix product finds the neighbours scikit-learn's brute-force cosine
    search finds (blocks smaller than the split), and a review's exact duplicate is its
    nearest neighbour while the review itself never is."""
    from sklearn.neighbors import NearestNeighbors
    rng = np.random.default_rng(4)
    x = rng.normal(size=(700, 16)).astype(np.float32)
    x[5] = x[9]
    old = neighbours.BLOCK_BYTES
    try:
        neighbours.BLOCK_BYTES = 4 * 700 * 64                 # blocks of 64 rows
        idx, sim = neighbours.nearest(x, k=8)
    finally:
        neighbours.BLOCK_BYTES = old
    dist, ref = NearestNeighbors(metric="cosine", algorithm="brute").fit(x).kneighbors(
        x, n_neighbors=10)
    for r in range(len(x)):
        others = [(j, d) for j, d in zip(ref[r], dist[r]) if j != r][:8]
        assert r not in idx[r]
        assert set(idx[r]) == {j for j, _ in others}, r   # rows 5 and 9 tie in any order
        assert np.allclose(sim[r], [1.0 - d for _, d in others], atol=1e-5)
    assert idx[5][0] == 9 and idx[9][0] == 5 and sim[5][0] == pytest.approx(1.0, abs=1e-6)


def test_agreement_majority_and_reading_by_hand():
    assert np.allclose(neighbours.agreement([[1, 1, 2, 3], [0, 0, 0, 0]], [1, 2]), [0.5, 0.0])
    # ties go to the nearer neighbour's class
    assert list(neighbours.majority([[2, 1, 1, 2], [0, 3, 3, 0]], 4)) == [2, 0]
    # two well separated groups (0 and 4) and three mixed ones (1, 2, 3)
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(5), 30)
    centres = np.stack([np.eye(8)[0] * 6, np.zeros(8), np.zeros(8), np.zeros(8), np.eye(8)[1] * 6])
    x = centres[y] + rng.normal(0, 1, (150, 8)) + 10 * np.eye(8)[2]
    nb = neighbours.split_neighbours(x, y, y, 5, k=10)
    r = map_reading.read_map(x, y, y, ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"], nb)
    own = np.diag(r.purity)
    assert own[0] > 0.9 and own[4] > 0.9 and own[1:4].max() < 0.5
    assert np.allclose(r.purity.sum(1), 1.0)
    assert r.text.startswith("1 star and 5 stars stand apart")
    assert "2 stars, 3 stars and 4 stars overlap" in r.text and "k-NN" in r.text
    assert r.mean_agreement == pytest.approx(nb.mean_agreement)


# ------------------------------------------------------------------ slices
def toy_table(n_a=400, n_b=1600, acc_a=0.30, acc_b=0.70):
    """A toy split whose slice "a.csv" has exactly acc_a accuracy and the rest acc_b."""
    y = np.zeros(n_a + n_b, dtype=int)
    pred = np.zeros_like(y)
    pred[: int(n_a * (1 - acc_a))] = 2                 # wrong by two stars
    pred[n_a: n_a + int(n_b * (1 - acc_b))] = 1        # wrong by one star
    src = np.array(["a.csv"] * n_a + ["b.csv"] * n_b)
    probs = np.full((len(y), 5), 0.05)
    probs[np.arange(len(y)), pred] = 0.8
    reviews = [Review(f"review {i}" + (" battery" if i % 4 == 0 else ""), int(c) + 1, s)
               for i, (c, s) in enumerate(zip(y, src))]
    return SplitPredictions(build_frame(reviews, FIVE, probs, [10] * len(y)), FIVE,
                            {"max_length": 128, "data": {"n": len(y)}})


def test_slice_intervals_on_a_toy_table_with_known_accuracies():
    preds = toy_table()
    m = S.mask_of(S.SliceSpec(sources=("a.csv",)), preds)
    st = S.slice_stats(m, preds.y, preds.pred, "a", n_resamples=2000)
    assert (st.n, st.n_rest) == (400, 1600)
    assert st.accuracy.value == pytest.approx(0.30) and st.rest_accuracy.value == pytest.approx(0.70)
    assert st.gap.value == pytest.approx(-0.40)
    se_a, se_gap = np.sqrt(0.3 * 0.7 / 400), np.sqrt(0.3 * 0.7 / 400 + 0.7 * 0.3 / 1600)
    assert st.accuracy.high - st.accuracy.low == pytest.approx(2 * 1.96 * se_a, rel=0.15)
    assert st.gap.high - st.gap.low == pytest.approx(2 * 1.96 * se_gap, rel=0.15)
    assert st.accuracy.contains(0.30) and st.gap.contains(-0.40) and st.gap.high < 0
    # relaxed accuracy: a.csv's mistakes are two stars off, b.csv's one star off
    assert st.relaxed.value == pytest.approx(0.30) and st.rest_relaxed.value == pytest.approx(1.0)
    table = S.slice_table(preds, n_resamples=300)
    assert table.iloc[0]["slice"] == "file a.csv" and table.iloc[-1]["slice"] == "file b.csv"
    assert list(table["gap"]) == sorted(table["gap"])
    assert "below the rest beyond resampling noise" in S.worst_reading(table)[0]
    # every toy review has true rating 1, so the rest's 1-star accuracy is what a.csv expects
    assert st.expected == pytest.approx(0.70)
    assert "its mix of ratings alone predicts 70.0%, so -40.0% is the slice's own" in \
        S.worst_reading(table)[0]


def test_expected_accuracy_follows_the_rating_mix():
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1])
    hit = np.array([1, 1, 0, 0, 1, 0, 0, 1], dtype=float)    # rest: class 0 50 %, class 1 50 %
    mask = np.array([True, True, True, True, False, False, False, False])
    assert S.expected_accuracy(mask, y, hit) == pytest.approx(0.5)
    hit2 = np.array([1, 1, 0, 0, 1, 1, 0, 0], dtype=float)   # rest: class 0 100 %, class 1 0 %
    mask2 = np.array([True, True, True, False, False, False, False, False])   # 2 x class 0, 1 x 1
    assert S.expected_accuracy(mask2, y, hit2) == pytest.approx(2 / 3)


def test_slice_conditions_combine():
    preds = toy_table(n_a=40, n_b=60)
    flagged = np.arange(100) % 2 == 0
    spec = S.SliceSpec(sources=("a.csv",), contains="battery", label_issue=True, rows=tuple(range(30)))
    m = S.mask_of(spec, preds, flagged)
    expect = np.zeros(100, dtype=bool)
    expect[[i for i in range(30) if i % 4 == 0]] = True
    assert np.array_equal(m, expect)
    assert S.mask_of(S.SliceSpec(true=(0,), predicted=(2,)), preds).sum() == 28
    with pytest.raises(S.SliceError):
        S.mask_of(S.SliceSpec(label_issue=True), preds, None)
    assert spec.describe(preds.names).startswith("file a.csv · flagged by cleanlab")
    assert S.SliceSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_phrase_matching_is_literal_and_whole_word():
    texts = ["Bad battery", "badly made", "BAD  BATTERY!!", "a (bad) day", "c++ rocks", "x.*y"]
    assert list(S.contains_mask(texts, "bad battery")) == [True, False, True, False, False, False]
    assert list(S.contains_mask(texts, "bad")) == [True, False, True, True, False, False]
    assert list(S.contains_mask(texts, "c++")) == [False] * 4 + [True, False]
    assert list(S.contains_mask(texts, ".*")) == [False] * 5 + [True]
    assert list(S.contains_mask(texts, "!!")) == [False, False, True, False, False, False]
    for bad in ("", "   ", "x" * 201):
        with pytest.raises(S.SliceError):
            S.check_phrase(bad)


def test_saved_slices_round_trip_and_names(tmp_path):
    spec = S.SliceSpec(contains="battery", lengths=("0–31 tokens",))
    assert S.save_slice(tmp_path, "  short   battery ", spec) == "short battery"
    assert S.load_saved(tmp_path) == {"short battery": spec}
    S.delete_slice(tmp_path, "short battery")
    assert S.load_saved(tmp_path) == {}
    for bad in ("", " ", "x" * 61, "a\u202eb", "nul\x00", "tab\tis fine?"):
        if bad == "tab\tis fine?":
            assert S.check_name(bad) == "tab is fine?"     # whitespace collapses
            continue
        with pytest.raises(S.SliceError):
            S.check_name(bad)
    with pytest.raises(S.SliceError, match="every review"):
        S.save_slice(tmp_path, "all", S.SliceSpec())
    (tmp_path / S.FILE).write_text("{torn")
    assert S.load_saved(tmp_path) == {}


def _any_phrase_is_literal(phrase):
    """Any phrase either is refused with a SliceError or matches exactly the texts that
    contain it (ignoring case and runs of whitespace), and never hangs."""
    texts = [f"before {phrase} after", "nothing here", phrase]
    with time_limit(10, "contains"):
        try:
            m = S.contains_mask(texts, phrase)
        except S.SliceError:
            assert not " ".join(str(phrase).split()) or len(" ".join(phrase.split())) > 200
            return
    assert m[0] and m[2]                               # a text holding it, and itself
    if m[1]:                                           # only if it really is in there
        assert " ".join(phrase.split()).casefold() in "nothing here"


test_any_phrase_is_literal, test_any_phrase_is_literal_fuzz = twins(
    _any_phrase_is_literal, phrase=hst.text(max_size=250))


def _any_name_is_stored_or_refused(name):
    with time_limit(10, "slice name"):
        try:
            stored = S.check_name(name)
        except S.SliceError:
            return
    assert 0 < len(stored) <= S.MAX_NAME and stored == " ".join(stored.split())
    assert S.check_name(stored) == stored


test_any_name_is_stored_or_refused, test_any_name_is_stored_or_refused_fuzz = twins(
    _any_name_is_stored_or_refused, name=hst.text(max_size=120))


@pytest.mark.parametrize("h", CORPUS, ids=lambda h: h.name)
def test_hostile_texts_as_phrases_and_names(h, tmp_path):
    """The hostile corpus as a "contains" phrase and as a slice name: refused with a
    message or used literally (a text always contains itself)."""
    try:
        m = S.contains_mask([h.text, "plain review"], h.text)
        assert m[0] and not m[1]
    except S.SliceError:
        assert not h.text.strip() or len(" ".join(h.text.split())) > S.MAX_PHRASE
    try:
        name = S.save_slice(tmp_path, h.text, S.SliceSpec(contains="x"))
        assert S.load_saved(tmp_path)[name] == S.SliceSpec(contains="x")
    except S.SliceError:
        pass


# ------------------------------------------------------------------ drivers
@pytest.fixture(scope="module")
def tiny_predictor(tiny_model_dir):
    return Predictor.from_checkpoint(tiny_model_dir)


def test_batched_ig_equals_the_one_review_path(tiny_predictor):
    """Reviews of one length go through Captum together; each review's attributions are
    still exactly its own (against explain.IntegratedGradients, one review at a time)."""
    texts = ["great phone love it", "bad phone hate it", "awful cheap junk", "the battery died",
             "ok", "Terrible!!! never again, do not buy"]
    preds = [tiny_predictor.predict(t) for t in texts]
    assert len({len(p.tokens) for p in preds}) < len(preds)      # some do share a length
    got = D.batched_ig(tiny_predictor, preds, D.DriverSettings(ig_steps=8, ig_max_steps=8))
    for p, (words, steps, rel) in zip(preds, got):
        ref = explain.IntegratedGradients(8, max_steps=None).run(tiny_predictor, p)
        assert steps == 8
        assert np.allclose(words, ref.scores, rtol=1e-4, atol=1e-8)
        # rel = |delta| / |f(x) - f(b)|, delta = sum of attributions - (f(x) - f(b)). On this
        # tiny random model f(x) - f(b) is ~1e-5 and the delta ~1e-7: float32's resolution
        # of log p(y) (about -1.6). The two paths' deltas may differ by that rounding (their
        # relative deltas did, 0.0019 vs 0.0034, on an AVX2 CPU), and by no more.
        assert rel >= 0
        assert abs(rel - ref.relative_delta) * abs(ref.output_diff) <= 8 * np.finfo(np.float32).eps


def test_batched_ig_relative_delta_on_the_demo():
    """On the shipped demo, where 8 steps leave a real delta (not float32 rounding, as on
    the tiny model above), the batched path's relative delta is the one-review path's."""
    from demo_support import DEMO
    if not (DEMO / "model.safetensors").exists():
        pytest.skip("the demo checkpoint is not in this checkout")
    demo = Predictor.from_checkpoint(DEMO, torch.device("cpu"))
    texts = ["great phone love it", "bad phone hate it", "the case cracked in a week",
             "the screen is too dim"]
    preds = [demo.predict(t) for t in texts]
    assert len({len(p.tokens) for p in preds}) < len(preds)
    got = D.batched_ig(demo, preds, D.DriverSettings(ig_steps=8, ig_max_steps=8))
    for p, (words, steps, rel) in zip(preds, got):
        ref = explain.IntegratedGradients(8, max_steps=None).run(demo, p)
        assert steps == 8
        assert abs(ref.output_diff) > 0.05 and ref.relative_delta > 1e-4    # a real delta
        assert np.allclose(words, ref.scores, rtol=1e-4, atol=1e-7)
        assert rel == pytest.approx(ref.relative_delta, rel=1e-4)


def test_drivers_cached_per_review_and_resumed(ckpt, tiny_predictor):
    model, tok, _ = load_checkpoint(ckpt)
    preds = predict_split(model, tok, ckpt, reviews_of(TEXTS), FIVE, max_length=64,
                          precision="fp32")
    s = D.DriverSettings(ig_steps=4, ig_max_steps=4)
    seen = []
    small = D.compute_drivers(preds, tiny_predictor, sample=4, settings=s, chunk=3,
                              progress=seen.append)
    assert sum(seen) == 4 and small.computed == 4 and len(small.rows) == 4
    assert set(small.table["review"]) == set(small.rows)
    seen.clear()
    full = D.compute_drivers(preds, tiny_predictor, sample=None, settings=s, progress=seen.append)
    assert full.computed == len(TEXTS) - 4 and sum(seen) == len(TEXTS)
    small_again = full.table[full.table["review"].isin(small.rows)].reset_index(drop=True)
    pd.testing.assert_frame_equal(small_again.sort_values(["review"], kind="stable")
                                  .reset_index(drop=True),
                                  small.table.sort_values(["review"], kind="stable")
                                  .reset_index(drop=True))
    # each review's attention shares sum to 1; IG per review sums to about f(x) − f(b)
    sums = full.table.groupby("review")[["value_norm", "raw_attention"]].sum()
    assert np.allclose(sums.to_numpy(), 1.0, atol=1e-4)
    assert D.cached_drivers(preds, s).rows.tolist() == list(range(len(TEXTS)))
    assert D.cached_drivers(preds, D.DriverSettings()) is None     # other settings: not reused
    csv = D.export_frame(full, preds, min_count=1, hide_stopwords=False)
    assert set(csv["method"]) == set(D.LABELS.values()) and (csv["rank"] >= 1).all()


def test_top_drivers_by_hand():
    table = pd.DataFrame({
        "review": [0, 0, 0, 1, 1, 2, 2, 3],
        "word": ["good", "good", "the", "good", "bad", "bad", "great", "bad"],
        "target": [4, 4, 4, 4, 4, 0, 0, 0],
        "integrated_gradients": [0.2, 0.1, 0.5, 0.4, -0.3, 0.6, 0.1, 0.2],
        "value_norm": [0.1] * 8, "raw_attention": [0.1] * 8})
    d = D.Drivers(table, np.arange(4), 1.0, 0)
    gid = table["target"].to_numpy()
    tops = D.top_drivers(d, gid, 5, "integrated_gradients", min_count=1)
    # "good" in class 4: (0.2 + 0.1) in review 0 and 0.4 in review 1 -> mean 0.35
    assert tops[4].iloc[0].tolist() == ["good", pytest.approx(0.35), 2]
    assert tops[0].iloc[0].tolist() == ["bad", pytest.approx(0.4), 2]
    assert "the" not in set(tops[4]["word"])                       # stop-word hidden
    assert "the" in set(D.top_drivers(d, gid, 5, "integrated_gradients", min_count=1,
                                      hide_stopwords=False)[4]["word"])
    assert D.top_drivers(d, gid, 5, "integrated_gradients", min_count=2)[0]["word"].tolist() == ["bad"]


def test_sample_rows_are_nested():
    a, b = D.sample_rows(1000, 100), D.sample_rows(1000, 300)
    assert set(a) <= set(b) and len(b) == 300 and list(D.sample_rows(50, None)) == list(range(50))


# ------------------------------------------------------------------ figures
def test_projector_figure_escapes_and_keeps_rows():
    preds = toy_table(n_a=20, n_b=30)
    preds.frame.loc[0, "text"] = '<img src=x onerror=alert(1)> "quoted"'
    coords = np.random.default_rng(0).normal(size=(50, 2))
    hover = map_figures.hover_texts(preds)
    assert "<img" not in hover[0] and "&lt;img" in hover[0]
    for by in map_figures.COLOR_BY:
        flagged = np.zeros(50, bool) if "cleanlab" in by else None
        fig = map_figures.projector_figure(coords, map_figures.colouring(by, preds, flagged),
                                           hover, "t", highlight=[1, 2])
        rows = np.concatenate([np.atleast_1d(t.customdata) for t in fig.data[:-1]])
        assert sorted(rows.tolist()) == list(range(50)), by
        assert all(t.type == "scattergl" for t in fig.data)
    fig3 = map_figures.projector_figure(np.zeros((50, 3)), map_figures.colouring(
        "true rating", preds), hover, "t")
    assert {t.type for t in fig3.data} == {"scatter3d"}
    assert {t.type for t in map_figures.svg_copy(fig).data} == {"scatter"}


def test_axis_reading_by_hand():
    y = np.repeat(np.arange(5), 20)
    names = ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]
    ordered = np.stack([-(y + np.random.default_rng(0).normal(0, 0.1, 100)), np.zeros(100)], 1)
    assert "orders the reviews by rating, from 1 star to 5 stars (Spearman ρ = 0.9" in \
        map_reading.axis_reading(ordered, y, names)
    shuffled = np.stack([np.random.default_rng(1).normal(size=100), np.zeros(100)], 1)
    assert "does not order" in map_reading.axis_reading(shuffled, y, names)


def test_evaluate_save_embeddings_held_and_streamed(ckpt, tmp_path, capsys, monkeypatch):
    """``evaluate --save-embeddings``: one row per review in --save-predictions' order, the
    same whether the set is held (and cached) or streamed chunk by chunk."""
    from reviewbert.analysis import sources
    from reviewbert.cli import main

    from toyreviews import write_toy_csv
    toy = write_toy_csv(tmp_path / "toy.csv", n=60)
    args = ["evaluate", "--checkpoint", str(ckpt), "--data", str(toy), "--split", "all",
            "--precision", "fp32", "--max-length", "48", "--json"]
    held_csv, held_npy = tmp_path / "held.csv", tmp_path / "held.npy"
    assert main([*args, "--save-predictions", str(held_csv), "--save-embeddings", str(held_npy)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["embeddings"] == str(held_npy)
    monkeypatch.setattr(sources, "CACHE_MAX_REVIEWS", 10)
    st_csv, st_npy = tmp_path / "streamed.csv", tmp_path / "streamed.npy"
    assert main([*args, "--save-predictions", str(st_csv), "--save-embeddings", str(st_npy)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cache"] is None
    held, streamed = np.load(held_npy), np.load(st_npy)
    texts = pd.read_csv(held_csv, keep_default_na=False)["text"].tolist()
    assert pd.read_csv(st_csv, keep_default_na=False)["text"].tolist() == texts
    assert held.shape == streamed.shape == (len(texts), 32) and held.dtype == np.float16
    assert np.allclose(held.astype(np.float32), streamed.astype(np.float32), atol=2e-3)
    model, tok, _ = load_checkpoint(ckpt)
    alone = E.embed_texts(model, tok, [texts[0], texts[-1]], max_length=48)
    assert np.allclose(alone.astype(np.float32), held[[0, -1]].astype(np.float32), atol=2e-3)
    # a name that is not .npy is a usage error
    assert main([*args, "--save-embeddings", str(tmp_path / "v.txt")]) == 2
