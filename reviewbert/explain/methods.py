"""Which words mattered? Seven explanation methods with one shape, and how far they agree.

Every method is a small object, as LIT's interpreters are: a ``name`` (the key in
JSON, caches and the CLI), a ``label`` for people, ``signed`` (can a score speak
*against* the prediction?), ``gradient`` (needs autograd: seconds, not
milliseconds) and ``run(predictor, prediction) -> TokenScores``, one score per
word of ``prediction.words``. Views and figure builders draw :class:`TokenScores`
and never care which method made them.

=====================  ======  ==============================================================
method (name)          signed  what a word's score is
=====================  ======  ==============================================================
raw_attention          no      [CLS] row of one layer, mean of heads (or one head): exactly
                               ``attention.word_scores``, what the Predict page highlights
rollout                no      Abnar & Zuidema 2020: per layer 0.5·A + 0.5·I (the residual),
                               rows renormalised, multiplied through all layers; [CLS] row
value_norm             no      Kobayashi et al. 2020: ‖Σ_h α_h[CLS→j] · f_h(x_j)‖ with
                               f_h(x) = (x W_V^h + b_V^h) W_O^h, in the same layer as raw
                               attention: how much token j *moves* [CLS], not how much it is
                               looked at
grad_x_input           yes     gradient × input on the word embeddings (Captum's
                               LayerGradientXActivation)
integrated_gradients   yes     Captum's LayerIntegratedGradients on the word embeddings from
                               a [PAD] baseline that keeps [CLS]/[SEP], Gauss-Legendre steps
                               batched through the model; reports Captum's convergence delta
                               and doubles the steps while it is above 5 %
lime                   yes     Captum's Lime, words as features: LIME_SAMPLES reviews with 1
                               to n−1 words deleted (lime's text sampling), weighted by
                               exp(−d²/2σ²) on the cosine distance to the review (σ = 0.25,
                               lime's text default), a ridge fit (α = 1) to p(ŷ); the word's
                               coefficient
occlusion              yes     Captum's FeatureAblation, words as features: p(ŷ | x) −
                               p(ŷ | x without the word), each word deleted in turn. The
                               same operation as ERASER's comprehensiveness at one word, so
                               read its faithfulness scores with that in mind
=====================  ======  ==============================================================

LIME and occlusion delete words the way the faithfulness measure does: the word's pieces
are left out of the row the model reads ([CLS] and [SEP] stay), never replaced by [PAD] or
[MASK]. Their forward passes go through ``Predictor.batch_logits`` (batched, exact fp32).

Written here, and why: rollout and value norms are a few lines of numpy/torch
(Captum has neither, and bertviz/exBERT only draw raw attention); gradient ×
input, IG, LIME and occlusion are Captum's (LIME's sampler and kernel are lime's text
explainer's, passed to Captum as its perturb and similarity functions: Captum's default
kernel measures distance between token ids), and Spearman is scipy's.

What is explained: the predicted class. The gradient methods differentiate its
log-probability, log p(ŷ | x): unlike a raw logit it does not change when every
logit moves by the same amount, and unlike the probability it does not saturate
(a flat probability needs more IG steps for the same convergence delta).

Word scores: a word gets the sum of its wordpieces' scores, as the word-level
attention views do (``attention.merge_words``). The three attention methods
drop [CLS]/[SEP] and renormalise, so their word scores are shares summing to 1,
like the page's highlighted review. The signed methods are plain sums; [CLS]
and [SEP] are not words and get no score (IG gives them exactly 0: the baseline
keeps them).

Sharing the model. The Predict page's predictor is cached once per process and
shared by every browser session, so nothing here changes it: no hook is
attached to any of its modules, no flag is flipped (``attn_implementation``,
``requires_grad``, ``train()``), no ``.grad`` is written. The gradient methods
look up the word embeddings with a module of their own (:class:`_WordEmbedding`,
a fresh one per call, sharing the weight tensor read-only), feed the model
``inputs_embeds`` and take gradients with ``torch.autograd.grad`` (Captum's way),
which fills no ``.grad``. Captum's hooks go on that private module only, so two
sessions can explain at once (``tests/unit/test_explain.py`` runs two threads plus a
prediction). Value norms come from one extra eager pass under ``torch.inference_mode``
through the model's own embedding and encoder-layer modules, called one by one
(not ``output_hidden_states=True``: transformers would install its recording
hooks on the shared model the first time); the attention weights are the
Prediction's own.
``FastBertForward`` has no autograd, so gradients go through
``Predictor.embedded_logits``: ``inference.GradBertForward``, the same checkpoint's
weights (read-only) in a differentiable, batched pass with SDPA attention and a
[CLS]-only last layer, or the eager model itself where the model is not a plain
BERT. Written ourselves, and why: IG is nothing but these passes, and the eager
model spends a quarter of them on [B, H, T, T] softmax tensors no gradient method
reads and five sixths of its last layer on rows the pooler never sees.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from reviewbert.model import attention
from reviewbert.model.pruning import alive_heads
from reviewbert.viz.markdown import md_escape  # noqa: F401 - also used by the views as E.md_escape

IG_STEPS = 16
"""Gauss-Legendre steps of IG's first try. On 10 test reviews of the demo checkpoint
16 steps kept the convergence delta within 5 % of f(x) − f(baseline) on 7; the
other 3 needed 32 (see IG_MAX_STEPS). Each step costs about one forward +
backward pass."""
IG_STEP_CHOICES = (8, 16, 32, 64)
IG_MAX_STEPS = 64
"""While the convergence delta is above DELTA_WARN, IG runs again with twice the steps,
up to this many: Gauss-Legendre's error on these integrands is uneven (on one
32-token review: 21 % at 16 steps, 1 % at 20, 3 % at 24), so a fixed count is
either slow everywhere or wrong somewhere."""
IG_TOKENS_PER_BATCH = 1024
"""Interpolation steps go through the model together, at most this many tokens per
batch (8 steps of a 128-token review, 4 of a 256-token one). On a CPU the batch that
fits the caches beats both one step per pass and every step at once
(bench/explain_latency.py times IG as the page runs it)."""
DELTA_WARN = 0.05
"""Warn when |convergence delta| > 5 % of |f(x) − f(baseline)|."""


class Unsupported(Exception):
    """This method cannot run on this model (e.g. value norms on a non-BERT model)."""


# ----------------------------------------------------------------------- result
@dataclass
class TokenScores:
    """One method's explanation of one prediction."""
    method: str                     # Method.name
    label: str                      # Method.label, e.g. "Attention rollout"
    signed: bool
    scores: np.ndarray              # float32 [n_words]: one per word of the Prediction
    token_scores: np.ndarray        # float32 [n_tokens]: per wordpiece, specials included
    target: int                     # class id explained (the predicted one)
    detail: str = ""                # e.g. "layer 6, mean of heads", "16 steps"
    seconds: float = 0.0
    delta: float | None = None      # IG: Captum's convergence delta
    output_diff: float | None = None  # IG: f(x) − f(baseline), log p(ŷ)
    n_steps: int | None = None

    @property
    def relative_delta(self) -> float | None:
        """|delta| / |f(x) − f(baseline)|; None when not IG."""
        if self.delta is None or self.output_diff is None:
            return None
        return abs(self.delta) / max(abs(self.output_diff), 1e-6)

    @property
    def delta_too_large(self) -> bool:
        r = self.relative_delta
        return r is not None and r > DELTA_WARN

    def top_words(self, n: int = 3) -> list[int]:
        """Indices of the ``n`` highest-scoring words (for signed methods: the strongest
        evidence *for* the prediction), best first."""
        return [int(i) for i in ranking(self.scores)[:n]]


