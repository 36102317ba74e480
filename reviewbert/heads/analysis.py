"""The whole Heads analysis of a checkpoint on a set of reviews: four stages, cached, one
result, and what it says in plain words.

Stages (each saved as it finishes, ``reviewbert/heads/cache.py``; an interrupted run goes on
from the last one):

1. ``importance``: Michel et al.'s gradient score of every head (``importance.importance``);
2. ``masking``: the check, every head masked alone (``importance.masking_drops``);
3. ``pruning``: the pruning curves in three orders (``importance.pruning_curves``);
4. ``attention``: the atlas of the fine-tuned model's attention and the
   Jensen–Shannon divergence from the base model's (``reviewbert/heads/roles.py``), one
   pass over the reviews through both.

:class:`HeadsResult` holds it all; :meth:`HeadsResult.to_json` is the last line of
``reviewbert heads --json`` and the cached ``result.json`` (layers and heads 0-based in
the lists; the page and the CLI's text number them from 1).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from reviewbert.analysis import cache as prediction_cache
from reviewbert.heads import cache as heads_cache
from reviewbert.heads import importance as heads
from reviewbert.heads import roles as head_roles
from reviewbert.model.batch_predict import encode_texts
from reviewbert.model.device import resolve_precision
from reviewbert.model.pruning import alive_heads, alive_mask, heads_to_remove


@dataclass
class Settings:
    fractions: tuple = heads.FRACTIONS
    random_draws: int = heads.RANDOM_DRAWS
    seed: int = 0
    precision: str = "auto"          # the evaluation passes; gradients are always fp32

    def resolved(self) -> "Settings":
        return Settings(tuple(float(f) for f in self.fractions), int(self.random_draws),
                        int(self.seed), resolve_precision(self.precision, torch.device("cpu")))

    def to_json(self) -> dict:
        return {"fractions": list(self.fractions), "random_draws": self.random_draws,
                "seed": self.seed, "precision": self.precision}


def sample_reviews(reviews, n: int | None, seed: int = 0) -> list:
    """``n`` of ``reviews`` drawn without replacement (seeded), in their original order;
    all of them when ``n`` is None or not smaller."""
    reviews = list(reviews)
    if n is None or n >= len(reviews):
        return reviews
    idx = np.sort(np.random.default_rng(seed).choice(len(reviews), size=n, replace=False))
    return [reviews[i] for i in idx]


# ------------------------------------------------------------------ result
@dataclass
class HeadsResult:
    n: int
    alive: np.ndarray                   # bool [L, H]
    importance_raw: np.ndarray          # [L, H] Σ|∂L/∂ξ|
    masking: heads.MaskingDrops
    pruning: dict
    atlas: dict                         # stat -> [L, H]
    finetune_js: np.ndarray | None      # [L, H]
    finetune_note: str = ""
    base_model: str = ""
    precision: str = "fp32"
    seconds: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    checkpoint: str = ""
    from_cache: bool = False
    settings: dict = field(default_factory=dict)     # Settings.to_json() of the run

    @property
    def layers(self) -> int:
        return int(self.alive.shape[0])

    @property
    def heads(self) -> int:
        return int(self.alive.shape[1])

    @property
    def importance(self) -> np.ndarray:
        """Normalised per layer (L2), as Michel et al.; NaN for removed heads."""
        return heads.normalise(self.importance_raw, self.alive)

    @property
    def roles(self) -> list[list[str | None]]:
        return head_roles.roles(self.atlas, self.alive)

    def spearman(self, drop: str = "probability") -> float | None:
        """Spearman's ρ between importance and the measured drop, over the heads there."""
        from scipy.stats import spearmanr
        d = self.masking.probability_drop if drop == "probability" else self.masking.accuracy_drop
        a, b = self.importance[self.alive], d[self.alive]
        if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            return None
        return float(spearmanr(a, b).statistic)

    def to_json(self) -> dict:
        js = None if self.finetune_js is None else heads.nested(self.finetune_js)
        frac, k = removable(self)
        return {
            "importance": heads.nested(self.importance),
            "masking_drop": heads.nested(self.masking.probability_drop),
            "masking_accuracy_drop": heads.nested(self.masking.accuracy_drop),
            "spearman": _round(self.spearman("probability")),
            "spearman_accuracy": _round(self.spearman("accuracy")),
            "pruning": self.pruning,
            "removable": {"fraction": frac, "heads": k},
            "atlas": {**{s: heads.nested(v) for s, v in self.atlas.items()}, "role": self.roles},
            "finetune_js": js, "finetune_note": self.finetune_note,
            "n": self.n, "seconds": round(float(sum(self.seconds.values())), 2),
            "stage_seconds": {k: round(float(v), 2) for k, v in self.seconds.items()},
            "importance_raw": heads.nested(np.where(self.alive, self.importance_raw, np.nan)),
            "base_accuracy": self.masking.base_accuracy,
            "base_probability": self.masking.base_probability,
            "layers": self.layers, "heads": self.heads, "alive": self.alive.tolist(),
            "precision": self.precision, "base_model": self.base_model,
            "source": self.source, "checkpoint": self.checkpoint, "settings": self.settings}

    @classmethod
    def from_json(cls, d: dict, from_cache: bool = True) -> "HeadsResult":
        alive = np.array(d["alive"], dtype=bool)
        masking = heads.MaskingDrops(float(d["base_accuracy"]), float(d["base_probability"]),
                                     heads.array(d["masking_accuracy_drop"]),
                                     heads.array(d["masking_drop"]))
        atlas = {s: heads.array(d["atlas"][s]) for s in head_roles.STATS}
        js = None if d.get("finetune_js") is None else heads.array(d["finetune_js"])
        return cls(int(d["n"]), alive, np.nan_to_num(heads.array(d["importance_raw"])), masking,
                   d["pruning"], atlas, js, d.get("finetune_note", ""), d.get("base_model", ""),
                   d.get("precision", "fp32"), dict(d.get("stage_seconds") or {}),
                   d.get("source") or {}, d.get("checkpoint", ""), from_cache,
                   dict(d.get("settings") or {}))


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


