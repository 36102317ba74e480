"""The flags several subcommands share, each defined once: ``--checkpoint``, ``--data``,
``--split``, ``--n``, ``--seed``, ``--max-length``, ``--batch-size``, ``--precision``,
``--no-cache`` and ``--json``.

Each helper adds one flag with the name, type, default, metavar and action every
subcommand gives it; the help text is the common one unless a subcommand says what
the flag means there (``--data`` and ``--split`` always do). A subcommand calls them in
the order its ``--help`` lists its flags.
"""
from __future__ import annotations

import argparse

from reviewbert.config import PRECISIONS

CHECKPOINT_HELP = "checkpoint folder, or a run folder (then its best/)"
MAX_LENGTH_HELP = "default: the checkpoint's training max_length, else 256"
NO_CACHE_HELP = "neither read nor write the cache"
JSON_HELP = "print one JSON object as the last line"


def checkpoint(p: argparse.ArgumentParser, required: bool = True, metavar: str | None = "DIR",
               help: str | None = CHECKPOINT_HELP) -> None:
    p.add_argument("--checkpoint", required=required, metavar=metavar, help=help)


def data(p: argparse.ArgumentParser, help: str) -> None:
    """--data FILE, repeatable; None when not given (then the checkpoint's recorded files)."""
    p.add_argument("--data", action="append", metavar="FILE", default=None, help=help)


def split(p: argparse.ArgumentParser, help: str, choices: tuple[str, ...] = ("test", "all"),
          default: str = "test") -> None:
    p.add_argument("--split", choices=choices, default=default, help=help)


def n(p: argparse.ArgumentParser, default: int | None, help: str) -> None:
    p.add_argument("--n", type=int, default=default, help=help)


def seed(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--seed", type=int, default=0, help=help)


def max_length(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-length", type=int, default=None, help=MAX_LENGTH_HELP)


def batch_size(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=int, default=64)


def precision(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help=help)


def no_cache(p: argparse.ArgumentParser, help: str = NO_CACHE_HELP) -> None:
    p.add_argument("--no-cache", action="store_true", help=help)


def json_output(p: argparse.ArgumentParser, help: str = JSON_HELP) -> None:
    p.add_argument("--json", action="store_true", help=help)
