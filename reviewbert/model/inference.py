"""One forward pass: a review in, one plain :class:`Prediction` out.

The Prediction holds everything the attention views draw: wordpieces, the word
each piece belongs to, class probabilities and every attention matrix as
``float32 [layer, head, query, key]``. Views and figure builders only read it.

Speed. The app runs this on a CPU for every click, so BERT-family checkpoints go
through :class:`FastBertForward`: the same fp32 arithmetic as Hugging Face's eager
BERT (so the same class and the same attention weights, up to float rounding;
``tests/unit/test_inference.py`` checks it), minus the work nobody looks at:

- one pass gives both the prediction and the attentions (no second pass);
- Q, K and V come from one fused matmul, the 1/sqrt(d) scale is folded into Q;
- the classifier only reads [CLS] from the last layer, so the last layer computes
  its full attention matrix (for the views) but V-mixing, the output projection
  and the feed-forward block only for the [CLS] row;
- no padding, no mask (one review at a time), no dropout, no autograd.

Anything that is not a plain BERT falls back to the model's own eager forward
with ``output_attentions=True``.
"""
from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from reviewbert.model.buffers import BufferPool
from reviewbert.model.checkpoint import load_checkpoint, load_plain, model_from_plain
from reviewbert.model.device import pick_device
from reviewbert.model.labels import LabelScheme, scheme_from_id2label
from reviewbert.model.plain_tokenizer import PlainTokenizer
from reviewbert.model.pruning import alive_heads, full_attentions
from reviewbert.model.row_memo import RowMemo
from reviewbert.progress import resumed

MAX_CHARS = 100_000
"""Longer input is cut before tokenising: nobody pastes a book to see attention."""


# ----------------------------------------------------------------------- result
@dataclass
class Prediction:
    """What one forward pass tells about one review (LIT-style plain outputs)."""
    text: str                       # the text the model saw (after MAX_CHARS cut)
    tokens: list[str]               # wordpieces, incl. [CLS] and [SEP]
    word_ids: list[int | None]      # word index of each token; None for specials
    words: list[str]                # words as they appear in ``text``
    word_spans: list[tuple[int, int]]  # (start, end) character span of each word
    probs: np.ndarray               # [num_labels] float
    label_id: int
    label: str
    stars: str                      # e.g. "★★★★☆"
    attentions: np.ndarray          # float32 [layer, head, query, key]
    truncated: bool                 # tokens were cut to max_length
    n_tokens: int                   # tokens fed to the model, incl. specials
    n_tokens_original: int          # tokens the full text would need, incl. specials
    max_length: int
    chars_cut: bool = False         # text was longer than MAX_CHARS and was cut
    scheme: LabelScheme | None = field(default=None, repr=False)
    # float32 [layer, token, hidden]: each layer's value vectors x·W_V + b_V (heads side
    # by side), kept from the same pass for attention × value norm; None if not kept
    values: np.ndarray | None = field(default=None, repr=False)
    # float32 [hidden]: the last layer's [CLS] hidden state from the same pass (what the
    # classifier's pooler reads): the Predict page's nearest reviews compare it with a
    # split's stored vectors, with no second pass
    cls_vector: np.ndarray | None = field(default=None, repr=False)

    @property
    def num_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def special_mask(self) -> np.ndarray:
        """True for [CLS]/[SEP] (tokens that belong to no word)."""
        return np.array([w is None for w in self.word_ids], dtype=bool)

    def weights_json(self) -> dict:
        """The attentions with their tokens, for a JSON download."""
        return {"text": self.text, "tokens": self.tokens, "word_ids": self.word_ids,
                "words": self.words, "label": self.label,
                "probs": [float(p) for p in self.probs],
                "shape": ["layer", "head", "query", "key"],
                "attentions": np.round(self.attentions.astype(float), 6).tolist()}


def softmax(logits) -> np.ndarray:
    """Probabilities along the last axis (same dtype as the logits)."""
    z = np.asarray(logits)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def stars_display(scheme: LabelScheme, class_id: int) -> str:
    """★★★★☆ for "4 stars"; for 3 labels the stars the class covers ("★☆☆☆☆–★★☆☆☆")."""
    stars = scheme.stars_of(class_id)
    def bar(n: int) -> str:
        return "★" * n + "☆" * (5 - n)
    if len(stars) == 1:
        return bar(stars[0])
    return f"{bar(stars[0])}–{bar(stars[-1])}"


