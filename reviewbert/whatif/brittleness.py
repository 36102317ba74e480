"""Brittleness over a split: how many words must go before the predicted rating changes?

For each review of a sample (by default the first n of the same fixed shuffle as the
Faithfulness sample, so n = 300 is the same 300 reviews): the minimal deletion flip of
``whatif.minimal_deletion`` along one explanation's ranking, up to ``max_words`` words,
every flip confirmed by an exact fp32 pass. Reported: the distribution of the number of
words needed, and the share of reviews whose rating changes with at most 1, 3 and 5
words (Wilson 95 % intervals), for all reviews and separately for those the model gets
right and wrong. The numbers are upper bounds on the smallest deletion: the search is
greedy along a ranking, and the set it finds is 1-minimal (no word of it can be put
back), not the smallest of all.

Cache, next to the checkpoint (the folder holding config.json), or in the per-user
fallback ``~/.cache/reviewbert/whatif/<P>/`` when the checkpoint folder cannot be written
(store/location.py says where, and finds a run in either)::

    CHECKPOINT/whatif/
      <key>.json            one finished run, written atomically (fsio.atomic_write_json):
          {"format": "reviewbert-brittleness/1",
           "key":            the file's name, see below,
           "weights_sha256": store.run_records.weights_sha256 of the checkpoint,
           "checkpoint":     the folder as given (informative only),
           "max_length":     tokens the model read per review,
           "labels":         the class names, in class-id order,
           "sample":         {"source" (e.g. "test split"), "seed", "n",
                              "texts_sha256" (sha256 of the texts, NUL-separated),
                              "stars_sha256" (sha256 of the true stars, comma-separated)},
           "settings":       {"method" (the ranking's explain method name), "max_words",
                              "precision" (of the search passes: "bf16" or "fp32")},
           "reviews":        one object per review with words, in sample order:
                             {"i" (place in the sample), "n_tokens", "n_words",
                              "true" (true class id), "pred" (predicted class id), "p"
                              (its probability), "found" (bool), "k" (words deleted, or
                              null), "words" [the deleted words, reading order], "new_pred"
                              (class after the deletion, or null), "new_p" (its fp32
                              probability, or null), "passes" (forward passes), "seconds"},
           "created" (unix seconds), "seconds" (compute time of all reviews)}
      <key>.partial.jsonl   the reviews an unfinished run has done, one object a line
                            ({"i", "skip": "no words"} for a review the tokenizer leaves
                            empty), flushed per review; a later run with the same key
                            resumes from it (a torn last line is skipped) and removes it
                            once <key>.json is written

    key = the first 20 hex digits of sha256(JSON of the format, weights_sha256, max_length,
          sample, settings): other weights, reviews or settings give another file.

A run that cannot be kept anywhere (neither folder can be written) is not an error: it is
returned uncached (``BrittlenessRun.cache_error`` says why).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass

import numpy as np

from reviewbert.explain.faithfulness import Progress
from reviewbert.model.device import resolve_precision
from reviewbert.store import location
from reviewbert.store.run_records import RunRecord, texts_sha256, weights_sha256
from reviewbert.whatif import counterfactuals as whatif

FORMAT = "reviewbert-brittleness/1"
CACHE_DIR = location.BRITTLENESS.folder   # "whatif"
WITHIN = (1, 3, 5)
CONFIDENCE = 0.95
GROUPS = ("all", "correct", "wrong")


DEFAULT_METHOD = "occlusion"
"""The ranking of a brittleness run: leave-one-out, so "flipped with one word" is all but
exact. On 40 demo test reviews (≤ 10 words) occlusion's ranking changed the rating of 38,
value norm's (the page's instant default) of only 28: a weak ranking makes a model look
sturdier than it is."""


@dataclass(frozen=True)
class Settings:
    method: str = DEFAULT_METHOD
    max_words: int = whatif.MAX_WORDS
    precision: str = "auto"          # of the search passes; resolved before it is keyed

    def resolved(self, device) -> "Settings":
        return Settings(self.method, int(self.max_words), resolve_precision(self.precision, device))

    def as_json(self) -> dict:
        return asdict(self)


def sample(n_total: int, n: int, seed: int = 0) -> list[int]:
    """Indices of the first ``n`` of one fixed shuffle (faithfulness.sample_texts' order)."""
    return [int(i) for i in np.random.default_rng(seed).permutation(n_total)[:max(0, min(n, n_total))]]


def review_record(predictor, text: str, true: int | None, i: int, settings: Settings) -> dict | None:
    """The deletion flip of one review (None: the tokenizer leaves no word)."""
    t0 = time.perf_counter()
    pred = predictor.predict(text)
    if not pred.words:
        return None
    checker = whatif.Checker(predictor, search=settings.precision)
    order = whatif.ranking(predictor, pred, settings.method)
    flip = whatif.minimal_deletion(checker, pred, order, settings.method, settings.max_words)
    cf = flip.counterfactual
    return {"i": i, "n_tokens": pred.n_tokens, "n_words": len(pred.words),
            "true": None if true is None else int(true), "pred": int(pred.label_id),
            "p": float(pred.probs[pred.label_id]), "found": flip.found,
            "k": len(flip.words) if flip.found else None,
            "words": [pred.words[w] for w in flip.words],
            "new_pred": None if cf is None else cf.label_id,
            "new_p": None if cf is None else float(cf.probs[cf.label_id]),
            "passes": sum(checker.passes.values()), "seconds": time.perf_counter() - t0}


@dataclass
class BrittlenessRun(RunRecord):
    """One finished (or uncached) run; its file is the module docstring's <key>.json."""

    FORMAT = FORMAT
    PLACE = location.BRITTLENESS

    key: str
    weights_sha256: str
    checkpoint: str
    max_length: int
    labels: list
    sample: dict
    settings: dict
    reviews: list[dict]
    created: float = 0.0
    seconds: float = 0.0

    @property
    def n(self) -> int:
        return len(self.reviews)


# the names the pages, the CLI and the tests use (store/run_records.py holds them once)
cache_key = BrittlenessRun.cache_key
cache_paths = BrittlenessRun.cache_paths
load_run = BrittlenessRun.load
list_runs = BrittlenessRun.list_runs


def describe_sample(texts: list[str], stars: list[int | None], source: str, seed: int) -> dict:
    blob = ",".join("" if s is None else str(int(s)) for s in stars)
    return {"source": source, "seed": seed, "n": len(texts), "texts_sha256": texts_sha256(texts),
            "stars_sha256": hashlib.sha256(blob.encode()).hexdigest()}


def measure(predictor, ckpt, texts: list[str], stars: list[int | None],
            settings: Settings = Settings(), *, source: str = "test split", sample_seed: int = 0,
            progress: Progress | None = None, use_cache: bool = True,
            weights: str | None = None) -> BrittlenessRun:
    """The deletion flip of every review of ``texts`` (the sample; ``stars`` their true
    ratings, None where unknown), cached next to ``ckpt``; resumes an unfinished run."""
    settings = settings.resolved(predictor.device)
    weights = weights or weights_sha256(ckpt)
    desc = describe_sample(texts, stars, source, sample_seed)
    key = cache_key(weights, predictor.max_length, desc, settings)
    if use_cache and (cached := BrittlenessRun.find(ckpt, key)) is not None:
        return cached
    scheme = predictor.scheme
    def record(i: int) -> dict | None:
        true = None if stars[i] is None else scheme.class_of(stars[i])
        return review_record(predictor, texts[i], true, i, settings)

    with BrittlenessRun.journal(ckpt, key, use_cache) as journal:
        reviews = journal.fill(len(texts), record, progress)
    result = BrittlenessRun(key, weights, str(ckpt), int(predictor.max_length), list(scheme.names),
                            desc, settings.as_json(), reviews, time.time(),
                            float(sum(r.get("seconds", 0.0) for r in reviews)),
                            cache_error=journal.error)
    journal.save(result)
    return result


# ------------------------------------------------------------------ summary
@dataclass(frozen=True)
class Share:
    count: int
    n: int
    lo: float
    hi: float

    @property
    def share(self) -> float:
        return self.count / self.n if self.n else float("nan")

    def fmt(self) -> str:
        if not self.n:
            return "n/a"
        return f"{self.share:.1%} [{self.lo:.1%}, {self.hi:.1%}] ({self.count}/{self.n})"


def wilson(count: int, n: int, confidence: float = CONFIDENCE) -> Share:
    """count of n with scipy's Wilson score interval."""
    if n == 0:
        return Share(0, 0, float("nan"), float("nan"))
    from scipy.stats import binomtest
    ci = binomtest(int(count), int(n)).proportion_ci(confidence, method="wilson")
    return Share(int(count), int(n), float(ci.low), float(ci.high))


def group(result: BrittlenessRun, name: str) -> list[dict]:
    """The reviews of one group: "all", "correct" (true class = predicted) or "wrong"."""
    if name == "all":
        return list(result.reviews)
    known = [r for r in result.reviews if r.get("true") is not None]
    return [r for r in known if (r["true"] == r["pred"]) == (name == "correct")]


def summarize(result: BrittlenessRun) -> dict:
    """{group: {"n", "within": {1: Share, 3: Share, 5: Share, max_words: Share},
    "histogram": {1..max_words: count, "none": count}, "median_words"}}."""
    top = int(result.settings["max_words"])
    out = {}
    for name in GROUPS:
        rows = group(result, name)
        ks = [r["k"] for r in rows if r.get("found")]
        within = {w: wilson(sum(k <= w for k in ks), len(rows)) for w in (*WITHIN, top) if w <= top}
        hist = {k: sum(1 for x in ks if x == k) for k in range(1, top + 1)}
        hist["none"] = len(rows) - len(ks)
        out[name] = {"n": len(rows), "within": within, "histogram": hist,
                     "median_words": float(np.median(ks)) if ks else None}
    return out


def summary_json(result: BrittlenessRun, summary: dict | None = None) -> dict:
    """The CLI's last line."""
    summary = summary or summarize(result)
    groups = {}
    for name, g in summary.items():
        groups[name] = {"n": g["n"], "median_words": g["median_words"],
                        "histogram": {str(k): v for k, v in g["histogram"].items()},
                        "share_within": {str(w): None if not s.n else round(s.share, 4)
                                         for w, s in g["within"].items()},
                        f"ci{int(CONFIDENCE * 100)}": {str(w): [round(s.lo, 4), round(s.hi, 4)]
                                                       for w, s in g["within"].items() if s.n}}
    return {"n": result.n, "settings": result.settings, "sample": result.sample,
            "max_length": result.max_length, "seconds": round(result.seconds, 1),
            "cached": result.from_cache, **groups, "example": example(result)}


def example(result: BrittlenessRun) -> dict | None:
    """One flip to quote: the fewest words, then the most confident original prediction."""
    flips = [r for r in result.reviews if r.get("found")]
    if not flips:
        return None
    r = min(flips, key=lambda r: (r["k"], -r["p"]))
    names = result.labels
    return {"i": r["i"], "words": r["words"], "from": names[r["pred"]], "p": round(r["p"], 4),
            "to": names[r["new_pred"]], "new_p": round(r["new_p"], 4),
            "true": None if r.get("true") is None else names[r["true"]]}


def table_rows(result: BrittlenessRun, summary: dict | None = None) -> list[dict]:
    """One row per group: reviews, share changed within 1/3/5/max words, median words."""
    summary = summary or summarize(result)
    rows = []
    for name in GROUPS:
        g = summary[name]
        row = {"reviews": name, "n": g["n"]}
        row |= {f"≤ {w} word{'s' if w > 1 else ''}": s.fmt() for w, s in g["within"].items()}
        row["median words (flipped)"] = "n/a" if g["median_words"] is None else f"{g['median_words']:g}"
        rows.append(row)
    return rows


def reading(result: BrittlenessRun, summary: dict | None = None) -> list[str]:
    """A few plain sentences (no Markdown)."""
    summary = summary or summarize(result)
    top = int(result.settings["max_words"])
    a, c, w = (summary[g] for g in GROUPS)
    if not a["n"]:
        return ["No review was scored."]
    lines = [f"Deleting at most {top} words (greedy along the {result.settings['method']} ranking) "
             f"changes the predicted rating of {a['within'][top].share:.0%} of {a['n']} reviews; "
             f"{a['within'][1].share:.0%} change with a single word, {a['within'][3].share:.0%} "
             "with at most 3."]
    if c["n"] and w["n"]:
        cw, ww = c["within"][3], w["within"][3]
        apart = cw.hi < ww.lo or ww.hi < cw.lo
        lines.append(f"Within 3 words: {cw.share:.0%} of the correct predictions and {ww.share:.0%} "
                     "of the wrong ones" + (" (the 95 % intervals do not overlap)." if apart
                                            else " (the 95 % intervals overlap)."))
    return lines
