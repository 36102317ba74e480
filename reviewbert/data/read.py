"""Reading one review file: format sniffing, decoding, columns, ratings.

See the package docstring (``reviewbert.data``) for the rules on final text,
non-UTF-8 bytes and over-long lines.
"""
from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import math
import os
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from reviewbert.data.data_report import (
    BAD_CSV_ROW,
    BAD_JSON,
    EMPTY_TEXT,
    LINE_TOO_LONG,
    NOT_OBJECT,
    RATING_FRACTION,
    RATING_MISSING,
    RATING_NAN,
    RATING_RANGE,
    TEXT_NOT_STRING,
    TRUNCATED,
    DataError,
    DataReport,
    FileReport,
)

try:  # orjson parses bytes faster than json (bench/ingest.py reads with it); both give the same objects.
    import orjson
    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is in requirements.txt
    _loads = json.loads

MAX_RECORD_BYTES = 1 << 20
"""A JSON line or CSV field longer than this is skipped ("line too long")."""
MAX_DOCUMENT_BYTES = MAX_RECORD_BYTES
"""A pretty-printed JSON array is streamed one element at a time (memory: one
element, not the document, which loaded whole takes many times its size as Python
objects); an element longer than this is skipped as "line too long"."""
MAX_GZIP_RATIO = 100
"""A gzip stream that expands more than this many times its compressed size is
refused as a compression bomb. Review text compresses 3-10x; a bomb ~1000x
(deflate's limit). Checked once past :data:`GZIP_RATIO_FLOOR`. A gzip inside the
gzip is not unpacked (it reads as a binary file)."""
GZIP_RATIO_FLOOR = 8 << 20
"""Decompressed bytes below which the ratio is not checked: small repetitive files are fine."""
_READ_BUFFER = 256 << 10
_GZIP_STEP = 64 << 10
_SNIFF_BYTES = 64 << 10
_SNIFF_RECORDS = 64


# ----------------------------------------------------------------- options / results
@dataclass
class ReadOptions:
    """How to read the columns of a file. ``None`` means auto-detect.

    ``prepend_title`` joins title and body as ``"Title. Text"`` (see ``reviewbert.data``).
    """
    text_column: str | None = None
    rating_column: str | None = None
    title_column: str | None = None
    prepend_title: bool = False


# ------------------------------------------------------------------------ ratings
_STAR_STRINGS = {s: int(float(s)) for n in range(1, 6) for s in (str(n), f"{n}.0")}
_RATING_RE = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*"
    r"(?:(?:out\s+)?of\s+5(?:\.0)?(?:\s+stars?)?|/\s*5(?:\.0)?|stars?)?$",
    re.IGNORECASE)
_MISSING_STRINGS = frozenset({"nan", "none", "null", "n/a", "na", "-"})


def parse_stars(value) -> int | str:
    """The star rating 1..5 in ``value``, or the skip reason (a ``str``) why not.

    Accepts 4, 4.0, "4", "4.0", "4.0 out of 5 stars", "4 stars", "4/5".
    Returning the reason instead of raising keeps the per-row hot path cheap.
    """
    kind = type(value)
    if kind is int:
        return value if 1 <= value <= 5 else RATING_RANGE
    if kind is str:
        hit = _STAR_STRINGS.get(value)
        if hit is not None:
            return hit
        s = value.strip()
        if not s or s.lower() in _MISSING_STRINGS:
            return RATING_MISSING
        m = _RATING_RE.match(s)
        if m is None:
            return RATING_NAN
        value = float(m.group(1))
    elif value is None:
        return RATING_MISSING
    elif kind is bool or not isinstance(value, (int, float)):
        return RATING_NAN
    value = float(value)
    if math.isnan(value):
        return RATING_MISSING
    if math.isinf(value):
        return RATING_RANGE
    if not value.is_integer():
        return RATING_FRACTION
    star = int(value)
    return star if 1 <= star <= 5 else RATING_RANGE


# ------------------------------------------------------------------------ columns
_TEXT_NAMES = ("reviewtext", "reviewbody", "reviews", "review", "text", "body",
               "reviewcontent", "content", "comment", "comments")
_RATING_NAMES = ("overall", "rating", "reviewrating", "reviewstar", "reviewstars",
                 "stars", "star", "starrating", "score", "reviewscore")
