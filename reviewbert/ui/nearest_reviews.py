"""The Predict page's nearest reviews: the review's 10 nearest reviews of the checkpoint's
test split in the model's vector space, once the Error analysis page has evaluated the
split (its vectors are in the prediction cache); and the table and sentence that the
Map tab's selected review shares.

Its own module, not the Map tab's (``split_map``): the Predict page imports this when it
draws a prediction, and ``split_map`` brings the whole Error analysis page with scipy
and scikit-learn, whose imports the first prediction waited for.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import streamlit as st

from reviewbert.analysis import cache, embeddings, lookup, neighbours
from reviewbert.ui import runtime, state
from reviewbert.viz.markdown import md_escape

PREVIEW = 140           # characters of a neighbour's text in the table


def neighbour_frame(preds, idx, sim) -> pd.DataFrame:
    names, f = preds.names, preds.frame
    text = f["text"].to_numpy()[idx]
    return pd.DataFrame({
        "rank": np.arange(1, len(idx) + 1), "similarity": np.round(sim, 3),
        "true": [names[i] for i in preds.y[idx]], "predicted": [names[i] for i in preds.pred[idx]],
        "text": [t if len(t) <= PREVIEW else t[:PREVIEW] + "…" for t in text]})


def agreement_line(preds, idx, predicted: int) -> str:
    agree = int((preds.y[idx] == predicted).sum())
    names = preds.names
    counts = np.bincount(preds.y[idx], minlength=len(names))
    mix = ", ".join(f"{c} × {md_escape(names[i])}" for i, c in enumerate(counts) if c)
    return (f"**{agree} of its {len(idx)} nearest reviews** ({agree / max(len(idx), 1):.0%}) are "
            f"rated **{md_escape(names[predicted])}**, the rating the model predicts. Their true "
            f"ratings: {mix}.")


def show(preds, idx, sim, lead: str, predicted: int) -> None:
    """``lead``, the agreement sentence, and the table of the neighbours ``idx`` (rows of
    ``preds``) with their similarities ``sim``."""
    st.markdown(lead + agreement_line(preds, idx, predicted))
    st.dataframe(neighbour_frame(preds, idx, sim), hide_index=True, height=250,
                 column_config={"text": st.column_config.TextColumn(width="large")})


EVALUATED_SPLITS = 3     # checkpoints whose test-split vectors stay in memory
_FOUND_LOCK = threading.Lock()


@st.cache_resource(show_spinner=False)
def _evaluated_splits() -> dict:
    """{(checkpoint key, cache stamp): (test-split predictions, their vectors) or None},
    shared by every session. Looking a split up costs a parquet read and the split's
    fingerprint, which every Predict paid before; the stamp
    (``analysis.cache.stamp``) changes when the Error analysis page writes an
    evaluation or its vectors, so a split evaluated later is found on the next run."""
    return {}


def _split_vectors(info, predictor, key: str):
    found = _evaluated_splits()
    at = (key, cache.stamp(info.path))
    if at in found:
        return found[at]
    reviews, _ = runtime.load_test_reviews(str(info.path), runtime.mtime(info.path))
    preds = lookup(info.path, reviews, predictor.scheme, predictor.max_length) if reviews else None
    vecs = embeddings.vectors_for(preds, predictor.model, predictor.tokenizer,
                                  compute=False) if preds is not None else None
    got = None if vecs is None else (preds, vecs)
    with _FOUND_LOCK:        # sessions run in threads of their own
        while len(found) >= EVALUATED_SPLITS:
            del found[next(iter(found))]
        found[at] = got
    return got


def _nearest_for(info, predictor, pred):
    """(test-split predictions, neighbour rows, similarities) of ``pred``'s review, or None
    when the split's vectors are not cached. The query is the prediction's own last-layer
    [CLS] state (the split's default vector), so no second forward pass, which cost more
    than the prediction itself. Kept in session state: the Predict page reruns on every
    slider move."""
    key = f"{info.path}:{runtime.mtime(info.path)}"
    text = pred.text
    kept = st.session_state.get(state.PREDICT_NEIGHBOURS)
    if kept and kept[0] == key and kept[1] == text:
        return kept[2]
    split = _split_vectors(info, predictor, key)
    if split is None:
        return None
    preds, vecs = split
    # the split's vectors are embeddings.DEFAULT (last layer, [CLS]): the prediction's own
    idx, sim = neighbours.nearest(vecs, pred.cls_vector, k=neighbours.K)
    out = (preds, idx, sim)
    st.session_state[state.PREDICT_NEIGHBOURS] = (key, text, out)
    return out


def predict_page_neighbours(info, predictor, pred) -> None:
    """The Predict page: the review's 10 nearest reviews of the checkpoint's test split,
    when the Error analysis page has evaluated it (vectors cached)."""
    st.header("Its nearest reviews")
    got = _nearest_for(info, predictor, pred)
    if got is None:
        st.caption("Evaluate this checkpoint's test split on the **Error analysis** page (its Map "
                   "tab keeps every review's sentence vector) to see the reviews this one is "
                   "closest to, and whether their ratings agree with the prediction.")
        return
    preds, idx, sim = got
    show(preds, idx[0], sim[0], f"The {len(idx[0])} reviews of the test split closest to this one "
         "in the model's vector space ([CLS], last layer, cosine). ", int(pred.label_id))
