"""Training step time on this CPU: fp32 against bf16 autocast, in the same run.

What ``mixed_precision="auto"`` decides on (``reviewbert.model.device.resolve_mixed_precision``):
bf16 autocast only where it is faster, and the demo recipe's accuracy both ways is in
the model card's ablation table (``bench/ablation.py`` rows with their precision).

One optimizer step of the demo recipe's model (the embedded MiniLM with a fresh
classifier, AdamW with ReviewBERT's parameter groups, gradient clipping), as
``reviewbert.training`` runs it: the forward under ``Accelerator.autocast()``, the loss in
fp32. Batches are real reviews from ../shared/data (``$REVIEWBERT_DATA_DIR``), the
demo's batch size, dynamically padded, at each ``--lengths`` cap (reviews at least that
long, so every batch is full length). The two precisions take turns, ``--rounds``
times, ``--steps`` steps each after one warm-up step, so drifts in machine load hit
both; the median step is reported. Run it alone: two torch processes on two cores slow
each other.

    .venv/bin/python bench/train_precision.py [--lengths 128 256] [--batch 32]

The last stdout line is one JSON object: ms per step and samples/s for each precision
and length, and ``speedup`` = fp32 time / bf16 time (> 1: bf16 is faster).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert import data  # noqa: E402
from reviewbert.config import DEFAULT_BASE_MODEL, TrainConfig
from reviewbert.data.files import list_data_files  # noqa: E402
from reviewbert.model.checkpoint import load_for_training
from reviewbert.model.device import cpu_bf16_units, cpu_description
from reviewbert.model.labels import get_scheme  # noqa: E402
from reviewbert.training.optim import param_groups


def long_reviews(tok, n: int, min_tokens: int) -> tuple[list[str], list[int]]:
    files = [str(p) for p in list_data_files(data.default_data_dir())]
    splits = data.build_splits(files, get_scheme(5), seed=42)
    texts, labels = [], []
    for e in splits.train:
        if len(tok(e.text)["input_ids"]) >= min_tokens:
            texts.append(e.text)
            labels.append(e.label)
            if len(texts) == n:
                return texts, labels
    raise SystemExit(f"only {len(texts)} training reviews have >= {min_tokens} tokens")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--batch", type=int, default=32, help="the demo recipe's batch size")
    ap.add_argument("--steps", type=int, default=4, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    scheme = get_scheme(5)
    cfg = TrainConfig(lr_bert=1e-4, lr_classifier=1e-3, layer_lr_decay=0.9)
    out = {"machine": cpu_description(), "cpu_bf16_units": list(cpu_bf16_units()),
           "threads": torch.get_num_threads(), "batch": args.batch, "lengths": {}}
    for length in args.lengths:
        torch.manual_seed(0)
        model, tok = load_for_training(DEFAULT_BASE_MODEL, scheme)
        model.train()
        opt = torch.optim.AdamW(param_groups(model, cfg))
        texts, labels = long_reviews(tok, args.batch, length)
        batch = tok(texts, truncation=True, max_length=length, padding=True, return_tensors="pt")
        y = torch.tensor(labels)
        accs = {}
        for mp in ("no", "bf16"):
            AcceleratorState._reset_state()
            accs[mp] = Accelerator(mixed_precision=mp, cpu=True)

        def step(acc):
            t0 = time.perf_counter()
            with acc.autocast():
                logits = model(**batch).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return time.perf_counter() - t0

        times = {"no": [], "bf16": []}
        for mp in times:
            step(accs[mp])                       # warm-up: oneDNN builds its kernels
        for _ in range(args.rounds):
            for mp in times:
                times[mp] += [step(accs[mp]) for _ in range(args.steps)]
        row = {}
        for mp, name in (("no", "fp32"), ("bf16", "bf16")):
            med = statistics.median(times[mp])
            row[name] = {"ms_per_step": round(1000 * med, 1),
                         "samples_per_s": round(args.batch / med, 2)}
        row["speedup"] = round(row["fp32"]["ms_per_step"] / row["bf16"]["ms_per_step"], 3)
        row["tokens"] = int(batch["input_ids"].shape[1])
        out["lengths"][str(length)] = row
        print(f"{length} tokens: fp32 {row['fp32']['ms_per_step']} ms/step, bf16 "
              f"{row['bf16']['ms_per_step']} ms/step: bf16 {row['speedup']}x", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
