"""Linear probes on [CLS] after every layer: how much of the rating each layer already holds.

A probe is a scikit-learn ``LogisticRegression`` (after a ``StandardScaler``) fitted on the
[CLS] vector at one depth: layer 0 is the embeddings' output, layer l (1..L) the output of
encoder layer l. It is trained on a seeded sample of the checkpoint's training split
(:data:`TRAIN_CAP` reviews) and scored on its test split: accuracy, relaxed accuracy
(±1 star; 5-label checkpoints only) and macro AUC, each with a 95 % bootstrap interval
(``reviewbert/analysis/intervals.py``). The checkpoint's own classifier is scored on the
same test reviews (``model_accuracy``), and the same probes are fitted on the base model
the checkpoint was fine-tuned from, to show what fine-tuning added.

Reading the vectors. Every layer's [CLS] vector comes from ONE forward pass per batch
(``output_hidden_states=True``), not one pass per layer (:func:`read_vectors_per_layer`,
the baseline that ``bench/layers_probes.py`` times against it). The pass runs on a copy of
the model that shares every weight and uses PyTorch's fused attention (the pages' model
keeps its eager attention, which the attention views read), batched by length as the
Heads analysis batches (``reviewbert/heads/importance.py``), in the evaluation precision.

Layer 0's [CLS] vector is the same for every review (the [CLS] token at position 0), so its
probe can only learn the training sample's class shares: it is the floor, not a bug.

The fitted probes are stored as plain linear maps on the raw vectors (the scaler folded
into ``coef`` and ``intercept``), so :func:`layer_probabilities` needs no scikit-learn.
The whole result and its cache: :func:`analyze` (with ``reviewbert/layers/cache.py``).
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from reviewbert.model.batch_predict import encode_texts

TRAIN_CAP = 2000
"""Training reviews per probe fit (a seeded sample of the training split). Reading the
vectors is the slow part (a forward pass per review, for the checkpoint and again for its
base model), so the cap bounds the run; the test split (about 2,100 reviews for the demo)
is read in full. Fewer training reviews leave the last layer's probe further below the
model's own accuracy (the classifier was trained on the whole split).
``bench/layers_probes.py`` times the whole run."""
SEED = 0
C = 1.0                      # LogisticRegression's inverse regularisation (its default)
MAX_ITER = 2000
AUC_RESAMPLES = 100
"""Bootstrap resamples of each AUC interval: each one is a scikit-learn ``roc_auc_score``
call, and there are 2 × (L+1) + 1 intervals: a third of intervals.py's default."""
MISSING_CLASS_LOGIT = -30.0  # a class absent from the training sample: probability ~0


class LayersError(ValueError):
    """The probes cannot be computed or applied here (one line for people)."""


@dataclass
class Settings:
    train_cap: int | None = TRAIN_CAP
    seed: int = SEED
    precision: str = "auto"

    def resolved(self) -> "Settings":
        from reviewbert.model.device import resolve_precision
        cap = None if self.train_cap is None else int(self.train_cap)
        return Settings(cap, int(self.seed), resolve_precision(self.precision, torch.device("cpu")))

    def to_json(self) -> dict:
        return {"train_cap": self.train_cap, "seed": self.seed, "precision": self.precision}


# ------------------------------------------------------------------ the probes
@dataclass
class Probes:
    """One linear probe per layer, on the raw [CLS] vectors (the standardisation folded in)."""
    coef: np.ndarray            # [L+1, C, D]
    intercept: np.ndarray       # [L+1, C]

    @property
    def layers(self) -> int:
        """L + 1: the embeddings' output and every encoder layer."""
        return int(self.coef.shape[0])

    @property
    def num_labels(self) -> int:
        return int(self.coef.shape[1])

    def logits(self, vectors: np.ndarray) -> np.ndarray:
        """[L+1, N, D] -> [L+1, N, C]."""
        v = np.asarray(vectors, dtype=np.float64)
        return np.einsum("lnd,lcd->lnc", v, self.coef.astype(np.float64)) \
            + self.intercept.astype(np.float64)[:, None, :]

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        """[L+1, N, D] -> softmax [L+1, N, C]."""
        z = self.logits(vectors)
        z = np.exp(z - z.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)


