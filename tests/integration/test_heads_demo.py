"""The Heads analysis on the shipped demo checkpoint (fine-tuned MiniLM, 6 x 12 heads) and N
(300; 100 in `make test`) reviews of its real test split: the hook mask, the gradient
importance, the masking check, the pruning curve, the atlas, the JS divergence from the
embedded base model, and a pruned checkpoint that gives the masked model's logits and loads
in the app (not in plain transformers 5.23, which says so)."""
from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
import torch
from demo_support import demo_copy

from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import importance as heads
from reviewbert.heads import roles as head_roles
from reviewbert.model import pruning
from reviewbert.model.batch_predict import encode_texts
from reviewbert.model.checkpoint import load_checkpoint, save_checkpoint_atomic
from reviewbert.model.inference import Predictor

from browser_support import ROOT

pytestmark = [pytest.mark.heads]
DEMO = ROOT / "checkpoints" / "demo"
# 300 reviews, as the issue asks (`make heads`, which CI runs after `make test`: its 72
# masked re-evaluations were make test's longest setup); REVIEWBERT_HEADS_DEMO_N for fewer
N = int(os.environ.get("REVIEWBERT_HEADS_DEMO_N", "300"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    """The demo (symlinked, so its cache is written in a temporary folder), loaded, and 300
    reviews of its test split."""
    from reviewbert.data.examples import test_split_examples
    ck = demo_copy(tmp_path_factory.mktemp("heads-demo"))
    model, tok, info = load_checkpoint(ck, torch.device("cpu"), attn_implementation="eager")
    test = test_split_examples(info.meta, tokenizer=tok, data_dir=data_dir)
    return model, tok, info, head_analysis.sample_reviews(test, N, seed=0)


@pytest.fixture(scope="module")
def result(demo):
    model, tok, info, reviews = demo
    settings = head_analysis.Settings(fractions=(0.2, 0.4, 0.6), random_draws=2)
    return head_analysis.analyze(model, tok, info.path, reviews, info.scheme, max_length=256,
                                 base_model=info.base_model, settings=settings)


def _batch(tok, reviews, k=4):
    ids = encode_texts(tok, [r.text for r in reviews[:k]], 256)
    return heads.make_batches(ids, tok.pad_token_id, tokens_per_batch=100_000)[0]


def test_the_hook_is_zeroing_the_heads_slice_on_the_demo(demo):
    model, tok, _, reviews = demo
    b = _batch(tok, reviews)
    mm = heads.MaskedModel(model)
    with torch.inference_mode(), mm.masked(heads.mask_of([(5, 0), (3, 9)], (6, 12))):
        ours = mm.logits(b)
    hand = copy.deepcopy(model)
    with torch.no_grad():
        for li, h in ((5, 0), (3, 9)):
            hand.bert.encoder.layer[li].attention.output.dense.weight[:, 32 * h:32 * (h + 1)] = 0
    with torch.inference_mode():
        want = hand(input_ids=b.ids, attention_mask=b.mask).logits
        full = model(input_ids=b.ids, attention_mask=b.mask).logits
    assert (ours - want).abs().max() < 1e-4
    assert (ours - full).abs().max() > 1e-2


def test_the_gradient_is_a_finite_difference_on_the_demo(demo):
    model, tok, info, reviews = demo
    b = _batch(tok, reviews, 2)
    y = torch.tensor([info.scheme.class_of(r.stars) for r in reviews[:2]])
    mm = heads.MaskedModel(copy.deepcopy(model).double())
    grad, _ = heads.head_gradients(mm, b, y)
    eps = 1e-4
    for li, h in ((0, 3), (3, 9), (5, 0)):
        def loss(d):
            xi = torch.ones(6, 12, dtype=torch.float64)
            xi[li, h] += d
            with torch.inference_mode(), mm.masked(xi):
                return float(torch.nn.functional.cross_entropy(mm.logits(b).double(), y,
                                                               reduction="sum"))
        fd = (loss(eps) - loss(-eps)) / (2 * eps)
        assert grad[:, li, h].sum().item() == pytest.approx(fd, rel=1e-4, abs=1e-7)


def test_importance_predicts_the_measured_drop(result):
    assert result.n == N and result.importance.shape == (6, 12)
    assert np.allclose(np.sqrt((result.importance ** 2).sum(axis=1)), 1.0)
    # the gradient score ranks heads as masking them really does (0.46 on 300 reviews)
    assert result.spearman("probability") > 0.25
    least, most = result.pruning["least"], result.pruning["most"]
    assert [p["fraction"] for p in least] == [0.0, 0.2, 0.4, 0.6]
    # removing the least important 40 % costs far less than removing the most important
    assert least[2]["accuracy"] > most[2]["accuracy"] + 0.1
    assert least[0]["accuracy"] == pytest.approx(result.masking.base_accuracy)
    assert "of the heads" in head_analysis.removable_sentence(result)


def test_atlas_matches_the_predictors_attention(demo, result):
    """The batched atlas pass (padded batches) against each review's own attention from the
    Predict page's predictor, on the [CLS] mass of every head."""
    model, tok, _, reviews = demo
    p = Predictor(model, tok, max_length=256)
    total, rows = np.zeros((6, 12)), 0
    for r in reviews:
        att = p.predict(r.text).attentions
        total += att[:, :, :, 0].sum(axis=2)
        rows += att.shape[2]
    assert np.allclose(total / rows, result.atlas["cls"], atol=1e-4)
    roles = {r for row in result.roles for r in row}
    assert roles <= set(head_roles.ROLES) and len(roles) >= 3


def test_finetuning_changed_the_last_layers_most(result):
    """Against the embedded MiniLM: layer 1 barely moved, the last layers most (Kovaleva)."""
    per_layer = head_analysis.layer_js(result)
    assert per_layer is not None and result.finetune_note == ""
    assert per_layer[-1] > 10 * per_layer[0]
    assert int(np.argmax(per_layer)) >= 4
    assert "matches Kovaleva" in head_analysis.finetune_sentence(result)


def test_the_pruned_demo_gives_the_masked_logits_and_loads_in_the_app(demo, result, tmp_path,
                                                                    monkeypatch):
    model, tok, info, reviews = demo
    order = heads.ranked(result.importance, result.alive)
    remove = pruning.heads_to_remove(order, 22)                     # 30 % of 72
    out = save_checkpoint_atomic(pruning.pruned_copy(model, remove), tok, tmp_path / "pruned",
                                 meta=info.meta)
    small = Predictor.from_checkpoint(out, torch.device("cpu"))
    mm = heads.MaskedModel(model)
    xi = heads.mask_of(order[:22], (6, 12))
    ids = encode_texts(tok, [r.text for r in reviews], 256)
    worst = 0.0
    for batch in heads.make_batches(ids, tok.pad_token_id):
        with torch.inference_mode(), mm.masked(xi):
            want = mm.logits(batch).numpy()
        for j, i in enumerate(batch.rows):
            got = small.forward(ids[i])[0]
            worst = max(worst, float(np.abs(got - want[j]).max()))
    print(f"largest logit difference, pruned vs masked, {N} reviews: {worst:.2e}")
    assert worst < 1e-5          # fp32 through two code paths, N reviews up to 256 tokens
    from transformers import AutoModelForSequenceClassification
    with pytest.raises(RuntimeError, match="mismatched"):
        AutoModelForSequenceClassification.from_pretrained(out)
    # the app: the Predict page on the pruned checkpoint
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.text_area(key="review_text").input(reviews[0].text)
    at.button(key="predict_btn").click().run()
    assert not at.exception, at.exception
    assert any("Predicted:" in str(m.value) for m in at.markdown)
    assert json.loads((out / "config.json").read_text())["pruned_heads"]
