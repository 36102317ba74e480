"""Activation patching between two reviews: where in the model does their difference act?

A clean review and a corrupted one (the original and an edit, say) get different
logits. One hidden state of the clean run is copied into the corrupted run, the rest of
the corrupted run goes on from there, and the question is how much of the logit
difference that one patch restores (Meng et al. 2022's causal tracing, with a second
review as the corruption instead of noise; Heimersheim & Nanda 2024 on reading such
grids)::

    restored = (patched − corrupted) / (clean − corrupted)

0 = the patch changes nothing, 1 = it gives back the clean run's difference.

The metric of any run is its logit of rating a minus its logit of rating b: a is the
clean review's top rating, b the corrupted review's top rating, or, where both reviews
get the same top rating, the clean review's runner-up. When the clean and corrupted
metrics are equal (identical runs) nothing can be restored and the grid is all n/a
(:attr:`PatchResult.restorable`); the raw patched metrics are still there.

The word grid. Rows are the embeddings' output (row 0) and each layer's output (rows
1…L); columns are [CLS], each word, then [SEP]. A word's state is all its wordpieces.

Alignment (what makes a pair patchable). Both reviews must have the same number of
words, and neither may be longer than the model reads (``max_length``): otherwise
:class:`PatchingError` says so in one line. A word whose wordpiece count differs between
the two ("great" is one piece, "unremarkable" several) cannot be copied piece for piece:
its column is n/a (NaN, null in JSON), and the other words are patched at their own
positions in each run (a word after it sits at a shifted position; its clean state is
still copied whole). [CLS] and [SEP] always align.

The head grid (L × H). One head's output — its slice ``[h·d, (h+1)·d)`` of the input of
``attention.output.dense`` — at one layer, copied from the clean run at every aligned
position (every position when all words align), same normalisation. Patching every head
of a layer at once equals patching that layer's attention output projection
(``tests/unit/test_patching.py``).

Method: forward hooks on a per-call copy of the model that shares its weights
(``reviewbert.heads.importance.MaskedModel``, which head masking uses: the shared cached
model never sees a hook). nnsight (0.8.1, maintained, pip-installable here) was checked
and not used: its traces run the whole model from the embeddings, where this grid starts
each row from the corrupted run's saved layer input (layers below the patched one give
the same states), and it would add an HTTP/websocket client stack for remote execution
that ReviewBERT has no use for.

Batched. The clean and the corrupted run are each made once, keeping every layer's
input. All the patches of one row are then one batch of copies of the corrupted state
(each copy with its own patch) sent through the layers above that row only; the copies
have the same length, so there is no padding. :func:`grid_one_by_one` is the plain
reference (one full hooked forward pass per patch) that the tests compare against and
``bench/layers_patching.py`` times. Always fp32: patching every position at the last
layer reproduces the clean logits to 1e-5.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from reviewbert.heads.importance import MaskedModel, unsupported_reason
from reviewbert.model.inference import encode

CLS, SEP = "[CLS]", "[SEP]"
PATCH_TOKENS = 4096
"""A batch of patched copies holds at most this many tokens (copies × the corrupted
review's length): 16 copies of a 256-token review, 64 of a 64-token one."""
TINY = 1e-6
"""Below this |clean − corrupted| the two runs agree and there is nothing to restore."""


class PatchingError(ValueError):
    """A pair that cannot be patched (empty, too long, not alignable); one-line message."""


# ------------------------------------------------------------------ the pair
@dataclass
class Pair:
    """Two encoded reviews and the columns of the word grid."""
    clean_ids: list[int]
    corrupt_ids: list[int]
    columns: list[str]                          # [CLS], word labels ("great→terrible"), [SEP]
    clean_words: list[str]
    corrupt_words: list[str]
    clean_pos: list[list[int]]                  # each column's positions in the clean run
    corrupt_pos: list[list[int] | None]         # … in the corrupted run; None: n/a

    @property
    def aligned(self) -> list[int]:
        """The columns that can be patched."""
        return [j for j, p in enumerate(self.corrupt_pos) if p is not None]

    def aligned_positions(self) -> tuple[list[int], list[int]]:
        """(clean positions, corrupted positions) of every aligned column, in order."""
        k = [p for j in self.aligned for p in self.clean_pos[j]]
        c = [p for j in self.aligned for p in self.corrupt_pos[j]]
        return k, c


def _encoded(tokenizer, text, max_length: int, which: str):
    if not isinstance(text, str) or not text.strip():
        raise PatchingError(f"the {which} review is empty: type some text")
    enc = encode(tokenizer, text, max_length)
    if enc.chars_cut or enc.truncated:
        raise PatchingError(f"the {which} review is too long: {enc.n_original:,} wordpieces, "
                            f"the model reads {max_length}")
    if not enc.words:
        raise PatchingError(f"the {which} review has no character the model reads")
    return enc


def _positions(enc) -> list[list[int]]:
    """Each word's wordpiece positions, with [CLS] first and [SEP] last."""
    words: list[list[int]] = [[] for _ in enc.words]
    for t, w in enumerate(enc.word_ids):
        if w is not None:
            words[w].append(t)
    return [[0], *words, [len(enc.ids) - 1]]


def align(tokenizer, clean: str, corrupt: str, max_length: int) -> Pair:
    """The pair's columns under the alignment rule (module docstring), or PatchingError."""
    a = _encoded(tokenizer, clean, max_length, "clean")
    b = _encoded(tokenizer, corrupt, max_length, "corrupted")
    if len(a.words) != len(b.words):
        raise PatchingError(f"the two reviews must have the same number of words to be patched "
                            f"word for word: {len(a.words)} (clean) vs {len(b.words)} (corrupted)")
    pa, pb = _positions(a), _positions(b)
    corrupt_pos = [q if len(p) == len(q) else None for p, q in zip(pa, pb)]
    labels = [w if w == v else f"{w}→{v}" for w, v in zip(a.words, b.words)]
    return Pair(a.ids, b.ids, [CLS, *labels, SEP], a.words, b.words, pa, corrupt_pos)


# ------------------------------------------------------------------ the result
@dataclass
class PatchResult:
    columns: list[str]
    grid: np.ndarray                    # [L + 1, columns] restored share; NaN: n/a
    patched: np.ndarray                 # [L + 1, columns] raw metric of each patched run
    ratings: tuple[int, int]            # class ids (a, b) of the metric
    clean_logits: np.ndarray
    corrupt_logits: np.ndarray
    head_grid: np.ndarray | None = None         # [L, H]; NaN: removed head or n/a
    head_patched: np.ndarray | None = None
    seconds: float = 0.0
    from_cache: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def clean_metric(self) -> float:
        return float(self.clean_logits[self.ratings[0]] - self.clean_logits[self.ratings[1]])

    @property
    def corrupt_metric(self) -> float:
        return float(self.corrupt_logits[self.ratings[0]] - self.corrupt_logits[self.ratings[1]])

    @property
    def restorable(self) -> bool:
        return abs(self.clean_metric - self.corrupt_metric) > TINY

    def to_json(self) -> dict:
        """The CLI's JSON line: 1-based ratings, nested lists with null for n/a."""
        out = {"words": list(self.columns), "grid": nested(self.grid),
               "ratings": [self.ratings[0] + 1, self.ratings[1] + 1],
               "clean_logits": [float(v) for v in self.clean_logits],
               "corrupt_logits": [float(v) for v in self.corrupt_logits],
               "clean_metric": self.clean_metric, "corrupt_metric": self.corrupt_metric,
               "patched": nested(self.patched), "seconds": round(self.seconds, 3)}
        if self.head_grid is not None:
            out["head_grid"] = nested(self.head_grid)
            out["head_patched"] = nested(self.head_patched)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "PatchResult":
        heads = d.get("head_grid")
        return cls(list(d["words"]), array(d["grid"]), array(d["patched"]),
                   (int(d["ratings"][0]) - 1, int(d["ratings"][1]) - 1),
                   np.asarray(d["clean_logits"], dtype=np.float64),
                   np.asarray(d["corrupt_logits"], dtype=np.float64),
                   None if heads is None else array(heads),
                   None if heads is None else array(d["head_patched"]),
                   float(d.get("seconds", 0.0)), True)


def nested(a: np.ndarray) -> list:
    """2-D array → nested lists, NaN as None (JSON has no NaN)."""
    return [[None if not np.isfinite(v) else float(v) for v in row]
            for row in np.asarray(a, dtype=np.float64)]


def array(rows) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64)


