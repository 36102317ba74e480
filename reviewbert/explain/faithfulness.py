"""Faithfulness of the explanations, measured on the loaded checkpoint (ERASER).

DeYoung et al. 2020 (ERASER) ask of a ranking of words: does the model need the
words ranked first? For one review, predicted class ŷ with probability p(ŷ|x),
and the top k % of its words by one method (at least one word):

- **comprehensiveness** = p(ŷ|x) − p(ŷ|x without those words): deleting the
  words that matter should hurt. Higher is more faithful.
- **sufficiency** = p(ŷ|x) − p(ŷ|only those words): the words that matter
  should be enough on their own. Lower is more faithful.

for k ∈ {5, 10, 20, 50} %, and their AOPC (the mean over the k's). Words are
deleted as whole wordpieces from the review's token ids ([CLS]/[SEP] stay), so
nothing is re-tokenised. Signed methods rank their strongest evidence *for* ŷ
first. A **random** ranking is the baseline: each review's value is the mean
over ``random_draws`` random orders (seeded by the review's place in the sample,
so a resumed run draws the same). Intervals are percentile bootstrap intervals
over reviews (``scipy.stats.bootstrap``); "beats random" is judged on the paired
per-review differences, with the same bootstrap. The measures themselves are
written here: ERASER's code is a research script, not a package, and each
measure is one subtraction of two forward passes.

Cache, next to the checkpoint (the folder holding config.json), or in the per-user
fallback ``~/.cache/reviewbert/faithfulness/<P>/`` when the checkpoint folder cannot be
written (store/location.py says where, and finds a run in either)::

    CHECKPOINT/faithfulness/
      <key>.json            one finished run, written atomically (fsio.atomic_write_json):
          {"format": "reviewbert-faithfulness/1",
           "key":            the file's name, see below,
           "weights_sha256": sha256 over the checkpoint's *.safetensors (file name + bytes,
                             in name order): what the numbers belong to,
           "checkpoint":     the folder as given when the run was made (informative only),
           "max_length":     tokens the model read per review,
           "sample":         {"source" (e.g. "test split"), "seed", "n",
                              "texts_sha256" (sha256 of the sample's texts, NUL-separated)},
           "settings":       {"methods" [names], "ks" [percent], "random_draws", "seed",
                              "layer" (raw attention / value norm; null = last), "head"
                              (null = mean of heads), "ig_steps" (IG's first step count),
                              "ig_max_steps" (doubled up to this while the delta > 5 %),
                              "lime_samples" (LIME's samples; absent in files written before
                              LIME and occlusion joined, whose settings are all five
                              earlier methods: their keys differ, they stay readable)},
           "labels":         {method name or "random": label for people},
           "reviews":        one object per review, in sample order:
                             {"i" (place in the sample), "n_words", "n_tokens", "target" (ŷ),
                              "p" (p(ŷ|x)), "comprehensiveness" {method: [value per k]},
                              "sufficiency" {method: [value per k]},
                              "ig_relative_delta" (|Captum delta| / |f(x) − f(baseline)|, or
                              null), "ig_steps" (the steps IG ended with, or null), "seconds"},
           "created" (unix seconds), "seconds" (compute time of all reviews)}
      <key>.partial.jsonl   the reviews an unfinished run has done, one "reviews" object a
                            line (or {"i", "skip": "no words"} for a review with no word left
                            after tokenising, which the final file leaves out), appended and
                            flushed per review; a later run with the same key resumes from it
                            (a torn last line is skipped) and removes it when it writes
                            <key>.json

    key = the first 20 hex digits of sha256(JSON of the format, weights_sha256, max_length,
          sample, settings): a re-saved or retrained checkpoint has other weights, so another
          key, and never reads the old numbers (``list_runs`` also filters by the weights
          hash). FORMAT changes when a method's arithmetic does: older files are not read.

A run that cannot be kept anywhere (neither folder can be written) is not an error: it
is computed and returned, uncached (``FaithfulnessRun.cache_error`` says why).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from reviewbert.explain import methods as explain
from reviewbert.store import location
from reviewbert.store.run_records import RunRecord, texts_sha256, weights_sha256

KS = (5, 10, 20, 50)
MEASURES = ("comprehensiveness", "sufficiency")
RANDOM = "random"
FORMAT = "reviewbert-faithfulness/1"
CACHE_DIR = location.FAITHFULNESS.folder   # "faithfulness"
RANDOM_DRAWS = 5
CONFIDENCE = 0.95
N_BOOT = 2000


# ------------------------------------------------------------------ settings
@dataclass(frozen=True)
class Settings:
    methods: tuple[str, ...] = explain.METHOD_NAMES
    ks: tuple[int, ...] = KS
    random_draws: int = RANDOM_DRAWS
    seed: int = 0
    layer: int | None = None      # raw attention and value norm; None: the last layer
    head: int | None = None       # None: mean of heads
    ig_steps: int = explain.IG_STEPS
    ig_max_steps: int = explain.IG_MAX_STEPS   # IG doubles its steps up to this while delta > 5 %
    lime_samples: int = explain.LIME_SAMPLES   # LIME's perturbed reviews per explanation

    def build_methods(self) -> list:
        chosen = {m.name: m for m in explain.all_methods(self.layer, self.head, self.ig_steps,
                                                   self.ig_max_steps, self.lime_samples)}
        unknown = [n for n in self.methods if n not in chosen]
        if unknown:
            raise ValueError(f"unknown method(s) {', '.join(unknown)}; "
                             f"choose from {', '.join(chosen)}")
        return [chosen[n] for n in self.methods]

    def as_json(self) -> dict:
        d = asdict(self)
        d["methods"], d["ks"] = list(self.methods), list(self.ks)
        return d


# --------------------------------------------------------------- one review
def n_top(n_words: int, k: float) -> int:
    """How many words are "the top k %": rounded up, at least one, at most all."""
    return min(n_words, max(1, math.ceil(n_words * k / 100.0 - 1e-9)))


def erased(ids: list[int], word_ids: list[int | None], words: set[int], keep: bool) -> list[int]:
    """``ids`` without the pieces of ``words`` (keep=False) or with only them (keep=True);
    special tokens always stay."""
    return [t for t, w in zip(ids, word_ids) if w is None or ((w in words) == keep)]


class ProbOf:
    """p(ŷ | ids) through the predictor's own forward pass, memoised per review
    (5 % and 10 % of a short review are often the same word)."""

    def __init__(self, predictor, target: int):
        self.predictor, self.target, self.memo = predictor, int(target), {}

    @torch.inference_mode()
    def __call__(self, ids: list[int]) -> float:
        key = tuple(ids)
        if key not in self.memo:
            p = self.predictor
            t = torch.tensor(ids, dtype=torch.long, device=p.device)
            if p.fast is not None:
                logits, _ = p.fast(t)       # no numpy copy of the attentions: not needed here
            else:
                logits = p.model(input_ids=t[None]).logits[0]
            self.memo[key] = float(torch.softmax(logits.float(), dim=-1)[self.target])
        return self.memo[key]


def erasure_curves(prob_of: Callable[[list[int]], float], ids, word_ids, order,
                   ks=KS) -> tuple[list[float], list[float]]:
    """(comprehensiveness per k, sufficiency per k) of one ranking ``order`` (word
    indices, most important first) of one review."""
    p0 = prob_of(list(ids))
    comp, suff = [], []
    for k in ks:
        top = {int(i) for i in order[:n_top(len(order), k)]}
        comp.append(p0 - prob_of(erased(ids, word_ids, top, keep=False)))
        suff.append(p0 - prob_of(erased(ids, word_ids, top, keep=True)))
    return comp, suff


def random_curves(prob_of, ids, word_ids, n_words: int, ks, draws: int,
                  rng: np.random.Generator) -> tuple[list[float], list[float]]:
    """The random baseline of one review: the mean over ``draws`` random rankings."""
    cs, ss = [], []
    for _ in range(draws):
        c, s = erasure_curves(prob_of, ids, word_ids, rng.permutation(n_words), ks)
        cs.append(c)
        ss.append(s)
    return np.mean(cs, axis=0).tolist(), np.mean(ss, axis=0).tolist()


def review_record(predictor, text: str, i: int, methods: list, settings: Settings) -> dict | None:
    """Every method's and the random baseline's curves for one review (None: no words)."""
    t0 = time.perf_counter()
    pred = predictor.predict(text)
    n_words = len(pred.words)
    if n_words == 0:
        return None
    ids = explain.token_ids(predictor, pred)
    prob_of = ProbOf(predictor, pred.label_id)
    rec = {"i": i, "n_words": n_words, "n_tokens": pred.n_tokens, "target": int(pred.label_id),
           "p": prob_of(ids), "comprehensiveness": {}, "sufficiency": {},
           "ig_relative_delta": None, "ig_steps": None}
    for m in methods:
        ts = m.run(predictor, pred)
        c, s = erasure_curves(prob_of, ids, pred.word_ids, explain.ranking(ts.scores), settings.ks)
        rec["comprehensiveness"][m.name], rec["sufficiency"][m.name] = c, s
        if ts.relative_delta is not None:
            rec["ig_relative_delta"], rec["ig_steps"] = ts.relative_delta, ts.n_steps
    rng = np.random.default_rng([settings.seed, i])
    c, s = random_curves(prob_of, ids, pred.word_ids, n_words, settings.ks,
                         settings.random_draws, rng)
    rec["comprehensiveness"][RANDOM], rec["sufficiency"][RANDOM] = c, s
    rec["seconds"] = time.perf_counter() - t0
    return rec


# --------------------------------------------------------------------- a run
@dataclass
class FaithfulnessRun(RunRecord):
    """One finished (or uncached) run; its file is the module docstring's <key>.json."""

    FORMAT = FORMAT
    PLACE = location.FAITHFULNESS

    key: str
    weights_sha256: str
    checkpoint: str
    max_length: int
    sample: dict
    settings: dict
    labels: dict
    reviews: list[dict]
    created: float = 0.0
    seconds: float = 0.0

    @property
    def methods(self) -> list[str]:
        """Method names in the settings' order, then "random"."""
        return list(self.settings["methods"]) + [RANDOM]

    @property
    def ks(self) -> list[int]:
        return list(self.settings["ks"])

    @property
    def n(self) -> int:
        return len(self.reviews)

    def values(self, measure: str, name: str) -> np.ndarray:
        """[n reviews, len(ks)] of one measure of one method."""
        return np.array([r[measure][name] for r in self.reviews], dtype=np.float64).reshape(
            len(self.reviews), len(self.ks))

    def aopc(self, measure: str, name: str) -> np.ndarray:
        """Per review: the mean over the k's (ERASER's area over the perturbation curve)."""
        return self.values(measure, name).mean(axis=1)

    def ig_deltas(self) -> np.ndarray:
        return np.array([r["ig_relative_delta"] for r in self.reviews
                         if r.get("ig_relative_delta") is not None], dtype=np.float64)


