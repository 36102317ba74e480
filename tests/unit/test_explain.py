"""Explanation methods: rollout by hand, word sums, value vectors, IG completeness,
a shared model left alone under concurrent explanations, agreement and reading."""
from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_attention import fake_pred

from reviewbert.explain import methods as E
from reviewbert.model import attention as A


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))


REVIEW = "The battery died after two days, unbelievably poor quality!"


# ------------------------------------------------------------------- rollout
def test_rollout_matches_a_hand_worked_two_layer_example():
    # Layer 1 (both heads): token 0 looks at token 1; 1 at itself; 2 at itself.
    a1 = np.array([[0, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    # Layer 2: heads differ, their mean is 0→2, 1→0, 2→1.
    a2_h0 = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=float)
    a2_h1 = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=float)
    a2_h0[2], a2_h1[2] = [0, 0.5, 0.5], [0, 1.5, -0.5]     # mean row 2: [0, 1, 0]
    att = np.stack([np.stack([a1, a1]), np.stack([a2_h0, a2_h1])])     # [L=2, H=2, 3, 3]
    # By hand: Ã1 = ½A1 + ½I = [[.5,.5,0],[0,1,0],[0,0,1]];
    #          Ã2 = [[.5,0,.5],[.5,.5,0],[0,.5,.5]];  rollout = Ã2 · Ã1
    want = np.array([[0.25, 0.25, 0.50],
                     [0.25, 0.75, 0.00],
                     [0.00, 0.50, 0.50]])
    np.testing.assert_allclose(E.rollout(att), want, atol=1e-12)
    np.testing.assert_allclose(E.rollout(att.mean(axis=1)), want, atol=1e-12)  # [L, q, k] too
    for i in range(3):                                           # one row, computed top-down
        np.testing.assert_allclose(E.rollout(att, row=i), want[i], atol=1e-12)
    # without the residual it is the plain product A2 · A1 (row 0: 0 → 2 → 2)
    np.testing.assert_allclose(E.rollout(att, residual=0.0)[0], [0, 0, 1], atol=1e-12)


def test_rollout_method_gives_word_shares_of_the_cls_row():
    p = fake_pred(L=3, H=2)
    p.num_layers, p.label_id = 3, 0
    r = E.Rollout().run(None, p)
    row = E.rollout(p.attentions)[0]
    # "unbelievable" = pieces 1..3, "phone" = piece 4; specials dropped, renormalised
    words = np.array([row[1:4].sum(), row[4]])
    np.testing.assert_allclose(r.scores, words / words.sum(), rtol=1e-5)
    assert r.scores.shape == (2,) and not r.signed


# ------------------------------------------------------------- aggregation
def test_word_sum_adds_wordpieces_and_drops_specials():
    #          [CLS]  un  ##believ ##able phone [SEP]
    scores = [5.0, 0.5, -0.25, 0.25, 2.0, 7.0]
    out = E.word_sum(scores, [None, 0, 0, 0, 1, None], 2)
    np.testing.assert_allclose(out, [0.5, 2.0])
    # a word cut by truncation still gets the pieces it has; a word with none gets 0
    np.testing.assert_allclose(E.word_sum([1, 2, 3], [None, 1, None], 3), [0, 2, 0])


def test_raw_attention_is_the_pages_word_scores():
    p = fake_pred(L=3, H=2)
    p.num_layers, p.label_id = 3, 0
    for layer, head in ((1, None), (2, 1)):
        r = E.RawAttention(layer, head).run(None, p)
        np.testing.assert_array_equal(r.scores, A.word_scores(p, layer, head))
    assert E.RawAttention().run(None, p).detail.startswith("layer 3")   # default: the last


# --------------------------------------------------------- on a real model
def test_every_method_gives_one_score_per_word(tiny):
    pred = tiny.predict(REVIEW)
    results = E.explain(tiny, pred, E.all_methods(ig_steps=8))
    assert [r.method for r in results] == list(E.METHOD_NAMES)
    for r in results:
        assert r.scores.shape == (len(pred.words),), r.method
        assert r.token_scores.shape == (pred.n_tokens,), r.method
        assert np.isfinite(r.scores).all() and r.target == pred.label_id
    signed = {r.method: r.signed for r in results}
    assert signed == {"raw_attention": False, "rollout": False, "value_norm": False,
                      "grad_x_input": True, "integrated_gradients": True, "lime": True,
                      "occlusion": True}
    for r in results[:3]:                          # attention methods: shares of the words
        assert r.scores.sum() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("text", [REVIEW, "ok", "word " * 400])
def test_every_method_reports_exactly_the_wordpieces_it_plans_to_read(tiny, text):
    """A progress bar's total is ``cost``; the callback hears every batch the model read."""
    pred = tiny.predict(text)
    for m in E.all_methods(ig_steps=4, ig_max_steps=None):
        seen = []
        m.run(tiny, pred, seen.append)
        assert sum(seen) == m.cost(pred), m.name
        assert all(n > 0 for n in seen), m.name
        if m.name in ("lime", "occlusion") and len(pred.words) > 100:
            assert len(seen) >= 5, m.name        # the bar moves during the work, not at its end
    both = E.perturbation_methods()
    assert E.cost(both, pred) == sum(m.cost(pred) for m in both) > pred.n_tokens
    assert E.cost(E.attention_methods(), pred) == 0


def test_a_progress_bar_grows_with_each_integrated_gradients_doubling(tiny, monkeypatch):
    class Bar:
        done, grown = 0, 0

        def __call__(self, n):
            self.done += n

        def grow(self, n):
            self.grown += n
    pred, bar = tiny.predict(REVIEW), Bar()
    monkeypatch.setattr(E, "DELTA_WARN", 0.0)          # never good enough: 2, 4, 8 steps
    ig = E.IntegratedGradients(n_steps=2, max_steps=8)
    assert ig.run(tiny, pred, bar).n_steps == 8
    assert bar.grown == (E.IntegratedGradients.passes(4) + E.IntegratedGradients.passes(8)) \
        * pred.n_tokens
    assert bar.done == ig.cost(pred) + bar.grown
    plain = []                                          # a plain callable needs no grow()
    ig.run(tiny, pred, plain.append)
    assert sum(plain) == bar.done


def test_value_vectors_add_up_to_the_attention_output(tiny):
    """Σ_j α·f(x_j) + b_O is the [CLS] row of the attention block's output projection."""
    pred = tiny.predict(REVIEW)
    ids = E.token_ids(tiny, pred)
    model = tiny.model
    layer = 1
    dense = model.bert.encoder.layer[layer].attention.output.dense
    seen = {}
    h = dense.register_forward_hook(lambda m, i, o: seen.setdefault("out", o.detach()))
    try:   # the test's own hook, on its own copy of the model: removed right after
        with torch.no_grad():
            model(input_ids=torch.tensor([ids]))
    finally:
        h.remove()
    vec = E.value_vectors(model, ids, pred.attentions, [layer])[0]
    np.testing.assert_allclose((vec.sum(0) + dense.bias.detach()).numpy(), seen["out"][0, 0].numpy(),
                               atol=1e-4)
    norms = E.value_norms(model, ids, pred.attentions, [layer])[0]
    np.testing.assert_allclose(norms, vec.norm(dim=-1).numpy(), rtol=1e-6)
    # one head only: the other heads' terms are gone
    one = E.value_vectors(model, ids, pred.attentions, [layer], head=2)[0]
    rest = sum(E.value_vectors(model, ids, pred.attentions, [layer], head=h)[0]
               for h in (0, 1, 3))
    np.testing.assert_allclose((one + rest).numpy(), vec.numpy(), atol=1e-5)


def test_value_vectors_kept_by_the_fast_pass_equal_the_eager_ones(tiny):
    """The prediction's own pass keeps every layer's value vectors: the method uses them
    instead of a second, eager pass, with the same result."""
    pred = tiny.predict(REVIEW)
    assert tiny.fast is not None and pred.values is not None
    assert pred.values.shape == (pred.num_layers, pred.n_tokens, tiny.model.config.hidden_size)
    ids = E.token_ids(tiny, pred)
    for layer in range(pred.num_layers):
        eager = E.value_vectors(tiny.model, ids, pred.attentions, [layer])[0]
        kept = E.value_vectors(tiny.model, ids, pred.attentions, [layer], values=pred.values)[0]
        np.testing.assert_allclose(kept.numpy(), eager.numpy(), atol=1e-5)


def test_integrated_gradients_completeness(tiny):
    """Σ attributions = f(x) − f(baseline) (log p of the predicted class), the baseline
    being [PAD] everywhere but [CLS]/[SEP], computed here without Captum."""
    pred = tiny.predict(REVIEW)
    r = E.IntegratedGradients(n_steps=64).run(tiny, pred)
    ids = torch.tensor([E.token_ids(tiny, pred)])
    base = E.pad_baseline(ids, pred.word_ids, tiny.tokenizer.pad_token_id)
    assert base[0, 0] == ids[0, 0] and base[0, -1] == ids[0, -1]          # [CLS], [SEP] kept
    assert (base[0, 1:-1] == tiny.tokenizer.pad_token_id).all()
    with torch.no_grad():
        lp = [torch.log_softmax(tiny.model(input_ids=t).logits, -1)[0, pred.label_id].item()
              for t in (ids, base)]
    diff = lp[0] - lp[1]
    assert r.token_scores.sum() == pytest.approx(diff, abs=0.02 * abs(diff) + 1e-4)
    assert r.output_diff == pytest.approx(diff, abs=1e-4)
    assert r.relative_delta < 0.02 and not r.delta_too_large
    assert r.token_scores[0] == 0 and r.token_scores[-1] == 0          # specials: no attribution
    assert r.scores.sum() == pytest.approx(r.token_scores.sum(), abs=1e-5)
    # fewer steps: same sum to be explained, a larger (reported) error
    coarse = E.IntegratedGradients(n_steps=2, max_steps=None).run(tiny, pred)
    assert coarse.output_diff == pytest.approx(diff, abs=1e-4)
    assert abs(coarse.delta) >= abs(r.delta) and coarse.n_steps == 2


def test_integrated_gradients_doubles_its_steps_while_the_delta_is_too_large(tiny, monkeypatch):
    pred = tiny.predict(REVIEW)
    monkeypatch.setattr(E, "DELTA_WARN", 0.0)          # never good enough: up to the cap
    capped = E.IntegratedGradients(n_steps=2, max_steps=16).run(tiny, pred)
    assert capped.n_steps == 16 and "(delta above 0% at 2, 4, 8)" in capped.detail
    assert capped.token_scores.sum() == pytest.approx(capped.output_diff + capped.delta, abs=1e-6)
    monkeypatch.setattr(E, "DELTA_WARN", 10.0)         # always good enough: the first try
    first = E.IntegratedGradients(n_steps=2, max_steps=16).run(tiny, pred)
    assert first.n_steps == 2 and "delta above" not in first.detail


def test_batched_interpolation_steps_give_the_same_attributions(tiny):
    pred = tiny.predict(REVIEW)
    one = E.IntegratedGradients(n_steps=8, tokens_per_batch=1, max_steps=None).run(tiny, pred)
    batched = E.IntegratedGradients(n_steps=8, max_steps=None).run(tiny, pred)   # 8 at once
    assert batched.n_steps == 8 and E.IntegratedGradients(8).batch_size(pred.n_tokens) == 8
    np.testing.assert_allclose(batched.token_scores, one.token_scores, rtol=1e-4, atol=1e-6)


def test_gradient_forward_matches_the_eager_model(tiny):
    """The gradient methods' own forward (SDPA attention, [CLS]-only last layer, fused
    QKV) gives the eager transformers model's logits, input gradients and IG."""
    from reviewbert.model.inference import GradBertForward
    pred = tiny.predict(REVIEW)
    ids = torch.tensor([E.token_ids(tiny, pred)] * 3)
    scale = torch.linspace(0.1, 1.0, 3)[:, None, None]        # three points of an IG path
    x = tiny.model.get_input_embeddings().weight.detach()[ids] * scale
    xf, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    fast, eager = tiny.embedded_logits(xf), tiny.model(inputs_embeds=xe).logits
    assert isinstance(tiny._grad_forward, GradBertForward)
    np.testing.assert_allclose(fast.detach(), eager.detach(), rtol=1e-4, atol=1e-5)
    k = pred.label_id
    gf, = torch.autograd.grad(torch.log_softmax(fast, -1)[:, k].sum(), xf)
    ge, = torch.autograd.grad(torch.log_softmax(eager, -1)[:, k].sum(), xe)
    np.testing.assert_allclose(gf, ge, rtol=1e-3, atol=1e-6)
    assert gf.abs().max() > 0
    ours = E.IntegratedGradients(n_steps=8, max_steps=None).run(tiny, pred)
    tiny._grad_forward = lambda e: tiny.model(inputs_embeds=e).logits     # the eager path
    try:
        plain = E.IntegratedGradients(n_steps=8, max_steps=None).run(tiny, pred)
    finally:
        tiny._grad_forward = None
    np.testing.assert_allclose(ours.token_scores, plain.token_scores, rtol=1e-3, atol=1e-6)
    assert ours.delta == pytest.approx(plain.delta, abs=1e-5)


def _hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               for m in model.modules())


