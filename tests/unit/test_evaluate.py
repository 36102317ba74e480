"""reviewbert.model.batch_predict: bulk evaluation (input order, lengths, precision) on the tiny model,
and bf16 against fp32 on the shipped demo checkpoint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reviewbert.model import batch_predict, device
from reviewbert.model.checkpoint import load_checkpoint

from toyreviews import toy_rows

TEXTS = [t for t, _ in toy_rows(40)] + ["word " * 300, "ok", "Great phone! " * 20]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    torch.set_num_threads(1)
    model, tok, _ = load_checkpoint(tiny_model_dir, torch.device("cpu"))
    return model, tok


def test_encode_lengths_cut_like_the_tokenizer(tiny):
    _, tok = tiny
    ids, lengths = batch_predict.encode_texts(tok, TEXTS, 32, return_lengths=True)
    assert ids == batch_predict.encode_texts(tok, TEXTS, 32)        # same ids as the tokenizer's truncation
    full = tok(TEXTS, add_special_tokens=False)["input_ids"]
    assert lengths == [len(x) for x in full]              # untruncated, without [CLS]/[SEP]
    assert max(len(x) for x in ids) == 32 and lengths[40] == 300


def test_predict_in_order_matches_one_by_one(tiny):
    model, tok = tiny
    done = []
    probs, lengths, order = batch_predict.predict_in_order(model, tok, TEXTS, max_length=32, batch_size=8,
                                               progress=done.append)
    assert sum(done) == len(TEXTS) and len(done) == -(-len(TEXTS) // 8)
    # batched, length-sorted and padded, yet row i is text i's own prediction
    for i in (0, 17, 40, 41, 42):
        single = batch_predict.predict_texts(model, tok, [TEXTS[i]], max_length=32)[0]
        np.testing.assert_allclose(probs[i], single, atol=1e-5)
    # the loader scores the longest first
    assert lengths[order[0]] == max(lengths) and sorted(order.tolist()) == list(range(len(TEXTS)))


def test_training_defaults_unchanged(tiny):
    """predict_probs without options: fp32, same numbers as a plain forward pass."""
    model, tok = tiny
    ds = batch_predict.EncodedDataset(batch_predict.encode_texts(tok, TEXTS, 32),
                                      [i % 5 for i in range(len(TEXTS))])
    y, p = batch_predict.predict_probs(model, batch_predict.eval_loader(ds, 16, tok.pad_token_id))
    by_len = sorted(range(len(TEXTS)), key=lambda i: -ds.lengths[i])
    assert y.tolist() == [i % 5 for i in by_len]
    np.testing.assert_allclose(p, batch_predict.predict_texts(model, tok, [TEXTS[i] for i in by_len], 32),
                               atol=1e-5)


def test_precision_is_detected_from_cpu_flags(tmp_path, monkeypatch):
    real = device.cpu_bf16_units

    def flags(text):
        f = tmp_path / "cpuinfo"
        f.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 {text}\n")
        real.cache_clear()
        return real(str(f))
    try:
        assert flags("avx512f amx_bf16 amx_tile") == ("amx_bf16",)
        assert flags("avx512f avx512_bf16") == ("avx512_bf16",)
        assert flags("avx512f avx2") == ()
        monkeypatch.setattr(device, "cpu_bf16_units", lambda: ())
        assert device.resolve_precision("auto", "cpu") == "fp32"
        monkeypatch.setattr(device, "cpu_bf16_units", lambda: ("amx_bf16",))
        assert device.resolve_precision("auto", "cpu") == "bf16"
        assert device.resolve_precision("auto", "cuda") == "fp32"      # only CPUs are switched
        assert device.resolve_precision("fp32", "cpu") == "fp32"
        with pytest.raises(ValueError):
            device.resolve_precision("fp16", "cpu")
    finally:
        real.cache_clear()


def test_bf16_runs_and_stays_close_on_the_tiny_model(tiny):
    model, tok = tiny
    p32, _, _ = batch_predict.predict_in_order(model, tok, TEXTS, max_length=32, precision="fp32")
    p16, _, _ = batch_predict.predict_in_order(model, tok, TEXTS, max_length=32, precision="bf16")
    assert np.abs(p32 - p16).max() < 0.02 and np.allclose(p16.sum(1), 1, atol=1e-5)
    assert not np.array_equal(p32, p16)        # autocast really ran in bf16
    assert next(model.parameters()).dtype == torch.float32   # and left the weights alone
