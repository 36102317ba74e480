"""The per-layer probes' cache: the fitted probes and their scores, kept beside the
checkpoint and found again by what they were computed from.

Layout (inside the prediction cache's folders, ``reviewbert/analysis/cache.py``)::

    <checkpoint>/.analysis/layers/  beside the weights; when the checkpoint folder is not
                                    writable, the prediction cache's fallback folder (the
                                    policy of every cache beside a checkpoint,
                                    reviewbert/store/location.py)
      <KEY>/                        KEY = first 20 hex of sha256 over the JSON of
                                    {"format", "code", "checkpoint", "train", "test",
                                    "max_length", "settings", "base"}: the checkpoint's
                                    sha256, the sha256 of the training sample and of the
                                    test reviews (analysis/cache.py's fingerprints), the
                                    settings (cap, seed, precision), the base model's
                                    fingerprint and :data:`CODE_VERSION`
        meta.json                   written FIRST: {"format", "key", "checkpoint": {"path",
                                    "sha256"}, "settings", "created", ...}
        probes.safetensors          the fitted probes: "coef" [L+1, C, D] and "intercept"
                                    [L+1, C] (float32, on the raw [CLS] vectors: the
                                    standardisation is folded in), and "base_coef",
                                    "base_intercept" for the base model when it was probed
        result.json                 written LAST: the whole result, the JSON line of
                                    ``reviewbert layers --json``; a folder without it is
                                    unfinished and is computed again

Every file is written atomically (``reviewbert/fsio.py``) and :func:`prune` keeps the
newest :data:`KEEP` finished results per checkpoint. The key changes with any byte of the
weights or the reviews, so a result is never stale.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from reviewbert.analysis import cache as prediction_cache
from reviewbert.fsio import atomic_write, atomic_write_json

FORMAT = "reviewbert-layers/1"
CODE_VERSION = 1
"""Bumped whenever the probes or their scores are computed differently: old results are
then simply not found."""
SUBFOLDER = "layers"
META, PROBES, RESULT = "meta.json", "probes.safetensors", "result.json"
KEEP = 8


def cache_key(checkpoint_sha: str, train_sha: str, test_sha: str, max_length: int,
              settings: dict, base_sha: str | None) -> str:
    return prediction_cache.key_of({"format": FORMAT, "code": CODE_VERSION,
                                     "checkpoint": checkpoint_sha, "train": train_sha,
                                     "test": test_sha, "max_length": int(max_length),
                                     "settings": settings, "base": base_sha})


def roots(checkpoint) -> list[Path]:
    """The prediction cache's folders, each's layers/."""
    return prediction_cache.roots(checkpoint, SUBFOLDER)


def _read(path: Path) -> dict | None:
    return prediction_cache.read_json(path, FORMAT)


def read_arrays(folder: Path) -> dict[str, np.ndarray] | None:
    """probes.safetensors of ``folder`` as numpy arrays, or None if missing or torn."""
    from safetensors.numpy import load_file
    try:
        return load_file(str(folder / PROBES))
    except Exception:  # noqa: BLE001 - OSError, or safetensors' own error for a torn file
        return None


def find(checkpoint, key: str) -> tuple[dict, dict] | None:
    """(result, arrays) of the finished result for ``key``, or None."""
    for root in roots(checkpoint):
        d = _read(root / key / RESULT)
        if d is not None and d.get("key") == key:
            arrays = read_arrays(root / key)
            if arrays is not None:
                return d, arrays
    return None


def latest(checkpoint, checkpoint_sha: str, settings: dict) -> tuple[dict, dict] | None:
    """(result, arrays) of the newest finished result of this very checkpoint (its sha256)
    with these settings, whatever reviews it was computed on; None if there is none.
    The pages ask this on every run: it reads no review."""
    found = []
    for root in roots(checkpoint):
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            path = folder / RESULT
            if path.is_file():
                found.append((path.stat().st_mtime, folder))
    for _, folder in sorted(found, key=lambda t: t[0], reverse=True):
        d = _read(folder / RESULT)
        if d is None or d.get("key") != folder.name or d.get("settings") != settings:
            continue
        if d.get("checkpoint_sha256") != checkpoint_sha:
            continue
        arrays = read_arrays(folder)
        if arrays is not None:
            return d, arrays
    return None


def write(checkpoint, key: str, meta: dict, arrays: dict[str, np.ndarray], result: dict) -> bool:
    """meta.json, probes.safetensors, then result.json; False when nothing is writable
    (the result is still good, just not kept)."""
    from safetensors.numpy import save_file
    try:
        folder = prediction_cache.writable_root(checkpoint) / SUBFOLDER / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RESULT).unlink(missing_ok=True)      # unfinished until the new result lands
        atomic_write_json(folder / META, {**meta, "format": FORMAT, "key": key})
        tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()}
        atomic_write(folder / PROBES, lambda tmp: save_file(tensors, tmp))
        atomic_write_json(folder / RESULT, {**result, "format": FORMAT, "key": key})
    except OSError:
        return False
    prune(checkpoint)
    return True


def prune(checkpoint, keep: int = KEEP) -> None:
    """Drop all but the ``keep`` newest finished results of this checkpoint."""
    for root in roots(checkpoint):
        if not root.is_dir():
            continue
        done = [d for d in root.iterdir() if (d / RESULT).is_file()]
        done.sort(key=lambda d: (d / RESULT).stat().st_mtime, reverse=True)
        for d in done[keep:]:
            shutil.rmtree(d, ignore_errors=True)
