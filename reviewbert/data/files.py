"""The data area the training page picks from: data files, uploads, previews.

Two folders:

- the **data folder**, ``$REVIEWBERT_DATA_DIR`` (default ``../shared/data``),
  read only: its review files are offered as they are;
- the **uploads folder**, ``$REVIEWBERT_UPLOADS_DIR`` (default ``data/uploads``
  in the repository, git-ignored), where :func:`save_upload` stores files sent
  from the browser.

An upload is stored under a sanitised name (letters, digits, ``._-``; no path,
no leading dot, a known review-file extension), never outside the uploads
folder, at most :data:`MAX_UPLOAD_BYTES` (and, gzipped, at most
:data:`MAX_UPLOAD_EXPANDED` decompressed), written atomically, and read once
before it is kept: a file the readers reject is deleted again and the reason
is returned to the user.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from reviewbert import data
from reviewbert.data import DataError, DataReport, ReadOptions
from reviewbert.model.checkpoint import load_tokenizer
from reviewbert.model.labels import get_scheme

REPO = Path(__file__).resolve().parents[2]
EXTENSIONS = (".json", ".jsonl", ".csv", ".tsv", ".json.gz", ".jsonl.gz", ".csv.gz", ".tsv.gz")
MAX_UPLOAD_BYTES = 50 << 20
"""Matches .streamlit/config.toml's server.maxUploadSize (MB); checked here again,
because a caller other than Streamlit's uploader must not bypass it."""
MAX_UPLOAD_EXPANDED = 1 << 30
"""A gzipped upload may expand to at most this (1 GiB; a 50 MB upload of review
text is ~500 MB). Checked by streaming before the upload is kept, on top of the
readers' own compression-bomb guard (100x)."""


class UploadError(ValueError):
    """An upload that is not kept; the message says why."""


def data_dir() -> Path:
    return data.default_data_dir()


def uploads_dir() -> Path:
    return Path(os.environ.get("REVIEWBERT_UPLOADS_DIR") or REPO / "data" / "uploads")


def is_review_file(name: str) -> bool:
    return name.lower().endswith(EXTENSIONS) and not name.startswith(".")


def list_data_files(*folders: Path) -> list[Path]:
    """Review files directly inside each folder (data folder first, then uploads)."""
    out = []
    for folder in folders or (data_dir(), uploads_dir()):
        folder = Path(folder)
        if folder.is_dir():
            out += sorted(p for p in folder.iterdir() if p.is_file() and is_review_file(p.name))
    return out


# ------------------------------------------------------------------------ uploads
def safe_name(name: str) -> str:
    """A file name that cannot leave its folder or hide: the base name, plain characters."""
    name = (name or "").replace("\x00", "").replace("\\", "/").split("/")[-1].strip()
    plain = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    if not is_review_file(plain.lstrip("._-")):
        if not plain.strip("._-"):
            raise UploadError("the file has no usable name")
        raise UploadError(f"{name[:200]!r} is not a review file: use one of "
                          f"{', '.join(EXTENSIONS)}")
    stem, ext = _split_ext(plain)
    # a long name is cut in its stem, so it keeps its extension and cannot end up
    # hidden (".....csv") or empty
    stem = stem[:100].lstrip("._-")
    if not stem:
        raise UploadError("the file has no usable name")
    return stem + ext


def save_upload(name: str, content: bytes, folder: Path | None = None,
                max_bytes: int = MAX_UPLOAD_BYTES) -> Path:
    """Store an uploaded review file and check that it can be read; returns its path.

    Raises UploadError (too big, empty, bad name, unreadable or no text/rating
    column); nothing is left behind then. The same content uploaded again under
    the same name is the same file; other content under a taken name gets a
    short hash suffix, so an earlier upload that a run recorded is never replaced.
    """
    folder = Path(folder or uploads_dir())
    if len(content) > max_bytes:
        raise UploadError(f"the file is {len(content) / 1e6:.1f} MB; the limit is "
                          f"{max_bytes / 1e6:.0f} MB")
    if not content.strip():
        raise UploadError("the file is empty")
    clean = safe_name(name)
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / clean
    digest = hashlib.sha256(content).hexdigest()[:8]
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest()[:8] != digest:
        stem, ext = _split_ext(clean)
        dest = folder / f"{stem}-{digest}{ext}"
    if dest.resolve().parent != folder.resolve():  # belt and braces: safe_name already ensures it
        raise UploadError("refusing a name that points outside the uploads folder")
    # a private temporary name: two sessions uploading the same name at once must
    # not write into one file (mkstemp: O_EXCL, mode 0600, never a symlink's target)
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{dest.name}.", suffix=".upload.tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        # a gzip that expands too far (or is a bomb) is refused before any parsing
        data.gzip_expanded_size(tmp, MAX_UPLOAD_EXPANDED)
        preview(tmp, n=3, name=dest.name)
    except DataError as e:
        tmp.unlink(missing_ok=True)
        raise UploadError(str(e).replace(str(tmp), dest.name)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, dest)
    return dest


def _split_ext(name: str) -> tuple[str, str]:
    for ext in sorted(EXTENSIONS, key=len, reverse=True):
        if name.lower().endswith(ext):
            return name[: -len(ext)], name[-len(ext):]
    return name, ""


# ------------------------------------------------------------------------ previews
@dataclass
class Preview:
    name: str
    format: str                                # csv, jsonl, json-array, json-document
    columns: dict = field(default_factory=dict)  # {"text", "rating", "title"} -> column or None
    rows: list = field(default_factory=list)     # [{"stars", "text"}] of the first usable rows
    skipped: dict = field(default_factory=dict)  # reason -> count among the rows looked at


def preview(path, options: ReadOptions | None = None, n: int = 5, name: str | None = None) -> Preview:
    """The first ``n`` usable rows of a file with the columns the reader detected.

    Reads only as far as it needs. A file the reader cannot use raises DataError.
    """
    # detect the title column even when it is not prepended, so the preview can name it
    opts = options or ReadOptions()
    probe = ReadOptions(opts.text_column, opts.rating_column, opts.title_column, True)
    report = DataReport()
    rows = [{"stars": s, "text": t} for t, s in
            islice(data.iter_reviews(path, probe, report), n)]
    fr = report.files[0]
    if not rows and not fr.rows_read:
        raise DataError(f"{name or Path(path).name}: no review rows found")
    if not opts.prepend_title:  # show the texts training would use
        rows = [{"stars": r["stars"], "text": t} for r, (t, _) in
                zip(rows, islice(data.iter_reviews(path, opts, DataReport()), n))]
    return Preview(name=name or Path(path).name, format=fr.format, columns=dict(fr.columns or {}),
                   rows=rows, skipped=dict(fr.skipped))


def training_report(paths, cfg, tokenizer=None) -> DataReport:
    """The data report ``train`` prints for this config (both passes over the files).

    Same call as the trainer, so the counts per split are the ones a run would use.
    """
    if not paths:
        raise DataError("no data file chosen")
    if cfg.min_tokens and tokenizer is None:
        tokenizer = load_tokenizer(cfg.base_model)
    splits = data.build_splits(
        list(paths), get_scheme(cfg.labels), seed=cfg.split_seed, fractions=cfg.fractions,
        max_per_class=cfg.max_per_class, min_tokens=cfg.min_tokens, tokenizer=tokenizer,
        class_balance=cfg.class_balance,
        options=ReadOptions(text_column=cfg.text_column, rating_column=cfg.rating_column,
                            title_column=cfg.title_column, prepend_title=cfg.prepend_title))
    return splits.report
