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
BEHAVE_PAGE = "pages/behaviour.py"
FOOL_PAGE = "pages/fool.py"
COHORTS_PAGE = "pages/cohorts.py"

# --- the frame's sidebar -----------------------------------------------------------
CHECKPOINT = "checkpoint"                  # selectbox: str path of the chosen checkpoint
CHECKPOINT_INFO = "checkpoint_info"        # CheckpointInfo of it (None: there is none)
SHOW_TRIALS = "show_trials"                # checkbox: list every search trial too
PENDING_CHECKPOINT = "pending_checkpoint"  # str path, applied by the frame before drawing
CLICKS = "clicks"                          # {key: Click}: unread clicks, open requests (ui/runtime/clicks.py)
LATEST_RUN = "latest_full_run"             # int: the newest full run's number (ui/runtime/runs.py)

# --- the Predict page ----------------------------------------------------------------
REVIEW_TEXT = "review_text"                # text_area
TRUTH = "truth"                            # {"text", "stars", "source"} of a sampled review
RERUN_WHEN_LOADED = "rerun_when_loaded"    # bool: the page drew before the model loaded
RESULT = "result"                          # {"key", "input"}; the Prediction: predict.shared_prediction
SAMPLE_STARS = "sample_stars"              # selectbox: true rating filter
SAMPLE_WRONG = "sample_wrong"              # checkbox: only misclassified
SAMPLE_NOTE = "sample_note"                # str: why no review could be sampled
PENDING_REVIEW = "pending_review"          # {"text", "stars", "source"} sent by another page
PNG = "png"                                # (figure key, PNG bytes) of the rendered heatmap
WHATIF_VIEW = "What if?"                   # the Predict page's What if? tab's label
PREDICT_VIEW = "predict_view"              # tabs: the open view under the prediction card
ATTENTION_VIEW = "attention_view"          # tabs: the open attention view (prediction_card.ATTENTION_VIEWS);
                                           # + "_kept": the last one opened (prediction_card.attention_views)
SLIDER_CODE = "slider_code"                # bool: runtime.prefetch_code drew its slider

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
OVERLAY_RUNS = "overlay_runs"              # prefix (+ OVERLAY_EPOCH): the runs table's selection
CONFIRM_DELETE = "confirm_delete"          # run folder (str) awaiting "really delete?"
TRAIN_FLASH = "train_flash"                # (kind, message) shown once after an action
SEARCH_FIELD = "search_"                   # prefix: the search form's widgets
SEARCH_ROWS = "search_start_rows"          # list of rows the "What to search" editor starts from
PENDING_SEARCH_PRESET = "pending_search_preset"  # {"epochs", "max_per_class", "max_length"}:
                                           # the seed report grid to fill the form with
SEED_BUDGET = "seed_budget_"               # prefix: the preset's budget inputs
SEARCH_SHOWN = "search_shown"              # selectbox: search folder (str) on the dashboard
SEARCH_FIG = "search_fig_"                 # prefix: the dashboard's charts (click selections)
SEARCH_EXPORT = "search_export"            # selectbox: the dashboard figure to export
SEARCH_PNG = "search_png"                  # (figure key, PNG bytes) of the rendered figure
SEARCH_TABLE = "search_table_"             # prefix: a search's trials table (row selection)
RUNS_LAYOUT = "runs_layout"                # radio: runs table with all columns / as Table 1
PENDING_OVERLAY = "pending_overlay"        # run folders (str) to select in the runs table
OVERLAY_EPOCH = "overlay_epoch"            # int: bumped to redraw the runs table's selection

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
                                           # while another page runs (ui/inside_bert.keep_state)

# --- the Error analysis page (reviewbert/ui/error_analysis.py) --------------------------
ERR_SOURCE = "err_source"                  # radio: test split / train split / data file / upload
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
ERR_ATTENTION_VIEW = "err_attention_view"  # tabs: this page's open attention view (+ "_kept")
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

