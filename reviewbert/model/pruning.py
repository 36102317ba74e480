"""Heads physically removed from a BERT classifier: smaller Q, K, V and output matrices.

A pruned checkpoint is an ordinary ReviewBERT checkpoint folder whose ``config.json``
also holds ``"pruned_heads": {"<layer>": [head, ...]}`` (0-based, the heads *removed*
from each layer, numbered as in the unpruned model), exactly the key and format
transformers 4.x wrote and read. Its weights are smaller: in layer ``l`` with ``h_l``
heads left (head size ``d = hidden_size / num_attention_heads``, unchanged),

- ``attention.self.query/key/value.weight`` are ``[h_l·d, hidden]`` (biases ``[h_l·d]``),
- ``attention.output.dense.weight`` is ``[hidden, h_l·d]``,

the kept heads staying in their original order. A layer may keep no head at all: its
attention block then adds only the output projection's bias (and the residual).

Who reads it. transformers 5.23 cannot: ``pruned_heads``, ``prune_heads()`` and
``head_mask`` are gone from it (not one line of its source names them), and
``BertSelfAttention`` sizes Q, K and V as ``num_attention_heads × (hidden_size /
num_attention_heads)`` in every layer, one number for all layers, so
``AutoModelForSequenceClassification.from_pretrained`` (and ``pipeline()``) stop on
the first smaller matrix (a size-mismatch error, ``tests/unit/test_pruning.py``).
transformers 4.x's ``PreTrainedModel`` pruned a model built from such a config
before loading its weights, which is why the key keeps 4.x's format.
:func:`reviewbert.model.checkpoint.load_checkpoint` reads it with :func:`load_pruned`:
the model built from ``config.json`` at full size, its layers cut to the recorded
heads (:func:`prune_model`), then the safetensors loaded strictly. Everything
downstream takes the per-layer head counts from the modules themselves
(:func:`alive_heads`): ``FastBertForward``, ``GradBertForward``, value norms, the
batched evaluation, the Heads page.
"""
from __future__ import annotations

import copy
import warnings
from pathlib import Path

import torch

PRUNED_KEY = "pruned_heads"


# ------------------------------------------------------------------ reading
def head_size(config) -> int:
    return int(config.hidden_size // config.num_attention_heads)


def removed_heads(config) -> dict[int, list[int]]:
    """{layer: sorted heads removed} from ``config.pruned_heads`` (string or int keys)."""
    raw = getattr(config, PRUNED_KEY, None) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"config.{PRUNED_KEY} must be an object {{layer: [heads]}}")
    out: dict[int, list[int]] = {}
    L, H = int(config.num_hidden_layers), int(config.num_attention_heads)
    for key, heads in raw.items():
        layer = int(key)
        if not 0 <= layer < L or not isinstance(heads, list | tuple):
            raise ValueError(f"config.{PRUNED_KEY}: bad entry {key!r}: {heads!r}")
        hs = sorted({int(h) for h in heads})
        if any(not 0 <= h < H for h in hs):
            raise ValueError(f"config.{PRUNED_KEY}: layer {key} names a head outside 0..{H - 1}")
        if hs:
            out[layer] = hs
    return out


def is_pruned(model_or_config) -> bool:
    config = getattr(model_or_config, "config", model_or_config)
    return bool(removed_heads(config))


def alive_heads(model_or_config) -> list[list[int]]:
    """The heads each layer still has, as original (0-based) head numbers."""
    config = getattr(model_or_config, "config", model_or_config)
    gone = removed_heads(config)
    H = int(config.num_attention_heads)
    return [[h for h in range(H) if h not in gone.get(layer, ())]
            for layer in range(int(config.num_hidden_layers))]


def alive_mask(model_or_config):
    """bool numpy [layers, heads]: True where the head is still there."""
    import numpy as np
    config = getattr(model_or_config, "config", model_or_config)
    out = np.zeros((int(config.num_hidden_layers), int(config.num_attention_heads)), dtype=bool)
    for layer, heads in enumerate(alive_heads(config)):
        out[layer, heads] = True
    return out


def full_attentions(per_layer: list, model_or_config) -> torch.Tensor:
    """Per-layer attentions [h_l, T, T] → [L, H, T, T], a removed head's matrix all zeros."""
    config = getattr(model_or_config, "config", model_or_config)
    alive = alive_heads(config)
    if all(len(a) == int(config.num_attention_heads) for a in alive):
        return torch.stack(list(per_layer))
    T = per_layer[0].shape[-1]
    ref = per_layer[0]
    out = torch.zeros((len(alive), int(config.num_attention_heads), T, T), dtype=ref.dtype,
                      device=ref.device)
    for layer, (a, heads) in enumerate(zip(per_layer, alive)):
        if heads:
            out[layer, heads] = a
    return out


