"""What drives each rating over a whole split: word attributions aggregated per
predicted rating and per (true, predicted) cell.

Methods: the two most faithful on the Faithfulness page, **Integrated Gradients**
and **attention × value norm** (``reviewbert/explain/methods.py``; ERASER numbers in
docs/guide/faithfulness.md), and
beside them **raw attention** (last layer, mean of heads) from the very same pass, so
the three lists differ by method only. (The Per-rating attention tab has raw
attention in every layer.) Every review is explained for the class the exact fp32
predictor gives it (``target``; the bf16 bulk pass agrees on ~99.8 %).

Integrated Gradients over a split is the costly part, so it is batched *across
reviews*: reviews with the same number of tokens go through Captum's
``LayerIntegratedGradients`` together (no padding, so each review's attributions
are exactly its own; ``tests/unit/test_split_map.py`` checks them against the
one-review path), their interpolation steps packed ~1,024 tokens per forward +
backward pass, as ``reviewbert.explain.methods.IntegratedGradients`` packs one review's. Reviews whose
convergence delta stays above 5 % are redone with twice the steps, up to
``ig_max_steps``, like the Predict page's. Attention × value norm and raw attention
come from the predictor's own fp32 pass (``Prediction.values``, no second pass).

Results are cached per review beside the predictions (``drivers.parquet``, layout in
``analysis/cache.py``), written after each chunk: a sample of 500 reuses the reviews
a sample of 200 already explained, "all" reuses both, and an interrupted run resumes.
Samples are nested prefixes of one seeded permutation of the split.

Aggregation (:func:`top_drivers`), as the Per-rating attention tab does it: a word's
score in a review is the sum over its occurrences; its score for a group is the mean
over the group's reviews that contain it; words in fewer than ``min_count`` of them
are left out. IG scores are in log-probability units of the explained class (a word
with +0.3 raised log p(ŷ) by 0.3 on the path from the [PAD] baseline); the attention
methods' are shares of the review's attention (each review sums to 1).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from reviewbert.analysis import cache
from reviewbert.analysis.word_attention import is_shown_word
from reviewbert.explain import methods as explain
from reviewbert.fsio import atomic_write_json

FORMAT = "reviewbert-drivers/1"
TABLE, META = "drivers.parquet", "drivers.json"
METHODS = ("integrated_gradients", "value_norm", "raw_attention")
LABELS = {"integrated_gradients": "Integrated Gradients", "value_norm": "Attention × value norm",
          "raw_attention": "Raw attention (last layer)"}
UNITS = {"integrated_gradients": "mean IG attribution (log p)",
         "value_norm": "mean share of value-weighted attention",
         "raw_attention": "mean share of [CLS] attention"}
CHUNK = 32              # reviews per cache write
MAX_GROUP = 16          # reviews of one length per Captum call
DEFAULT_SAMPLE = 300


@dataclass(frozen=True)
class DriverSettings:
    ig_steps: int = explain.IG_STEPS
    ig_max_steps: int = explain.IG_MAX_STEPS
    layer: int | None = None            # value norm and raw attention; None: the last layer


@dataclass
class Drivers:
    table: pd.DataFrame                 # the rows of drivers.parquet for the sample asked for
    rows: np.ndarray                    # the reviews explained (rows of the split)
    seconds: float                      # compute time of those reviews (cached ones included)
    over_delta: int                     # reviews whose IG delta stayed above 5 %
    computed: int = 0                   # reviews explained in this call (the rest were cached)

    @property
    def seconds_per_1000(self) -> float | None:
        return 1000 * self.seconds / len(self.rows) if len(self.rows) and self.seconds else None


def sample_rows(n: int, size: int | None, seed: int = 0) -> np.ndarray:
    """The first ``size`` rows of one seeded permutation of 0..n-1 (all when None), sorted:
    a larger sample always contains a smaller one."""
    if size is None or size >= n:
        return np.arange(n)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:max(0, int(size))])


# ------------------------------------------------------------------ IG, batched
def _ig_group(predictor, ids: torch.Tensor, base: torch.Tensor, targets: list[int],
              n_steps: int):
    """Captum's LayerIntegratedGradients on reviews of one length: (token attributions
    [B, T], delta [B], f(x) − f(baseline) [B])."""
    from captum.attr import LayerIntegratedGradients
    emb = explain._WordEmbedding(predictor.model.get_input_embeddings().weight)
    fn = explain._log_prob_fn(predictor.embedded_logits, emb)
    B, T = ids.shape
    with torch.inference_mode(False), torch.enable_grad():
        attr, delta = LayerIntegratedGradients(fn, emb).attribute(
            ids, baselines=base, target=targets, n_steps=n_steps, method="gausslegendre",
            internal_batch_size=max(B, explain.IG_TOKENS_PER_BATCH // T),
            return_convergence_delta=True)
    tok = attr.sum(-1).detach().double().cpu().numpy()
    delta = delta.detach().double().cpu().numpy().reshape(-1)
    return tok, delta, tok.sum(axis=1) - delta


def batched_ig(predictor, preds: list, settings: DriverSettings = DriverSettings()):
    """Per Prediction: (word scores [n_words], steps used, |delta| / |f(x) − f(b)|)."""
    pad = predictor.tokenizer.pad_token_id or 0
    device = predictor.model.get_input_embeddings().weight.device
    out: list = [None] * len(preds)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(preds):
        by_len.setdefault(len(p.tokens), []).append(i)
    for members in by_len.values():
        for s in range(0, len(members), MAX_GROUP):
            todo, n = members[s:s + MAX_GROUP], settings.ig_steps
            while todo:
                ids = torch.tensor([explain.token_ids(predictor, preds[i]) for i in todo],
                                   dtype=torch.long, device=device)
                base = torch.cat([explain.pad_baseline(ids[j:j + 1], preds[i].word_ids, pad)
                                  for j, i in enumerate(todo)])
                tok, delta, diff = _ig_group(predictor, ids, base,
                                             [int(preds[i].label_id) for i in todo], n)
                again = []
                for j, i in enumerate(todo):
                    rel = abs(delta[j]) / max(abs(diff[j]), 1e-6)
                    out[i] = (explain.word_sum(tok[j], preds[i].word_ids, len(preds[i].words)),
                              n, float(rel))
                    if rel > explain.DELTA_WARN and 2 * n <= settings.ig_max_steps:
                        again.append(i)
                todo, n = again, 2 * n
    return out


# ------------------------------------------------------------------ one chunk
def explain_chunk(predictor, texts: list[str], rows, settings: DriverSettings = DriverSettings()
                  ) -> tuple[pd.DataFrame, int]:
    """(long table review/word/target/three methods, reviews whose IG delta stayed > 5 %)."""
    preds = [predictor.predict(t) for t in texts]
    keep = [j for j, p in enumerate(preds) if p.words]
    preds = [preds[j] for j in keep]
    rows = [int(rows[j]) for j in keep]
    ig = batched_ig(predictor, preds, settings)
    raw_m, vn_m = explain.RawAttention(settings.layer), explain.ValueNorm(settings.layer)
    parts, over = [], 0
    for row, p, (ig_words, _, rel) in zip(rows, preds, ig):
        over += rel > explain.DELTA_WARN
        parts.append(pd.DataFrame({
            "review": np.full(len(p.words), row, dtype=np.int32),
            "word": [w.lower() for w in p.words],
            "target": np.full(len(p.words), p.label_id, dtype=np.int8),
            "integrated_gradients": np.asarray(ig_words, dtype=np.float32),
            "value_norm": vn_m.run(predictor, p).scores.astype(np.float32),
            "raw_attention": raw_m.run(predictor, p).scores.astype(np.float32)}))
    return (pd.concat(parts, ignore_index=True) if parts else empty_table()), int(over)


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({"review": np.zeros(0, np.int32), "word": pd.Series([], dtype=str),
                         "target": np.zeros(0, np.int8),
                         **{m: np.zeros(0, np.float32) for m in METHODS}})


# ------------------------------------------------------------------ cache
def read_cached(folder, settings: DriverSettings) -> tuple[pd.DataFrame, dict] | None:
    if folder is None:
        return None
    try:
        meta = json.loads((Path(folder) / META).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("settings") != asdict(settings):
            return None
        return pd.read_parquet(Path(folder) / TABLE), meta
    except (OSError, ValueError):
        return None


def _write(folder, table: pd.DataFrame, meta: dict) -> None:
    try:
        (Path(folder) / META).unlink(missing_ok=True)
        cache.write_parquet(table, Path(folder) / TABLE)
        atomic_write_json(Path(folder) / META, meta)
    except OSError:
        pass            # not kept; still shown


def compute_drivers(preds, predictor, *, sample: int | None = DEFAULT_SAMPLE, seed: int = 0,
                    settings: DriverSettings = DriverSettings(),
                    progress: Callable[[int], None] | None = None, use_cache: bool = True,
                    chunk: int = CHUNK) -> Drivers:
    """The drivers of ``sample`` reviews of ``preds`` (None: all), reusing every review
    already explained with these settings; ``progress(n)`` after each chunk."""
    rows = sample_rows(preds.n, sample, seed)
    folder = preds.folder if use_cache else None
    got = read_cached(folder, settings)
    table, meta = got if got is not None else (empty_table(), {
        "format": FORMAT, "settings": asdict(settings), "reviews": [], "seconds": 0.0,
        "ig_deltas_over": 0})
    done = set(int(r) for r in meta["reviews"])
    todo = [int(r) for r in rows if int(r) not in done]
    if progress is not None and len(rows) > len(todo):
        progress(len(rows) - len(todo))
    todo.sort(key=lambda r: int(preds.n_tokens[r]))   # equal lengths meet in one IG batch
    texts = preds.frame["text"].to_numpy()
    for s in range(0, len(todo), chunk):
        part = todo[s:s + chunk]
        t0 = time.perf_counter()
        new, over = explain_chunk(predictor, [str(texts[r]) for r in part], part, settings)
        table = pd.concat([table, new], ignore_index=True)
        meta["reviews"] = sorted(done.union(part))
        done = set(meta["reviews"])
        meta["seconds"] = round(meta["seconds"] + time.perf_counter() - t0, 3)
        meta["ig_deltas_over"] += over
        meta["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if folder is not None:
            _write(folder, table, meta)
        if progress is not None:
            progress(len(part))
    share = len(rows) / max(len(done), 1)
    mine = table[table["review"].isin(rows)].reset_index(drop=True)
    return Drivers(mine, rows, meta["seconds"] * share, int(round(meta["ig_deltas_over"] * share)),
                   len(todo))


def cached_drivers(preds, settings: DriverSettings = DriverSettings()) -> Drivers | None:
    """Whatever this evaluation's cache holds (every review explained so far), or None."""
    got = read_cached(preds.folder, settings)
    if got is None or not got[1].get("reviews"):
        return None
    table, meta = got
    return Drivers(table, np.asarray(meta["reviews"], dtype=np.int64), meta["seconds"],
                   int(meta.get("ig_deltas_over", 0)))


