"""The patching cache: one pair's grids on one checkpoint, kept beside the checkpoint and
found again by what they were computed from.

Layout (inside the prediction cache's folders, ``reviewbert/analysis/cache.py``)::

    <checkpoint>/.analysis/patching/    beside the weights; when the checkpoint folder is
                                        not writable, the prediction cache's fallback
                                        (~/.cache/reviewbert/analysis/<P>/patching/: the
                                        policy of every cache beside a checkpoint,
                                        reviewbert/store/location.py)
      <KEY>.json                        KEY = first 20 hex of sha256 over the JSON of
                                        {"format", "code", "checkpoint" (sha256 of the
                                        weights, config and tokenizer files), "clean",
                                        "corrupt" (the texts), "max_length", "heads"};
                                        the file: {"format": "reviewbert-patching/1", "key",
                                        "result": the JSON line of ``reviewbert patch --json``
                                        (PatchResult.to_json), "created"}

One JSON file, written atomically (``fsio``) once the grids are done, so a reader finds a
whole result or none. :data:`CODE_VERSION` is in the key: a change of the method makes
new keys instead of serving old numbers. :func:`prune` keeps the newest :data:`KEEP`.
"""
from __future__ import annotations

import time
from pathlib import Path

from reviewbert.analysis import cache as prediction_cache
from reviewbert.fsio import atomic_write_json

FORMAT = "reviewbert-patching/1"
CODE_VERSION = 1
SUBFOLDER = "patching"
KEEP = 64


def cache_key(checkpoint_sha: str, clean: str, corrupt: str, max_length: int, heads: bool) -> str:
    return prediction_cache.key_of({"format": FORMAT, "code": CODE_VERSION,
                                     "checkpoint": checkpoint_sha, "clean": clean,
                                     "corrupt": corrupt, "max_length": int(max_length),
                                     "heads": bool(heads)})


def key_for(checkpoint, clean: str, corrupt: str, max_length: int, heads: bool) -> str:
    sha = prediction_cache.checkpoint_fingerprint(checkpoint)
    return cache_key(sha, clean, corrupt, max_length, heads)


def roots(checkpoint) -> list[Path]:
    return prediction_cache.roots(checkpoint, SUBFOLDER)


def find(checkpoint, key: str) -> dict | None:
    """The cached result JSON for ``key``, or None."""
    for root in roots(checkpoint):
        d = prediction_cache.read_json(root / f"{key}.json", FORMAT)
        if d is not None and d.get("key") == key:
            return d.get("result")
    return None


def write(checkpoint, key: str, result: dict) -> None:
    """Keep ``result``; a read-only or full disk keeps nothing (the result is still good)."""
    try:
        folder = prediction_cache.writable_root(checkpoint) / SUBFOLDER
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / f"{key}.json", {"format": FORMAT, "key": key, "result": result,
                                                  "created": time.strftime("%Y-%m-%dT%H:%M:%S")})
    except OSError:
        return
    prune(checkpoint)


def prune(checkpoint, keep: int = KEEP) -> None:
    """Drop all but the ``keep`` newest results of this checkpoint."""
    for root in roots(checkpoint):
        try:
            files = sorted(root.glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
            for f in files[keep:]:
                f.unlink(missing_ok=True)
        except OSError:
            continue
