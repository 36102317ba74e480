"""reviewbert/ui/png_download.py: the one PNG export of the pages (the Predict heatmap, the
Error analysis figures, a search's figures): a button renders the figure under a bar, the
download then holds a real PNG of that figure, another figure asks for its own render, and
a render that fails says why instead of breaking the page."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script():
    import plotly.graph_objects as go
    import streamlit as st

    from reviewbert.ui.png_download import png_download
    bars = st.session_state.get("bars", [3, 1, 2])
    fig = go.Figure(go.Bar(x=[1, 2, 3], y=bars), layout=dict(width=300, height=200))
    png_download(st, fig, state_key="png", figure_key=f"bars:{bars}", file_name="bars.png",
                 key_prefix="t_", note=" The HTML download works without it.")
    st.write("below")


def run(at=None, **session) -> AppTest:
    at = at or AppTest.from_function(_script, default_timeout=60)
    for k, v in session.items():
        at.session_state[k] = v
    return at.run()


def test_render_then_download_a_real_png_of_that_figure():
    at = run()
    assert not at.exception, at.exception
    assert [b.key for b in at.button] == ["t_make_png"] and not at.get("download_button")
    at.button(key="t_make_png").click().run()
    assert not at.exception, at.exception
    key, data = at.session_state["png"]
    assert key == "bars:[3, 1, 2]" and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 300               # the figure's own width
    assert [d.proto.label for d in at.get("download_button")] == ["PNG"]
    assert not at.button                                           # rendered: nothing to click
    # another figure: its own render is offered, the old PNG is not served for it
    run(at, bars=[1, 1, 1])
    assert [b.key for b in at.button] == ["t_make_png"] and not at.get("download_button")


def test_a_failed_render_says_why_and_the_page_goes_on(monkeypatch):
    from reviewbert.viz import figures

    def no_browser(*a, **k):
        raise RuntimeError("Chromium not found")
    monkeypatch.setattr(figures, "png_bytes", no_browser)
    at = run()
    at.button(key="t_make_png").click().run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning] == [
        "PNG export is not available here (RuntimeError: Chromium not found). "
        "The HTML download works without it."]
    assert "png" not in at.session_state and [m.value for m in at.markdown] == ["below"]
