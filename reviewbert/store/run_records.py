"""A long run's results cached beside its checkpoint: :class:`RunRecord`, the base of the
Faithfulness page's runs (``explain/faithfulness.py``, folder ``faithfulness/``) and What
if?'s brittleness runs (``whatif/brittleness.py``, folder ``whatif/``), and the
:class:`Journal` a run appends its reviews to while it is made.

A run is keyed by everything that decides its numbers (the weights' sha256, the
sample, the settings): ``<folder>/<key>.json`` once it is finished,
``<key>.partial.jsonl`` (one record per review, appended) while it runs, so that an
interrupted run resumes where it stopped. The folder is beside the checkpoint, or the
per-user fallback when the checkpoint cannot be written (``store/location.py``).

A run class is a dataclass of :class:`RunRecord` that declares its :data:`FORMAT`, its
``PLACE`` (a :class:`~reviewbert.store.location.Place`) and its fields, in the order
they are written; its file is ``{"format": FORMAT, <each field but cache_error and
from_cache>}``. Its ``settings`` object has ``as_json()``.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, ClassVar, TypeVar

from reviewbert.fsio import atomic_write_json
from reviewbert.progress import resumed
from reviewbert.store.location import Place

R = TypeVar("R", bound="RunRecord")
_NOT_KEPT = ("cache_error", "from_cache")       # about this process, not the run: not written


def texts_sha256(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()


def weights_sha256(ckpt) -> str:
    """sha256 over the checkpoint's *.safetensors files (name and bytes, name order);
    remembered while their names, inodes, sizes and modification times stay the same."""
    files = sorted(Path(ckpt).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{ckpt} has no .safetensors weights")
    stamp = tuple((f.name, str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
                  for f in files for st in [f.stat()])
    return _sha256_of(stamp)


@functools.lru_cache(maxsize=32)
def _sha256_of(stamp: tuple) -> str:
    h = hashlib.sha256()
    for name, where, *_ in stamp:
        h.update(name.encode() + b"\0")
        with open(where, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def key(fields_: dict) -> str:
    """20 hex digits of the sha256 of ``fields_`` as sorted JSON."""
    return hashlib.sha256(json.dumps(fields_, sort_keys=True).encode()).hexdigest()[:20]


def paths_in(root: Path, key_: str) -> tuple[Path, Path]:
    """(the finished run's .json, the running one's .partial.jsonl) in one folder."""
    return root / f"{key_}.json", root / f"{key_}.partial.jsonl"


def read_partial(path: Path) -> dict[int, dict]:
    """{"i": record} of a ``.partial.jsonl`` (torn lines skipped)."""
    done = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return done
    for line in lines:
        try:
            rec = json.loads(line)
            done[int(rec["i"])] = rec
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from an interrupted write
    return done


@dataclass
class RunRecord:
    """What every cached run shares: its file (to/from JSON), its key, where it is, and the
    runs of a checkpoint. ``cache_error`` (why a run was not kept) and ``from_cache`` (read
    back, not computed) describe this process's copy and are never written."""

    FORMAT: ClassVar[str]
    PLACE: ClassVar[Place]

    # keyword-only, so that a subclass lists its own fields first, positionally, in the
    # order its file has them
    cache_error: str = field(default="", compare=False, kw_only=True)
    from_cache: bool = field(default=False, compare=False, kw_only=True)
    # Every run class also has key, weights_sha256 and created, which the methods below
    # read. They are not declared here: a field declared in the base keeps its place in
    # the file's field order, and each run's order is its own.

    @classmethod
    def kept_fields(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name not in _NOT_KEPT]

    def to_json(self) -> dict:
        d = asdict(self)
        for name in _NOT_KEPT:
            d.pop(name)
        return {"format": self.FORMAT, **d}

    @classmethod
    def from_json(cls: type[R], d: dict) -> R:
        """The run of one file; ValueError for another format, KeyError for a missing field."""
        if d.get("format") != cls.FORMAT:
            raise ValueError(f"not a {cls.FORMAT} file")
        return cls(**{k: d[k] for k in cls.kept_fields()})

    @classmethod
    def cache_key(cls, weights: str, max_length: int, sample: dict, settings) -> str:
        """The key of a run: its format, the weights' sha256, max_length, the sample's
        description and the settings (``settings.as_json()``)."""
        return key({"format": cls.FORMAT, "weights": weights, "max_length": max_length,
                    "sample": sample, "settings": settings.as_json()})

    @classmethod
    def cache_paths(cls, ckpt, key_: str) -> tuple[Path, Path]:
        """(finished .json, .partial.jsonl) of the run ``key_``: in the first folder that holds
        its finished file, else its partial one, else beside the checkpoint (where nothing
        is yet: looking creates no folder)."""
        roots = cls.PLACE.roots(ckpt)
        for which in (0, 1):        # a finished run anywhere wins over a partial one
            for root in roots:
                pair = paths_in(root, key_)
                if pair[which].is_file():
                    return pair
        return paths_in(roots[0], key_)

    @classmethod
    def load(cls: type[R], path) -> R | None:
        """A cached run, or None if the file is missing or not one of ours."""
        try:
            run = cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        run.from_cache = True
        return run

    @classmethod
    def find(cls: type[R], ckpt, key_: str) -> R | None:
        """The finished run ``key_`` of ``ckpt``, wherever it is kept, or None."""
        return cls.load(cls.cache_paths(ckpt, key_)[0])

    @classmethod
    def list_runs(cls: type[R], ckpt, weights: str | None = None) -> list[R]:
        """Finished runs cached for ``ckpt`` (only those of these ``weights`` when given),
        newest first."""
        found = (cls.load(p) for p in cls.PLACE.glob(ckpt, "*.json"))
        runs = [r for r in found if r is not None and (weights is None or r.weights_sha256 == weights)]
        return sorted(runs, key=lambda r: r.created, reverse=True)

    @classmethod
    def journal(cls, ckpt, key_: str, use_cache: bool = True) -> Journal:
        return Journal(cls.PLACE, ckpt, key_, use_cache)


