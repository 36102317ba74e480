"""From review files to balanced splits: hash, deduplicate, select, collect.

See the package docstring (``reviewbert.data``) for the design (two streaming
passes, 13 bytes per row in between) and the deduplication rules.
"""
from __future__ import annotations

import hashlib
import math
import os
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from reviewbert.config import CLASS_BALANCE  # the modes (described there); also data.CLASS_BALANCE
from reviewbert.data.data_report import TOO_FEW_TOKENS, DataError, DataReport, FileReport
from reviewbert.data.read import ReadOptions, _check_path, _remember_sha, _Source, fingerprint
from reviewbert.model.labels import LabelScheme, get_scheme

_TOKEN_BATCH = 512
SPLIT_NAMES = ("train", "validation", "test")
HASH_NAME = "blake2b-64"


@dataclass
class Example:
    text: str
    stars: int          # 1..5, the original rating
    label: int          # class id under the scheme
    source: str         # file basename


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


@dataclass
class ClassUse:
    """How one epoch of training uses the classes of a training split (see CLASS_BALANCE)."""
    mode: str
    counts: list[int]             # training reviews per class
    per_epoch: list[int]          # reviews per class one epoch trains on
    weights: list[float] | None   # the loss weight of each class ("weighted" only)

    @classmethod
    def of(cls, mode: str, counts) -> "ClassUse":
        """From the training split's reviews per class (``counts[c]`` for class id c)."""
        check_class_balance(mode)
        counts = [int(n) for n in counts]
        if mode == "resample" and min(counts, default=0) <= 0:
            raise DataError(f"class_balance=resample needs training reviews of every class, "
                            f"got {counts}")
        per_epoch = [min(counts)] * len(counts) if mode == "resample" else counts
        weights = class_weights(counts) if mode == "weighted" else None
        return cls(mode, counts, per_epoch, weights)

    @property
    def draw_per_class(self) -> int | None:
        """Reviews per class in each epoch's fresh draw ("resample"), else None."""
        return min(self.per_epoch) if self.mode == "resample" else None

    def to_dict(self, names) -> dict:
        """For the data report and reviewbert.json: per-class values keyed by class name."""
        out = {"mode": self.mode, "train_counts": dict(zip(names, self.counts)),
               "per_epoch": dict(zip(names, self.per_epoch))}
        if self.weights is not None:
            out["class_weights"] = {n: round(w, 6) for n, w in zip(names, self.weights)}
        return out


def class_weights(counts) -> list[float]:
    """scikit-learn's "balanced" weights from per-class counts: n_total / (n_classes * n_c)."""
    from sklearn.utils.class_weight import compute_class_weight
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size == 0 or counts.min() <= 0:
        raise DataError(f"class weights need at least one review of every class, got {counts.tolist()}")
    y = np.repeat(np.arange(len(counts)), counts)
    return compute_class_weight("balanced", classes=np.arange(len(counts)), y=y).tolist()


def check_class_balance(mode: str) -> str:
    """``mode`` if it is one of CLASS_BALANCE, else a DataError."""
    if mode not in CLASS_BALANCE:
        raise DataError(f"class_balance must be one of {', '.join(CLASS_BALANCE)}, got {mode!r}")
    return mode


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

    The Rust backend's ``encode_batch_fast`` is faster than the Python wrapper: it
    builds no offsets, which a count does not need.
    It is used only when no truncation or padding is set on it, so the counts are the same.
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


def _file_names(report: DataReport, most: int = 3) -> str:
    """The files a DataError is about, so the message names them (a few, then a count)."""
    names = [f.name for f in report.files]
    shown = ", ".join(names[:most]) or "no files"
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _split_sizes(n: int, fractions: tuple[float, float, float]) -> tuple[int, int, int]:
    """Largest-remainder rounding: sizes sum to ``n`` and a 0 fraction gets 0."""
    exact = [n * f for f in fractions]
    sizes = [int(math.floor(x)) for x in exact]
    by_remainder = sorted(range(3), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: n - sum(sizes)]:
        sizes[i] += 1
    return tuple(sizes)


def _lowest(priority: np.ndarray, m: int) -> np.ndarray:
    """Indexes of the ``m`` lowest priorities, lowest first."""
    part = np.argpartition(priority, m - 1)[:m] if m < len(priority) else np.arange(len(priority))
    return part[np.argsort(priority[part], kind="stable")]