_TITLE_NAMES = ("summary", "title", "reviewtitle", "reviewsummary", "headline",
                "reviewheadline", "subject")


def _norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _find_column(columns: list[str], override: str | None, names: tuple[str, ...]) -> str | None:
    """The column named ``override`` (exact, else case-insensitive), else the
    first of ``names`` present after normalising case and punctuation."""
    if override is not None:
        if override in columns:
            return override
        folded = [c for c in columns if c.strip().lower() == override.strip().lower()]
        return folded[0] if len(folded) == 1 else None
    by_norm: dict[str, str] = {}
    for c in columns:
        by_norm.setdefault(_norm_name(c), c)
    for n in names:
        if n in by_norm:
            return by_norm[n]
    return None


def _join_title(title: str, text: str) -> str:
    if not title:
        return text
    if not text:
        return title
    return f"{title} {text}" if title[-1] in ".!?…" else f"{title}. {text}"


# ---------------------------------------------------------------------- decoding
_replaced = [0]


def _count_and_replace(err: UnicodeDecodeError):
    _replaced[0] += 1
    return "\ufffd", err.end


codecs.register_error("reviewbert-replace", _count_and_replace)


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "reviewbert-replace")


class _HashingRaw(io.RawIOBase):
    """Feeds every raw byte read through ``hasher``: sha256 for free in pass 1."""

    def __init__(self, raw, hasher):
        self._raw, self._hasher = raw, hasher
        self.nbytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._raw.readinto(b)
        if n:
            self._hasher.update(memoryview(b)[:n])
            self.nbytes += n
        return n

    def drain(self) -> None:
        """Hash whatever the readers above left unread (gzip trailers, early stops)."""
        buf = bytearray(_READ_BUFFER)
        while self.readinto(buf):
            pass


def _check_path(path: Path) -> None:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory; give the review files inside it")
    if not os.access(path, os.R_OK):
        raise DataError(f"{path}: permission denied")


class _Gunzip(io.RawIOBase):
    """The decompressed bytes of a gzip stream (all its members, as ``gzip`` reads
    them), refused with a DataError as a compression bomb once they pass
    :data:`GZIP_RATIO_FLOOR` and exceed :data:`MAX_GZIP_RATIO` times the
    compressed bytes used so far.

    Why not ``gzip.GzipFile``: it reads ahead by unknown amounts, so it cannot
    say how many compressed bytes made the output, and the ratio would only be
    known late. Here zlib gets bounded input and output steps and the count is
    exact: a 1 MB file that expands to gigabytes is stopped after ~8 MiB, with
    one buffer held. zlib checks each member's CRC and length (``wbits=31``).
    """

    def __init__(self, src, path: Path):
        self._src, self._path = src, path
        self._d = zlib.decompressobj(31)
        self._pending = b""        # compressed bytes not yet given to zlib
        self._started = False      # inside a member (its header may still be arriving)
        self.packed = self.nbytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while True:
            if not self._pending:
                self._pending = self._src.read(_GZIP_STEP)
                if not self._pending:
                    if self._started:
                        raise EOFError("Compressed file ended before the end-of-stream "
                                       "marker was reached")
                    return 0
            if not self._started:  # between members: gzip skips zero padding
                self._pending = self._pending.lstrip(b"\x00")
                if not self._pending:
                    continue
                self._started, self._d = True, zlib.decompressobj(31)
            given = self._pending
            out = self._d.decompress(given, len(b))
            rest = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
            self.packed += len(given) - len(rest)
            self._pending = rest
            if self._d.eof:
                self._started = False
            if out:
                n = len(out)
                b[:n] = out
                self.nbytes += n
                self._check_ratio()
                return n

    def _check_ratio(self) -> None:
        if self.nbytes > GZIP_RATIO_FLOOR and self.nbytes > MAX_GZIP_RATIO * max(1, self.packed):
            raise DataError(
                f"{self._path}: refused as a compression bomb: {_size(self.packed)} of gzip "
                f"data expanded to over {_size(self.nbytes)} (more than {MAX_GZIP_RATIO}x; "
                "review text compresses about 3-10x)")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


