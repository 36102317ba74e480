"""Sentence vectors of a whole split, from the evaluation's own forward pass.

Each review's vector is, by default, the last layer's [CLS] hidden state: the very
vector the classifier head reads (through the pooler). ``EmbeddingSpec`` also offers
mean pooling (over the review's tokens, [CLS] and [SEP] included, padding excluded,
as sentence-transformers pools) and any other layer (0 = the embedding output).

They come free with the predictions: a :class:`VectorTap` attached to the model for
``batch_predict.predict_probs``' forward pass keeps the one layer it needs by a forward
hook on that layer alone (``output_hidden_states=True`` would record and hold every
layer's output of every batch; it stays the fallback for a model whose layers are not
found at ``base_model.encoder.layer``), and keeps one row per review, cast to float16
on the spot. They are
stored in the prediction cache beside ``predictions.parquet``
(``embeddings-<V>.npy``, layout in ``analysis/cache.py``). A cache written before
embeddings existed still reads; :func:`vectors_for` computes the missing vectors
(one pass) only when they are asked for.

``evaluate --save-embeddings FILE.npy`` writes the same rows, in the order of
``--save-predictions``; on the streamed path (more reviews than the cache holds)
through :class:`NpyRowWriter`, chunk by chunk.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from reviewbert.analysis import cache
from reviewbert.fsio import atomic_write_json
from reviewbert.model.batch_predict import predict_in_order

FORMAT = "reviewbert-embeddings/1"
POOLINGS = ("cls", "mean")
DTYPE = np.float16


@dataclass(frozen=True)
class EmbeddingSpec:
    """Which vector: ``pooling`` "cls" or "mean", ``layer`` a hidden-state index
    (-1 = the last layer, 0 = the embedding output)."""
    pooling: str = "cls"
    layer: int = -1

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {self.pooling!r}")

    def resolved_layer(self, n_layers: int) -> int:
        """The layer as an index 0..n_layers; out of range: ValueError."""
        layer = self.layer + n_layers + 1 if self.layer < 0 else self.layer
        if not 0 <= layer <= n_layers:
            raise ValueError(f"layer {self.layer} does not exist: this model has hidden states "
                             f"0..{n_layers} (0 = embeddings, {n_layers} = last layer)")
        return layer

    def name(self, n_layers: int) -> str:
        """The file tag, e.g. "cls-L6": the same vector has one name however it was asked for."""
        return f"{self.pooling}-L{self.resolved_layer(n_layers)}"

    def label(self, n_layers: int) -> str:
        layer = self.resolved_layer(n_layers)
        where = "embedding output" if layer == 0 else f"layer {layer}"
        if layer == n_layers:
            where += " (last)"
        return ("[CLS] vector" if self.pooling == "cls" else "mean of the tokens") + f", {where}"


DEFAULT = EmbeddingSpec()


def n_layers_of(model) -> int:
    return int(model.config.num_hidden_layers)


def layer_module(model, layer: int):
    """The module whose output is hidden state ``layer`` (0 = the embeddings, k = the
    k-th encoder layer) of a BERT-like model, unwrapped from DDP; None if not found."""
    base = getattr(getattr(model, "module", model), "base_model", None)
    try:
        return base.embeddings if layer == 0 else base.encoder.layer[layer - 1]
    except (AttributeError, IndexError, TypeError):
        return None


class VectorTap:
    """One vector per review from ``predict_probs``' forward pass (see batch_predict)."""

    def __init__(self, spec: EmbeddingSpec, n_layers: int):
        self.spec, self.layer = spec, spec.resolved_layer(n_layers)
        self.rows: list[torch.Tensor] = []
        self.vectors: np.ndarray | None = None
        self._hooked = False
        self._kept: torch.Tensor | None = None

    @contextlib.contextmanager
    def attached(self, model):
        """While open, a forward hook on the chosen layer alone keeps its output for
        :meth:`__call__`; a model without ``base_model.encoder.layer`` falls back to
        asking for every hidden state (:meth:`forward_kwargs`)."""
        module = layer_module(model, self.layer)
        if module is None:
            yield self
            return

        def keep(_module, _inputs, output):
            self._kept = output[0] if isinstance(output, tuple) else output

        handle = module.register_forward_hook(keep)
        self._hooked = True
        try:
            yield self
        finally:
            handle.remove()
            self._hooked, self._kept = False, None

    def forward_kwargs(self) -> dict:
        return {} if self._hooked else {"output_hidden_states": True}

    def __call__(self, batch: dict, out) -> torch.Tensor:
        h = self._kept if self._hooked else out.hidden_states[self.layer]  # [batch, tokens, hidden]
        if self.spec.pooling == "cls":
            v = h[:, 0].float()
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
            v = (h.float() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return v.to(torch.float16)

    def collect(self, vecs: torch.Tensor) -> None:
        self.rows.append(vecs.to(torch.float16))

    def in_order(self, idx: np.ndarray, n: int) -> None:
        """Rows were collected in scoring order, ``idx[j]`` the review of row j."""
        dim = self.rows[0].shape[1] if self.rows else 0
        got = torch.cat(self.rows).numpy() if self.rows else np.zeros((0, dim), DTYPE)
        out = np.zeros((n, dim), DTYPE)
        out[idx] = got
        self.vectors = out


def embed_texts(model, tokenizer, texts: list[str], *, spec: EmbeddingSpec = DEFAULT,
                max_length: int, precision: str = "fp32", batch_size: int = 64,
                progress: Callable[[int], None] | None = None) -> np.ndarray:
    """float16 [len(texts), hidden]: the bulk path's vectors (same batches, same padding)."""
    tap = VectorTap(spec, n_layers_of(model))
    predict_in_order(model, tokenizer, list(texts), max_length=max_length,
                     batch_size=batch_size, precision=precision, progress=progress, tap=tap)
    return tap.vectors


def _paths(folder: Path, name: str) -> tuple[Path, Path]:
    return Path(folder) / f"embeddings-{name}.npy", Path(folder) / f"embeddings-{name}.json"


def read_vectors(folder, name: str) -> np.ndarray | None:
    if folder is None:
        return None
    npy, meta = _paths(folder, name)
    got = cache.read_array(npy, meta, FORMAT)
    return None if got is None else got[0]


def write_vectors(folder, name: str, vectors: np.ndarray, spec: EmbeddingSpec, layer: int,
                  precision: str, seconds: float | None) -> None:
    npy, meta = _paths(folder, name)
    meta.unlink(missing_ok=True)
    cache.write_array(npy, vectors.astype(DTYPE))
    atomic_write_json(meta, {
        "format": FORMAT, "pooling": spec.pooling, "layer": layer,
        "shape": list(vectors.shape), "dtype": "float16", "precision": precision,
        "seconds": None if seconds is None else round(seconds, 3),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def vectors_for(preds, model, tokenizer, spec: EmbeddingSpec = DEFAULT, *,
                progress: Callable[[int], None] | None = None, use_cache: bool = True,
                compute: bool = True, batch_size: int = 64) -> np.ndarray | None:
    """float16 [n, hidden] for ``preds``' reviews: kept in memory, from the cache, or (with
    ``compute``) one pass with the predictions' own precision and max_length, then stored."""
    name = spec.name(n_layers_of(model))
    if name in preds.vectors:
        return preds.vectors[name]
    got = read_vectors(preds.folder, name) if use_cache else None
    if got is not None and len(got) == preds.n:
        preds.vectors[name] = got
        return got
    if not compute:
        return None
    t0 = time.perf_counter()
    precision = preds.meta.get("precision", "fp32")
    vecs = embed_texts(model, tokenizer, preds.frame["text"].tolist(), spec=spec,
                       max_length=int(preds.meta.get("max_length") or 256),
                       precision=precision, batch_size=batch_size, progress=progress)
    store(preds, name, vecs, spec, n_layers_of(model), precision,
          time.perf_counter() - t0, use_cache)
    return vecs


def store(preds, name, vecs, spec, n_layers, precision, seconds, use_cache=True) -> None:
    """Keep ``vecs`` with ``preds`` (memory, and the cache folder when there is one)."""
    preds.vectors[name] = vecs
    if use_cache and preds.folder is not None:
        try:
            write_vectors(preds.folder, name, vecs, spec, spec.resolved_layer(n_layers),
                          precision, seconds)
        except OSError:
            pass            # not kept; still used


def available(preds) -> list[str]:
    """Names of the vectors this evaluation has (memory or cache)."""
    names = set(preds.vectors)
    if preds.folder is not None:
        for f in Path(preds.folder).glob("embeddings-*.json"):
            names.add(f.name[len("embeddings-"):-len(".json")])
    return sorted(names)


@torch.inference_mode()
def query_vector(model, tokenizer, text: str, *, spec: EmbeddingSpec = DEFAULT,
                 max_length: int, precision: str = "fp32") -> np.ndarray:
    """The vector of one text, as the split's were made (for neighbours on the Predict page).

    A plain BERT goes module by module through its embeddings and encoder layers (as
    ``explain.value_vectors`` does: no output-capturing hook is installed on a shared
    model); anything else through :func:`embed_texts`."""
    layers = getattr(getattr(getattr(model, "bert", None), "encoder", None), "layer", None)
    if layers is None or precision != "fp32":
        return embed_texts(model, tokenizer, [text], spec=spec, max_length=max_length,
                           precision=precision)[0]
    layer = spec.resolved_layer(len(layers))
    ids = tokenizer(text, truncation=True, max_length=max_length,
                    return_tensors="pt")["input_ids"].to(next(model.parameters()).device)
    h = model.bert.embeddings(input_ids=ids)
    for module in layers[:layer]:
        h = module(h)
        h = h[0] if isinstance(h, tuple) else h
    v = h[0, 0] if spec.pooling == "cls" else h[0].mean(dim=0)
    return v.float().cpu().numpy().astype(DTYPE)


class NpyRowWriter:
    """A float16 .npy written chunk by chunk (the streamed ``evaluate``): a fixed 128-byte
    header (numpy's format 1.0: magic, version, header length, a padded dict) is written
    first with shape (0, dim) and rewritten with the final row count on close; the file
    goes to a temporary sibling and is renamed over ``path`` only then."""
    HEADER = 128

    def __init__(self, path, dim: int):
        self.path, self.dim, self.rows = Path(path), int(dim), 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.f = open(self.tmp, "wb")
        self.f.write(self._header(0))

    def _header(self, rows: int) -> bytes:
        d = f"{{'descr': '<f2', 'fortran_order': False, 'shape': ({rows}, {self.dim}), }}"
        pad = self.HEADER - 10 - len(d) - 1
        if pad < 0:
            raise ValueError("shape too large for the fixed header")
        body = (d + " " * pad + "\n").encode("latin1")
        return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body

    def write(self, vectors: np.ndarray) -> None:
        v = np.ascontiguousarray(vectors, dtype="<f2")
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"rows of {self.dim} expected, got shape {v.shape}")
        self.f.write(v.tobytes())
        self.rows += len(v)

    def close(self) -> Path:
        self.f.seek(0)
        self.f.write(self._header(self.rows))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        self.f.close()
        self.tmp.unlink(missing_ok=True)


def save_vectors(path, vectors: np.ndarray) -> Path:
    """``--save-embeddings``: one float16 row per review, atomically."""
    cache.write_array(Path(path), np.asarray(vectors, dtype=DTYPE))
    return Path(path)
