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
FAITH_PAGE = "pages/faithfulness.py"
ERROR_PAGE = "pages/error_analysis.py"
HEADS_PAGE = "pages/heads.py"

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
                                           # (and its model view); + "_view": tabs, head view or
                                           # model view (ERR_HV_WINDOW + "_view" likewise)
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

# --- the Error analysis page (reviewbert/ui/error_views.py) -----------------------------
ERR_SOURCE = "err_source"                  # radio: test split / data file / upload
ERR_FILE = "err_file"                      # selectbox: data file (str path)
ERR_UPLOAD = "err_upload"                  # file_uploader
ERR_UPLOADED = "err_uploaded"              # str path of the saved upload
ERR_UPLOAD_ERROR = "err_upload_error"      # str: why the last upload was not kept
ERR_RUN = "err_run"                        # input key (str) whose evaluation was asked for
ERR_RESULT = "err_result"                  # (input key, SplitPredictions) when not cacheable
ERR_TAB = "err_tab"                        # tabs: the open section
ERR_CONFUSION = "err_confusion"            # plotly_chart selection: a confusion-matrix cell
ERR_NAMES = "err_names"                    # class names of the drawn confusion matrix
ERR_TRUE = "err_true"                      # multiselect: true classes in the browser
ERR_PRED = "err_pred"                      # multiselect: predicted classes in the browser
ERR_ONLY_WRONG = "err_only_wrong"          # checkbox: only misclassified reviews
ERR_SORT = "err_sort"                      # selectbox: browser order
ERR_SEARCH = "err_search"                  # text_input: text search
ERR_TABLE = "err_table"                    # prefix: dataframe selection (one key per filter set)
ERR_HV_WINDOW = "err_hv_window"            # slider: this page's head-view window
ERR_WW_PREFIX = "err_ww"                   # prefix: this page's "Which words mattered?" widgets
ERR_ATT_RUN = "err_att_run"                # predictions key (str) whose attention pass was asked for
ERR_ATT_LAYER = "err_att_layer"            # selectbox: layer of the per-rating words
ERR_ATT_BY = "err_att_by"                  # radio: group by true or predicted rating
ERR_ATT_MIN = "err_att_min"                # number_input: minimum reviews per word
ERR_ATT_HIDE = "err_att_hide"              # checkbox: hide stop-words and punctuation
ERR_ISSUES_TABLE = "err_issues_table"      # dataframe selection: a label issue
ERR_COMPARE = "err_compare"                # selectbox: the other checkpoint
ERR_COMPARE_RUN = "err_compare_run"        # input key + other checkpoint (str) asked for
ERR_FIG = "err_fig"                        # selectbox: the figure to export
ERR_PNG = "err_png"                        # (figure key, PNG bytes)
ERR_REPORT = "err_report"                  # (input key, HTML str) of the built report

# --- the Heads page (reviewbert/ui/heads.py) -----------------------------------------------
HEADS_SOURCE = "heads_source"              # radio: test split / data file / upload
HEADS_FILE = "heads_file"                  # selectbox: data file (str path)
HEADS_UPLOAD = "heads_upload"              # file_uploader
HEADS_UPLOADED = "heads_uploaded"          # str path of the saved upload
HEADS_UPLOAD_ERROR = "heads_upload_error"  # str: why the last upload was not kept
HEADS_N = "heads_n"                        # number_input: reviews analysed (a seeded sample)
HEADS_RUN = "heads_run"                    # analysis key (str) whose computation was asked for
HEADS_RESULT = "heads_result"              # (analysis key, HeadsResult) when not cacheable
HEADS_TAB = "heads_tab"                    # tabs: the open section
HEADS_COLOUR = "heads_colour"              # selectbox: what colours the atlas
HEADS_LAYER = "heads_layer"                # selectbox: layer of the head shown on a review (0-based)
HEADS_HEAD = "heads_head"                  # selectbox: that head (0-based); a heatmap click sets both
HEADS_EXAMPLE = "heads_example"            # selectbox: the review it is shown on (row of the sample)
HEADS_CHART = "heads_chart_"               # prefix: the clickable heatmaps' selection keys

# --- "Which words mattered?" (ui/explain_views) and the Faithfulness page -------------
WW_PREFIX = "ww"                           # prefix: the Predict page's section: ww_layer,
                                           # ww_head, ww_steps (selectboxes), ww_run (button),
                                           # ww_view (segmented control: text or heatmap),
                                           # ww_cache ({"key", "value_norm", "gradient"}: this
                                           # prediction's explanations, kept across reruns)
FAITH_PREFIX = "faith"                     # prefix: the Faithfulness page: faith_n (number of
                                           # reviews), faith_steps (IG steps), faith_run (button),
                                           # faith_show (selectbox: which cached run is shown)

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