@contextmanager
def _open_bytes(path: Path, hasher=None):
    """A buffered binary stream of the file's content, gunzipped (with a
    compression-bomb guard) if it starts with the gzip magic bytes.
    Yields (stream, hashing_raw_or_None)."""
    try:
        raw = open(path, "rb", buffering=0)
    except OSError as e:
        raise DataError(f"{path}: cannot open: {e.strerror or e}") from e
    with raw:
        hraw = _HashingRaw(raw, hasher) if hasher is not None else None
        buf = io.BufferedReader(hraw or raw, _READ_BUFFER)
        if buf.peek(2)[:2] == b"\x1f\x8b":
            yield io.BufferedReader(_Gunzip(buf, path), _READ_BUFFER), hraw
        else:
            yield buf, hraw


_STREAM_ERRORS = (OSError, EOFError, zlib.error)


def _stream_error(path: Path, where: str, e: Exception) -> DataError:
    return DataError(f"{path}: corrupt or truncated compressed data {where}: {e}")


# ----------------------------------------------------------------------- sniffing
@dataclass
class _Format:
    kind: str                 # "jsonl" | "json-array" | "json-document" | "csv"
    delimiter: str = ","
    keys: list[str] = field(default_factory=list)   # JSON keys seen in the first records


def _clean_json_line(s: bytes) -> bytes:
    """One record line of a ``[ {...},\\n {...} ]`` file, without the array punctuation."""
    if s[:1] == b"[":
        s = s[1:].lstrip()
    if s[-1:] == b",":
        s = s[:-1].rstrip()
    if s[-1:] == b"]" and s[:-1].rstrip()[-1:] == b"}":
        s = s[:-1].rstrip()
    return s


def _sniff(path: Path) -> _Format:
    """Decide the format from the first bytes of the (decompressed) content."""
    head = _read_head(path)
    if head.startswith(codecs.BOM_UTF8):
        head = head[3:]
    if b"\x00" in head[:8192]:
        raise DataError(f"{path}: looks like a binary file (NUL bytes), not JSON or "
                        "CSV text; UTF-16 files must be saved as UTF-8")
    stripped = head.lstrip()
    if not stripped:
        raise DataError(f"{path}: is empty")
    first = stripped[:1]
    if first == b"{":
        return _Format("jsonl", keys=_sniff_keys(path, io.BytesIO(head), array=False))
    if first == b"[":
        return _sniff_array(path, io.BytesIO(head))
    header = _decode(head[:_SNIFF_BYTES]).splitlines()[0]
    return _Format("csv", delimiter=_pick_delimiter(path, header))


def _read_head(path: Path) -> bytes:
    """Up to 2 MiB of content. A truncated or corrupt stream is fine here as long
    as some bytes came out: reading the rows reports it with a line number."""
    chunks: list[bytes] = []
    size = 0
    try:
        with _open_bytes(path) as (f, _):
            while size < 2 * MAX_RECORD_BYTES:
                chunk = f.read1(_SNIFF_BYTES)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except _STREAM_ERRORS as e:
        if not chunks:
            raise _stream_error(path, "at the start", e) from e
    return b"".join(chunks)


def _sniff_array(path: Path, f) -> _Format:
    """``[`` starts either one-record-per-line (stream it) or a whole JSON document."""
    line = f.readline(MAX_RECORD_BYTES + 1)
    if len(line) > MAX_RECORD_BYTES:
        return _Format("json-document")
    line = line.lstrip(codecs.BOM_UTF8).strip()
    while line in (b"[", b""):
        line = f.readline(MAX_RECORD_BYTES + 1)
        if not line or len(line) > MAX_RECORD_BYTES:
            return _Format("json-document")
        line = line.strip()
    try:
        rec = _loads(_clean_json_line(line))
    except (ValueError, RecursionError):
        return _Format("json-document")
    if not isinstance(rec, dict):
        return _Format("json-document")
    keys = dict.fromkeys(rec)
    keys.update(dict.fromkeys(_sniff_keys(path, f, array=True)))
    return _Format("json-array", keys=list(keys))