# ------------------------------------------------------------------ cutting
def _linear(n_in: int, n_out: int, like: torch.nn.Linear) -> torch.nn.Linear:
    with warnings.catch_warnings():     # a layer left with no head: zero-element weights
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")
        return torch.nn.Linear(n_in, n_out, bias=like.bias is not None,
                               device=like.weight.device, dtype=like.weight.dtype)


def _rows(linear: torch.nn.Linear, index: torch.Tensor) -> torch.nn.Linear:
    out = _linear(linear.in_features, len(index), linear)
    with torch.no_grad():
        out.weight.copy_(linear.weight[index])
        if linear.bias is not None:
            out.bias.copy_(linear.bias[index])
    return out


def _columns(linear: torch.nn.Linear, index: torch.Tensor) -> torch.nn.Linear:
    out = _linear(len(index), linear.out_features, linear)
    with torch.no_grad():
        out.weight.copy_(linear.weight[:, index])
        if linear.bias is not None:
            out.bias.copy_(linear.bias)
    return out


def _cut_layer(layer, now: list[int], keep: list[int], d: int) -> None:
    """Keep heads ``keep`` (original numbers) of a layer that has heads ``now``."""
    pos = [now.index(h) for h in keep]
    index = torch.tensor([p * d + i for p in pos for i in range(d)], dtype=torch.long)
    a = layer.attention.self
    a.query, a.key, a.value = _rows(a.query, index), _rows(a.key, index), _rows(a.value, index)
    a.num_attention_heads = len(keep)
    a.all_head_size = len(keep) * d
    o = layer.attention.output
    o.dense = _columns(o.dense, index)


def prune_model(model, remove: dict[int, list[int]]):
    """Remove heads ``{layer: [original head numbers]}`` from ``model`` in place (its
    config records them) and return it. Heads already gone are ignored."""
    config = model.config
    d = head_size(config)
    now = alive_heads(config)
    gone = removed_heads(config)
    for layer_idx, heads in sorted(remove.items()):
        drop = set(int(h) for h in heads) & set(now[layer_idx])
        if not drop:
            continue
        keep = [h for h in now[layer_idx] if h not in drop]
        _cut_layer(model.base_model.encoder.layer[layer_idx], now[layer_idx], keep, d)
        gone[layer_idx] = sorted(set(gone.get(layer_idx, [])) | drop)
    setattr(config, PRUNED_KEY, {str(k): v for k, v in sorted(gone.items()) if v})
    return model


def pruned_copy(model, remove: dict[int, list[int]]):
    """A pruned deep copy; ``model`` itself is left as it is."""
    return prune_model(copy.deepcopy(model), remove)


def heads_to_remove(order: list[tuple[int, int]], k: int) -> dict[int, list[int]]:
    """The first ``k`` (layer, head) pairs of ``order`` as {layer: [heads]}."""
    out: dict[int, list[int]] = {}
    for layer, head in order[:k]:
        out.setdefault(int(layer), []).append(int(head))
    return out


# ------------------------------------------------------------------ loading
def load_pruned(ckpt: Path, attn_implementation: str = "sdpa", dtype=None):
    """The model of a pruned checkpoint folder: built from config.json, cut to its
    recorded heads, then every safetensors tensor loaded strictly (a missing, extra or
    wrongly shaped tensor is a ValueError naming it)."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification
    config = AutoConfig.from_pretrained(ckpt)
    config._attn_implementation = attn_implementation
    remove = removed_heads(config)
    setattr(config, PRUNED_KEY, {})        # built at full size first, then cut as recorded
    model = AutoModelForSequenceClassification.from_config(config)
    prune_model(model, remove)
    state: dict[str, torch.Tensor] = {}
    for f in sorted(Path(ckpt).glob("*.safetensors")):
        state.update(load_file(str(f)))
    _load_strict(model, state)
    if dtype is not None:
        model.to(dtype)
    return model.eval()


def _load_strict(model, state: dict) -> None:
    own = model.state_dict()
    missing = sorted(k for k in own if k not in state)
    extra = sorted(k for k in state if k not in own)
    wrong = sorted(k for k in state if k in own and tuple(state[k].shape) != tuple(own[k].shape))
    for names, problem in ((missing, "missing from the weights"), (extra, "not in the model"),
                           (wrong, "of the wrong shape for its pruned_heads")):
        if names:
            raise ValueError(f"{len(names)} tensor(s) {problem} ({', '.join(names[:3])}"
                             f"{', ...' if len(names) > 3 else ''})")
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v.to(own[k].dtype))

