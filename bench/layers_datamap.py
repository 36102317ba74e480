"""The data map's recording overhead: paired training runs with and without it, in the same run.

Each pair trains the same config with the same seed twice through ``reviewbert.training.train``:
once recording the data map (the default; reviewbert/training/datamap.py) and once with
``record_datamap=False``, the two in alternating order from pair to pair (so neither side
always runs on a warmer machine). A run's time is the wall time of the whole ``train`` call
(setup, steps, evaluation and saves, the same on both sides); the overhead of a pair is
(with - without) / without, and the result is the median over the pairs.

Data: ``unlocked_mobile_10k.csv`` in ``$REVIEWBERT_DATA_DIR`` (``--per-class`` reviews per
rating, balanced), the embedded MiniLM as the base model (``--base-model`` for another).

Target (issue 50): median overhead ≤ 2 %.

Usage: ``OMP_NUM_THREADS=2 python bench/layers_datamap.py [--pairs 5] [--per-class 100]
[--epochs 2] [--quick]``; the last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"overhead_pct": 2.0}


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def data_file() -> Path:
    folder = Path(os.environ.get("REVIEWBERT_DATA_DIR") or ROOT.parent / "shared" / "data")
    return folder / "unlocked_mobile_10k.csv"


def one_run(cfg, out: Path, record: bool) -> float:
    from reviewbert.training import train
    t0 = time.perf_counter()
    train(cfg, out, log=lambda *a: None, record_datamap=record)
    return time.perf_counter() - t0


def measure(pairs: int = 5, per_class: int = 100, epochs: int = 2, max_length: int = 64,
            base_model: str | None = None) -> dict:
    """Median recording overhead (%) over ``pairs`` paired runs, with targets and checks."""
    from reviewbert.config import TrainConfig
    from reviewbert.model.device import cpu_description
    kw = dict(data=[str(data_file())], max_per_class=per_class, max_length=max_length,
              epochs=epochs, batch_size=16, seed=0, train_eval_max=100)
    if base_model:
        kw["base_model"] = base_model
    cfg = TrainConfig(**kw)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        one_run(cfg, Path(tmp) / "warmup", False)   # file cache, tokenizer, first-touch
        for i in range(pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            t = {rec: one_run(cfg, Path(tmp) / f"p{i}-{'with' if rec else 'without'}", rec)
                 for rec in order}
            pct = 100 * (t[True] - t[False]) / t[False]
            rows.append({"with_s": round(t[True], 3), "without_s": round(t[False], 3),
                         "overhead_pct": round(pct, 3), "first": "with" if order[0] else "without"})
            say(f"pair {i + 1}/{pairs}: with {t[True]:.2f} s, without {t[False]:.2f} s "
                f"({pct:+.2f} %)")
    median = statistics.median(r["overhead_pct"] for r in rows)
    checks = {"overhead_le_2pct": median <= TARGETS["overhead_pct"]}
    return {"bench": "layers_datamap", "cpu": cpu_description(), "data": data_file().name,
            "per_class": per_class, "epochs": epochs, "max_length": max_length,
            "base_model": cfg.base_model, "pairs": rows, "overhead_pct": round(median, 3),
            "targets": TARGETS, "checks": checks, "met": all(checks.values())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--base-model", default=None)
    ap.add_argument("--quick", action="store_true", help="one pair of tiny runs (a smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.pairs, args.per_class, args.epochs = 1, 10, 1
    print(json.dumps(measure(args.pairs, args.per_class, args.epochs,
                             base_model=args.base_model)))


if __name__ == "__main__":
    main()
