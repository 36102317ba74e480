"""The command line's flags, defined once in ``reviewbert/cli/flags.py``, are exactly those
every subcommand had before: same names, defaults, choices, metavars, help texts and order.

``data/cli_parsers_bc7cd44.json`` is the parsers of bc7cd44 (before the helper), walked by
:func:`walk`; a flag added or changed on purpose updates it in the same commit."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from reviewbert.cli import build_parser, flags

SNAPSHOT = Path(__file__).parent / "data" / "cli_parsers_bc7cd44.json"


def walk(p: argparse.ArgumentParser, name: str, out: dict) -> dict:
    """{"subcommand path": [each action's flags, dest, default, choices, required, nargs,
    metavar, help]}, sub-parsers walked in place."""
    acts = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub_name, sp in a.choices.items():
                walk(sp, f"{name} {sub_name}".strip(), out)
            continue
        acts.append({"flags": a.option_strings, "dest": a.dest, "default": repr(a.default),
                     "choices": list(a.choices) if a.choices else None, "required": a.required,
                     "nargs": a.nargs, "metavar": a.metavar, "help": a.help})
    out[name] = acts
    return out


def test_every_subcommand_has_the_flags_it_had():
    now = json.loads(json.dumps(walk(build_parser(), "", {}), default=str))
    before = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert sorted(now) == sorted(before)
    for command in before:
        assert now[command] == before[command], f"the flags of {command!r} changed"


def test_the_shared_flags_are_the_helpers_and_parse_as_before():
    p = argparse.ArgumentParser()
    flags.checkpoint(p)
    flags.data(p, "files")
    flags.no_cache(p)
    flags.json_output(p)
    flags.max_length(p)
    flags.precision(p, "precision")
    args = p.parse_args(["--checkpoint", "ck", "--data", "a.csv", "--data", "b.csv", "--json"])
    assert (args.checkpoint, args.data, args.json, args.no_cache) == ("ck", ["a.csv", "b.csv"],
                                                                       True, False)
    assert (args.max_length, args.precision) == (None, "auto")
    default = p.parse_args(["--checkpoint", "ck"])
    assert default.data is None and not default.json
    with pytest.raises(SystemExit):
        p.parse_args(["--checkpoint", "ck", "--precision", "fp8"])      # not one of PRECISIONS
    with pytest.raises(SystemExit):
        p.parse_args([])                                               # --checkpoint is required
