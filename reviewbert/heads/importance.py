"""Which attention heads matter: Michel et al.'s importance, the measured masking drop,
the pruning curve, and the model's attention probabilities for the atlas.

Masking a head. transformers 5 has no ``head_mask``, so a head is masked the way
Michel et al. define it: its output is multiplied by a gate ξₕ before the output
projection. :class:`MaskedModel` makes a per-call copy of the classifier's modules
that shares every weight tensor read-only (``copy.deepcopy`` with the parameters and
buffers in its memo: no weight is copied) and puts one forward pre-hook on each
layer's ``attention.output.dense``: the hook multiplies head h's slice
``[h·d, (h+1)·d)`` of that projection's input by ξ. The shared, cached model (the
pages' Predictor) never sees a hook, a flag or a ``.grad``; the copy is dropped with
the call. ξ is ``[layers, heads]`` (one mask for the batch) or ``[batch, layers,
heads]`` (one per review: the gradient pass, and every head of a layer masked at
once, one head per copy of the batch). Layers are called one by one
(``MaskedModel.layers``), so a pass can start at any layer from saved inputs.

Importance (Michel et al. 2019, eq. 2): ``I_h = Σ_x |∂L(x)/∂ξ_h|`` at ξ = 1, with L
the cross-entropy against the review's true class, then divided by the L2 norm of
its layer's scores ("we normalize the importance scores by layer (using the ℓ2
norm)"). One forward and one backward pass per batch give every review's 72
gradients at once: ξ is per review, and the loss is the batch's sum, so
``∂(Σ L)/∂ξ[x] = ∂L(x)/∂ξ[x]``; ``torch.autograd.grad`` w.r.t. ξ alone fills no
weight's ``.grad``. Always fp32 (``tests/unit/test_heads.py`` checks it against a
finite difference).

The check (:func:`masking_drops`): each head alone masked (ξₕ = 0), the same
reviews re-scored: the drop in accuracy and in the probability of the class the full
model predicts. The inputs of every layer are saved once per batch and a head of
layer l is masked from there on (layers below l would give the same numbers), the 12
heads of a layer side by side in one batch. Pruning curves (:func:`pruning_curves`):
the least important, the most important or random heads masked together, 10 … 90 %
of them, each a pass over the reviews. Both run in the evaluation ``precision``
(bf16 on a CPU with bf16 units, as the Error analysis page's pass; its own baseline).

The whole analysis, its cache and its JSON: ``reviewbert.heads.analysis.analyze`` (with
``reviewbert/heads/cache.py``).
"""
from __future__ import annotations

import contextlib
import copy
import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from reviewbert.model.metrics import compute_metrics
from reviewbert.model.pruning import alive_heads

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
RANDOM_DRAWS = 5
"""Random orders averaged in the pruning curve (the band is their min–max)."""
TOKENS_PER_BATCH = 1024
"""Reviews are batched by length up to this many (padded) tokens per pass: on a CPU,
batches this size made the pass quicker than four times larger ones
(bench/heads.py times the importance pass)."""
MASK_GROUP_TOKENS = 4096
"""The masking check runs several heads of a layer side by side, up to this many tokens."""
MICHEL_FRACTION = 0.4
"""Michel et al. 2019: 40 % of BERT's heads pruned with no noticeable loss (MNLI)."""
ONE_POINT = 0.01