# ---------------------------------------------------------------- tokenisation
@dataclass
class Encoded:
    ids: list[int]
    tokens: list[str]
    word_ids: list[int | None]
    words: list[str]
    word_spans: list[tuple[int, int]]
    truncated: bool
    n_original: int
    chars_cut: bool
    text: str


def encode(tokenizer, text: str, max_length: int) -> Encoded:
    """Wordpieces with their words, cut to ``max_length`` (specials included)."""
    chars_cut = len(text) > MAX_CHARS
    if chars_cut:
        text = text[:MAX_CHARS]
    if isinstance(tokenizer, PlainTokenizer):     # the same four, without transformers
        ids, offsets, wids, tokens = tokenizer.encode_one(text)
    else:
        enc = tokenizer(text, add_special_tokens=True, truncation=False,
                        return_offsets_mapping=True, verbose=False)
        ids, offsets, wids = list(enc["input_ids"]), list(enc["offset_mapping"]), list(enc.word_ids())
        tokens = None
    n_original = len(ids)
    truncated = n_original > max_length
    if truncated:
        keep = max_length - 1  # the last slot goes back to [SEP]
        ids = ids[:keep] + ids[-1:]
        offsets = offsets[:keep] + offsets[-1:]
        wids = wids[:keep] + wids[-1:]
        if tokens is not None:
            tokens = tokens[:keep] + tokens[-1:]
    # renumber words 0..n-1 and take each word's text from its pieces' char offsets
    words: list[str] = []
    spans: list[tuple[int, int]] = []
    remap: dict[int, int] = {}
    word_ids: list[int | None] = []
    for w, (s, e) in zip(wids, offsets):
        if w is None:
            word_ids.append(None)
            continue
        if w not in remap:
            remap[w] = len(words)
            words.append("")
            spans.append((s, e))
        i = remap[w]
        spans[i] = (min(spans[i][0], s), max(spans[i][1], e))
        word_ids.append(i)
    words = [text[s:e] for s, e in spans]
    if tokens is None:
        tokens = tokenizer.convert_ids_to_tokens(ids)
    return Encoded(ids, tokens, word_ids, words, spans, truncated, n_original, chars_cut, text)


def model_max_length(model, tokenizer, meta: dict | None = None) -> int:
    """max_length the checkpoint was trained with, capped by the position table.
    ``model``: a model, or a config (a :class:`reviewbert.model.plain_bert.PlainBert`'s)."""
    cfg = getattr(model, "config", model)
    cap = int(getattr(cfg, "max_position_embeddings", 512) or 512)
    hp = (meta or {}).get("hyperparameters") or {}
    want = hp.get("max_length") or hp.get("max_seq_length")
    if not want:
        tml = getattr(tokenizer, "model_max_length", None)
        want = tml if isinstance(tml, int) and tml < 100_000 else 256
    return max(8, min(int(want), cap))


# ------------------------------------------------------------------ fast path
ROW_BUCKET = 16      # FastBertForward pads its oneDNN matmuls' rows to a multiple of this


