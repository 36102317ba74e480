"""Command line: ``reviewbert SUBCOMMAND ...`` (or ``python -m reviewbert SUBCOMMAND ...``).

    reviewbert train --data FILE [--data FILE ...] --labels 5 --out checkpoints/NAME
    reviewbert train --config RUN/train_config.json --out RUN [--queue] [--FLAG ...]
    reviewbert train --out checkpoints/NAME --resume
    reviewbert evaluate --checkpoint checkpoints/NAME [--data FILE ...] [--split test|all]
                        [--save-predictions FILE.csv|FILE.parquet] [--json]
    reviewbert report --checkpoint checkpoints/NAME --out report.html
    reviewbert predict --checkpoint checkpoints/NAME "review text" [--json]
    reviewbert export --checkpoint checkpoints/NAME --out checkpoints/demo [--dtype float16]
    reviewbert search --data FILE --grid lr_bert=1e-5,5e-5 --out checkpoints/NAME
    reviewbert faithfulness --checkpoint checkpoints/NAME --n 300 [--json]
    reviewbert whatif --checkpoint checkpoints/NAME "review text" [--json]
    reviewbert whatif --checkpoint checkpoints/NAME --n 300 [--json]
    reviewbert behave --checkpoint checkpoints/NAME [--suite FILE] [--cases FILE.csv]
                      [--json] [--fail-above RATE]
    reviewbert cohorts --checkpoint checkpoints/NAME [--split test|all --data FILE] [--json]
                       [--save-properties FILE.csv]
    reviewbert card --checkpoint checkpoints/demo --evaluation EVAL.json [...]
    reviewbert heads --checkpoint checkpoints/NAME [--data FILE ...] --n 1000 [--json]
    reviewbert heads prune --checkpoint checkpoints/NAME --fraction 0.3 --out checkpoints/NAME-pruned
    reviewbert patch --checkpoint checkpoints/NAME --clean TEXT --corrupt TEXT [--heads] [--json]
    reviewbert layers --checkpoint checkpoints/NAME [--data FILE ...] [--json]

``train`` and ``evaluate`` also run unchanged under ``accelerate launch`` and ``torchrun``
(``evaluate`` then splits the reviews across the processes).
Expected failures (missing or broken checkpoint, unusable data, bad options,
empty text) print one line to stderr and exit with status 2.

One module per subcommand, each with ``add_parser(sub)`` (its flags) and ``run(args)``;
:data:`COMMANDS` registers them, in --help order: a new subcommand is a new module and
one name here. The flags several subcommands share (--checkpoint, --data, --no-cache,
--json...) are defined once, in ``flags.py``. The library never imports this package.
A subcommand module imports the library inside ``run``, so that ``--help`` (which
builds every parser) does not load torch, transformers or Optuna for nothing.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from reviewbert.data import DataError
from reviewbert.errors import CheckpointError, ConfigError

COMMANDS = ("train", "evaluate", "predict", "export", "search", "faithfulness", "whatif",
            "behave", "cohorts", "heads", "patch", "layers", "report",
            "card")
PROG = "python -m reviewbert"


class UsageError(Exception):
    """Bad command-line input; printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Fine-tune BERT to predict Amazon review stars; evaluate; predict.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        module.add_parser(sub).set_defaults(func=module.run)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from transformers.utils import logging as hf_logging

    from reviewbert.training.runs import RunCancelled, fail_own_status
    hf_logging.disable_progress_bar()  # "Loading weights" bars would bury our output
    try:
        return args.func(args)
    except (CheckpointError, DataError, ConfigError, UsageError) as e:
        if args.command == "train" and getattr(args, "out", None):
            fail_own_status(args.out, f"{type(e).__name__}: {e}")
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunCancelled as e:  # status.json already says "cancelled"
        print(str(e), file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
