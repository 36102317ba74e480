"""The fix loop's export: the corrected data file, and the triage's annotations as a file.

:func:`corrected_reviews` applies what the triage decided to a split's reviews (relabels
from the shared store, duplicates and reviews carrying a "drop" tag left out) and counts
each change; :func:`write_corrected` writes the result as JSON lines that
``reviewbert.data`` reads back as the same texts and stars, so the next run trains on it.
:func:`export_annotations` writes every tag, note, relabel and reviewed mark of a set of
reviews as CSV (safe to open in a spreadsheet) or JSON lines.

Every file is written whole or not at all (``reviewbert.fsio.atomic_write``): a value that
cannot be written is a one-line :class:`FixError` before the first byte goes out.
"""
from __future__ import annotations

import csv
import io
import json
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from reviewbert.behave.runner import spreadsheet_safe
from reviewbert.cohorts.keys import review_key
from reviewbert.data import MAX_RECORD_BYTES
from reviewbert.fsio import atomic_write
from reviewbert.store.db import Store

EXPORT_COLUMNS = ("key", "text", "kind", "value", "author", "time")
EXPORT_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
# C0 and C1 control characters and DEL but tab and line breaks: what the store strips too
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


class FixError(ValueError):
    """Corrections that cannot be applied or written; the message is one line."""