class FastBertForward:
    """Plain-BERT classifier forward for one sequence, fp32, exact eager arithmetic.

    Weights are views of (or fused copies from) the Hugging Face module, made once.
    """

    ACTS = {"gelu": lambda x: F.gelu(x), "relu": F.relu,
            "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
            "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}

    @classmethod
    def supports(cls, model) -> bool:
        return (type(model).__name__ == "BertForSequenceClassification"
                and getattr(model.bert, "pooler", None) is not None
                and cls.supports_config(model.config))

    @classmethod
    def supports_config(cls, cfg) -> bool:
        """The same test on a config alone (a ``PretrainedConfig`` or the namespace that
        :mod:`reviewbert.model.plain_bert` reads from config.json)."""
        return (getattr(cfg, "model_type", None) == "bert"
                and getattr(cfg, "position_embedding_type", "absolute") == "absolute"
                and not getattr(cfg, "is_decoder", False)
                and isinstance(getattr(cfg, "hidden_act", None), str)
                and cfg.hidden_act in cls.ACTS
                and getattr(cfg, "chunk_size_feed_forward", 0) in (0, None))

    def __init__(self, model):
        """From a loaded ``BertForSequenceClassification`` (its own tensors)."""
        self._build(model.config, model.state_dict(), alive_heads(model))

    @classmethod
    def from_plain(cls, plain) -> "FastBertForward":
        """From a :class:`reviewbert.model.plain_bert.PlainBert`: the checkpoint's tensors read
        without transformers' modeling code (every head present)."""
        self = cls.__new__(cls)
        cfg = plain.config
        self._build(cfg, plain.tensors,
                    [list(range(cfg.num_attention_heads))] * cfg.num_hidden_layers)
        return self

    @torch.inference_mode()
    def _build(self, cfg, sd, alive_per_layer) -> None:
        """``sd``: the classifier's tensors by their state-dict names (``bert.…``,
        ``classifier.…``); ``alive_per_layer``: each layer's heads left."""
        self.H = cfg.num_attention_heads
        self.D = cfg.hidden_size
        self.dh = self.D // self.H
        self.act = self.ACTS[cfg.hidden_act]
        eps = cfg.layer_norm_eps
        e = "bert.embeddings."
        self.word = sd[e + "word_embeddings.weight"]
        self.pos = sd[e + "position_embeddings.weight"]
        self.type0 = sd[e + "token_type_embeddings.weight"][0]
        self.ln0 = (sd[e + "LayerNorm.weight"], sd[e + "LayerNorm.bias"], eps)
        scale = 1.0 / math.sqrt(self.dh)
        self.layers = []
        for li, alive in enumerate(alive_per_layer):
            t = lambda name: sd[f"bert.encoder.layer.{li}.{name}"]  # noqa: E731
            q, k, v = (f"attention.self.{n}" for n in ("query", "key", "value"))
            w = len(alive) * self.dh           # this layer's Q/K/V width: fewer heads once pruned
            wqkv = torch.cat([t(q + ".weight") * scale, t(k + ".weight"), t(v + ".weight")]).contiguous()
            bqkv = torch.cat([t(q + ".bias") * scale, t(k + ".bias"), t(v + ".bias")]).contiguous()
            self.layers.append(dict(
                h=len(alive), alive=None if len(alive) == self.H else alive,
                alive_index=torch.tensor(alive, dtype=torch.long),
                gone=[h for h in range(self.H) if h not in alive],
                wqkv=wqkv, bqkv=bqkv, wqk=wqkv[: 2 * w], bqk=bqkv[: 2 * w],
                wv=wqkv[2 * w:], bv=bqkv[2 * w:],
                wo=t("attention.output.dense.weight"), bo=t("attention.output.dense.bias"),
                ln1=(t("attention.output.LayerNorm.weight"), t("attention.output.LayerNorm.bias"), eps),
                wi=t("intermediate.dense.weight"), bi=t("intermediate.dense.bias"),
                wo2=t("output.dense.weight"), bo2=t("output.dense.bias"),
                ln2=(t("output.LayerNorm.weight"), t("output.LayerNorm.bias"), eps)))
        self.pool = (sd["bert.pooler.dense.weight"], sd["bert.pooler.dense.bias"])
        self.cls = (sd["classifier.weight"], sd["classifier.bias"])
        self.exact_gelu = cfg.hidden_act == "gelu"
        on_cpu = self.word.device.type == "cpu" and self.word.dtype == torch.float32
        # the attention arrays' memory, reused once a prediction is dropped (model/buffers.py)
        self.buffers = BufferPool(spare=1) if on_cpu else None
        self.packed = on_cpu and _mkldnn_ok()
        if self.packed:
            # oneDNN with weights reordered once: same fp32 math, faster GEMMs on CPU
            # (bench/predict_latency.py), and the exact (erf) GELU fused into the first
            # feed-forward matmul.
            for p in self.layers:
                for k in ("wqkv", "wqk", "wv", "wo", "wi", "wo2"):
                    if p["h"] or k in ("wi", "wo2"):     # a layer with no head left: no Q/K/V/O
                        p[k] = torch.ops.mkldnn._reorder_linear_weight(p[k].contiguous(), None)

    def _linear(self, x, w, b, gelu: bool = False):
        if self.packed:
            # oneDNN builds and caches a primitive for every row count it meets, and
            # keeps it for good: a server meeting every length would grow with each one.
            # Rows padded to a multiple of ROW_BUCKET: at most max_length / 16 shapes,
            # and the latency is the same, warm or on a new length (bench/memory.py
            # measures the server's memory, bench/predict_latency.py the latency).
            n = x.shape[0]
            m = n if n == 1 else -(-n // ROW_BUCKET) * ROW_BUCKET
            if m != n:
                x = F.pad(x, (0, 0, 0, m - n))
            if gelu:
                y = torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu", [], "none")
            else:
                y = torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
            return y[:n] if m != n else y
        y = F.linear(x, w, b)
        return self.act(y) if gelu else y

    def row_shapes(self, max_length: int) -> list[int]:
        """The padded row counts a review of up to ``max_length`` tokens can give: one
        oneDNN primitive set each (see :meth:`_linear`)."""
        top = -(-max(1, max_length) // ROW_BUCKET) * ROW_BUCKET
        return list(range(ROW_BUCKET, top + 1, ROW_BUCKET)) if self.packed else []

    def warm_up(self, max_length: int) -> None:
        """One pass per padded row count, so that oneDNN builds every primitive now: a
        server then reaches its steady memory at load (they are built over the first dozens
        of predictions otherwise), and no prediction pays for a new one."""
        for rows in self.row_shapes(max_length):
            self(torch.zeros(rows, dtype=torch.long, device=self.word.device))
        if self.buffers is not None:    # the first long review's attention finds its pages
            self.buffers.prefault((len(self.layers), self.H, max_length, max_length))

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, values: bool = False, cls_state: bool = False):
        """``ids`` [T] → (logits [C], attentions [L, H, T, T]) as fp32 tensors; with
        ``values`` also each layer's value vectors [L, T, D] (heads side by side); with
        ``cls_state`` also the last layer's [CLS] hidden state [D] (what the pooler reads).
        A pruned checkpoint's removed heads are all-zero matrices (and zero values)."""
        T, D = ids.shape[0], self.D
        x = self.word[ids] + self.type0 + self.pos[:T]
        x = F.layer_norm(x, (D,), *self.ln0[:2], self.ln0[2])
        L = len(self.layers)
        if self.buffers is not None:
            att = torch.from_numpy(self.buffers.take((L, self.H, T, T)))
        else:
            att = torch.empty((L, self.H, T, T), dtype=x.dtype, device=x.device)
        vals = torch.empty((L, T, D), dtype=x.dtype, device=x.device) if values else None
        for li, p in enumerate(self.layers):
            last = li == L - 1
            ctx = self._attend(x, p, att[li], None if vals is None else vals[li], last)
            if last:
                x = x[:1]       # only [CLS] goes on to the classifier
            if ctx is None:     # no head left in this layer: the projection's bias alone
                proj = p["bo"].expand(x.shape[0], D)
            else:
                proj = self._linear(ctx, p["wo"], p["bo"])
            h = F.layer_norm(proj + x, (D,), *p["ln1"][:2], p["ln1"][2])
            if self.packed and self.exact_gelu:
                f = self._linear(h, p["wi"], p["bi"], gelu=True)
            else:
                f = self.act(self._linear(h, p["wi"], p["bi"]))
            x = F.layer_norm(self._linear(f, p["wo2"], p["bo2"]) + h, (D,), *p["ln2"][:2], p["ln2"][2])
        pooled = torch.tanh(F.linear(x[0], *self.pool))
        logits = F.linear(pooled, *self.cls)
        return (logits, att) + ((vals,) if values else ()) + ((x[0],) if cls_state else ())

    def _attend(self, x, p, att, vals, last: bool):
        """One layer's attention: fills ``att`` [H, T, T] (and ``vals`` [T, D]) and returns
        the heads' context side by side, [T, h·d] (the last layer: [1, h·d], the [CLS] row
        only), or None when the layer has no head left."""
        T, h, dh = x.shape[0], p["h"], self.dh
        if h == 0:
            att.zero_()
            if vals is not None:
                vals.zero_()
            return None
        if not last:
            qkv = self._linear(x, p["wqkv"], p["bqkv"]).view(T, 3, h, dh).permute(1, 2, 0, 3)
            q, k, v = qkv[0], qkv[1], qkv[2]
        else:
            # Only [CLS] goes on to the classifier: V for all keys, but the rest for one row.
            qk = self._linear(x, p["wqk"], p["bqk"]).view(T, 2, h, dh).permute(1, 2, 0, 3)
            q, k = qk[0], qk[1]
            v = self._linear(x, p["wv"], p["bv"]).view(T, h, dh).transpose(0, 1)
        if p["alive"] is None:
            if vals is not None:
                vals.copy_(v.transpose(0, 1).reshape(T, h * dh))
            # the scores straight into the attention array, softmax in place: no 3 MB
            # temporary a layer at 256 tokens (the same numbers: the kernel reads a row
            # before it writes it)
            a = torch.softmax(torch.bmm(q, k.transpose(1, 2), out=att), dim=-1, out=att)
        else:   # a pruned layer: its heads into their own slots, the removed ones zeros
            a = torch.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
            for h_gone in p["gone"]:
                att[h_gone].zero_()
            att.index_copy_(0, p["alive_index"], a)
            if vals is not None:
                vals.zero_()
                vals.view(T, self.H, dh)[:, p["alive"]] = v.transpose(0, 1)
        ctx = torch.bmm(a[:, :1, :], v) if last else torch.bmm(a, v)    # [h, 1 or T, dh]
        return ctx.transpose(0, 1).reshape(ctx.shape[1], h * dh)


class GradBertForward:
    """The same plain-BERT classifier, differentiable and batched, for the gradient methods.

    ``x`` [B, T, D] word embeddings (one review's interpolation steps, all of one
    length, or rows padded at the end and a ``mask``) → logits [B, C], with autograd.
    Same arithmetic as the eager model (``tests/unit/test_explain.py`` checks logits and IG attributions
    against it), three things faster on a CPU, where Integrated Gradients spends
    all its time in these passes:

    - attention through ``F.scaled_dot_product_attention`` (fused forward and
      backward; the eager model materialises and differentiates [B, H, T, T]
      softmax tensors that no gradient method reads);
    - the last layer computes its query, residual and feed-forward for [CLS]
      only, the one row the pooler reads (keys and values still for every token);
    - Q, K and V in one matmul.

    Weights are the model's own tensors, detached (a read-only view, no copy but
    the fused QKV), so nothing here touches the shared model: no hook, no
    ``requires_grad``, no ``.grad``.
    """

    supports = FastBertForward.supports

    def __init__(self, model):
        cfg, bert = model.config, model.bert
        emb = bert.embeddings
        self.H, self.D = cfg.num_attention_heads, cfg.hidden_size
        self.dh = self.D // self.H
        self.act = FastBertForward.ACTS[cfg.hidden_act]
        d = lambda t: t.detach()  # noqa: E731
        self.pos, self.type0 = d(emb.position_embeddings.weight), d(emb.token_type_embeddings.weight[0])
        self.ln0 = (d(emb.LayerNorm.weight), d(emb.LayerNorm.bias), emb.LayerNorm.eps)
        self.layers = []
        for layer, alive in zip(bert.encoder.layer, alive_heads(model)):
            a, o = layer.attention.self, layer.attention.output
            self.layers.append(dict(
                h=len(alive),                  # heads left (fewer in a pruned checkpoint)
                wqkv=d(torch.cat([a.query.weight, a.key.weight, a.value.weight])),
                bqkv=d(torch.cat([a.query.bias, a.key.bias, a.value.bias])),
                wo=d(o.dense.weight), bo=d(o.dense.bias),
                ln1=(d(o.LayerNorm.weight), d(o.LayerNorm.bias), o.LayerNorm.eps),
                wi=d(layer.intermediate.dense.weight), bi=d(layer.intermediate.dense.bias),
                wo2=d(layer.output.dense.weight), bo2=d(layer.output.dense.bias),
                ln2=(d(layer.output.LayerNorm.weight), d(layer.output.LayerNorm.bias),
                     layer.output.LayerNorm.eps)))
        self.pool = (d(bert.pooler.dense.weight), d(bert.pooler.dense.bias))
        self.cls = (d(model.classifier.weight), d(model.classifier.bias))

    def __call__(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``mask`` [B, T] bool (True: a real token) for rows padded at the end: padded
        keys take no attention, so each row's logits are those of the row alone."""
        T = x.shape[1]
        D = self.D
        keys = None if mask is None else mask[:, None, None, :]
        x = F.layer_norm(x + self.type0 + self.pos[:T], (D,), *self.ln0[:2], self.ln0[2])
        for li, p in enumerate(self.layers):
            last = li == len(self.layers) - 1
            if p["h"] == 0:     # a pruned layer with no head left: the projection's bias alone
                x = x[:, :1] if last else x
                proj = p["bo"].expand_as(x)
            else:
                proj = F.linear(self._context(x, p, last, keys), p["wo"], p["bo"])
                x = x[:, :1] if last else x     # only [CLS] goes on to the pooler
            h = F.layer_norm(proj + x, (D,), *p["ln1"][:2], p["ln1"][2])
            f = self.act(F.linear(h, p["wi"], p["bi"]))
            x = F.layer_norm(F.linear(f, p["wo2"], p["bo2"]) + h, (D,), *p["ln2"][:2], p["ln2"][2])
        pooled = torch.tanh(F.linear(x[:, 0], *self.pool))
        return F.linear(pooled, *self.cls)

    def _context(self, x: torch.Tensor, p: dict, last: bool,
                 keys: torch.Tensor | None = None) -> torch.Tensor:
        """The heads' outputs side by side, [B, T, h·d] ([B, 1, h·d] in the last layer)."""
        B, h, dh = x.shape[0], p["h"], self.dh
        w = h * dh
        heads = lambda t: t.view(B, -1, h, dh).transpose(1, 2)  # noqa: E731
        if not last:
            q, k, v = F.linear(x, p["wqkv"], p["bqkv"]).split(w, dim=-1)
        else:   # only [CLS] goes on to the pooler
            k, v = F.linear(x, p["wqkv"][w:], p["bqkv"][w:]).split(w, dim=-1)
            q = F.linear(x[:, :1], p["wqkv"][:w], p["bqkv"][:w])
        ctx = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=keys)
        return ctx.transpose(1, 2).reshape(B, q.shape[1], w)


def _mkldnn_ok() -> bool:
    """oneDNN's prepacked linear is a private op: use it only if it exists and agrees."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        g = torch.Generator().manual_seed(0)
        w, b = torch.randn(24, 16, generator=g), torch.randn(24, generator=g)
        x = torch.randn(5, 16, generator=g)
        pw = torch.ops.mkldnn._reorder_linear_weight(w, None)
        y = torch.ops.mkldnn._linear_pointwise(x, pw, b, "none", [], "")
        yg = torch.ops.mkldnn._linear_pointwise(x, pw, b, "gelu", [], "none")
        return bool(torch.allclose(y, F.linear(x, w, b), atol=1e-4)
                    and torch.allclose(yg, F.gelu(F.linear(x, w, b)), atol=1e-4))
    except Exception:  # noqa: BLE001 - any failure means: use plain F.linear
        return False


# ------------------------------------------------------------------- predictor
class Predictor:
    """A loaded checkpoint, ready to turn texts into :class:`Prediction` objects."""

    def __init__(self, model, tokenizer, scheme: LabelScheme | None = None,
                 max_length: int | None = None, meta: dict | None = None, fast: bool = True):
        self._model, self._make_model = model.eval(), None
        self._model_lock = threading.Lock()
        self.tokenizer = tokenizer
        self.config = model.config
        self.scheme = scheme or scheme_from_id2label(model.config.id2label)
        self.max_length = max_length or model_max_length(model, tokenizer, meta)
        self.device = next(model.parameters()).device
        self.fast = FastBertForward(model) if fast and FastBertForward.supports(model) else None
        self._grad_forward = None
        self.checkpoint = None      # the folder it was read from (from_checkpoint): caches go there

    @classmethod
    def from_plain(cls, plain, tokenizer, scheme: LabelScheme, meta: dict | None = None,
                   make_model: Callable[[], object] | None = None) -> "Predictor":
        """A Predictor on a :class:`reviewbert.model.plain_bert.PlainBert` (CPU, fp32): it predicts
        with :class:`FastBertForward` alone; ``make_model()`` builds the transformers model
        the first time :attr:`model` is asked for."""
        self = cls.__new__(cls)
        self._model, self._make_model = None, make_model
        self._model_lock = threading.Lock()
        self.tokenizer = tokenizer
        self.config = plain.config
        self.scheme = scheme
        self.max_length = model_max_length(plain, tokenizer, meta)
        self.device = torch.device("cpu")
        self.fast = FastBertForward.from_plain(plain)
        self._grad_forward = None
        self.checkpoint = None
        return self

    @classmethod
    def from_checkpoint(cls, path, device=None, fast: bool = True) -> "Predictor":
        """The checkpoint's Predictor. On the CPU, a plain BERT classifier (the ones
        ReviewBERT trains) is read without transformers' modeling code (model/plain_bert.py):
        the transformers model is built when a view first asks for :attr:`model`."""
        device = torch.device(device) if device is not None else pick_device()
        loaded = (load_plain(path, FastBertForward.supports_config)
                  if fast and device.type == "cpu" else None)
        if loaded is not None:
            plain, tok, info = loaded
            self = cls.from_plain(plain, tok, info.scheme, info.meta,
                                  make_model=lambda: model_from_plain(plain, info.path))
        else:
            model, tok, info = load_checkpoint(path, device, attn_implementation="eager")
            self = cls(model, tok, info.scheme, meta=info.meta, fast=fast)
        self.checkpoint = Path(info.path)
        return self

    @property
    def model(self):
        """The transformers model (eval mode): the one it was made with, or, for a
        Predictor :meth:`from_plain`, built on the same tensors the first time it is asked
        for (once, whichever thread asks first)."""
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    self._model = self._make_model()
        return self._model

    @torch.inference_mode()
    def forward(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None,
                                               np.ndarray]:
        """ids → (logits [C], attentions float32 [L, H, T, T], value vectors float32
        [L, T, D] or None: only the fast pass keeps them, the last layer's [CLS] hidden
        state float32 [D])."""
        t = torch.tensor(ids, dtype=torch.long, device=self.device)
        vals = None
        if self.fast is not None:
            logits, att, vals, cls = self.fast(t, values=True, cls_state=True)
        else:
            out = self.model(input_ids=t[None], output_attentions=True, output_hidden_states=True)
            logits, cls = out.logits[0], out.hidden_states[-1][0, 0]
            att = full_attentions([a[0] for a in out.attentions], self.model)
        return (logits.float().cpu().numpy(), att.to(torch.float32).cpu().numpy(),
                None if vals is None else vals.to(torch.float32).cpu().numpy(),
                cls.to(torch.float32).cpu().numpy())

    def embedded_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Differentiable logits [B, C] from word embeddings [B, T, D] of unpadded rows:
        :class:`GradBertForward` where the model is a plain BERT (made once), else the
        eager model fed ``inputs_embeds``."""
        return self._grad()(x)

    def _grad(self):
        """:class:`GradBertForward` (or the eager model), made once and outside inference
        mode: its fused weights must be usable by autograd whoever asks first."""
        if self._grad_forward is None:
            with torch.inference_mode(False):
                self._grad_forward = (GradBertForward(self.model) if self.fast is not None
                                      else (lambda e: self.model(inputs_embeds=e).logits))
        return self._grad_forward

    BATCH_TOKENS = 2048
    """:meth:`batch_logits` sends at most this many padded tokens through the model at
    once: 8 rows of 256 tokens, 64 of 32. On a CPU a 256-token row costs about the same
    alone or in a batch (its matrices already fill the cores); short rows gain several
    times from company (bench/whatif.py times the batched searches against one pass at a
    time)."""

    @torch.inference_mode()
    def batch_logits(self, rows: list[list[int]], precision: str = "fp32",
                     tokens_per_batch: int | None = None, progress=None,
                     remember: bool = False) -> np.ndarray:
        """Logits [len(rows), C] (fp32 numpy) of many token-id rows, each with its own
        [CLS]/[SEP], of any lengths: sorted by length, cut into batches of at most
        ``tokens_per_batch`` padded tokens, padded at the end, padded keys masked (each row
        gets the logits it gets alone). ``precision`` "bf16": bf16 autocast, for search
        passes whose results are checked again in fp32 before anyone sees them.
        ``progress(n)`` after each batch, with its rows' wordpieces (padding not counted).

        ``remember`` (fp32 only): rows read before come from :attr:`row_memo` (told to
        ``progress`` as resumed), and each batch's rows go there as soon as it is read, so
        that work stopped at a ``progress`` call resumes where it stopped."""
        n_classes = self.scheme.num_labels
        out = np.zeros((len(rows), n_classes), dtype=np.float32)
        if not rows:
            return out
        memo = self.row_memo if remember and precision == "fp32" else None
        todo = list(range(len(rows)))
        if memo is not None:
            todo, kept = [], 0
            for i, v in enumerate(memo.get_many(rows)):
                if v is None:
                    todo.append(i)
                else:
                    out[i], kept = v, kept + len(rows[i])
            resumed(progress, kept)
        if len(todo) == 1 and precision == "fp32" and self.fast is not None:
            # one row alone: the Predict page's own exact pass (oneDNN-packed weights)
            row = rows[todo[0]]
            logits, _ = self.fast(torch.as_tensor(row, dtype=torch.long, device=self.device))
            out[todo[0]] = logits.float().cpu().numpy()
            if memo is not None:
                memo.put_many([row], out[todo[:1]])
            if progress is not None:
                progress(len(row))
            return out
        budget = int(tokens_per_batch or self.BATCH_TOKENS)
        order = sorted(todo, key=lambda i: len(rows[i]))
        pad = self.tokenizer.pad_token_id or 0
        cast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if precision == "bf16"
                else contextlib.nullcontext())
        start = 0
        with cast:
            while start < len(order):
                stop = start + 1
                while stop < len(order) and (stop - start + 1) * len(rows[order[stop]]) <= budget:
                    stop += 1
                batch = [rows[i] for i in order[start:stop]]
                out[order[start:stop]] = self._padded_logits(batch, pad)
                if memo is not None:
                    memo.put_many(batch, out[order[start:stop]])
                start = stop
                if progress is not None:
                    progress(sum(len(r) for r in batch))
        return out

    @property
    def row_memo(self) -> RowMemo:
        """The logits of rows :meth:`batch_logits` read with ``remember`` (model/row_memo.py)."""
        memo = self.__dict__.get("_row_memo")
        return memo if memo is not None else self.__dict__.setdefault("_row_memo", RowMemo())

    def _padded_logits(self, batch: list[list[int]], pad: int) -> np.ndarray:
        width = max(len(r) for r in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long, device=self.device)
        mask = torch.zeros((len(batch), width), dtype=torch.bool, device=self.device)
        for b, r in enumerate(batch):
            ids[b, :len(r)] = torch.as_tensor(r, dtype=torch.long)
            mask[b, :len(r)] = True
        if self.fast is not None:
            x = self.model.get_input_embeddings().weight.detach()[ids]
            logits = self._grad()(x, None if bool(mask.all()) else mask)
        else:
            logits = self.model(input_ids=ids, attention_mask=mask.long()).logits
        return logits.float().cpu().numpy()

    def encode_rows(self, texts: list[str]) -> list[list[int]]:
        """Token ids of texts exactly as :meth:`predict` reads them (cut to MAX_CHARS
        characters, then to max_length tokens with [SEP] kept)."""
        from reviewbert.model.batch_predict import encode_texts
        return encode_texts(self.tokenizer, [t[:MAX_CHARS] for t in texts], self.max_length)

    def batch_probs(self, texts: list[str], precision: str = "fp32") -> np.ndarray:
        """Class probabilities [len(texts), C] of many texts, batched (see
        :meth:`batch_logits`); the same numbers as :meth:`predict`'s, up to float rounding."""
        return softmax(self.batch_logits(self.encode_rows(texts), precision))

    WARM_UP_MAX_LENGTH = 256
    """Row shapes are built ahead up to this many tokens (16 passes for a 256-token model,
    a short wait at load for MiniLM); longer ones, rare, are built when first met."""

    def warm_up(self) -> None:
        """The first forward pass pays one-off costs (oneDNN kernels, allocator): pay them now,
        for every row shape the fast path can meet."""
        self.predict("Warm-up: the battery is fine, the screen is not. " * 8)
        if self.fast is not None:
            self.fast.warm_up(min(self.max_length, self.WARM_UP_MAX_LENGTH))

    def predict(self, text: str) -> Prediction:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("empty review: type or paste some text first")
        enc = encode(self.tokenizer, text, self.max_length)
        logits, att, vals, cls = self.forward(enc.ids)
        probs = softmax(logits)
        k = int(probs.argmax())
        return Prediction(
            text=enc.text, tokens=enc.tokens, word_ids=enc.word_ids, words=enc.words,
            word_spans=enc.word_spans, probs=probs, label_id=k, label=self.scheme.names[k],
            stars=stars_display(self.scheme, k), attentions=att, truncated=enc.truncated,
            n_tokens=len(enc.ids), n_tokens_original=enc.n_original, max_length=self.max_length,
            chars_cut=enc.chars_cut, scheme=self.scheme, values=vals, cls_vector=cls)
