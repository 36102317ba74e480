"""A cohort's definition: conditions on the properties table, joined by "and".

One condition is ``property op value``: ``n_words > 120``, ``aspect_battery == True``,
``source == "unlocked_mobile_5k.csv"``. A definition is written as a pandas ``query``
string (``n_words > 120 and contrast >= 1``), so the saved properties table can be
filtered with it in a notebook, and it is read back by :func:`parse_query`: a small
checked grammar, never handed to ``eval`` or ``DataFrame.query``, because a definition may
come from a file, a link or a colleague (docs/security.md).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

OPS = ("<=", ">=", "==", "!=", "<", ">")
MAX_QUERY = 2_000
MAX_CONDITIONS = 12
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_AND = re.compile(r"\s+and\s+")


class ConditionError(ValueError):
    """A definition that cannot be read or applied (one line, for people)."""


@dataclass(frozen=True)
class Condition:
    prop: str
    op: str
    value: float | int | bool | str

    def __post_init__(self):
        if not _NAME.fullmatch(str(self.prop)):
            raise ConditionError(f"{str(self.prop)[:40]!r} is not a property name")
        if self.op not in OPS:
            raise ConditionError(f"{str(self.op)[:10]!r} is not a comparison ({' '.join(OPS)})")
        if isinstance(self.value, float) and not math.isfinite(self.value):
            raise ConditionError(f"{self.prop}: a value must be a finite number")

    def text(self) -> str:
        """The condition as a pandas query fragment."""
        return f"{self.prop} {self.op} {_literal(self.value)}"

    def mask(self, frame: pd.DataFrame) -> np.ndarray:
        """Which rows of ``frame`` meet it. A missing value meets only ``!=``, as in
        ``DataFrame.query``."""
        if self.prop not in frame.columns:
            raise ConditionError(f"no property {self.prop!r} in this table")
        col = frame[self.prop]
        value = self.value
        if isinstance(value, str) != (col.dtype == object or pd.api.types.is_string_dtype(col)):
            raise ConditionError(f"{self.prop} compares with "
                                 f"{'text' if isinstance(value, str) else 'a number'}, "
                                 f"but its values are not")
        if isinstance(value, str) and self.op not in ("==", "!="):
            raise ConditionError(f"{self.prop}: text compares only with == or !=")
        try:
            out = {"<": col.lt, "<=": col.le, ">": col.gt, ">=": col.ge,
                   "==": col.eq, "!=": col.ne}[self.op](value)
        except (TypeError, ValueError, OverflowError):     # a bool column and 2**63, say
            raise ConditionError(f"{self.prop}: its values cannot be compared with "
                                 f"{_literal(value)[:40]}") from None
        return out.fillna(False).to_numpy(dtype=bool)


_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def _literal(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, str):
        # JSON escapes the other line breaks; these three would make the query two lines,
        # which DataFrame.query refuses (and a message would break in two)
        return json.dumps(value, ensure_ascii=False).translate(_LINE_BREAKS)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))       # in full: a rounded value would select other rows


def to_query(conditions) -> str:
    """The pandas query string of a definition ("" for every review)."""
    return " and ".join(c.text() for c in conditions)


def describe(conditions) -> str:
    """A definition for people: the query, or "every review"."""
    return to_query(conditions) or "every review"


def _value(raw: str):
    if raw in ("True", "False"):
        return raw == "True"
    if _STRING.fullmatch(raw):
        try:
            return json.loads(raw)
        except ValueError:
            raise ConditionError(f"cannot read the text {raw[:40]!r}") from None
    if _NUMBER.fullmatch(raw):
        number = float(raw)
        if not math.isfinite(number):
            raise ConditionError(f"{raw[:40]} is not a finite number")
        # a whole number as written: int(float) would round one past 2**53 to another
        return int(raw) if re.fullmatch(r"[-+]?\d+", raw) else number
    raise ConditionError(f"{raw[:40]!r} is not a number, True/False or a \"quoted text\"")


def _one(part: str) -> Condition:
    m = re.fullmatch(r"\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*", part)
    if not m:
        raise ConditionError(f"cannot read {part.strip()[:60]!r}: write property op value, "
                             f"e.g. n_words > 120")
    return Condition(m.group(1), m.group(2), _value(m.group(3)))


def _split_and(query: str) -> list[str]:
    """The query cut at " and " outside quoted text."""
    parts, last, pos = [], 0, 0
    while pos < len(query):
        s = _STRING.match(query, pos) if query[pos] == '"' else None
        if s:
            pos = s.end()
            continue
        a = _AND.match(query, pos)
        if a:
            parts.append(query[last:pos])
            last = pos = a.end()
            continue
        pos += 1
    parts.append(query[last:])
    return parts


def parse_query(query, columns=None) -> tuple[Condition, ...]:
    """A definition from its query string; with ``columns``, every property must be one."""
    query = str(query or "").strip()
    if len(query) > MAX_QUERY:
        raise ConditionError(f"a definition has at most {MAX_QUERY} characters ({len(query)} given)")
    if not query:
        return ()
    parts = _split_and(query)
    if len(parts) > MAX_CONDITIONS:
        raise ConditionError(f"a definition has at most {MAX_CONDITIONS} conditions")
    conditions = tuple(_one(p) for p in parts)
    if columns is not None:
        unknown = [c.prop for c in conditions if c.prop not in set(columns)]
        if unknown:
            raise ConditionError(f"no property {unknown[0]!r}; the properties are listed in "
                                 f"docs/guide/cohorts.md")
    return conditions


def mask_of(conditions, frame: pd.DataFrame) -> np.ndarray:
    """Which rows of ``frame`` meet every condition."""
    m = np.ones(len(frame), dtype=bool)
    for c in conditions:
        m &= c.mask(frame)
    return m