def _select(table: _Table, unique: np.ndarray, scheme: LabelScheme, seed: int,
            fractions, max_per_class: int | None, report: DataReport,
            class_balance: str = "undersample") -> list[np.ndarray]:
    """Per split, the table indexes of its rows in their final (shuffled) order.

    Each class ranks its reviews by priority; its ``n`` lowest (n = the rarest class's
    count, or max_per_class) are cut into train, validation and test. With
    ``class_balance`` other than "undersample", train also gets the class's next
    ones (up to max_per_class in all): the reviews undersampling drops. Validation
    and test are the same either way.
    """
    lut = _class_lut(scheme)
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
        raise DataError(f"cannot build balanced splits from {_file_names(report)}: {why} "
                        f"(usable unique reviews per class: {report.classes_before})")
    report.per_class = n
    sizes = _split_sizes(n, fractions)
    priority = _mix64(table.hashes[unique], _seed_key(seed, "select"))
    cap = n if class_balance == "undersample" else (max_per_class or len(classes))
    chosen: list[list[np.ndarray]] = [[], [], []]
    for c in range(scheme.num_labels):
        members = np.flatnonzero(classes == c)
        take = unique[members[_lowest(priority[members], min(cap, len(members)))]]
        lo = 0
        for k, size in enumerate(sizes):
            chosen[k].append(take[lo:lo + size])
            lo += size
        chosen[0].append(take[n:])  # beyond the balanced n: training only (none if undersample)
    order_key = _seed_key(seed, "order")
    result = []
    for k, name in enumerate(SPLIT_NAMES):
        idx = np.concatenate(chosen[k])
        idx = idx[np.argsort(_mix64(table.hashes[idx], order_key), kind="stable")]
        result.append(idx)
        report.split_counts[name] = {
            scheme.names[c]: int((lut[table.stars[idx]] == c).sum())
            for c in range(scheme.num_labels)}
    report.training = ClassUse.of(class_balance, report.split_counts["train"].values()
                                  ).to_dict(scheme.names)
    return result


# ------------------------------------------------------------------ pass 2: texts
def _read_chosen(sources: list[_Source], table: _Table, rec: np.ndarray,
                 scheme: LabelScheme, progress) -> Iterator[tuple[int, Example]]:
    """Read the files again and yield ``(position in rec, Example)`` for the table
    rows ``rec``, in canonical file order, checking each is the row pass 1 saw."""
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
            yield slot, Example(text, stars, scheme.class_of(stars), src.path.name)
        if progress is not None:
            progress("collect", src.path.name, len(mine))


def _collect(sources: list[_Source], table: _Table, chosen: list[np.ndarray],
             scheme: LabelScheme, progress) -> list[list[Example]]:
    """Read the files again, keeping the texts of the chosen rows only."""
    out: list[list[Example | None]] = [[None] * len(idx) for idx in chosen]
    split_of = np.concatenate([np.full(len(idx), k, np.int8) for k, idx in enumerate(chosen)])
    pos_of = np.concatenate([np.arange(len(idx)) for idx in chosen])
    rec = np.concatenate(chosen)
    for slot, example in _read_chosen(sources, table, rec, scheme, progress):
        out[split_of[slot]][pos_of[slot]] = example
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


def _class_lut(scheme: LabelScheme) -> np.ndarray:
    """Stars (index 0-5) -> class id of ``scheme`` (-1 for none)."""
    lut = np.full(6, -1, np.int8)
    for star, cid in scheme.star_to_id.items():
        lut[star] = cid
    return lut


def _pass1(paths, scheme: LabelScheme, min_tokens, tokenizer, options, progress
           ) -> tuple[list[_Source], _Table, DataReport]:
    """Open ``paths`` in canonical order and stream them once (see :func:`_scan`)."""
    min_tokens = int(min_tokens or 0)
    if min_tokens > 0 and tokenizer is None:
        from reviewbert.model.checkpoint import load_tokenizer  # the data layer needs no model otherwise
        tokenizer = load_tokenizer(None)
    report = DataReport(scheme=f"{scheme.num_labels} labels", class_names=scheme.names)
    sources = []
    for p in _canonical(paths):
        fr = FileReport(name=p.name, path=str(p))
        sources.append(_Source(p, options, fr, report.warn))
        report.files.append(fr)
    return sources, _scan(sources, min_tokens, tokenizer, progress), report


def build_splits(paths: Iterable[str | os.PathLike], scheme: LabelScheme, *, seed: int = 42,
                 fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                 max_per_class: int | None = None, min_tokens: int = 0,
                 tokenizer=None, options: ReadOptions | None = None,
                 progress: Callable[[str, str, int], None] | None = None,
                 class_balance: str = "undersample") -> Splits:
    """Read ``paths`` into balanced train/validation/test splits.

    Every split holds the same number of examples per class (per *class* of
    the scheme: for 3 labels, "negative" draws from 1 and 2 stars in their
    natural proportion). ``max_per_class`` caps the total per class across
    the three splits. ``min_tokens`` (default 0: no filter) drops texts with
    fewer tokens than that under ``tokenizer`` (default: the base model's),
    not counting [CLS]/[SEP]. The result depends only on the set of files,
    the options and ``seed``. ``progress(stage, file_name, rows)`` is called
    now and then, for long reads.

    ``class_balance`` (see CLASS_BALANCE) other than "undersample" adds to the
    training split the reviews balancing drops (each class up to ``max_per_class``
    reviews in all); validation and test do not change. They are read in the
    same second pass as the rest.
    """
    scheme = _as_scheme(scheme)
    check_class_balance(class_balance)
    fractions = _check_fractions(fractions)
    if max_per_class is not None and int(max_per_class) < 0:
        raise DataError(f"max_per_class must be >= 0, got {max_per_class!r}")
    sources, table, report = _pass1(paths, scheme, min_tokens, tokenizer, options, progress)
    unique = _dedupe(table, report)
    chosen = _select(table, unique, scheme, seed, fractions, max_per_class, report,
                     class_balance)
    del unique
    train, validation, test = _collect(sources, table, chosen, scheme, progress)
    return Splits(train, validation, test, report)


