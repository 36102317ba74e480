"""Error analysis: evaluate a checkpoint over a whole split once, then see where it goes wrong."""
import streamlit as st

from reviewbert.ui import error_views as E, frame, predict_panel as P, state as S

frame.require()

st.title("Error analysis")
st.caption("Evaluate the checkpoint over a whole split (batched, once: the predictions are "
           "saved beside it), then find where it goes wrong: metrics with intervals, the "
           "confusion matrix and its reviews with every attention view, reviews whose rating "
           "is probably wrong (cleanlab), and what BERT attends to for each rating.")

info, predictor = P.require_predictor()

choice = E.pick_data(info, predictor)
if choice is None:
    st.stop()
preds = E.evaluation(info, choice)
if preds is None:
    st.stop()

overview, errors, issues, words, compare, export = st.tabs(E.TABS, key=S.ERR_TAB,
                                                           on_change="rerun")
# Only the open tab runs: the browser's attention views and the exports cost seconds.
if overview.open:
    with overview:
        E.overview(preds)
if errors.open:
    with errors:
        E.confusion(preds)
        E.browser(preds, predictor)
if issues.open:
    with issues:
        E.label_issues(preds)
if words.open:
    with words:
        E.rating_attention(preds, predictor)
if compare.open:
    with compare:
        E.compare_section(preds, info, choice)
if export.open:
    with export:
        E.exports(preds, info, predictor)
