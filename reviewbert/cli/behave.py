"""``reviewbert behave``: the behavioural suite (MFT, INV, DIR tests) on a checkpoint, and a
model regression gate for a user's CI (``--fail-above``)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from reviewbert.cli import UsageError, flags
from reviewbert.progress import TqdmProgress

GATE_FAILED = 1
"""The exit status when a test's fail rate is above ``--fail-above``: not 2, which every
subcommand uses for bad input, so a CI can tell "the model regressed" from "the gate is
misconfigured"."""


def add_parser(sub):
    f = sub.add_parser(
        "behave", help="behavioural tests (CheckList's MFT, INV, DIR) and a regression gate",
        description="Runs a behavioural suite on the checkpoint: minimum-functionality tests "
                    "(a star range per case), invariance tests (a perturbation must not change "
                    "the rating) and directional tests (a change must move the expected rating "
                    "one way). The perturbation tests start from the checkpoint's test split. "
                    "Results are cached in CHECKPOINT/.behave/. With --fail-above, the exit "
                    f"status is {GATE_FAILED} when any test fails more often than RATE.")
    flags.checkpoint(f)
    f.add_argument("--suite", metavar="FILE", default=None,
                   help="a suite file (YAML); 'default' is the shipped suite (default: the "
                        "shipped suite, or none when only --cases is given)")
    f.add_argument("--cases", metavar="FILE.csv", default=None,
                   help="MFT cases from a CSV with columns text,min_stars,max_stars and "
                        "optional capability,name; run alone unless --suite is also given")
    flags.data(f, "the checkpoint's training files, if not where its reviewbert.json says "
                  "(default: the recorded files)")
    f.add_argument("--slice", metavar="NAME", default=None,
                   help="start the perturbation tests from the test reviews of a slice or "
                        "cohort saved on Error analysis or the Cohorts page (the test split is "
                        "evaluated first if its predictions are not cached)")
    f.add_argument("--fail-above", metavar="RATE", type=float, default=None,
                   help="exit with status 1 when any test's fail rate is above RATE (0-1)")
    flags.no_cache(f)
    flags.json_output(f, "also print one JSON object as the last line: tests (name, "
                         "capability, type, n, filtered, failed, fail_rate, ci_low, ci_high), "
                         "checkpoint, suite, seconds")
    return f


def run(args) -> int:
    t0 = time.perf_counter()
    if args.fail_above is not None and not 0 <= args.fail_above <= 1:
        raise UsageError("--fail-above must be a rate between 0 and 1")
    suite = _suite(args.suite, args.cases)
    predictor, info = _load(args.checkpoint)
    reviews = _reviews(info, predictor, args.data, must=bool(args.slice))
    if args.slice:
        reviews = _in_slice(info, predictor, reviews, args.slice, not args.no_cache)
    from reviewbert.behave import runner
    from reviewbert.behave.cases import count_cases
    with TqdmProgress(count_cases(suite, reviews), "behave", unit="case") as bar:
        result = runner.run_suite(predictor, suite, reviews, checkpoint=info.path,
                                  progress=bar, cache=not args.no_cache)
    seconds = time.perf_counter() - t0
    _print_table(result, info.path, seconds)
    over = _over(result, args.fail_above)
    if args.json:
        out = runner.result_json(result)
        out.update(checkpoint=str(info.path), suite=suite.name, seconds=round(seconds, 3),
                   cached=result.cached, fail_above=args.fail_above,
                   reviews={"slice": args.slice, "n": len(reviews)},
                   gate="failed" if over else "passed")
        print(json.dumps(_finite(out)))
    return GATE_FAILED if over else 0


def _finite(x):
    """``x`` with NaN (a test whose cases were all filtered has no fail rate) as null: a
    NaN would make the line invalid JSON for the user's CI."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _suite(suite_arg: str | None, cases_arg: str | None):
    """The suite to run: --suite (or the shipped one), plus --cases' tests."""
    from reviewbert.behave import suite as suites
    from reviewbert.behave.cases_csv import read_cases_csv
    try:
        if suite_arg in (None, "default"):
            base = suites.default_suite() if (suite_arg or not cases_arg) else None
        else:
            base = suites.load_suite(_existing(suite_arg, "--suite"))
        if cases_arg is None:
            return base
        path = _existing(cases_arg, "--cases")
        tests = read_cases_csv(path.read_bytes(), origin=path.name)
        if base is None:
            return suites.Suite(name=path.stem, description=f"cases from {path.name}", seed=0,
                                lexicons={}, tests=tuple(tests))
        return suites.merge(base, *tests)
    except suites.SuiteError as e:
        raise UsageError(str(e)) from None


