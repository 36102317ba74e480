"""A BERT classifier's weights read straight from its safetensors, without transformers'
modeling code: what the Predict page's first load needs, and all of it.

The Predict page predicts with :class:`reviewbert.model.inference.FastBertForward`, which
needs only the checkpoint's tensors. Building ``BertForSequenceClassification`` first
made the first start-up wait and grew the server's memory, nearly all of it import:
``from transformers import BertForSequenceClassification`` pulls in 1,646 modules
(``torch._dynamo``, ``torch.distributed.tensor``, sympy, scipy.optimize through its loss
functions), counted in a fresh process after ``import torch``. (bench/first_second.py
times the start-up, bench/memory.py the server's memory.)
So the app reads a plain BERT here, and the Predictor builds the transformers model
only when a view needs one (:attr:`reviewbert.model.inference.Predictor.model`).

:func:`read` accepts only what it can read exactly: the classifier that ReviewBERT
trains (model_type bert, absolute positions, one ``model.safetensors``, every tensor
present with the shape config.json gives, no removed heads). Anything else gives None,
never an error, and the checkpoint is loaded by transformers as before, with its checks
and messages (:func:`reviewbert.model.checkpoint.load_checkpoint`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch

WEIGHTS = "model.safetensors"
ARCHITECTURE = "BertForSequenceClassification"
# config.json's defaults where a field is absent (transformers' BertConfig's own)
DEFAULTS = dict(position_embedding_type="absolute", layer_norm_eps=1e-12, is_decoder=False,
                chunk_size_feed_forward=0, type_vocab_size=2, hidden_act="gelu",
                max_position_embeddings=512)
NUMBERS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
           "intermediate_size", "max_position_embeddings", "type_vocab_size")
EXTRA_KEYS = ("bert.embeddings.position_ids", "bert.embeddings.token_type_ids")
"""Buffers some older checkpoints saved alongside the weights: read past, never used."""


@dataclass
class PlainBert:
    """config.json as a namespace, and every tensor by its state-dict name (fp32, CPU)."""
    config: SimpleNamespace
    tensors: dict[str, torch.Tensor]


def expected_shapes(cfg: SimpleNamespace) -> dict[str, tuple[int, ...]]:
    """Every tensor of a ``BertForSequenceClassification`` and its shape, from its config."""
    D, F, C = cfg.hidden_size, cfg.intermediate_size, cfg.num_labels
    e = "bert.embeddings."
    shapes = {e + "word_embeddings.weight": (cfg.vocab_size, D),
              e + "position_embeddings.weight": (cfg.max_position_embeddings, D),
              e + "token_type_embeddings.weight": (cfg.type_vocab_size, D),
              e + "LayerNorm.weight": (D,), e + "LayerNorm.bias": (D,),
              "bert.pooler.dense.weight": (D, D), "bert.pooler.dense.bias": (D,),
              "classifier.weight": (C, D), "classifier.bias": (C,)}
    for i in range(cfg.num_hidden_layers):
        p = f"bert.encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            shapes[p + n + ".weight"], shapes[p + n + ".bias"] = (D, D), (D,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (F, D), (F,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (D, F), (D,)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + n + ".weight"], shapes[p + n + ".bias"] = (D,), (D,)
    return shapes


def plain_config(raw: dict) -> SimpleNamespace | None:
    """config.json as a namespace, with BertConfig's defaults, or None where it is not a
    plain BERT classifier this module reads exactly."""
    from reviewbert.model.pruning import PRUNED_KEY
    arch = raw.get("architectures")
    if raw.get("model_type") != "bert" or raw.get(PRUNED_KEY) \
            or arch not in (None, [], [ARCHITECTURE]):
        return None
    cfg = SimpleNamespace(**{**DEFAULTS, **raw})
    if cfg.position_embedding_type != "absolute" or cfg.is_decoder is not False:
        return None     # other tensors, or the same ones meaning something else
    id2label = raw.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    cfg.num_labels = len(id2label)
    if not all(type(getattr(cfg, n, None)) is int and getattr(cfg, n) > 0 for n in NUMBERS):
        return None
    if cfg.hidden_size % cfg.num_attention_heads \
            or type(cfg.layer_norm_eps) not in (int, float) or not cfg.layer_norm_eps > 0:
        return None
    return cfg


def read(ckpt: str | Path, accepts: Callable[[SimpleNamespace], bool] | None = None
         ) -> PlainBert | None:
    """The checkpoint folder's classifier as a :class:`PlainBert`, or None where it is not
    one that this module reads exactly (see the module's docstring), or one whose config
    ``accepts`` refuses (the Predictor passes ``FastBertForward.supports_config``: what its
    fast pass computes exactly). Never raises for a bad folder: transformers' load then
    says what is wrong with it."""
    ckpt = Path(ckpt)
    try:
        raw = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
        cfg = plain_config(raw) if isinstance(raw, dict) else None
        if cfg is None or (accepts is not None and not accepts(cfg)):
            return None
        if sorted(p.name for p in ckpt.glob("*.safetensors")) != [WEIGHTS]:
            return None     # sharded, or more than one model
        return _read_tensors(ckpt / WEIGHTS, cfg)
    except (OSError, ValueError, TypeError, RecursionError, ArithmeticError):
        return None


def _read_tensors(path: Path, cfg: SimpleNamespace) -> PlainBert | None:
    import torch
    from safetensors import SafetensorError, safe_open
    want = expected_shapes(cfg)
    tensors = {}
    try:
        with safe_open(str(path), framework="pt") as st:
            keys = set(st.keys())
            if not set(want) <= keys or keys - set(want) - set(EXTRA_KEYS):
                return None
            for name, shape in want.items():
                sl = st.get_slice(name)
                if tuple(sl.get_shape()) != shape or not sl.get_dtype().startswith(("F", "BF")):
                    return None
            for name in want:
                tensors[name] = st.get_tensor(name).to(torch.float32)
    except (SafetensorError, OSError, RuntimeError):
        return None
    return PlainBert(cfg, tensors)