# the names the pages, the CLI and the tests use (store/run_records.py holds them once)
cache_key = FaithfulnessRun.cache_key
cache_paths = FaithfulnessRun.cache_paths
load_run = FaithfulnessRun.load
list_runs = FaithfulnessRun.list_runs


def sample_texts(texts: list[str], n: int, seed: int = 0) -> list[str]:
    """``n`` texts drawn without replacement; the first ``n`` of one fixed shuffle, so a
    sample of 100 is the start of the sample of 300 with the same seed."""
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[:max(0, min(n, len(texts)))]]


Progress = Callable[[int], None]
"""The library's progress callback: ``progress(n)`` with the reviews just done (a resumed
run first tells it, through ``reviewbert.progress.resumed``, how many were done before)."""


def measure(predictor, ckpt, texts: list[str], settings: Settings = Settings(), *,
            source: str = "test split", sample_seed: int = 0, progress: Progress | None = None,
            use_cache: bool = True, weights: str | None = None) -> FaithfulnessRun:
    """The faithfulness of every method in ``settings`` on ``texts`` (the sample), with
    the cache next to ``ckpt`` (see the module docstring). Resumes an unfinished run."""
    methods = settings.build_methods()
    weights = weights or weights_sha256(ckpt)
    sample = {"source": source, "seed": sample_seed, "n": len(texts),
              "texts_sha256": texts_sha256(texts)}
    key = cache_key(weights, predictor.max_length, sample, settings)
    if use_cache and (cached := FaithfulnessRun.find(ckpt, key)) is not None:
        return cached
    labels = {m.name: m.label for m in methods} | {RANDOM: "Random ranking"}
    with FaithfulnessRun.journal(ckpt, key, use_cache) as journal:
        reviews = journal.fill(len(texts), lambda i: review_record(predictor, texts[i], i, methods,
                                                                   settings), progress)
    result = FaithfulnessRun(key=key, weights_sha256=weights, checkpoint=str(ckpt),
                             max_length=int(predictor.max_length), sample=sample,
                             settings=settings.as_json(), labels=labels, reviews=reviews,
                             created=time.time(),
                             seconds=float(sum(r.get("seconds", 0.0) for r in reviews)),
                             cache_error=journal.error)
    journal.save(result)
    return result


