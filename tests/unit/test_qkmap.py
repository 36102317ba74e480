"""The query–key map (reviewbert/heads/qkmap.py, qk_figures.py) on the tiny random BERT (2
layers x 4 heads): the hooks read what the query and key Linears compute, the token sample
and kinds, AttentionViz's normalisation (centroids, norms, attention rows kept), the cache,
a pruned checkpoint, and figures that escape the review's text."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reviewbert.data.examples import Review
from reviewbert.heads import qk_figures, qkmap
from reviewbert.model import pruning
from reviewbert.model.batch_predict import encode_texts
from reviewbert.model.checkpoint import load_checkpoint

from heads_support import TEXTS, lively


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model, tok, info = load_checkpoint(tiny_model_dir, torch.device("cpu"), attn_implementation="eager")
    return lively(model), tok, info


def recomputed(model, tok, text: str, layer: int):
    """(q, k) [T, hidden] of one review, by hand: the layer's input hidden states through
    its own query and key Linears."""
    ids = torch.tensor([encode_texts(tok, [text], 64)[0]])
    with torch.inference_mode():
        hs = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
        sa = model.bert.encoder.layer[layer].attention.self
        h = hs.hidden_states[layer][0]
        return sa.query(h).numpy(), sa.key(h).numpy()


def test_the_hooks_read_what_the_query_and_key_linears_compute(tiny):
    model, tok, _ = tiny
    hooks = lambda: sum(len(m._forward_hooks) for m in model.modules())  # noqa: E731
    before = hooks()
    vecs = qkmap.collect(model, tok, TEXTS, max_length=64, precision="fp32", dtype=np.float32)
    assert hooks() == before            # the pages' model carries no hook: the copy had them
    lengths = [len(x) for x in encode_texts(tok, TEXTS, 64)]
    assert vecs.n_tokens == sum(lengths)                       # under the cap: every token
    assert vecs.queries[0].shape == (sum(lengths), 4, 8) and vecs.layers == 2
    for r in (0, 3):
        rows = np.flatnonzero(vecs.tokens.review.to_numpy() == r)
        assert list(vecs.tokens.position.iloc[rows]) == list(range(lengths[r]))
        for layer in (0, 1):
            q, k = recomputed(model, tok, TEXTS[r], layer)
            for h in range(4):
                got_q, got_k = vecs.head(layer, h)
                np.testing.assert_allclose(got_q[rows], q[:, h * 8:(h + 1) * 8], atol=1e-4)
                np.testing.assert_allclose(got_k[rows], k[:, h * 8:(h + 1) * 8], atol=1e-4)


def test_the_token_cap_samples_every_review_and_kinds_are_named(tiny):
    model, tok, _ = tiny
    vecs = qkmap.collect(model, tok, TEXTS, max_length=64, max_tokens=20)
    assert vecs.n_tokens == 20 and vecs.queries[1].dtype == np.float16
    t = vecs.tokens
    assert t.groupby("review").position.apply(lambda p: p.is_monotonic_increasing).all()
    keep = qkmap.choose_tokens([10, 30, 5], 12, seed=0)
    assert sum(len(k) for k in keep) == 12 and all((k >= 0).all() for k in keep)
    assert keep[1].max() < 30 and keep[2].max(initial=0) < 5
    assert [len(k) for k in qkmap.choose_tokens([3, 4], 100)] == [3, 4]
    assert [qkmap.token_kind(x, i) for i, x in enumerate(["[CLS]", "great", "##ly", "!", "[SEP]"])] \
        == ["[CLS]", "word", "subword", "punctuation", "[SEP]"]
    full = qkmap.collect(model, tok, TEXTS[:1], max_length=64).tokens
    assert full.kind.iloc[0] == "[CLS]" and full.kind.iloc[-1] == "[SEP]"
    assert set(full.kind) <= set(qkmap.KINDS) and "punctuation" in set(full.kind)


def test_the_hover_window_reads_as_the_text():
    pieces = ["[CLS]", "the", "charg", "##ing", "cable", "broke", ".", "[SEP]"]
    left, tok, right = qkmap.context(pieces, 3, window=2)
    assert (left, tok, right) == ("…the charg", "ing", " cable broke…")
    assert "".join(qkmap.context(pieces, 1, window=1)) == "[CLS] the charg…"
    assert qkmap.context(pieces, 2, window=1) == ("…the ", "charg", "ing…")


def test_normalisation_centroids_norms_and_attention_rows():
    rng = np.random.default_rng(0)
    q = rng.normal(2.0, 1.0, (50, 8)) * 3
    k = rng.normal(-1.0, 0.5, (40, 8))
    n = qkmap.normalise(q, k)
    np.testing.assert_allclose(n.queries.mean(0), n.keys.mean(0), atol=1e-4)
    assert np.linalg.norm(n.queries, axis=1).mean() == pytest.approx(
        np.linalg.norm(n.keys, axis=1).mean(), rel=1e-4)
    assert n.alpha != pytest.approx(1.0)                       # it had something to do
    # each dot product moves by q·c, the same for every key: the softmax rows are unchanged
    before, after = q @ k.T, n.queries.astype(np.float64) @ n.keys.T
    np.testing.assert_allclose(after, before + (q @ n.offset)[:, None], rtol=1e-4, atol=1e-3)
    soft = lambda x: np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)  # noqa: E731,E501
    np.testing.assert_allclose(soft(after), soft(before), atol=1e-5)


def test_cache_projection_and_thumbnails(tiny, tmp_path, tiny_model_dir):
    import shutil
    model, tok, _ = tiny
    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_model_dir, ckpt)
    reviews = [Review(t, 3, "test") for t in TEXTS]
    calls = []
    vecs = qkmap.read_or_collect(model, tok, ckpt, reviews, max_length=64, progress=calls.append)
    assert sum(calls) == len(TEXTS) and not vecs.from_cache
    assert (vecs.folder / "meta.json").is_file() and vecs.folder.parent.name == "qkmap"
    again = qkmap.read_or_collect(model, tok, ckpt, reviews, max_length=64, progress=calls.append)
    assert again.from_cache and sum(calls) == len(TEXTS)       # read, not recomputed
    np.testing.assert_array_equal(again.keys[1], vecs.keys[1])
    assert again.tokens.equals(vecs.tokens)
    p = qkmap.project_head(again, 1, 2)
    assert p.coords.shape == (2 * vecs.n_tokens, 2) and not p.cached
    assert qkmap.project_head(again, 1, 2).cached
    th = qkmap.thumbnails(again, n=10)
    assert th.shape == (2, 4, 2, 10, 2) and np.isfinite(th).all() and np.abs(th).max() <= 1.0001
    assert np.array_equal(qkmap.thumbnails(again, n=10), th)


def test_a_pruned_checkpoint_has_no_vectors_for_a_removed_head(tiny):
    model, tok, _ = tiny
    small = pruning.pruned_copy(model, {0: [1], 1: [0, 1, 2, 3]}).eval()
    vecs = qkmap.collect(small, tok, TEXTS[:2], max_length=64, precision="fp32", dtype=np.float32)
    assert vecs.alive == [[0, 2, 3], []] and vecs.queries[1].shape[1] == 0
    full = qkmap.collect(model, tok, TEXTS[:2], max_length=64, precision="fp32", dtype=np.float32)
    np.testing.assert_allclose(vecs.head(0, 2)[0], full.head(0, 2)[0], atol=1e-5)
    with pytest.raises(qkmap.HeadRemoved, match="removed"):
        vecs.head(0, 1)
    with pytest.raises(qkmap.HeadRemoved):
        vecs.head(1, 0)
    th = qkmap.thumbnails(vecs, n=5)
    assert np.isnan(th[0, 1]).all() and np.isnan(th[1]).all() and np.isfinite(th[0, 0]).all()
    fig = qk_figures.thumbnails_figure(th, vecs.alive_mask(), (0, 0))
    cells = {(int(x), int(y)) for x, y in zip(qk_figures.click_targets(fig).x,
                                              qk_figures.click_targets(fig).y)}
    assert cells == {(0, 0), (2, 0), (3, 0)}                  # no target on a removed head


def test_figures_escape_the_review_and_colour_as_asked(tiny):
    import pandas as pd
    tokens = pd.DataFrame({"review": [0, 0], "position": [1, 2], "token": ["<script>", "x"],
                           "kind": ["word", "subword"], "left": ["<b>bold</b> & ", "…"],
                           "right": [" <i>after", ""]})
    coords = np.arange(8, dtype=np.float32).reshape(4, 2)
    fig = qk_figures.qk_figure(coords, tokens, "type", "t")
    assert [t.name for t in fig.data] == ["queries", "keys"]
    assert all(t.type == "scattergl" for t in fig.data)
    hover = str(fig.data[0].text[0])
    assert "<script>" not in hover and "<b>bold" not in hover and "<i>" not in hover
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; <b>&lt;script&gt;</b> &lt;i&gt;after" in hover
    assert "query" in hover and "key" in str(fig.data[1].text[0])
    model, tok, _ = tiny
    vecs = qkmap.collect(model, tok, ["<b>great</b> battery!", *TEXTS[:2]], max_length=64)
    coords = qkmap.project_head(vecs, 0, 0).coords
    real = qk_figures.qk_figure(coords, vecs.tokens, "type", "t")
    assert "&lt; b &gt; great" in " ".join(real.data[0].text) and "< b >" not in " ".join(real.data[0].text)
    pos = qk_figures.qk_figure(coords, vecs.tokens, "position", "t")
    assert list(pos.data[0].marker.color) == list(vecs.tokens.position)
    kinds = qk_figures.qk_figure(coords, vecs.tokens, "kind", "t")
    assert {"[CLS]", "[SEP]", "punctuation", "word"} <= {t.name for t in kinds.data}
    assert sum(len(t.x) for t in kinds.data) == 2 * vecs.n_tokens
    with pytest.raises(ValueError, match="colour"):
        qk_figures.qk_figure(coords, vecs.tokens, "stars", "t")
