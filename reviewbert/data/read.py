"""Reading one review file: format sniffing, decoding, columns, ratings.

See the package docstring (``reviewbert.data``) for the rules on final text,
non-UTF-8 bytes and over-long lines.
"""
from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import math
import os
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .report import (BAD_CSV_ROW, BAD_JSON, EMPTY_TEXT, LINE_TOO_LONG, NOT_OBJECT,
                     RATING_FRACTION, RATING_MISSING, RATING_NAN, RATING_RANGE,
                     TEXT_NOT_STRING, TRUNCATED, DataError, DataReport, FileReport)

try:  # orjson parses bytes ~3x faster than json; both give the same objects.
    import orjson
    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is in requirements.txt
    _loads = json.loads

MAX_RECORD_BYTES = 1 << 20
"""A JSON line or CSV field longer than this is skipped ("line too long")."""
MAX_DOCUMENT_BYTES = 512 << 20
"""A pretty-printed JSON array is loaded whole, so it must stay below this."""
_READ_BUFFER = 256 << 10
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


@contextmanager
def _open_bytes(path: Path, hasher=None):
    """A buffered binary stream of the file's content, gunzipped if it starts
    with the gzip magic bytes. Yields (stream, hashing_raw_or_None)."""
    try:
        raw = open(path, "rb", buffering=0)
    except OSError as e:
        raise DataError(f"{path}: cannot open: {e.strerror or e}") from e
    with raw:
        hraw = _HashingRaw(raw, hasher) if hasher is not None else None
        buf = io.BufferedReader(hraw or raw, _READ_BUFFER)
        if buf.peek(2)[:2] == b"\x1f\x8b":
            yield io.BufferedReader(gzip.GzipFile(fileobj=buf, mode="rb"), _READ_BUFFER), hraw
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
            if not parsed_any:
                raise DataError(f"{self.path}: line {first_error[0]}: not valid JSON "
                                f"({first_error[1]})")
            self.warn(f"{self.path.name}: line {pending}: the last record is cut off "
                      "(file truncated?); skipped")
            yield pending, TRUNCATED

    def _document_rows(self, f, wanted):
        data = f.read(MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise DataError(f"{self.path}: a JSON document (not one record per line) over "
                            f"{MAX_DOCUMENT_BYTES >> 20} MiB cannot be streamed; convert it "
                            "to JSON lines")
        try:
            doc = json.loads(_decode(data.lstrip(codecs.BOM_UTF8)))
        except json.JSONDecodeError as e:
            raise DataError(f"{self.path}: line {e.lineno}: not valid JSON ({e.msg})") from e
        except RecursionError as e:
            raise DataError(f"{self.path}: JSON nested too deeply") from e
        if not isinstance(doc, list):
            raise DataError(f"{self.path}: expected a JSON array of review objects")
        if self._cols is None:
            keys: dict[str, None] = {}
            for rec in doc[:_SNIFF_RECORDS]:
                if isinstance(rec, dict):
                    keys.update(dict.fromkeys(rec))
            self._bind(list(keys), "in its first records")
        want = _Cursor(wanted)
        for i, rec in enumerate(doc, 1):
            if want.active:
                if i != want.next:
                    continue
                want.advance()
            yield i, rec if type(rec) is dict else NOT_OBJECT
            if want.done:
                return

    def _csv_rows(self, f, wanted):
        if csv.field_size_limit() < MAX_RECORD_BYTES:
            csv.field_size_limit(MAX_RECORD_BYTES)
        text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="reviewbert-replace", newline="")
        reader = csv.reader(text, delimiter=self.fmt.delimiter)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataError(f"{self.path}: is empty") from None
        except csv.Error as e:
            raise DataError(f"{self.path}: line 1: unreadable CSV header ({e})") from e
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