def _sniff_keys(path: Path, f, array: bool) -> list[str]:
    """Union of the keys of the first few records: one record may lack a field.

    If not one of the first lines parses, the file is not JSON lines at all.
    """
    keys: dict[str, None] = {}
    seen = 0
    lineno = 0
    first_error = None
    while seen < _SNIFF_RECORDS:
        line = f.readline(MAX_RECORD_BYTES + 1)
        if not line:
            break
        lineno += 1
        s = line.lstrip(codecs.BOM_UTF8).strip()
        if array:
            s = _clean_json_line(s)
        if not s or len(line) > MAX_RECORD_BYTES:
            continue
        try:
            rec = _loads(s)
        except (ValueError, RecursionError) as e:
            rec = _retry_decoded(s)
            if rec is None:
                first_error = first_error or (lineno, e)
                continue
        if isinstance(rec, dict):
            keys.update(dict.fromkeys(rec))
            seen += 1
    if not keys and first_error is not None and not array:
        raise DataError(f"{path}: line {first_error[0]}: not valid JSON ({first_error[1]})")
    return list(keys)


def _pick_delimiter(path: Path, header: str) -> str:
    counts = {d: header.count(d) for d in ("\t", ",", ";", "|")}
    if ".tsv" in path.name.lower() and counts["\t"]:
        return "\t"
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


