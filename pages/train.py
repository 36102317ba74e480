"""Train: launch and queue fine-tuning runs, watch the four metrics live, search hyperparameters."""
import streamlit as st

from reviewbert.ui import checkpoints, frame, state, train, train_search

frame.require()

st.title("Train a model")
st.caption("Fine-tune BERT on review files with the seed report's knobs. Each run trains in its "
           "own background process (one at a time per device; others wait as queued), so "
           "closing this tab or restarting the app never stops it.")

root = checkpoints.checkpoints_root()
state.apply_pending(state.PENDING_TRAIN_VIEW, state.TRAIN_VIEW)
view = st.radio("View", ["Runs", "New run", "Search"], horizontal=True, key=state.TRAIN_VIEW,
                label_visibility="collapsed", persist_state=state.KEEP)

if view == "Runs":
    train.flash()
    train.live_view(root)
    train.runs_table(root)
elif view == "New run":
    train.launch_section(root)
else:
    train_search.search_section(root)