# ----------------------------------------------------------------- summaries
@dataclass(frozen=True)
class Stat:
    mean: float
    lo: float
    hi: float

    def fmt(self, digits: int = 3) -> str:
        if not np.isfinite(self.lo):
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


def bootstrap_mean(x, confidence: float = CONFIDENCE, n_boot: int = N_BOOT,
                   seed: int = 0) -> Stat:
    """Mean with a percentile bootstrap interval over reviews (NaN bounds for n < 2)."""
    from scipy.stats import bootstrap
    x = np.asarray(x, dtype=np.float64)
    mean = float(x.mean()) if x.size else float("nan")
    if x.size < 2 or np.ptp(x) == 0:
        return Stat(mean, mean if x.size >= 2 else float("nan"), mean if x.size >= 2 else float("nan"))
    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=n_boot,
                    method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    return Stat(mean, float(res.confidence_interval.low), float(res.confidence_interval.high))


def summarize(result: FaithfulnessRun, confidence: float = CONFIDENCE,
              n_boot: int = N_BOOT) -> dict:
    """{method: {measure: {"5": Stat, …, "aopc": Stat}}} for every method and "random"."""
    out = {}
    for name in result.methods:
        out[name] = {}
        for measure in MEASURES:
            v = result.values(measure, name)
            row = {str(k): bootstrap_mean(v[:, j], confidence, n_boot) for j, k in enumerate(result.ks)}
            row["aopc"] = bootstrap_mean(v.mean(axis=1), confidence, n_boot)
            out[name][measure] = row
    return out


