"""One review's slow explanations (the gradient methods, LIME and occlusion), computed once
for the whole server and cached next to the checkpoint: ``<ckpt>/explanations/<key>.json``,
or ``~/.cache/reviewbert/explanations/<P>/<key>.json`` when the checkpoint folder cannot be
written (store/location.py: the policy of every cache beside a checkpoint).

A class of twenty asking for LIME of the same example review would otherwise keep two
cores busy for twenty times 20 s. With :func:`cached_or_computed`:

- a result already stored is read back (milliseconds), by any session, after a restart too;
- a request that finds another thread computing the same key waits for it, calling
  ``on_wait()`` while it waits (the page draws there, which is also where Streamlit can stop
  it), then reads what the other stored; if the other was stopped, it computes itself;
- the computing thread runs the work itself, so a page that is stopped (its user left)
  stops its work at the progress bar's next step; nothing runs on unseen;
- when no folder can be written, the last results are still kept in memory.

The key covers everything that decides the numbers: the weights' sha256, the token ids,
and each method's settings (:func:`method_fields`), with :data:`VERSION` for the code.

The pages compute the slow methods in pairs (:func:`shared_groups`: the gradient methods,
LIME and occlusion) and cache each pair as one entry. One method alone (What if?'s
comparison of an edit with its original) goes through :func:`scores`: read from a stored
pair that holds the very same method, or from its own entry, else computed and stored
under its own key; so LIME of a review that the Predict page explained is not computed
again to compare an edit with it, and a class comparing the same edit computes it once.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reviewbert.explain import methods as explain
from reviewbert.fsio import atomic_write_json
from reviewbert.store import location
from reviewbert.store import run_records as run_cache

PLACE = location.EXPLANATIONS
FOLDER = PLACE.folder       # "explanations"
VERSION = 1
"""Raise when a method's arithmetic changes: old files then no longer match."""
MEMORY_ENTRIES = 64

_GUARD = threading.Lock()
_LOCKS: dict[str, list] = {}         # key → [its lock, the threads using it]
_MEMORY: OrderedDict[str, list] = OrderedDict()


def method_fields(method) -> dict:
    """A method's name and the settings that decide its scores (its plain attributes)."""
    plain = {k: v for k, v in sorted(vars(method).items())
             if isinstance(v, (bool, int, float, str)) or v is None}
    return {"name": method.name, **plain}


def key(weights: str, ids: list[int], methods) -> str:
    return run_cache.key({
        "version": VERSION, "weights": weights, "ids": run_cache.texts_sha256([str(ids)]),
        "methods": [method_fields(m) for m in methods],
        "lime_ridge_alpha": explain.LIME_RIDGE_ALPHA, "ig_delta_warn": explain.DELTA_WARN})


def place(predictor, pred, methods) -> tuple[Path | None, str]:
    """(the folder to cache in, or None: memory only; the key) of ``methods`` on ``pred``.
    A Predictor not read from a checkpoint, or one whose weights file is gone, is keyed by
    its identity and kept in memory only."""
    ckpt = getattr(predictor, "checkpoint", None)
    try:
        weights = run_cache.weights_sha256(ckpt) if ckpt is not None else None
    except OSError:
        weights = None
    if weights is None:
        ckpt, weights = None, f"unsaved:{id(predictor)}"
    return ckpt, key(weights, explain.token_ids(predictor, pred), methods)


def path(ckpt, key_: str) -> Path:
    """The entry's file: where it is kept (beside the checkpoint first), else beside the
    checkpoint (looking creates no folder)."""
    name = f"{key_}.json"
    return PLACE.find(ckpt, name, Path.is_file) or Path(ckpt) / FOLDER / name


def to_json(results: list[explain.TokenScores]) -> dict:
    rows = []
    for r in results:
        row = {k: v for k, v in vars(r).items() if k not in ("scores", "token_scores")}
        row["scores"] = np.asarray(r.scores, dtype=np.float32).tolist()
        row["token_scores"] = np.asarray(r.token_scores, dtype=np.float32).tolist()
        rows.append(row)
    return {"version": VERSION, "results": rows}


