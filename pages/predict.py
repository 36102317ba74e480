"""Predict: paste or sample a review, see its predicted stars and what BERT attends to."""
import streamlit as st

from reviewbert.ui import explain_views as X, frame, predict_panel as P, state as S, views as V

frame.require()

st.title("ReviewBERT")
st.caption("Predict an Amazon review's star rating with a fine-tuned BERT, then see what it "
           "attends to: [CLS] attention per layer, every head, bertviz's head view, and the "
           "review highlighted word by word.")

info, predictor = P.require_predictor()

key = f"{info.path}:{P.mtime(info.path)}"
P.input_panel(predictor, info, key)
result = P.current(predictor, key)
if result is None:
    st.stop()

pred, true_stars, source = result
if V.unreadable(pred):
    st.stop()
st.divider()
V.prediction_card(pred, true_stars, source)
st.divider()
st.header("What BERT attends to")
controls = V.attention_controls(pred)
V.cls_layers_view(pred, controls)
V.heads_view(pred, controls)
V.bertviz_view(pred, controls)
V.highlight_view(pred, controls)
X.which_words_mattered(predictor, pred, key_prefix=S.WW_PREFIX, controls=controls)
