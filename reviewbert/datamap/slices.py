"""The data map's hard-to-learn and ambiguous regions as Error analysis slices.

Error analysis keeps slices beside a split's cached predictions
(``reviewbert/analysis/slices.py``). The data map is over the training split, so the
slices go beside the predictions of the run's best checkpoint on that split
(:func:`train_predictions`: from the cache, else one batched pass, cached); a slice's
``rows`` are rows of those predictions. Rows are matched by text: each prediction's text
hash must equal the data map's, row for row, or nothing is saved (the data files changed
since training, so the rows would point at other reviews).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from reviewbert.analysis.slices import SliceSpec, save_slice
from reviewbert.datamap import stats
from reviewbert.datamap.record import DataMap, DataMapError, run_folder
from reviewbert.training.datamap import text_hashes

SLICE_NAMES = {stats.HARD: "data map: hard to learn", stats.AMBIGUOUS: "data map: ambiguous"}


def checkpoint_of(path) -> Path:
    """The run's checkpoint the slices are evaluated with: best/, else last/."""
    run = run_folder(path)
    for name in ("best", "last"):
        if (run / name / "config.json").is_file():
            return run / name
    raise DataMapError(f"{run.name} has no checkpoint (best/ or last/) to evaluate with")


def training_reviews(path, tokenizer=None) -> tuple[list, dict]:
    """(the run's training reviews, rebuilt from its reviewbert.json, and their description)."""
    from reviewbert.analysis.sources import named_split
    from reviewbert.data import DataError
    from reviewbert.model.checkpoint import read_meta

    meta = read_meta(run_folder(path), strict=False)
    try:
        reviews, desc, _ = named_split(meta, "train", tokenizer)
    except DataError as e:
        raise DataMapError(f"the training split cannot be rebuilt: {e}") from None
    return reviews, desc


def check_aligned(dm: DataMap, texts) -> None:
    """DataMapError unless ``texts`` are the data map's reviews, in its order."""
    if len(texts) != dm.n:
        raise DataMapError(f"the training split now has {len(texts):,} reviews, the data map "
                           f"{dm.n:,}: the data files changed since training")
    bad = int((text_hashes(list(texts)) != dm.text_hash).sum())
    if bad:
        raise DataMapError(f"{bad:,} of {dm.n:,} training reviews differ from the ones the data "
                           "map recorded: the data files changed since training")


def hover_texts(dm: DataMap, path) -> tuple[list[str] | None, str]:
    """(the training texts row for row, "") or (None, why not): for the figure's hover."""
    try:
        reviews, _ = training_reviews(path, _tokenizer_if_needed(path))
        texts = [r.text for r in reviews]
        check_aligned(dm, texts)
    except (DataMapError, OSError) as e:
        return None, str(e)
    return texts, ""


def _tokenizer_if_needed(path):
    """The run's tokenizer when its split needs one (``min_tokens`` > 0), else None."""
    from reviewbert.model.checkpoint import load_tokenizer, read_meta
    meta = read_meta(run_folder(path), strict=False)
    if not ((meta.get("data") or {}).get("min_tokens") or 0):
        return None
    return load_tokenizer(str(checkpoint_of(path)))


def train_predictions(path, progress=None, precision: str = "auto"):
    """The best checkpoint's predictions on the run's training split (analysis.predict_split:
    cached beside the checkpoint, so Error analysis finds them)."""
    from reviewbert.analysis.predictions import predict_split
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.inference import model_max_length

    ckpt = checkpoint_of(path)
    model, tok, info = load_checkpoint(ckpt)
    reviews, desc = training_reviews(path, tok)
    return predict_split(model, tok, ckpt, reviews, info.scheme,
                         max_length=model_max_length(model, tok, info.meta), precision=precision,
                         progress=progress, source=desc)


def training_review_count(path) -> int:
    """How many reviews :func:`train_predictions` scores (the progress bar's total)."""
    return len(training_reviews(path, _tokenizer_if_needed(path))[0])


def save_region_slices(dm: DataMap, frame, preds) -> dict[str, int]:
    """Save the hard-to-learn and ambiguous regions of ``frame`` (stats.cartography of
    ``dm``) as slices beside ``preds``; returns {slice name: reviews}. An empty region is
    not saved (a slice must select something)."""
    if preds.folder is None:
        raise DataMapError("these predictions are not cached (no writable folder beside the "
                           "checkpoint), so there is nowhere to keep slices")
    check_aligned(dm, preds.frame["text"].tolist())
    saved = {}
    for region, name in SLICE_NAMES.items():
        rows = np.flatnonzero(frame["region"].to_numpy() == region)
        if len(rows):
            saved[save_slice(preds.folder, name, SliceSpec(rows=tuple(int(r) for r in rows)))] \
                = len(rows)
    return saved