def ranking(scores) -> np.ndarray:
    """Word indices from the highest score to the lowest; ties keep reading order."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


# ------------------------------------------------------------------ words
def word_sum(token_scores, word_ids: list[int | None], n_words: int) -> np.ndarray:
    """Per-wordpiece scores → per-word scores: each word gets the sum of its pieces,
    special tokens (word id None) are dropped. Same grouping as attention.merge_words."""
    merged, cols = attention.merge_words(np.asarray(token_scores, dtype=np.float64), word_ids)
    out = np.zeros(n_words, dtype=np.float32)
    for value, c in zip(merged, cols):
        if c is not None:
            out[c] = value
    return out


def word_shares(token_row, pred) -> np.ndarray:
    """A [CLS]→token row → per-word shares summing to 1 (specials dropped, renormalised):
    the arithmetic of ``attention.word_scores``, for rows that are not raw attention."""
    merged, cols = attention.merge_words(np.asarray(token_row, dtype=np.float64)[None], pred.word_ids)
    shares = attention.drop_special(merged, np.array([c is None for c in cols]))[0]
    out = np.zeros(len(pred.words), dtype=np.float32)
    for s, c in zip(shares, [c for c in cols if c is not None]):
        out[c] = s
    return out


def _result(method, pred, scores, token_scores, detail="", t0=None, **kw) -> TokenScores:
    return TokenScores(method=method.name, label=method.label, signed=method.signed,
                       scores=np.asarray(scores, dtype=np.float32),
                       token_scores=np.asarray(token_scores, dtype=np.float32),
                       target=int(pred.label_id), detail=detail,
                       seconds=0.0 if t0 is None else time.perf_counter() - t0, **kw)


def layer_name(layer: int, head: int | None) -> str:
    return f"layer {layer + 1}, " + ("mean of heads" if head is None else f"head {head + 1}")


# ----------------------------------------------------------------- methods
class RawAttention:
    """The [CLS] row of one layer's attention (head mean or one head): the page's view."""
    name, label, signed, gradient = "raw_attention", "Raw attention", False, False

    def __init__(self, layer: int | None = None, head: int | None = None):
        self.layer, self.head = layer, head  # layer None: the last one

    def cost(self, pred) -> int:
        return 0    # reads the Prediction's attentions: no pass of the model

    def run(self, predictor, pred, progress=None) -> TokenScores:
        t0 = time.perf_counter()
        layer = pred.num_layers - 1 if self.layer is None else self.layer
        scores = attention.word_scores(pred, layer, self.head)
        row = attention.query_rows(pred.attentions, [layer], self.head, attention.CLS_ROW)[0]
        return _result(self, pred, scores, row, layer_name(layer, self.head), t0)


def rollout(att: np.ndarray, residual: float = 0.5, row: int | None = None) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): [layer, head, q, k] or [layer, q, k]
    → [q, k], how much of each input token reaches each position of the top layer
    (with ``row``: only that position's row, [k]).

    Per layer: heads averaged, ``(1 − residual)·A + residual·I`` for the residual
    connection, rows renormalised; then ``Ã_L · … · Ã_2 · Ã_1``.
    """
    a = np.asarray(att)
    if a.ndim == 4:     # averaged in the input's dtype: 12x less to convert to float64
        a = attention.head_average(a)
    a = a.astype(np.float64)
    eye = np.eye(a.shape[-1])
    mats = [(1.0 - residual) * layer + residual * eye for layer in a]
    mats = [m / m.sum(axis=-1, keepdims=True) for m in mats]
    if row is not None:
        # One row, from the top layer down: L vector-matrix products instead of L
        # matrix products (T times fewer multiplications).
        out = eye[row]
        for m in reversed(mats):
            out = out @ m
        return out
    out = eye
    for m in mats:
        out = m @ out
    return out


