"""One forward pass → Prediction; the fast path must give the plain eager result."""
import json

import numpy as np
import pytest
import torch

from reviewbert.data.examples import EXAMPLES_FILE
from reviewbert.model.inference import MAX_CHARS, FastBertForward, Predictor, encode, stars_display
from reviewbert.model.labels import FIVE, THREE

REVIEWS = [
    "Terrible. Broke after two days.",
    "Works fine, nothing special but ok for the price. Screen is a bit dim outdoors.",
    "Excellent! Best phone I have owned. The battery lasts two days and the camera is amazing.",
    "The case fits, but the buttons are so stiff that I have to press the volume key twice.",
]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))


@pytest.fixture(scope="module")
def minilm():
    """The embedded MiniLM (6 x 12) with a classifier head that has real margins."""
    from reviewbert.model.checkpoint import load_for_training
    torch.manual_seed(0)
    model, tok = load_for_training(None, FIVE, attn_implementation="eager")
    with torch.no_grad():
        model.classifier.weight.normal_(0, 1.0)
    return Predictor(model.eval(), tok, FIVE, max_length=256)


def long_review(tok, n_tokens=256):
    text = " ".join(json.loads(line)["text"] for line in EXAMPLES_FILE.read_text().splitlines())
    assert len(tok(text)["input_ids"]) > n_tokens
    return text


def test_prediction_fields(tiny):
    p = tiny.predict("Unbelievable phone, the battery is great!")
    assert p.tokens[0] == "[CLS]" and p.tokens[-1] == "[SEP]"
    assert p.attentions.dtype == np.float32
    assert p.attentions.shape == (2, 4, len(p.tokens), len(p.tokens))
    np.testing.assert_allclose(p.attentions.sum(-1), 1.0, atol=1e-5)
    assert p.word_ids[0] is None and p.word_ids[-1] is None
    assert len(p.word_ids) == len(p.tokens)
    assert p.words[0] == "Unbelievable"                    # original casing from the text
    s, e = p.word_spans[0]
    assert p.text[s:e] == "Unbelievable"
    assert p.probs.shape == (5,) and p.probs.sum() == pytest.approx(1.0, abs=1e-6)
    assert p.label == FIVE.names[p.label_id] and len(p.stars) == 5
    assert not p.truncated and p.n_tokens == p.n_tokens_original == len(p.tokens)


