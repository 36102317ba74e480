"""plain_bert.py: the Predict page's load without transformers' modeling code.

The plain load must predict exactly what the transformers load predicts, build the
transformers model only when asked (on the same tensors), and hand every checkpoint it
does not read exactly to transformers, whose checks and messages stay as they were.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from reviewbert.errors import CheckpointError
from reviewbert.model import plain_bert
from reviewbert.model.checkpoint import PLAIN_LOAD_ENV
from reviewbert.model.inference import FastBertForward, Predictor

from fuzzing import twins

ROOT = Path(__file__).resolve().parents[2]
TEXT = "The battery died after two days, but the screen is lovely and bright."
CPU = torch.device("cpu")


def _both(path, monkeypatch):
    """(the plain load's Predictor, transformers' Predictor) of one checkpoint."""
    plain = Predictor.from_checkpoint(path, CPU)
    with monkeypatch.context() as m:
        m.setenv(PLAIN_LOAD_ENV, "0")
        hf = Predictor.from_checkpoint(path, CPU)
    return plain, hf


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _edit_config(d: Path, **fields) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(fields)
    (d / "config.json").write_text(json.dumps(cfg))


def _edit_weights(d: Path, edit) -> None:
    tensors = load_file(str(d / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_plain_load_predicts_exactly_what_the_transformers_load_predicts(
        tiny_model_dir, tmp_path, monkeypatch, dtype):
    path = tiny_model_dir
    if dtype == "float16":   # the demo is saved in fp16: both loads upcast it to fp32
        path = _copy(tiny_model_dir, tmp_path / "half")
        _edit_weights(path, lambda t: t.update({k: v.half() for k, v in t.items()}))
    plain, hf = _both(path, monkeypatch)
    assert plain._model is None and hf._model is not None   # which load each one took
    assert plain.max_length == hf.max_length and plain.scheme == hf.scheme
    a, b = plain.predict(TEXT), hf.predict(TEXT)
    for field in ("probs", "attentions", "values", "cls_vector"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.tokens == b.tokens and a.label == b.label
    rows = plain.encode_rows([TEXT, "ok", "Terrible phone."])
    np.testing.assert_allclose(plain.batch_logits(rows), hf.batch_logits(rows), atol=1e-5)


def test_the_model_is_built_once_when_asked_on_the_same_tensors(tiny_model_dir, monkeypatch):
    plain, hf = _both(tiny_model_dir, monkeypatch)
    assert plain._model is None
    built = []
    make = plain._make_model
    plain._make_model = lambda: built.append(1) or make()
    got = []
    threads = [threading.Thread(target=lambda: got.append(plain.model)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and all(m is got[0] for m in got) and plain.model is got[0]
    model = plain.model
    assert type(model).__name__ == "BertForSequenceClassification" and not model.training
    assert model.config._attn_implementation == "eager"
    # no second copy of the weights: the model's tensors are the ones the fast pass reads
    assert model.bert.embeddings.word_embeddings.weight.data_ptr() == plain.fast.word.data_ptr()
    sd, want = model.state_dict(), hf.model.state_dict()
    assert sorted(sd) == sorted(want)
    for k in want:
        assert torch.equal(sd[k], want[k]), k
    ids = torch.tensor([plain.encode_rows([TEXT])[0]])
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).logits, hf.model(input_ids=ids).logits,
                                   atol=0, rtol=0)


def test_the_app_start_up_never_imports_transformers_modeling_code():
    """The shipped demo, loaded and warmed as the app's background load does: no
    ``modeling_bert`` (nor the 1,600 modules behind it) until a view asks for the model."""
    code = (
        "import sys, torch\n"
        "from reviewbert.server.model_loading import load_predictor\n"
        "p = load_predictor('checkpoints/demo')\n"
        "p.predict('Great phone, the battery lasts two days.')\n"
        "heavy = ('transformers.models.bert.modeling_bert', 'transformers.modeling_utils',"
        " 'torch._dynamo')\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "p.model\n"
        "print('transformers.models.bert.modeling_bert' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = out.stdout.strip().splitlines()[-2:]
    assert before == "[]" and after == "True", out.stdout


def _extra_tensor(d):
    _edit_weights(d, lambda t: t.update({"bert.extra.weight": torch.zeros(3)}))


def _missing_tensor(d):
    _edit_weights(d, lambda t: t.pop("classifier.bias"))


def _wrong_shape(d):
    _edit_weights(d, lambda t: t.update({"bert.pooler.dense.bias": torch.zeros(7)}))


def _integer_tensor(d):
    _edit_weights(d, lambda t: t.update(
        {"bert.pooler.dense.bias": t["bert.pooler.dense.bias"].to(torch.int32)}))


def _second_weights_file(d):
    save_file({"x": torch.zeros(2)}, str(d / "extra.safetensors"))


NOT_PLAIN = {
    "an extra tensor": _extra_tensor,
    "a missing tensor": _missing_tensor,
    "a tensor of the wrong shape": _wrong_shape,
    "an integer tensor": _integer_tensor,
    "a second weights file": _second_weights_file,
    "another architecture": lambda d: _edit_config(d, architectures=["BertForMaskedLM"]),
    "relative positions": lambda d: _edit_config(d, position_embedding_type="relative_key"),
    "an activation it does not know": lambda d: _edit_config(d, hidden_act="swish_beta"),
    "a decoder": lambda d: _edit_config(d, is_decoder=True),
    "heads that do not divide the width": lambda d: _edit_config(d, num_attention_heads=5),
    "a string where a number goes": lambda d: _edit_config(d, hidden_size="32"),
    "removed heads": lambda d: _edit_config(d, pruned_heads={"0": [1]}),
}


@pytest.mark.parametrize("name", NOT_PLAIN)
def test_what_it_does_not_read_exactly_goes_to_transformers_as_before(
        name, tiny_model_dir, tmp_path, monkeypatch):
    d = _copy(tiny_model_dir, tmp_path / "ckpt")
    NOT_PLAIN[name](d)
    assert plain_bert.read(d, FastBertForward.supports_config) is None
    outcomes = []
    for env in ("1", "0"):   # the app's load, and transformers' load alone
        monkeypatch.setenv(PLAIN_LOAD_ENV, env)
        try:
            p = Predictor.from_checkpoint(d, CPU)
            outcomes.append(("loaded", p._model is not None, p.predict(TEXT).probs.tolist()))
        except (CheckpointError, ValueError, RuntimeError, KeyError) as e:
            outcomes.append((type(e).__name__, str(e)))
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][0] != "loaded" or outcomes[0][1], "loaded by the plain path"


def test_the_shipped_demo_and_a_run_folder_are_read_plain(tiny_model_dir, tmp_path):
    assert plain_bert.read(ROOT / "checkpoints" / "demo") is not None
    run = tmp_path / "run"
    _copy(tiny_model_dir, run / "best")
    p = Predictor.from_checkpoint(run, CPU)        # a run folder means its best/
    assert p._model is None and p.fast is not None


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70)
                    | st.floats(allow_nan=True) | st.text(max_size=12),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=3), max_leaves=8)
FIELDS = ["model_type", "architectures", "id2label", "hidden_size", "num_hidden_layers",
          "num_attention_heads", "intermediate_size", "vocab_size", "max_position_embeddings",
          "type_vocab_size", "hidden_act", "layer_norm_eps", "position_embedding_type",
          "is_decoder", "chunk_size_feed_forward", "pruned_heads"]


def _fuzz_config(tmp_path_factory, tiny_model_dir, edits):
    d = tmp_path_factory.mktemp("fuzzcfg")
    for f in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / f, d / f)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(edits)
    (d / "config.json").write_text(json.dumps(cfg))
    got = plain_bert.read(d)           # never raises, whatever config.json says
    if got is not None:                # and reads nothing it cannot read exactly
        assert set(got.tensors) == set(plain_bert.expected_shapes(got.config))
        for k, shape in plain_bert.expected_shapes(got.config).items():
            assert tuple(got.tensors[k].shape) == shape and got.tensors[k].dtype == torch.float32
    shutil.rmtree(d)


test_any_config_json_is_read_or_refused_never_an_error, \
    test_any_config_json_is_read_or_refused_never_an_error_fuzz = twins(
        _fuzz_config, edits=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4))