class Rollout:
    name, label, signed, gradient = "rollout", "Attention rollout", False, False

    def __init__(self, residual: float = 0.5):
        self.residual = residual

    def cost(self, pred) -> int:
        return 0

    def run(self, predictor, pred, progress=None) -> TokenScores:
        t0 = time.perf_counter()
        row = rollout(pred.attentions, self.residual, row=attention.CLS_ROW)
        return _result(self, pred, word_shares(row, pred), row,
                       f"all {pred.num_layers} layers, mean of heads", t0)


def token_ids(predictor, pred) -> list[int]:
    """The ids the Prediction was computed from (its tokens came from these ids)."""
    return list(predictor.tokenizer.convert_tokens_to_ids(list(pred.tokens)))


def _bert_layers(model):
    layers = getattr(getattr(getattr(model, "bert", None), "encoder", None), "layer", None)
    if layers is None or not hasattr(layers[0].attention, "self") \
            or not hasattr(layers[0].attention.self, "value"):
        raise Unsupported(f"value norms need a BERT encoder; this is a {type(model).__name__}")
    return layers


@torch.inference_mode()
def value_vectors(model, ids: list[int], attentions: np.ndarray, layers: list[int],
                  head: int | None = None, values: np.ndarray | None = None) -> list[torch.Tensor]:
    """α_h[CLS→j] · f_h(x_j) summed over heads, per token: one [T, D] tensor per layer.

    ``x`` are the layer's input hidden states (one eager pass over ``ids``, up to
    the last layer asked for), ``f_h(x) = (x W_V^h + b_V^h) W_O^h`` the value vector
    mapped through the head's slice of the output projection, ``α`` the layer's
    attention (``attentions`` [layer, head, q, k]); with ``head`` only that head's
    term. Their sum over tokens plus W_O's bias is the [CLS] row of the attention
    block's output before the residual and LayerNorm (``tests/unit/test_explain.py``).

    ``values`` [L, T, D]: the value vectors ``x W_V + b_V`` the prediction's own pass
    kept (``Prediction.values``): then no pass at all (bench/explain_latency.py times it).
    """
    enc = _bert_layers(model)
    device = next(model.parameters()).device
    hidden = None
    if values is None:
        t = torch.tensor([ids], dtype=torch.long, device=device)
        # The layers' inputs, module by module. Not output_hidden_states=True: transformers
        # would install its recording hooks on the shared model the first time.
        hidden = [model.bert.embeddings(input_ids=t)]
        for layer in enc[:max(layers)]:
            hidden.append(layer(hidden[-1]))
    out = []
    H = attentions.shape[1]
    dh = model.config.hidden_size // model.config.num_attention_heads
    for li, alive in zip(layers, [alive_heads(model)[li] for li in layers]):
        a = enc[li].attention
        if hidden is None:      # the pass kept every head's slot: a removed head's is zeros
            # a copy: the shared prediction's arrays are read-only (torch warns on those)
            v = torch.as_tensor(np.array(values[li], dtype=np.float32),
                                device=device).view(-1, H, dh)[:, alive]
        else:
            v = a.self.value(hidden[li][0].float()).float().view(-1, len(alive), dh)
        T = v.shape[0]                                                        # v: [T, h, dh]
        alpha = torch.as_tensor(attentions[li][alive][:, attention.CLS_ROW, :], dtype=v.dtype,
                                device=v.device).T.clone()                  # [T, h]
        if head is not None:
            alpha[:, [i for i, h in enumerate(alive) if h != head]] = 0.0
        # Σ_h α_h v_h W_O^h = (α-weighted heads, concatenated) · W_Oᵀ: one matmul.
        out.append((v * alpha[:, :, None]).reshape(T, len(alive) * dh)
                   @ a.output.dense.weight.float().T)
    return out


def value_norms(model, ids: list[int], attentions: np.ndarray,
                layers: list[int] | None = None, head: int | None = None,
                values: np.ndarray | None = None) -> np.ndarray:
    """‖Σ_h α_h[CLS→j] · f_h(x_j)‖ per layer and token (Kobayashi et al. 2020):
    [len(layers), T]. See :func:`value_vectors`."""
    layers = list(range(len(_bert_layers(model)))) if layers is None else list(layers)
    vecs = value_vectors(model, ids, attentions, layers, head, values)
    return np.stack([v.norm(dim=-1).cpu().numpy() for v in vecs]).astype(np.float32)


