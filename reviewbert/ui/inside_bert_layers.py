"""Inside BERT's step 4, its last part: the sentence's star probabilities after every layer,
as the per-layer probes read its [CLS] vector, when those probes are cached.

The probes are trained on the Predict page's Layers tab or by ``python -m reviewbert layers``
(``reviewbert/ui/predict_layers.py``); this step never trains them, it says how.
"""
from __future__ import annotations

import streamlit as st

from reviewbert.ui import predict_layers


def layer_probabilities_view(les) -> None:
    """``les``: the page's Lesson (its predictor, checkpoint info and sentence)."""
    st.markdown("**What [CLS] already says after each layer.** A linear probe trained on the "
                "[CLS] vector after each layer reads the star rating from it: where its guess "
                "stops changing, the rating is settled.")
    res = predict_layers.cached(les.info)
    if res is None:
        st.caption("The per-layer probes of this checkpoint are not trained yet: train them in "
                   "the Predict page's Layers tab, or run "
                   f"`{predict_layers.CLI_HINT} {les.info.path}`; then they show here.")
        return
    names = list(les.pred.scheme.names) if les.pred.scheme else [str(i) for i in
                                                                 range(res.num_labels)]
    predict_layers.review_layers(les.predictor, les.text, res, names, "inside",
                                 les.pred.label_id)