# ------------------------------------------------------------------------ sources
class _Source:
    """One review file: its format, column binding, and row iteration.

    ``rows()`` yields ``(index, record)`` where record is a dict (JSON), a list
    (CSV) or a skip-reason string. The index is the physical line for JSON lines,
    the data-row number for CSV, the element number for a JSON document; pass 2
    uses it to find the chosen rows again without parsing the others.
    """

    def __init__(self, path, options: ReadOptions | None, report: FileReport,
                 warn: Callable[[str], None]):
        self.path = Path(path)
        _check_path(self.path)
        self.options = options or ReadOptions()
        self.report = report
        self.warn = warn
        self.fmt = _sniff(self.path)
        report.format = self.fmt.kind
        report.size = self.path.stat().st_size
        self._cols: tuple | None = None
        self._hraw: _HashingRaw | None = None
        if self.fmt.kind in ("jsonl", "json-array"):
            self._bind(self.fmt.keys, "in its first records")

    # -- columns
    def _bind(self, columns: list[str], where: str) -> None:
        o = self.options
        shown = ", ".join(repr(c) for c in columns[:30]) or "none"
        text = _find_column(columns, o.text_column, _TEXT_NAMES)
        rating = _find_column(columns, o.rating_column, _RATING_NAMES)
        for col, override, role, flag in ((text, o.text_column, "text", "text_column"),
                                           (rating, o.rating_column, "rating", "rating_column")):
            if col is None:
                if override is not None:
                    raise DataError(f"{self.path}: no {role} column {override!r} {where} "
                                    f"(columns: {shown})")
                raise DataError(f"{self.path}: cannot tell which column holds the review "
                                f"{role} {where} (columns: {shown}); set {flag} "
                                f"(--{flag.replace('_', '-')})")
        title = None
        if o.prepend_title:
            title = _find_column(columns, o.title_column, _TITLE_NAMES)
            if title is None and o.title_column is not None:
                raise DataError(f"{self.path}: no title column {o.title_column!r} {where} "
                                f"(columns: {shown})")
            if title is None:
                self.warn(f"{self.path.name}: no title column found; prepend_title has no effect")
        self.report.columns = {"text": text, "rating": rating, "title": title}
        if isinstance(columns, list) and self.fmt.kind == "csv":
            idx = {c: i for i, c in enumerate(columns)}
            t, r = idx[text], idx[rating]
            ti = idx[title] if title is not None else None
            self._cols = (t, r, ti, max(t, r, ti if ti is not None else 0))
        else:
            self._cols = (text, rating, title, 0)

    # -- extraction
    def extract(self, rec) -> tuple[str, int] | str:
        """(final text, stars) of one record, or the reason it is skipped."""
        t, r, ti, needed = self._cols
        if type(rec) is dict:
            text, rating = rec.get(t), rec.get(r)
            title = rec.get(ti) if ti is not None else None
        else:
            if len(rec) <= needed:
                return BAD_CSV_ROW
            text, rating = rec[t], rec[r]
            title = rec[ti] if ti is not None else None
        stars = parse_stars(rating)
        if type(stars) is str:
            return stars
        if type(text) is not str:
            if text is not None:
                return TEXT_NOT_STRING
            text = ""
        text = text.strip()
        if ti is not None and type(title) is str:
            text = _join_title(title.strip(), text)
        if not text:
            return EMPTY_TEXT
        return text, stars

    def records(self, hasher=None) -> Iterator[tuple[int, str, int]]:
        """(index, final text, stars) of every usable row; counts the rest."""
        rep = self.report
        skipped = rep.skipped
        extract = self.extract
        read = usable = 0
        try:
            for idx, rec in self.rows(hasher=hasher):
                read += 1
                got = extract(rec) if type(rec) is not str else rec
                if type(got) is str:
                    skipped[got] += 1
                    continue
                usable += 1
                yield idx, got[0], got[1]
        finally:
            rep.rows_read += read
            rep.usable += usable

    # -- rows
    def rows(self, wanted: np.ndarray | None = None, hasher=None) -> Iterator[tuple[int, object]]:
        """Every row, or with ``wanted`` (sorted indexes) only those, parsed."""
        before = _replaced[0]
        try:
            with _open_bytes(self.path, hasher) as (f, hraw):
                self._hraw = hraw
                if self.fmt.kind == "csv":
                    yield from self._csv_rows(f, wanted)
                elif self.fmt.kind == "json-document":
                    yield from self._document_rows(f, wanted)
                else:
                    yield from self._json_line_rows(f, wanted)
                if hraw is not None:
                    hraw.drain()
        except _STREAM_ERRORS as e:
            raise _stream_error(self.path, "while reading", e) from e
        finally:
            bad = _replaced[0] - before
            if bad and wanted is None:
                self.report.invalid_utf8 += bad
                self.warn(f"{self.path.name}: {bad} invalid UTF-8 byte sequence(s) "
                          "replaced with U+FFFD")

    def _json_line_rows(self, f, wanted):
        array = self.fmt.kind == "json-array"
        limit = MAX_RECORD_BYTES + 1
        readline = f.readline
        want = _Cursor(wanted)
        pending = None            # a failed line; it is "truncated" only if nothing follows
        parsed_any = False
        first_error = None
        lineno = 0
        while True:
            try:
                line = readline(limit)
            except _STREAM_ERRORS as e:
                raise _stream_error(self.path, f"near line {lineno + 1}", e) from e
            if not line:
                break
            lineno += 1
            if len(line) == limit and line[-1:] != b"\n":
                _skip_line(f)
                if want.active:
                    continue
                if pending is not None:
                    yield pending, BAD_JSON
                    pending = None
                yield lineno, LINE_TOO_LONG
                continue
            if want.active:
                if lineno != want.next:
                    continue
                want.advance()
            s = line.strip()
            if lineno == 1 and s.startswith(codecs.BOM_UTF8):
                s = s[3:].lstrip()
            if array:
                s = _clean_json_line(s)
            if not s:
                continue
            if pending is not None:
                yield pending, BAD_JSON
                pending = None
            try:
                rec = _loads(s)
            except (ValueError, RecursionError) as e:
                rec = _retry_decoded(s)
                if rec is None:
                    if first_error is None:
                        first_error = (lineno, str(e))
                    pending = lineno
                    continue
            parsed_any = True
            if type(rec) is not dict:
                yield lineno, NOT_OBJECT
                continue
            yield lineno, rec
            if want.done:
                return
        if pending is not None:
            yield self._cut_off_last(pending, parsed_any, first_error)

    def _cut_off_last(self, pending: int, parsed_any: bool, first_error) -> tuple[int, str]:
        """The last line failed to parse: a truncated file (skipped, with a warning) if
        anything before it parsed, else a file that is not JSON lines at all."""
        if not parsed_any:
            raise DataError(f"{self.path}: line {first_error[0]}: not valid JSON "
                            f"({first_error[1]})")
        self.warn(f"{self.path.name}: line {pending}: the last record is cut off "
                  "(file truncated?); skipped")
        return pending, TRUNCATED

    def _document_rows(self, f, wanted):
        """Elements of a JSON array document, streamed (see :class:`_ArrayElements`)."""
        elements = _ArrayElements(f, self.path)
        if self._cols is None:  # bind columns from the first records, as JSON lines do
            first = list(islice(elements, _SNIFF_RECORDS))
            keys: dict[str, None] = {}
            for _, rec in first:
                if type(rec) is dict:
                    keys.update(dict.fromkeys(rec))
            self._bind(list(keys), "in its first records")
            elements = chain(first, elements)
        want = _Cursor(wanted)
        for i, rec in elements:
            if want.active:
                if i != want.next:
                    continue
                want.advance()
            yield i, rec if type(rec) is dict else LINE_TOO_LONG if rec is _TOO_LONG else NOT_OBJECT
            if want.done:
                return

    def _csv_rows(self, f, wanted):
        if csv.field_size_limit() < MAX_RECORD_BYTES:
            csv.field_size_limit(MAX_RECORD_BYTES)
        text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="reviewbert-replace", newline="")
        reader = csv.reader(_CappedLines(text, MAX_RECORD_BYTES + 1), delimiter=self.fmt.delimiter)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataError(f"{self.path}: is empty") from None
        except csv.Error as e:
            raise DataError(f"{self.path}: line 1: unreadable CSV header ({e})") from e
        except _LineTooLong:
            raise DataError(f"{self.path}: line 1: the header is longer than "
                            f"{MAX_RECORD_BYTES >> 20} MiB: not a CSV file?") from None
        if self._cols is None:
            self._bind(header, "in its header (line 1)")
        want = _Cursor(wanted)
        idx = 0
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except _STREAM_ERRORS as e:
                raise _stream_error(self.path, f"near line {reader.line_num + 1}", e) from e
            except csv.Error as e:
                idx += 1
                if not want.active:
                    yield idx, LINE_TOO_LONG if "field larger" in str(e) else BAD_CSV_ROW
                continue
            except _LineTooLong:
                idx += 1
                if not want.active:
                    yield idx, LINE_TOO_LONG
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            idx += 1
            if want.active:
                if idx != want.next:
                    continue
                want.advance()
            yield idx, row
            if want.done:
                return


