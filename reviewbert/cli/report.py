"""``reviewbert report``: the error-analysis page as one self-contained, offline HTML file."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    r = sub.add_parser("report", help="the error-analysis page as one offline HTML file",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Evaluates the checkpoint (or reads its prediction cache), "
                                   "then writes one self-contained HTML file: metrics with "
                                   "intervals, confusion, ROC, calibration, per-rating "
                                   "attention, cleanlab's label issues and the failing cohorts.")
    flags.checkpoint(r)
    flags.data(r, "review file(s); for --split test they must be the training files")
    flags.split(r, "test: the checkpoint's own test split; all: every review of --data")
    r.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    flags.batch_size(r)
    flags.max_length(r)
    flags.precision(r, "auto: bf16 on a CPU with bf16 units (AMX/AVX512-BF16), else fp32")
    r.add_argument("--layer", type=int, default=None,
                   help="layer (1-based) of the per-rating attention; default: second-to-last")
    r.add_argument("--min-count", type=int, default=5,
                   help="per-rating attention: a word must occur in this many reviews")
    r.add_argument("--no-attention", action="store_true",
                   help="skip the per-rating attention pass (one more pass over the data)")
    r.add_argument("--map", choices=("pca", "umap", "none"), default="pca",
                   help="the split map (projector, neighbours, drivers, slices): its projection, "
                        "or none to leave the section out")
    r.add_argument("--drivers-sample", type=int, default=None, metavar="N",
                   help="reviews explained by Integrated Gradients for the per-rating drivers "
                        "(default 300; 0: no drivers; more than the split: all)")
    r.add_argument("--compare", metavar="DIR", default=None,
                   help="a second checkpoint to compare with on the same reviews")
    flags.no_cache(r)
    flags.json_output(r, "print one JSON object (metrics, label issues) as the last line")
    return r


def run(args) -> int:
    from reviewbert.analysis.html_report import ReportInputs, build_report
    from reviewbert.analysis.intervals import metric_intervals
    from reviewbert.analysis.sources import describe
    from reviewbert.fsio import atomic_write_text
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.metrics import format_metrics

    model, tok, info = load_checkpoint(args.checkpoint)
    max_length = args.max_length or (info.meta.get("hyperparameters") or {}).get("max_length") or 256
    reviews, source = _reviews(args, info, tok)
    preds = _predict(model, tok, info, reviews, max_length, args, source)
    print(f"checkpoint {info.path}: {preds.n} reviews ({describe(source)}), "
          f"{preds.meta.get('precision')}" + (" [from the cache]" if preds.cached else ""))
    inputs = ReportInputs(preds, info.name, intervals=metric_intervals(
        preds.y, preds.probs, info.scheme.num_labels))
    print(format_metrics(preds.metrics()))
    _label_issues(inputs, preds)
    if not args.no_attention:
        _rating_attention(inputs, preds, info, tok, model.device, args)
    if args.map != "none":
        _split_map(inputs, preds, model, tok, info, args)
    if args.compare:
        _compare(inputs, preds, info, reviews, max_length, args, source)
    inputs.behaviour = _behaviour(info, reviews, max_length)
    inputs.cohorts, inputs.saved_cohorts = _cohorts(preds, args)
    atomic_write_text(args.out, build_report(inputs))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e6:.1f} MB)")
    if args.json:
        summary = _summary(args, info, preds, inputs, source)
        if inputs.split_map is not None:
            summary["split_map"] = {**inputs.split_map.to_json(preds.names),
                                    "image": _map_image(inputs.split_map, args.out)}
        print(json.dumps(summary, default=str))
    return 0


def _reviews(args, info, tok):
    """(reviews, source): the checkpoint's test split, or every review of --data."""
    from reviewbert import data
    from reviewbert.analysis.sources import CACHE_MAX_REVIEWS, all_reviews, test_split
    if args.split == "test":
        reviews, source, warnings = test_split(info.meta, tok, args.data)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    else:
        if not args.data:
            raise data.DataError("--split all needs --data FILE")
        report, chunks, source = all_reviews(args.data, info.scheme, info.meta)
        if report.unique_texts > CACHE_MAX_REVIEWS:
            raise data.DataError(f"{report.unique_texts:,} reviews: the report holds at most "
                                 f"{CACHE_MAX_REVIEWS:,}; use evaluate --save-predictions")
        reviews = [e for chunk in chunks for e in chunk]
    if not reviews:
        raise data.DataError("no reviews to evaluate")
    return reviews, source