def versus_random(result: FaithfulnessRun, name: str, confidence: float = CONFIDENCE,
                  n_boot: int = N_BOOT) -> dict[str, Stat]:
    """Paired per-review AOPC advantage over random, positive = more faithful than random:
    {"comprehensiveness": method − random, "sufficiency": random − method}."""
    comp = result.aopc("comprehensiveness", name) - result.aopc("comprehensiveness", RANDOM)
    suff = result.aopc("sufficiency", RANDOM) - result.aopc("sufficiency", name)
    return {"comprehensiveness": bootstrap_mean(comp, confidence, n_boot),
            "sufficiency": bootstrap_mean(suff, confidence, n_boot)}


def faithfulness_score(summary: dict, name: str) -> float:
    """comprehensiveness AOPC − sufficiency AOPC: higher is more faithful on both."""
    return summary[name]["comprehensiveness"]["aopc"].mean - summary[name]["sufficiency"]["aopc"].mean


def _moves(drop: float, what: str) -> str:
    return f"lowers {what} by {drop:.3f}" if drop >= 0 else f"raises {what} by {-drop:.3f}"


def _beats(stat: Stat) -> str:
    if not np.isfinite(stat.lo):
        return "unclear"
    return "better" if stat.lo > 0 else ("worse" if stat.hi < 0 else "tie")


