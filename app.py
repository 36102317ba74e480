"""ReviewBERT: predict a review's star rating and see what BERT attends to."""
import streamlit as st

st.set_page_config(page_title="ReviewBERT", page_icon="⭐", layout="wide")

from reviewbert.model import CheckpointError  # noqa: E402
from reviewbert.ui import checkpoints as C, predict_panel as P, views as V  # noqa: E402

st.title("ReviewBERT")
st.caption("Predict an Amazon review's star rating with a fine-tuned BERT, then see what it "
           "attends to: [CLS] attention per layer, every head, bertviz's head view, and the "
           "review highlighted word by word.")

root = C.checkpoints_root()
info = C.pick_checkpoint(root)
if info is None:
    C.training_guide(root)
    st.stop()

try:
    predictor = P.load_predictor(str(info.path), P.mtime(info.path))
except CheckpointError as e:
    st.error(f"This checkpoint cannot be loaded: {e}\n\nPick another one in the sidebar, "
             "or train a new one.")
    st.stop()

key = f"{info.path}:{P.mtime(info.path)}"
P.input_panel(predictor, info, key)
result = P.current(predictor, key)
if result is None:
    st.stop()

pred, true_stars, source = result
st.divider()
V.prediction_card(pred, true_stars, source)
st.divider()
st.header("What BERT attends to")
controls = V.attention_controls(pred)
V.cls_layers_view(pred, controls)
V.heads_view(pred, controls)
V.bertviz_view(pred, controls)
V.highlight_view(pred, controls)
