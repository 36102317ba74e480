"""The per-layer probes of a checkpoint and of its base model, scored, cached, in one result.

:func:`analyze` reads every layer's [CLS] vector of the training sample and of the test
reviews (one pass per batch, ``reviewbert/layers/probes.py``), fits a probe per layer,
scores it on the test reviews, scores the checkpoint's own classifier on the same reviews,
then does the same for the base model (loaded as the Heads analysis loads it,
``reviewbert/heads/analysis.py``). :class:`LayersResult` holds it all;
:meth:`LayersResult.to_json` is the last line of ``reviewbert layers --json`` and the
cached ``result.json`` (``reviewbert/layers/cache.py``). Layer 0 is the embeddings' output.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

import numpy as np

from reviewbert.analysis import cache as prediction_cache
from reviewbert.layers import cache as layers_cache
from reviewbert.layers import probes as layer_probes


@dataclass
class LayersResult:
    layers: list[dict]                  # per layer of the checkpoint (probes.layer_scores)
    model: dict                         # the checkpoint's own classifier on the same reviews
    probes: layer_probes.Probes
    base_layers: list[dict] | None = None
    base_probes: layer_probes.Probes | None = None
    base_model: str = ""
    base_note: str = ""                 # why there is no base comparison, or ""
    n_train: int = 0
    n_test: int = 0
    num_labels: int = 5
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0
    source: dict = field(default_factory=dict)
    checkpoint: str = ""
    checkpoint_sha256: str = ""
    from_cache: bool = False

    @property
    def model_accuracy(self) -> float | None:
        return self.model.get("accuracy")

    @property
    def settled(self) -> int | None:
        """The first layer from which the rating is as readable as at the last (probes.settled_layer)."""
        return layer_probes.settled_layer(self.layers)

    def to_json(self) -> dict:
        return {"layers": self.layers, "base_layers": self.base_layers,
                "model_accuracy": self.model_accuracy, "model": self.model,
                "settled_layer": self.settled, "base_model": self.base_model,
                "base_note": self.base_note, "n_train": self.n_train, "n_test": self.n_test,
                "num_labels": self.num_labels, "settings": self.settings,
                "seconds": round(float(self.seconds), 2), "source": self.source,
                "checkpoint": self.checkpoint, "checkpoint_sha256": self.checkpoint_sha256}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"coef": self.probes.coef, "intercept": self.probes.intercept}
        if self.base_probes is not None:
            out.update(base_coef=self.base_probes.coef, base_intercept=self.base_probes.intercept)
        return out

    @classmethod
    def from_json(cls, d: dict, arrays: dict, from_cache: bool = True) -> "LayersResult":
        base = (layer_probes.Probes(arrays["base_coef"], arrays["base_intercept"])
                if "base_coef" in arrays else None)
        return cls(d["layers"], d.get("model") or {"accuracy": d.get("model_accuracy")},
                   layer_probes.Probes(arrays["coef"], arrays["intercept"]), d.get("base_layers"), base,
                   d.get("base_model", ""), d.get("base_note", ""), int(d.get("n_train", 0)),
                   int(d.get("n_test", 0)), int(d.get("num_labels", 5)),
                   dict(d.get("settings") or {}), float(d.get("seconds", 0.0)),
                   d.get("source") or {}, d.get("checkpoint", ""),
                   d.get("checkpoint_sha256", ""), from_cache)


# ------------------------------------------------------------------ lookups
def _key(checkpoint, train, test, max_length: int, base_model: str | None,
         settings: layer_probes.Settings) -> tuple[str, str]:
    from reviewbert.heads.analysis import base_identity
    _, base_sha = base_identity(base_model)
    ck = prediction_cache.checkpoint_fingerprint(checkpoint)
    key = layers_cache.cache_key(ck, prediction_cache.data_fingerprint(train),
                                 prediction_cache.data_fingerprint(test), max_length,
                                 settings.to_json(), base_sha)
    return key, ck


def training_sample(train, settings: layer_probes.Settings | None = None) -> list:
    """The seeded sample of the training split the probes are fitted on."""
    from reviewbert.heads.analysis import sample_reviews
    s = (settings or layer_probes.Settings()).resolved()
    return sample_reviews(train, s.train_cap, s.seed)


def latest(checkpoint, settings: layer_probes.Settings | None = None) -> LayersResult | None:
    """The newest cached result of this very checkpoint with these settings (default: the
    pages' and the CLI's), whatever reviews; None if there is none. Reads no review."""
    s = (settings or layer_probes.Settings()).resolved()
    ck = prediction_cache.checkpoint_fingerprint(checkpoint)
    got = layers_cache.latest(checkpoint, ck, s.to_json())
    return None if got is None else LayersResult.from_json(*got)


def planned(n_train: int, n_test: int, with_base: bool = True) -> int:
    """The progress total of :func:`analyze`: reviews read, by the checkpoint and the base."""
    return (n_train + n_test) * (2 if with_base else 1)


# ------------------------------------------------------------------ computing
@dataclass
class _Run:
    tokenizer: object
    train: list
    test: list
    scheme: object
    max_length: int
    settings: layer_probes.Settings
    progress: Callable[[int], None] | None
    on_stage: Callable[[str], None] | None

    def stage(self, text: str) -> None:
        if self.on_stage is not None:
            self.on_stage(text)


def _probe_model(run: _Run, model, who: str) -> tuple[list[dict], layer_probes.Probes, np.ndarray | None]:
    """(per-layer scores, the probes, the test logits or None) of one model."""
    s = run.settings
    run.stage(f"Reading every layer's [CLS] ({who}, training sample)")
    train_b = layer_probes.make_batches(run.tokenizer, [r.text for r in run.train], run.max_length)
    x_train, _ = layer_probes.read_vectors(model, train_b, s.precision, run.progress)
    run.stage(f"Reading every layer's [CLS] ({who}, test reviews)")
    test_b = layer_probes.make_batches(run.tokenizer, [r.text for r in run.test], run.max_length)
    x_test, logits = layer_probes.read_vectors(model, test_b, s.precision, run.progress)
    run.stage(f"Fitting and scoring a probe per layer ({who})")
    y_train = np.array([run.scheme.class_of(int(r.stars)) for r in run.train])
    y_test = np.array([run.scheme.class_of(int(r.stars)) for r in run.test])
    probes = layer_probes.fit_probes(x_train, y_train, run.scheme.num_labels, s.seed)
    return layer_probes.layer_scores(probes, x_test, y_test, s.seed), probes, logits


def _model_row(run: _Run, logits: np.ndarray | None) -> dict:
    if logits is None:
        return {"accuracy": None}
    from reviewbert.model.inference import softmax
    y = np.array([run.scheme.class_of(int(r.stars)) for r in run.test])
    row = layer_probes.interval_row(-1, y, softmax(logits), run.scheme.num_labels, run.settings.seed)
    row.pop("layer")
    return row


def _base(run: _Run, model, base_model: str | None, base_path: str | None):
    """(scores, probes, note): the base model's probes, or (None, None, why not)."""
    from reviewbert.heads.analysis import load_base
    base, note = load_base(base_model, base_path, model)
    if base is None:
        if run.progress is not None:
            run.progress(len(run.train) + len(run.test))    # the bar's share of the base
        return None, None, note
    rows, probes, _ = _probe_model(run, base.to(next(model.parameters()).device), "base model")
    return rows, probes, ""