# ------------------------------------------------------------------ the base model
def base_identity(name: str | None) -> tuple[str | None, str | None]:
    """(where the base model named in reviewbert.json is, its fingerprint): a local folder
    (the embedded MiniLM is one) is hashed like a checkpoint, a hub name stands for itself."""
    from reviewbert.model.checkpoint import resolve_base_model
    if not name or name == "?":
        return None, None
    path = resolve_base_model(name)
    sha = prediction_cache.checkpoint_fingerprint(path) if Path(path).is_dir() else name
    return path, sha


def load_base(name: str | None, path: str | None, model):
    """(the base encoder, "") or (None, why it cannot be compared)."""
    from transformers import AutoModel
    if path is None:
        return None, "this checkpoint's reviewbert.json names no base model"
    from reviewbert.model.checkpoint import quiet_transformers
    try:
        with quiet_transformers():    # a classifier's folder as base: its head is "unexpected"
            base = AutoModel.from_pretrained(path, use_safetensors=True, dtype=torch.float32,
                                             attn_implementation="eager").eval()
    except Exception as e:  # noqa: BLE001 - offline hub name, pickle-only folder, ...
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        return None, f"the base model {name!r} cannot be loaded here ({why})"
    if heads.unsupported_reason(base):
        return None, f"the base model {name!r} is not a BERT encoder"
    a, b = base.config, model.config
    for attr in ("num_hidden_layers", "num_attention_heads", "hidden_size", "vocab_size"):
        if getattr(a, attr, None) != getattr(b, attr, None):
            return None, (f"the base model {name!r} has {attr} {getattr(a, attr, None)}, "
                          f"this checkpoint {getattr(b, attr, None)}: not comparable")
    return base, ""


# ------------------------------------------------------------------ the stages
@dataclass
class _Run:
    """What the stages share: the masked model, the batches, the labels, the cache folder."""
    mm: heads.MaskedModel
    batches: list
    labels: np.ndarray
    num_labels: int
    settings: Settings
    folder: Path | None
    progress: Callable[[int], None] | None
    on_stage: Callable[[str], None] | None
    seconds: dict = field(default_factory=dict)

    def stage(self, name: str, what: str, compute: Callable[[], dict]) -> dict:
        got = heads_cache.read_stage(self.folder, name)
        if got is not None:
            self.seconds[name] = float(got.get("seconds", 0.0))
            return got
        if self.on_stage is not None:
            self.on_stage(what)
        t0 = time.perf_counter()
        data = compute()
        self.seconds[name] = time.perf_counter() - t0
        data["seconds"] = round(self.seconds[name], 3)
        heads_cache.write_stage(self.folder, name, data)
        return data


