"""Heads physically removed (smaller Q/K/V/output matrices) give the logits of the full model
with those heads masked, in every forward pass the app has; the checkpoint saves, loads
through ReviewBERT's loader, and is refused (loudly) by plain transformers 5."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from reviewbert.errors import CheckpointError
from reviewbert.explain import methods as explain
from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import importance as heads
from reviewbert.model import attention, pruning
from reviewbert.model.checkpoint import load_checkpoint, save_checkpoint_atomic
from reviewbert.model.inference import Predictor

from heads_support import TEXTS, lively

REMOVE = {0: [1, 3], 1: [0, 1, 2, 3]}          # layer 2 keeps no head at all


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model, tok, info = load_checkpoint(tiny_model_dir, torch.device("cpu"), attn_implementation="eager")
    return lively(model, seed=1), tok, info


@pytest.fixture(scope="module")
def pruned_dir(tiny, tmp_path_factory):
    model, tok, info = tiny
    out = tmp_path_factory.mktemp("pruned") / "pruned"
    save_checkpoint_atomic(pruning.pruned_copy(model, REMOVE), tok, out,
                           meta={"labels": 5, "hyperparameters": {"max_length": 64}})
    return out


def masked_logits(model, tok, text: str, remove=REMOVE) -> torch.Tensor:
    ids = tok(text, truncation=True, max_length=64)["input_ids"]
    b = heads.Batch(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), np.array([0]))
    mm = heads.MaskedModel(model)
    xi = heads.mask_of([(li, h) for li, hs in remove.items() for h in hs], (2, 4))
    with torch.inference_mode(), mm.masked(xi):
        return mm.logits(b)[0]


def test_pruned_copy_has_smaller_matrices_and_leaves_the_model_alone(tiny):
    model, _, _ = tiny
    small = pruning.pruned_copy(model, REMOVE)
    a0, a1 = small.bert.encoder.layer[0].attention, small.bert.encoder.layer[1].attention
    assert tuple(a0.self.query.weight.shape) == (16, 32)          # 2 heads of 8
    assert tuple(a0.output.dense.weight.shape) == (32, 16)
    assert tuple(a1.self.value.weight.shape) == (0, 32)
    assert pruning.alive_heads(small) == [[0, 2], []]
    assert small.config.pruned_heads == {"0": [1, 3], "1": [0, 1, 2, 3]}
    assert model.bert.encoder.layer[0].attention.self.query.weight.shape[0] == 32
    assert not pruning.is_pruned(model)


@pytest.mark.parametrize("text", TEXTS)
def test_pruned_logits_equal_the_masked_full_model(tiny, text):
    model, tok, _ = tiny
    want = masked_logits(model, tok, text)
    small = pruning.pruned_copy(model, REMOVE)
    ids = tok(text, truncation=True, max_length=64)["input_ids"]
    fast = Predictor(small, tok).forward(ids)[0]                              # FastBertForward
    slow = Predictor(small, tok, fast=False).forward(ids)[0]                  # the eager model
    with torch.inference_mode():
        sdpa = small(input_ids=torch.tensor([ids])).logits[0]
    assert np.abs(fast - want.numpy()).max() < 1e-5
    assert np.abs(slow - want.numpy()).max() < 1e-5
    assert (sdpa - want).abs().max() < 1e-5
    grad = Predictor(small, tok).embedded_logits(small.bert.embeddings.word_embeddings(
        torch.tensor([ids])))[0]                                               # GradBertForward
    assert (grad.detach() - want).abs().max() < 1e-5
    assert (want - masked_logits(model, tok, text, {})).abs().max() > 1e-2   # not a no-op


def test_pruning_twice_is_pruning_the_union(tiny):
    model, tok, _ = tiny
    twice = pruning.prune_model(pruning.pruned_copy(model, {0: [1]}), {0: [3, 1], 1: [0, 1, 2, 3]})
    assert pruning.removed_heads(twice.config) == {0: [1, 3], 1: [0, 1, 2, 3]}
    ids = tok(TEXTS[0])["input_ids"]
    assert np.abs(Predictor(twice, tok).forward(ids)[0]
                  - masked_logits(model, tok, TEXTS[0]).numpy()).max() < 1e-5


def test_the_pruned_checkpoint_loads_in_reviewbert(tiny, pruned_dir):
    model, tok, _ = tiny
    cfg = json.loads((pruned_dir / "config.json").read_text())
    assert cfg["pruned_heads"] == {"0": [1, 3], "1": [0, 1, 2, 3]}
    assert cfg["num_attention_heads"] == 4           # the unpruned numbering stays
    p = Predictor.from_checkpoint(pruned_dir, torch.device("cpu"))
    for text in TEXTS:
        got = p.forward(tok(text, truncation=True, max_length=64)["input_ids"])[0]
        assert np.abs(got - masked_logits(model, tok, text).numpy()).max() < 1e-5
    pred = p.predict(TEXTS[0])
    assert pred.attentions.shape[:2] == (2, 4)
    assert not pred.attentions[0, [1, 3]].any() and not pred.attentions[1].any()
    assert np.allclose(pred.attentions[0, [0, 2]].sum(-1), 1.0, atol=1e-5)
    # the mean of heads averages the heads that are there
    mean = attention.head_average(pred.attentions)
    assert np.allclose(mean[0], pred.attentions[0, [0, 2]].mean(0), atol=1e-6)
    assert np.allclose(attention.word_scores(pred, 0).sum(), 1.0, atol=1e-5)
    for method in explain.all_methods(ig_steps=4, ig_max_steps=4):
        r = method.run(p, pred)
        assert np.isfinite(r.scores).all()


def test_plain_transformers_5_refuses_it(pruned_dir):
    """transformers 5.23 builds every layer with num_attention_heads heads and has no
    pruned_heads: it stops on the smaller matrices instead of loading something wrong."""
    from transformers import AutoModelForSequenceClassification
    with pytest.raises(Exception, match="size mismatch|shape|mismatch"):
        AutoModelForSequenceClassification.from_pretrained(pruned_dir)


def test_a_bad_pruned_heads_entry_is_a_checkpoint_error(pruned_dir, tmp_path):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(pruned_dir, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["pruned_heads"] = {"0": [1, 3]}               # the weights say layer 2 lost all four
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="wrong shape"):
        load_checkpoint(bad, torch.device("cpu"))
    cfg["pruned_heads"] = {"7": [1]}
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="bad entry"):
        load_checkpoint(bad, torch.device("cpu"))


def test_heads_to_prune_takes_the_least_important(tiny):
    from reviewbert.data.examples import Review
    from reviewbert.model.labels import FIVE
    model, tok, _ = tiny
    revs = [Review(t, s, "t") for t, s in zip(TEXTS, [1, 5, 3, 3, 1])]
    remove, scores = head_analysis.heads_to_prune(model, tok, revs, FIVE, 0.25, max_length=64)
    assert sum(len(v) for v in remove.values()) == 2
    removed = sorted(scores[li, h] for li, hs in remove.items() for h in hs)
    kept = [scores[li, h] for li in range(2) for h in range(4) if h not in remove.get(li, [])]
    assert max(removed) <= min(kept)
    with pytest.raises(ValueError, match="no head at all"):
        head_analysis.heads_to_prune(model, tok, revs, FIVE, 0.01, max_length=64)
    with pytest.raises(ValueError, match="between 0 and 1"):
        head_analysis.heads_to_prune(model, tok, revs, FIVE, 1.0, max_length=64)


def test_write_pruned_records_what_was_removed(tiny, tmp_path):
    model, tok, info = tiny
    out = head_analysis.write_pruned(model, tok, info, {0: [2]}, tmp_path / "p",
                                     {"fraction": 0.125})
    meta = json.loads((out / "reviewbert.json").read_text())
    assert meta["pruned"]["removed"] == {"0": [2]} and meta["pruned"]["heads_left"] == 7
    m, _, _ = load_checkpoint(out, torch.device("cpu"))
    assert pruning.alive_heads(m) == [[0, 1, 3], [0, 1, 2, 3]]


def test_batched_evaluation_reads_a_pruned_checkpoint(tiny, pruned_dir):
    """The Error analysis page's batched pass (SDPA, padded batches) on the pruned checkpoint,
    a layer with no head included, agrees with the one-review fast path."""
    from reviewbert.model.batch_predict import predict_in_order
    model, tok, _ = tiny
    sdpa, _, _ = load_checkpoint(pruned_dir, torch.device("cpu"))          # attn "sdpa"
    probs, _, _ = predict_in_order(sdpa, tok, TEXTS, max_length=64, batch_size=3)
    p = Predictor.from_checkpoint(pruned_dir, torch.device("cpu"))
    for text, row in zip(TEXTS, probs):
        assert np.abs(p.predict(text).probs - row).max() < 1e-5