class ValueNorm:
    name, label, signed, gradient = "value_norm", "Attention × value norm", False, False

    def __init__(self, layer: int | None = None, head: int | None = None):
        self.layer, self.head = layer, head

    def cost(self, pred) -> int:
        return 0    # the value vectors are the kept ones, or one pass of its layers

    def run(self, predictor, pred, progress=None) -> TokenScores:
        t0 = time.perf_counter()
        layer = pred.num_layers - 1 if self.layer is None else self.layer
        row = value_norms(predictor.model, token_ids(predictor, pred), pred.attentions,
                          [layer], self.head, pred.values)[0]
        return _result(self, pred, word_shares(row, pred), row, layer_name(layer, self.head), t0)


class _WordEmbedding(torch.nn.Module):
    """The model's word-embedding lookup as a module of our own, made per call.

    Captum attaches its hooks here, never to the shared model; the weight is the
    model's own tensor (no copy), only read.
    """

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.table = weight.detach()   # detached: autograd never reaches the shared weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.table)


def _log_prob_fn(logits_of, emb: _WordEmbedding, progress=None):
    """ids → log p(class) through ``logits_of(word embeddings)``; ``progress(n)`` with the
    wordpieces of each batch once the model has read them."""
    def forward(ids: torch.Tensor) -> torch.Tensor:
        # One review per row, all of one length: no padding, so no attention mask.
        out = torch.log_softmax(logits_of(emb(ids)).float(), dim=-1)
        if progress is not None:
            progress(int(ids.numel()))
        return out
    return forward


def _gradient_setup(predictor, pred, progress=None):
    """(ids → log p, the private embedding module Captum hooks, ids [1, T])."""
    emb = _WordEmbedding(predictor.model.get_input_embeddings().weight)
    ids = torch.tensor([token_ids(predictor, pred)], dtype=torch.long, device=emb.table.device)
    return _log_prob_fn(predictor.embedded_logits, emb, progress), emb, ids


class GradientXInput:
    name, label, signed, gradient = "grad_x_input", "Gradient × input", True, True

    def cost(self, pred) -> int:
        return int(pred.n_tokens)   # one forward + backward pass

    def run(self, predictor, pred, progress=None) -> TokenScores:
        from captum.attr import LayerGradientXActivation
        t0 = time.perf_counter()
        fn, emb, ids = _gradient_setup(predictor, pred, progress)
        with torch.inference_mode(False), torch.enable_grad():
            attr = LayerGradientXActivation(fn, emb).attribute(
                ids, target=int(pred.label_id))
        tok = attr[0].sum(-1).detach().float().cpu().numpy()
        return _result(self, pred, word_sum(tok, pred.word_ids, len(pred.words)), tok,
                       "word embeddings, log p(predicted)", t0)


def pad_baseline(ids: torch.Tensor, word_ids: list[int | None], pad_id: int) -> torch.Tensor:
    """Every wordpiece replaced by [PAD]; [CLS] and [SEP] (word id None) kept."""
    base = ids.clone()
    is_word = torch.tensor([w is not None for w in word_ids], device=ids.device)
    base[:, is_word] = pad_id
    return base


