"""Failing cohorts at 10,000 reviews: the properties table, the tree and the top slices, and
a tag write under 20 concurrent writers, each against a baseline in the same run.

- **properties**: ``properties.build_table`` on 10,000 real reviews (the first unique ones
  of ``unlocked_mobile_10k.csv`` and ``unlocked_mobile_5k.csv`` in ``$REVIEWBERT_DATA_DIR``,
  else the built-in examples varied), with seeded random class probabilities (the model's
  pass is not what is timed), cleanlab's flags and the near-duplicates included.
  Baseline: stock VADER and textstat alone over the same texts, the libraries' own cost.
- **tree + slices**: ``finder.error_tree`` and ``finder.top_slices(k=20)`` on that table.
  Baseline: sliceline's stock ``Slicefinder`` on the same binned matrix with the same
  parameters (``--quick`` leaves it out: it takes tens of seconds).
- **tags**: 20 threads, each with its own connection to one SQLite file, each tagging
  reviews one write at a time; p95 of one write's latency. Baseline: the same writes by one
  thread alone.

Targets (issue 49): properties ≤ 10 s; tree + top 20 slices ≤ 5 s; a tag write's p95 ≤ 50 ms
with 20 writers on SQLite.

Usage: ``OMP_NUM_THREADS=2 python bench/cohorts.py [--n 10000] [--quick]``; the last stdout
line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.analysis.predictions import SplitPredictions, build_frame  # noqa: E402
from reviewbert.cohorts import finder, properties  # noqa: E402
from reviewbert.model.device import cpu_description  # noqa: E402
from reviewbert.model.labels import FIVE  # noqa: E402

TARGET_PROPS_S, TARGET_FIND_S, TARGET_P95_MS = 10.0, 5.0, 50.0
WRITERS, WRITES = 20, 25


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def reviews(n: int) -> tuple[list, str]:
    """n real reviews, or the built-in examples varied when the data is not here."""
    from reviewbert.analysis.sources import all_reviews
    from reviewbert.data import DataError
    folder = Path(os.environ.get("REVIEWBERT_DATA_DIR") or ROOT.parent / "shared" / "data")
    paths = [folder / "unlocked_mobile_10k.csv", folder / "unlocked_mobile_5k.csv"]
    try:
        _, chunks, _ = all_reviews(paths, FIVE)
        out = [e for chunk in chunks for e in chunk][:n]
        if len(out) >= n:
            return out, " + ".join(p.name for p in paths)
        say(f"only {len(out):,} unique reviews in {folder}: the built-in examples, varied")
    except (DataError, OSError) as e:
        say(f"{folder} not readable ({e}): the built-in examples, varied")
    from reviewbert.data.examples import builtin_examples
    base = builtin_examples()
    return [type(base[0])(f"{base[i % len(base)].text} (copy {i})", base[i % len(base)].stars,
                          "examples") for i in range(n)], "built-in examples"


def predictions(revs) -> SplitPredictions:
    rng = np.random.default_rng(0)
    stars = np.array([int(r.stars) for r in revs])
    logits = rng.normal(size=(len(revs), 5)) + 2.5 * np.eye(5)[stars - 1]
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    n_tokens = [len(r.text.split()) * 4 // 3 for r in revs]
    return SplitPredictions(build_frame(revs, FIVE, probs.astype(np.float32), n_tokens), FIVE,
                            {"max_length": 256}, None)


def libraries_floor(texts: list[str]) -> float:
    """Stock VADER and textstat over the same texts (their first 5,000 characters, as the
    properties read them)."""
    import textstat
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    vader = SentimentIntensityAnalyzer()
    t0 = time.perf_counter()
    for t in texts:
        head = t[:5000]
        vader.polarity_scores(head)
        if head.strip():
            textstat.flesch_reading_ease(head)
            textstat.flesch_kincaid_grade(head)
    return time.perf_counter() - t0


def stock_sliceline(table, k: int = 20) -> float:
    """sliceline's own Slicefinder on the binned matrix top_slices searches."""
    from sliceline.slicefinder import Slicefinder
    binned = [b for b in (finder.bin_property(table, p)
                          for p in finder.feature_columns(table, None, "wrong")) if b is not None]
    codes = np.column_stack([b.codes for b in binned])
    err = table["wrong"].to_numpy(dtype=float)
    t0 = time.perf_counter()
    Slicefinder(alpha=0.95, k=finder.CANDIDATES_PER_SLICE * k, max_l=3,
                min_sup=max(20, int(np.ceil(0.01 * len(table)))), verbose=False).fit(codes, err)
    return time.perf_counter() - t0


