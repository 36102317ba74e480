"""The per-layer probes (reviewbert/layers/): a signal planted at a known layer is found
there and not before, one pass reads what one pass per layer reads, the probes' folded
linear maps equal scikit-learn's, the cache round trip, and the figures."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
import torch

from reviewbert.data.examples import Review
from reviewbert.layers import analysis as layer_analysis
from reviewbert.layers import figures as layer_figures
from reviewbert.layers import probes as layer_probes
from reviewbert.model.checkpoint import load_checkpoint

from conftest import make_tiny_model
from heads_support import TEXTS, lively
from toyreviews import FILLER

PLANTED_AT = 2          # hidden_states index: the output of encoder layer 2 (of 3)


@pytest.fixture(autouse=True)
def few_auc_resamples(monkeypatch):
    """Each AUC resample is a scikit-learn call; the intervals are not what is tested here."""
    monkeypatch.setattr(layer_probes, "AUC_RESAMPLES", 10)


@pytest.fixture(scope="module")
def three_layers(tmp_path_factory):
    path = make_tiny_model(tmp_path_factory.mktemp("probes") / "tiny3", layers=3)
    model, tok, info = load_checkpoint(path, torch.device("cpu"), attn_implementation="eager")
    return lively(model), tok, info, path


def random_reviews(n: int, seed: int) -> list[Review]:
    """Unique filler texts with stars drawn independently of the words: nothing in the
    text tells the stars."""
    rng, seen, out = random.Random(seed), set(), []
    while len(out) < n:
        text = " ".join(rng.choice(FILLER) for _ in range(rng.randint(4, 10)))
        if text not in seen:
            seen.add(text)
            out.append(Review(text, rng.randint(1, 5), "test"))
    return out


def batches(tok, reviews: list[Review]) -> list:
    return layer_probes.make_batches(tok, [r.text for r in reviews], 64)


def plant(model, tok, reviews: list[Review], layer: int, strength: float = 4.0):
    """Hooks that add a class-dependent vector to [CLS] at the output of encoder ``layer``:
    the stars become readable there (and only from there on), whatever the words."""
    g = torch.Generator().manual_seed(1)
    signal = torch.randn(5, model.config.hidden_size, generator=g) * strength
    star_of = {tuple(ids): r.stars for ids, r in
               zip(layer_probes.encode_texts(tok, [r.text for r in reviews], 64), reviews)}
    seen = {}

    def keep_ids(module, args, kwargs):
        seen["ids"], seen["mask"] = kwargs["input_ids"], kwargs["attention_mask"]

    def add(module, args, output):
        h = (output[0] if isinstance(output, tuple) else output).clone()
        for i, (row, m) in enumerate(zip(seen["ids"], seen["mask"])):
            stars = star_of[tuple(row[m.bool()].tolist())]
            h[i, 0] += signal[stars - 1]
        return (h, *output[1:]) if isinstance(output, tuple) else h
    return [model.register_forward_pre_hook(keep_ids, with_kwargs=True),
            model.base_model.encoder.layer[layer - 1].register_forward_hook(add)]


def test_a_signal_planted_at_layer_k_is_read_from_layer_k_on_and_not_before(three_layers):
    model, tok, _, _ = three_layers
    train, test = random_reviews(300, 0), random_reviews(150, 1)
    handles = plant(model, tok, train + test, PLANTED_AT)
    try:
        x_train, _ = layer_probes.read_vectors(model, batches(tok, train))
        x_test, _ = layer_probes.read_vectors(model, batches(tok, test))
    finally:
        for h in handles:
            h.remove()
    y = lambda rs: np.array([r.stars - 1 for r in rs])   # noqa: E731
    probes = layer_probes.fit_probes(x_train, y(train), 5)
    rows = layer_probes.layer_scores(probes, x_test, y(test))
    acc = [r["accuracy"] for r in rows]
    assert len(acc) == 4                                  # embeddings + 3 layers
    assert acc[PLANTED_AT] >= 0.9, acc
    assert max(acc[:PLANTED_AT]) <= 0.45, acc             # chance is 0.2: nothing to read yet
    assert layer_probes.settled_layer(rows) >= PLANTED_AT


def test_one_pass_reads_what_one_pass_per_layer_reads(three_layers):
    model, tok, _, _ = three_layers
    texts = layer_probes.make_batches(tok, TEXTS, 64)
    one, logits = layer_probes.read_vectors(model, texts)
    slow = layer_probes.read_vectors_per_layer(model, texts)
    assert one.shape == (4, len(TEXTS), model.config.hidden_size)
    np.testing.assert_allclose(one, slow, atol=1e-5)
    assert np.ptp(one[1:], axis=1).max() > 0.1            # the layers' vectors differ per review
    np.testing.assert_allclose(one[0], np.broadcast_to(one[0, :1], one[0].shape), atol=1e-5)
    enc = tok(TEXTS, padding=True, return_tensors="pt")   # the pages' eager model agrees
    with torch.no_grad():
        eager = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    np.testing.assert_allclose(logits, eager.logits.numpy(), atol=1e-4)


def test_the_folded_probe_is_scikit_learns_pipeline_with_every_class():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 120, 6)) * [1, 10, 0.1, 1, 5, 1] + 3
    for classes in ([0, 2], [0, 1, 4]):                   # binary form; a 5-label fit missing 2
        y = rng.choice(classes, size=120)
        probes = layer_probes.fit_probes(x, y, 5)
        lr = LogisticRegression(C=layer_probes.C, max_iter=layer_probes.MAX_ITER, random_state=0)
        ref = make_pipeline(StandardScaler(), lr).fit(x[0], y)
        got = probes.probabilities(x)[0]
        np.testing.assert_allclose(got[:, classes], ref.predict_proba(x[0]), atol=1e-4)
        missing = [c for c in range(5) if c not in classes]
        assert got[:, missing].max() < 1e-9


def test_analysis_is_cached_and_found_again(three_layers, tmp_path):
    _, tok, info, path = three_layers
    ck = shutil.copytree(path, tmp_path / "ck")
    model, tok, info = load_checkpoint(ck, torch.device("cpu"), attn_implementation="eager")
    train, test = random_reviews(60, 2), random_reviews(40, 3)
    done = []
    first = layer_analysis.analyze(model, tok, ck, train, test, info.scheme, max_length=64,
                                   base_model=None, progress=done.append)
    assert sum(done) == layer_analysis.planned(60, 40)   # the base's share is counted too
    assert not first.from_cache and first.base_layers is None and "no base model" in first.base_note
    assert [r["layer"] for r in first.layers] == [0, 1, 2, 3]
    assert first.model_accuracy is not None and first.n_train == 60 and first.n_test == 40
    again = layer_analysis.analyze(model, tok, ck, train, test, info.scheme, max_length=64,
                                   base_model=None, progress=done.append)
    assert again.from_cache and sum(done) == layer_analysis.planned(60, 40)   # nothing read
    assert again.to_json() == first.to_json()
    np.testing.assert_array_equal(again.probes.coef, first.probes.coef)
    latest = layer_analysis.latest(ck)
    assert latest is not None and latest.to_json() == first.to_json()
    other = layer_analysis.analyze(model, tok, ck, train, test, info.scheme, max_length=64,
                                   base_model=None, settings=layer_probes.Settings(seed=1))
    assert not other.from_cache
    assert layer_analysis.latest(tmp_path / "elsewhere") is None


def test_layer_probabilities_of_one_review(three_layers):
    model, tok, _, _ = three_layers
    train = random_reviews(50, 4)
    x, _ = layer_probes.read_vectors(model, batches(tok, train))
    probes = layer_probes.fit_probes(x, [r.stars - 1 for r in train], 5)
    got = layer_probes.layer_probabilities(model, train[0].text, probes, tokenizer=tok, max_length=64)
    assert got.shape == (4, 5)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(got, probes.probabilities(x[:, :1])[:, 0], atol=1e-5)
    with pytest.raises(layer_probes.LayersError, match="tokenizer"):
        layer_probes.layer_probabilities(model, "hi", probes)
    two = layer_probes.Probes(probes.coef[:3], probes.intercept[:3])
    with pytest.raises(layer_probes.LayersError, match="2 layers"):
        layer_probes.layer_probabilities(model, "hi", two, tokenizer=tok)


def test_settled_layer_is_where_the_intervals_reach_the_last_layer():
    rows = [{"layer": i, "accuracy": a, "accuracy_ci": [a - 0.03, a + 0.03]}
            for i, a in enumerate([0.2, 0.4, 0.6, 0.61, 0.62])]
    assert layer_probes.settled_layer(rows) == 2
    rows[3]["accuracy_ci"] = [0.5, 0.55]                  # a dip after: settled only later
    assert layer_probes.settled_layer(rows) == 4
    assert layer_probes.settled_layer([{"layer": 0, "accuracy": 0.5, "accuracy_ci": None}]) is None


def test_figures_build_and_escape_the_review():
    rows = [{"layer": i, "accuracy": 0.2 + 0.1 * i, "accuracy_ci": [0.15 + 0.1 * i, 0.25 + 0.1 * i],
             "auc": None, "auc_ci": None} for i in range(4)]
    fig = layer_figures.accuracy_figure(rows, rows, model_accuracy=0.55)
    assert len(fig.data) == 4                             # two lines, two bands
    assert [t.name for t in fig.data if t.fill != "toself"] == [
        "probe on the base model", "probe on the fine-tuned checkpoint"]
    assert {t.mode for t in fig.data if t.fill == "toself"} == {"lines"}      # no stray markers
    assert fig.layout.shapes[0].y0 == 0.55
    assert len(layer_figures.accuracy_figure(rows, None, metric="auc").data) == 1  # no band
    with pytest.raises(ValueError):
        layer_figures.accuracy_figure(rows, metric="loss")
    probs = np.full((4, 5), 0.2)
    fig = layer_figures.probabilities_figure(probs, ["1 star", "2", "3", "4", "<i>5</i>"],
                                             "<b>bold</b> & <script>x</script>")
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;" in fig.layout.title.text
    assert "<script>" not in fig.layout.title.text and "&lt;i&gt;5" in fig.data[0].x[-1]
    assert list(fig.data[0].y) == ["embeddings", "layer 1", "layer 2", "layer 3"]
    with pytest.raises(ValueError):
        layer_figures.probabilities_figure(np.ones((4, 3)), ["a", "b"])