# --- the Error analysis page's Map, Drivers and Slices tabs (ui/split_map.py) ----------
MAP_METHOD = "map_method"                  # selectbox: PCA/UMAP, 2-D/3-D
MAP_COLOR = "map_color"                    # selectbox: what colours the points
MAP_POOLING = "map_pooling"                # radio: [CLS] or mean of the tokens
MAP_LAYER = "map_layer"                    # selectbox: hidden-state index of the vectors
MAP_RUN = "map_run"                        # (predictions key, vectors, method) asked for
MAP_CHART = "map_chart"                    # plotly_chart selection: points, box or lasso
MAP_TABLE = "map_table"                    # prefix: dataframe selection of the selected reviews
MAP_SELECTION = "map_selection"            # (predictions key, rows): the last map selection
MAP_SLICE_NAME = "map_slice_name"          # text_input: name to save the selection under
MAP_FLASH = "map_flash"                    # (kind, message) shown once after saving a slice
DRV_SAMPLE = "drv_sample"                  # selectbox: reviews to explain
DRV_RUN = "drv_run"                        # (predictions key, sample) asked for
DRV_BY = "drv_by"                          # radio: by predicted rating or confusion cell
DRV_CELL = "drv_cell"                      # selectbox: the (true, predicted) cell
DRV_MIN = "drv_min"                        # number_input: minimum reviews per word
DRV_HIDE = "drv_hide"                      # checkbox: hide stop-words and punctuation
SLC_SOURCES = "slc_sources"                # multiselect: source files
SLC_LENGTHS = "slc_lengths"                # multiselect: length buckets
SLC_ISSUE = "slc_issue"                    # radio: any / flagged / not flagged
SLC_CONTAINS = "slc_contains"              # text_input: word or phrase
SLC_USE_SELECTION = "slc_use_selection"    # checkbox: only the map's selection
SLC_TRUE = "slc_true"                      # multiselect: true ratings
SLC_PRED = "slc_pred"                      # multiselect: predicted ratings
SLC_NAME = "slc_name"                      # text_input: name to save the slice under
SLC_SAVED = "slc_saved"                    # selectbox: a saved slice to show or delete
SLC_TABLE = "slc_table"                    # prefix: dataframe selection of a slice's reviews
CMP_SLICE = "cmp_slice"                    # selectbox: the Compare tab's saved slice
PREDICT_NEIGHBOURS = "predict_neighbours"  # (checkpoint key, text, (preds, idx, sim) or None):
                                           # the Predict page's nearest reviews, kept across reruns

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
HEADS_QK_COLOUR = "heads_qk_colour"        # radio: what colours the query–key map
HEADS_QK_METHOD = "heads_qk_method"        # radio: its projection ("pca" | "umap")
HEADS_QK_VECTORS = "heads_qk_vectors"      # (cache key, QKVectors) when not cacheable
HEADS_QK_THUMBS = "heads_qk_thumbs"        # the matrix of heads' selection (a click sets layer/head)
HEADS_QK_EARLY = "heads_qk_early"          # toggle: the map before the heads are analysed

# --- the per-layer probes: Predict's Layers tab, Inside BERT's step 4 (ui/predict_layers.py) --
LAYERS_VIEW = "Layers"                     # the Predict page's Layers tab's label
LAYERS_RUN = "layers_run"                  # str checkpoint path whose probes were asked for
LAYERS_RESULT = "layers_result"            # (checkpoint sha256, LayersResult) when not cacheable
LAYERS_METRIC = "layers_metric"            # radio: the probes' metric drawn per layer
LAYERS_FIG = "layers_fig_"                 # prefix: the views' chart keys

# --- "Which words mattered?" (ui/explain_views) and the Faithfulness page -------------
WW_PREFIX = "ww"                           # prefix: the Predict page's section: ww_layer,
                                           # ww_head, ww_steps (selectboxes), ww_run and
                                           # ww_perturb (buttons: gradient / LIME + occlusion),
                                           # ww_view (segmented control: text or heatmap),
                                           # ww_contrast_a, ww_contrast_b (selectboxes: the
                                           # ratings contrasted), ww_contrast_run (button),
                                           # ww_cache ({"key", "value_norm", "gradient",
                                           # "perturbation", "contrast", "contrast_pair_set",
                                           # "contrast_asked"}: this
                                           # prediction's explanations, kept across reruns)
