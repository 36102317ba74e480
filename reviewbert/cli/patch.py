"""``reviewbert patch``: activation patching between a clean and a corrupted review.

    reviewbert patch --checkpoint DIR --clean TEXT --corrupt TEXT [--heads] [--json]

Prints the share of the logit difference restored by each (layer, word) patch
(``reviewbert/patching/grid.py``); the last line with --json holds ``words``, ``grid``
(rows × words, null for n/a), ``ratings`` ([a, b], 1-based), ``clean_logits``,
``corrupt_logits`` (and ``head_grid`` with --heads).
"""
from __future__ import annotations

import json
import sys

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    p = sub.add_parser(
        "patch", help="activation patching: which (layer, word) carries a pair's difference",
        description="Copies one hidden state (one layer's output at one word's wordpieces) "
                    "from the clean review's run into the corrupted review's run and reports "
                    "the share of the logit difference it restores: (patched - corrupted) / "
                    "(clean - corrupted), for the logit of the clean review's top rating "
                    "minus that of the corrupted review's top (or the clean runner-up). "
                    "Both reviews must have the same number of words; a word whose "
                    "wordpiece count differs between them is n/a. Cached beside the "
                    "checkpoint.")
    flags.checkpoint(p)
    p.add_argument("--clean", required=True, metavar="TEXT", help="the clean review")
    p.add_argument("--corrupt", required=True, metavar="TEXT",
                   help="the corrupted review (same number of words)")
    p.add_argument("--heads", action="store_true",
                   help="also patch each attention head's output (layer x head grid)")
    flags.no_cache(p)
    flags.json_output(p)
    return p


def run(args) -> int:
    import torch

    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    from reviewbert.patching import grid as patching
    from reviewbert.progress import TqdmProgress
    info = checkpoint_info(args.checkpoint)
    predictor = Predictor.from_checkpoint(info.path, torch.device("cpu"))
    try:
        pair = patching.align(predictor.tokenizer, args.clean, args.corrupt, predictor.max_length)
        with TqdmProgress(patching.planned_for(predictor, pair, args.heads), "patching",
                          unit="layer pass") as bar:
            res = patching.patch(predictor, args.clean, args.corrupt, heads=args.heads,
                                 progress=bar, use_cache=not args.no_cache, pair=pair)
    except patching.PatchingError as e:
        raise UsageError(str(e)) from None
    _print(res, predictor.scheme.names)
    if args.json:
        print(json.dumps(res.to_json()))
    return 0


def _cell(v: float) -> str:
    return "   n/a" if v != v else f"{v:+6.2f}"


def _print(res, names) -> None:
    from reviewbert.patching.grid import reading, row_name
    a, b = res.ratings
    where = "cached" if res.from_cache else f"{res.seconds:.1f} s"
    print(f"metric: logit({names[a]}) - logit({names[b]}); clean {res.clean_metric:+.3f}, "
          f"corrupted {res.corrupt_metric:+.3f} ({where})")
    if not res.restorable:
        print("note: both reviews give the same metric, nothing to restore", file=sys.stderr)
    print("share restored, one row per layer (columns: words):")
    for j, w in enumerate(res.columns):
        print(f"  {j:3d}  {' '.join(w.split())[:40]}")
    print(" " * 15 + " ".join(f"{j:>6d}" for j in range(len(res.columns))))
    for r in range(res.grid.shape[0]):
        print(f"  {row_name(r):>12s} " + " ".join(_cell(v) for v in res.grid[r]))
    if res.head_grid is not None:
        print("heads (rows: layers, columns: heads):")
        for li, row in enumerate(res.head_grid):
            print(f"  layer {li + 1:>2d} " + " ".join(_cell(v) for v in row))
    for line in reading(res):
        print(line)
