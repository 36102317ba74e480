"""The prediction cache: a whole split's predictions (and [CLS] attention), saved once
next to the checkpoint and found again by what it was computed from.

Layout (one folder per checkpoint, one sub-folder per evaluation)::

    <checkpoint>/.analysis/         beside the weights; when the checkpoint folder is not
                                    writable: ~/.cache/reviewbert/analysis/<P>/ instead
                                    (P = first 16 hex of sha256 of the checkpoint's absolute
                                    path; $REVIEWBERT_ANALYSIS_CACHE replaces
                                    ~/.cache/reviewbert/analysis, $REVIEWBERT_CACHE
                                    ~/.cache/reviewbert: the policy of store/location.py)
      <KEY>/                        KEY = first 20 hex of sha256 over the JSON of
                                    {"format", "checkpoint", "data", "max_length", "precision"}
                                    (the fields of meta.json below)
        meta.json                   written LAST: a folder without it is unfinished and
                                    never read. {"format": "reviewbert-predictions/1",
                                    "key", "checkpoint": {"path", "sha256"},
                                    "data": {"sha256", "n", "source": free-form description
                                    (kind "test split"|"file"|"reviews", file names...)},
                                    "labels": [class names], "max_length",
                                    "precision" ("bf16"|"fp32": what the forward ran in),
                                    "fp32_check": null, or for bf16 {"n", "agree"}: a seeded
                                    sample of n reviews re-scored in fp32, of which ``agree``
                                    got the same class, "device", "seconds" (wall time of the
                                    forward passes), "created" (ISO time)}
        predictions.parquet         one row per review, in the data's order:
                                    text (str), stars (int8, 1..5), label (int8, true class),
                                    pred (int8, argmax class), prob_0 .. prob_{k-1} (float32,
                                    class probabilities), n_tokens (int32: wordpieces without
                                    [CLS]/[SEP] before truncation, what the seed's >=100-token
                                    filter and ``min_tokens`` count), source (str, file name)
        attention.parquet           only after the per-rating attention pass; one row per
                                    word of each review (as the model saw it: truncated):
                                    review (int32, row in predictions.parquet), word (str,
                                    lower-cased), layer_1 .. layer_L (float32: mean-of-heads
                                    [CLS]->word attention in that layer; a word sums its
                                    pieces; [CLS]/[SEP] dropped and each review's row
                                    renormalised to sum 1, as attention.word_scores does)
        attention.json              written after attention.parquet: {"format":
                                    "reviewbert-word-attention/1", "layers", "heads",
                                    "precision", "seconds", "created"}
        embeddings-<V>.npy          one sentence vector per review (``analysis/embeddings.py``),
                                    float16 [n, hidden], rows in predictions.parquet's order.
                                    V = "<pooling>-L<layer>": pooling "cls" (the [CLS] hidden
                                    state) or "mean" (mean over the review's tokens, [CLS] and
                                    [SEP] included, padding excluded), layer the hidden-state
                                    index (0 = embedding output, L = last layer). The default,
                                    written by the evaluation pass itself, is cls-L<last>.
        embeddings-<V>.json         written after the .npy: {"format":
                                    "reviewbert-embeddings/1", "pooling", "layer", "shape",
                                    "dtype": "float16", "precision", "seconds" (null when it
                                    came free with the evaluation), "created"}. A folder made
                                    before embeddings existed has neither file: it still reads,
                                    and the vectors are computed (one pass) only when asked for.
        projection-<V>-<M>.npy      float32 [n, d]: a projection of embeddings-<V>
                                    (``analysis/projection.py``); M = "<method>-<d>d-<P>", method
                                    "pca" or "umap", P the first 8 hex of sha256 of its
                                    parameters' JSON. Its .json (written after): {"format":
                                    "reviewbert-projection/1", "method", "dims", "params",
                                    "seconds", "explained" (PCA: variance ratio per axis),
                                    "created"}
        drivers.parquet             per-word attributions of the reviews done so far
                                    (``analysis/drivers.py``): review (int32, row in
                                    predictions.parquet), word (str, lower-cased), target
                                    (int8, the class explained: the fp32 prediction),
                                    integrated_gradients, value_norm, raw_attention (float32,
                                    that word's summed score in that review). Rewritten
                                    atomically as chunks finish, so an interrupted run resumes.
        drivers.json                written after drivers.parquet: {"format":
                                    "reviewbert-drivers/1", "settings" {"ig_steps",
                                    "ig_max_steps", "layer"}, "reviews" (rows done, sorted),
                                    "seconds" (compute time of those), "ig_deltas_over"
                                    (reviews whose IG delta stayed above 5 %), "created"};
                                    other settings than the ones asked for: started over
        slices.json                 saved, named slices of these reviews (``analysis/slices.py``):
                                    {"format": "reviewbert-slices/1", "slices": {name: spec}}
        properties.parquet          one row of review properties per review, in
                                    predictions.parquet's order (``cohorts/properties.py``,
                                    whose PROPERTIES defines every column); properties.json,
                                    written after it, holds the format, code version and the
                                    lexicon's fingerprint it was computed with
        hygiene.json                duplicates, conflicts and leakage of these reviews
                                    (``cohorts/hygiene.py``), its pairs in hygiene_pairs.parquet

Why it is never stale. ``checkpoint.sha256`` hashes the weights, config.json and the
tokenizer files' bytes; ``data.sha256`` hashes the reviews themselves (stars and text,
in order), so a re-saved checkpoint, an edited data file or a different split gets a
different KEY, and a folder is reused only for the very same inputs. Both hashes are
remembered per (path, size, mtime) in this process, so looking up costs a stat.

Every file is written atomically (temporary file + rename; JSON through
``model.atomic_write_json``), the JSON last, so a reader never sees half a write. Old
folders are never wrong, only unused: :func:`prune` keeps the newest few.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from reviewbert.fsio import atomic_write, atomic_write_json
from reviewbert.store import location

FORMAT = "reviewbert-predictions/1"
ATTENTION_FORMAT = "reviewbert-word-attention/1"
FOLDER = location.ANALYSIS.folder   # ".analysis"
META, PREDICTIONS = "meta.json", "predictions.parquet"
ATTENTION, ATTENTION_META = "attention.parquet", "attention.json"
KEEP = 12                     # evaluations kept per checkpoint by prune()
_CHECKPOINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                     "special_tokens_map.json")

_SHA: dict[tuple, str] = {}


# ------------------------------------------------------------------ fingerprints
def checkpoint_fingerprint(path) -> str:
    """sha256 over the checkpoint's weights, config and tokenizer files (name + bytes)."""
    path = Path(path)
    files = sorted(path.glob("*.safetensors")) + [path / n for n in _CHECKPOINT_FILES]
    files = [f for f in files if f.is_file()]
    stamp = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if stamp not in _SHA:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0")
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
            h.update(b"\0")
        _SHA[stamp] = h.hexdigest()
    return _SHA[stamp]


