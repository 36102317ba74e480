"""Every ``st.session_state`` key the app uses, defined once.

Pages talk to each other through these keys, never through bare strings:
another page sends a review to the Predict page with :func:`send_review`, or
selects a checkpoint with :func:`select_checkpoint`, then calls
``st.switch_page(PREDICT_PAGE)``.

Why "pending" keys: a widget's value cannot be assigned after the widget was
drawn in the same script run, and the sidebar's checkpoint picker is drawn by
the frame (``app.py``) before any page runs. So a page stores the request under
a pending key; the frame (or the Predict page's input panel) applies it on the
next run, before the widget is drawn.
"""
from __future__ import annotations

import streamlit as st

# --- pages (paths relative to app.py; st.switch_page takes them) -------------------
PREDICT_PAGE = "pages/predict.py"
TRAIN_PAGE = "pages/train.py"
INSIDE_PAGE = "pages/inside_bert.py"

# --- the frame's sidebar -----------------------------------------------------------
CHECKPOINT = "checkpoint"                  # selectbox: str path of the chosen checkpoint
CHECKPOINT_INFO = "checkpoint_info"        # CheckpointInfo of it (None: there is none)
SHOW_TRIALS = "show_trials"                # checkbox: list every search trial too
PENDING_CHECKPOINT = "pending_checkpoint"  # str path, applied by the frame before drawing

# --- the Predict page ----------------------------------------------------------------
REVIEW_TEXT = "review_text"                # text_area
TRUTH = "truth"                            # {"text", "stars", "source"} of a sampled review
RUN_PREDICT = "run_predict"                # bool: predict on this run (sampled / sent)
RESULT = "result"                          # {"key", "input", "pred": Prediction}
SAMPLE_STARS = "sample_stars"              # selectbox: true rating filter
SAMPLE_WRONG = "sample_wrong"              # checkbox: only misclassified
SAMPLE_NOTE = "sample_note"                # str: why no review could be sampled
PENDING_REVIEW = "pending_review"          # {"text", "stars", "source"} sent by another page

# Widget keys whose values should survive a visit to another page. Streamlit drops a
# widget's state when a run does not draw it; re-assigning it each run keeps it.
KEEP_ACROSS_PAGES = (REVIEW_TEXT, SAMPLE_STARS, SAMPLE_WRONG, SHOW_TRIALS)


def keep_widget_state() -> None:
    """Called by the frame on every run, before any page: keeps the keys above alive."""
    for key in KEEP_ACROSS_PAGES:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def current_checkpoint():
    """The CheckpointInfo the sidebar has selected in this run, or None."""
    return st.session_state.get(CHECKPOINT_INFO)


def select_checkpoint(path) -> None:
    """Ask the frame to select checkpoint ``path`` (a str or Path) on the next run."""
    st.session_state[PENDING_CHECKPOINT] = str(path)


def apply_pending_checkpoint(options: list[str]) -> None:
    """The frame's half of :func:`select_checkpoint` (before the picker is drawn)."""
    want = st.session_state.pop(PENDING_CHECKPOINT, None)
    if want is not None and want in options:
        st.session_state[CHECKPOINT] = want


def send_review(text: str, stars: int | None = None, source: str | None = None) -> None:
    """Queue a review for the Predict page: it is filled in and predicted there."""
    st.session_state[PENDING_REVIEW] = {"text": text, "stars": stars, "source": source}


def apply_pending_review() -> None:
    """The Predict page's half of :func:`send_review` (before its text box is drawn)."""
    review = st.session_state.pop(PENDING_REVIEW, None)
    if not review:
        return
    st.session_state[REVIEW_TEXT] = review["text"]
    st.session_state[TRUTH] = dict(review)
    st.session_state[RUN_PREDICT] = True