def tag_latencies(url: str, writers: int, keys_per: int = WRITES) -> list[float]:
    from reviewbert.store import db
    db.open_store(url)           # migrated once, before the clock
    out, lock, start = [], threading.Lock(), threading.Barrier(writers)

    def writer(w: int) -> None:
        store = db.open_store(url)
        start.wait()
        mine = []
        for i in range(keys_per):
            t0 = time.perf_counter()
            store.tag(f"t1:bench-{w}-{i}", f"tag-{w % 5}", f"writer {w}")
            mine.append(time.perf_counter() - t0)
        with lock:
            out.extend(mine)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db.close_all()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="no stock-SliceLine baseline")
    args = ap.parse_args()
    revs, source = reviews(args.n)
    preds = predictions(revs)
    say(f"{preds.n:,} reviews from {source}; {cpu_description()}")
    properties.text_properties(["warm up the imports and cmudict."])
    t0 = time.perf_counter()
    table = properties.build_table(preds)
    props_s = time.perf_counter() - t0
    floor_s = libraries_floor([r.text for r in revs])
    say(f"properties {props_s:.2f} s (VADER + textstat alone {floor_s:.2f} s)")
    finder.top_slices(table.head(500))                  # imports and numba's compilation
    t0 = time.perf_counter()
    nodes = finder.error_tree(table)
    found = finder.top_slices(table, k=20)
    find_s = time.perf_counter() - t0
    stock_s = None if args.quick else stock_sliceline(table)
    say(f"tree + top 20 slices {find_s:.2f} s ({len(nodes)} nodes, {len(found)} slices); "
        f"stock Slicefinder {stock_s if stock_s is None else round(stock_s, 2)} s")
    with tempfile.TemporaryDirectory() as tmp:
        many = tag_latencies(f"sqlite:///{tmp}/many.db", WRITERS)
        one = tag_latencies(f"sqlite:///{tmp}/one.db", 1, WRITERS * WRITES)
    p95, p95_one = (1000 * float(np.percentile(v, 95)) for v in (many, one))
    say(f"tag write p95: {p95:.1f} ms with {WRITERS} writers, {p95_one:.1f} ms alone")
    checks = {"properties_le_10s": props_s <= TARGET_PROPS_S, "find_le_5s": find_s <= TARGET_FIND_S,
              "tag_p95_le_50ms": p95 <= TARGET_P95_MS}
    print(json.dumps({"bench": "cohorts", "cpu": cpu_description(), "reviews": preds.n,
                      "source": source, "properties_s": round(props_s, 3),
                      "libraries_floor_s": round(floor_s, 3), "find_s": round(find_s, 3),
                      "stock_sliceline_s": None if stock_s is None else round(stock_s, 3),
                      "slices": len(found), "tree_nodes": len(nodes),
                      "tag_p95_ms": round(p95, 2), "tag_p95_one_writer_ms": round(p95_one, 2),
                      "writers": WRITERS, "writes": len(many),
                      "targets": {"properties_s": TARGET_PROPS_S, "find_s": TARGET_FIND_S,
                                  "tag_p95_ms": TARGET_P95_MS},
                      "checks": checks, "met": all(checks.values())}))


if __name__ == "__main__":
    main()
