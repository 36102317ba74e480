"""``reviewbert card``: a checkpoint's model card (its README.md), written from the JSON
results of the commands that measured it (``reviewbert.training.card``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from reviewbert.cli import flags
from reviewbert.training import card


def add_parser(sub):
    c = sub.add_parser("card", help="write a checkpoint's model card from measured results",
                       description=card.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    flags.checkpoint(c, metavar=None, help=None)
    c.add_argument("--evaluation", required=True, help="output of `evaluate --json`")
    c.add_argument("--baseline", help="output of bench/tfidf_baseline.py")
    c.add_argument("--generalisation", help="output of bench/generalisation.py")
    c.add_argument("--ablation", help="output of bench/ablation.py")
    c.add_argument("--train-status", action="append", help="the training run's status.json "
                   "(its minutes, on this machine); repeat it for a distilled model's teachers")
    return c


def run(args) -> int:
    training = None
    if args.train_status:
        from reviewbert.model.checkpoint import checkpoint_info, trained_precision
        from reviewbert.model.device import cpu_description
        precision = trained_precision(checkpoint_info(args.checkpoint).meta)
        training = card.training_time([json.loads(Path(p).read_text()) for p in args.train_status],
                                      cpu_description(), precision)
    out = card.write_card(args.checkpoint, read_result(args.evaluation),
                          read_result(args.baseline) if args.baseline else None,
                          read_result(args.generalisation) if args.generalisation else None,
                          ablation=read_result(args.ablation) if args.ablation else None,
                          training=training)
    print(out)
    return 0


def read_result(path: str) -> dict:
    """A JSON file (bench/ablation.py's indented ablation.json), or a command's output
    whose last line is one JSON object (evaluate --json, the benches)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return json.loads(lines[-1])
