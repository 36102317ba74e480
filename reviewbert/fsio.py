"""Files that are whole or absent: atomic writes, fsync, a full disk told apart, and the
fault points the reliability tests step in at.

Every file ReviewBERT writes for another process (or a later run) to read goes
through :func:`atomic_write` or its text and JSON forms: a reader sees the old
content or the new, never half of it, even if the writer is killed mid-write.
"""
from __future__ import annotations

import errno
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

_UMASK = os.umask(0)
os.umask(_UMASK)


# ---------------------------------------------------------------- atomic writes
def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` to fill a temporary sibling of ``path``, fsync it, then rename
    it over ``path``; on any failure the temporary file is removed and ``path`` is as
    it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file normal permissions
        os.close(fd)
        fd = None
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a file so a reader sees the old or the new content, never half of it."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: str | os.PathLike) -> dict | None:
    """A JSON object from ``path``, or None if it is missing, unreadable or not an
    object (a hand-edited or damaged file must not break a page that lists folders)."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # (JSONDecodeError, UnicodeDecodeError)
        return None
    return d if isinstance(d, dict) else None


def fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``: a rename must not publish data still only in the
    page cache."""
    for f in Path(folder).rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


# ------------------------------------------------------------------ a full disk
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(e: BaseException | None) -> bool:
    """ENOSPC or a quota, also when a library reports it in its own exception type
    (safetensors' writer raises SafetensorError("... (os error 28)"))."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        if any(f"(os error {n})" in str(e) for n in _FULL_ERRNOS):
            return True
        e = e.__cause__ or e.__context__
    return False


# ---------------------------------------------------------- fault injection (tests)
FAULT_ENV = "REVIEWBERT_TEST_FAULT"
FAULT_MARK_ENV = "REVIEWBERT_TEST_FAULT_MARK"
_fault_hits: dict[str, int] = {}


def fault_point(point: str) -> None:
    """A place where the fault tests (tests/reliability/) can step in; outside them it is one
    environment lookup and returns.

    ``$REVIEWBERT_TEST_FAULT`` = ``POINT@N:ACTION``: the N-th time this process
    reaches ``point`` (default N=1), ACTION ``pause`` writes the point's name to
    ``$REVIEWBERT_TEST_FAULT_MARK`` and sleeps 60 s, so the test can SIGKILL it
    right inside that window; ACTION ``enospc`` raises the OSError a full disk
    gives. Points: ``save-write`` (a checkpoint's files written to its temporary
    folder, not yet swapped in), ``save-swap`` (between the swap's two renames),
    ``evaluate`` (an epoch's evaluation has begun).
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    where, _, action = spec.partition(":")
    name, _, nth = where.partition("@")
    if name != point:
        return
    _fault_hits[point] = hits = _fault_hits.get(point, 0) + 1
    if hits != int(nth or 1):
        return
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if action == "pause":
        mark = os.environ.get(FAULT_MARK_ENV)
        if mark:
            Path(mark).write_text(point)
        time.sleep(60)
