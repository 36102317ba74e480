"""What if? on the shipped demo checkpoint and its own test split: all three counterfactual
kinds on reviews of about 32 and 256 tokens, and every one of them re-predicted with plain
transformers (AutoModelForSequenceClassification, as a user outside ReviewBERT would):
what is reported as a change of rating really is one, and what is not, is not."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from reviewbert.whatif import counterfactuals as W

DEMO = Path(__file__).resolve().parents[2] / "checkpoints" / "demo"


@pytest.fixture(scope="module")
def demo(data_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    predictor = Predictor.from_checkpoint(DEMO, torch.device("cpu"))
    reviews = test_split_examples(checkpoint_info(DEMO).meta, predictor.tokenizer, data_dir)
    # fp32, as ReviewBERT computes: the demo's weights are stored in float16, and
    # transformers 5 would otherwise run them in float16 (probabilities ~1e-3 apart)
    plain = AutoModelForSequenceClassification.from_pretrained(
        DEMO, use_safetensors=True, dtype=torch.float32).eval()
    return predictor, reviews, AutoTokenizer.from_pretrained(DEMO), plain


def plain_probs(tok, model, text: str, max_length: int) -> np.ndarray:
    enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        return torch.softmax(model(**enc).logits[0].float(), -1).numpy()


def reviews_of(predictor, reviews, lo: int, hi: int) -> list[str]:
    tok = predictor.tokenizer
    return [r.text for r in reviews if lo <= len(tok(r.text)["input_ids"]) <= hi]


@pytest.mark.parametrize("lo, hi, want", [(30, 34, None), (300, 10**6, 256)])
def test_every_counterfactual_rechecked_with_plain_transformers(demo, lo, hi, want):
    predictor, reviews, tok, plain = demo
    found = None
    for text in reviews_of(predictor, reviews, lo, hi)[:6]:
        pred = predictor.predict(text)
        cf = W.counterfactuals(predictor, pred, method="occlusion")
        if cf.deletion.found:
            found = (pred, cf)
            break
    assert found is not None, "no review of this length with a deletion flip within 10 words"
    pred, cf = found
    assert pred.n_tokens == (want or pred.n_tokens)
    kinds = {c.kind for c in cf.all()}
    assert kinds == {"deletion", "sentence", "hotflip"} or (kinds == {"deletion", "hotflip"}
                                                            and len(W.sentence_spans(pred.text)) < 2)
    assert len(cf.hotflip.by_class) >= 1 and all(len(v) == W.HOTFLIP_SHOW
                                                 for v in cf.hotflip.by_class.values())
    flips = 0
    for c in cf.all():
        probs = plain_probs(tok, plain, c.text, predictor.max_length)
        assert int(np.argmax(probs)) == c.label_id, (c.kind, c.what)
        assert (int(np.argmax(probs)) != pred.label_id) == c.flipped, (c.kind, c.what)
        np.testing.assert_allclose(probs, c.probs, atol=1e-5)
        flips += c.flipped
    assert flips >= 1
    d = cf.deletion
    assert 1 <= len(d.words) <= W.MAX_WORDS and d.counterfactual.flipped
    assert d.sentence(pred).startswith("Deleting ")


def test_the_cli_json_rechecks_with_plain_transformers(demo, capsys):
    import json

    from reviewbert.cli import main
    predictor, reviews, tok, plain = demo
    text = reviews_of(predictor, reviews, 30, 34)[0]
    assert main(["whatif", "--checkpoint", str(DEMO), text, "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["counterfactuals"]
    for c in last["counterfactuals"]:
        probs = plain_probs(tok, plain, c["text"], predictor.max_length)
        assert int(np.argmax(probs)) == c["label_id"] and c["stars"] == [c["label_id"] + 1]
        assert (c["label_id"] != last["label_id"]) == c["changed"]
