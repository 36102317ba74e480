"""The frame every page runs inside: navigation and the shared sidebar (app.py calls run())."""
from __future__ import annotations

import importlib

import streamlit as st

from reviewbert.training.catalog import checkpoints_root
from reviewbert.ui import checkpoints, runtime, state
from reviewbert.viz import highlight

VIEW_MODULES = ("reviewbert.ui.prediction_card", "reviewbert.ui.explanations",
                "reviewbert.ui.nearest_reviews", "reviewbert.ui.whatif")
"""What draws a prediction on the Predict page (the default page): imported by the model's
load once the model is ready, so that the first click on Predict does not wait for them.
None imports scipy or scikit-learn (``tests/unit/test_structure.py``)."""


def import_views() -> None:
    """The Predict page's view modules imported, and the first prediction's one-off costs
    paid (``prediction_card.prepare``): run by the load's thread."""
    for name in VIEW_MODULES:
        importlib.import_module(name)
    importlib.import_module("reviewbert.ui.prediction_card").prepare()


runtime.after_model_loads(import_views)


def pages() -> list:
    return [
        st.Page(state.PREDICT_PAGE, title="Predict", icon="⭐", default=True),
        st.Page(state.TRAIN_PAGE, title="Train", icon="🏋️"),
        st.Page(state.INSIDE_PAGE, title="Inside BERT", icon="🔍"),
        st.Page(state.ERROR_PAGE, title="Error analysis", icon="🔬"),
        st.Page(state.COHORTS_PAGE, title="Cohorts", icon="🧩"),
        st.Page(state.BEHAVE_PAGE, title="Behaviour", icon="🧪"),
        st.Page(state.FOOL_PAGE, title="Fool the model", icon="🎭"),
        st.Page(state.FAITH_PAGE, title="Faithfulness", icon="⚖️"),
        st.Page(state.HEADS_PAGE, title="Heads", icon="🧠"),
    ]


def run() -> None:
    number = runtime.begin()
    nav = st.navigation(pages())
    # style only: takes no space
    st.html(f"<style>{highlight.HIGHLIGHT_CSS}{runtime.PREFETCH_CSS}</style>")
    st.sidebar.header("Model")
    device = st.sidebar.empty()
    info = checkpoints.pick_checkpoint(checkpoints_root())
    with device.container():        # the checkpoint's load (a thread, held until the page is drawn)
        load = runtime.load_status(info)
    runtime.run_page(nav, number, load)


def require() -> None:
    """First line of every page: rerun inside the frame if Streamlit ran the page alone
    (a fresh server whose first visitor opened a page's URL: ``runtime.inside_frame``)."""
    if not runtime.inside_frame():
        st.navigation(pages(), position="hidden")
        st.rerun()
