"""``reviewbert faithfulness``: ERASER comprehensiveness and sufficiency of every
explanation method on the checkpoint's test split, against random rankings."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from reviewbert.cli import UsageError, flags
from reviewbert.explain import faithfulness
from reviewbert.explain import methods as explain
from reviewbert.progress import TqdmProgress


def add_parser(sub):
    f = sub.add_parser(
        "faithfulness", help="ERASER comprehensiveness/sufficiency of every explanation method",
        description="Rebuilds the checkpoint's test split, draws --n reviews, explains each "
                    "prediction with every method and measures how much the top-ranked words "
                    "matter (ERASER), against random rankings. Results are cached in "
                    "CHECKPOINT/faithfulness/ (an interrupted run resumes).")
    flags.checkpoint(f)
    flags.data(f, "the checkpoint's training files, if not where its reviewbert.json says "
                  "(default: the recorded files)")
    flags.n(f, 300, "test reviews to score (default: 300)")
    flags.seed(f, "seed of the sample and of the random rankings (default: 0)")
    names = ",".join(explain.METHOD_NAMES)
    f.add_argument("--methods", default=names,
                   help=f"comma-separated method names (default: all: {names})")
    draws = faithfulness.RANDOM_DRAWS
    f.add_argument("--random-draws", type=int, default=draws,
                   help=f"random rankings averaged per review (default: {draws})")
    f.add_argument("--ig-steps", type=int, default=explain.IG_STEPS,
                   help=f"Integrated Gradients steps, first try (default: {explain.IG_STEPS})")
    f.add_argument("--ig-max-steps", type=int, default=explain.IG_MAX_STEPS,
                   help="IG doubles its steps up to this while the convergence delta is above "
                        f"{100 * explain.DELTA_WARN:.0f}%% of f(x) - f(baseline) "
                        f"(default: {explain.IG_MAX_STEPS})")
    f.add_argument("--lime-samples", type=int, default=explain.LIME_SAMPLES,
                   help=f"LIME's perturbed reviews per explanation (default: {explain.LIME_SAMPLES})")
    f.add_argument("--layer", type=int, default=None,
                   help="layer (1-based) of raw attention and value norm (default: the last)")
    flags.no_cache(f)
    flags.json_output(f)
    return f


def run(args) -> int:
    if args.n < 1:
        raise UsageError("--n must be at least 1")
    if args.ig_steps < 1 or args.random_draws < 1 or args.lime_samples < 2:
        raise UsageError("--ig-steps and --random-draws must be at least 1, --lime-samples 2")
    predictor, info, settings = _load(args)
    texts = faithfulness.sample_texts(split_texts(info, predictor.tokenizer, args.data),
                                      args.n, args.seed)
    if not texts:
        raise UsageError("the test split is empty")
    with TqdmProgress(len(texts), "faithfulness") as bar:
        result = faithfulness.measure(predictor, info.path, texts, settings, sample_seed=args.seed,
                                  progress=bar, use_cache=not args.no_cache)
    summary = faithfulness.summarize(result)
    where = "cached" if result.from_cache else f"{result.seconds:.0f} s"
    print(f"checkpoint {info.path}: {result.n} test reviews (seed {args.seed}, {where}), "
          f"max_length {result.max_length}")
    print(faithfulness.format_table(result, summary))
    for line in faithfulness.verdict(result, summary):
        print(line.replace("**", ""))
    if result.cache_error:
        print(f"note: {result.cache_error}", file=sys.stderr)
    if args.json:
        print(json.dumps(faithfulness.summary_json(result, summary)))
    return 0


def _load(args):
    """(predictor on the CPU, checkpoint info, the run's Settings); UsageError for a bad
    --layer or --methods."""
    import torch

    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    info = checkpoint_info(args.checkpoint)
    predictor = Predictor.from_checkpoint(info.path, torch.device("cpu"))
    layers = predictor.model.config.num_hidden_layers
    layer = None if args.layer is None else args.layer - 1
    if layer is not None and not 0 <= layer < layers:
        raise UsageError(f"--layer must be 1..{layers}")
    settings = faithfulness.Settings(
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()),
        random_draws=args.random_draws, seed=args.seed, layer=layer,
        ig_steps=args.ig_steps, ig_max_steps=max(args.ig_steps, args.ig_max_steps),
        lime_samples=args.lime_samples)
    try:
        settings.build_methods()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return predictor, info, settings


def split_texts(info, tokenizer, data: list[str] | None) -> list[str]:
    """The texts of the checkpoint's test split (raises UsageError / DataError)."""
    return [e.text for e in split_examples(info, tokenizer, data)]


def split_examples(info, tokenizer, data: list[str] | None) -> list:
    """The checkpoint's test split (examples with .text and .stars; raises UsageError /
    DataError)."""
    from reviewbert import data as datasets
    meta = info.meta
    if not meta.get("data"):
        raise UsageError(f"{info.path} records no training data, so its test split cannot be "
                         "rebuilt")
    recorded = sorted(f.get("name", "?") for f in meta["data"]["files"])
    if data and sorted(Path(p).name for p in data) != recorded:
        raise UsageError(f"--data must be the checkpoint's training files ({', '.join(recorded)})")
    splits = datasets.splits_from_meta(meta, data_dir=Path(data[0]).parent if data else None,
                                       tokenizer=tokenizer, strict=bool(data))
    for w in splits.report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return list(splits.test)
