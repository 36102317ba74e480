"""Hidden elements drawn early so that the browser fetches their code before a click needs it.

Streamlit's page fetches a widget kind's JavaScript only when the first element of that
kind is drawn. Drawn on the click that first needs them, a Plotly chart (Streamlit's
Plotly bundle, several MB), a slider (moment.js, numbro, sprintf) and an HTML-in-Markdown
element (the prediction card's stars) made that click wait for the download. They are
drawn instead while nothing waits for them, hidden (``PREFETCH_CSS``). What they save is
measured by ``bench/first_second.py`` (the first prediction and the first long review).
"""
from __future__ import annotations

import streamlit as st

from reviewbert.ui import state

PREFETCH_CSS = '[class*="st-key-rb_prefetch_"]{visibility:hidden}'
"""Hides :func:`prefetch_code`'s elements (their 1-pixel box showed the slider's top
pixels); set by the app's frame. Hidden, they still mount, and their code is fetched."""


def prefetch_code(key: str, plotly: bool = True) -> None:
    """Hidden elements whose JavaScript Streamlit's page fetches only when one is first
    drawn, drawn while nothing waits for them rather than on the click that needs them:
    - an empty Plotly chart: Streamlit's Plotly bundle, for the first click that draws a
      chart;
    - a disabled slider: its code, for the first review longer than the head view's
      window, which shows the window slider;
    - an empty HTML-in-Markdown element: the code that draws the prediction card's stars.
    Drawn by the sidebar's status once the first page is drawn, by the Predict page while
    nothing is predicted yet (each with its own ``key``: both may draw in one run), and,
    the slider alone (``plotly=False``), in the head view's slot when it first shows a
    short review in a session."""
    with st.container(height=1, border=False, key=f"rb_prefetch_{key}"):
        if plotly:
            import pandas  # noqa: F401 - whole before plotly peeks at it (server/model_loading.py)
            import plotly.graph_objects as go
            st.plotly_chart(go.Figure(layout={"height": 10, "width": 10}), key=key,
                            config={"staticPlot": True, "displayModeBar": False})
        st.slider("preloaded slider", 0, 1, key=f"{key}_slider", disabled=True,
                  label_visibility="collapsed")
        # HTML inside Markdown (the prediction card's stars): without it, the first card's
        # stars were drawn after the rest of the first prediction
        st.markdown("<span></span>", unsafe_allow_html=True)
    st.session_state[state.SLIDER_CODE] = True      # the page keeps the fetched code


def code_fetched() -> bool:
    """Has this session's page drawn :func:`prefetch_code`'s elements (their code is kept)?"""
    return bool(st.session_state.get(state.SLIDER_CODE))
