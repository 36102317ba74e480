"""Behaviour: what can't the model do? CheckList-style tests of the checkpoint."""
import streamlit as st

from reviewbert.ui import behaviour, behaviour_editor, checkpoints, frame, state

frame.require()

st.title("What can't the model do?")
st.caption("Behavioural tests in CheckList's method (Ribeiro et al. 2020), grouped by "
           "capability: minimum-functionality tests (MFT: a star range per case), invariance "
           "tests (INV: a change that must not move the rating) and directional tests (DIR: a "
           "change that must move it one way), each with its fail rate.")

info, predictor = checkpoints.require_predictor()
reviews, what = behaviour.split_reviews(info)
reviews = behaviour.pick_slice(info, predictor, reviews, what)

# Only the open tab runs.
tabs = st.tabs(behaviour.TABS, key=state.BEHAVE_VIEW, on_change="rerun")
views = (behaviour.overview, behaviour_editor.write_a_test, behaviour_editor.import_export,
         behaviour_editor.compare_checkpoints)
for tab, view in zip(tabs, views):
    if tab.open:
        with tab:
            view(predictor, info, reviews)