def _predict(model, tok, info, reviews, max_length, args, source):
    from reviewbert.analysis.predictions import planned_reviews, predict_split
    from reviewbert.model.device import resolve_precision
    from reviewbert.progress import TqdmProgress
    total = planned_reviews(len(reviews), resolve_precision(args.precision, model.device))
    with TqdmProgress(total, f"evaluating {info.name}") as progress:
        return predict_split(model, tok, info.path, reviews, info.scheme, max_length=max_length,
                             precision=args.precision, batch_size=args.batch_size,
                             progress=progress, source=source, use_cache=not args.no_cache)


def _label_issues(inputs, preds) -> None:
    from reviewbert.analysis.label_issues import find_issues
    from reviewbert.model.metrics import format_metrics
    try:
        inputs.issues = find_issues(preds)
        iss = inputs.issues
        print(f"cleanlab flags {iss.count} of {iss.n} reviews ({iss.count / iss.n:.1%}); "
              f"without them: {format_metrics(iss.metrics_clean)}")
    except ValueError as e:
        print(f"label issues: skipped ({e})", file=sys.stderr)


def _rating_attention(inputs, preds, info, tok, device, args) -> None:
    from reviewbert import data
    from reviewbert.analysis import word_attention
    from reviewbert.model.inference import Predictor
    from reviewbert.progress import TqdmProgress
    predictor = Predictor.from_checkpoint(info.path, device)
    layers = predictor.model.config.num_hidden_layers
    layer = (args.layer - 1) if args.layer else max(0, layers - 2)
    if not 0 <= layer < layers:
        raise data.DataError(f"--layer must be 1..{layers}")
    with TqdmProgress(preds.n, "per-rating attention") as progress:
        att = word_attention.word_attention(preds, predictor.model, tok, progress=progress,
                                            use_cache=not args.no_cache)
    inputs.word_tops = word_attention.top_words(att, preds.y, layer, info.scheme.num_labels,
                                                min_count=args.min_count)
    inputs.layer = layer
    inputs.examples = {c: predictor.predict(preds.frame["text"].iloc[row])
                       for c, row in word_attention.example_rows(preds).items()
                       if row is not None}


def _split_map(inputs, preds, model, tok, info, args) -> None:
    """The map section: vectors (cached or one pass), projection, neighbours, slices, and
    the per-rating drivers on a sample (Integrated Gradients: minutes)."""
    from reviewbert.analysis import drivers, map_summary
    from reviewbert.model.inference import Predictor
    from reviewbert.progress import TqdmProgress
    sample = drivers.DEFAULT_SAMPLE if args.drivers_sample is None else args.drivers_sample
    if sample < 0:
        raise UsageError("--drivers-sample must be 0 or more")
    predictor = Predictor.from_checkpoint(info.path, model.device) if sample else None
    n_drivers = min(sample, preds.n)
    flagged = inputs.issues.flagged if inputs.issues is not None else None
    with TqdmProgress(preds.n, "sentence vectors") as vec_bar, \
            TqdmProgress(n_drivers, "drivers (Integrated Gradients)") as ig_bar:
        sm = map_summary.summarise(preds, model, tok, predictor, flagged=flagged, method=args.map,
                                   drivers_sample=sample, progress=vec_bar,
                                   drivers_progress=ig_bar, use_cache=not args.no_cache,
                                   min_count=args.min_count)
    inputs.split_map = sm
    print(f"map: {sm.projection.title}; neighbour agreement {sm.neighbours.mean_agreement:.1%}, "
          f"k-NN accuracy {sm.reading.knn_accuracy:.1%}")
    if sm.drivers is not None and sm.drivers.seconds_per_1000:
        print(f"drivers: {len(sm.drivers.rows):,} reviews, "
              f"{sm.drivers.seconds_per_1000 / 60:.1f} min per 1,000 reviews")


