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
* With ``class_balance`` "resample" or "weighted" the training split also keeps
  each class's next reviews by priority (the ones balancing drops); validation
  and test are the same reviews as with the default "undersample".
* Pass 2 streams the files again and keeps the text of the chosen rows only.
  (:func:`unique_reviews` instead streams every deduplicated row, in chunks.)

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
  so a corrupt file with no newlines cannot exhaust memory (CSV too: its lines
  are capped before ``csv`` sees them). A pretty-printed JSON array is streamed
  one element at a time; an element over 1 MiB is skipped the same way.
* **Compression bombs**: a gzip stream that expands more than 100x
  (``MAX_GZIP_RATIO``; review text compresses 3-10x) is refused with a
  DataError once past 8 MiB, so a 1 MB file that expands to gigabytes costs
  milliseconds and one buffer.
"""
from __future__ import annotations

from reviewbert.data.data_report import (
    BAD_CSV_ROW,
    BAD_JSON,
    CONFLICT,
    DUPLICATE,
    EMPTY_TEXT,
    LINE_TOO_LONG,
    NOT_OBJECT,
    RATING_FRACTION,
    RATING_MISSING,
    RATING_NAN,
    RATING_RANGE,
    TEXT_NOT_STRING,
    TOO_FEW_TOKENS,
    TRUNCATED,
    DataError,
    DataReport,
    FileReport,
)
from reviewbert.data.read import (
    MAX_DOCUMENT_BYTES,
    MAX_GZIP_RATIO,
    MAX_RECORD_BYTES,
    ReadOptions,
    fingerprint,
    gzip_expanded_size,
    iter_reviews,
    parse_stars,
)
from reviewbert.data.splits import (
    CLASS_BALANCE,
    HASH_NAME,
    SPLIT_NAMES,
    ClassUse,
    Example,
    Splits,
    build_splits,
    class_weights,
    data_config,
    default_data_dir,
    splits_from_meta,
    unique_reviews,
)

__all__ = [
    "DataError", "ReadOptions", "Example", "Splits", "DataReport", "FileReport",
    "iter_reviews", "build_splits", "unique_reviews", "data_config", "splits_from_meta", "fingerprint",
    "default_data_dir", "parse_stars", "SPLIT_NAMES", "HASH_NAME",
    "CLASS_BALANCE", "ClassUse", "class_weights",
    "MAX_RECORD_BYTES", "MAX_DOCUMENT_BYTES", "MAX_GZIP_RATIO", "gzip_expanded_size",
    "BAD_JSON", "NOT_OBJECT", "TRUNCATED", "LINE_TOO_LONG", "BAD_CSV_ROW", "EMPTY_TEXT",
    "TEXT_NOT_STRING", "RATING_MISSING", "RATING_NAN", "RATING_FRACTION", "RATING_RANGE",
    "TOO_FEW_TOKENS", "DUPLICATE", "CONFLICT",
]
