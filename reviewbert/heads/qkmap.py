"""Every head's query and key vectors over many reviews, for a query–key map in the spirit of
AttentionViz (Yeh et al., VIS 2023): one head's queries and keys in one joint 2-D projection.

Reading. One forward pass over the reviews reads every head of every layer: forward hooks on
each layer's ``attention.self.query`` and ``attention.self.key`` Linear modules (of a per-call
copy of the model that shares its weights, ``heads.importance.MaskedModel``, so the pages'
cached model never carries a hook) keep their outputs, ``[tokens, heads, head_dim]`` per
layer, in the Heads analysis's evaluation precision (bf16 autocast on a CPU with bf16 units,
else fp32; kept as float16). These are the vectors whose dot product, divided by
√head_dim, is the attention logit.
A pruned checkpoint (``reviewbert/model/pruning.py``) has fewer heads in some layers: a
removed head has no vectors, and :meth:`QKVectors.head` raises :class:`HeadRemoved`.

Tokens. At most :data:`MAX_TOKENS` tokens are kept: a seeded uniform sample of every
(review, position) of the reviews (padding excluded), so that every review counts in
proportion to its length; each with its text, review, position, kind (:data:`KINDS`) and a
few wordpieces on each side for the hover.

Normalisation (:func:`normalise`, AttentionViz's two free parameters, solved together so
that both of its conditions hold exactly): queries are scaled by α and keys by 1/α (every
dot product unchanged), then the keys are translated so that the two centroids coincide;
α is the root (scipy's ``brentq``) that makes the mean query norm equal the mean key norm
after the translation. Every query–key dot product becomes ``q·k + q·c`` with ``c =
α²·μ_q − μ_k`` the same for every key, so each query's softmax over the keys, its attention
row, is unchanged.

Projection: the split map's code (``reviewbert/analysis/projection.py``: scikit-learn's PCA
by default, umap-learn's UMAP when asked), which scales every vector to unit length first,
so the map's distances are the cosine geometry of the normalised vectors; projections are
cached beside the vectors. :func:`thumbnails` gives every head a small PCA map (the page's
matrix of heads).

Cache, beside the checkpoint (the prediction cache's folders, ``analysis/cache.py``)::

    <checkpoint>/.analysis/qkmap/<KEY>/   KEY = first 20 hex of sha256 over the JSON of
                                          {"format", "version", "checkpoint", "data",
                                          "max_length", "max_tokens", "seed", "precision"}
        vectors.safetensors               q.<layer> and k.<layer>: float16 [tokens, heads
                                          left in that layer, head_dim] (a layer left with
                                          no head has none)
        tokens.parquet                    one row per token kept: review (int32, row in the
                                          reviews given), position (int32, 0 = [CLS]), token
                                          (str), kind (str, one of KINDS), left, right (str:
                                          up to WINDOW wordpieces each side, joined)
        projection-L<l>H<h>-<M>.npy/.json one head's projection (``analysis/projection.py``)
        thumbnails-<n>.npy/.json          every head's small map (:func:`thumbnails`)
        meta.json                         written LAST: {"format", "key", "version",
                                          "checkpoint": {"path", "sha256"}, "data": {"sha256",
                                          "n"}, "max_length", "max_tokens", "seed",
                                          "precision" ("bf16"|"fp32": the pass), "alive":
                                          [[heads]] per layer, "heads", "head_dim", "tokens",
                                          "seconds", "created"}

bench/layers_qkmap.py times reading, projecting and drawing one head against its baselines.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from reviewbert.analysis import cache as prediction_cache
from reviewbert.analysis import projection
from reviewbert.fsio import atomic_write, atomic_write_json
from reviewbert.heads import importance as heads
from reviewbert.heads.roles import is_punctuation
from reviewbert.model.batch_predict import encode_texts
from reviewbert.model.device import resolve_precision

FORMAT = "reviewbert-qkmap/1"
VERSION = 1                 # bump when what is read or kept changes: old folders are skipped
SUBFOLDER = "qkmap"
META, VECTORS, TOKENS = "meta.json", "vectors.safetensors", "tokens.parquet"
MAX_TOKENS = 4000
"""Tokens kept (a seeded sample of all of them): 8,000 points in one head's map, and a cache
of tokens × hidden × 2 (q, k) × layers float16 values (37 MB for the demo's 6 × 384)."""
MAX_REVIEWS = 500
"""Reviews read at most (the Heads page's sample is cut to its first ones): the pass is one
forward per review, and MAX_TOKENS already caps what is kept."""
WINDOW = 6                  # wordpieces shown each side of a token in the hover
THUMB_TOKENS = 60           # tokens per head in the thumbnails (as many queries and keys)
SEED = 0
KEEP = 4                    # folders kept per checkpoint by prune()
KINDS = ("[CLS]", "[SEP]", "punctuation", "word", "subword")


class HeadRemoved(ValueError):
    """The head asked for was removed from this (pruned) checkpoint: it has no vectors."""


# ------------------------------------------------------------------ the vectors
@dataclass
class QKVectors:
    queries: list[np.ndarray]          # per layer [tokens, heads left, head_dim]
    keys: list[np.ndarray]
    alive: list[list[int]]             # per layer: the heads there (original numbers)
    heads: int                         # heads per layer in the unpruned model
    tokens: pd.DataFrame               # one row per token (module docstring)
    n_reviews: int
    folder: Path | None = None         # its cache folder (projections go there too)
    seconds: float = 0.0               # the reading pass (when cached: of the first time)
    from_cache: bool = False

    @property
    def layers(self) -> int:
        return len(self.queries)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def head_dim(self) -> int:
        return int(self.queries[0].shape[-1])

    def alive_mask(self) -> np.ndarray:
        out = np.zeros((self.layers, self.heads), dtype=bool)
        for li, hs in enumerate(self.alive):
            out[li, hs] = True
        return out

    def head(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(queries, keys) of one head, float32 [tokens, head_dim] each."""
        if not (0 <= layer < self.layers and 0 <= head < self.heads):
            raise ValueError(f"no layer {layer + 1}, head {head + 1}: this model has "
                             f"{self.layers} layers of {self.heads} heads")
        if head not in self.alive[layer]:
            raise HeadRemoved(f"Layer {layer + 1}, head {head + 1} was removed from this "
                              "checkpoint (pruned): it has no query or key vectors.")
        j = self.alive[layer].index(head)
        return (self.queries[layer][:, j].astype(np.float32),
                self.keys[layer][:, j].astype(np.float32))


def token_kind(token: str, position: int, cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> str:
    """One of :data:`KINDS` for a wordpiece."""
    if position == 0 or token == cls_token:
        return "[CLS]"
    if token == sep_token:
        return "[SEP]"
    if is_punctuation(token):
        return "punctuation"
    return "subword" if token.startswith("##") else "word"


def choose_tokens(lengths, max_tokens: int = MAX_TOKENS, seed: int = SEED) -> list[np.ndarray]:
    """Per review, the positions kept (sorted): all of them when the reviews hold at most
    ``max_tokens`` tokens, else a seeded uniform sample of ``max_tokens`` (review, position)s."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
    total = int(lengths.sum())
    if total <= max_tokens:
        return [np.arange(n) for n in lengths]
    flat = np.sort(np.random.default_rng(seed).choice(total, size=max_tokens, replace=False))
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return [flat[(flat >= a) & (flat < b)] - a for a, b in zip(starts[:-1], starts[1:])]


def context(pieces: list[str], p: int, window: int = WINDOW) -> tuple[str, str, str]:
    """(left, the token, right): the token's text with up to ``window`` wordpieces each
    side, spaced as words (a "##" piece touches the one before it); "…" where the review
    goes on. ``left + token + right`` reads as the text."""
    a, b = max(0, p - window), min(len(pieces), p + 1 + window)
    text, sep = [], []
    for i in range(a, b):
        glued = pieces[i].startswith("##") and i > a
        text.append(pieces[i][2:] if glued else pieces[i])
        sep.append("" if i == a or glued else " ")
    j = p - a
    left = "".join(s + t for s, t in zip(sep[:j], text[:j])) + sep[j]
    right = "".join(s + t for s, t in zip(sep[j + 1:], text[j + 1:]))
    return ("…" if a > 0 else "") + left, text[j], right + ("…" if b < len(pieces) else "")


def token_table(tokenizer, ids: list[list[int]], keep: list[np.ndarray]) -> pd.DataFrame:
    """One row per kept token, in review then position order (module docstring)."""
    rows = []
    for r, (seq, pos) in enumerate(zip(ids, keep)):
        pieces = tokenizer.convert_ids_to_tokens(seq)
        for p in pos:
            left, _, right = context(pieces, int(p))
            rows.append((r, int(p), pieces[p], token_kind(pieces[p], int(p), tokenizer.cls_token,
                                                          tokenizer.sep_token), left, right))
    frame = pd.DataFrame(rows, columns=["review", "position", "token", "kind", "left", "right"])
    return frame.astype({"review": "int32", "position": "int32"})


class _Tap:
    """Forward hooks on every layer's query and key Linear of ``mm`` (a MaskedModel copy),
    writing the kept tokens' outputs into preallocated arrays."""

    def __init__(self, mm, n_tokens: int, dtype):
        self.alive, self.dh = mm.alive, mm.dh
        self.out = {side: [np.empty((n_tokens, len(a), mm.dh), dtype=dtype) for a in mm.alive]
                    for side in ("q", "k")}
        self.where: tuple | None = None          # (batch rows, positions, destinations)
        for li, layer in enumerate(mm.layer_modules):
            layer.attention.self.query.register_forward_hook(self._hook("q", li))
            layer.attention.self.key.register_forward_hook(self._hook("k", li))

    def _hook(self, side: str, li: int):
        def keep(module, args, output):
            h = len(self.alive[li])
            if self.where is None or h == 0:
                return
            rows, pos, dest = self.where
            got = output[rows, pos].reshape(len(rows), h, self.dh)
            self.out[side][li][dest] = got.float().numpy()
        return keep


def _where(b, keep: list[np.ndarray], offsets: np.ndarray) -> tuple:
    rows, pos, dest = [], [], []
    for j, i in enumerate(b.rows):
        p = keep[i]
        rows.append(np.full(len(p), j))
        pos.append(p)
        dest.append(offsets[i] + np.arange(len(p)))
    cat = lambda xs: torch.from_numpy(np.concatenate(xs).astype(np.int64))  # noqa: E731
    return cat(rows), cat(pos), np.concatenate(dest)


def collect(model, tokenizer, texts: list[str], *, max_length: int, max_tokens: int = MAX_TOKENS,
            seed: int = SEED, progress: Callable[[int], None] | None = None,
            precision: str = "auto", dtype=np.float16) -> QKVectors:
    """Every head's query and key vectors of (a sample of) the tokens of ``texts``: one
    forward pass, batched by length, in ``precision`` ("auto": bf16 on a CPU with bf16
    units, as the Heads analysis's passes). ``progress(n)`` is told reviews as they finish."""
    if why := heads.unsupported_reason(model):
        raise ValueError(why)
    if not texts:
        raise ValueError("no reviews to read query and key vectors from")
    t0 = time.perf_counter()
    ids = encode_texts(tokenizer, list(texts), max_length)
    keep = choose_tokens([len(x) for x in ids], max_tokens, seed)
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in keep])])
    mm = heads.MaskedModel(model)
    tap = _Tap(mm, int(offsets[-1]), dtype)
    with torch.inference_mode(), heads.autocast(resolve_precision(precision, "cpu")):
        for b in heads.make_batches(ids, tokenizer.pad_token_id or 0):
            tap.where = _where(b, keep, offsets)
            mm.encoder(input_ids=b.ids, attention_mask=b.mask)
            if progress is not None:
                progress(len(b.rows))
    tap.where = None
    return QKVectors(tap.out["q"], tap.out["k"], [list(a) for a in mm.alive], mm.H,
                     token_table(tokenizer, ids, keep), len(texts),
                     seconds=time.perf_counter() - t0)


