"""Inside BERT: one sentence through the sidebar's checkpoint, step by step, with live numbers."""
import streamlit as st

from reviewbert.ui import checkpoints, frame, inside_bert, state

frame.require()
info = state.current_checkpoint()

st.title("Inside BERT")
st.caption("Where the attention numbers come from: a sentence through the loaded model, one "
           "step at a time, from WordPieces to stars, with the real tensors (hover any cell "
           "for its value).")

if info is None:
    checkpoints.training_guide(checkpoints.checkpoints_root())
    st.stop()

predictor = inside_bert.load_predictor(info)      # None: it said why (unloadable, or not a BERT)
if predictor is None:
    st.stop()

text, classroom = inside_bert.sentence_input()
if not text.strip():
    st.info("Type a sentence in the box above (for example “time flies like an arrow”) to "
            "see it go through BERT.")
    st.stop()

lesson = inside_bert.lesson(predictor, info, text, classroom)
if lesson is None:
    st.stop()
inside_bert.model_line(lesson)
inside_bert.show(lesson)