def unsupported_reason(model) -> str | None:
    """None if this model's heads can be masked here, else why not (one sentence)."""
    base = getattr(model, "base_model", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None or not hasattr(layers[0].attention, "output") \
            or not hasattr(layers[0].attention.self, "query"):
        return (f"The head analysis needs a BERT encoder (self-attention with an output "
                f"projection per layer); this checkpoint is a {type(model).__name__}.")
    if getattr(model.config, "is_decoder", False):
        return "The head analysis needs an encoder; this checkpoint is a decoder."
    return None


# ------------------------------------------------------------------ batches
@dataclass
class Batch:
    ids: torch.Tensor        # [B, T] long, padded
    mask: torch.Tensor       # [B, T] long, 1 for real tokens
    rows: np.ndarray         # the reviews' positions in the input order


def make_batches(ids: list[list[int]], pad_id: int,
                 tokens_per_batch: int = TOKENS_PER_BATCH) -> list[Batch]:
    """Reviews sorted by length and packed into batches of at most ``tokens_per_batch``
    padded tokens (at least one review each); the batches then in a fixed shuffled
    order, so that the reviews per second, and so the ETA, hold steady through a stage
    (longest first, the first minute ran at a quarter of the mean rate)."""
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    batches, start = [], 0
    while start < len(order):
        width = len(ids[order[start]])
        end = start + max(1, tokens_per_batch // max(width, 1))
        rows = order[start:end]
        t = torch.full((len(rows), width), pad_id, dtype=torch.long)
        m = torch.zeros((len(rows), width), dtype=torch.long)
        for j, i in enumerate(rows):
            t[j, :len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
            m[j, :len(ids[i])] = 1
        batches.append(Batch(t, m, np.asarray(rows)))
        start = end
    return [batches[i] for i in np.random.default_rng(0).permutation(len(batches))]


# ------------------------------------------------------------------ the masked model
class MaskedModel:
    """A per-call copy of a BERT classifier (or a bare BERT encoder) sharing its weights,
    with a head-mask hook on every layer (see the module docstring). ``xi`` is the mask
    in force: None (no mask), [layers, heads] or [batch, layers, heads], in the heads'
    original numbering (a pruned checkpoint's removed heads are simply not there)."""

    def __init__(self, model):
        shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
        self.model = copy.deepcopy(model, memo=shared).eval()
        self.model.config._attn_implementation = "sdpa"
        self.encoder = self.model.base_model
        self.layer_modules = list(self.encoder.encoder.layer)
        cfg = self.model.config
        self.L, self.H = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
        self.dh = int(cfg.hidden_size // cfg.num_attention_heads)
        self.alive = alive_heads(self.model)
        self.xi: torch.Tensor | None = None
        for li, layer in enumerate(self.layer_modules):
            layer.attention.output.dense.register_forward_pre_hook(self._hook(li))

    def _hook(self, li: int):
        index = torch.tensor(self.alive[li], dtype=torch.long)

        def pre(module, args):
            if self.xi is None or len(index) == 0:
                return None
            x = args[0]
            m = self.xi[..., li, :][..., index].to(x.dtype)           # [h] or [B, h]
            heads = x.view(*x.shape[:-1], len(index), self.dh)
            m = m[:, None, :, None] if m.dim() == 2 else m[:, None]
            return ((heads * m).view(x.shape), *args[1:])
        return pre

    @contextlib.contextmanager
    def masked(self, xi: torch.Tensor | None):
        old, self.xi = self.xi, xi
        try:
            yield self
        finally:
            self.xi = old

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.encoder.embeddings(input_ids=ids)

    def attention_mask(self, h: torch.Tensor, mask: torch.Tensor):
        """The padding mask in the form the layers' attention wants (None: no padding)."""
        from transformers.masking_utils import create_bidirectional_mask
        return create_bidirectional_mask(config=self.model.config, inputs_embeds=h,
                                         attention_mask=mask)

    def layers(self, h: torch.Tensor, ext, start: int = 0, keep: list | None = None):
        """Layers ``start``… on hidden states ``h``; ``keep`` collects each layer's input."""
        for layer in self.layer_modules[start:]:
            if keep is not None:
                keep.append(h)
            h = layer(h, attention_mask=ext)
        return h

    def classify(self, h: torch.Tensor) -> torch.Tensor:
        return self.model.classifier(self.encoder.pooler(h))

    def logits(self, batch: Batch) -> torch.Tensor:
        h = self.embed(batch.ids)
        return self.classify(self.layers(h, self.attention_mask(h, batch.mask)))

    def attention_probs(self, li: int, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Layer ``li``'s attention [B, H, T, T] (fp32) from its input ``h``, as the eager
        model computes it; a removed head's matrix is zeros."""
        a = self.layer_modules[li].attention.self
        B, T, _ = h.shape
        alive = self.alive[li]
        out = torch.zeros((B, self.H, T, T), dtype=torch.float32, device=h.device)
        if not alive:
            return out
        q = a.query(h).float().view(B, T, len(alive), self.dh).transpose(1, 2)
        k = a.key(h).float().view(B, T, len(alive), self.dh).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) * float(getattr(a, "scaling", self.dh ** -0.5))
        scores = scores.masked_fill(~mask.bool()[:, None, None, :], torch.finfo(scores.dtype).min)
        out[:, alive] = torch.softmax(scores, dim=-1)
        return out


def autocast(precision: str):
    """bf16 autocast on the CPU for "bf16", nothing for "fp32"."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ------------------------------------------------------------------ importance
def head_gradients(mm: MaskedModel, batch: Batch, labels: torch.Tensor):
    """(∂L(x)/∂ξ for every review [B, L, H], logits [B, C]): one forward + backward, fp32."""
    xi = torch.ones((batch.ids.shape[0], mm.L, mm.H), dtype=torch.float32, requires_grad=True)
    with torch.enable_grad(), mm.masked(xi):
        logits = mm.logits(batch)
        loss = F.cross_entropy(logits.double(), labels, reduction="sum")
        (grad,) = torch.autograd.grad(loss, xi)
    return grad, logits.detach()


def importance(mm: MaskedModel, batches: list[Batch], labels: np.ndarray,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Σ over reviews of |∂L/∂ξ| per head, [L, H] (not yet normalised)."""
    total = torch.zeros((mm.L, mm.H), dtype=torch.float64)
    for b in batches:
        grad, _ = head_gradients(mm, b, torch.as_tensor(labels[b.rows], dtype=torch.long))
        total += grad.abs().double().sum(0)
        if progress is not None:
            progress(len(b.rows))
    return total.numpy()


def normalise(raw: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Michel et al.: each layer's scores divided by their L2 norm; NaN for removed heads."""
    out = np.full(raw.shape, np.nan)
    for li in range(raw.shape[0]):
        row = np.where(alive[li], raw[li], 0.0)
        norm = float(np.sqrt((row ** 2).sum()))
        out[li, alive[li]] = row[alive[li]] / norm if norm > 0 else 0.0
    return out


# ------------------------------------------------------------------ the check: one head masked
@dataclass
class MaskingDrops:
    base_accuracy: float
    base_probability: float                   # mean probability of the predicted class
    accuracy_drop: np.ndarray                 # [L, H]: base − masked (NaN: removed)
    probability_drop: np.ndarray              # [L, H]

    def to_json(self) -> dict:
        return {"base_accuracy": self.base_accuracy, "base_probability": self.base_probability,
                "accuracy_drop": nested(self.accuracy_drop),
                "probability_drop": nested(self.probability_drop)}

    @classmethod
    def from_json(cls, d: dict) -> "MaskingDrops":
        return cls(float(d["base_accuracy"]), float(d["base_probability"]),
                   array(d["accuracy_drop"]), array(d["probability_drop"]))


def masking_drops(mm: MaskedModel, batches: list[Batch], labels: np.ndarray, precision: str,
                  progress: Callable[[int], None] | None = None) -> MaskingDrops:
    """Every head masked alone (see the module docstring), against the unmasked pass."""
    correct = np.zeros((mm.L, mm.H))
    prob = np.zeros((mm.L, mm.H))
    base_correct = base_prob = 0.0
    n = 0
    for b in batches:
        y = torch.as_tensor(labels[b.rows], dtype=torch.long)
        with torch.inference_mode(), autocast(precision):
            h = mm.embed(b.ids)
            ext = mm.attention_mask(h, b.mask)
            inputs: list = []
            p0 = torch.softmax(mm.classify(mm.layers(h, ext, keep=inputs)).float(), dim=-1)
            yhat = p0.argmax(-1)
            if progress is not None:
                progress(len(b.rows))
            base_correct += float((yhat == y).sum())
            base_prob += float(p0.max(-1).values.sum())
            for li in range(mm.L):
                _mask_layer(mm, li, inputs[li], ext, y, yhat, correct, prob)
                if progress is not None:
                    progress(round(len(b.rows) * len(mm.alive[li]) * (mm.L - li) / mm.L))
        n += len(b.rows)
    alive = _alive(mm)
    acc_drop = np.where(alive, base_correct / n - correct / n, np.nan)
    prob_drop = np.where(alive, base_prob / n - prob / n, np.nan)
    return MaskingDrops(base_correct / n, base_prob / n, acc_drop, prob_drop)


def _mask_layer(mm, li, h, ext, y, yhat, correct, prob) -> None:
    """Each head of layer ``li`` masked alone, several side by side in one batch."""
    B, T = h.shape[0], h.shape[1]
    heads = mm.alive[li]
    size = max(1, MASK_GROUP_TOKENS // max(B * T, 1))
    for g in range(0, len(heads), size):
        group = heads[g:g + size]
        G = len(group)
        xi = torch.ones((G * B, mm.L, mm.H))
        for j, head in enumerate(group):
            xi[j * B:(j + 1) * B, li, head] = 0.0
        rep = None if ext is None else ext.repeat(G, *([1] * (ext.dim() - 1)))
        with mm.masked(xi):
            p = torch.softmax(mm.classify(mm.layers(h.repeat(G, 1, 1), rep, start=li)).float(), -1)
        p = p.view(G, B, -1)
        for j, head in enumerate(group):
            correct[li, head] += float((p[j].argmax(-1) == y).sum())
            prob[li, head] += float(p[j].gather(1, yhat[:, None]).sum())


def _alive(mm: MaskedModel) -> np.ndarray:
    out = np.zeros((mm.L, mm.H), dtype=bool)
    for li, heads in enumerate(mm.alive):
        out[li, heads] = True
    return out


# ------------------------------------------------------------------ pruning curves
def evaluate(mm: MaskedModel, batches: list[Batch], n: int, xi: torch.Tensor | None,
             precision: str, progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Class probabilities [n, C] of every review under mask ``xi`` ([L, H] or None)."""
    out = None
    with torch.inference_mode(), autocast(precision), mm.masked(xi):
        for b in batches:
            p = torch.softmax(mm.logits(b).float(), dim=-1).numpy()
            if out is None:
                out = np.zeros((n, p.shape[1]))
            out[b.rows] = p
            if progress is not None:
                progress(len(b.rows))
    return out


def ranked(scores: np.ndarray, alive: np.ndarray) -> list[tuple[int, int]]:
    """The heads still there, least important first (ties: layer, then head)."""
    cells = [(float(scores[li, h]), li, h) for li, h in zip(*np.nonzero(alive))]
    return [(int(li), int(h)) for _, li, h in sorted(cells)]


def mask_of(heads: list[tuple[int, int]], shape: tuple[int, int]) -> torch.Tensor:
    xi = torch.ones(shape)
    for li, h in heads:
        xi[li, h] = 0.0
    return xi


def pruning_orders(order: list[tuple[int, int]], draws: int, seed: int) -> dict[str, list]:
    """{"least": [...], "most": [...], "random": [[...], ...]}: the orders heads are masked in."""
    rng = np.random.default_rng(seed)
    return {"least": list(order), "most": list(reversed(order)),
            "random": [[order[i] for i in rng.permutation(len(order))] for _ in range(draws)]}


def _point(fraction: float, k: int, metrics: dict) -> dict:
    return {"fraction": float(fraction), "heads_masked": int(k),
            "accuracy": metrics.get("accuracy"), "relaxed_accuracy": metrics.get("relaxed_accuracy"),
            "auc": metrics.get("auc")}


def pruning_curves(mm: MaskedModel, batches: list[Batch], labels: np.ndarray, scores: np.ndarray,
                   num_labels: int, precision: str, fractions=FRACTIONS, draws: int = RANDOM_DRAWS,
                   seed: int = 0, progress: Callable[[int], None] | None = None) -> dict:
    """Accuracy, relaxed accuracy and AUC with 0 % (the full model), 10 %, … of the heads
    masked in each order; "random" is the mean of ``draws`` orders, with min and max."""
    alive = _alive(mm)
    orders = pruning_orders(ranked(scores, alive), draws, seed)
    n_alive, n = int(alive.sum()), len(labels)

    def run(heads):
        probs = evaluate(mm, batches, n, mask_of(heads, (mm.L, mm.H)), precision, progress)
        return compute_metrics(labels, probs, num_labels)

    full = _point(0.0, 0, run([]))
    out = {"least": [full], "most": [full], "random": [full]}
    for f in fractions:
        k = int(round(f * n_alive))
        for name in ("least", "most"):
            out[name].append(_point(f, k, run(orders[name][:k])))
        draws_m = [run(o[:k]) for o in orders["random"]]
        point = _point(f, k, {})
        for key in ("accuracy", "relaxed_accuracy", "auc"):
            vals = [m[key] for m in draws_m if m.get(key) is not None]
            point[key] = float(np.mean(vals)) if vals else None
            point[f"{key}_min"] = float(np.min(vals)) if vals else None
            point[f"{key}_max"] = float(np.max(vals)) if vals else None
        out["random"].append(point)
    return out


def planned_passes(n: int, alive: list[list[int]], fractions=FRACTIONS,
                   draws: int = RANDOM_DRAWS) -> dict[str, int]:
    """Progress units (review passes) of each stage of :func:`analyze` for ``n`` reviews."""
    L = len(alive)
    masking = n + sum(round(n * len(h) * (L - li) / L) for li, h in enumerate(alive))
    return {"importance": n, "masking": masking,
            "pruning": n * (1 + len(fractions) * (2 + draws)),
            "attention": 2 * n}


# ------------------------------------------------------------------ JSON helpers
def nested(a: np.ndarray) -> list:
    """[L, H] → nested lists, NaN as None (JSON has no NaN)."""
    return [[None if not np.isfinite(v) else round(float(v), 6) for v in row]
            for row in np.asarray(a, dtype=np.float64)]


def array(rows) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64)
