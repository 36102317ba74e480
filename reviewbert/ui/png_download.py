"""A figure's PNG download: rendered on request, under a bar with the time left, then kept
in the session until the figure changes.

kaleido renders a PNG in a headless Chromium that it starts for each figure
(``viz/figures.png_bytes``): seconds, with no step to count. So the
render runs in a worker thread (``progress_bar.in_background``) under a bar timed against
RENDER_GUESS_S, one render per figure for the server (two sessions asking for the same
figure share it). The Predict page's heatmap, the Error analysis page's figures and a
search's figures use this one widget.
"""
from __future__ import annotations

import hashlib

import streamlit as st

from reviewbert.ui import progress_bar, runtime
from reviewbert.viz import figures

RENDER_GUESS_S = 3.5
RENDER_HELP = "Rendered with kaleido in a headless Chromium (a few seconds)"


def figure_id(fig) -> str:
    """What the figure draws (its full JSON, hashed): the render shared between sessions
    is the same picture."""
    return hashlib.sha256(fig.to_json().encode()).hexdigest()[:20]


def png_download(where, fig, *, state_key: str, figure_key: str, file_name: str,
                 key_prefix: str = "", label: str = "PNG", render_label: str = "Render PNG",
                 note: str = "") -> None:
    """In ``where`` (a column), the PNG's download button if this session has rendered
    ``figure_key`` (kept as ``(figure_key, bytes)`` under ``state_key``), else a button that
    renders it. A render that fails (no Chromium, kaleido missing) says why, plus ``note``.
    Button keys: ``{key_prefix}make_png`` and ``{key_prefix}dl_png``. Once rendered, what
    the click ran reruns (the fragment it sits in, or the page) to show the download."""
    png = st.session_state.get(state_key)
    if png and png[0] == figure_key:
        where.download_button(label, png[1], file_name, "image/png", key=f"{key_prefix}dl_png",
                              on_click="ignore")
        return
    slot = where.empty()            # the bar takes the button's place
    if not runtime.button(slot, render_label, key=f"{key_prefix}make_png", help=RENDER_HELP):
        return
    try:
        data = progress_bar.in_background(f"png:{figure_id(fig)}", lambda: figures.png_bytes(fig),
                                          "Rendering the PNG", RENDER_GUESS_S, where=slot)
    except Exception as e:  # noqa: BLE001 - any kaleido/Chromium failure: say so
        where.warning(f"PNG export is not available here ({type(e).__name__}: {e}).{note}")
        return
    st.session_state[state_key] = (figure_key, data)
    st.rerun(scope="fragment" if runtime.fragment_run() else "app")
