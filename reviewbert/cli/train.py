"""``reviewbert train``: fine-tune a model on review files (or resume a stopped run)."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from reviewbert import config
from reviewbert.cli import UsageError
from reviewbert.config import RESUME_OVERRIDABLE, TrainConfig


def add_parser(sub):
    t = sub.add_parser("train", help="fine-tune a model on review files",
                       description="Prints the data report, then a progress bar. Writes the run "
                                   "folder --out: reviewbert.json, status.json, metrics.jsonl, "
                                   "steps.jsonl, best/ and last/. Ctrl-C (SIGINT) or SIGTERM "
                                   "stops after the current step and saves last/; --resume "
                                   "continues.")
    t.add_argument("--out", required=True, metavar="DIR",
                   help="run folder, e.g. checkpoints/my-run")
    t.add_argument("--resume", action="store_true",
                   help="continue the stopped or killed run in --out from last/ "
                        "(may change only: "
                        + ", ".join(k.replace("_", "-") for k in RESUME_OVERRIDABLE) + ")")
    t.add_argument("--config", metavar="FILE",
                   help="JSON object of TrainConfig fields (as runs.write_config writes); "
                        "flags given on the command line override it")
    t.add_argument("--queue", action="store_true",
                   help="wait (status 'queued') until no other run trains on this device, "
                        "first come first served; cancel with SIGUSR1 (runs.cancel_run)")
    config.add_arguments(t)
    return t


def run(args) -> int:
    from reviewbert.errors import CheckpointError
    from reviewbert.model.metrics import format_metrics
    from reviewbert.training import resume_config, train
    from reviewbert.training.runs import device_slot, queue_device, read_status, run_has_state
    given = config.given(args)
    if args.config:
        given = {**_read_config(args.config), **given}  # explicit flags win
    if args.resume:
        cfg, ignored = resume_config(args.out, given)
        if ignored:
            print(f"--resume keeps the run's hyperparameters; ignoring: "
                  f"{', '.join('--' + k.replace('_', '-') for k in ignored)}", file=sys.stderr)
    else:
        if not given.get("data"):
            raise UsageError("train needs --data FILE (or --resume to continue a run)")
        cfg = TrainConfig.from_dict(given, strict=True)
        if run_has_state(args.out):  # before waiting in the queue, not after
            raise CheckpointError(f"{args.out} already holds a run: pass --resume to continue "
                                  "it, or choose another --out")
    # `accelerate launch --mixed_precision bf16` should win over our default "auto"
    env_mp = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if cfg.mixed_precision in ("auto", "no") and env_mp in ("bf16", "fp16"):
        cfg.mixed_precision = env_mp
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if args.queue:
            raise UsageError("--queue is for one process, not under torchrun/accelerate launch")
        slot = contextlib.nullcontext(False)
    else:
        # without --queue: take the slot if free (queued runs then wait for us), never wait
        slot = device_slot(args.out, queue_device(), wait=args.queue)
    with slot:
        meta = train(cfg, args.out, resume=args.resume)
    st = read_status(args.out) or {}
    best = meta.get("best")
    if st.get("state") == "stopped":
        print(f"stopped; continue with: python -m reviewbert train --out {args.out} --resume")
        return 130
    if best and os.environ.get("RANK", "0") == "0":
        print(f"best epoch {best['epoch']} -> {Path(args.out) / 'best'}")
        for split in ("validation", "test"):
            print(f"  {split:10s} {format_metrics(best[split])}")
    return 0


def _read_config(path) -> dict:
    """A --config file: a JSON object of TrainConfig fields (unknown ones are an error)."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"--config {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--config {path}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise UsageError(f"--config {path}: expected a JSON object of TrainConfig fields")
    unknown = config.unknown_fields(d)
    if unknown:
        raise UsageError(f"--config {path}: unknown field(s) {', '.join(unknown)}")
    return d
