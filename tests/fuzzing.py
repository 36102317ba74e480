"""Helpers for the property-based (Hypothesis) tests: twins, a time limit, the readers' contract.

Every property is collected twice (:func:`twins`): ``test_x`` with the active
Hypothesis profile (``default``: a few dozen derandomized examples, part of
``make test``) and ``test_x_fuzz``, marked ``fuzz``, with the ``fuzz`` profile
(thousands of random examples, ``make fuzz``). The profiles are registered in
conftest.py.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings

from reviewbert.data import DataError, DataReport, ReadOptions, build_splits, iter_reviews
from reviewbert.model.labels import THREE

HANG_SECONDS = 20.0
"""No generated input may take longer than this to read (a 1 MiB field takes ~50 ms)."""


def twins(prop, **strategies):
    """(quick, fuzz) copies of ``prop`` under ``@given(**strategies)``; see the module docstring."""
    quick = given(**strategies)(prop)
    deep = settings(settings.get_profile("fuzz"))(given(**strategies)(prop))
    return quick, pytest.mark.fuzz(deep)


class Hang(BaseException):
    """Raised by :func:`time_limit`; a BaseException so no ``except Exception`` can swallow it."""


@contextmanager
def time_limit(seconds: float = HANG_SECONDS, what: str = "reading"):
    """Fail (raise :class:`Hang`) if the body runs longer than ``seconds``.

    Hypothesis' own ``deadline`` only judges an example after it returns, so it
    cannot catch a hang; a SIGALRM timer interrupts one. (Main thread only.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise Hang(f"{what} took over {seconds:.0f} s (a hang?)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def only_data_errors(path: Path, fn, *args, **kw):
    """``fn(*args, **kw)`` or None after a DataError that names ``path``'s file.

    Any other exception type fails the test (with the input kept by Hypothesis).
    """
    try:
        with time_limit(what=f"{getattr(fn, '__name__', fn)} on {path.name}"):
            return fn(*args, **kw)
    except DataError as e:
        msg = str(e)
        assert msg.strip() and "\n" not in msg.strip(), f"DataError should be one line: {msg!r}"
        assert path.name in msg, f"DataError does not name the file {path.name}: {msg}"
        return None
    except Hang:
        raise
    except Exception as e:  # noqa: BLE001 - the point of the test
        raise AssertionError(f"{type(e).__name__} instead of DataError on {path.name}: {e}") from e


def read_contract(path: Path, **options) -> list[tuple[str, int]] | None:
    """Read ``path`` fully; check the reader's promises; rows, or None after a DataError.

    Promises: only DataError escapes (naming the file); every row read is either
    usable or counted under one skip reason; usable rows are non-empty stripped
    text with 1..5 stars.
    """
    report = DataReport()

    def read():
        return list(iter_reviews(path, ReadOptions(**options), report))

    rows = only_data_errors(path, read)
    if rows is None:
        return None
    fr = report.files[0]
    assert fr.rows_read == fr.usable + sum(fr.skipped.values()), fr
    assert len(rows) == fr.usable
    assert all(v > 0 for v in fr.skipped.values())
    for text, stars in rows:
        assert type(text) is str and text and text == text.strip()
        assert type(stars) is int and 1 <= stars <= 5
    return rows


def splits_contract(path: Path) -> None:
    """build_splits on one file: splits, or a DataError naming the file. Never the
    "changed while it was being read" error: pass 2 must find every row pass 1 chose."""
    splits = only_data_errors(path, build_splits, [path], THREE, max_per_class=50)
    if splits is None:
        return
    rep = splits.report
    counts = {name: len(splits[name]) for name in ("train", "validation", "test")}
    assert sum(counts.values()) == rep.selected == 3 * rep.per_class
    for _name, examples in splits.items():
        assert all(e.text and 1 <= e.stars <= 5 for e in examples)
