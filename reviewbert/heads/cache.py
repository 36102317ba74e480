"""The Heads analysis cache: one checkpoint's head analysis of one set of reviews, kept
beside the checkpoint and found again by what it was computed from.

Layout (inside the prediction cache's folders, ``analysis/cache.py``)::

    <checkpoint>/.analysis/heads/   beside the weights; when the checkpoint folder is not
                                    writable, the prediction cache's fallback folder
                                    (~/.cache/reviewbert/analysis/<P>/heads/: the policy of
                                    every cache beside a checkpoint, store/location.py)
      <KEY>/                        KEY = first 20 hex of sha256 over the JSON of
                                    {"format", "checkpoint", "data", "max_length",
                                    "settings", "base"}: the checkpoint's and the reviews'
                                    sha256 (analysis/cache.py's fingerprints), the
                                    analysis settings and the base model's fingerprint
        meta.json                   written FIRST: {"format": "reviewbert-heads/1", "key",
                                    "checkpoint": {"path", "sha256"}, "data": {"sha256", "n",
                                    "source": description (analysis/sources.py)},
                                    "max_length", "settings": {"fractions", "random_draws",
                                    "seed", "precision" ("bf16"|"fp32": the evaluation
                                    passes; gradients are fp32)}, "base_model": {"name",
                                    "sha256" or null}, "created" (ISO time)}
        importance.json             stage 1: {"format", "key", "raw": [L][H] Σ|∂L/∂ξ|
                                    (null for a removed head), "seconds"}
        masking.json                stage 2: {"format", "key", "base_accuracy",
                                    "base_probability", "accuracy_drop": [L][H],
                                    "probability_drop": [L][H], "seconds"}
        pruning.json                stage 3: {"format", "key", "curves": {"least"|"most"|
                                    "random": [{"fraction", "heads_masked", "accuracy",
                                    "relaxed_accuracy", "auc" (+ "_min"/"_max" for random)}]},
                                    "seconds"}
        attention.json              stage 4: {"format", "key", "atlas": {stat: [L][H]} (the
                                    stats of heads/roles.py), "finetune_js": [L][H] or null,
                                    "finetune_note": why it is null, or "", "seconds"}
        result.json                 written LAST: the whole result, exactly the JSON line
                                    of ``reviewbert heads --json`` (heads/analysis.py); a
                                    folder without it is unfinished, and the next run goes
                                    on from its last finished stage

Layers and heads are 0-based in the files ([L][H] = nested lists, layer-major); the page
and the CLI's text number them from 1. Every file is written atomically (``fsio``), a
stage file is read only when its ``key`` is the folder's, and :func:`prune` keeps the
newest :data:`KEEP` finished analyses per checkpoint. Not stale for the same reason as
the prediction cache: the key changes with any byte of the weights or the reviews.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from reviewbert.analysis import cache as prediction_cache
from reviewbert.fsio import atomic_write_json

FORMAT = "reviewbert-heads/1"
SUBFOLDER = "heads"
META, RESULT = "meta.json", "result.json"
STAGES = ("importance", "masking", "pruning", "attention")
KEEP = 8


def cache_key(checkpoint_sha: str, data_sha: str, max_length: int, settings: dict,
              base_sha: str | None) -> str:
    return prediction_cache.key_of({"format": FORMAT, "checkpoint": checkpoint_sha,
                                     "data": data_sha, "max_length": int(max_length),
                                     "settings": settings, "base": base_sha})


def roots(checkpoint) -> list[Path]:
    """The prediction cache's folders (store/location.py's analysis kind), each's heads/."""
    return prediction_cache.roots(checkpoint, SUBFOLDER)


def _read(path: Path) -> dict | None:
    return prediction_cache.read_json(path, FORMAT)


def find_result(checkpoint, key: str) -> dict | None:
    """The finished result for ``key``, or None."""
    for root in roots(checkpoint):
        d = _read(root / key / RESULT)
        if d is not None and d.get("key") == key:
            return d
    return None


def folder_for(checkpoint, key: str, meta: dict) -> Path | None:
    """The folder of ``key`` (an unfinished one is reused), created with its meta.json;
    None when nothing is writable (then nothing is kept)."""
    for root in roots(checkpoint):
        if _read(root / key / META) is not None:
            return root / key
    try:
        folder = prediction_cache.writable_root(checkpoint) / SUBFOLDER / key
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / META, {**meta, "format": FORMAT, "key": key})
    except OSError:
        return None
    return folder


def read_stage(folder: Path | None, stage: str) -> dict | None:
    if folder is None:
        return None
    d = _read(folder / f"{stage}.json")
    return d if d is not None and d.get("key") == folder.name else None


def write_stage(folder: Path | None, stage: str, data: dict) -> None:
    if folder is None:
        return
    try:
        atomic_write_json(folder / f"{stage}.json", {**data, "format": FORMAT, "key": folder.name})
    except OSError:
        pass        # a full or read-only disk: the result is still good, just not kept


def write_result(checkpoint, folder: Path | None, result: dict) -> None:
    if folder is None:
        return
    try:
        atomic_write_json(folder / RESULT, {**result, "format": FORMAT, "key": folder.name})
    except OSError:
        return
    prune(checkpoint)


def prune(checkpoint, keep: int = KEEP) -> None:
    """Drop all but the ``keep`` newest finished analyses of this checkpoint."""
    for root in roots(checkpoint):
        if not root.is_dir():
            continue
        done = [d for d in root.iterdir() if (d / RESULT).is_file()]
        done.sort(key=lambda d: (d / RESULT).stat().st_mtime, reverse=True)
        for d in done[keep:]:
            shutil.rmtree(d, ignore_errors=True)