def data_config(paths, scheme, *, seed: int = 42,
                fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                max_per_class: int | None = None, min_tokens: int = 0,
                options: ReadOptions | None = None, class_balance: str = "undersample") -> dict:
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
        "class_balance": check_class_balance(class_balance),
        "hash": HASH_NAME,
    }


def unique_reviews(paths: Iterable[str | os.PathLike], scheme: LabelScheme, *,
                   min_tokens: int = 0, tokenizer=None, options: ReadOptions | None = None,
                   chunk_size: int = 10_000, progress=None
                   ) -> tuple[DataReport, Iterator[list[Example]]]:
    """Every usable review of ``paths`` once, with no class balancing or splitting
    (``evaluate --split all``): the same rules as :func:`build_splits` (row filters,
    duplicates kept once, conflicting texts dropped).

    Pass 1 runs now and fills the returned report; the iterator runs pass 2 and
    yields the reviews in canonical file order, ``chunk_size`` at a time, so memory
    stays at pass 1's 13 bytes per row plus one chunk of texts.
    """
    scheme = _as_scheme(scheme)
    sources, table, report = _pass1(paths, scheme, min_tokens, tokenizer, options, progress)
    keep = _dedupe(table, report)
    keep = keep[np.lexsort((table.rows[keep], table.files[keep]))]  # file order
    lut = _class_lut(scheme)
    classes = lut[table.stars[keep]]
    report.stars_before = {s: int((table.stars[keep] == s).sum()) for s in range(1, 6)}
    report.classes_before = {scheme.names[c]: int((classes == c).sum())
                             for c in range(scheme.num_labels)}

    def chunks() -> Iterator[list[Example]]:
        buf: list[Example] = []
        for _, example in _read_chosen(sources, table, keep, scheme, progress):
            buf.append(example)
            if len(buf) >= chunk_size:
                yield buf
                buf = []
        if buf:
            yield buf
    return report, chunks()


def default_data_dir() -> Path:
    """$REVIEWBERT_DATA_DIR if set, else ``<repo root>/../shared/data``."""
    env = os.environ.get("REVIEWBERT_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"  # repo/reviewbert/data/


def _locate(entry: dict, data_dir) -> tuple[Path, bool]:
    """(path, moved): the basename in ``data_dir`` when one is given (the caller says
    where the files are), else the stored absolute path, else the basename in the
    default data folder."""
    name = entry.get("name") or Path(entry.get("path", "")).name
    stored = entry.get("path")
    tried = [Path(data_dir) / name] if data_dir is not None and name else []
    if stored:
        tried.append(Path(stored))
    if name:
        tried.append(default_data_dir() / name)
    for p in tried:
        if p.is_file():
            return p, not stored or p.absolute() != Path(stored).absolute()
    raise DataError(f"data file {name!r} not found; looked at: "
                    + ", ".join(str(p) for p in tried))


def splits_from_meta(meta: dict, data_dir=None, tokenizer=None, strict: bool = False) -> Splits:
    """Rebuild the splits a checkpoint was trained on from ``meta["data"]``.

    Pass the checkpoint's tokenizer when ``min_tokens`` > 0. A file whose
    sha256 changed since training is still used, with a warning in
    ``splits.report.warnings``: the splits may then differ. With ``strict`` it
    is a DataError instead (``evaluate --split test`` must score the very test
    split). The sha256 comes from the read itself: no extra pass over the file.
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
            tokenizer=tokenizer, options=options,
            class_balance=cfg.get("class_balance", "undersample"))
    except (KeyError, TypeError) as e:
        raise DataError(f"the checkpoint's data section is malformed: {e}") from e
    for entry, path, moved in located:
        if moved:
            splits.report.warnings.append(
                f"{entry.get('name')}: used {path}, not its stored path {entry.get('path')}")
        want = entry.get("sha256")
        if want and fingerprint(path)["sha256"] != want:
            if strict:
                raise DataError(f"{path}: not the file this checkpoint was trained on (its "
                                "sha256 differs), so its test split cannot be rebuilt")
            splits.report.warn(f"{path.name}: contents changed since training (sha256 differs); "
                               "the rebuilt splits may not match the original ones")
    return splits
