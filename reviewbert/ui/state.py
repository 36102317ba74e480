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
PNG = "png"                                # (figure key, PNG bytes) of the rendered heatmap

# --- the Train page -------------------------------------------------------------------
CONFIG_FIELD = "cfg_"                      # prefix: one widget per TrainConfig field
TRAIN_VIEW = "train_view"                  # radio: runs / new run / search
PENDING_TRAIN_VIEW = "pending_train_view"  # view to show on the next run (after a launch)
TRAIN_FILES = "train_files"                # multiselect: data files (paths)
TRAIN_UPLOAD = "train_upload"              # file_uploader
TRAIN_UPLOADED = "train_uploaded"          # list of saved upload paths (str) this session
TRAIN_RUN_NAME = "train_run_name"          # text_input: the new run's folder name
LIVE_RUN = "live_run"                      # selectbox: run folder (str) in the live view
PENDING_LIVE_RUN = "pending_live_run"      # run folder to select on the next run
LIVE_SIGNATURE = "live_signature"          # (run, state, has best/) seen by the live view
OVERLAY_RUNS = "overlay_runs"              # runs table selection: folders whose curves overlay
CONFIRM_DELETE = "confirm_delete"          # run folder (str) awaiting "really delete?"
TRAIN_FLASH = "train_flash"                # (kind, message) shown once after an action
SEARCH_FIELD = "search_"                   # prefix: the search form's widgets

# --- the Inside BERT page (and the head-view window, which the Predict page has too) ---
HV_WINDOW = "hv_window"                    # slider: first token of the Predict page's head view
INSIDE_SENTENCE = "inside_sentence"        # text_input: the sentence taken apart
INSIDE_CLASSROOM = "inside_classroom"      # toggle: classroom mode (big type, one step at a time)
INSIDE_STEP = "inside_step"                # int: the step classroom mode shows (0-based)
INSIDE_LAYER = "inside_layer"              # selectbox: the layer of steps 3 and 4
INSIDE_HEAD = "inside_head"                # selectbox: the head of step 3
INSIDE_SUBSTEP = "inside_substep"          # selectbox: which of step 4's matrices is drawn
INSIDE_HV_WINDOW = "inside_hv_window"      # slider: first token of this page's head view
INSIDE_COMPARE = "inside_compare"          # text_area: your own sentences for step 5
INSIDE_WORD = "inside_word"                # text_input: the word they share
INSIDE_MASKED = "inside_masked"            # text_input: step 7's sentence with [MASK]
INSIDE_ROW = "inside_row"                  # selectbox: the token whose softmax step 3 spells out
INSIDE_NEXT = "inside_next"                # button: classroom mode, next step
INSIDE_BACK = "inside_back"                # button: classroom mode, previous step
INSIDE_FIG = "inside_fig_"                 # prefix: the page's chart keys
INSIDE_SAVED = "inside_saved"              # {widget key: value}: the page's widgets, kept
                                           # while another page runs (ui/teaching.keep_state)

# Widget keys whose values should survive a visit to another page. Streamlit drops a
# widget's state when a run does not draw it; re-assigning it each run keeps it.
KEEP_ACROSS_PAGES = (REVIEW_TEXT, SAMPLE_STARS, SAMPLE_WRONG, SHOW_TRIALS, TRAIN_VIEW,
                     TRAIN_FILES, LIVE_RUN)


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


def apply_pending(pending_key: str, widget_key: str) -> None:
    """Move a value queued under ``pending_key`` into a widget's key before it is drawn."""
    if pending_key in st.session_state:
        st.session_state[widget_key] = st.session_state.pop(pending_key)


def apply_pending_review() -> None:
    """The Predict page's half of :func:`send_review` (before its text box is drawn)."""
    review = st.session_state.pop(PENDING_REVIEW, None)
    if not review:
        return
    st.session_state[REVIEW_TEXT] = review["text"]
    st.session_state[TRUTH] = dict(review)
    st.session_state[RUN_PREDICT] = True
