"""The "Inside BERT" numbers against the model's own: a traced pass must be the model.

Run on the tiny random BERT (2 layers x 4 heads x 8) and on the embedded MiniLM
(6 x 12 x 32, untrained head); every size is read from the config, never assumed.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reviewbert.anatomy import trace as A
from reviewbert.model.checkpoint import load_for_training
from reviewbert.model.inference import Predictor
from reviewbert.model.labels import get_scheme
from reviewbert.viz.bertviz_view import head_view_html, head_view_tokens, last_window_start

SENTENCE = "time flies like an arrow, said the unboxing video"


@pytest.fixture(scope="module", params=["tiny", "minilm"])
def predictor(request, tiny_model_dir):
    torch.manual_seed(0)
    if request.param == "tiny":
        return Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))
    model, tok = load_for_training(None, get_scheme(5), attn_implementation="eager")
    return Predictor(model, tok, max_length=64)


@pytest.fixture(scope="module")
def traced(predictor):
    tr = A.trace(predictor.model, predictor.tokenizer, SENTENCE, predictor.max_length)
    with torch.inference_mode():
        out = predictor.model(input_ids=torch.tensor([tr.ids]), output_attentions=True,
                              output_hidden_states=True)
    return tr, out


def test_dims_come_from_the_config(predictor, traced):
    tr, _ = traced
    cfg = predictor.model.config
    d = tr.dims
    assert (d.hidden, d.heads, d.layers, d.intermediate) == (
        cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers, cfg.intermediate_size)
    assert d.head_dim * d.heads == d.hidden
    T = tr.n_tokens
    assert tr.query.shape == (d.layers, d.heads, T, d.head_dim)
    assert tr.attentions.shape == (d.layers, d.heads, T, T)
    assert tr.hidden_states.shape == (d.layers + 1, T, d.hidden)
    assert tr.scaling == pytest.approx(d.head_dim ** -0.5)


def test_hand_attention_equals_output_attentions_for_every_layer_and_head(predictor, traced):
    tr, out = traced
    for layer in range(tr.dims.layers):
        for head in range(tr.dims.heads):
            hs = A.head_step(tr, layer, head)
            np.testing.assert_allclose(hs.attention, out.attentions[layer][0, head].numpy(),
                                       atol=1e-5, rtol=0)
            np.testing.assert_allclose(hs.attention.sum(axis=1), 1.0, atol=1e-5)
    # ... and the traced pass is the Prediction the main page draws (fast path included)
    pred = predictor.predict(SENTENCE)
    assert pred.tokens == tr.tokens
    np.testing.assert_allclose(tr.attentions, pred.attentions, atol=1e-5, rtol=0)
    for i, h in enumerate(out.hidden_states):
        np.testing.assert_allclose(tr.hidden_states[i], h[0].numpy(), atol=1e-4, rtol=0)


def test_embedding_sum_and_layernorm_equal_the_models_embedding_output(predictor, traced):
    tr, out = traced
    emb = predictor.model.bert.embeddings
    T = tr.n_tokens
    np.testing.assert_array_equal(tr.token_emb, emb.word_embeddings.weight[tr.ids].detach().numpy())
    np.testing.assert_array_equal(tr.position_emb, emb.position_embeddings.weight[:T].detach().numpy())
    np.testing.assert_allclose(tr.emb_sum, tr.token_emb + tr.segment_emb + tr.position_emb, atol=1e-6)
    by_hand = torch.nn.functional.layer_norm(
        torch.from_numpy(tr.emb_sum), (tr.dims.hidden,), emb.LayerNorm.weight, emb.LayerNorm.bias,
        emb.LayerNorm.eps).detach().numpy()
    np.testing.assert_allclose(by_hand, out.hidden_states[0][0].numpy(), atol=1e-5, rtol=0)
    assert A.embeddings_max_diff(predictor.model, tr) < 1e-5


def test_cls_step_probabilities_equal_the_models(predictor, traced):
    tr, out = traced
    cs = A.cls_step(predictor.model, tr)
    model_probs = torch.softmax(out.logits[0], -1).numpy()
    np.testing.assert_allclose(cs.probs, model_probs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(cs.probs, predictor.predict(SENTENCE).probs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(cs.pooled, np.tanh(cs.pooled_pre), atol=1e-6)   # the pooler, shown
    assert cs.weight.shape == (tr.dims.num_labels, tr.dims.hidden)


def test_layer_detail_rebuilds_each_layer(predictor, traced):
    tr, _ = traced
    for layer in range(tr.dims.layers):
        det = A.layer_detail(predictor.model, tr, layer)
        assert det.max_diff_to_trace < 1e-5
        assert det.shapes[A.LAYER_STEPS.index("feed-forward expand")] == (
            tr.n_tokens, tr.dims.intermediate)
        np.testing.assert_allclose(det.norms, [np.linalg.norm(m, axis=-1) for m in det.matrices],
                                   rtol=1e-4)


def test_contextual_similarity_starts_at_one(predictor):
    word, sentences = A.SHARED_WORD_SENTENCES[0]
    ctx = A.word_in_context(predictor.model, predictor.tokenizer, list(sentences), word)
    K = predictor.model.config.num_hidden_layers + 2
    assert ctx.vectors.shape[:2] == (2, K) and ctx.pca.shape == (2, K, 2)
    assert ctx.layer_names[0] == "static token embedding" and ctx.layer_names[-1] == f"layer {K - 2}"
    assert ctx.pair_similarity()[0] == pytest.approx(1.0, abs=1e-6)
    last = ctx.pair_similarity()[-1]
    assert last < 1 - 1e-6                               # context changed "flies", at least a bit
    if predictor.model.config.hidden_size == 384:        # pretrained MiniLM: a lot (random tiny: no)
        assert last < 0.9
    assert "flies" in A.describe_drift(ctx)
    with pytest.raises(ValueError, match="sentence 2"):
        A.word_in_context(predictor.model, predictor.tokenizer, ["a bank", "a river"], "bank")


def test_splits_and_shared_words(predictor, traced):
    tr, _ = traced
    splits = A.word_splits(tr, predictor.tokenizer)
    assert any(s.word == "unboxing" and s.pieces == ["un", "##box", "##ing"] for s in splits)
    assert A.shared_words(predictor.tokenizer, list(A.SHARED_WORD_SENTENCES[1][1])) == ["the", "bank"]


def test_empty_sentence_is_a_value_error(predictor):
    with pytest.raises(ValueError, match="empty"):
        A.trace(predictor.model, predictor.tokenizer, "  ", 32)


# ---------------------------------------------------------------- masked LM
def test_mlm_only_where_the_base_has_its_head(tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from reviewbert.config import DEFAULT_BASE_MODEL
    from reviewbert.model.checkpoint import resolve_base_model
    no_head = A.mlm_status(DEFAULT_BASE_MODEL)                 # the embedded MiniLM
    assert not no_head.available and "no masked-language-model head" in no_head.message
    missing = A.mlm_status("nobody/not-a-model-here")           # never downloaded
    assert not missing.available and "not on this machine" in missing.message

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                     intermediate_size=64)
    BertForMaskedLM(cfg).save_pretrained(tmp_path, safe_serialization=True)
    AutoTokenizer.from_pretrained(resolve_base_model(None)).save_pretrained(tmp_path)
    ok = A.mlm_status(str(tmp_path))
    assert ok.available, ok.message
    model, tok = A.load_mlm(ok.path)
    fills = A.fill_mask(model, tok, "time flies like an [MASK].")
    assert len(fills) == 1 and len(fills[0].candidates) == 5
    probs = [p for _, p in fills[0].candidates]
    assert probs == sorted(probs, reverse=True) and sum(probs) <= 1.0
    assert A.fill_mask(model, tok, "no mask here") == []


# ---------------------------------------------------------------- head-view window
class _Pred:
    def __init__(self, n, layers=1, heads=2):
        self.tokens = ["[CLS]"] + [f"t{i}" for i in range(1, n - 1)] + ["[SEP]"]
        rng = np.random.default_rng(0)
        a = rng.random((layers, heads, n, n)).astype(np.float32)
        self.attentions = a / a.sum(-1, keepdims=True)


def test_head_view_window_keeps_cls_and_sep():
    short = _Pred(10)
    assert head_view_tokens(short) == list(range(10))
    long = _Pred(200)
    assert head_view_tokens(long) == list(range(47)) + [199]           # the default: the start
    last = last_window_start(200)
    end = head_view_tokens(long, start=last)
    assert end[0] == 0 and end[-1] == 199 and len(end) == 48
    assert end[1:-1] == list(range(last, 199))                         # ends right before [SEP]
    assert head_view_tokens(long, start=10_000) == end                 # clamped
    html = head_view_html(long, start=last)
    assert '"t198"' in html and '"t46"' not in html


def test_tokens_are_escaped_and_other_models_are_declined():
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    from reviewbert.anatomy.figures import matrix_heatmap, token_chips_html
    chips = token_chips_html(["[CLS]", "<img src=x onerror=alert(1)>", "[SEP]"], [101, 1, 102],
                             [True, False, True])
    assert "<img" not in chips and "&lt;img src=x" in chips
    fig = matrix_heatmap(np.eye(2), ["<b>x</b>", "y"], "t <script>")
    assert fig.layout.title.text == "t &lt;script&gt;"          # Plotly shows it as typed
    assert fig.layout.yaxis.ticktext[0] == "&lt;b&gt;x&lt;/b&gt;"
    assert fig.data[0].customdata[0][0][0] == "&lt;b&gt;x&lt;/b&gt;"
    other = DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=100, dim=16, n_layers=1, n_heads=2, hidden_dim=32))
    assert "DistilBertForSequenceClassification" in A.unsupported_reason(other)