def verdict(result: FaithfulnessRun, summary: dict | None = None) -> list[str]:
    """The plain reading, as a few Markdown sentences: which method is most faithful on
    this model, and whether raw attention beats random."""
    summary = summary or summarize(result)
    names = [n for n in result.methods if n != RANDOM]
    if not result.reviews or not names:
        return ["No review was scored."]
    lab = result.labels
    rnd_c = summary[RANDOM]["comprehensiveness"]["aopc"].mean
    rnd_s = summary[RANDOM]["sufficiency"]["aopc"].mean
    best = max(names, key=lambda n: faithfulness_score(summary, n))
    c = summary[best]["comprehensiveness"]["aopc"].mean
    s = summary[best]["sufficiency"]["aopc"].mean
    ks = f"{result.ks[0]}–{result.ks[-1]} %"
    line = (f"**{lab[best]} is the most faithful method on this model** ({result.n} reviews; "
            f"ranked by comprehensiveness − sufficiency AOPC): deleting its top words ({ks}) "
            f"{_moves(c, 'p(predicted class)')} on average (comprehensiveness AOPC; random "
            f"words: {rnd_c:.3f}), and keeping only them {_moves(s, 'it')} (sufficiency AOPC; "
            f"random words: {rnd_s:.3f})")
    vs_best = versus_random(result, best)
    if _beats(vs_best["sufficiency"]) in ("worse", "tie"):
        than = "worse than" if _beats(vs_best["sufficiency"]) == "worse" else "no better than"
        line += (f" — but on sufficiency it is {than}"
                 " random: its top words alone do not keep the prediction better than random words")
    out = [line + "."]
    if "raw_attention" in names:
        vs = versus_random(result, "raw_attention")
        c_, s_ = _beats(vs["comprehensiveness"]), _beats(vs["sufficiency"])
        vc, vsu = vs["comprehensiveness"], vs["sufficiency"]
        pct = int(round(100 * CONFIDENCE))
        detail = (f"comprehensiveness {vc.mean:+.3f} vs random ({pct} % CI {vc.lo:+.3f} to "
                  f"{vc.hi:+.3f}), sufficiency {vsu.mean:+.3f} ({vsu.lo:+.3f} to {vsu.hi:+.3f}); "
                  "positive = more faithful than random")
        if c_ == "better" and s_ == "better":
            head = "**Raw attention beats random** on both measures"
        elif "better" in (c_, s_) and "worse" not in (c_, s_):
            which = "comprehensiveness" if c_ == "better" else "sufficiency"
            head = f"**Raw attention beats random on {which} only**"
        elif c_ == "worse" and s_ == "worse":
            head = "**Raw attention is worse than random** on both measures"
        elif "worse" in (c_, s_) and "better" in (c_, s_):
            head = "**Raw attention is mixed against random** (better on one measure, worse on the other)"
        elif "worse" in (c_, s_):
            head = "**Raw attention does not beat random** (and is worse on one measure)"
        else:
            head = "**Raw attention does not beat random** (both intervals include 0)"
        out.append(f"{head}: {detail}.")
    d = result.ig_deltas()
    if d.size:
        over = float((d > explain.DELTA_WARN).mean())
        if over > 0:
            out.append(f"IG's convergence delta stayed above {explain.DELTA_WARN:.0%} of f(x) − "
                       f"f(baseline) on {over:.0%} of the reviews (at up to "
                       f"{result.settings.get('ig_max_steps', result.settings['ig_steps'])} "
                       "steps): those attributions do not quite add up.")
    if "occlusion" in names:
        out.append(_occlusion_note(summary, lab))
    return out


def _occlusion_note(summary: dict, labels: dict) -> str:
    """Occlusion is graded on nearly its own arithmetic: say so, with its two numbers."""
    c = summary["occlusion"]["comprehensiveness"]["aopc"].mean
    s = summary["occlusion"]["sufficiency"]["aopc"].mean
    return (f"Read {labels.get('occlusion', 'occlusion')} with care: its score of a word *is* "
            "the comprehensiveness of deleting that word alone, so at small k the measure "
            "repeats the method (comprehensiveness AOPC "
            f"{c:.3f}); deleting several top words at once and keeping only them (sufficiency "
            f"AOPC {s:.3f}) are the fairer tests of it.")


def summary_json(result: FaithfulnessRun, summary: dict | None = None) -> dict:
    """The CLI's last line: {method or "random": {"comprehensiveness": {"5": mean, …,
    "aopc": mean}, "sufficiency": {…}, "ci95": {measure: {k: [lo, hi]}}, "n": reviews}}."""
    summary = summary or summarize(result)
    out = {}
    for name in result.methods:
        entry = {"label": result.labels.get(name, name), "n": result.n}
        ci = {}
        for measure in MEASURES:
            entry[measure] = {k: round(st.mean, 5) for k, st in summary[name][measure].items()}
            ci[measure] = {k: [round(st.lo, 5), round(st.hi, 5)]
                           for k, st in summary[name][measure].items()}
        entry[f"ci{int(round(100 * CONFIDENCE))}"] = ci
        out[name] = entry
    return out


def table_rows(result: FaithfulnessRun, summary: dict | None = None) -> list[dict]:
    """One row per method and measure: label, measure, one "mean [lo, hi]" per k, AOPC."""
    summary = summary or summarize(result)
    rows = []
    for name in result.methods:
        for measure in MEASURES:
            st = summary[name][measure]
            row = {"method": result.labels.get(name, name),
                   "measure": measure + (" ↑" if measure == "comprehensiveness" else " ↓")}
            row |= {f"{k} %": st[str(k)].fmt() for k in result.ks}
            row["AOPC"] = st["aopc"].fmt()
            rows.append(row)
    return rows


def format_table(result: FaithfulnessRun, summary: dict | None = None) -> str:
    rows = table_rows(result, summary)
    cols = list(rows[0]) if rows else []
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)