def _star(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 5:
        raise FixError(f"{what} must be whole stars 1-5, got {value!r}"[:200])
    return int(value)


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise FixError(f"{what} is not valid Unicode (it holds a lone surrogate)") from None


def _write(path, data: bytes) -> None:
    try:
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
    except OSError as e:
        raise FixError(f"cannot write {path}: {e.strerror or e}") from e


# ---------------------------------------------------------------------------- corrected data
def _new_stars(relabels) -> dict[str, int]:
    """{key: stars} from {key: stars} or the store's {key: Relabel}."""
    return {key: _star(getattr(value, "stars", value), f"the relabel of {key}")
            for key, value in (relabels or {}).items()}


def _positions(rows, n: int) -> set[int]:
    out = set()
    for row in rows or ():
        if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 0 <= row < n:
            raise FixError(f"duplicate rows must be row numbers 0-{n - 1}, got {row!r}"[:200])
        out.add(int(row))
    return out


def corrected_reviews(texts: Sequence[str], stars: Sequence[int], sources: Sequence[str] | None,
                      *, relabels: Mapping | None = None, drop_keys: Iterable[str] = (),
                      duplicate_rows: Iterable[int] | None = None, drop_tagged: Iterable[str] = (),
                      tags: Mapping[str, Iterable[str]] | None = None) -> tuple[list[dict], dict]:
    """The reviews with the triage applied: ``([{"text", "rating", "source"}, ...], summary)``.

    A row is dropped, and counted under the first reason that holds, when its key is in
    ``drop_keys``, its position is in ``duplicate_rows`` (the caller keeps the first of each
    group and passes the others), or its tags (``tags``: {key: tags}, as the store gives
    them) hold one of ``drop_tagged``. A kept row whose key has a relabel gets its stars.
    The summary counts the rows in and out, each reason, the drops per tag (a review with
    two such tags counts under both), the rows whose stars changed, and the relabels of
    reviews not in these rows. Texts are kept verbatim; ``sources`` may be None."""
    texts, stars = list(texts), list(stars)
    n = len(texts)
    if len(stars) != n or (sources is not None and len(sources) != n):
        raise FixError(f"{n:,} texts, {len(stars):,} stars and "
                       f"{'no' if sources is None else f'{len(sources):,}'} sources: one each per row")
    new_stars, duplicates = _new_stars(relabels), _positions(duplicate_rows, n)
    drop_keys, drop_tagged = set(drop_keys), set(drop_tagged)
    if drop_tagged and tags is None:
        raise FixError("dropping tagged reviews needs their tags (tags=, from the store)")
    summary = dict(rows_in=n, dropped_keys=0, dropped_duplicates=0, dropped_tagged=0,
                   dropped_by_tag=dict.fromkeys(sorted(drop_tagged), 0), relabelled=0,
                   relabels_not_in_data=0, rows_out=0)
    rows, seen = [], set()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise FixError(f"row {i}: the text must be text, got {type(text).__name__}")
        key, old = review_key(text), _star(stars[i], f"row {i}: the stars")
        seen.add(key)
        hit = drop_tagged.intersection((tags or {}).get(key, ()))
        if key in drop_keys or i in duplicates or hit:
            reason = "keys" if key in drop_keys else "duplicates" if i in duplicates else "tagged"
            summary[f"dropped_{reason}"] += 1
            for tag in hit if reason == "tagged" else ():
                summary["dropped_by_tag"][tag] += 1
            continue
        row = {"text": text, "rating": new_stars.get(key, old)}
        summary["relabelled"] += row["rating"] != old
        if sources is not None:
            row["source"] = sources[i] if isinstance(sources[i], str) else ""
        rows.append(row)
    summary["relabels_not_in_data"] = len(new_stars.keys() - seen)
    summary["rows_out"] = len(rows)
    return rows, summary


def _json_line(row: Mapping, n: int) -> bytes:
    """One review as the reader reads it, or FixError: what it would skip or misread."""
    text = row.get("text")
    if not isinstance(text, str):
        raise FixError(f"review {n}: the text must be text, got {type(text).__name__}")
    if not text.strip():
        raise FixError(f"review {n}: the text is empty (a reader skips it)")
    record = {"text": text, "rating": _star(row.get("rating"), f"review {n}: the rating")}
    if row.get("source") is not None:
        record["source"] = str(row["source"])
    line = _utf8(json.dumps(record, ensure_ascii=False), f"review {n}") + b"\n"
    if len(line) > MAX_RECORD_BYTES:
        raise FixError(f"review {n} is {len(line):,} bytes as a JSON line; reviewbert.data "
                       f"skips lines over {MAX_RECORD_BYTES:,}")
    return line


def write_corrected(rows: Iterable[Mapping], path) -> int:
    """Write the corrected reviews as JSON lines ``{"text", "rating", "source"}`` (keys
    ``reviewbert.data`` finds by itself), atomically; how many. The reader strips the
    blanks around a text, as it did when the rows were first read. FixError, one line and
    no file touched, when a row cannot be read back as written (no text, stars outside
    1-5, a lone surrogate, a line over the reader's limit) or no row is left."""
    lines = [_json_line(row, n) for n, row in enumerate(rows, 1)]
    if not lines:
        raise FixError("no review left to write: every row was dropped")
    _write(path, b"".join(lines))
    return len(lines)


# ---------------------------------------------------------------------------- annotations
def _time(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="seconds")


def annotation_records(store: Store, keys_to_text: Mapping[str, str]) -> list[dict]:
    """One record (:data:`EXPORT_COLUMNS`) per tag, note, relabel and reviewed mark of these
    reviews, by review (in the mapping's order) then kind. A relabel's value is "1 (was 4)":
    its stars and the data's. FixError when a text cannot be written (not valid Unicode)."""
    keys = list(keys_to_text)
    tags, notes = store.tag_records(keys), store.notes(keys)
    relabels, reviewed = store.relabels(keys), store.reviewed(keys)
    found: dict[str, list[tuple]] = {}
    for t in tags:
        found.setdefault(t.review_key, []).append(("tag", t.tag, t.author, t.created))
    for key, note in notes.items():
        found.setdefault(key, []).append(("note", note.note, note.author, note.updated))
    for key, r in relabels.items():
        found.setdefault(key, []).append(("relabel", f"{r.stars} (was {r.previous})", r.author,
                                          r.updated))
    for key, (author, when) in reviewed.items():
        found.setdefault(key, []).append(("mark", "reviewed", author, when))
    records = []
    for key in keys:
        text = keys_to_text[key]
        if key in found:
            if not isinstance(text, str):
                raise FixError(f"the text of review {key} must be text, got {type(text).__name__}")
            _utf8(text, f"the text of review {key}")
        records += [dict(key=key, text=text, kind=kind, value=value, author=author,
                         time=_time(when)) for kind, value, author, when in found.get(key, [])]
    return records


def _csv_bytes(records: list[dict]) -> bytes:
    buffer = io.StringIO()
    # "\r\n" (RFC 4180) also makes the writer quote a cell holding a lone "\r"
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(EXPORT_COLUMNS)
    for record in records:
        # control characters stripped, as the store does (spreadsheets cut a cell at a NUL),
        # and a leading = + - @ quoted, so that no cell runs as a formula
        writer.writerow([spreadsheet_safe(_CONTROL.sub("", str(record[c])))
                         for c in EXPORT_COLUMNS])
    return buffer.getvalue().encode("utf-8")


def _annotations(store: Store, keys_to_text: Mapping[str, str], suffix: str) -> tuple[int, bytes]:
    kind = EXPORT_SUFFIXES.get(str(suffix).lower())
    if kind is None:
        raise FixError(f"{str(suffix)[:40]!r}: the export is CSV (.csv) or JSON lines (.jsonl)")
    records = annotation_records(store, keys_to_text)
    if kind == "csv":
        return len(records), _csv_bytes(records)
    return len(records), b"".join(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n"
                                  for r in records)


def annotations_bytes(store: Store, keys_to_text: Mapping[str, str], suffix: str) -> bytes:
    """:func:`annotation_records` of the reviews in ``keys_to_text`` ({key: text}) as a
    file's bytes (a download): CSV for ``.csv`` (cells safe in a spreadsheet), JSON lines
    for ``.jsonl`` or ``.ndjson`` (texts verbatim). FixError or StoreError, one line, when
    they cannot be written."""
    return _annotations(store, keys_to_text, suffix)[1]


def export_annotations(store: Store, keys_to_text: Mapping[str, str], path) -> int:
    """Write :func:`annotations_bytes` to ``path``, the format by its suffix, atomically; how
    many records. FixError or StoreError, one line and no file touched, when they cannot be
    written."""
    count, data = _annotations(store, keys_to_text, Path(path).suffix)
    _write(path, data)
    return count
