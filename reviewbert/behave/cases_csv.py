"""MFT cases imported from a CSV file: ``text,min_stars,max_stars`` and optional ``capability,name``.

The rows are grouped into one MFT test per (capability, name) (defaults "Imported" and
"Imported cases"), in the order they first appear. Anything wrong is a one-line
:class:`reviewbert.behave.suite.SuiteError` naming the file and the line ("cases.csv line
7: min_stars must be a whole number 1–5, got 'x'"). Read with the csv module, not pandas,
so that a line number is the file's own, quoted newlines included. A cell is only ever
text: "=cmd|' /C calc'!A0" is a review that starts with an equals sign, never a formula
(nothing here evaluates anything; the results' CSV export quotes such cells, see
``reviewbert/behave/runner.py``).
"""
from __future__ import annotations

import csv
import io
import re

from reviewbert.behave.suite import MAX_NAME, MAX_TEXT, CaseSpec, SuiteError, TestSpec, quoted

MAX_BYTES = 5_000_000
MAX_ROWS = 10_000         # also the most cases a suite's test may hold
REQUIRED = ("text", "min_stars", "max_stars")
OPTIONAL = ("capability", "name")
DEFAULT_CAPABILITY = "Imported"
DEFAULT_NAME = "Imported cases"
_STARS = re.compile(r"[1-5](?:\.0*)?")       # "4", and "4.0" as spreadsheets write it


def _decode(data, origin: str) -> str:
    if isinstance(data, (bytes, bytearray)):
        if len(data) > MAX_BYTES:
            raise SuiteError(f"{origin}: the file is over {MAX_BYTES:,} bytes")
        try:
            return bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise SuiteError(f"{origin}: not UTF-8 text (byte {e.start}); save it as "
                             f"CSV UTF-8") from None
    if not isinstance(data, str):
        raise SuiteError(f"{origin}: expected CSV text, got {type(data).__name__}")
    if len(data) > MAX_BYTES or len(data.encode("utf-8", "replace")) > MAX_BYTES:
        raise SuiteError(f"{origin}: the file is over {MAX_BYTES:,} bytes")
    return data.removeprefix("\ufeff")


def _header(row: list[str], origin: str) -> dict[str, int]:
    names = [c.strip().lower() for c in row]
    for name in names:
        if name not in REQUIRED + OPTIONAL:
            raise SuiteError(f"{origin} line 1: unknown column {quoted(name)} (columns: "
                             f"{', '.join(REQUIRED)}, and optionally {', '.join(OPTIONAL)})")
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise SuiteError(f"{origin} line 1: missing column {', '.join(missing)} (the header "
                         f"must name {', '.join(REQUIRED)})")
    if len(set(names)) != len(names):
        raise SuiteError(f"{origin} line 1: a column is named twice")
    return {n: i for i, n in enumerate(names)}


def _stars(value: str, column: str, where: str) -> int:
    if not _STARS.fullmatch(value.strip()):
        raise SuiteError(f"{where}: {column} must be a whole number 1–5, got {quoted(value, 30)}")
    return int(float(value.strip()))


def _case(row: list[str], columns: dict[str, int], where: str) -> tuple[str, str, CaseSpec]:
    """(capability, name, case) of one data row."""
    if len(row) != len(columns):
        raise SuiteError(f"{where}: expected {len(columns)} fields, got {len(row)}")
    text = row[columns["text"]]
    if not text.strip():
        raise SuiteError(f"{where}: text is empty")
    if len(text) > MAX_TEXT:
        raise SuiteError(f"{where}: text is longer than {MAX_TEXT:,} characters")
    low = _stars(row[columns["min_stars"]], "min_stars", where)
    high = _stars(row[columns["max_stars"]], "max_stars", where)
    if low > high:
        raise SuiteError(f"{where}: min_stars {low} is above max_stars {high}")
    labels = []
    for column, default in (("capability", DEFAULT_CAPABILITY), ("name", DEFAULT_NAME)):
        value = row[columns[column]].strip() if column in columns else ""
        if len(value) > MAX_NAME:
            raise SuiteError(f"{where}: {column} is longer than {MAX_NAME} characters")
        labels.append(value or default)
    return labels[0], labels[1], CaseSpec(text, (low, high))


def _rows(text: str, origin: str):
    """(first line number, row) of each non-blank record; csv.Error as a SuiteError."""
    reader = csv.reader(io.StringIO(text, newline=""))
    line = 1
    try:
        for row in reader:
            first, line = line, reader.line_num + 1
            if any(cell.strip() for cell in row):
                yield first, row
    except csv.Error as e:
        raise SuiteError(f"{origin} line {line}: {' '.join(str(e).split())}") from None


def read_cases_csv(data: bytes | str, origin: str = "cases.csv") -> list[TestSpec]:
    """The MFT tests a CSV of cases holds (module docstring); SuiteError for a bad file."""
    origin = " ".join(str(origin).split())[:120] or "cases.csv"
    rows = _rows(_decode(data, origin), origin)
    first = next(rows, None)
    if first is None:
        raise SuiteError(f"{origin}: the file is empty (expected a header: "
                         f"{','.join(REQUIRED)})")
    columns = _header(first[1], origin)
    groups: dict[tuple[str, str], list[CaseSpec]] = {}
    count = 0
    for line, row in rows:
        count += 1
        if count > MAX_ROWS:
            raise SuiteError(f"{origin}: more than {MAX_ROWS:,} rows")
        capability, name, case = _case(row, columns, f"{origin} line {line}")
        groups.setdefault((capability, name), []).append(case)
    if not groups:
        raise SuiteError(f"{origin}: no cases under the header")
    shared: dict[str, int] = {}
    for _, name in groups:
        shared[name] = shared.get(name, 0) + 1
    tests = []
    for (capability, name), cases in groups.items():
        # one name under two capabilities: two tests, told apart by their capability
        unique = name if shared[name] == 1 else f"{name} ({capability})"[:MAX_NAME]
        tests.append(TestSpec(unique, capability, "MFT", cases=tuple(cases)))
    return tests
