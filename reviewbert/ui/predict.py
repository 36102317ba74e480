"""The Predict page's input panel (paste or sample a review) and its prediction in session
state (the model itself: ``runtime.loading`` and ``checkpoints.require_predictor``).

A session keeps only which checkpoint and text it predicted (``state.RESULT``); the
Prediction itself is shared by every session (:func:`shared_prediction`), so moving a
layer or head slider redraws from it without another forward pass.

The panel draws while the checkpoint is still loading (``runtime.loading``): only
*Sample a review* and *Predict* wait for the model, under a spinner. So this module
imports nothing that imports torch.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from reviewbert.data.examples import BUILTIN_SOURCE, Review, builtin_examples, filter_stars, sample
from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import CheckpointInfo
from reviewbert.ui import checkpoints, runtime, state

if TYPE_CHECKING:
    from reviewbert.model.inference import Prediction, Predictor

MISCLASSIFIED_TRIES = 25
PREDICT = runtime.Request("predict")
"""Predict the text box's review: asked by *Predict* (or Ctrl+Enter), *Sample a review* and
another page's "open on the Predict page"; done once the prediction is stored, so a run
stopped halfway (by a click made meanwhile) leaves it for the run that click starts."""


def _cached_mistakes(reviews, predictor: Predictor, path: str | None):
    """The reviews the error-analysis cache says this checkpoint gets wrong, or None when
    these reviews were never evaluated as a whole (then the sampler predicts as it draws)."""
    if path is None:
        return None
    from reviewbert.analysis import lookup
    try:
        preds = lookup(path, reviews, predictor.scheme, predictor.max_length)
    except OSError:
        return None
    if preds is None:
        return None
    return [reviews[i] for i in np.flatnonzero(~preds.correct)]


def _sample_source(info: CheckpointInfo):
    """(reviews, the panel's line about them): the test split; the built-in examples when
    it cannot be had."""
    reviews, why = runtime.load_test_reviews(str(info.path), runtime.mtime(info.path))
    if reviews is None:
        reviews = builtin_examples()
        return reviews, (f"**{BUILTIN_SOURCE}** ({len(reviews)} reviews written for ReviewBERT): "
                         f"this checkpoint's own test split is not available — {why}.")
    return reviews, f"the checkpoint's own **test split** ({len(reviews):,} reviews)"


def _sample_clicked(info: CheckpointInfo) -> None:
    """*Sample a review*: waits for the model and the split if they are still loading."""
    try:
        predictor = runtime.load_predictor(str(info.path), runtime.mtime(info.path))
    except CheckpointError:
        return                  # the page shows the checkpoint's message (stop_if_failed)
    reviews, _ = _sample_source(info)
    _do_sample(reviews, predictor, str(info.path))


def _do_sample(reviews, predictor: Predictor, path: str | None = None):
    # Read the filters from session state: they may have changed in this same rerun.
    stars = st.session_state.get(state.SAMPLE_STARS)
    only_wrong = st.session_state.get(state.SAMPLE_WRONG, False)
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
                st.session_state[state.SAMPLE_NOTE] = (
                    f"the model gets every {'' if stars is None else f'{stars}-star '}review of "
                    "this split right (from the error-analysis page's saved predictions)")
                return
    rng = random.Random()
    review, note = sample(pool, rng, stars, wrong, MISCLASSIFIED_TRIES)
    st.session_state[state.SAMPLE_NOTE] = note
    if review is None:
        return
    st.session_state[state.REVIEW_TEXT] = review.text
    st.session_state[state.TRUTH] = {"text": review.text, "stars": review.stars, "source": review.source}
    PREDICT.ask()


def _predict_clicked() -> None:
    """*Predict* (or Ctrl+Enter in the box), recorded by its callback rather than read from
    the button in the page's body. A click made elsewhere while the run that carries the
    click is still drawing the elements above the form (a view's tab, right after
    *Predict*) makes Streamlit stop that run there and start one without the click: read
    from the button, the click was lost and the page drew the previous review, as often
    as not on a server slowed by a class's load
    (``tests/browser/test_browser.py::test_a_tab_clicked_while_predict_runs_draws_the_new_review``).
    A callback runs before the page's body, and the request outlives a stopped run."""
    PREDICT.ask()


def input_panel(info: CheckpointInfo, ckpt_key: str) -> Prediction | None:
    """Sample or paste, then Predict; drawn at once, even while the model loads. Returns
    the prediction this run made (None if it made none), for :func:`current`."""
    if runtime.loading(info).split_ready():
        source = _sample_source(info)[1]
    else:
        source = "the checkpoint's own **test split** (being rebuilt while the model loads)"

    with st.container(border=True):
        st.markdown("**Sample a review** — " + source)
        c1, c2, c3 = st.columns([1.2, 1.2, 1])
        c1.selectbox("True rating", [None, 1, 2, 3, 4, 5], key=state.SAMPLE_STARS,
                     persist_state=state.KEEP,
                     format_func=lambda s: "any" if s is None else "★" * s)
        c2.checkbox("Only misclassified", key=state.SAMPLE_WRONG, persist_state=state.KEEP,
                    help=f"Draws one of the model's mistakes from the Error analysis page's "
                         f"cache when the split was evaluated there; otherwise draws until "
                         f"the model gets one wrong (at most {MISCLASSIFIED_TRIES} tries)")
        c3.button("Sample a review", key="sample_btn", on_click=_sample_clicked,
                  args=(info,), use_container_width=True)
        note = st.session_state.pop(state.SAMPLE_NOTE, "")
        if note:
            st.info(note)

    if state.apply_pending_review():
        PREDICT.ask()
    # A form: typing a review and leaving the box sends nothing; Predict (or Ctrl+Enter)
    # sends the text and the click in one run. Outside one, leaving the box reran the page
    # and sent the previous prediction's views again before Predict was even clicked, a
    # third of a Predict run's server CPU more per typed review (bench/first_second.py,
    # server_cpu_ms_typed_256). (A fragment around the box alone lost the click that
    # followed the typing: Streamlit's page dropped it while it reran the fragment.)
    with st.form("review_form", border=False):
        st.text_area("Review text", key=state.REVIEW_TEXT, height=160, persist_state=state.KEEP,
                     placeholder="Paste an Amazon review, e.g. “Battery died after a week, "
                                 "support never answered.”")
        st.form_submit_button("Predict", type="primary", key="predict_btn",
                              on_click=_predict_clicked)
    if PREDICT.asked():
        text = st.session_state.get(state.REVIEW_TEXT) or ""
        if not text.strip():
            PREDICT.done()
            st.session_state.pop(state.RESULT, None)
            st.info("Type or paste a review first (the text box is empty or holds only "
                    "spaces), or press **Sample a review**.")
            return
        try:
            pred = predict_text(checkpoints.require_predictor()[1], text, ckpt_key)
        except Exception:
            PREDICT.done()          # said once, not on every run
            raise
        # Only now: a run stopped before this line (by a click made meanwhile) leaves the
        # request for the run that click starts.
        PREDICT.done()
        return pred
    return None


def prefetch(info: CheckpointInfo) -> None:
    """While nothing is predicted yet and the model is ready, what the first click on
    Predict would wait for: the code of Streamlit's Plotly charts and sliders
    (``runtime.prefetch_code``; the sidebar drew them while the model loaded, if it
    did load in this session) and the bertviz component declared (Streamlit finds the
    declaring module with ``inspect.getmodule`` over every loaded module, and only a script
    run can)."""
    if not runtime.loading(info).ready:
        return
    from reviewbert.ui.prediction_card import component
    runtime.prefetch_code("prefetch")
    component()


SHARED_PREDICTIONS = 7
"""Seven, plus the one spare attention buffer the predictor keeps for the next prediction
(reviewbert/model/buffers.py): the memory of the eight kept before that pool, which keeps
the server of a class of 20 under its 1 GB target (``bench/load.py``)."""


@st.cache_resource(max_entries=SHARED_PREDICTIONS, show_spinner=False)
def shared_prediction(ckpt_key: str, text: str, _predictor: Predictor) -> Prediction:
    """The prediction of ``text`` by the checkpoint ``ckpt_key``, shared by every session.

    A session keeps only (checkpoint, text) in its state, so a class of 20 holds at most
    SHARED_PREDICTIONS attention arrays (19 MB each at 256 tokens) rather than one per
    session; an evicted one is predicted again (one forward pass).
    Shared, so read-only: its arrays are made unwritable.
    """
    pred = _predictor.predict(text)
    for a in (pred.attentions, pred.values, pred.probs, pred.cls_vector):
        if a is not None:
            a.setflags(write=False)
    return pred


def _predict(predictor: Predictor, text: str, ckpt_key: str) -> Prediction:
    with st.spinner("Predicting…"), runtime.review_threads(predictor):
        return shared_prediction(ckpt_key, text, predictor)


def predict_text(predictor: Predictor, text: str, ckpt_key: str) -> Prediction:
    """Predict ``text`` as the session's result. A run stopped by a click made during the
    forward pass leaves :data:`PREDICT` asked (:func:`input_panel` marks it done only
    after this returns), so the run that click starts predicts again, from the shared
    cache, rather than drawing the previous review."""
    pred = _predict(predictor, text, ckpt_key)
    st.session_state[state.RESULT] = {"key": ckpt_key, "input": text}
    return pred


def current(ckpt_key: str, fresh: Prediction | None = None):
    """(prediction, true stars or None, source or None); the same text through the newly
    picked checkpoint if another was picked since. ``fresh``: the prediction this run just
    made (:func:`input_panel`'s), used as it is rather than looked up again (a second
    spinner and cache lookup, seen in a profile of the server)."""
    res = st.session_state.get(state.RESULT)
    if not res:
        return None
    if res["key"] != ckpt_key:  # another checkpoint was picked: same text, new model
        res = st.session_state[state.RESULT] = {"key": ckpt_key, "input": res["input"]}
    # ``fresh`` is, by construction, the prediction of this very result (run() stored it)
    pred = fresh if fresh is not None else _predict(checkpoints.require_predictor()[1],
                                                    res["input"], ckpt_key)
    truth = st.session_state.get(state.TRUTH) or {}
    if truth.get("text") == res["input"]:
        return pred, truth.get("stars"), truth.get("source")
    return pred, None, None
