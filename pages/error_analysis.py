"""Error analysis: evaluate a checkpoint over a whole split once, then see where it goes wrong."""
import streamlit as st

from reviewbert.ui import checkpoints, error_analysis, frame, split_map, state

frame.require()

st.title("Error analysis")
st.caption("Evaluate the checkpoint over a whole split (batched, once: the predictions are "
           "saved beside it), then find where it goes wrong: metrics with intervals, the "
           "confusion matrix and its reviews with every attention view, reviews whose rating "
           "is probably wrong (cleanlab), and what BERT attends to for each rating.")

info, predictor = checkpoints.require_predictor()

picked = error_analysis.evaluated(info, predictor)
if picked is None:
    st.stop()
choice, preds = picked
split_map.start_reading(preds, predictor)   # the Map's neighbours, in the background

(overview, errors, issues, words, the_map, drivers, slices, brittle, compare,
 export) = st.tabs(error_analysis.TABS, key=state.ERR_TAB, on_change="rerun")
# Only the open tab runs: the browser's attention views and the exports cost seconds.
if overview.open:
    with overview:
        error_analysis.overview(preds)
if errors.open:
    with errors:
        error_analysis.confusion(preds)
        error_analysis.browser(preds, predictor)
if issues.open:
    with issues:
        error_analysis.label_issues(preds)
if words.open:
    with words:
        error_analysis.rating_attention(preds, predictor)
if the_map.open:
    with the_map:
        split_map.map_tab(preds, info, predictor)
if drivers.open:
    with drivers:
        split_map.drivers_tab(preds, predictor)
if slices.open:
    with slices:
        split_map.slices_tab(preds)
if brittle.open:
    with brittle:
        error_analysis.brittleness(info, predictor, choice)
if compare.open:
    with compare:
        error_analysis.compare_section(preds, info, choice)
if export.open:
    with export:
        error_analysis.exports(preds, info, predictor)
