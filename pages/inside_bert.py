"""Inside BERT: one sentence through the sidebar's checkpoint, step by step, with live numbers."""
import streamlit as st
from reviewbert.ui import checkpoints as C, frame, state as S, teaching as T
frame.require()
info = S.current_checkpoint()

st.title("Inside BERT")
st.caption("Where the attention numbers come from: a sentence through the loaded model, one "
           "step at a time, from WordPieces to stars, with the real tensors (hover any cell "
           "for its value).")

if info is None:
    C.training_guide(C.checkpoints_root())
    st.stop()

predictor = T.load_predictor(info)      # None: it said why (unloadable, or not a BERT)
if predictor is None:
    st.stop()

text, classroom = T.sentence_input()
if not text.strip():
    st.info("Type a sentence in the box above (for example “time flies like an arrow”) to "
            "see it go through BERT.")
    st.stop()

lesson = T.lesson(predictor, info, text, classroom)
if lesson is None:
    st.stop()
T.model_line(lesson)
T.show(lesson)