class _Cursor:
    """Walks a sorted array of wanted row indexes alongside a file's rows."""

    def __init__(self, wanted):
        self.active = wanted is not None
        self._it = iter(wanted.tolist()) if self.active else iter(())
        self.next = next(self._it, None)
        self.done = self.active and self.next is None

    def advance(self) -> None:
        self.next = next(self._it, None)
        self.done = self.next is None


class _LineTooLong(Exception):
    """A CSV line over MAX_RECORD_BYTES characters (already consumed)."""


class _CappedLines:
    """The lines of a text stream for ``csv.reader``, none longer than ``limit`` chars.

    csv.reader reads a whole physical line before it checks ``field_size_limit``,
    so one newline-free gigabyte would be held at once. Here an over-long line is
    consumed in pieces and reported by raising :class:`_LineTooLong`; csv.reader
    passes the exception on and starts afresh at its next call.
    """

    def __init__(self, text, limit: int):
        self._readline, self._limit = text.readline, limit

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self._readline(self._limit)
        if len(line) < self._limit or line[-1] in "\r\n":
            if not line:
                raise StopIteration
            return line
        while True:
            rest = self._readline(_READ_BUFFER)
            if not rest or rest[-1] in "\r\n":
                raise _LineTooLong


_raw_decode = json.JSONDecoder().raw_decode
_TOO_LONG = object()  # an element skipped unparsed (a JSON string value is a str too)
_JSON_SPACE = " \t\r\n"
_STRUCTURE = re.compile(r'[\[\]{}"]')
_IN_STRING = re.compile(r'["\\]')
_SCALAR_END = re.compile(r"[,\]}\s]")