def analyze(model, tokenizer, checkpoint, train, test, scheme, *, max_length: int,
            base_model: str | None, settings: layer_probes.Settings | None = None,
            progress: Callable[[int], None] | None = None,
            on_stage: Callable[[str], None] | None = None, source: dict | None = None,
            use_cache: bool = True) -> LayersResult:
    """The probes of ``model`` and of its base, fitted on a seeded sample of ``train`` (at most
    ``settings.train_cap``) and scored on ``test`` (objects with .text, .stars); from the cache
    when this checkpoint was already probed on these very reviews with these settings.
    ``progress(n)`` is told reviews read (:func:`planned` gives the total); ``on_stage(text)``
    names each stage. ``model`` is only read."""
    from reviewbert.heads.analysis import base_identity
    s = (settings or layer_probes.Settings()).resolved()
    train, test = training_sample(train, s), list(test)
    if not train or not test:
        raise layer_probes.LayersError("the probes need training reviews and test reviews; one set is empty")
    key, ck = _key(checkpoint, train, test, max_length, base_model, s)
    if use_cache and (got := layers_cache.find(checkpoint, key)) is not None:
        return LayersResult.from_json(*got)
    t0 = time.perf_counter()
    run = _Run(tokenizer, train, test, scheme, int(max_length), s, progress, on_stage)
    rows, probes, logits = _probe_model(run, model, "checkpoint")
    base_path, base_sha = base_identity(base_model)
    base_rows, base_probes, note = _base(run, model, base_model, base_path)
    res = LayersResult(rows, _model_row(run, logits), probes, base_rows, base_probes,
                       base_model or "", note, len(train), len(test), scheme.num_labels,
                       s.to_json(), time.perf_counter() - t0, source or {}, str(checkpoint), ck)
    if use_cache:
        meta = {"checkpoint": {"path": str(checkpoint), "sha256": ck}, "settings": s.to_json(),
                "base_model": {"name": base_model, "sha256": base_sha},
                "n_train": len(train), "n_test": len(test), "max_length": int(max_length),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        layers_cache.write(checkpoint, key, meta, res.arrays(), res.to_json())
    return res