def test_concurrent_explanations_leave_the_shared_model_alone(tiny):
    """Two sessions explain at once while a third predicts: same numbers as one at a
    time, and no hook, .grad or flag ever appears on the shared model."""
    texts = [REVIEW, "Great phone, the screen is sharp and the price was fair."]
    preds = [tiny.predict(t) for t in texts]
    alone = [[r.token_scores for r in E.explain(tiny, p, E.all_methods(ig_steps=8))]
             for p in preds]
    model = tiny.model
    attn = model.config._attn_implementation
    flags = [p.requires_grad for p in model.parameters()]
    out, errors, seen_hooks = [None, None], [], []
    stop = threading.Event()

    def explain(i):
        try:
            for _ in range(3):
                out[i] = [r.token_scores for r in
                          E.explain(tiny, preds[i], E.all_methods(ig_steps=8))]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def watch():
        while not stop.is_set():
            seen_hooks.append(_hooks(model))
            p = tiny.predict(texts[0])
            if not np.allclose(p.probs, preds[0].probs, atol=1e-6):
                errors.append(AssertionError("prediction changed during explanations"))

    threads = [threading.Thread(target=explain, args=(i,)) for i in (0, 1)]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert not errors, errors
    for i in (0, 1):
        for a, b in zip(out[i], alone[i]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert seen_hooks and max(seen_hooks) == 0 and _hooks(model) == 0
    assert all(p.grad is None for p in model.parameters())
    assert [p.requires_grad for p in model.parameters()] == flags
    assert not model.training and model.config._attn_implementation == attn


# -------------------------------------------------------- agreement, reading
def _scores(method, values, signed=False):
    v = np.asarray(values, dtype=np.float32)
    return E.TokenScores(method=method, label=E.LABELS[method], signed=signed, scores=v,
                         token_scores=v, target=0, detail="layer 5, mean of heads")


def test_spearman_matrix_and_undefined_cases():
    from scipy.stats import spearmanr
    a = _scores("integrated_gradients", [0.9, 0.1, 0.5, -0.2], True)
    b = _scores("rollout", [0.4, 0.1, 0.3, 0.2])
    c = _scores("raw_attention", [0.25, 0.25, 0.25, 0.25])        # constant: undefined
    rho = E.spearman_matrix([a, b, c])
    assert rho[0, 1] == pytest.approx(spearmanr(a.scores, b.scores).statistic)
    assert rho[0, 1] == rho[1, 0] and np.isnan(rho[0, 2]) and (np.diag(rho) == 1).all()
    two = E.spearman_matrix([a, b])
    assert two.shape == (2, 2) and two[0, 1] == pytest.approx(rho[0, 1])
    short = E.spearman_matrix([_scores("rollout", [1, 2]), _scores("raw_attention", [2, 1])])
    assert np.isnan(short[0, 1])                                   # 2 words: no ranking to compare
    # a constant method blanks only its own pairs (scipy's spearmanr on the whole matrix
    # returned one NaN for all of them, and the reading indexed past it)
    d = _scores("value_norm", [0.1, 0.7, 0.3, 0.2])
    three = E.spearman_matrix([c, a, d])
    assert three.shape == (3, 3) and np.isnan(three[0, 1]) and np.isnan(three[0, 2])
    assert three[1, 2] == pytest.approx(spearmanr(a.scores, d.scores).statistic)


def test_reading_names_agreement_punctuation_and_evidence_against():
    words = ["poor", "quality", ",", "!", "*so*", "."]
    pred = SimpleNamespace(words=words, label="1 star")
    ig = _scores("integrated_gradients", [0.9, 0.8, 0.0, 0.01, -0.6, 0.0], True)
    roll = _scores("rollout", [0.3, 0.25, 0.1, 0.1, 0.05, 0.2])
    raw = _scores("raw_attention", [0.05, 0.05, 0.3, 0.3, 0.05, 0.25])
    line = E.reading([raw, roll, ig], pred)
    assert line.startswith("IG ranks *poor quality* highest")
    assert "rollout agrees (ρ = " in line and "on *poor quality*" in line
    assert "raw attention (layer 5) puts 85% of its weight on punctuation" in line
    assert "IG counts *\\*so\\** against 1 star" in line          # Markdown in a word is escaped
    # without IG the reading anchors on rollout
    assert E.reading([raw, roll], pred).startswith("rollout ranks")


# ------------------------------------------------------------ demo checkpoint
def test_all_methods_on_real_test_reviews_of_32_and_256_tokens(data_dir):
    """The shipped demo checkpoint on its own test split: one review of about 32
    tokens and one cut to 256 (the demo reads 128; positions allow 512)."""
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    demo = Path(E.__file__).resolve().parents[2] / "checkpoints" / "demo"
    base = Predictor.from_checkpoint(demo, torch.device("cpu"))
    long = Predictor(base.model, base.tokenizer, base.scheme, max_length=256)
    reviews = test_split_examples(checkpoint_info(demo).meta, base.tokenizer, data_dir)
    n_tok = {r.text: len(base.tokenizer(r.text)["input_ids"]) for r in reviews}
    short = next(r.text for r in reviews if 30 <= n_tok[r.text] <= 34)
    longest = next(r.text for r in reviews if n_tok[r.text] > 300)
    for predictor, text, want in ((base, short, n_tok[short]), (long, longest, 256)):
        pred = predictor.predict(text)
        assert pred.n_tokens == want
        results = E.explain(predictor, pred)
        assert [r.method for r in results] == list(E.METHOD_NAMES)
        for r in results:
            assert r.scores.shape == (len(pred.words),), (r.method, want)
            assert np.isfinite(r.scores).all() and np.abs(r.scores).sum() > 0
        ig = next(r for r in results if r.method == "integrated_gradients")
        assert ig.n_steps in (16, 32, 64) and np.isfinite(ig.relative_delta)
        assert E.reading(results, pred).endswith(".")


# ------------------------------------------------------------------- figures
def test_signed_highlight_uses_a_diverging_scale_and_unsigned_keeps_its_look():
    from reviewbert.viz.highlight import highlight_html
    text = "good <b>bad</b> fine"
    spans = [(0, 4), (5, 15), (16, 20)]
    signed = highlight_html(text, spans, [0.5, -1.0, 0.0], signed=True, css_class="rb-explain")
    from reviewbert.viz.highlight import HIGHLIGHT_CSS
    assert 'class="rb-explain"' in signed and "<b>" not in signed and "&lt;b&gt;" in signed
    # a word's look is a class: its colour and its step of opacity (the page's stylesheet)
    assert ".rb-p5{background:rgba(255,170,0,0.49)}" in HIGHLIGHT_CSS
    assert ".rb-n10{background:rgba(45,108,223,0.90)}" in HIGHLIGHT_CSS
    assert 'class="rb-w rb-p5" title="+0.5">good<' in signed   # for: orange, halfway
    assert 'class="rb-w rb-n10" title="-1">' in signed         # against: blue, the strongest
    assert 'class="rb-w" title="+0">fine<' in signed           # 0: no colour
    unsigned = highlight_html(text, spans, [0.5, -1.0, 0.0])
    assert 'class="rb-highlight"' in unsigned and "rb-n" not in unsigned
    assert 'class="rb-w rb-p10" title="0.500">good<' in unsigned  # negatives clipped: 0.5 tops


def test_methods_heatmap_rows_are_methods_scaled_per_row():
    from reviewbert.explain import figures as XF
    from reviewbert.viz import figures as F
    words = [f"w{i}" for i in range(60)]
    a = _scores("rollout", np.linspace(0.0, 0.2, 60))
    b = _scores("integrated_gradients", np.linspace(-2.0, 1.0, 60), signed=True)
    fig = XF.methods_heatmap([a, b], words, wrap=48)
    hm = [t for t in fig.data if t.type == "heatmap"]
    assert len(hm) == 2 and [np.asarray(t.z).shape for t in hm] == [(2, 48), (2, 12)]
    z = np.concatenate([np.asarray(t.z) for t in hm], axis=1)
    np.testing.assert_allclose(z[0], a.scores / a.scores.max(), rtol=1e-6)
    np.testing.assert_allclose(z[1], b.scores / 2.0, rtol=1e-6)          # signed: / max |score|
    assert list(hm[0].y) == ["Attention rollout", "Integrated Gradients"]
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1
    # a word per column: drawn with the app's own template, which sets no axis standoff
    assert fig.layout.template.layout.font.family == F.FONT and "standoff" not in fig.to_json()
    rho = XF.agreement_heatmap(["a", "b"], [[1.0, np.nan], [np.nan, 1.0]])
    assert rho.data[0].text[0][1] == "n/a"


def test_faithfulness_charts_carry_the_intervals():
    from reviewbert.explain import figures as XF
    from reviewbert.explain.faithfulness import Stat
    st = {"5": Stat(0.2, 0.1, 0.3), "10": Stat(0.3, 0.25, 0.4), "aopc": Stat(0.25, 0.2, 0.3)}
    summary = {"integrated_gradients": {"comprehensiveness": st, "sufficiency": st},
               "random": {"comprehensiveness": st, "sufficiency": st}}
    labels = {"integrated_gradients": "Integrated Gradients", "random": "Random ranking"}
    curves = XF.faithfulness_curves(summary, labels, [5, 10])
    assert len(curves.data) == 4 and curves.data[-1].line.dash == "dash"
    np.testing.assert_allclose(curves.data[0].error_y.array, [0.1, 0.1])
    np.testing.assert_allclose(curves.data[0].error_y.arrayminus, [0.1, 0.05])
    bars = XF.aopc_bars(summary, labels)
    assert list(bars.data[0].y) == ["Integrated Gradients", "Random ranking"]