FAITH_PREFIX = "faith"                     # prefix: the Faithfulness page: faith_n (number of
                                           # reviews), faith_steps (IG steps), faith_run (button),
                                           # faith_show (selectbox: which cached run is shown)

# --- What if? (ui/whatif.py): the Predict page and the Errors tab's review card ---------
WHATIF_PREFIX = "wi"                       # prefix: wi_state ({"key", "open", "history",
                                           # "cmp", "cf", "load", "auto"}: this review's
                                           # editor, edits and counterfactuals), wi_editor
                                           # (text_area), wi_method, wi_pick, wi_cf_method,
                                           # wi_cf_pick (selectboxes), wi_edit, wi_compare,
                                           # wi_back, wi_clear, wi_cf_run, wi_cf_send (buttons),
                                           # wi_probs, wi_words, wi_sentences (charts),
                                           # wi_history_table, wi_sentence_table (dataframes)
ERR_WHATIF_PREFIX = "err_wi"               # the same, in the Errors tab's review card
PATCH = "_patch"                           # + after a What if? prefix (wi_patch...): "Where does
                                           # the change act?" (ui/whatif_patching.py): _pair
                                           # (radio), _clean, _corrupt (text_areas), _heads
                                           # (checkbox), _run (button), _words, _headgrid
                                           # (charts), _results ({key: PatchResult})
ERR_BRITTLE_PREFIX = "err_brittle"         # prefix: the Brittleness tab: _n, _max (numbers),
                                           # _method (selectbox), _run (button), _table,
                                           # _flips (dataframes), _hist (chart)

# --- the Behaviour page (ui/behaviour.py, ui/behaviour_editor.py) ------------------
BEHAVE_VIEW = "behave_view"                # tabs: overview / write / import-export / compare
BEHAVE_SUITE = "behave_suite"              # selectbox: the suite the overview shows
BEHAVE_PENDING_SUITE = "behave_pending_suite"  # suite name to select on the next run
BEHAVE_SLICE = "behave_slice"              # selectbox: the saved slice the real reviews come from
BEHAVE_RUN = "behave_run"                  # button: run the suite on this checkpoint
BEHAVE_EDITOR = "behave_ed_"               # prefix: the test editor's fields and buttons
BEHAVE_IMPORT = "behave_import"            # file_uploader (and prefix of its buttons)
BEHAVE_EXPORT_SUITE = "behave_export_suite"    # selectbox: the suite whose results export
BEHAVE_COMPARE_SUITE = "behave_cmp_suite"  # selectbox: the suite compared
BEHAVE_COMPARE_OTHER = "behave_cmp_other"  # selectbox: the other checkpoint (str path)
BEHAVE_COMPARE_RUN = "behave_cmp_run"      # button
BEHAVE_COMPARE_TABLE = "behave_cmp_table"  # dataframe (and prefix of its chart)
PENDING_WHATIF = "pending_whatif"          # {"original", "edit"}: What if? opens with the edit