class IntegratedGradients:
    name, label, signed, gradient = "integrated_gradients", "Integrated Gradients", True, True

    def __init__(self, n_steps: int = IG_STEPS, tokens_per_batch: int = IG_TOKENS_PER_BATCH,
                 max_steps: int | None = IG_MAX_STEPS):
        """``max_steps`` None: exactly ``n_steps``, whatever the delta."""
        self.n_steps, self.tokens_per_batch = int(n_steps), int(tokens_per_batch)
        self.max_steps = self.n_steps if max_steps is None else max(self.n_steps, int(max_steps))

    def batch_size(self, n_tokens: int, n_steps: int | None = None) -> int:
        steps = self.n_steps if n_steps is None else n_steps
        return max(1, min(steps, self.tokens_per_batch // max(1, n_tokens)))

    @staticmethod
    def passes(n_steps: int) -> int:
        """Rows Captum sends through the model at ``n_steps``: the steps (forward +
        backward) and 4 forward-only ones (the layer's input and baseline, and f(x),
        f(baseline) for the delta)."""
        return int(n_steps) + 4

    def cost(self, pred) -> int:
        """Wordpieces read at the first try (more if the delta makes it double)."""
        return self.passes(self.n_steps) * int(pred.n_tokens)

    def attribute(self, predictor, pred, n_steps: int,
                  progress=None) -> tuple[np.ndarray, float, float]:
        """(per-token attributions [T], Captum's delta, f(x) − f(baseline)) at ``n_steps``."""
        from captum.attr import LayerIntegratedGradients
        fn, emb, ids = _gradient_setup(predictor, pred, progress)
        pad = predictor.tokenizer.pad_token_id
        base = pad_baseline(ids, pred.word_ids, 0 if pad is None else pad)
        with torch.inference_mode(False), torch.enable_grad():
            attr, delta = LayerIntegratedGradients(fn, emb).attribute(
                ids, baselines=base, target=int(pred.label_id), n_steps=n_steps,
                method="gausslegendre", internal_batch_size=self.batch_size(ids.shape[1], n_steps),
                return_convergence_delta=True)
        tok = attr[0].sum(-1).detach().double().cpu().numpy()
        delta = float(delta.reshape(-1)[0])
        # Captum's delta = Σ attributions − (f(x) − f(baseline)): the difference comes free.
        return tok, delta, float(tok.sum()) - delta

    def run(self, predictor, pred, progress=None) -> TokenScores:
        """``progress(n)`` after each batch of n wordpieces; ``progress.grow(n)`` (when it
        has one) with the wordpieces a doubling adds to :meth:`cost`."""
        t0 = time.perf_counter()
        n, tried = self.n_steps, []
        while True:
            tok, delta, diff = self.attribute(predictor, pred, n, progress)
            tried.append(n)
            if abs(delta) <= DELTA_WARN * max(abs(diff), 1e-6) or 2 * n > self.max_steps:
                break
            n *= 2
            if hasattr(progress, "grow"):
                progress.grow(self.passes(n) * int(pred.n_tokens))
        again = f" (delta above {DELTA_WARN:.0%} at {', '.join(map(str, tried[:-1]))})" \
            if len(tried) > 1 else ""
        return _result(self, pred, word_sum(tok, pred.word_ids, len(pred.words)), tok,
                       f"{n} steps{again}, [PAD] baseline, log p(predicted)", t0,
                       delta=delta, output_diff=diff, n_steps=n)


# ------------------------------------------------------- perturbation methods
DELETED = -1
"""A word piece removed from the review (the baseline of LIME's and occlusion's features):
the row sent to the model simply lacks it, as ERASER's erasure does."""
LIME_SAMPLES = 200
"""LIME's perturbed reviews per explanation (Captum's default is 50, the lime package's
5,000): 200 forward passes of a shortened review, batched, keep the button's wait short
(bench/explain_latency.py and bench/whatif.py time LIME as the page runs it)."""
LIME_KERNEL_WIDTH = 0.25
"""σ of LIME's exponential kernel exp(−d²/2σ²) on the cosine distance d between the kept-word
vector and all ones: the lime package's text default (width 25 on 100·d)."""
LIME_RIDGE_ALPHA = 1.0
"""LIME's surrogate: ridge regression with this penalty, weighted by the kernel (as lime's)."""


class _DeletionForward:
    """Word-piece ids of one review, DELETED where removed → p(class | what is left) [B, C],
    batched through ``Predictor.batch_logits`` (exact fp32). [CLS] and [SEP] always stay."""

    def __init__(self, predictor, ids: list[int], word_ids: list[int | None], progress=None):
        self.predictor, self.ids, self.progress = predictor, list(ids), progress
        self.word_pos = [i for i, w in enumerate(word_ids) if w is not None]
        self.passes = 0

    def features(self, word_ids) -> tuple[torch.Tensor, torch.Tensor]:
        """(the word pieces' ids [1, n], their word index [1, n]: one feature per word)."""
        x = torch.tensor([[self.ids[i] for i in self.word_pos]], dtype=torch.long)
        mask = torch.tensor([[word_ids[i] for i in self.word_pos]], dtype=torch.long)
        return x, mask

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = []
        for values in x.tolist():
            row = list(self.ids)
            for pos, v in zip(self.word_pos, values):
                row[pos] = v
            rows.append([t for t in row if t != DELETED])
        self.passes += len(rows)
        from reviewbert.model.inference import softmax
        return torch.from_numpy(softmax(self.predictor.batch_logits(
            rows, progress=self.progress, remember=True)))


def _pieces_per_word(pred, n_words: int | None = None) -> np.ndarray:
    """How many wordpieces each word of the Prediction has [n_words]."""
    return np.bincount([w for w in pred.word_ids if w is not None],
                       minlength=len(pred.words) if n_words is None else n_words)


def _per_word(pred, word_values) -> tuple[np.ndarray, np.ndarray]:
    """One value per word → (word scores [n_words], per-piece scores [n_tokens]: each piece
    a share of its word's value, so pieces sum to their word as in :func:`word_sum`)."""
    words = np.asarray(word_values, dtype=np.float64).reshape(-1)
    pieces = np.zeros(len(pred.word_ids))
    counts = _pieces_per_word(pred, len(words))
    for i, w in enumerate(pred.word_ids):
        if w is not None:
            pieces[i] = words[w] / counts[w]
    return words.astype(np.float32), pieces.astype(np.float32)


class Occlusion:
    """Each word deleted in turn (Captum's FeatureAblation, words as features): its score
    is p(ŷ | x) − p(ŷ | x without it). That is ERASER's comprehensiveness of that one word,
    so this method is close to being graded on its own arithmetic.

    ``batched=False``: Captum's default, one perturbed review per forward pass (the
    benchmark's baseline)."""
    name, label, signed, gradient = "occlusion", "Occlusion", True, False

    def __init__(self, batched: bool = True):
        self.batched = batched

    def cost(self, pred) -> int:
        """Wordpieces read: the review itself, then once without each word."""
        return int(pred.n_tokens * (len(pred.words) + 1) - _pieces_per_word(pred).sum())

    def run(self, predictor, pred, progress=None) -> TokenScores:
        from captum.attr import FeatureAblation
        t0 = time.perf_counter()
        fwd = _DeletionForward(predictor, token_ids(predictor, pred), pred.word_ids, progress)
        x, mask = fwd.features(pred.word_ids)
        with torch.inference_mode(False), torch.no_grad():
            attr = FeatureAblation(fwd).attribute(
                x, baselines=DELETED, target=int(pred.label_id), feature_mask=mask,
                perturbations_per_eval=max(1, len(pred.words)) if self.batched else 1)
        first = {w: attr[0, j] for j, w in reversed(list(enumerate(mask[0].tolist())))}
        words, pieces = _per_word(pred, [float(first[w]) for w in range(len(pred.words))])
        return _result(self, pred, words, pieces,
                       f"{len(pred.words)} words deleted one at a time, p(predicted) − p(without it)",
                       t0)


def _lime_samples(n_features: int, seed: int):
    """lime's text sampling, as a Captum perturb_func: first the review itself, then
    reviews with k words removed, k uniform in 1..n−1, the k words at random."""
    def perturb(original, **kwargs):
        rng = np.random.default_rng(seed)
        yield torch.ones(1, n_features, dtype=torch.long)
        while True:
            keep = np.ones(n_features, dtype=np.int64)
            if n_features > 1:
                keep[rng.choice(n_features, int(rng.integers(1, n_features)), replace=False)] = 0
            else:
                keep[:] = 0
            yield torch.from_numpy(keep)[None]
    return perturb


def _lime_kernel(width: float):
    """exp(−d²/2σ²), d = cosine distance between the kept-word vector z and all ones
    (1 − √(|z| / n)), as lime's text explainer weighs its samples."""
    def similarity(original, perturbed, z, **kwargs) -> float:
        z = z.float().reshape(-1)
        d = 1.0 - math.sqrt(float(z.sum()) / max(1, z.numel()))
        return math.exp(-(d * d) / (2 * width * width))
    return similarity


class Lime:
    """LIME (Ribeiro et al. 2016) through Captum's ``Lime``: words as features, a review
    with words deleted as each sample, a kernel-weighted ridge fit to p(ŷ)."""
    name, label, signed, gradient = "lime", "LIME", True, False

    def __init__(self, n_samples: int = LIME_SAMPLES, seed: int = 0,
                 kernel_width: float = LIME_KERNEL_WIDTH, batched: bool = True):
        """``batched=False``: Captum's default, one sample per forward pass (a baseline)."""
        self.n_samples, self.seed, self.kernel_width = int(n_samples), int(seed), float(kernel_width)
        self.batched = batched

    def cost(self, pred) -> int:
        """Wordpieces read: each sample's kept words and the two specials (the samples are
        seeded, so this is exact)."""
        pieces = _pieces_per_word(pred)
        specials = int(pred.n_tokens - pieces.sum())
        samples = _lime_samples(len(pred.words), self.seed)(None)
        return sum(specials + int(pieces @ next(samples).numpy()[0])
                   for _ in range(self.n_samples))

    def run(self, predictor, pred, progress=None) -> TokenScores:
        from captum._utils.models.linear_model import SkLearnRidge
        from captum.attr import Lime as CaptumLime
        t0 = time.perf_counter()
        fwd = _DeletionForward(predictor, token_ids(predictor, pred), pred.word_ids, progress)
        x, mask = fwd.features(pred.word_ids)
        lime = CaptumLime(fwd, interpretable_model=SkLearnRidge(alpha=LIME_RIDGE_ALPHA),
                          similarity_func=_lime_kernel(self.kernel_width),
                          perturb_func=_lime_samples(len(pred.words), self.seed))
        with torch.inference_mode(False), torch.no_grad():
            coefs = lime.attribute(x, baselines=DELETED, target=int(pred.label_id),
                                   feature_mask=mask, n_samples=self.n_samples,
                                   perturbations_per_eval=self.n_samples if self.batched else 1,
                                   return_input_shape=False)
        words, pieces = _per_word(pred, coefs.detach().double().cpu().numpy())
        return _result(self, pred, words, pieces,
                       f"{self.n_samples} samples (1 to n−1 words deleted), kernel exp(−d²/2σ²) "
                       f"on cosine distance, σ = {self.kernel_width:g}; ridge α = "
                       f"{LIME_RIDGE_ALPHA:g} on p(predicted)", t0)


def attention_methods(layer: int | None = None, head: int | None = None) -> list:
    """The cheap ones (milliseconds): they read the Prediction's attentions."""
    return [RawAttention(layer, head), Rollout(), ValueNorm(layer, head)]


def gradient_methods(ig_steps: int = IG_STEPS, ig_max_steps: int | None = IG_MAX_STEPS) -> list:
    """The ones that need autograd through the eager model (≈ 1 and ≈ ig_steps
    forward + backward passes; up to ig_max_steps more when IG's delta is large)."""
    return [GradientXInput(), IntegratedGradients(ig_steps, max_steps=ig_max_steps)]


def perturbation_methods(lime_samples: int = LIME_SAMPLES) -> list:
    """The ones that delete words and ask the model again (forward passes only, batched:
    about lime_samples + the number of words)."""
    return [Lime(lime_samples), Occlusion()]


def all_methods(layer: int | None = None, head: int | None = None, ig_steps: int = IG_STEPS,
                ig_max_steps: int | None = IG_MAX_STEPS, lime_samples: int = LIME_SAMPLES) -> list:
    return (attention_methods(layer, head) + gradient_methods(ig_steps, ig_max_steps)
            + perturbation_methods(lime_samples))


METHOD_NAMES = tuple(m.name for m in all_methods())
LABELS = {m.name: m.label for m in all_methods()}


def method_by_name(name: str, layer: int | None = None, head: int | None = None):
    """One method with the page's defaults (ValueError for an unknown name)."""
    for m in all_methods(layer, head):
        if m.name == name:
            return m
    raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHOD_NAMES)}")