def _fold(pipe, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """A fitted StandardScaler + LogisticRegression as (coef [C, D], intercept [C]) on the raw
    vectors, with a row for every class (sklearn fits only the classes it saw, and one row
    for two classes)."""
    scaler, lr = pipe.named_steps["standardscaler"], pipe.named_steps["logisticregression"]
    w = lr.coef_ / scaler.scale_[None, :]
    b = lr.intercept_ - w @ scaler.mean_
    if len(lr.classes_) == 2:               # sklearn's binary form: the logit of classes_[1]
        w, b = np.stack([-w[0] / 2, w[0] / 2]), np.array([-b[0] / 2, b[0] / 2])
    coef = np.zeros((num_labels, w.shape[1]))
    intercept = np.full(num_labels, MISSING_CLASS_LOGIT)
    coef[lr.classes_], intercept[lr.classes_] = w, b
    return coef, intercept


def fit_probes(vectors: np.ndarray, y, num_labels: int, seed: int = SEED) -> Probes:
    """A probe per layer: ``vectors`` [L+1, N, D], ``y`` class ids [N]."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits
    y = np.asarray(y, dtype=np.int64)
    L1, _, D = vectors.shape
    coef, intercept = np.zeros((L1, num_labels, D)), np.zeros((L1, num_labels))
    seen = np.unique(y)
    for layer in range(L1):
        if len(seen) < 2:                   # one class: nothing to separate
            intercept[layer] = MISSING_CLASS_LOGIT
            intercept[layer, seen] = 0.0
            continue
        pipe = make_pipeline(StandardScaler(),
                             LogisticRegression(C=C, max_iter=MAX_ITER, random_state=seed))
        # One BLAS thread: lbfgs's small products gain nothing from more, and on a CPU shared
        # with other work the idle threads' spinning made each fit tens of times slower.
        with warnings.catch_warnings(), threadpool_limits(1):
            # layer 0's constant vectors leave lbfgs nothing to converge on
            warnings.simplefilter("ignore", ConvergenceWarning)
            pipe.fit(vectors[layer], y)
        coef[layer], intercept[layer] = _fold(pipe, num_labels)
    return Probes(coef.astype(np.float32), intercept.astype(np.float32))


# ------------------------------------------------------------------ reading the vectors
def fused_view(model):
    """A per-call copy of ``model`` that shares every weight tensor (nothing is copied but
    the modules) and uses PyTorch's fused attention; hooks on the model come along."""
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    view = copy.deepcopy(model, memo=shared).eval()
    view.config._attn_implementation = "sdpa"
    return view


def _autocast(precision: str, device: torch.device):
    if precision == "bf16" and device.type == "cpu":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _rows(batches) -> int:
    """Rows of the output: the batches' largest review position + 1 (some batches of a set
    may be left out; their rows stay zero)."""
    return max((int(b.rows.max()) + 1 for b in batches if len(b.rows)), default=0)


def read_vectors(model, batches, precision: str = "fp32",
                 progress: Callable[[int], None] | None = None):
    """(every layer's [CLS] vector float32 [L+1, N, D], the classifier's logits [N, C] or
    None for a bare encoder): one forward pass per batch (``batches``: heads.importance's)."""
    view = fused_view(model)
    device = next(model.parameters()).device
    cfg = model.config
    n = _rows(batches)
    out = np.zeros((int(cfg.num_hidden_layers) + 1, n, int(cfg.hidden_size)), dtype=np.float32)
    logits = None
    with torch.inference_mode(), _autocast(precision, device):
        for b in batches:
            res = view(input_ids=b.ids.to(device), attention_mask=b.mask.to(device),
                       output_hidden_states=True)
            out[:, b.rows] = torch.stack([h[:, 0] for h in res.hidden_states]).float().cpu().numpy()
            if getattr(res, "logits", None) is not None:
                if logits is None:
                    logits = np.zeros((n, res.logits.shape[-1]), dtype=np.float32)
                logits[b.rows] = res.logits.float().cpu().numpy()
            if progress is not None:
                progress(len(b.rows))
    return out, logits


def _layer_module(model, layer: int):
    base = model.base_model
    return base.embeddings if layer == 0 else base.encoder.layer[layer - 1]


def read_vectors_per_layer(model, batches, precision: str = "fp32") -> np.ndarray:
    """The same [L+1, N, D] as :func:`read_vectors`, read the slow way: a forward hook on one
    layer's module and a full forward pass per layer (L+1 passes per batch). The baseline of
    ``bench/layers_probes.py`` and the unit tests' check of the one-pass reading."""
    view = fused_view(model)
    device = next(model.parameters()).device
    L1, n = int(model.config.num_hidden_layers) + 1, _rows(batches)
    out = np.zeros((L1, n, int(model.config.hidden_size)), dtype=np.float32)
    for layer in range(L1):
        got = {}

        def keep(module, args, output):
            got["h"] = output[0] if isinstance(output, tuple) else output
        handle = _layer_module(view, layer).register_forward_hook(keep)
        try:
            with torch.inference_mode(), _autocast(precision, device):
                for b in batches:
                    view(input_ids=b.ids.to(device), attention_mask=b.mask.to(device))
                    out[layer, b.rows] = got["h"][:, 0].float().cpu().numpy()
        finally:
            handle.remove()
    return out


def make_batches(tokenizer, texts: list[str], max_length: int) -> list:
    """The texts' token ids, batched by length (``reviewbert/heads/importance.py``)."""
    from reviewbert.heads.importance import make_batches as by_length
    ids = encode_texts(tokenizer, list(texts), max_length)
    return by_length(ids, tokenizer.pad_token_id or 0)


# ------------------------------------------------------------------ scores
def interval_row(layer: int, y, probs, num_labels: int, seed: int) -> dict:
    """{layer, accuracy, relaxed_accuracy, auc, and each one's ``<name>_ci``} of ``probs``."""
    from threadpoolctl import threadpool_limits

    from reviewbert.analysis.intervals import metric_intervals
    with threadpool_limits(1):          # as in fit_probes: the bootstrap's arrays are small
        iv = metric_intervals(y, probs, num_labels, auc_resamples=AUC_RESAMPLES, seed=seed)
    row: dict = {"layer": layer}
    for name in ("accuracy", "relaxed_accuracy", "auc"):
        got = iv.get(name)
        row[name] = None if got is None else round(float(got.value), 6)
        row[f"{name}_ci"] = (None if got is None or not np.isfinite(got.low)
                             else [round(float(got.low), 6), round(float(got.high), 6)])
    return row


def layer_scores(probes: Probes, vectors: np.ndarray, y, seed: int = SEED) -> list[dict]:
    """Per layer on held-out ``vectors`` [L+1, N, D]: {layer, accuracy, relaxed_accuracy, auc}
    and each one's 95 % interval (``<name>_ci``: [low, high], or None where undefined)."""
    probs = probes.probabilities(vectors)
    return [interval_row(layer, y, probs[layer], probes.num_labels, seed)
            for layer in range(probes.layers)]


def settled_layer(rows: list[dict]) -> int | None:
    """The first layer from which every probe's accuracy interval reaches the last layer's
    accuracy: from there on, the rating is as readable as it will get (within the noise).
    None without intervals."""
    if not rows or any(r.get("accuracy_ci") is None for r in rows):
        return None
    last = rows[-1]["accuracy"]
    settled = len(rows) - 1
    for r in reversed(rows):
        if r["accuracy_ci"][1] < last:
            break
        settled = r["layer"]
    return int(settled)


# ------------------------------------------------------------------ one review
def _unpack(model_or_predictor, tokenizer, max_length):
    """(model, tokenizer, max_length) of a Predictor, or of a model with those given."""
    if hasattr(model_or_predictor, "tokenizer") and hasattr(model_or_predictor, "max_length"):
        p = model_or_predictor
        return p.model, tokenizer or p.tokenizer, max_length or p.max_length
    if tokenizer is None:
        raise LayersError("layer_probabilities needs the tokenizer with a bare model")
    return model_or_predictor, tokenizer, max_length or 512


def layer_probabilities(model_or_predictor, text: str, probes: Probes, *, tokenizer=None,
                        max_length: int | None = None) -> np.ndarray:
    """One review's star probabilities after each layer, [L+1, num_labels] (row 0: the
    embeddings), as the probes read its [CLS] vectors: one forward pass, in fp32."""
    model, tok, ml = _unpack(model_or_predictor, tokenizer, max_length)
    L1 = int(model.config.num_hidden_layers) + 1
    if probes.layers != L1 or probes.coef.shape[2] != int(model.config.hidden_size):
        raise LayersError(f"these probes were fitted on a model with {probes.layers - 1} layers "
                          f"of {probes.coef.shape[2]} dimensions; this one has {L1 - 1} of "
                          f"{model.config.hidden_size}")
    batches = make_batches(tok, [str(text)], ml)
    vectors, _ = read_vectors(model, batches, "fp32")
    return probes.probabilities(vectors)[:, 0, :]