def _map_image(sm, out) -> dict:
    """The projector as a PNG beside the report (kaleido); its path, or why not."""
    from reviewbert.analysis.map_figures import png_bytes
    from reviewbert.fsio import atomic_write
    path = Path(out).with_suffix(".map.png")
    try:
        data = png_bytes(sm.figure)
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
        return {"png": str(path)}
    except Exception as e:  # noqa: BLE001 - kaleido/Chromium missing or failing: say so
        return {"png": None, "why": f"{type(e).__name__}: {str(e)[:200]}"}


def _compare(inputs, preds, info, reviews, max_length, args, source) -> None:
    from reviewbert import data
    from reviewbert.analysis.compare import compare
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.metrics import format_metrics
    model_b, tok_b, info_b = load_checkpoint(args.compare)
    if info_b.scheme != info.scheme:
        raise data.DataError("--compare needs a checkpoint with the same labels")
    preds_b = _predict(model_b, tok_b, info_b, reviews, max_length, args, source)
    inputs.comparison, inputs.other = compare(preds, preds_b), info_b.name
    t = inputs.comparison.test
    print(f"vs {info_b.name}: {format_metrics(inputs.comparison.metrics_b)}; only this one "
          f"right {t.b}, only the other right {t.c}, McNemar exact p = {t.p_exact:.4g}")


def _summary(args, info, preds, inputs, source) -> dict:
    """The --json line: metrics with their intervals, label issues, where things went."""
    from reviewbert.analysis.html_report import METRIC_NAMES
    iss = inputs.issues
    return {
        "checkpoint": str(info.path), "n": preds.n, "source": source,
        "precision": preds.meta.get("precision"), "fp32_check": preds.meta.get("fp32_check"),
        "metrics": {k: preds.metrics().get(k) for k in METRIC_NAMES},
        "intervals": {k: None if v is None else [v.low, v.high]
                      for k, v in (inputs.intervals or {}).items()},
        "label_issues": None if iss is None else {
            "count": iss.count, "metrics_without": {k: iss.metrics_clean.get(k)
                                                    for k in (*METRIC_NAMES, "n")}},
        "cache": None if preds.folder is None else str(preds.folder), "out": str(args.out)}


def _cohorts(preds, args):
    """The failing cohorts (properties cached beside the predictions), and the cohorts
    saved as slices on the Cohorts page."""
    from reviewbert.analysis import slices
    from reviewbert.cohorts import pipeline
    from reviewbert.progress import TqdmProgress
    with TqdmProgress(preds.n, "properties") as bar:
        table = pipeline.review_properties(preds, progress=bar, use_cache=not args.no_cache)
    saved = slices.load_saved(preds.folder) if preds.folder is not None else {}
    return (pipeline.find_cohorts(table),
            {name: spec.where for name, spec in saved.items() if spec.where})


def _behaviour(info, reviews, max_length: int):
    """The shipped suite's result on these reviews when ``reviewbert behave`` (or the
    Behaviour page) cached one beside the checkpoint; the report never runs it itself."""
    from reviewbert.behave import runner
    from reviewbert.behave.suite import SuiteError, default_suite
    try:
        found = runner.lookup(info.path, default_suite(), reviews, max_length)
    except SuiteError:
        return None
    if found is None:
        print("note: no behavioural results cached for this checkpoint: run "
              "`reviewbert behave --checkpoint ...` first to add them to the report",
              file=sys.stderr)
    return found