# ------------------------------------------------------------------ the cache
def cache_key(checkpoint_sha: str, data_sha: str, max_length: int, max_tokens: int,
              seed: int, precision: str) -> str:
    return prediction_cache.key_of({"format": FORMAT, "version": VERSION,
                                     "checkpoint": checkpoint_sha, "data": data_sha,
                                     "max_length": int(max_length), "max_tokens": int(max_tokens),
                                     "seed": int(seed), "precision": precision})


def key_of(checkpoint, reviews, *, max_length: int, max_tokens: int = MAX_TOKENS,
           seed: int = SEED, precision: str = "auto") -> str:
    """The cache key of these reviews (objects with .text, .stars) on this checkpoint."""
    return cache_key(prediction_cache.checkpoint_fingerprint(checkpoint),
                     prediction_cache.data_fingerprint(reviews), max_length, max_tokens, seed,
                     resolve_precision(precision, "cpu"))


def _read(folder: Path) -> QKVectors | None:
    from safetensors.numpy import load_file
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("key") != folder.name:
            return None
        arrays = load_file(str(folder / VECTORS))
        tokens = pd.read_parquet(folder / TOKENS)
    except (OSError, ValueError, KeyError):
        return None
    alive, n, dh = meta["alive"], len(tokens), int(meta["head_dim"])
    empty = np.zeros((n, 0, dh), dtype=np.float16)
    q = [arrays.get(f"q.{li}", empty) for li in range(len(alive))]
    k = [arrays.get(f"k.{li}", empty) for li in range(len(alive))]
    if any(len(a) != n for a in q + k):
        return None
    return QKVectors(q, k, alive, int(meta["heads"]), tokens, int(meta["data"]["n"]), folder,
                     float(meta.get("seconds") or 0.0), True)


