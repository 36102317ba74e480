"""Cohorts: where the errors of a split cluster, and the loop that fixes the data."""
import streamlit as st

from reviewbert.ui import checkpoints, cohorts, cohorts_fix, cohorts_triage, error_analysis, frame, state

frame.require()

st.title("Failing cohorts")
st.caption("Where do the errors cluster? Every review of the split gets its properties (length, "
           "negations, contrast words, sentiment, readability, aspects, other brands, "
           "duplicates…); a shallow tree and SliceLine find the groups the model fails most. "
           "Tag what you understand, relabel what is wrong, write a corrected file, retrain, "
           "and compare on the same cohorts.")

info, predictor = checkpoints.require_predictor()

picked = error_analysis.evaluated(info, predictor)
if picked is None:
    st.stop()
choice, preds = picked
table = cohorts.properties_table(preds)
who = cohorts.author()

found, heat, hygiene, triage, fix = st.tabs(cohorts.TABS, key=state.COH_TAB, on_change="rerun")
# Only the open tab runs: the tree, the duplicates and the store's reads cost seconds.
if found.open:
    with found:
        cohorts.found_tab(preds, table, who)
if heat.open:
    with heat:
        cohorts.heatmap_tab(table)
if hygiene.open:
    with hygiene:
        cohorts_triage.hygiene_tab(preds, info, choice.source.get("kind") == "test split")
if triage.open:
    with triage:
        cohorts_triage.queue_tab(preds, table, who)
if fix.open:
    with fix:
        cohorts_fix.fix_tab(preds, table, info, choice)
