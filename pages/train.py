"""Train: launch and queue fine-tuning runs, watch the four metrics live, search hyperparameters."""
import streamlit as st

from reviewbert.ui import checkpoints as C, frame, search_form as SF, state as S, training as T

frame.require()

st.title("Train a model")
st.caption("Fine-tune BERT on review files with the seed report's knobs. Each run trains in its "
           "own background process (one at a time per device; others wait as queued), so "
           "closing this tab or restarting the app never stops it.")

root = C.checkpoints_root()
S.apply_pending(S.PENDING_TRAIN_VIEW, S.TRAIN_VIEW)
view = st.radio("View", ["Runs", "New run", "Search"], horizontal=True, key=S.TRAIN_VIEW,
                label_visibility="collapsed")

if view == "Runs":
    T.flash()
    T.live_view(root)
    T.runs_table(root)
elif view == "New run":
    T.launch_section(root)
else:
    SF.search_section(root)