def _existing(p: str, flag: str) -> Path:
    path = Path(p)
    if not path.is_file():
        raise UsageError(f"{flag}: no such file: {p}")
    return path


def _load(checkpoint):
    import torch

    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    info = checkpoint_info(checkpoint)
    return Predictor.from_checkpoint(info.path, torch.device("cpu")), info


def _reviews(info, predictor, data, must: bool = False):
    """The checkpoint's test split, or the built-in examples (with a warning) when it
    cannot be rebuilt here: the perturbation tests need real reviews to start from.
    ``must``: the split itself or an error (a slice is of the split)."""
    from reviewbert.cli.faithfulness import split_examples
    from reviewbert.data import DataError
    from reviewbert.data.examples import builtin_examples
    try:
        return split_examples(info, predictor.tokenizer, data)
    except (UsageError, DataError) as e:
        if data or must:
            raise
        reviews = builtin_examples()
        print(f"warning: the test split cannot be rebuilt ({e}); the perturbation tests "
              f"start from the {len(reviews)} built-in examples", file=sys.stderr)
        return reviews


def _in_slice(info, predictor, reviews, name: str, use_cache: bool) -> list:
    """The test reviews of the slice ``name``, saved beside the split's predictions (which
    are computed here, with a bar, when they are not cached)."""
    from reviewbert.analysis import slices
    from reviewbert.analysis.predictions import planned_reviews, predict_split
    from reviewbert.analysis.sources import describe_test_split
    from reviewbert.cohorts import pipeline
    from reviewbert.model.device import resolve_precision
    model = predictor.model
    precision = resolve_precision("auto", model.device)
    with TqdmProgress(planned_reviews(len(reviews), precision), f"evaluating {info.name}") as bar:
        preds = predict_split(model, predictor.tokenizer, info.path, reviews, info.scheme,
                              max_length=predictor.max_length, precision=precision,
                              progress=bar, source=describe_test_split(info.meta),
                              use_cache=use_cache)
    saved = slices.load_saved(preds.folder)
    if name not in saved:
        known = ", ".join(repr(n) for n in saved) or "none yet"
        raise UsageError(f"--slice: no slice {name!r} is saved for this checkpoint's test split "
                         f"(saved: {known}); save one on Error analysis or the Cohorts page")
    try:
        with TqdmProgress(preds.n, "properties", unit="review") as bar:
            mask = pipeline.slice_mask(saved[name], preds, progress=bar, use_cache=use_cache)
        kept = pipeline.reviews_in(reviews, preds, mask)
    except slices.SliceError as e:
        raise UsageError(f"--slice {name!r}: {e}") from None
    print(f"the perturbation tests start from the {len(kept):,} test reviews of the slice "
          f"{name!r}", file=sys.stderr)
    return kept


def _print_table(result, checkpoint, seconds: float) -> None:
    where = "from the cache" if result.cached else f"{seconds:.1f} s"
    print(f"checkpoint {checkpoint}: suite {result.suite_name!r}, {len(result.tests)} tests "
          f"({where})")
    print(f"{'capability':<18} {'type':<4} {'test':<44} {'n':>5} {'filt':>5} {'fail':>5} "
          f"{'rate':>6}  95% interval")
    for t in result.tests:
        rate = "-" if t.fail_rate != t.fail_rate else f"{100 * t.fail_rate:5.1f}%"
        print(f"{t.capability[:18]:<18} {t.type:<4} {t.name[:44]:<44} {t.n:>5} {t.filtered:>5} "
              f"{t.failed:>5} {rate:>6}  {100 * t.ci_low:.1f}-{100 * t.ci_high:.1f}%")


def _over(result, rate: float | None) -> list:
    """The tests failing more often than ``rate`` (printed to stderr), none without one."""
    if rate is None:
        return []
    over = [t for t in result.tests if t.fail_rate == t.fail_rate and t.fail_rate > rate]
    for t in over:
        print(f"gate: {t.name!r} fails {100 * t.fail_rate:.1f}% of {t.n - t.filtered} cases "
              f"(above {100 * rate:.1f}%)", file=sys.stderr)
    return over
