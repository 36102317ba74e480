"""Activation patching on the tiny random BERT (made lively, tests/heads_support.py): the
identity, exact restoration, the batched grid against one pass per patch, heads against
the attention output, the alignment rule, the figures' escaping, the cache and the CLI."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.patching import figures
from reviewbert.patching import grid as G

from heads_support import lively

CLEAN, CORRUPT = "The battery is great and the screen is sharp", \
                 "The battery is awful and the screen is sharp"


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, tmp_path_factory):
    """(lively model, tokenizer, a checkpoint folder of that model for the CLI and cache)."""
    model, tok, _ = load_checkpoint(tiny_model_dir, torch.device("cpu"), attn_implementation="eager")
    model = lively(model)
    folder = tmp_path_factory.mktemp("patch") / "lively"
    shutil.copytree(tiny_model_dir, folder)
    model.save_pretrained(folder, safe_serialization=True)
    return model, tok, folder


def pair_of(tok, clean=CLEAN, corrupt=CORRUPT):
    return G.align(tok, clean, corrupt, 64)


def test_patching_identical_runs_is_the_identity(tiny):
    model, tok, _ = tiny
    res = G.run_grid(model, pair_of(tok, CLEAN, CLEAN), heads=True)
    np.testing.assert_allclose(res.clean_logits, res.corrupt_logits, atol=1e-6)
    assert np.isfinite(res.patched).all() and np.isfinite(res.head_patched).all()
    np.testing.assert_allclose(res.patched, res.corrupt_metric, atol=1e-5)
    np.testing.assert_allclose(res.head_patched, res.corrupt_metric, atol=1e-5)
    assert not res.restorable and np.isnan(res.grid).all()
    assert "nothing to restore" in G.reading(res)[0]


def test_restoring_every_position_reproduces_the_clean_logits(tiny):
    model, tok, _ = tiny
    pair = pair_of(tok)
    assert len(pair.clean_ids) == len(pair.corrupt_ids)
    p = G.Patcher(model, pair)
    everything = (list(range(len(pair.clean_ids))), list(range(len(pair.corrupt_ids))))
    assert np.abs(p.clean_logits - p.corrupt_logits).max() > 1e-2     # the pair differs
    for row in (p.L, 0, 1):              # the last layer, and from the embeddings upwards
        logits = p.patch_positions(row, [everything]).double().numpy()[0]
        np.testing.assert_allclose(logits, p.clean_logits, atol=1e-5)
    # the clean run itself is the model's own forward pass
    with torch.no_grad():
        ref = model(**tok(CLEAN, return_tensors="pt")).logits[0].double().numpy()
    np.testing.assert_allclose(p.clean_logits, ref, atol=1e-5)


def test_the_batched_grid_equals_one_pass_per_patch(tiny, monkeypatch):
    model, tok, _ = tiny
    pair = pair_of(tok, "The battery is great, really", "The battery is awful, really")
    ref = G.grid_one_by_one(model, pair)
    monkeypatch.setattr(G, "PATCH_TOKENS", 3 * len(pair.corrupt_ids))    # batches of 3 copies
    res = G.run_grid(model, pair)
    assert res.grid.shape == (3, len(pair.columns)) and np.isfinite(res.grid).all()
    np.testing.assert_allclose(res.patched, ref, atol=1e-5)
    changed = pair.columns.index("great→awful")
    assert res.grid[0, changed] == pytest.approx(1.0, abs=1e-5)        # the only different input
    np.testing.assert_allclose(np.delete(res.grid[0], changed), 0.0, atol=1e-5)
    assert res.grid[-1, 0] == pytest.approx(1.0, abs=1e-5)              # the classifier reads [CLS]
    np.testing.assert_allclose(res.grid[-1, 1:], 0.0, atol=1e-5)


def test_all_heads_of_a_layer_equal_patching_its_attention_output(tiny):
    model, tok, _ = tiny
    pair = pair_of(tok)
    p = G.Patcher(model, pair)
    for li in range(p.L):
        dense = p.mm.layer_modules[li].attention.output.dense
        with torch.inference_mode():
            clean_out = dense(p.clean_ctx[li])

        def put(module, args, output):
            return clean_out.expand_as(output).clone()
        handle = dense.register_forward_hook(put)
        try:
            with torch.inference_mode():
                want = p.mm.classify(p.mm.layers(p.corrupt_states[li], None, start=li))
        finally:
            handle.remove()
        got = p.patch_heads(li, [list(range(p.H))])
        np.testing.assert_allclose(got.numpy(), want.float().numpy(), atol=1e-5)
        one = p.patch_heads(li, [[0], [1]])                   # and one head is not all of them
        assert not torch.allclose(one[0], got[0], atol=1e-4)
    res = G.run_grid(model, pair, heads=True)
    assert res.head_grid.shape == (p.L, p.H) and np.isfinite(res.head_grid).all()


def test_the_alignment_rule(tiny):
    model, tok, _ = tiny
    with pytest.raises(G.PatchingError, match=r"same number of words.*: 3 \(clean\) vs 4"):
        G.align(tok, "good phone here", "not a good phone", 64)
    with pytest.raises(G.PatchingError, match="clean review is empty"):
        G.align(tok, "  ", "good", 64)
    with pytest.raises(G.PatchingError, match="too long"):
        G.align(tok, "word " * 100, "word " * 100, 64)
    assert len(tok.tokenize("unremarkable")) > 1 and len(tok.tokenize("great")) == 1
    pair = G.align(tok, "The battery is great today", "The battery is unremarkable today", 64)
    assert pair.columns == ["[CLS]", "The", "battery", "is", "great→unremarkable", "today", "[SEP]"]
    assert pair.corrupt_pos[4] is None and pair.aligned == [0, 1, 2, 3, 5, 6]
    assert pair.clean_pos[5] != pair.corrupt_pos[5]           # "today" moved, still patched
    assert pair.corrupt_pos[6] == [len(pair.corrupt_ids) - 1]  # [SEP] is [SEP]
    res = G.run_grid(model, pair, heads=True)
    assert np.isnan(res.grid[:, 4]).all() and np.isfinite(np.delete(res.grid, 4, axis=1)).all()
    assert res.to_json()["grid"][0][4] is None
    assert any("n/a" in line for line in G.reading(res))


def test_the_metric_ratings():
    assert G.metric_ratings([0, 3, 1], [2, 0, 1]) == (1, 0)
    assert G.metric_ratings([0, 3, 1], [0, 3, 2]) == (1, 2)     # same top: the clean runner-up


def test_figures_escape_words_and_centre_the_scale():
    grid = np.array([[0.0, 1.0, np.nan, 0.0], [0.5, -2.0, np.nan, 0.1]])
    fig = figures.word_grid_figure(["[CLS]", "<b>bold</b>", "a&b", "[SEP]"], grid)
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[1] == "&lt;b&gt;bold&lt;/b&gt;" and ticks[2] == "a&amp;b"
    assert "<b>" not in json.dumps(fig.to_plotly_json()["data"][0]["customdata"])
    heat = fig.data[0]
    assert heat.zmid == 0 and heat.zmax == 2.0 and heat.zmin == -2.0
    assert heat.text[0][2] == "n/a" and heat.z[0][2] is None
    assert list(fig.layout.yaxis.ticktext) == ["embeddings", "layer 1"]
    h = figures.head_grid_figure(np.ones((2, 4)))
    assert h.data[0].zmax == 1.0 and list(h.layout.xaxis.ticktext) == ["1", "2", "3", "4"]


def test_patch_is_cached_beside_the_checkpoint(tiny, tmp_path):
    from reviewbert.model.inference import Predictor
    _, _, folder = tiny
    d = tmp_path / "ck"
    shutil.copytree(folder, d)
    predictor = Predictor.from_checkpoint(d, torch.device("cpu"))
    seen = []
    first = G.patch(predictor, CLEAN, CORRUPT, heads=True, progress=seen.append)
    pair = G.align(predictor.tokenizer, CLEAN, CORRUPT, predictor.max_length)
    assert sum(seen) == G.planned_for(predictor, pair, True)
    assert len(list((d / ".analysis" / "patching").glob("*.json"))) == 1
    again = G.patch(predictor, CLEAN, CORRUPT, heads=True, progress=seen.append)
    assert again.from_cache and not first.from_cache and sum(seen) == G.planned_for(predictor, pair, True)
    np.testing.assert_allclose(again.grid, first.grid, atol=1e-9)
    np.testing.assert_allclose(again.head_grid, first.head_grid, atol=1e-9)
    assert again.ratings == first.ratings
    assert not G.patch(predictor, CLEAN, CORRUPT, heads=False).from_cache     # another key


def test_cli_json_shape_and_usage_errors(tiny, tmp_path, capsys):
    from reviewbert.cli import main
    _, _, folder = tiny
    d = tmp_path / "ck"
    shutil.copytree(folder, d)
    assert main(["patch", "--checkpoint", str(d), "--clean", CLEAN, "--corrupt", CORRUPT,
                 "--heads", "--json", "--no-cache"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert {"words", "grid", "ratings", "clean_logits", "corrupt_logits", "head_grid"} <= set(last)
    n_words = len(CLEAN.split()) + 2
    assert len(last["words"]) == n_words and last["words"][0] == "[CLS]"
    assert len(last["grid"]) == 3 and all(len(r) == n_words for r in last["grid"])
    assert len(last["head_grid"]) == 2 and all(len(r) == 4 for r in last["head_grid"])
    a, b = last["ratings"]
    assert 1 <= a <= 5 and 1 <= b <= 5 and a != b
    assert a == int(np.argmax(last["clean_logits"])) + 1
    assert last["grid"][-1][0] == pytest.approx(1.0, abs=1e-5)
    assert not (d / ".analysis").exists()                         # --no-cache kept nothing
    for clean, corrupt in (("", "x"), ("one two", "one"), ("w " * 600, "w " * 600)):
        assert main(["patch", "--checkpoint", str(d), "--clean", clean, "--corrupt", corrupt]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