def _attention_stage(run: _Run, tokenizer, base_name: str | None, base_path: str | None) -> dict:
    mm = run.mm
    base, note = load_base(base_name, base_path, mm.model)
    punct, end = head_roles.vocab_kinds(tokenizer)
    atlas = head_roles.Atlas(mm.L, mm.H)
    div = head_roles.Divergence(mm.L, mm.H) if base is not None else None
    bm = heads.MaskedModel(base) if base is not None else None
    with torch.inference_mode():
        for b in run.batches:
            kinds = head_roles.TokenKinds.of(b.ids, b.mask, tokenizer.sep_token_id, punct, end)
            h = mm.embed(b.ids)
            ext = mm.attention_mask(h, b.mask)
            hb = bm.embed(b.ids) if bm is not None else None
            for li in range(mm.L):
                p = mm.attention_probs(li, h, b.mask)
                atlas.add(li, p, kinds)
                h = mm.layer_modules[li](h, attention_mask=ext)
                if bm is not None:
                    div.add(li, bm.attention_probs(li, hb, b.mask), p, kinds.valid)
                    hb = bm.layer_modules[li](hb, attention_mask=ext)
            if run.progress is not None:
                run.progress(len(b.rows) * 2)
    alive = alive_mask(mm.model)
    means = {s: np.where(alive, v, np.nan) for s, v in atlas.means().items()}
    js = None if div is None else np.where(alive, div.means(), np.nan)
    return {"atlas": {s: heads.nested(v) for s, v in means.items()},
            "finetune_js": None if js is None else heads.nested(js), "finetune_note": note}


def analysis_key(checkpoint, reviews, *, max_length: int, base_model: str | None,
                 settings: Settings | None = None) -> str:
    """The cache key of :func:`analyze` for these inputs (hashes the reviews)."""
    settings = (settings or Settings()).resolved()
    _, base_sha = base_identity(base_model)
    ck = prediction_cache.checkpoint_fingerprint(checkpoint)
    ds = prediction_cache.data_fingerprint(reviews)
    return heads_cache.cache_key(ck, ds, max_length, settings.to_json(), base_sha)


def lookup(checkpoint, reviews, *, max_length: int, base_model: str | None,
           settings: Settings | None = None) -> HeadsResult | None:
    """The cached result of :func:`analyze` for these very inputs, or None; never computes."""
    key = analysis_key(checkpoint, reviews, max_length=max_length, base_model=base_model,
                       settings=settings)
    done = heads_cache.find_result(checkpoint, key)
    return None if done is None else HeadsResult.from_json(done)


