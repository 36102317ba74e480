"""The sidebar's checkpoint loaded once per server process (``st.cache_resource``): its
Predictor, warmed up, and its own test split for the samplers. Every page that needs a
model starts with :func:`require_predictor`."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from .. import heap
from ..checkpoint import CheckpointInfo, checkpoint_info
from ..device import pick_device
from ..errors import CheckpointError
from ..examples import Review, test_split_examples
from ..inference import Predictor
from . import checkpoints, state


def mtime(path: Path) -> float:
    """Changes when a checkpoint is re-saved in place: part of the cache key."""
    files = [path / "config.json", *path.glob("*.safetensors")]
    return max((f.stat().st_mtime for f in files if f.exists()), default=0.0)


@st.cache_resource(max_entries=3, show_spinner="Loading the checkpoint…")
def load_predictor(path: str, stamp: float) -> Predictor:
    """The shared predictor of a checkpoint. Any failure is a CheckpointError (one
    line, which every page shows instead of a traceback); none is cached, so a
    fixed checkpoint loads on the next rerun."""
    try:
        predictor = Predictor.from_checkpoint(path, pick_device())
        predictor.warm_up()
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - it loaded but cannot predict: still broken
        why = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise CheckpointError(f"{path} loaded but cannot predict: {type(e).__name__}: {why}") from e
    heap.freeze_long_lived()    # out of the collection Streamlit runs after every rerun
    return predictor


@st.cache_resource(max_entries=4, show_spinner="Rebuilding the checkpoint's test split…")
def load_test_reviews(path: str, stamp: float) -> tuple[tuple[Review, ...] | None, str]:
    """(reviews, "") from the checkpoint's own test split, or (None, why not).

    A resource, shared read-only by every session: a tuple of frozen Reviews. (As
    ``st.cache_data`` every rerun of every page unpickled all 2,105 of them, ~2 % of
    the Predict page's server time.)"""
    predictor = load_predictor(path, stamp)
    meta = checkpoint_info(path).meta
    if not meta.get("data"):
        return None, "its reviewbert.json names no data files"
    try:
        reviews = test_split_examples(meta, tokenizer=predictor.tokenizer)
    except ImportError as e:
        return None, f"the data module is not available ({e})"
    except Exception as e:  # noqa: BLE001 - DataError (missing files) or a malformed section
        return None, str(e).splitlines()[0][:300]
    if not reviews:
        return None, "its test split is empty"
    return tuple(reviews), ""


def require_predictor() -> tuple[CheckpointInfo, Predictor]:
    """The sidebar's checkpoint and its cached predictor, for a page that needs a model;
    with none (the training guide) or a broken one (its message) the page stops here."""
    info = state.current_checkpoint()
    if info is None:
        checkpoints.training_guide(checkpoints.checkpoints_root())
        st.stop()
    try:
        return info, load_predictor(str(info.path), mtime(info.path))
    except CheckpointError as e:
        checkpoints.load_error(e)
        st.stop()