def metric_ratings(clean_logits, corrupt_logits) -> tuple[int, int]:
    """(a, b): the clean top rating; the corrupted top, or the clean runner-up if the same."""
    a = int(np.argmax(clean_logits))
    b = int(np.argmax(corrupt_logits))
    if b == a:
        b = int(np.argsort(np.asarray(clean_logits))[-2])
    return a, b


def restored(patched: np.ndarray, clean: float, corrupt: float) -> np.ndarray:
    """(patched − corrupted) / (clean − corrupted); all NaN when the two are equal."""
    if abs(clean - corrupt) <= TINY:
        return np.full(patched.shape, np.nan)
    return (patched - corrupt) / (clean - corrupt)


# ------------------------------------------------------------------ the patched runs
class Patcher:
    """A pair's clean and corrupted runs, made once with every layer's input kept, and
    batches of patched corrupted runs from there (see the module docstring)."""

    def __init__(self, model, pair: Pair):
        why = unsupported_reason(model)
        if why:
            raise PatchingError(why)
        self.mm = MaskedModel(model)
        self.pair = pair
        self.L, self.H, self.dh = self.mm.L, self.mm.H, self.mm.dh
        self._heads: tuple[int, list[list[int]]] | None = None   # a head batch in flight
        self._keep: dict | None = None                           # dense inputs being kept
        for li, layer in enumerate(self.mm.layer_modules):
            layer.attention.output.dense.register_forward_pre_hook(self._head_hook(li))
        with torch.inference_mode():
            self.clean_states, self.clean_ctx, clean = self._run(pair.clean_ids)
            self.corrupt_states, _, corrupt = self._run(pair.corrupt_ids)
        self.clean_logits, self.corrupt_logits = clean.double().numpy(), corrupt.double().numpy()
        self.ratings = metric_ratings(self.clean_logits, self.corrupt_logits)

    def _run(self, ids: list[int]):
        """(states [L + 1] of [1, T, D]: the embeddings' output, then each layer's;
        each layer's input of ``attention.output.dense``; logits [C])."""
        h = self.mm.embed(torch.tensor([ids], dtype=torch.long))
        states: list = []
        self._keep = {}
        try:
            out = self.mm.layers(h, None, keep=states)
            ctx = [self._keep[li] for li in range(self.L)]
        finally:
            self._keep = None
        return [*states, out], ctx, self.mm.classify(out)[0].float()

    def _head_hook(self, li: int):
        def pre(module, args):
            x = args[0]
            if self._keep is not None:
                self._keep[li] = x
            if self._heads is None or self._heads[0] != li:
                return None
            x = x.clone()
            src = self.clean_ctx[li][0]
            k, c = (torch.tensor(p, dtype=torch.long) for p in self.pair.aligned_positions())
            for b, heads in enumerate(self._heads[1]):
                for p in heads:                  # p: the head's place among the layer's heads
                    s = slice(p * self.dh, (p + 1) * self.dh)
                    x[b, c, s] = src[k, s]
            return (x, *args[1:])
        return pre

    def metric(self, logits: torch.Tensor) -> np.ndarray:
        a, b = self.ratings
        lg = logits.double()
        return (lg[:, a] - lg[:, b]).numpy()

    @torch.inference_mode()
    def patch_positions(self, row: int, patches: list[tuple[list[int], list[int]]]) -> torch.Tensor:
        """Logits [len(patches), C]: per patch (clean positions, corrupted positions), the
        clean states of row ``row`` (0: embeddings, l: layer l's output) copied in."""
        x = self.corrupt_states[row].repeat(len(patches), 1, 1)
        src = self.clean_states[row][0]
        for i, (k, c) in enumerate(patches):
            x[i, c] = src[k]
        return self.mm.classify(self.mm.layers(x, None, start=row)).float()

    @torch.inference_mode()
    def patch_heads(self, layer: int, patches: list[list[int]]) -> torch.Tensor:
        """Logits [len(patches), C]: per patch, the listed heads (places among the layer's
        heads) of layer ``layer`` copied from the clean run at every aligned position."""
        x = self.corrupt_states[layer].repeat(len(patches), 1, 1)
        self._heads = (layer, patches)
        try:
            return self.mm.classify(self.mm.layers(x, None, start=layer)).float()
        finally:
            self._heads = None

    def _chunks(self, items: list) -> list[list]:
        size = max(1, PATCH_TOKENS // max(len(self.pair.corrupt_ids), 1))
        return [items[i:i + size] for i in range(0, len(items), size)]

    def word_grid(self, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Raw metric [L + 1, columns] of every (row, word) patch; NaN where n/a."""
        pair = self.pair
        out = np.full((self.L + 1, len(pair.columns)), np.nan)
        for r in range(self.L + 1):
            for cols in self._chunks(pair.aligned):
                logits = self.patch_positions(r, [(pair.clean_pos[j], pair.corrupt_pos[j])
                                                  for j in cols])
                out[r, cols] = self.metric(logits)
                if progress is not None:
                    progress(len(cols) * row_cost(self.L, r))
        return out

    def head_grid(self, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Raw metric [L, H] of every head patched alone; NaN for a removed head."""
        out = np.full((self.L, self.H), np.nan)
        for li in range(self.L):
            alive = self.mm.alive[li]
            for places in self._chunks(list(range(len(alive)))):
                out[li, [alive[p] for p in places]] = self.metric(
                    self.patch_heads(li, [[p] for p in places]))
                if progress is not None:
                    progress(len(places) * row_cost(self.L, li))
        return out


def row_cost(layers: int, row: int) -> int:
    """Progress units of one patch at ``row``: the layers it runs through (at least 1)."""
    return max(layers - row, 1)


def planned(n_layers: int, n_heads: int, pair: Pair, heads: bool) -> int:
    """Progress units of :func:`patch` (layer passes of single patched copies)."""
    words = len(pair.aligned) * sum(row_cost(n_layers, r) for r in range(n_layers + 1))
    return words + (n_heads * sum(row_cost(n_layers, li) for li in range(n_layers)) if heads else 0)


def run_grid(model, pair: Pair, heads: bool = False,
             progress: Callable[[int], None] | None = None) -> PatchResult:
    """The word grid (and the head grid) of an aligned pair on ``model``, batched."""
    t0 = time.perf_counter()
    p = Patcher(model, pair)
    raw = p.word_grid(progress)
    c, k = (float(v) for v in p.metric(torch.tensor(np.stack([p.clean_logits, p.corrupt_logits]))))
    head_raw = p.head_grid(progress) if heads else None
    return PatchResult(list(pair.columns), restored(raw, c, k), raw, p.ratings,
                       p.clean_logits, p.corrupt_logits,
                       None if head_raw is None else restored(head_raw, c, k), head_raw,
                       time.perf_counter() - t0)


@torch.inference_mode()
def grid_one_by_one(model, pair: Pair, progress: Callable[[int], None] | None = None) -> np.ndarray:
    """The reference: raw metric [L + 1, columns], one full forward pass of the corrupted
    review per patch, the clean state put in by a forward hook on the embeddings or the
    layer (no saved inputs, no batching). The tests and the bench compare the grid to it."""
    p = Patcher(model, pair)
    mm = p.mm
    ids = torch.tensor([pair.corrupt_ids], dtype=torch.long)
    out = np.full((p.L + 1, len(pair.columns)), np.nan)
    for r, module in enumerate([mm.encoder.embeddings, *mm.layer_modules]):
        for j in pair.aligned:
            def put(mod, args, output, r=r, j=j):
                output = output.clone()
                output[0, pair.corrupt_pos[j]] = p.clean_states[r][0, pair.clean_pos[j]]
                return output
            handle = module.register_forward_hook(put)
            try:
                out[r, j] = p.metric(mm.classify(mm.layers(mm.embed(ids), None)))[0]
            finally:
                handle.remove()
            if progress is not None:
                progress(1)
    return out


# ------------------------------------------------------------------ one pair, cached
def planned_for(predictor, pair: Pair, heads: bool) -> int:
    cfg = predictor.config
    return planned(int(cfg.num_hidden_layers), int(cfg.num_attention_heads), pair, heads)


def patch(predictor, clean: str, corrupt: str, heads: bool = False,
          progress: Callable[[int], None] | None = None, use_cache: bool = True,
          pair: Pair | None = None) -> PatchResult:
    """The grids of a pair on a :class:`reviewbert.model.inference.Predictor`'s model, from
    the cache beside its checkpoint when they were made before (``reviewbert/patching/cache.py``).
    PatchingError for a pair that cannot be patched."""
    from reviewbert.patching import cache
    pair = pair or align(predictor.tokenizer, clean, corrupt, predictor.max_length)
    where = getattr(predictor, "checkpoint", None)
    key = None
    if use_cache and where is not None:
        key = cache.key_for(where, clean, corrupt, predictor.max_length, heads)
        hit = cache.find(where, key)
        if hit is not None:
            return PatchResult.from_json(hit)
    res = run_grid(predictor.model, pair, heads, progress)
    if key is not None:
        cache.write(where, key, res.to_json())
    return res


def row_name(row: int) -> str:
    """Row ``row`` of the word grid as the figures and sentences name it."""
    return "embeddings" if row == 0 else f"layer {row}"


def row_output(row: int) -> str:
    return "the embeddings' output" if row == 0 else f"layer {row}'s output"


def reading(res: PatchResult) -> list[str]:
    """A few plain sentences on the grids (user words in «»: escape before Markdown)."""
    if not res.restorable:
        return ["Both reviews give the same logit difference, so there is nothing to restore: "
                "patch a pair the model reads differently."]
    out = []
    words = res.grid[:, 1:-1]
    if np.isfinite(words).any():
        r, j = np.unravel_index(np.nanargmax(words), words.shape)
        out.append(f"Patching «{res.columns[j + 1]}» at {row_output(int(r))} restores "
                   f"{words[r, j]:.0%} of the logit difference: the most of any word.")
    cls = np.nonzero(np.nan_to_num(res.grid[:, 0]) >= 0.5)[0]
    if len(cls):
        out.append(f"From {row_output(int(cls[0]))} on, [CLS] alone restores at least half: the "
                   "classifier reads the last layer's [CLS] only, so the difference has to get "
                   "there.")
    na = int(np.isnan(res.grid[0]).sum())
    if na:
        out.append(f"{na} word(s) are n/a: their wordpiece counts differ between the two reviews.")
    if res.head_grid is not None and np.isfinite(res.head_grid).any():
        li, h = np.unravel_index(np.nanargmax(res.head_grid), res.head_grid.shape)
        out.append(f"The head that restores most alone: layer {li + 1}, head {h + 1} "
                   f"({res.head_grid[li, h]:.0%}).")
    return out
