"""Reading review files into balanced train/validation/test splits.

What goes in: McAuley/Ni JSON lines (also the variant with one record per line
inside ``[ ... ]``), Amazon Reviews 2023 JSONL, pretty-printed JSON arrays, and
CSV/TSV, each optionally gzipped. The format is sniffed from the content (gzip
magic bytes, first character), never from the extension alone; only a ``.tsv``
name decides the delimiter when the header is ambiguous.

What comes out: :class:`Splits` with equal class counts inside each split, and a
:class:`DataReport` that counts every row that was dropped, by reason.

Design, because the full Cell Phones category has 10 million reviews:

* Pass 1 streams every file once. Per usable row it keeps 13 bytes: a 64-bit
  hash of the final text, the star and the row number. The file's sha256 is
  computed from the same raw bytes on the way through.
* Duplicates and rating conflicts are found with a vectorised sort on the hash.
* Each class keeps its ``n`` lowest "priorities", where a priority is a mix of
  the seed and the text hash. So the choice depends only on the texts and the
  seed: not on file order, not on row order.
* Pass 2 streams the files again and keeps the text of the chosen rows only.

Memory is about 13 bytes per usable row plus the chosen texts; deduplication
briefly needs ~35 bytes per row (the sort order and the sorted hashes).

Rules, stated once here so the report and the docs agree:

* **Final text** = the text field stripped of leading/trailing whitespace
  (inner whitespace and newlines are kept). With ``prepend_title`` it is
  ``"Title. Text"`` (no extra ``.`` when the title already ends in ``.!?``);
  an empty body with a title gives just the title.
* **Duplicates** are rows whose final text is identical (compared by a 64-bit
  blake2b hash of its UTF-8 bytes; a collision among 10M texts has odds of
  about 1 in 400,000). If all copies have the same star one is kept (the first
  in canonical file order: by file name, then path, then row); if the copies
  disagree on the star, every copy is dropped as "conflicting ratings"
  (conflict means different *stars*, even when both map to one 3-label class).
* **Row filters** run before deduplication, and each dropped row is counted
  once, under the first reason found: row structure (bad JSON, bad CSV row,
  line too long), then rating, then text, then ``min_tokens``.
* **Non-UTF-8 bytes** are decoded with U+FFFD replacement; the number of bad
  byte sequences is counted per file and reported as a warning, rows are kept.
* **Lines over 1 MiB** (``MAX_RECORD_BYTES``) are skipped as "line too long",
  so a corrupt file with no newlines cannot exhaust memory.
"""
from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import json
import logging
import math
import os
import re
import zlib
from array import array
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from .labels import LabelScheme, get_scheme

try:  # orjson parses bytes ~3x faster than json; both give the same objects.
    import orjson
    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is in requirements.txt
    _loads = json.loads

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 1 << 20
"""A JSON line or CSV field longer than this is skipped ("line too long")."""
MAX_DOCUMENT_BYTES = 512 << 20
"""A pretty-printed JSON array is loaded whole, so it must stay below this."""
_READ_BUFFER = 256 << 10
_SNIFF_BYTES = 64 << 10
_SNIFF_RECORDS = 64
_TOKEN_BATCH = 512
SPLIT_NAMES = ("train", "validation", "test")
HASH_NAME = "blake2b-64"

# Skip reasons, as they appear in DataReport.skipped.
BAD_JSON = "bad JSON"
NOT_OBJECT = "not a JSON object"
TRUNCATED = "truncated last record"
LINE_TOO_LONG = "line too long"
BAD_CSV_ROW = "bad CSV row"
EMPTY_TEXT = "empty text"
TEXT_NOT_STRING = "text not a string"
RATING_MISSING = "rating missing"
RATING_NAN = "rating not a number"
RATING_FRACTION = "rating not a whole number"
RATING_RANGE = "rating out of range"
TOO_FEW_TOKENS = "too few tokens"
DUPLICATE = "duplicate"
CONFLICT = "conflicting ratings"


class DataError(ValueError):
    """A review file (or the data options) cannot be used; the message says which and why.

    The CLI prints the message as is, so it names the file and, where one
    applies, the line number.
    """