def data_fingerprint(reviews) -> str:
    """sha256 over each review's stars and text, in order (anything with .stars, .text)."""
    h = hashlib.sha256()
    for r in reviews:
        t = r.text.encode("utf-8", "surrogatepass")
        # the length prefix makes the encoding unambiguous whatever the text holds
        h.update(f"{int(r.stars)}:{len(t)}:".encode())
        h.update(t)
    return h.hexdigest()


def key_of(fields: dict) -> str:
    """A cache key: 20 hex digits of sha256 over ``fields`` as sorted JSON. Every cache kept
    beside a checkpoint (predictions, heads, layers, patching, query-key map) keys this way."""
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def read_json(path: Path, fmt: str) -> dict | None:
    """The JSON object at ``path`` when its "format" is ``fmt``; None when it is missing,
    torn, or of another format (an older cache is then recomputed, never misread)."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("format") == fmt else None


def cache_key(checkpoint_sha: str, data_sha: str, max_length: int, precision: str) -> str:
    return key_of({"format": FORMAT, "checkpoint": checkpoint_sha, "data": data_sha,
                   "max_length": int(max_length), "precision": precision})


# ------------------------------------------------------------------ where
# The folders follow the one policy of every cache kept beside a checkpoint
# (store/location.py), so that a read-only checkpoint is handled alike everywhere.
PLACE = location.ANALYSIS


def roots(checkpoint, sub: str = "") -> list[Path]:
    """Where this checkpoint's evaluations (or one analysis' ``sub`` folder of them) may
    be: beside it, then the fallback."""
    return [r / sub if sub else r for r in PLACE.roots(checkpoint)]


def stamp(checkpoint) -> tuple:
    """Changes whenever an evaluation, or a file beside one (its sentence vectors), is
    written or removed: the modification times of the cache folders. Two directory
    listings, so a page can ask on every run instead of re-reading the cache."""
    out: list = []
    for root in roots(checkpoint):
        try:
            out.append(root.stat().st_mtime_ns)
            out += [(d.name, d.stat().st_mtime_ns) for d in sorted(root.iterdir()) if d.is_dir()]
        except OSError:
            out.append(None)
    return tuple(out)


def writable_root(checkpoint) -> Path:
    """The first of :func:`roots` that can be written (created if needed)."""
    try:
        return PLACE.writable(checkpoint)
    except OSError:
        raise OSError(f"no writable place for the prediction cache of {checkpoint}") from None


def _finished(folder: Path) -> bool:
    return (folder / META).is_file() and (folder / PREDICTIONS).is_file()


def find(checkpoint, key: str) -> Path | None:
    """The finished folder (meta.json present) for ``key``, or None."""
    return PLACE.find(checkpoint, key, _finished)


# ------------------------------------------------------------------ read/write
def read_cache_meta(folder) -> dict | None:
    """The meta.json of one cached evaluation, or None if it is missing, torn or of
    another format (then the evaluation is redone)."""
    try:
        meta = json.loads((Path(folder) / META).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_predictions(checkpoint, key: str, frame: pd.DataFrame, meta: dict) -> Path:
    """predictions.parquet, then meta.json; returns the folder."""
    folder = writable_root(checkpoint) / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META).unlink(missing_ok=True)     # unfinished until the new meta lands
    write_parquet(frame, folder / PREDICTIONS)
    atomic_write_json(folder / META, {**meta, "format": FORMAT, "key": key})
    prune(checkpoint)
    return folder


def read_predictions(folder) -> tuple[pd.DataFrame, dict] | None:
    meta = read_cache_meta(folder)
    if meta is None:
        return None
    try:
        frame = pd.read_parquet(Path(folder) / PREDICTIONS)
    except (OSError, ValueError):
        return None
    if len(frame) != meta.get("data", {}).get("n"):
        return None
    return frame, meta


def write_attention(folder, frame: pd.DataFrame, meta: dict) -> None:
    folder = Path(folder)
    (folder / ATTENTION_META).unlink(missing_ok=True)
    write_parquet(frame, folder / ATTENTION)
    atomic_write_json(folder / ATTENTION_META, {**meta, "format": ATTENTION_FORMAT})


def read_attention(folder) -> tuple[pd.DataFrame, dict] | None:
    folder = Path(folder)
    try:
        meta = json.loads((folder / ATTENTION_META).read_text(encoding="utf-8"))
        if meta.get("format") != ATTENTION_FORMAT:
            return None
        return pd.read_parquet(folder / ATTENTION), meta
    except (OSError, ValueError):
        return None


def write_array(path: Path, array) -> None:
    """One .npy file, atomically (no pickle: plain dtypes only)."""
    array = np.ascontiguousarray(array)

    def save(tmp):
        with open(tmp, "wb") as f:
            np.save(f, array, allow_pickle=False)
    atomic_write(Path(path), save)


def read_array(path: Path, json_path: Path, fmt: str) -> tuple | None:
    """(array, meta) of a .npy written with its JSON sidecar, or None if either is missing,
    torn or of another format (then it is computed again)."""
    import numpy as np
    try:
        meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != fmt:
            return None
        return np.load(path, allow_pickle=False), meta
    except (OSError, ValueError):
        return None


def prune(checkpoint, keep: int = KEEP) -> None:
    """Drop all but the ``keep`` newest evaluations of this checkpoint (by meta.json mtime)."""
    for root in roots(checkpoint):
        if not root.is_dir():
            continue
        done = [d for d in root.iterdir() if (d / META).is_file()]
        done.sort(key=lambda d: (d / META).stat().st_mtime, reverse=True)
        for d in done[keep:]:
            shutil.rmtree(d, ignore_errors=True)