def explain(predictor, pred, methods=None, progress=None) -> list[TokenScores]:
    """Every method's TokenScores for ``pred`` (in the methods' order); ``progress(n)``
    after each batch of n wordpieces the model has read (:func:`cost` in all)."""
    return [m.run(predictor, pred, progress) for m in (methods or all_methods())]


def cost(methods, pred) -> int:
    """Wordpieces the model reads to run ``methods`` on ``pred``: a progress bar's total."""
    return sum(m.cost(pred) for m in methods)


# --------------------------------------------------------------- agreement
def spearman_matrix(results: list[TokenScores]) -> np.ndarray:
    """Spearman rank correlation between every pair of methods' word scores
    ([m, m], NaN where undefined: fewer than 3 words, or a constant score vector)."""
    import pandas as pd  # its average-tie ranks are scipy's rankdata, without importing scipy
    m = len(results)
    rho = np.full((m, m), np.nan)
    np.fill_diagonal(rho, 1.0)
    if m < 2 or len(results[0].scores) < 3:
        return rho
    # Spearman's ρ is Pearson's r of the (average-tie) ranks, pair by pair: scipy's
    # spearmanr on the whole matrix returns a single NaN as soon as one column is constant
    # (a method that scores every word alike), which would blank every other pair too.
    ranks = np.stack([pd.Series(np.asarray(r.scores, dtype=np.float64)).rank(method="average")
                      .to_numpy() for r in results])
    for i in range(m):
        for j in range(i + 1, m):
            if np.ptp(ranks[i]) > 0 and np.ptp(ranks[j]) > 0:
                rho[i, j] = rho[j, i] = float(np.corrcoef(ranks[i], ranks[j])[0, 1])
    return rho


