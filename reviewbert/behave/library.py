"""The suites a user can pick: the shipped default and their own, saved as YAML files.

User suites live in one folder, ``$REVIEWBERT_SUITES`` or ``<base>/suites`` (base as in
``reviewbert/store/location.py``: ``$REVIEWBERT_CACHE``, else ``~/.cache/reviewbert``), one
``NAME.yaml`` per suite: readable, diffable data a user can also edit by hand or keep in
their own repository. The editor, the CSV import and "Fool the model" save tests here;
every write is atomic, so a crash leaves the previous version of the file.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from reviewbert.behave import suite as suites
from reviewbert.fsio import atomic_write_text
from reviewbert.store.location import BASE_ENV

SUITES_ENV = "REVIEWBERT_SUITES"
DEFAULT = "default"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,59}$")
"""A suite's name is also its file's name: letters, digits, space, ``_ . -``, no path."""


def folder() -> Path:
    own = os.environ.get(SUITES_ENV)
    if own:
        return Path(own)
    base = os.environ.get(BASE_ENV) or Path.home() / ".cache" / "reviewbert"
    return Path(base) / "suites"


@dataclass(frozen=True)
class Entry:
    """One suite the pages can offer: its name, its file (None: the shipped one), and
    why it cannot be read (None when it can)."""
    name: str
    path: Path | None
    error: str | None = None


def check_name(name: str) -> str:
    name = (name or "").strip()
    if name == DEFAULT:
        raise suites.SuiteError("'default' is the shipped suite: save under another name")
    if not NAME.match(name):
        raise suites.SuiteError(f"a suite's name is 1–60 letters, digits, spaces, '_', '.' or "
                                f"'-' (it names its file), got {name[:60]!r}")
    return name


def path_of(name: str) -> Path:
    return folder() / f"{check_name(name)}.yaml"


def available() -> list[Entry]:
    """The shipped suite first, then the user's suites by name; a file that cannot be
    read is listed with its one-line error, so the page can say so instead of hiding it."""
    out = [Entry(DEFAULT, None)]
    try:
        files = sorted(folder().glob("*.yaml"))
    except OSError:
        files = []
    for p in files:
        if not NAME.match(p.stem) or p.stem == DEFAULT:
            continue
        error = None
        try:
            if p.stat().st_size > suites.MAX_FILE_BYTES:
                error = f"{p.name}: larger than {suites.MAX_FILE_BYTES // 1_000_000} MB"
        except OSError as e:
            error = f"{p.name}: {e.strerror}"
        out.append(Entry(p.stem, p, error))
    return out


def load(name: str) -> suites.Suite:
    """The suite called ``name`` (SuiteError, one line, when it cannot be read)."""
    if name == DEFAULT:
        return suites.default_suite()
    path = path_of(name)
    if not path.is_file():
        raise suites.SuiteError(f"no suite called {name!r} in {folder()}")
    return suites.load_suite(path)


def save(suite: suites.Suite) -> Path:
    """Write ``suite`` under its name (checked, parsed back before the write: what is saved
    is what the next load reads)."""
    path = path_of(suite.name)
    text = suites.dump_suite(suite)
    suites.parse_suite(text, origin=path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


def add_test(name: str, test: suites.TestSpec, lexicons: dict | None = None,
             description: str = "") -> suites.Suite:
    """``test`` saved into the user suite ``name`` (made when missing; a test of the same
    name replaced), with any lexicons it needs merged in; returns the saved suite."""
    check_name(name)
    path = path_of(name)
    if path.is_file():
        current = suites.load_suite(path)
    else:
        current = suites.Suite(name=name, description=description or f"{name}: tests written "
                               "in ReviewBERT", seed=0, lexicons={}, tests=())
    merged = dict(current.lexicons)
    for k, words in (lexicons or {}).items():
        if k in merged and tuple(merged[k]) != tuple(words):
            raise suites.SuiteError(f"suite {name!r} already has a word list {k!r} with "
                                    "other words: rename the list")
        merged[k] = tuple(words)
    updated = suites.with_test(suites.Suite(name=current.name, description=current.description,
                                            seed=current.seed, lexicons=merged,
                                            tests=current.tests), test)
    save(updated)
    return updated
