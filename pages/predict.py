"""Predict: paste or sample a review, see its predicted stars and what BERT attends to."""
import streamlit as st

from reviewbert.ui import checkpoints, frame, predict, runtime, state

frame.require()

st.title("ReviewBERT")
st.caption("Predict an Amazon review's star rating with a fine-tuned BERT, then see what it "
           "attends to: the review highlighted word by word, [CLS] attention per layer, every "
           "head, and bertviz's head view.")

info = checkpoints.require_checkpoint()
checkpoints.stop_if_failed(info)   # the model loads in the background: the panel draws now
key = f"{info.path}:{runtime.mtime(info.path)}"
# The prediction and its attention views take turns with the other sessions' (first come,
# first served: runtime.turn); the other tabs' longer work does not.
with runtime.turn(info):
    fresh = predict.input_panel(info, key)
    result = predict.current(key, fresh)
    if result is None:
        predict.prefetch(info)
        st.stop()

    # The views' modules (torch, plotly figures) are imported once there is a
    # prediction to draw, so that the first paint of the panel above waits for none of them.
    from reviewbert.ui import explanations, nearest_reviews, prediction_card, whatif  # noqa: E402

    _, predictor = checkpoints.require_predictor()

    pred, true_stars, source = result
    if prediction_card.unreadable(pred):
        st.stop()
    with runtime.review_threads(predictor):
        st.divider()
        prediction_card.prediction_card(pred, true_stars, source)
        st.divider()
        controls = prediction_card.attention_controls(pred)
        attends, words, nearest, what_if, layers = st.tabs(prediction_card.VIEWS,
                                                           key=state.PREDICT_VIEW,
                                                           on_change="rerun")
        # Only the open tab runs: a run that built all four cost twice the server time.
        if attends.open:
            with attends:
                prediction_card.attention_views(pred, controls)
with runtime.review_threads(predictor):
    if words.open:
        with words:
            explanations.which_words_mattered(predictor, pred, key_prefix=state.WW_PREFIX,
                                              controls=controls)
    if nearest.open:
        with nearest:
            nearest_reviews.predict_page_neighbours(info, predictor, pred)
    if what_if.open:
        with what_if:
            whatif.what_if(predictor, pred, key_prefix=state.WHATIF_PREFIX)
    if layers.open:
        with layers:
            prediction_card.layers_view(info, predictor, pred)