# ----------------------------------------------------------------- options / results
@dataclass
class ReadOptions:
    """How to read the columns of a file. ``None`` means auto-detect.

    ``prepend_title`` joins title and body as ``"Title. Text"`` (see module doc).
    """
    text_column: str | None = None
    rating_column: str | None = None
    title_column: str | None = None
    prepend_title: bool = False


@dataclass
class Example:
    text: str
    stars: int          # 1..5, the original rating
    label: int          # class id under the scheme
    source: str         # file basename


@dataclass
class FileReport:
    """What happened to one file. ``usable`` rows passed every row filter
    (before deduplication across files)."""
    name: str
    path: str
    format: str = ""
    columns: dict = field(default_factory=dict)
    rows_read: int = 0
    usable: int = 0
    skipped: Counter = field(default_factory=Counter)
    invalid_utf8: int = 0
    size: int | None = None
    sha256: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["skipped"] = dict(sorted(self.skipped.items()))
        return d


@dataclass
class DataReport:
    """Counts from reading to balanced splits; ``format()`` is the CLI's table."""
    files: list[FileReport] = field(default_factory=list)
    scheme: str = ""
    class_names: tuple[str, ...] = ()
    duplicates_dropped: int = 0
    conflicting_texts: int = 0
    conflicts_dropped: int = 0
    unique_texts: int = 0
    stars_before: dict[int, int] = field(default_factory=dict)
    classes_before: dict[str, int] = field(default_factory=dict)
    per_class: int = 0
    split_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def rows_read(self) -> int:
        return sum(f.rows_read for f in self.files)

    @property
    def usable(self) -> int:
        return sum(f.usable for f in self.files)

    @property
    def skipped(self) -> Counter:
        """Every dropped row by reason, the dedup reasons included."""
        total = Counter()
        for f in self.files:
            total.update(f.skipped)
        if self.duplicates_dropped:
            total[DUPLICATE] += self.duplicates_dropped
        if self.conflicts_dropped:
            total[CONFLICT] += self.conflicts_dropped
        return total

    @property
    def selected(self) -> int:
        return sum(sum(c.values()) for c in self.split_counts.values())

    def warn(self, message: str) -> None:
        log.info(message)  # the report is the channel; the CLI prints its warnings
        self.warnings.append(message)

    def to_dict(self) -> dict:
        return {
            "files": [f.to_dict() for f in self.files],
            "scheme": self.scheme,
            "rows_read": self.rows_read,
            "usable": self.usable,
            "skipped": dict(sorted(self.skipped.items())),
            "duplicates_dropped": self.duplicates_dropped,
            "conflicting_texts": self.conflicting_texts,
            "conflicts_dropped": self.conflicts_dropped,
            "unique_texts": self.unique_texts,
            "stars_before": {str(k): v for k, v in sorted(self.stars_before.items())},
            "classes_before": dict(self.classes_before),
            "per_class": self.per_class,
            "split_counts": {k: dict(v) for k, v in self.split_counts.items()},
            "selected": self.selected,
            "warnings": list(self.warnings),
        }

    def format(self) -> str:
        return _format_report(self)


@dataclass
class Splits:
    train: list[Example]
    validation: list[Example]
    test: list[Example]
    report: DataReport

    def __getitem__(self, name: str) -> list[Example]:
        if name not in SPLIT_NAMES:
            raise KeyError(f"no split {name!r}; splits are {', '.join(SPLIT_NAMES)}")
        return getattr(self, name)

    def items(self):
        return [(n, self[n]) for n in SPLIT_NAMES]


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


# ------------------------------------------------------------------------ hashing
def _text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little")


def _seed_key(seed: int, purpose: str) -> np.uint64:
    return np.uint64(_text_hash(f"reviewbert/{purpose}/{int(seed)}"))


def _mix64(x: np.ndarray, key: np.uint64) -> np.ndarray:
    """splitmix64 finaliser of ``x ^ key``: a seeded, well-spread priority per text."""
    x = x ^ key
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


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


# ------------------------------------------------------------------ pass 1: scan
@dataclass
class _Table:
    """Pass-1 result: 13 bytes per usable row."""
    hashes: np.ndarray   # uint64 hash of the final text
    stars: np.ndarray    # int8
    files: np.ndarray    # uint16 index into the canonical path list
    rows: np.ndarray     # uint32 row index inside the file