def analyze(model, tokenizer, checkpoint, reviews, scheme, *, max_length: int,
            base_model: str | None, settings: Settings | None = None,
            progress: Callable[[int], None] | None = None,
            on_stage: Callable[[str], None] | None = None, source: dict | None = None,
            use_cache: bool = True) -> HeadsResult:
    """The Heads analysis of ``reviews`` (objects with .text, .stars), from the cache when
    this checkpoint already analysed these very reviews with these settings.

    ``progress(n)`` is told review passes as they finish (:func:`planned` gives the
    total); ``on_stage(text)`` names each stage as it starts. ``model`` is only read.
    """
    if why := heads.unsupported_reason(model):
        raise ValueError(why)
    reviews = list(reviews)
    if not reviews:
        raise ValueError("no reviews to analyse")
    settings = (settings or Settings()).resolved()
    base_path, base_sha = base_identity(base_model)
    ck = prediction_cache.checkpoint_fingerprint(checkpoint)
    ds = prediction_cache.data_fingerprint(reviews)
    key = heads_cache.cache_key(ck, ds, max_length, settings.to_json(), base_sha)
    if use_cache and (done := heads_cache.find_result(checkpoint, key)) is not None:
        return HeadsResult.from_json(done)
    meta = {"checkpoint": {"path": str(checkpoint), "sha256": ck},
            "data": {"sha256": ds, "n": len(reviews), "source": source or {"kind": "reviews"}},
            "max_length": int(max_length), "settings": settings.to_json(),
            "base_model": {"name": base_model, "sha256": base_sha},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    folder = heads_cache.folder_for(checkpoint, key, meta) if use_cache else None
    ids = encode_texts(tokenizer, [r.text for r in reviews], max_length)
    labels = np.array([scheme.class_of(int(r.stars)) for r in reviews], dtype=np.int64)
    run = _Run(heads.MaskedModel(model), heads.make_batches(ids, tokenizer.pad_token_id or 0),
               labels, scheme.num_labels, settings, folder, progress, on_stage)
    result = _run_stages(run, tokenizer, base_model, base_path)
    result.base_model, result.source, result.checkpoint = base_model or "", source or {}, str(checkpoint)
    heads_cache.write_result(checkpoint, folder, result.to_json())
    return result


def _run_stages(run: _Run, tokenizer, base_name: str | None, base_path: str | None) -> HeadsResult:
    mm, s = run.mm, run.settings
    imp = run.stage("importance", "Head importance (one forward + backward pass per batch)",
                    lambda: {"raw": heads.nested(heads.importance(mm, run.batches, run.labels,
                                                                  run.progress))})
    raw = np.nan_to_num(heads.array(imp["raw"]))
    alive = alive_mask(mm.model)
    masking = heads.MaskingDrops.from_json(run.stage(
        "masking", "Checking it: every head masked alone",
        lambda: heads.masking_drops(mm, run.batches, run.labels, s.precision,
                                    run.progress).to_json()))
    curves = run.stage("pruning", "Pruning curves: 10 … 90 % of the heads masked",
                       lambda: {"curves": heads.pruning_curves(
                           mm, run.batches, run.labels, heads.normalise(raw, alive),
                           run.num_labels, s.precision, s.fractions, s.random_draws, s.seed,
                           run.progress)})["curves"]
    att = run.stage("attention", "Head atlas and what fine-tuning changed",
                    lambda: _attention_stage(run, tokenizer, base_name, base_path))
    atlas = {k: heads.array(v) for k, v in att["atlas"].items()}
    js = None if att.get("finetune_js") is None else heads.array(att["finetune_js"])
    return HeadsResult(len(run.labels), alive, raw, masking, curves, atlas, js,
                       att.get("finetune_note", ""), precision=s.precision, seconds=run.seconds,
                       settings=s.to_json())


def planned(n: int, model, settings: Settings | None = None) -> int:
    """The progress total of :func:`analyze` for ``n`` reviews (review passes)."""
    s = settings or Settings()
    return sum(heads.planned_passes(n, alive_heads(model), s.fractions, s.random_draws).values())


# ------------------------------------------------------------------ what it says
def removable(res: HeadsResult) -> tuple[float, int]:
    """(fraction, heads): the most heads masked, least important first, with every step up
    to it within one point of the full model's accuracy (0.0, 0 when even 10 % costs more)."""
    curve = res.pruning["least"]
    base = curve[0]["accuracy"]
    best = (0.0, 0)
    for point in curve[1:]:
        if point["accuracy"] is None or point["accuracy"] < base - heads.ONE_POINT + 1e-12:
            break
        best = (point["fraction"], point["heads_masked"])
    return best


def within_one_point(res: HeadsResult) -> tuple[float, int]:
    """(fraction, heads): the largest masked share whose accuracy alone is within one point
    of the full model's (steps before it may dip below: a noisier reading than
    :func:`removable`)."""
    curve = res.pruning["least"]
    base = curve[0]["accuracy"]
    ok = [(p["fraction"], p["heads_masked"]) for p in curve[1:]
          if p["accuracy"] is not None and p["accuracy"] >= base - heads.ONE_POINT + 1e-12]
    return max(ok) if ok else (0.0, 0)


def removable_sentence(res: HeadsResult) -> str:
    frac, k = removable(res)
    total = int(res.alive.sum())
    curve = res.pruning["least"]
    base = curve[0]["accuracy"]
    if k == 0:
        first = curve[1] if len(curve) > 1 else curve[0]
        out = (f"Removing even {first['fraction']:.0%} of the heads (the least important "
               f"first) costs a point of accuracy or more on these {res.n:,} reviews "
               f"({base:.1%} → {first['accuracy']:.1%}).")
    else:
        at = next(p for p in curve if p["heads_masked"] == k)
        out = (f"{frac:.0%} of the heads ({k} of {total}) can be removed for less than 1 point "
               f"of accuracy on these {res.n:,} reviews (the least important first: "
               f"{base:.1%} → {at['accuracy']:.1%}).")
    far, far_k = within_one_point(res)
    if far > frac:
        at = next(p for p in curve if p["heads_masked"] == far_k)
        out += (f" Further along the curve dips and recovers: with {far:.0%} masked it is back "
                f"within a point ({at['accuracy']:.1%}); one point is "
                f"{res.n / 100:g} reviews here, so such steps are within the noise.")
    return out


def top_heads(res: HeadsResult, k: int = 5) -> list[dict]:
    """The ``k`` most important heads (normalised score), with their drop and role."""
    imp, roles = res.importance, res.roles
    order = heads.ranked(imp, res.alive)[::-1][:k]
    return [{"layer": li + 1, "head": h + 1, "importance": float(imp[li, h]),
             "probability_drop": float(res.masking.probability_drop[li, h]),
             "accuracy_drop": float(res.masking.accuracy_drop[li, h]), "role": roles[li][h]}
            for li, h in order]


def layer_js(res: HeadsResult) -> np.ndarray | None:
    """Mean JS divergence of each layer's heads (those still there)."""
    if res.finetune_js is None:
        return None
    return np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan
                     for row in res.finetune_js])