# ----------------------------------------------------------------- reading


def _is_punct(word: str) -> bool:
    return not any(ch.isalnum() for ch in word)


@functools.lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, read from its data module alone
    (``sklearn/feature_extraction/_stop_words.py``, one frozenset, no imports):
    ``sklearn.feature_extraction.text`` imports scikit-learn and scipy, an import that the
    Predict page's first explanation waited for. The usual import where that file moved."""
    import importlib.util
    from pathlib import Path
    try:
        spec = importlib.util.find_spec("sklearn")
        path = Path(spec.submodule_search_locations[0]) / "feature_extraction" / "_stop_words.py"
        data = importlib.util.spec_from_file_location("reviewbert._sklearn_stop_words", path)
        module = importlib.util.module_from_spec(data)
        data.loader.exec_module(module)
        return frozenset(module.ENGLISH_STOP_WORDS)
    except (ImportError, OSError, AttributeError, TypeError):
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
        return ENGLISH_STOP_WORDS


def _is_function_word(word: str) -> bool:
    return word.lower().strip("'’") in stop_words()


def _quote(words: list[str]) -> str:
    return "*" + " ".join(md_escape(w) for w in words) + "*"


def _quote_at(words: list[str], idx: list[int]) -> str:
    """Words at ``idx`` in reading order: neighbours as one phrase (*poor quality*),
    others apart (*died*, *never*)."""
    groups: list[list[int]] = []
    for i in sorted(idx):
        if groups and i == groups[-1][-1] + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    return ", ".join(_quote([words[i] for i in g]) for g in groups)


def _short(r: TokenScores) -> str:
    return {"integrated_gradients": "IG", "grad_x_input": "gradient × input",
            "raw_attention": "raw attention", "rollout": "rollout",
            "value_norm": "value norm", "lime": "LIME", "occlusion": "occlusion"}.get(r.method, r.label)


