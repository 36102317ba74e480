"""Counting what happened to every row: the data report and the one error type.

Every skipped row is counted under exactly one of the reasons below; the CLI
prints :meth:`DataReport.format` and stores :meth:`DataReport.to_dict`.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field

log = logging.getLogger("reviewbert.data")

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
    # how training uses the classes: splits.ClassUse.to_dict (mode, per-class counts
    # of the training split and of one epoch, loss weights)
    training: dict = field(default_factory=dict)
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
            "training": dict(self.training),
            "warnings": list(self.warnings),
        }

    def format(self) -> str:
        return _format_report(self)


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
        if r.training.get("mode", "undersample") == "undersample":
            lines.append(f"Balanced splits ({r.scheme}, {r.per_class:,} per class in all):")
        else:
            lines.append(f"Splits ({r.scheme}; validation and test balanced as with "
                         f"{r.per_class:,} per class in all; train keeps every other review):")
        lines.append(f"  {'split':<10} " + " ".join(f"{n:>{cw}}" for n in names)
                     + f" {'total':>{cw}}")
        for split, counts in r.split_counts.items():
            lines.append(f"  {split:<10} " + " ".join(f"{counts.get(n, 0):>{cw},}" for n in names)
                         + f" {sum(counts.values()):>{cw},}")
    if r.training:
        lines.append(format_class_use(r.training))
    if r.warnings:
        lines.append("Warnings:")
        lines.extend(f"  - {m}" for m in r.warnings)
    return "\n".join(lines)


def format_class_use(t: dict) -> str:
    """One line: how training uses the classes (``ClassUse.to_dict``)."""
    mode, epoch = t.get("mode"), t.get("per_epoch") or {}
    if mode == "resample":
        return (f"Class balance: resample: each epoch draws a fresh "
                f"{min(epoch.values(), default=0):,} reviews per class from the training split")
    if mode == "weighted":
        weights = "  ".join(f"{n}: {w:.3f}" for n, w in (t.get("class_weights") or {}).items())
        return f"Class balance: weighted: every training review; loss weights {weights}"
    return "Class balance: undersample: every epoch trains on the same balanced training split"