def lookup(checkpoint, key: str) -> QKVectors | None:
    """The cached vectors of ``key``, or None; never computes."""
    for root in prediction_cache.roots(checkpoint):
        got = _read(root / SUBFOLDER / key)
        if got is not None:
            return got
    return None


def _store(checkpoint, key: str, vecs: QKVectors, meta: dict) -> Path | None:
    from safetensors.numpy import save_file
    try:
        folder = prediction_cache.writable_root(checkpoint) / SUBFOLDER / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / META).unlink(missing_ok=True)         # unfinished until meta.json lands
        arrays = {f"{side}.{li}": np.ascontiguousarray(a, dtype=np.float16)
                  for side, per in (("q", vecs.queries), ("k", vecs.keys))
                  for li, a in enumerate(per) if a.shape[1]}
        atomic_write(folder / VECTORS, lambda tmp: save_file(arrays, tmp))
        atomic_write(folder / TOKENS, lambda tmp: vecs.tokens.to_parquet(tmp, index=False))
        atomic_write_json(folder / META, {**meta, "format": FORMAT, "key": key})
    except OSError:
        return None         # a full or read-only disk: the vectors are still good, not kept
    prune(checkpoint)
    return folder


def read_or_collect(model, tokenizer, checkpoint, reviews, *, max_length: int,
                    max_tokens: int = MAX_TOKENS, seed: int = SEED,
                    progress: Callable[[int], None] | None = None, precision: str = "auto",
                    use_cache: bool = True) -> QKVectors:
    """The vectors of ``reviews`` (objects with .text, .stars; at most :data:`MAX_REVIEWS`,
    the first ones): from the cache beside ``checkpoint``, else read and cached."""
    reviews = list(reviews)[:MAX_REVIEWS]
    precision = resolve_precision(precision, "cpu")
    key = key_of(checkpoint, reviews, max_length=max_length, max_tokens=max_tokens, seed=seed,
                 precision=precision)
    if use_cache and (got := lookup(checkpoint, key)) is not None:
        return got
    vecs = collect(model, tokenizer, [r.text for r in reviews], max_length=max_length,
                   max_tokens=max_tokens, seed=seed, progress=progress, precision=precision)
    if use_cache:
        meta = {"version": VERSION,
                "checkpoint": {"path": str(checkpoint),
                               "sha256": prediction_cache.checkpoint_fingerprint(checkpoint)},
                "data": {"sha256": prediction_cache.data_fingerprint(reviews), "n": len(reviews)},
                "max_length": int(max_length), "max_tokens": int(max_tokens), "seed": int(seed),
                "precision": precision, "alive": vecs.alive, "heads": vecs.heads, "head_dim": vecs.head_dim,
                "tokens": vecs.n_tokens, "seconds": round(vecs.seconds, 3),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        vecs.folder = _store(checkpoint, key, vecs, meta)
    return vecs


def prune(checkpoint, keep: int = KEEP) -> None:
    """Drop all but the ``keep`` newest finished folders of this checkpoint."""
    for root in prediction_cache.roots(checkpoint):
        base = root / SUBFOLDER
        if not base.is_dir():
            continue
        done = [d for d in base.iterdir() if (d / META).is_file()]
        done.sort(key=lambda d: (d / META).stat().st_mtime, reverse=True)
        for d in done[keep:]:
            shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ normalising, projecting
@dataclass
class Normalised:
    queries: np.ndarray        # α·q
    keys: np.ndarray           # k/α + (α·μ_q − μ_k/α): centroids coincide
    alpha: float
    offset: np.ndarray         # c = α²·μ_q − μ_k: q'·k' = q·k + q·c for every key


def normalise(q, k) -> Normalised:
    """AttentionViz's normalisation of one head's queries and keys (module docstring)."""
    from scipy.optimize import brentq
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    mq, mk = q.mean(0), k.mean(0)
    kc = k - mk
    qn = np.linalg.norm(q, axis=1).mean()

    def gap(log_a: float) -> float:           # mean key norm − mean query norm, after both steps
        a = np.exp(log_a)
        return float(np.linalg.norm(kc / a + a * mq, axis=1).mean() - a * qn)

    try:
        alpha = float(np.exp(brentq(gap, -20.0, 20.0, xtol=1e-12)))
    except ValueError:      # no sign change: all queries one vector (or all zero); keep α = 1
        alpha = 1.0
    return Normalised((alpha * q).astype(np.float32), (kc / alpha + alpha * mq).astype(np.float32),
                      alpha, (alpha ** 2 * mq - mk).astype(np.float32))


def head_vectors(vecs: QKVectors, layer: int, head: int) -> np.ndarray:
    """One head's normalised queries then keys, float32 [2 × tokens, head_dim]."""
    n = normalise(*vecs.head(layer, head))
    return np.concatenate([n.queries, n.keys])


def project_head(vecs: QKVectors, layer: int, head: int, method: str = "pca",
                 **params) -> projection.Projection:
    """The joint 2-D map of one head (rows: its queries, then its keys), from the cache
    folder when it was projected before."""
    x = head_vectors(vecs, layer, head)
    return projection.project(x, method, 2, folder=vecs.folder,
                              vectors_name=f"L{layer}H{head}", **params)


def thumbnails(vecs: QKVectors, n: int = THUMB_TOKENS, seed: int = SEED) -> np.ndarray:
    """Every head's small map: float32 [layers, heads, 2 (queries, keys), n, 2], each head's
    PCA of ``n`` sampled tokens' normalised queries and keys scaled into [-1, 1]; NaN for a
    removed head. Cached in the vectors' folder."""
    n = min(n, vecs.n_tokens)
    paths = None
    if vecs.folder is not None:
        paths = (vecs.folder / f"thumbnails-{n}-{seed}.npy", vecs.folder / f"thumbnails-{n}-{seed}.json")
        got = prediction_cache.read_array(*paths, FORMAT)
        if got is not None and got[0].shape[:2] == (vecs.layers, vecs.heads):
            return got[0]
    rows = np.sort(np.random.default_rng(seed).choice(vecs.n_tokens, size=n, replace=False))
    out = np.full((vecs.layers, vecs.heads, 2, n, 2), np.nan, dtype=np.float32)
    for li, hs in enumerate(vecs.alive):
        for h in hs:
            x = head_vectors(vecs, li, h)
            coords, _ = projection.pca(np.concatenate([x[rows], x[vecs.n_tokens + rows]]), 2, seed)
            if coords.shape[1] < 2:
                coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
            coords = coords / max(float(np.abs(coords).max()), 1e-9)
            out[li, h] = coords.reshape(2, n, 2)
    if paths is not None:
        try:
            prediction_cache.write_array(paths[0], out)
            atomic_write_json(paths[1], {"format": FORMAT, "n": n, "seed": seed})
        except OSError:
            pass
    return out
