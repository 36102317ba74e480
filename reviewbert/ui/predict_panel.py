"""Loading (cached), the input panel (paste or sample) and the prediction in session state.

The Prediction is kept in ``st.session_state`` so that moving a layer or head
slider redraws from it without another forward pass.
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import streamlit as st

from .. import heap
from ..examples import (BUILTIN_SOURCE, Review, builtin_examples, filter_stars, sample,
                        test_split_examples)
from ..inference import Predictor, cpu_threads, threads_beside_training
from ..model import CheckpointError, CheckpointInfo, pick_device
from ..runs import device_busy
from . import checkpoints as C
from . import state as S

MISCLASSIFIED_TRIES = 25


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
    from ..model import checkpoint_info
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


def _cached_mistakes(reviews, predictor: Predictor, path: str | None):
    """The reviews the error-analysis cache says this checkpoint gets wrong, or None when
    these reviews were never evaluated as a whole (then the sampler predicts as it draws)."""
    if path is None:
        return None
    from ..analysis import lookup
    try:
        preds = lookup(path, reviews, predictor.scheme, predictor.max_length)
    except OSError:
        return None
    if preds is None:
        return None
    return [reviews[i] for i in np.flatnonzero(~preds.correct)]


def _do_sample(reviews, predictor: Predictor, path: str | None = None):
    # Read the filters from session state: they may have changed in this same rerun.
    stars = st.session_state.get(S.SAMPLE_STARS)
    only_wrong = st.session_state.get(S.SAMPLE_WRONG, False)
    scheme = predictor.scheme
    wrong = None
    pool = reviews
    if only_wrong:
        def wrong(r: Review) -> bool:
            return predictor.predict(r.text).label_id != scheme.class_of(r.stars)
        mistakes = _cached_mistakes(reviews, predictor, path)
        if mistakes is not None:
            # Draw among the cached mistakes; the one exact fp32 prediction that follows
            # confirms it (a bf16 cache can differ from fp32 on a borderline review).
            pool = mistakes
            if not filter_stars(pool, stars):
                st.session_state[S.SAMPLE_NOTE] = (
                    f"the model gets every {'' if stars is None else f'{stars}-star '}review of "
                    "this split right (from the error-analysis page's saved predictions)")
                return
    rng = random.Random()
    review, note = sample(pool, rng, stars, wrong, MISCLASSIFIED_TRIES)
    st.session_state[S.SAMPLE_NOTE] = note
    if review is None:
        return
    st.session_state[S.REVIEW_TEXT] = review.text
    st.session_state[S.TRUTH] = {"text": review.text, "stars": review.stars, "source": review.source}
    st.session_state[S.RUN_PREDICT] = True


def input_panel(predictor: Predictor, info: CheckpointInfo, ckpt_key: str) -> None:
    reviews, why = load_test_reviews(str(info.path), mtime(info.path))
    if reviews is None:
        reviews = builtin_examples()
        source = (f"**{BUILTIN_SOURCE}** ({len(reviews)} reviews written for ReviewBERT): "
                  f"this checkpoint's own test split is not available — {why}.")
    else:
        source = f"the checkpoint's own **test split** ({len(reviews):,} reviews)"

    with st.container(border=True):
        st.markdown("**Sample a review** — " + source)
        c1, c2, c3 = st.columns([1.2, 1.2, 1])
        c1.selectbox("True rating", [None, 1, 2, 3, 4, 5], key=S.SAMPLE_STARS,
                             format_func=lambda s: "any" if s is None else "★" * s)
        c2.checkbox("Only misclassified", key=S.SAMPLE_WRONG,
                                 help=f"Draws one of the model's mistakes from the Error analysis page's "
                         f"cache when the split was evaluated there; otherwise draws until "
                         f"the model gets one wrong (at most {MISCLASSIFIED_TRIES} tries)")
        c3.button("Sample a review", key="sample_btn", on_click=_do_sample,
                  args=(reviews, predictor, str(info.path)), use_container_width=True)
        note = st.session_state.pop(S.SAMPLE_NOTE, "")
        if note:
            st.info(note)

    S.apply_pending_review()
    st.text_area("Review text", key=S.REVIEW_TEXT, height=160,
                 placeholder="Paste an Amazon review, e.g. “Battery died after a week, "
                             "support never answered.”")
    clicked = st.button("Predict", type="primary", key="predict_btn")
    if clicked or st.session_state.pop(S.RUN_PREDICT, False):
        text = st.session_state.get(S.REVIEW_TEXT) or ""
        if not text.strip():
            st.session_state.pop(S.RESULT, None)
            st.info("Type or paste a review first (the text box is empty or holds only "
                    "spaces), or press **Sample a review**.")
            return
        run(predictor, text, ckpt_key)


def require_predictor() -> tuple[CheckpointInfo, Predictor]:
    """The sidebar's checkpoint and its cached predictor, for a page that needs a model;
    with none (the training guide) or a broken one (its message) the page stops here."""
    info = S.current_checkpoint()
    if info is None:
        C.training_guide(C.checkpoints_root())
        st.stop()
    try:
        return info, load_predictor(str(info.path), mtime(info.path))
    except CheckpointError as e:
        C.load_error(e)
        st.stop()


def run(predictor: Predictor, text: str, ckpt_key: str) -> None:
    busy = predictor.device.type == "cpu" and device_busy(C.checkpoints_root())
    with st.spinner("Predicting…"), cpu_threads(threads_beside_training(busy)):
        pred = predictor.predict(text)
    st.session_state[S.RESULT] = {"key": ckpt_key, "input": text, "pred": pred}


def current(predictor: Predictor, ckpt_key: str):
    """(prediction, true stars or None, source or None), re-run if the checkpoint changed."""
    res = st.session_state.get(S.RESULT)
    if not res:
        return None
    if res["key"] != ckpt_key:  # another checkpoint was picked: same text, new model
        run(predictor, res["input"], ckpt_key)
        res = st.session_state[S.RESULT]
    truth = st.session_state.get(S.TRUTH) or {}
    if truth.get("text") == res["input"]:
        return res["pred"], truth.get("stars"), truth.get("source")
    return res["pred"], None, None