# --- the Cohorts page (ui/cohorts.py, ui/cohorts_triage.py, ui/cohorts_fix.py) -----
COH_TAB = "coh_tab"                        # tabs: cohorts / heat map / hygiene / triage / fix
COH_AUTHOR = "coh_author"                  # text_input: who tags (kept in COH_AUTHOR + "_kept")
COH_TARGET = "coh_target"                  # radio: wrong / off by 2+ stars
COH_OPEN = "coh_open"                      # selectbox: the cohort opened (a tree node or a slice)
COH_ALL_SLICES = "coh_all_slices"          # toggle: also the slices that are not significant
COH_REVIEWS = "coh_reviews"                # dataframe selection: a review of the opened cohort
COH_SLICE_NAME = "coh_slice_name"          # text_input: the slice the cohort is saved as
COH_TAG = "coh_tag"                        # selectbox: the tag given to the whole cohort
COH_FLASH = "coh_flash"                    # (kind, message) shown once after an action
COH_LEXICON = "coh_lexicon"                # text_area: the lexicon's YAML (and its save button)
COH_HEAT = "coh_heat_"                     # prefix: the heat map's x, y and target
COH_HYGIENE_RUN = "coh_hygiene_run"        # predictions key: the leakage check asked for
COH_QUEUE = "coh_queue_"                   # prefix: the queue's order, filters and fields
COH_FIX = "coh_fix_"                       # prefix: the corrected file's options and buttons
COH_COMPARE = "coh_compare"                # selectbox: the retrained checkpoint (str path)
COH_COMPARE_RUN = "coh_compare_run"        # input key + other checkpoint (str) asked for

# --- Fool the model (ui/fool.py) ---------------------------------------------------
FOOL_ROOM = "fool_room"                    # text_input: the class's room name
FOOL_AUTHOR = "fool_author"                # text_input: the student's name (optional)
FOOL_TEXT = "fool_text"                    # text_area: the review written to fool the model
FOOL_STARS = "fool_stars"                  # select_slider: the stars the student meant
FOOL_CAPABILITY = "fool_capability"        # selectbox: what the review tests
FOOL_SEND = "fool_send"                    # form submit
FOOL_LAST = "fool_last"                    # dict: the last entry this session sent
FOOL_VIEW = "fool_view"                    # tabs: write / the class's board
FOOL_CLASSROOM = "fool_classroom"          # toggle: big type for a projector
FOOL_SAVE_SUITE = "fool_save_suite"        # text_input: the suite the class's tests go to
FOOL_SAVE = "fool_save"                    # button: the class's entries become tests

KEEP = "session"
"""``persist_state=KEEP``: the widgets whose values survive a visit to another page or to
another tab (only the open tab is built): the review box, the sampler's filters, the
Train page's view, data files and live run, the trials switch and the What if? editors.
Streamlit's own mechanism. Before it, the frame wrote each of these keys back on every
run, which made Streamlit send the value to the browser on every run: a draft typed in
the review box was replaced by the last predicted review as soon as any click reran the
page (4 of 4 tab clicks in Chromium), and a run still in flight undid a click."""


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


def send_review(text: str, stars: int | None = None, source: str | None = None,
                edit: str | None = None) -> None:
    """Queue a review for the Predict page: it is filled in and predicted there. With
    ``edit``, the page opens its What if? tab with ``edit`` in the editor, compared."""
    st.session_state[PENDING_REVIEW] = {"text": text, "stars": stars, "source": source}
    if edit is not None:
        st.session_state[PENDING_WHATIF] = {"original": text, "edit": edit}


def apply_pending(pending_key: str, widget_key: str) -> None:
    """Move a value queued under ``pending_key`` into a widget's key before it is drawn."""
    if pending_key in st.session_state:
        st.session_state[widget_key] = st.session_state.pop(pending_key)


def apply_pending_review() -> bool:
    """The Predict page's half of :func:`send_review` (before its text box is drawn): True
    when a review was sent, which the page then predicts."""
    review = st.session_state.pop(PENDING_REVIEW, None)
    if not review:
        return False
    st.session_state[REVIEW_TEXT] = review["text"]
    st.session_state[TRUTH] = dict(review)
    if st.session_state.get(PENDING_WHATIF):
        st.session_state[PREDICT_VIEW] = WHATIF_VIEW       # the tab is drawn after this
    return True


def take_pending_whatif(original: str) -> str | None:
    """The edit :func:`send_review` queued for the What if? editor of ``original``, once."""
    pending = st.session_state.get(PENDING_WHATIF)
    if pending and pending.get("original") == original:
        st.session_state.pop(PENDING_WHATIF, None)
        return pending.get("edit")
    return None