# ------------------------------------------------------------------ aggregation
def groups(d: Drivers, preds, by: str = "predicted") -> tuple[np.ndarray, list[str]]:
    """(group id per table row, group names): by "predicted" rating (the explained class)
    or by (true, predicted) "cell" (id = true · k + predicted)."""
    names = preds.names
    target = d.table["target"].to_numpy().astype(np.int64)
    if by == "predicted":
        return target, [f"predicted {n}" for n in names]
    if by != "cell":
        raise ValueError("group by 'predicted' or 'cell'")
    k = len(names)
    true = preds.y[d.table["review"].to_numpy()]
    return true * k + target, [f"true {a} → predicted {b}" for a in names for b in names]


def top_drivers(d: Drivers, group_ids, n_groups: int, method: str, *, min_count: int = 5,
                top_k: int = 10, hide_stopwords: bool = True) -> dict[int, pd.DataFrame]:
    """{group: DataFrame(word, score, reviews)}: the ``top_k`` words of highest mean score
    by ``method`` among the group's reviews that contain them (at least ``min_count``)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    df = pd.DataFrame({"review": d.table["review"].to_numpy(), "word": d.table["word"].to_numpy(),
                       "score": d.table[method].to_numpy(np.float64),
                       "group": np.asarray(group_ids)})
    if hide_stopwords:
        df = df[[is_shown_word(w, True) for w in df["word"]]]
    per_review = df.groupby(["group", "review", "word"], sort=False)["score"].sum().reset_index()
    stats = (per_review.groupby(["group", "word"])["score"]
             .agg(score="mean", reviews="count").reset_index())
    stats = stats[stats["reviews"] >= min_count]
    out = {}
    for g in range(n_groups):
        part = stats[stats["group"] == g].sort_values(["score", "reviews"], ascending=[False, False])
        out[g] = part.head(top_k)[["word", "score", "reviews"]].reset_index(drop=True)
    return out


def reviews_per_group(d: Drivers, group_ids, n_groups: int) -> np.ndarray:
    per = pd.DataFrame({"review": d.table["review"].to_numpy(), "group": np.asarray(group_ids)})
    counts = per.drop_duplicates("review")["group"].value_counts()
    return np.array([int(counts.get(g, 0)) for g in range(n_groups)])


def export_frame(d: Drivers, preds, *, by: str = "predicted", min_count: int = 5,
                 top_k: int = 20, hide_stopwords: bool = True) -> pd.DataFrame:
    """Every group's top words by every method, one row each (the CSV download)."""
    gid, names = groups(d, preds, by)
    counts = reviews_per_group(d, gid, len(names))
    rows = []
    for method in METHODS:
        tops = top_drivers(d, gid, len(names), method, min_count=min_count, top_k=top_k,
                           hide_stopwords=hide_stopwords)
        for g, df in tops.items():
            for rank, r in enumerate(df.itertuples(index=False), start=1):
                rows.append({"group": names[g], "group_reviews": int(counts[g]),
                             "method": LABELS[method], "rank": rank, "word": r.word,
                             "mean_score": float(r.score), "reviews_with_word": int(r.reviews)})
    return pd.DataFrame(rows, columns=["group", "group_reviews", "method", "rank", "word",
                                       "mean_score", "reviews_with_word"])