class Journal:
    """The reviews of one run being made: ``done`` holds those an interrupted run left in
    any folder's ``.partial.jsonl``, :meth:`add` appends each new one (flushed) to the
    partial file in the first writable folder, and :meth:`save` writes the finished run
    and removes the partial files. ``error`` says why nothing is kept (no folder can be
    written); ``use_cache=False`` neither reads nor writes. Use it as a context manager."""

    def __init__(self, place: Place, ckpt, key_: str, use_cache: bool = True):
        self.place, self.ckpt, self.key = place, ckpt, key_
        self.done: dict[int, dict] = {}
        self.error = ""
        self._log = None
        self._final: Path | None = None
        if not use_cache:
            return
        for root in reversed(place.roots(ckpt)):       # the folder looked in first wins
            self.done |= read_partial(paths_in(root, key_)[1])
        root = None
        try:
            root = place.writable(ckpt)
            self._final, partial = paths_in(root, key_)
            self._log = open(partial, "a", encoding="utf-8")
        except OSError as e:
            self._final = None
            self.error = f"results not cached: {e.strerror or e}" + (f" ({root})" if root else "")

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def todo(self, n: int) -> list[int]:
        """The places in the sample not done yet."""
        return [i for i in range(n) if i not in self.done]

    def add(self, rec: dict) -> None:
        self.done[int(rec["i"])] = rec
        if self._log is not None:
            self._log.write(json.dumps(rec) + "\n")
            self._log.flush()

    def fill(self, n: int, record: Callable[[int], dict | None], progress=None) -> list[dict]:
        """Record every review of the sample not done yet (``record(i)``; None: the review
        has no words, kept as skipped), telling ``progress`` first how many were done before
        (``reviewbert.progress.resumed``), then one per review; the records in order."""
        resumed(progress, len(self.done))
        for i in self.todo(n):
            self.add(record(i) or {"i": i, "skip": "no words"})
            if progress:
                progress(1)
        return self.reviews(n)

    def reviews(self, n: int) -> list[dict]:
        """The records of the sample's ``n`` reviews, in order, the skipped ones left out."""
        return [self.done[i] for i in range(n) if "skip" not in self.done[i]]

    def save(self, run: RunRecord) -> None:
        """Write the finished run (when it can be kept) and drop the partial files; a failed
        write is said in ``run.cache_error``."""
        self.close()
        if self._final is None:
            return
        try:
            atomic_write_json(self._final, run.to_json())
        except OSError as e:
            run.cache_error = f"results not cached: {e.strerror or e}"
            return
        for root in self.place.roots(self.ckpt):
            try:
                paths_in(root, self.key)[1].unlink(missing_ok=True)
            except OSError:
                pass        # a partial file left in a folder that turned read-only: harmless
