"""MkDocs hook that renders the command-line reference (docs/cli.md) from the parsers.

``reviewbert.cli.build_parser()`` is built at docs build time and every subcommand's
usage, description and flags (by argument group) replace the ``<!-- cli-reference -->``
marker, so the page cannot drift from the command line: a flag added, renamed or
re-worded shows up at the next ``make docs`` (and ``make test`` builds the site).
"""
from __future__ import annotations

import argparse
import html
import os
import re
import sys
from pathlib import Path

MARKER = "<!-- cli-reference -->"
ROOT = Path(__file__).resolve().parents[2]
WIDTH = "88"      # usage lines wrapped as in an 88-column terminal, the same on every machine


def _text(s: str) -> str:
    """Help text as Markdown that shows it as typed (no emphasis, links or HTML)."""
    s = html.escape(" ".join(s.split()), quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", s)


def _paragraphs(s: str) -> str:
    return "\n\n".join(_text(p) for p in re.split(r"\n\s*\n", s.strip()) if p.strip())


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    out = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        out += [f"**{_text(group.title or 'options')}**", "",
                "| flag | what it does |", "|---|---|"]
        for action in actions:
            flag = formatter._format_action_invocation(action)
            help_text = formatter._expand_help(action) if action.help else ""
            required = " (required)" if action.required and action.option_strings else ""
            out.append(f"| `{flag}`{required} | {_text(help_text)} |")
        out.append("")
    return out


def _render(parser: argparse.ArgumentParser, name: str, summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{name}`", ""]
    if summary:
        out += [_text(summary[:1].upper() + summary[1:]) + ".", ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        out += [_paragraphs(parser.description), ""]
    out += _flag_rows(parser)
    nested = _subparsers(parser)
    if nested is not None:
        helps = {a.dest: a.help or "" for a in nested._choices_actions}
        for sub_name, sub in nested.choices.items():
            out += _render(sub, f"{name} {sub_name}", helps.get(sub_name, ""), level + 1)
    return out


def render_reference() -> str:
    """Markdown for every subcommand of ``python -m reviewbert``, in --help order."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from reviewbert.cli import PROG, build_parser
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=WIDTH, NO_COLOR="1")
    try:
        parser = build_parser()
        sub = _subparsers(parser)
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        out = ["| subcommand | what it does |", "|---|---|"]
        out += [f"| [`{n}`](#{n}) | {_text(helps.get(n, ''))} |" for n in sub.choices]
        out += ["", f"Every subcommand runs as `{PROG} SUBCOMMAND` (or `reviewbert SUBCOMMAND` once the "
                "package is installed: `make setup` does it).", ""]
        for name, sp in sub.choices.items():
            out += _render(sp, name, helps.get(name, ""), 2)
        return "\n".join(out)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_reference())
