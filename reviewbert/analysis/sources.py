"""What gets evaluated: a checkpoint's own test split, or every review of some files.

Both return the reviews (``data.Example``: .text, .stars, .label, .source) plus a
short description that goes into the cache's meta.json and the report. The CLI
(``evaluate``, ``report``) and the error-analysis page use the same two functions.
"""
from __future__ import annotations

from pathlib import Path

from reviewbert import data

CACHE_MAX_REVIEWS = 200_000
"""Sets larger than this are not held in memory or cached: ``evaluate --split all``
streams them in chunks (a 10M-review file) and writes --save-predictions as it goes."""


def test_split(meta: dict, tokenizer=None, data_files=None) -> tuple[list, dict, list[str]]:
    """(reviews, description, warnings) of the test split recorded in ``meta``.

    With ``data_files`` (paths), they must be the checkpoint's training files (same
    names, and same contents: checked against the recorded sha256 from the read itself).
    """
    return named_split(meta, "test", tokenizer, data_files)


def named_split(meta: dict, name: str, tokenizer=None, data_files=None) -> tuple[list, dict, list[str]]:
    """:func:`test_split` for any of the recorded splits ("train", "validation", "test")."""
    if not meta.get("data"):
        raise data.DataError(f"this checkpoint's reviewbert.json records no training data, so "
                             f"its {name} split cannot be rebuilt; evaluate a data file instead")
    recorded = sorted(f.get("name", "?") for f in meta["data"]["files"])
    if data_files and sorted(Path(p).name for p in data_files) != recorded:
        raise data.DataError(f"the {name} split needs the checkpoint's training files "
                             f"({', '.join(recorded)}); for other files use --split all")
    data_dir = Path(data_files[0]).parent if data_files else None
    splits = data.splits_from_meta(meta, data_dir=data_dir, tokenizer=tokenizer,
                                   strict=bool(data_files))
    desc = {**describe_test_split(meta), "kind": f"{name} split"}
    return list(splits[name]), desc, list(splits.report.warnings)


def describe_test_split(meta: dict) -> dict:
    """The description of a checkpoint's test split, from its reviewbert.json alone."""
    cfg = meta.get("data") or {}
    return {"kind": "test split", "files": sorted(f.get("name", "?") for f in cfg.get("files") or []),
            "seed": cfg.get("seed"), "fractions": cfg.get("fractions"),
            "max_per_class": cfg.get("max_per_class"), "min_tokens": cfg.get("min_tokens", 0)}


def all_reviews(paths, scheme, meta: dict | None = None, chunk_size: int = 10_000):
    """(report, chunks, description): every usable review of ``paths`` once (no balancing),
    read with the checkpoint's read options; chunks are lists of Examples."""
    paths = list(paths)
    cfg = (meta or {}).get("data") or {}
    report, chunks = data.unique_reviews(
        paths, scheme, options=data.ReadOptions(**(cfg.get("options") or {})),
        chunk_size=chunk_size)
    desc = {"kind": "file" if len(paths) == 1 else "files",
            "files": sorted(Path(p).name for p in paths), "unique": report.unique_texts}
    return report, chunks, desc


def describe(desc: dict) -> str:
    """One line for people: "test split of a.csv, b.json (seed 42)"."""
    files = ", ".join(desc.get("files") or []) or "reviews given in code"
    if desc.get("kind") in ("test split", "validation split", "train split"):
        return f"{desc['kind']} of {files} (seed {desc.get('seed')})"
    if desc.get("kind") in ("file", "files"):
        return f"every review of {files}"
    return files