def finetune_sentence(res: HeadsResult) -> str:
    per_layer = layer_js(res)
    if per_layer is None:
        return f"What fine-tuning changed is not shown: {res.finetune_note}."
    order = [int(i) for i in np.argsort(-np.nan_to_num(per_layer, nan=-1.0))]
    top = order[:2]
    L = len(per_layer)
    late = all(i >= L // 2 for i in top)
    names = " and ".join(f"layer {i + 1} ({per_layer[i]:.3f} bits)" for i in top)
    low = order[-1]
    verdict = ("That matches Kovaleva et al. (2019), who found that fine-tuning changes the "
               "last layers most." if late else
               "That does not match Kovaleva et al. (2019), who found that fine-tuning changes "
               "the last layers most.")
    return (f"Fine-tuning changed {names} most (mean Jensen–Shannon divergence from the base "
            f"model's attention; layer {low + 1}: {per_layer[low]:.3f}). {verdict}")


# ------------------------------------------------------------------ a pruned checkpoint
def heads_to_prune(model, tokenizer, reviews, scheme, fraction: float, *, max_length: int,
                   progress: Callable[[int], None] | None = None) -> tuple[dict, np.ndarray]:
    """({layer: [heads]} to remove, normalised importance [L, H]): the ``fraction`` of the
    model's heads with the lowest importance on ``reviews`` (Michel et al.'s global order)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the fraction of heads to remove must be between 0 and 1, got {fraction}")
    alive = alive_mask(model)
    k = int(round(fraction * alive.sum()))
    if k < 1:
        raise ValueError(f"{fraction:.0%} of {int(alive.sum())} heads is no head at all")
    ids = encode_texts(tokenizer, [r.text for r in reviews], max_length)
    labels = np.array([scheme.class_of(int(r.stars)) for r in reviews], dtype=np.int64)
    mm = heads.MaskedModel(model)
    raw = heads.importance(mm, heads.make_batches(ids, tokenizer.pad_token_id or 0), labels,
                           progress)
    scores = heads.normalise(raw, alive)
    return heads_to_remove(heads.ranked(scores, alive), k), scores


def write_pruned(model, tokenizer, info, remove: dict, out, record: dict) -> Path:
    """A pruned copy of ``model`` saved as a checkpoint in ``out`` (atomically), in the
    source's dtype on disk, its reviewbert.json extended with ``"pruned": record``."""
    from reviewbert.model.checkpoint import save_checkpoint_atomic
    from reviewbert.model.pruning import pruned_copy
    small = pruned_copy(model, remove).eval()
    dtype = _disk_dtype(info.path)
    meta = dict(info.meta)
    meta["pruned"] = {**record, "from": str(info.path),
                      "removed": {str(k): v for k, v in sorted(remove.items())},
                      "heads_removed": int(sum(len(v) for v in remove.values())),
                      "heads_left": int(alive_mask(small).sum())}
    return save_checkpoint_atomic(small, tokenizer, out, meta=meta, dtype=dtype)


def _disk_dtype(path: Path):
    """The dtype the checkpoint's weights are stored in (fp16 for the shipped demo)."""
    from safetensors import safe_open
    for f in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                t = st.get_slice(key).get_dtype()
                return {"F16": torch.float16, "BF16": torch.bfloat16}.get(t, torch.float32)
    return torch.float32
