"""``reviewbert cohorts``: where a checkpoint's errors cluster — its error tree and SliceLine's
top slices over the review properties, each defined by a pandas query."""
from __future__ import annotations

import argparse
import json
import sys
import time

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    c = sub.add_parser(
        "cohorts", help="failing cohorts: an error tree and the top slices over review properties",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Evaluates the checkpoint (or reads its prediction cache), computes each "
                    "review's properties (length, negations, contrast words, VADER sentiment, "
                    "readability, aspects, other brands, cleanlab's flag, near-duplicates…), "
                    "then finds where the errors cluster: a shallow decision tree on 'was this "
                    "prediction wrong', and SliceLine's top slices with Benjamini-Hochberg "
                    "adjusted p-values. Each cohort is printed with its definition as a pandas "
                    "query over the properties table (--save-properties).")
    flags.checkpoint(c)
    flags.data(c, "review file(s); for --split test they must be the training files "
                  "(default: the files recorded in the checkpoint's reviewbert.json)")
    flags.split(c, "test: the checkpoint's own test split; all: every review of --data")
    c.add_argument("--target", choices=("wrong", "off_by_2"), default="wrong",
                   help="what counts as an error: a wrong prediction, or one off by 2+ stars")
    c.add_argument("--top", type=int, default=20, metavar="K", help="slices to report")
    c.add_argument("--depth", type=int, default=3, metavar="D", help="the error tree's depth")
    c.add_argument("--save-properties", metavar="FILE.csv", default=None,
                   help="write the properties table (CSV, or Parquet if FILE ends in .parquet)")
    flags.batch_size(c)
    flags.max_length(c)
    flags.precision(c, "auto: bf16 on a CPU with bf16 units (AMX/AVX512-BF16), else fp32")
    flags.no_cache(c, "neither read nor write the prediction and properties caches")
    flags.json_output(c, "also print one JSON object as the last line: target, n, errors, "
                         "error_rate, leaves (the tree's) and slices (worst first), each with "
                         "query, n, errors, error_rate, ci_low, ci_high (slices: p_adjusted)")
    return c


def run(args) -> int:
    t0 = time.perf_counter()
    if not 1 <= args.top <= 200:
        raise UsageError("--top must be between 1 and 200")
    if not 1 <= args.depth <= 6:
        raise UsageError("--depth must be between 1 and 6")
    from reviewbert.cli.report import _predict, _reviews
    from reviewbert.cohorts import pipeline, properties
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.progress import TqdmProgress

    model, tok, info = load_checkpoint(args.checkpoint)
    max_length = args.max_length or (info.meta.get("hyperparameters") or {}).get("max_length") or 256
    reviews, source = _reviews(args, info, tok)
    preds = _predict(model, tok, info, reviews, max_length, args, source)
    with TqdmProgress(preds.n, "properties", unit="review") as bar:
        table = pipeline.review_properties(preds, progress=bar,
                                           use_cache=not args.no_cache)
    if args.save_properties:
        properties.save_properties(table, args.save_properties)
        print(f"wrote the properties of {len(table):,} reviews to {args.save_properties}",
              file=sys.stderr)
    result = pipeline.find_cohorts(table, args.target, depth=args.depth, top=args.top)
    seconds = time.perf_counter() - t0
    _print(result, info.path)
    if args.json:
        out = result.to_json()
        out.update(checkpoint=str(info.path), seconds=round(seconds, 3))
        print(json.dumps(out, allow_nan=False))
    return 0


def _print(result, checkpoint) -> None:
    o = result.overall
    print(f"checkpoint {checkpoint}: {o.n:,} reviews, {o.errors:,} with {result.target} "
          f"({100 * o.error_rate:.1f}%)")
    print("\nThe error tree's leaves, worst first:")
    print(f"{'n':>6} {'errors':>6} {'rate':>6} {'cover':>6}  definition")
    for c in sorted(result.leaves, key=lambda c: -c.error_rate):
        print(f"{c.n:>6} {c.errors:>6} {100 * c.error_rate:5.1f}% {100 * c.coverage:5.1f}%  "
              f"{c.query or 'every review'}")
    print("\nSliceLine's top slices (p: Benjamini-Hochberg adjusted):")
    print(f"{'n':>6} {'errors':>6} {'rate':>6} {'lift':>5} {'p':>8}  definition")
    for c in result.slices:
        print(f"{c.n:>6} {c.errors:>6} {100 * c.error_rate:5.1f}% {c.lift:5.2f} "
              f"{c.p_adjusted:8.2g}  {c.query}")
    if not result.slices:
        print("  (none: no slice's error rate is above the split's)")
