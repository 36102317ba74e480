"""The per-layer probes: the whole run, and reading every layer's [CLS] in one pass against
one pass per layer, in the same run.

- **probes**: ``reviewbert.layers.analysis.analyze`` on a checkpoint (default: the demo) with
  its default settings and no cache: every layer's [CLS] vectors of the training sample
  (``probes.TRAIN_CAP`` reviews) and of the whole test split read, for the checkpoint and for
  its base model, a probe fitted and scored (with its intervals) per layer of each.
- **reading**: ``probes.read_vectors`` (one forward pass per batch, every layer from
  ``output_hidden_states``) against ``probes.read_vectors_per_layer`` (a hook on one layer
  and a full pass per layer, L+1 passes) on the same ``--read-n`` test reviews, in the same
  precision. The speedup is the second's seconds over the first's.

Targets (issue 50): probes ≤ 60 s; the one-pass reading ≥ 5× faster than a pass per layer.
The data are the checkpoint's own splits (``$REVIEWBERT_DATA_DIR`` when its recorded paths
are not there).

Usage: ``OMP_NUM_THREADS=2 python bench/layers_probes.py [--checkpoint DIR] [--read-n 300]
[--quick]``;
the last stdout line is one JSON object. The lead merges this into ``bench/layers.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"probes_s": 60.0, "read_speedup": 5.0}
READ_N = 300
QUICK_N = 48


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def _load(checkpoint):
    import torch

    from reviewbert.analysis.sources import named_split
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.inference import model_max_length
    model, tok, info = load_checkpoint(checkpoint, torch.device("cpu"), attn_implementation="eager")
    data = os.environ.get("REVIEWBERT_DATA_DIR")
    files = None
    if data and not all(Path(f.get("path", "")).is_file() for f in info.meta["data"]["files"]):
        files = [str(Path(data) / f["name"]) for f in info.meta["data"]["files"]]
    train, _, _ = named_split(info.meta, "train", tok, files)
    test, _, _ = named_split(info.meta, "test", tok, files)
    return model, tok, info, model_max_length(model, tok, info.meta), train, test


def measure(checkpoint=ROOT / "checkpoints" / "demo", read_n: int = READ_N,
            quick: bool = False) -> dict:
    """The figures: probes_s (the whole run, vectors read included), read_one_pass_s and
    read_per_layer_s (the same reviews both ways), read_speedup, with targets and checks.
    ``quick``: QUICK_N reviews of each split, to prove it runs (not the benchmark's figures)."""
    from reviewbert.heads.analysis import sample_reviews
    from reviewbert.layers import analysis as layer_analysis
    from reviewbert.layers import probes as layer_probes
    from reviewbert.model.device import cpu_description
    model, tok, info, max_length, train, test = _load(checkpoint)
    settings = layer_probes.Settings().resolved()
    if quick:
        settings.train_cap, test = QUICK_N, sample_reviews(test, QUICK_N, 0)
    t0 = time.perf_counter()
    res = layer_analysis.analyze(model, tok, info.path, train, test, info.scheme,
                                 max_length=max_length, base_model=info.base_model,
                                 settings=settings, use_cache=False)
    probes_s = time.perf_counter() - t0
    say(f"probes: {probes_s:.1f} s ({res.n_train:,} training, {res.n_test:,} test reviews, "
        f"base: {'yes' if res.base_layers else res.base_note})")
    batches = layer_probes.make_batches(tok, [r.text for r in sample_reviews(test, read_n, 0)], max_length)
    layer_probes.read_vectors(model, batches[:1], settings.precision)             # warm up
    t0 = time.perf_counter()
    layer_probes.read_vectors(model, batches, settings.precision)
    one_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    layer_probes.read_vectors_per_layer(model, batches, settings.precision)
    per_layer_s = time.perf_counter() - t0
    speedup = per_layer_s / one_s if one_s > 0 else float("inf")
    say(f"reading {read_n} reviews: one pass {one_s:.2f} s, a pass per layer {per_layer_s:.2f} s "
        f"({speedup:.1f}x)")
    checks = {"probes_le_60s": probes_s <= TARGETS["probes_s"],
              "read_speedup_ge_5": speedup >= TARGETS["read_speedup"]}
    if quick:
        checks = {k: False for k in checks}          # small sizes: not the benchmark's figures
    return {"bench": "layers_probes", "cpu": cpu_description(), "checkpoint": str(checkpoint),
            "quick": quick,
            "precision": settings.precision, "n_train": res.n_train, "n_test": res.n_test,
            "layers": len(res.layers), "probes_s": round(probes_s, 3),
            "read_reviews": read_n, "read_one_pass_s": round(one_s, 3),
            "read_per_layer_s": round(per_layer_s, 3), "read_speedup": round(speedup, 2),
            "targets": TARGETS, "checks": checks, "met": all(checks.values())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--read-n", type=int, default=READ_N,
                    help="test reviews read both ways for the speedup")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_N} reviews of each split: proves it runs, met is false")
    args = ap.parse_args()
    print(json.dumps(measure(args.checkpoint, args.read_n, args.quick)))


if __name__ == "__main__":
    main()
