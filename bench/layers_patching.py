"""Activation patching on a 60-word pair: the batched layer × word grid against one pass per
patch, in the same run.

- **grid**: ``reviewbert.patching.grid.run_grid`` (word grid only, no heads) on a pair of
  60-word reviews that differ in one word, from the checkpoint's own model: the two runs
  made once with every layer's input kept, then each row's patches as one batch through
  the layers above it.
- **baseline**: ``grid_one_by_one`` on the same pair: one full hooked forward pass of the
  corrupted review per (layer, word) patch. The two grids must agree (max |Δ| ≤ 1e-4).

Targets (issue 50): the grid ≤ 10 s, and never slower than the baseline.

Usage: ``OMP_NUM_THREADS=2 python bench/layers_patching.py [--checkpoint DIR]``; the last
stdout line is one JSON object (with ``met``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"grid_s": 10.0}
WORDS = 60
CLEAN = ("The battery is great and lasts two full days even with heavy use so I rarely "
         "think about charging it at all. The screen is bright and sharp in the sun, the "
         "camera takes clear photos at night, calls sound loud and clean, and the case "
         "feels solid in the hand. Setup took five minutes and the phone has worked without a "
         "single crash for three months now, which is more than I can say for my last one.")
CORRUPT = CLEAN.replace("great", "terrible", 1)


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def pair_texts(words: int = WORDS) -> tuple[str, str]:
    """The clean and the corrupted review, cut to ``words`` words (whitespace-split)."""
    return " ".join(CLEAN.split()[:words]), " ".join(CORRUPT.split()[:words])


def measure(checkpoint=ROOT / "checkpoints" / "demo", words: int = WORDS) -> dict:
    """grid_s (batched), baseline_s (one pass per patch), speedup, the grids' max |Δ|,
    with targets and checks."""
    import torch

    from reviewbert.model.device import cpu_description
    from reviewbert.model.inference import Predictor
    from reviewbert.patching import grid as patching
    predictor = Predictor.from_checkpoint(checkpoint, torch.device("cpu"))
    clean, corrupt = pair_texts(words)
    pair = patching.align(predictor.tokenizer, clean, corrupt, predictor.max_length)
    model = predictor.model
    patching.run_grid(model, patching.align(predictor.tokenizer, "warm up", "warm down", 16))     # warm up
    t0 = time.perf_counter()
    res = patching.run_grid(model, pair)
    grid_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = patching.grid_one_by_one(model, pair)
    baseline_s = time.perf_counter() - t0
    diff = float(np.nanmax(np.abs(res.patched - ref)))
    say(f"{len(pair.columns)} columns x {res.grid.shape[0]} rows ({len(pair.clean_ids)} tokens): "
        f"batched {grid_s:.2f} s, one pass per patch {baseline_s:.2f} s, max |diff| {diff:.2e}")
    checks = {"grid_le_10s": grid_s <= TARGETS["grid_s"], "batched_le_baseline": grid_s <= baseline_s,
              "same_grid": diff <= 1e-4}
    return {"bench": "layers_patching", "cpu": cpu_description(), "checkpoint": str(checkpoint),
            "words": len(pair.columns) - 2, "tokens": len(pair.clean_ids),
            "patches": int(np.isfinite(res.patched).sum()), "grid_s": round(grid_s, 3),
            "baseline_s": round(baseline_s, 3),
            "speedup": round(baseline_s / grid_s, 2) if grid_s > 0 else None,
            "max_abs_diff": diff, "targets": TARGETS, "checks": checks, "met": all(checks.values())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--words", type=int, default=WORDS, help="words per review (at most 60)")
    args = ap.parse_args()
    print(json.dumps(measure(Path(args.checkpoint), args.words)))


if __name__ == "__main__":
    main()