class _ArrayElements:
    """Iterates ``(element number, value)`` over a top-level JSON array, one element
    in memory at a time: a scanner finds where each element ends (brackets, strings
    and escapes), then ``json.loads`` parses that slice. An element longer than
    MAX_DOCUMENT_BYTES is skipped unparsed, as LINE_TOO_LONG. Invalid or cut-off
    JSON raises DataError with the line, as ``json.loads`` of the whole would.
    """

    def __init__(self, f, path: Path):
        self._f, self._path = f, path
        self._dec = codecs.getincrementaldecoder("utf-8")("reviewbert-replace")
        self._buf, self._eof, self._lines_before = "", False, 0
        self._it = self._elements()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    # -- buffer
    def _more(self, keep_from: int) -> int:
        """Drop ``buf[:keep_from]``, append the next chunk; returns how far indexes moved."""
        self._lines_before += self._buf.count("\n", 0, keep_from)
        chunk = self._f.read1(_READ_BUFFER)
        if chunk:
            text = self._dec.decode(chunk)
        else:
            self._eof, text = True, self._dec.decode(b"", final=True)
        self._buf = self._buf[keep_from:] + text
        return keep_from

    def _skip_space(self, i: int) -> int:
        """Index of the next non-space character, refilling the buffer as needed
        (len(buf) at the end of the file)."""
        while True:
            n = len(self._buf)
            while i < n and self._buf[i] in _JSON_SPACE:
                i += 1
            if i < n or self._eof:
                return i
            i -= self._more(i)

    def _error(self, at: int, why: str) -> DataError:
        line = self._lines_before + self._buf.count("\n", 0, at) + 1
        return DataError(f"{self._path}: line {line}: not valid JSON ({why})")

    # -- elements
    def _elements(self):
        i = self._skip_space(0)
        if i == 0 and self._buf[:1] == "\ufeff":  # a BOM, only as the very first character
            i = self._skip_space(1)
        if self._buf[i:i + 1] != "[":
            raise DataError(f"{self._path}: expected a JSON array of review objects")
        i = self._skip_space(i + 1)
        if self._buf[i:i + 1] == "]":
            return self._finish(i + 1)
        number = 0
        while True:
            if i >= len(self._buf):
                raise self._error(i, "the document ends inside the array: file cut off?")
            number += 1
            value, end = self._whole(i)
            if value is _TOO_LONG or end - i <= MAX_DOCUMENT_BYTES:
                yield number, value
            else:
                yield number, _TOO_LONG
            i = self._skip_space(end)
            c = self._buf[i:i + 1]
            if c == "]":
                return self._finish(i + 1)
            if c != ",":
                raise self._error(i, "Expecting ',' delimiter" if c else
                                  "the document ends inside the array: file cut off?")
            i = self._skip_space(i + 1)

    def _whole(self, i: int):
        """(value or _TOO_LONG, end) of the element at ``buf[i]``.

        Fast path: one ``raw_decode`` in the buffer, which parses most elements
        whole. It fails on an element cut by the chunk end (or invalid); then the
        scanner finds the end, reading on, and ``json.loads`` parses exactly that
        (or says where it is invalid). Scalars always take the scanner: a cut
        number ("12" of "1234") would parse.
        """
        try:
            if self._buf[i] in '{["':
                return _raw_decode(self._buf, i)
        except json.JSONDecodeError:
            pass
        except RecursionError:
            raise DataError(f"{self._path}: JSON nested too deeply") from None
        start, end, skipped = self._scan(i)
        if skipped:
            return _TOO_LONG, end
        try:
            return json.loads(self._buf[start:end]), end
        except json.JSONDecodeError as e:
            raise self._error(start + e.pos, e.msg) from None
        except RecursionError:
            raise DataError(f"{self._path}: JSON nested too deeply") from None

    def _finish(self, i: int) -> None:
        i = self._skip_space(i)
        if i < len(self._buf):
            raise self._error(i, "Extra data")


    def _refill(self, start: int, i: int, skipped: bool) -> tuple[int, int, bool]:
        """Read more of the document into the buffer, keeping the value that starts at
        ``start``; a value longer than MAX_DOCUMENT_BYTES is dropped (``skipped``) so
        one huge value never holds memory. Returns the shifted (start, i, skipped)."""
        if i - start > MAX_DOCUMENT_BYTES:
            return 0, i - self._more(i), True
        moved = self._more(start)
        return start - moved, i - moved, skipped

    def _scan(self, i: int) -> tuple[int, int, bool]:
        """(start, end, skipped) of the element at ``buf[i]``, reading on as needed.
        Past MAX_DOCUMENT_BYTES the scanned part is dropped (skipped=True)."""
        start, depth, in_string, skipped = i, 0, False, False
        first = self._buf[i]
        if first not in '[{"':  # a number, true, false, null (or junk json.loads rejects)
            while True:
                m = _SCALAR_END.search(self._buf, i)
                if m is not None or self._eof:
                    return start, m.start() if m else len(self._buf), skipped
                start, i, skipped = self._refill(start, len(self._buf), skipped)
        while True:
            m = (_IN_STRING if in_string else _STRUCTURE).search(self._buf, i)
            if m is not None:
                c, i = m.group(), m.end()
                if in_string:
                    if c == "\\":
                        if i < len(self._buf):
                            i += 1  # the escaped character, whatever it is
                            continue
                        i -= 1  # its escaped character is in the next chunk
                    else:
                        in_string = False
                        if depth == 0:
                            return start, i, skipped
                        continue
                elif c == '"':
                    in_string = True
                    continue
                else:
                    depth += 1 if c in "[{" else -1
                    if depth <= 0:
                        return start, i, skipped
                    continue
            else:
                i = len(self._buf)
            if self._eof:
                raise self._error(start, "the document ends inside a value: file cut off?")
            start, i, skipped = self._refill(start, i, skipped)


