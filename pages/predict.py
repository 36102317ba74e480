"""Predict: paste or sample a review, see its predicted stars and what BERT attends to."""
import streamlit as st

from reviewbert.ui import cached_model, explanations, frame, predict, prediction, split_map, state, whatif

frame.require()

st.title("ReviewBERT")
st.caption("Predict an Amazon review's star rating with a fine-tuned BERT, then see what it "
           "attends to: [CLS] attention per layer, every head, bertviz's head view, and the "
           "review highlighted word by word.")

info, predictor = cached_model.require_predictor()

key = f"{info.path}:{cached_model.mtime(info.path)}"
predict.input_panel(predictor, info, key)
result = predict.current(predictor, key)
if result is None:
    st.stop()

pred, true_stars, source = result
if prediction.unreadable(pred):
    st.stop()
st.divider()
prediction.prediction_card(pred, true_stars, source)
st.divider()
st.header("What BERT attends to")
controls = prediction.attention_controls(pred)
prediction.cls_layers_view(pred, controls)
prediction.heads_view(pred, controls)
prediction.bertviz_view(pred, controls)
prediction.highlight_view(pred, controls)
explanations.which_words_mattered(predictor, pred, key_prefix=state.WW_PREFIX, controls=controls)
split_map.predict_page_neighbours(info, predictor, pred)
whatif.what_if(predictor, pred, key_prefix=state.WHATIF_PREFIX)
