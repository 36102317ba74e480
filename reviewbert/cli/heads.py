"""``reviewbert heads``: which attention heads matter, what each does, what fine-tuning changed;
``reviewbert heads prune``: a checkpoint with the least important heads physically removed."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    h = sub.add_parser(
        "heads", help="head importance, pruning curve, head roles, what fine-tuning changed",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Michel et al.'s importance of every attention head (checked against "
                    "masking each head), the pruning curve, the head atlas (Clark et al.) with "
                    "Kovaleva-style roles, and the Jensen-Shannon divergence of each head from "
                    "the base model. Cached beside the checkpoint. 'heads prune' writes a "
                    "checkpoint with heads removed.")
    _common(h, required=False)
    flags.split(h, "test: the checkpoint's own test split; all: every review of --data")
    h.add_argument("--draws", type=int, default=5, help="random orders in the pruning curve")
    flags.precision(h, "of the masking and pruning passes (gradients are always fp32)")
    flags.no_cache(h)
    flags.json_output(h)
    actions = h.add_subparsers(dest="heads_command", metavar="{prune}")
    p = actions.add_parser(
        "prune", help="write a checkpoint with the least important heads removed",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Scores every head (Michel et al.) on --split, removes the --fraction "
                    "least important ones from the Q/K/V and output matrices and saves the "
                    "result as a checkpoint in --out (config.json records pruned_heads).")
    _common(p, required=True)
    p.add_argument("--fraction", required=True, metavar="F",
                   help="share of the heads to remove, between 0 and 1 (e.g. 0.3)")
    p.add_argument("--out", required=True, metavar="DIR", help="the pruned checkpoint's folder")
    flags.split(p, "reviews that score the heads: the checkpoint's validation split (so that "
                   "its test split still measures the result), its test split, or every review "
                   "of --data", choices=("validation", "test", "all"), default="validation")
    return h


def _common(p, required: bool) -> None:
    """The flags of both ``heads`` and ``heads prune`` (--checkpoint is optional on the
    first, so that ``heads prune --checkpoint`` parses; ``run`` asks for it)."""
    flags.checkpoint(p, required=required)
    flags.data(p, "review file(s): for a checkpoint split, its training files if not where "
                  "reviewbert.json says; for --split all, the files to read")
    flags.n(p, 1000, "reviews used (a seeded sample when the split has more)")
    flags.seed(p, "seed of the sample and random orders")


def run(args) -> int:
    if args.checkpoint is None:
        raise UsageError("heads needs --checkpoint DIR")
    if args.n < 1:
        raise UsageError("--n must be at least 1")
    if args.heads_command == "prune":
        return _prune(args)
    if args.draws < 1:
        raise UsageError("--draws must be at least 1")
    from reviewbert.heads import analysis as head_analysis
    from reviewbert.progress import TqdmProgress
    model, tok, info, max_length = _load(args)
    reviews, source = _reviews(args, info, tok, args.split)
    settings = head_analysis.Settings(random_draws=args.draws, seed=args.seed,
                                      precision=args.precision)
    with TqdmProgress(head_analysis.planned(len(reviews), model, settings), "heads",
                      unit="review pass") as bar:
        res = head_analysis.analyze(model, tok, info.path, reviews, info.scheme,
                                    max_length=max_length, base_model=info.base_model,
                                    settings=settings, progress=bar, on_stage=bar.describe,
                                    source=source, use_cache=not args.no_cache)
    _print(res, info)
    if args.json:
        print(json.dumps(res.to_json()))
    return 0


def parse_fraction(text: str) -> float:
    """--fraction as a float strictly between 0 and 1 (UsageError otherwise)."""
    try:
        f = float(str(text).strip().rstrip("%")) / (100.0 if str(text).strip().endswith("%") else 1.0)
    except ValueError:
        raise UsageError(f"--fraction must be a number between 0 and 1, got {text!r}") from None
    if not math.isfinite(f) or not 0.0 < f < 1.0:
        raise UsageError(f"--fraction must be between 0 and 1 (not included), got {text!r}")
    return f


def _load(args):
    import torch

    from reviewbert.heads.importance import unsupported_reason
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.inference import model_max_length
    model, tok, info = load_checkpoint(args.checkpoint, torch.device("cpu"),
                                       attn_implementation="eager")
    why = unsupported_reason(model)
    if why:
        raise UsageError(why)
    return model, tok, info, model_max_length(model, tok, info.meta)


def _reviews(args, info, tok, split: str):
    """(a seeded sample of --n reviews, its description)."""
    from reviewbert import data
    from reviewbert.analysis.sources import all_reviews, named_split
    from reviewbert.heads.analysis import sample_reviews
    if split == "all":
        if not args.data:
            raise UsageError("--split all needs --data FILE")
        _, chunks, source = all_reviews(args.data, info.scheme, info.meta)
        reviews = [e for chunk in chunks for e in chunk]
    else:
        if not info.meta.get("data"):
            raise UsageError(f"{info.path} records no training data, so its {split} split cannot "
                             "be rebuilt; use --split all --data FILE")
        reviews, source, warnings = named_split(info.meta, split, tok, args.data)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    if not reviews:
        raise data.DataError("no reviews to analyse")
    sample = sample_reviews(reviews, args.n, args.seed)
    return sample, {**source, "n_of": len(reviews), "sample_seed": args.seed}


def _print(res, info) -> None:
    from reviewbert.analysis.sources import describe
    from reviewbert.heads import analysis as head_analysis
    where = "cached" if res.from_cache else f"{sum(res.seconds.values()):.0f} s"
    print(f"checkpoint {info.path}: {res.n:,} reviews ({describe(res.source)}), {where}; "
          f"masking and pruning passes in {res.precision}")
    rho, rho_acc = res.spearman("probability"), res.spearman("accuracy")
    print(f"importance (Michel et al., normalised per layer) against the measured drop when "
          f"each head alone is masked: Spearman {_num(rho)} (predicted-class probability), "
          f"{_num(rho_acc)} (accuracy)")
    print("most important heads (layer-head: importance, probability drop, role):")
    for t in head_analysis.top_heads(res, 5):
        print(f"  {t['layer']}-{t['head']}: {t['importance']:.2f}, "
              f"{100 * t['probability_drop']:+.1f} points, {t['role']}")
    print("pruning curve, accuracy with the share of heads masked (least / random / most "
          "important first):")
    for a, r, m in zip(*(res.pruning[k] for k in ("least", "random", "most"))):
        print(f"  {a['fraction']:4.0%} ({a['heads_masked']:2d} heads): {_pct(a['accuracy'])} / "
              f"{_pct(r['accuracy'])} / {_pct(m['accuracy'])}")
    print(head_analysis.removable_sentence(res))
    counts: dict = {}
    for row in res.roles:
        for r in row:
            if r is not None:
                counts[r] = counts.get(r, 0) + 1
    print("roles: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda t: -t[1])))
    print(head_analysis.finetune_sentence(res))


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _pct(x) -> str:
    return "  n/a " if x is None else f"{x:6.1%}"


def _prune(args) -> int:
    from reviewbert.heads import analysis as head_analysis
    from reviewbert.model.pruning import alive_mask
    fraction = parse_fraction(args.fraction)
    out = Path(args.out)
    model, tok, info, max_length = _load(args)
    if out.resolve() == info.path.resolve():
        raise UsageError("--out must not be the checkpoint itself: write the pruned copy elsewhere")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "config.json").exists())):
        raise UsageError(f"--out {out} exists and is not a checkpoint folder: choose a new folder")
    reviews, source = _reviews(args, info, tok, args.split)
    total = int(alive_mask(model).sum())
    from reviewbert.progress import TqdmProgress
    with TqdmProgress(len(reviews), "scoring heads") as bar:
        try:
            remove, _ = head_analysis.heads_to_prune(model, tok, reviews, info.scheme, fraction,
                                                     max_length=max_length, progress=bar)
        except ValueError as e:
            raise UsageError(str(e)) from None
    dest = head_analysis.write_pruned(model, tok, info, remove, out,
                                      {"fraction": fraction, "scored_on": source,
                                       "n": len(reviews)})
    k = sum(len(v) for v in remove.values())
    print(f"removed {k} of {total} heads ({k / total:.0%}), the least important on "
          f"{len(reviews):,} reviews of the {args.split} split:")
    for layer, hs in sorted(remove.items()):
        print(f"  layer {layer + 1}: heads {', '.join(str(h + 1) for h in sorted(hs))}")
    size = sum(f.stat().st_size for f in Path(dest).iterdir() if f.is_file())
    print(f"pruned checkpoint -> {dest} ({size / 1e6:.1f} MB); measure it with "
          f"`reviewbert evaluate --checkpoint {dest}`")
    return 0