def _skip_line(f) -> None:
    """Consume the rest of an over-long line without holding it."""
    while True:
        chunk = f.readline(_READ_BUFFER)
        if not chunk or chunk[-1:] == b"\n":
            return


def _retry_decoded(s: bytes):
    """Parse a line again after replacing invalid UTF-8; None if still not JSON."""
    before = _replaced[0]
    text = _decode(s)
    if _replaced[0] == before:
        return None
    try:
        return _loads(text)
    except (ValueError, RecursionError):
        return None


# ------------------------------------------------------------------ public reading
def gzip_expanded_size(path, limit: int | None = None) -> int:
    """How many bytes a gzip file expands to (0 for a file that is not gzip),
    counted by streaming, nothing kept. DataError (naming the file) when it is
    corrupt or cut off, a compression bomb, or expands past ``limit`` bytes.
    Uploads check this before they are kept."""
    path = Path(path)
    with _open_bytes(path) as (f, _):
        if not isinstance(f.raw, _Gunzip):
            return 0
        try:
            while f.read1(_READ_BUFFER):
                if limit is not None and f.raw.nbytes > limit:
                    raise DataError(f"{path}: expands to over {_size(limit)} when "
                                    f"decompressed; the limit is {_size(limit)}")
        except _STREAM_ERRORS as e:
            raise _stream_error(path, "while reading", e) from e
        return f.raw.nbytes


def iter_reviews(path, options: ReadOptions | None = None,
                 report: DataReport | None = None) -> Iterator[tuple[str, int]]:
    """Stream ``(final text, stars)`` from one file, counting skipped rows.

    Opening errors (missing file, unknown column, empty file) raise
    :class:`DataError` at call time; corrupt data found later raises it while
    iterating. Counts go to a new ``FileReport`` appended to ``report.files``.
    No deduplication and no token filter happen here.
    """
    report = report if report is not None else DataReport()
    fr = FileReport(name=Path(path).name, path=str(Path(path).absolute()))
    src = _Source(path, options, fr, report.warn)
    report.files.append(fr)
    return _texts(src)


def _texts(src: _Source) -> Iterator[tuple[str, int]]:
    for _, text, stars in src.records():
        yield text, stars


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def fingerprint(path) -> dict:
    """``{name, path (absolute), size, sha256}`` of a data file, for reviewbert.json.

    sha256 is cached per (path, size, mtime); pass 1 of :func:`build_splits`
    fills the cache, so fingerprinting a file just read costs nothing.
    """
    p = Path(path).absolute()
    _check_path(p)
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    sha = _SHA_CACHE.get(key)
    if sha is None:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(_READ_BUFFER):
                h.update(chunk)
        sha = _SHA_CACHE[key] = h.hexdigest()
    return {"name": p.name, "path": str(p), "size": st.st_size, "sha256": sha}


def _remember_sha(path: Path, hraw: _HashingRaw | None, hasher) -> str | None:
    if hraw is None:
        return None
    st = path.stat()
    sha = hasher.hexdigest()
    if hraw.nbytes == st.st_size:  # the file did not change while we read it
        _SHA_CACHE[(str(path.absolute()), st.st_size, st.st_mtime_ns)] = sha
        return sha
    return None