def test_truncation_and_huge_text(tiny):
    tiny_short = Predictor(tiny.model, tiny.tokenizer, FIVE, max_length=16)
    p = tiny_short.predict("word " * 100)
    assert p.truncated and p.n_tokens == 16 and p.n_tokens_original == 102
    assert p.tokens[-1] == "[SEP]" and p.attentions.shape[-1] == 16
    huge = tiny_short.predict("ok " * (MAX_CHARS // 3 + 5000))
    assert huge.chars_cut and len(huge.text) == MAX_CHARS and huge.truncated


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_refused(tiny, text):
    with pytest.raises(ValueError, match="empty"):
        tiny.predict(text)


def test_stars_display():
    assert stars_display(FIVE, 3) == "★★★★☆"
    assert stars_display(THREE, 0) == "★☆☆☆☆–★★☆☆☆"
    assert stars_display(THREE, 1) == "★★★☆☆"


def test_fallback_path_matches_fast_path(tiny):
    assert tiny.fast is not None
    slow = Predictor(tiny.model, tiny.tokenizer, FIVE, fast=False)
    a, b = tiny.predict(REVIEWS[1]), slow.predict(REVIEWS[1])
    np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-5)
    np.testing.assert_allclose(a.probs, b.probs, atol=1e-5)


def test_fast_path_equals_plain_fp32_eager(minilm):
    """The speed-ups change nothing: same class, attention within 0.01 of plain eager."""
    assert FastBertForward.supports(minilm.model)
    texts = REVIEWS + [long_review(minilm.tokenizer)]
    worst = 0.0
    for text in texts:
        p = minilm.predict(text)
        enc = encode(minilm.tokenizer, text, 256)
        with torch.inference_mode():
            out = minilm.model(input_ids=torch.tensor([enc.ids]), output_attentions=True)
        ref = torch.stack([a[0] for a in out.attentions]).numpy()
        ref_probs = torch.softmax(out.logits[0], -1).numpy()
        assert p.attentions.shape == ref.shape == (6, 12, len(enc.ids), len(enc.ids))
        diff = float(np.abs(p.attentions - ref).max())
        worst = max(worst, diff)
        assert diff <= 0.01
        assert p.label_id == int(ref_probs.argmax())
        np.testing.assert_allclose(p.probs, ref_probs, atol=1e-4)
    assert len(encode(minilm.tokenizer, texts[-1], 256).ids) == 256
    print(f"max |fast - eager| attention over {len(texts)} reviews: {worst:.2e}")


def test_warm_up_builds_every_row_shape_a_prediction_can_meet(tiny, monkeypatch):
    """After Predictor.warm_up, no review of any length up to max_length brings a matmul
    row count that warm-up did not already run (so oneDNN builds nothing new later: the
    app server's memory is steady from its first prediction)."""
    if not tiny.fast.packed:
        pytest.skip("no oneDNN packed weights on this CPU")
    p = Predictor(tiny.model, tiny.tokenizer, FIVE, max_length=64)
    seen: list[set] = [set()]
    real = torch.ops.mkldnn._linear_pointwise

    def spy(x, *args):
        seen[-1].add(int(x.shape[0]))
        return real(x, *args)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
    p.warm_up()
    warmed = seen[-1]
    seen.append(set())
    words = (" ".join(REVIEWS) + " ") * 4
    for k in range(1, 90, 2):
        p.predict(" ".join(words.split()[:k]))
    assert max(p.predict(words).n_tokens, 0) == 64                    # up to max_length
    assert seen[-1] and seen[-1] <= warmed, sorted(seen[-1] - warmed)
    assert warmed == {1, *p.fast.row_shapes(64)}


def test_fast_path_pads_matmul_rows_to_a_few_shapes(tiny, monkeypatch):
    """oneDNN keeps a primitive per row count for good: the fast path's matmuls see
    only multiples of ROW_BUCKET (or one row, [CLS] in the last layer), whatever the
    review's length, and the result stays the eager model's."""
    from reviewbert.model import inference as I
    if not tiny.fast.packed:
        pytest.skip("no oneDNN packed weights on this CPU")
    rows = set()
    real = torch.ops.mkldnn._linear_pointwise

    def spy(x, *args):
        rows.add(int(x.shape[0]))
        return real(x, *args)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
    slow = Predictor(tiny.model, tiny.tokenizer, FIVE, fast=False)
    words = " ".join(REVIEWS).split()
    lengths = set()
    for k in range(1, len(words), 3):
        text = " ".join(words[:k])
        a, b = tiny.predict(text), slow.predict(text)
        lengths.add(a.n_tokens)
        np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-5)
        np.testing.assert_allclose(a.probs, b.probs, atol=1e-5)
    assert len(lengths) > 10
    assert I.ROW_BUCKET >= 8 and len(rows) < len(lengths) / 2, (sorted(rows), sorted(lengths))
    assert all(n == 1 or n % I.ROW_BUCKET == 0 for n in rows), sorted(rows)
    assert len(rows) <= 1 + -(-max(lengths) // I.ROW_BUCKET)


def test_weights_saved_in_fp16_load_as_fp32_on_every_device(tiny_model_dir, tmp_path):
    """transformers 5 keeps a checkpoint's stored dtype unless told: the demo is saved in
    fp16, and on an H200 its Predict attention came out 6e-3 from the CPU's (gpu_check).
    Prediction loads fp32 on any device (a device other than the CPU: "meta" here), and
    training's master weights are fp32 whatever the base model was saved in."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from reviewbert.model.checkpoint import load_checkpoint, load_for_training
    half = tmp_path / "half"
    AutoModelForSequenceClassification.from_pretrained(tiny_model_dir).half().save_pretrained(half)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(half)
    saved = AutoModelForSequenceClassification.from_pretrained(half)
    assert next(saved.parameters()).dtype == torch.float16   # what transformers does alone
    for device in ("cpu", "meta"):
        model, _, _ = load_checkpoint(half, torch.device(device))
        assert {p.dtype for p in model.parameters()} == {torch.float32}, device
        assert next(model.parameters()).device.type == device
    model, _ = load_for_training(str(half), FIVE)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_prepare_cuda_turns_cudnn_attention_off_on_cuda_only():
    """cuDNN's attention builds a graph per new sequence length (0.2-3 s each on an H200):
    ReviewBERT's work on a GPU uses the flash / memory-efficient kernels instead."""
    from reviewbert.model.device import prepare_cuda
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        prepare_cuda(torch.device("cpu"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        prepare_cuda("cuda:0")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)