def reading(results: list[TokenScores], pred, rho: np.ndarray | None = None) -> str:
    """One line in plain words (Markdown, review words escaped): what the most
    principled method that ran puts first, which method agrees with it, where raw
    attention goes, and what counts against the prediction. E.g. "IG ranks *poor
    quality* highest; rollout agrees (ρ = 0.64) on *poor*; raw attention (layer 5)
    puts 46 % of its weight on punctuation"."""
    words = list(pred.words)
    if not results or not words:
        return "No words to explain."
    rho = spearman_matrix(results) if rho is None else rho
    by = {r.method: i for i, r in enumerate(results)}
    parts = []
    # Anchor on IG when it ran (it accounts for the whole network), else on rollout.
    anchor = next((by[n] for n in ("integrated_gradients", "rollout", "raw_attention") if n in by), 0)
    a = results[anchor]
    top_a = a.top_words(2 if len(words) > 3 else 1)
    parts.append(f"{_short(a)} ranks {_quote_at(words, top_a)} highest")
    others = [j for j in range(len(results)) if j != anchor and np.isfinite(rho[anchor, j])]
    if others:
        j = max(others, key=lambda j: rho[anchor, j])
        b, r = results[j], float(rho[anchor, j])
        common = [i for i in sorted(a.top_words(3)) if i in b.top_words(3)]
        on = f" on {_quote_at(words, common)}" if common else ""
        if r >= 0.5:
            parts.append(f"{_short(b)} agrees (ρ = {r:.2f}){on}")
        elif r >= 0.3:
            parts.append(f"{_short(b)} agrees loosely (ρ = {r:.2f}){on}")
        else:
            parts.append(f"no other method agrees with it (closest: {_short(b)}, ρ = {r:.2f})")
    elif len(words) < 3:
        parts.append("too few words to compare rankings")
    if "raw_attention" in by and anchor != by["raw_attention"]:
        parts.append(_raw_attention_note(results[by["raw_attention"]], words))
    ig = results[by["integrated_gradients"]] if "integrated_gradients" in by else None
    if ig is not None and len(words) > 1:
        low = int(np.argmin(ig.scores))
        top = float(np.max(ig.scores))
        if ig.scores[low] < 0 and abs(ig.scores[low]) >= 0.5 * max(top, 1e-9):
            parts.append(f"IG counts {_quote([words[low]])} against {md_escape(pred.label)}")
    return "; ".join(p for p in parts if p) + "."


def _raw_attention_note(raw: TokenScores, words: list[str]) -> str:
    s = np.asarray(raw.scores, dtype=np.float64)
    total = s.sum()
    if total <= 0:
        return ""
    where = f"raw attention ({raw.detail.split(',')[0]})" if raw.detail else "raw attention"
    punct = np.array([_is_punct(w) for w in words])
    func = np.array([_is_function_word(w) for w in words]) & ~punct
    share_p = s[punct].sum() / total
    share_f = s[func].sum() / total
    # "Most weight" only if it is more than these words' share of the review.
    if share_p >= 0.25 and share_p > 1.5 * punct.mean():
        return f"{where} puts {share_p:.0%} of its weight on punctuation"
    if share_p + share_f >= 0.5 and share_p + share_f > 1.3 * (punct | func).mean():
        return f"{where} puts {share_p + share_f:.0%} of its weight on punctuation and function words"
    return f"{where} looks most at {_quote([words[raw.top_words(1)[0]]])}"


# -------------------------------------------------------------- timing guess
@dataclass
class _Rate:
    """Seconds per (token × forward+backward pass) of the last gradient runs, so the
    page can say how long the button will take on this machine."""
    per_token_pass: float | None = None
    samples: list = field(default_factory=list)

    def record(self, n_tokens: int, passes: int, seconds: float) -> None:
        if n_tokens > 0 and passes > 0 and seconds > 0:
            self.samples = (self.samples + [seconds / (n_tokens * passes)])[-8:]
            self.per_token_pass = float(np.median(self.samples))

    def estimate(self, n_tokens: int, passes: int) -> float | None:
        return None if self.per_token_pass is None else self.per_token_pass * n_tokens * passes


GRADIENT_RATE = _Rate()


def gradient_passes(ig_steps: int) -> int:
    """Forward + backward passes of both gradient methods: IG's steps, the 2 + 2
    forward-only passes Captum adds for the layer and the delta (≈ 2 passes), and
    gradient × input's one."""
    return int(ig_steps) + 3


def run_gradient_methods(predictor, pred, ig_steps: int = IG_STEPS,
                         progress=None) -> list[TokenScores]:
    """Both gradient methods; their time feeds :data:`GRADIENT_RATE`."""
    t0 = time.perf_counter()
    out = explain(predictor, pred, gradient_methods(ig_steps), progress)
    steps = out[-1].n_steps or ig_steps
    # passes actually made: every doubling re-ran IG from scratch (16 + 32 = 48 steps)
    done = sum(ig_steps * 2 ** i for i in range(int(np.log2(steps / ig_steps)) + 1))
    GRADIENT_RATE.record(pred.n_tokens, gradient_passes(done), time.perf_counter() - t0)
    return out


PERTURBATION_RATE = _Rate()
"""Seconds per (token × forward pass) of the last LIME + occlusion runs."""


def perturbation_passes(n_words: int, lime_samples: int = LIME_SAMPLES) -> float:
    """Forward passes of LIME and occlusion, in full-review equivalents: LIME's samples keep
    half the words on average, occlusion's each lack one word."""
    return lime_samples / 2 + n_words


def run_perturbation_methods(predictor, pred, lime_samples: int = LIME_SAMPLES,
                             progress=None) -> list[TokenScores]:
    """LIME and occlusion; their time feeds :data:`PERTURBATION_RATE`."""
    t0 = time.perf_counter()
    out = explain(predictor, pred, perturbation_methods(lime_samples), progress)
    PERTURBATION_RATE.record(pred.n_tokens, perturbation_passes(len(pred.words), lime_samples),
                             time.perf_counter() - t0)
    return out


def fmt_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "a few seconds"
    return f"about {s:.1f} s" if s < 60 else f"about {s / 60:.0f} min"
