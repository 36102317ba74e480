"""Faithfulness: which explanation can be trusted on this checkpoint (ERASER on its test split)."""
import streamlit as st

from reviewbert.ui import checkpoints, faithfulness, frame, state

frame.require()

st.title("Which explanation is faithful?")
st.caption("The Predict page shows five explanations of a prediction. Here they are tested on "
           "this checkpoint: if a method's top words really drive the prediction, deleting them "
           "should lower the predicted class's probability (comprehensiveness), and keeping only "
           "them should preserve it (sufficiency) — better than random words do. ERASER, "
           "DeYoung et al. 2020.")

info, predictor = checkpoints.require_predictor()

faithfulness.faithfulness_section(predictor, info, key_prefix=state.FAITH_PREFIX)