def _scan(sources: list[_Source], min_tokens: int, tokenizer, progress) -> _Table:
    parts = []
    for fid, src in enumerate(sources):
        hashes, stars, rows = array("Q"), array("b"), array("I")
        _scan_file(src, hashes, stars, rows, min_tokens, tokenizer, progress)
        n = len(hashes)
        parts.append((np.frombuffer(hashes, np.uint64), np.frombuffer(stars, np.int8),
                      np.full(n, fid, np.uint16), np.frombuffer(rows, np.uint32)))
    if not parts:
        return _Table(*(np.empty(0, t) for t in (np.uint64, np.int8, np.uint16, np.uint32)))
    return _Table(*(np.concatenate([p[i] for p in parts]) for i in range(4)))


def _scan_file(src: _Source, hashes: array, stars: array, rows: array,
               min_tokens: int, tokenizer, progress) -> None:
    add_h, add_s, add_r = hashes.append, stars.append, rows.append
    blake, from_bytes = hashlib.blake2b, int.from_bytes
    pending: list[tuple[int, str, int]] = []

    def flush():
        counts = _count_tokens(tokenizer, [t for _, t, _ in pending])
        for (idx, text, star), n in zip(pending, counts):
            if n < min_tokens:
                src.report.skipped[TOO_FEW_TOKENS] += 1
                src.report.usable -= 1
                continue
            add_h(_text_hash(text)), add_s(star), add_r(idx)
        pending.clear()

    sha = hashlib.sha256()
    it = src.records(hasher=sha)
    for n, (idx, text, star) in enumerate(it, 1):
        if min_tokens and len(text.split(None, min_tokens - 1)) < min_tokens:
            pending.append((idx, text, star))  # fewer words than tokens needed: tokenize
            if len(pending) >= _TOKEN_BATCH:
                flush()
            continue
        add_h(from_bytes(blake(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                         "little"))
        add_s(star)
        add_r(idx)
        if progress is not None and n % 100_000 == 0:
            progress("read", src.path.name, n)
    if pending:
        flush()
    src.report.sha256 = _remember_sha(src.path, src._hraw, sha)


def _count_tokens(tokenizer, texts: list[str]) -> list[int]:
    """Tokens per text, without [CLS]/[SEP], one batched call.

    The Rust backend's ``encode_batch_fast`` (no offsets) is ~2.5x faster than
    the Python wrapper; it is used only when no truncation or padding is set on
    it, so the counts are the same.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.truncation is None and backend.padding is None:
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
        return [len(e.ids) for e in encode(texts, add_special_tokens=False)]
    enc = tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                    return_token_type_ids=False, truncation=False, verbose=False)
    return [len(ids) for ids in enc["input_ids"]]


# --------------------------------------------------------------- dedup + selection
def _dedupe(table: _Table, report: DataReport) -> np.ndarray:
    """Indexes (into ``table``) of one row per text, conflicts removed.

    Rows are sorted by (hash, file, row), so the kept copy of a duplicate is the
    first one in canonical file order, whatever order the paths came in.
    """
    n = len(table.hashes)
    if n == 0:
        return np.empty(0, np.int64)
    order = np.lexsort((table.rows, table.files, table.hashes))
    # Temporaries are freed as soon as possible: at 10M rows each costs 10-80 MB.
    h = table.hashes[order]
    first = np.empty(n, bool)
    first[0] = True
    np.not_equal(h[1:], h[:-1], out=first[1:])
    del h
    starts = np.flatnonzero(first)
    del first
    s = table.stars[order]
    conflict = np.minimum.reduceat(s, starts) != np.maximum.reduceat(s, starts)
    del s
    sizes = np.diff(np.append(starts, n))
    report.conflicting_texts = int(conflict.sum())
    report.conflicts_dropped = int(sizes[conflict].sum())
    report.duplicates_dropped = int((sizes[~conflict] - 1).sum())
    del sizes
    keep = order[starts[~conflict]]
    report.unique_texts = int(len(keep))
    return keep


def _split_sizes(n: int, fractions: tuple[float, float, float]) -> tuple[int, int, int]:
    """Largest-remainder rounding: sizes sum to ``n`` and a 0 fraction gets 0."""
    exact = [n * f for f in fractions]
    sizes = [int(math.floor(x)) for x in exact]
    by_remainder = sorted(range(3), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: n - sum(sizes)]:
        sizes[i] += 1
    return tuple(sizes)


def _select(table: _Table, unique: np.ndarray, scheme: LabelScheme, seed: int,
            fractions, max_per_class: int | None, report: DataReport) -> list[np.ndarray]:
    """Per split, the table indexes of its rows in their final (shuffled) order."""
    lut = np.full(6, -1, np.int8)
    for star, cid in scheme.star_to_id.items():
        lut[star] = cid
    stars = table.stars[unique]
    classes = lut[stars]
    report.stars_before = {s: int((stars == s).sum()) for s in range(1, 6)}
    counts = np.bincount(classes, minlength=scheme.num_labels)
    report.classes_before = {scheme.names[c]: int(counts[c]) for c in range(scheme.num_labels)}
    n = int(counts.min()) if len(counts) else 0
    if max_per_class is not None:
        n = min(n, int(max_per_class))
    if n <= 0:
        empty = [scheme.names[c] for c in range(scheme.num_labels) if counts[c] == 0]
        why = (f"no usable reviews for {', '.join(empty)}" if empty
               else "max_per_class is 0")
        raise DataError(f"cannot build balanced splits: {why} "
                        f"(usable unique reviews per class: {report.classes_before})")
    report.per_class = n
    sizes = _split_sizes(n, fractions)
    priority = _mix64(table.hashes[unique], _seed_key(seed, "select"))
    chosen: list[list[np.ndarray]] = [[], [], []]
    for c in range(scheme.num_labels):
        members = np.flatnonzero(classes == c)
        pr = priority[members]
        if n < len(members):
            part = np.argpartition(pr, n - 1)[:n]
        else:
            part = np.arange(len(members))
        take = unique[members[part[np.argsort(pr[part], kind="stable")]]]
        lo = 0
        for k, size in enumerate(sizes):
            chosen[k].append(take[lo:lo + size])
            lo += size
    order_key = _seed_key(seed, "order")
    result = []
    for k, name in enumerate(SPLIT_NAMES):
        idx = np.concatenate(chosen[k])
        idx = idx[np.argsort(_mix64(table.hashes[idx], order_key), kind="stable")]
        result.append(idx)
        report.split_counts[name] = {
            scheme.names[c]: int((lut[table.stars[idx]] == c).sum())
            for c in range(scheme.num_labels)}
    return result


# ------------------------------------------------------------------ pass 2: texts
def _collect(sources: list[_Source], table: _Table, chosen: list[np.ndarray],
             scheme: LabelScheme, progress) -> list[list[Example]]:
    """Read the files again, keeping the texts of the chosen rows only."""
    out: list[list[Example | None]] = [[None] * len(idx) for idx in chosen]
    split_of = np.concatenate([np.full(len(idx), k, np.int8) for k, idx in enumerate(chosen)])
    pos_of = np.concatenate([np.arange(len(idx)) for idx in chosen])
    rec = np.concatenate(chosen)
    for fid, src in enumerate(sources):
        mine = np.flatnonzero(table.files[rec] == fid)
        if not len(mine):
            continue
        mine = mine[np.argsort(table.rows[rec[mine]], kind="stable")]
        wanted = table.rows[rec[mine]]
        slots = zip(mine.tolist(), rec[mine].tolist())
        for (row_idx, raw), (slot, t) in zip(src.rows(wanted=wanted), slots):
            got = src.extract(raw) if type(raw) is not str else raw
            if type(got) is str or row_idx != int(table.rows[t]) \
                    or _text_hash(got[0]) != int(table.hashes[t]):
                raise DataError(f"{src.path}: changed while it was being read "
                                f"(row {row_idx} differs between the two passes)")
            text, stars = got
            out[split_of[slot]][pos_of[slot]] = Example(text, stars, scheme.class_of(stars),
                                                        src.path.name)
        if progress is not None:
            progress("collect", src.path.name, len(mine))
    missing = sum(e is None for split in out for e in split)
    if missing:
        raise DataError(f"{missing} chosen reviews were not found again in the second pass "
                        "(a file changed while it was being read)")
    return out  # type: ignore[return-value]


# ---------------------------------------------------------------------- building
def _as_scheme(scheme) -> LabelScheme:
    return scheme if isinstance(scheme, LabelScheme) else get_scheme(scheme)


def _check_fractions(fractions) -> tuple[float, float, float]:
    try:
        fr = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise DataError(f"fractions must be three numbers, got {fractions!r}") from None
    if len(fr) != 3 or any(not math.isfinite(f) or f < 0 for f in fr) \
            or abs(sum(fr) - 1.0) > 1e-6 or fr[0] <= 0:
        raise DataError(f"fractions (train, validation, test) must be >= 0, sum to 1, "
                        f"with train > 0; got {fractions!r}")
    return fr


def _canonical(paths) -> list[Path]:
    """Absolute paths, each once, sorted by (name, path): file order never matters."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    unique: dict[str, Path] = {}
    for p in paths:
        p = Path(p).absolute()
        _check_path(p)
        unique.setdefault(str(p.resolve()), p)
    if not unique:
        raise DataError("no data files given")
    return sorted(unique.values(), key=lambda p: (p.name, str(p)))


def build_splits(paths: Iterable[str | os.PathLike], scheme: LabelScheme, *, seed: int = 42,
                 fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                 max_per_class: int | None = None, min_tokens: int = 0,
                 tokenizer=None, options: ReadOptions | None = None,
                 progress: Callable[[str, str, int], None] | None = None) -> Splits:
    """Read ``paths`` into balanced train/validation/test splits.

    Every split holds the same number of examples per class (per *class* of
    the scheme: for 3 labels, "negative" draws from 1 and 2 stars in their
    natural proportion). ``max_per_class`` caps the total per class across
    the three splits. ``min_tokens`` (default 0: no filter) drops texts with
    fewer tokens than that under ``tokenizer`` (default: the base model's),
    not counting [CLS]/[SEP]. The result depends only on the set of files,
    the options and ``seed``. ``progress(stage, file_name, rows)`` is called
    now and then, for long reads.
    """
    scheme = _as_scheme(scheme)
    fractions = _check_fractions(fractions)
    if max_per_class is not None and int(max_per_class) < 0:
        raise DataError(f"max_per_class must be >= 0, got {max_per_class!r}")
    min_tokens = int(min_tokens or 0)
    if min_tokens > 0 and tokenizer is None:
        from .model import load_tokenizer
        tokenizer = load_tokenizer(None)
    report = DataReport(scheme=f"{scheme.num_labels} labels", class_names=scheme.names)
    sources = []
    for p in _canonical(paths):
        fr = FileReport(name=p.name, path=str(p))
        sources.append(_Source(p, options, fr, report.warn))
        report.files.append(fr)
    table = _scan(sources, min_tokens, tokenizer, progress)
    unique = _dedupe(table, report)
    chosen = _select(table, unique, scheme, seed, fractions, max_per_class, report)
    del unique
    train, validation, test = _collect(sources, table, chosen, scheme, progress)
    return Splits(train, validation, test, report)


def data_config(paths, scheme, *, seed: int = 42,
                fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                max_per_class: int | None = None, min_tokens: int = 0,
                options: ReadOptions | None = None) -> dict:
    """Everything :func:`splits_from_meta` needs to rebuild the same splits.

    JSON-able; stored as ``meta["data"]`` in reviewbert.json. Files keep the
    order given (the splits do not depend on it).
    """
    scheme = _as_scheme(scheme)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return {
        "files": [fingerprint(p) for p in paths],
        "labels": scheme.num_labels,
        "seed": int(seed),
        "fractions": [float(f) for f in _check_fractions(fractions)],
        "max_per_class": None if max_per_class is None else int(max_per_class),
        "min_tokens": int(min_tokens or 0),
        "options": asdict(options or ReadOptions()),
        "hash": HASH_NAME,
    }


def default_data_dir() -> Path:
    """$REVIEWBERT_DATA_DIR if set, else ``<repo root>/../shared/data``."""
    env = os.environ.get("REVIEWBERT_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _locate(entry: dict, data_dir) -> tuple[Path, bool]:
    """(path, moved): the stored absolute path, else the basename in data_dir or
    the default data folder."""
    name = entry.get("name") or Path(entry.get("path", "")).name
    tried = []
    stored = entry.get("path")
    if stored:
        tried.append(Path(stored))
    for d in (data_dir, default_data_dir()):
        if d is not None and name:
            tried.append(Path(d) / name)
    for i, p in enumerate(tried):
        if p.is_file():
            return p, (i > 0 or not stored)
    raise DataError(f"data file {name!r} not found; looked at: "
                    + ", ".join(str(p) for p in tried))


def splits_from_meta(meta: dict, data_dir=None, tokenizer=None) -> Splits:
    """Rebuild the splits a checkpoint was trained on from ``meta["data"]``.

    Pass the checkpoint's tokenizer when ``min_tokens`` > 0. A file whose
    sha256 changed since training is still used, with a warning in
    ``splits.report.warnings``: the splits may then differ.
    """
    cfg = meta.get("data") if isinstance(meta, dict) and "data" in meta else meta
    if not isinstance(cfg, dict) or not cfg.get("files"):
        raise DataError("the checkpoint's reviewbert.json has no data section "
                        "(meta['data']); its splits cannot be rebuilt")
    if cfg.get("hash", HASH_NAME) != HASH_NAME:
        raise DataError(f"splits were made with text hash {cfg['hash']!r}; this version "
                        f"uses {HASH_NAME!r} and would choose different reviews")
    located = [(entry, *_locate(entry, data_dir)) for entry in cfg["files"]]
    try:
        options = ReadOptions(**(cfg.get("options") or {}))
        splits = build_splits(
            [p for _, p, _ in located], get_scheme(cfg["labels"]),
            seed=cfg.get("seed", 42), fractions=tuple(cfg.get("fractions", (0.7, 0.1, 0.2))),
            max_per_class=cfg.get("max_per_class"), min_tokens=cfg.get("min_tokens", 0),
            tokenizer=tokenizer, options=options)
    except (KeyError, TypeError) as e:
        raise DataError(f"the checkpoint's data section is malformed: {e}") from e
    for entry, path, moved in located:
        if moved:
            splits.report.warnings.append(
                f"{entry.get('name')}: not at its stored path {entry.get('path')}; used {path}")
        want = entry.get("sha256")
        if want and fingerprint(path)["sha256"] != want:
            splits.report.warn(f"{path.name}: contents changed since training (sha256 differs); "
                               "the rebuilt splits may not match the original ones")
    return splits


# ------------------------------------------------------------------------ report
def _format_report(r: DataReport) -> str:
    lines = []
    lines.append(f"Data: {len(r.files)} file(s), {r.rows_read:,} rows read, {r.usable:,} usable, "
                 f"{r.unique_texts:,} unique")
    w = max([len(f.name) for f in r.files] + [4])
    lines.append(f"  {'file':<{w}}  {'format':<13} {'rows':>10} {'usable':>10}  skipped")
    for f in r.files:
        sk = ", ".join(f"{k} {v:,}" for k, v in f.skipped.most_common()) or "-"
        lines.append(f"  {f.name:<{w}}  {f.format:<13} {f.rows_read:>10,} {f.usable:>10,}  {sk}")
    skipped = r.skipped
    if skipped:
        lines.append("Dropped rows by reason:")
        for k, v in skipped.most_common():
            lines.append(f"  {k:<26} {v:>10,}")
        if r.conflicting_texts:
            lines.append(f"  ({r.conflicting_texts:,} texts had conflicting ratings)")
    if r.stars_before:
        lines.append("Unique texts by star before balancing: "
                     + "  ".join(f"{s}: {n:,}" for s, n in sorted(r.stars_before.items())))
    if r.split_counts:
        names = list(r.class_names) or list(next(iter(r.split_counts.values())))
        cw = max(len(n) for n in names + ["total"])
        lines.append(f"Balanced splits ({r.scheme}, {r.per_class:,} per class in all):")
        lines.append(f"  {'split':<10} " + " ".join(f"{n:>{cw}}" for n in names)
                     + f" {'total':>{cw}}")
        for split, counts in r.split_counts.items():
            lines.append(f"  {split:<10} " + " ".join(f"{counts.get(n, 0):>{cw},}" for n in names)
                         + f" {sum(counts.values()):>{cw},}")
    if r.warnings:
        lines.append("Warnings:")
        lines.extend(f"  - {m}" for m in r.warnings)
    return "\n".join(lines)
