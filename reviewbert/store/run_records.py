"""A long run's results cached next to its checkpoint, shared by the Faithfulness page
(``faithfulness.py``, folder ``faithfulness/``) and What if?'s brittleness
(``brittleness.py``, folder ``whatif/``).

A run is keyed by everything that decides its numbers (the weights' sha256, the
sample, the settings): ``<ckpt>/<folder>/<key>.json`` once it is finished,
``<key>.partial.jsonl`` (one record per review, appended) while it runs, so that an
interrupted run resumes where it stopped. A run class has ``from_json(dict)``,
``created`` (a timestamp), ``weights_sha256`` and ``from_cache``.
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Protocol, TypeVar


class CachedRun(Protocol):
    created: float
    weights_sha256: str
    from_cache: bool


R = TypeVar("R", bound=CachedRun)


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


def key(fields: dict) -> str:
    """20 hex digits of the sha256 of ``fields`` as sorted JSON."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:20]


def paths(ckpt, folder: str, key_: str) -> tuple[Path, Path]:
    """(the finished run's .json, the running one's .partial.jsonl)."""
    where = Path(ckpt) / folder
    return where / f"{key_}.json", where / f"{key_}.partial.jsonl"


def load(path, cls: type[R]) -> R | None:
    """A cached run, or None if the file is missing or not one of ours."""
    try:
        run = cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    run.from_cache = True
    return run


def list_runs(ckpt, folder: str, cls: type[R], weights: str | None = None) -> list[R]:
    """Finished runs cached for ``ckpt`` (only those of these ``weights`` when given),
    newest first."""
    found = (load(p, cls) for p in sorted((Path(ckpt) / folder).glob("*.json")))
    runs = [r for r in found if r is not None and (weights is None or r.weights_sha256 == weights)]
    return sorted(runs, key=lambda r: r.created, reverse=True)


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