def from_json(blob: dict, pred=None) -> list[explain.TokenScores]:
    """The results; ValueError for another version, or (given ``pred``) scores that are not
    one finite number per word and per wordpiece of it."""
    if not isinstance(blob, dict) or blob.get("version") != VERSION \
            or not isinstance(blob.get("results"), list):
        raise ValueError("not an explanation of this version")
    out = []
    for row in blob["results"]:
        if not isinstance(row, dict):
            raise ValueError("a result that is not an object")
        row = dict(row)
        row["scores"] = np.asarray(row["scores"], dtype=np.float32)
        row["token_scores"] = np.asarray(row["token_scores"], dtype=np.float32)
        r = explain.TokenScores(**row)
        if not (isinstance(r.method, str) and isinstance(r.label, str) and isinstance(r.detail, str)
                and isinstance(r.signed, bool) and type(r.target) is int
                and all(v is None or (type(v) in (int, float) and np.isfinite(v))
                        for v in (r.delta, r.output_diff, r.n_steps, r.seconds))):
            raise ValueError("a result whose fields are not of their types")
        if pred is not None and (r.scores.shape != (len(pred.words),)
                                 or r.token_scores.shape != (pred.n_tokens,)
                                 or not np.isfinite(r.scores).all()):
            raise ValueError("scores that do not fit this review")
        out.append(r)
    return out


def load(ckpt, key_: str, pred=None) -> list[explain.TokenScores] | None:
    """The stored results (memory first, then the file), or None: missing, torn, not ours
    (see :func:`from_json`)."""
    with _GUARD:
        if key_ in _MEMORY:
            _MEMORY.move_to_end(key_)
            return _MEMORY[key_]
    if ckpt is None:
        return None
    try:
        got = from_json(json.loads(path(ckpt, key_).read_text(encoding="utf-8")), pred)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _remember(key_, got)
    return got


def store(ckpt, key_: str, results: list[explain.TokenScores]) -> str | None:
    """Keep the results (atomically); the reason, if the file could not be written."""
    _remember(key_, results)
    if ckpt is None:
        return None
    where = Path(ckpt) / FOLDER
    try:
        where = PLACE.writable(ckpt)
        atomic_write_json(where / f"{key_}.json", to_json(results))
    except OSError as e:
        return f"the explanation was not cached in {where}: {e.strerror or e}"
    return None


def _remember(key_: str, results: list) -> None:
    with _GUARD:
        _MEMORY[key_] = results
        _MEMORY.move_to_end(key_)
        while len(_MEMORY) > MEMORY_ENTRIES:
            _MEMORY.popitem(last=False)


def shared_groups() -> list[list]:
    """The methods the pages compute and cache together, with their default settings."""
    return [explain.gradient_methods(), explain.perturbation_methods()]


def stored(predictor, pred, method) -> explain.TokenScores | None:
    """``method``'s scores of ``pred`` if stored: alone, or within a stored group."""
    want = method_fields(method)
    for group in shared_groups():
        if any(method_fields(m) == want for m in group):
            got = load(*place(predictor, pred, group), pred)
            hit = next((r for r in got or [] if r.method == method.name), None)
            if hit is not None:
                return hit
    got = load(*place(predictor, pred, [method]), pred)
    return None if got is None else got[0]


def scores(predictor, pred, method, progress=None, on_wait=None) -> Outcome:
    """One method's scores of one review, through the cache (see the module docstring);
    ``results`` holds the one TokenScores. A method that reads only attentions (no model
    pass: ``cost`` 0) is computed, never stored."""
    if method.cost(pred) == 0:
        return Outcome([method.run(predictor, pred, progress)], False)
    got = stored(predictor, pred, method)
    if got is not None:
        return Outcome([got], True)
    ckpt, key_ = place(predictor, pred, [method])
    return cached_or_computed(ckpt, key_, lambda: [method.run(predictor, pred, progress)],
                              on_wait=on_wait, pred=pred)


@dataclass
class Outcome:
    results: list            # list[explain.TokenScores]
    from_cache: bool
    cache_error: str | None = None      # why the results could not be stored (still shown)


def cached_or_computed(ckpt, key_: str, compute: Callable[[], list],
                       on_wait: Callable[[], None] | None = None, poll: float = 0.25,
                       pred=None) -> Outcome:
    """The stored results, or ``compute()``'s, stored. It runs in this thread, in at most
    one thread per key at a time; the others wait (``on_wait()`` every ``poll`` s) and
    then read what it stored. ``pred``: check what is read against it (:func:`from_json`)."""
    got = load(ckpt, key_, pred)
    if got is not None:
        return Outcome(got, True)
    with _GUARD:
        entry = _LOCKS.setdefault(key_, [threading.Lock(), 0])
        entry[1] += 1
    lock = entry[0]
    try:
        while not lock.acquire(timeout=poll):
            if on_wait is not None:
                on_wait()
        try:
            got = load(ckpt, key_, pred)
            if got is not None:
                return Outcome(got, True)
            results = compute()
            return Outcome(results, False, store(ckpt, key_, results))
        finally:
            lock.release()
    finally:
        with _GUARD:
            entry[1] -= 1
            if entry[1] == 0 and _LOCKS.get(key_) is entry:
                del _LOCKS[key_]
