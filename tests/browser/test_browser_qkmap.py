"""The Heads page's Query–key map in a real headless Chromium, offline, on the shipped demo
checkpoint (MiniLM, 6 x 12 heads) and 10 reviews of its real test split (a data file, 2 per
rating: the head analysis the page needs first is most of the time): the vectors read with a
progress bar, the matrix of every head's small map, one head's joint map with its hover, a
click on a thumbnail that maps another head, and the colouring by token kind. Screenshots go
to artifacts/browser/."""
from __future__ import annotations

import pytest

from browser_support import caption_with, demo_server, offline_context, shot

pytestmark = [pytest.mark.heads]
playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    with demo_server(tmp_path_factory.mktemp("qkmap-browser"), 2, "streamlit_qkmap.log", data_dir) as srv:
        yield srv


def plot_titled(page, text: str, timeout=120_000):
    page.wait_for_function(
        "t => [...document.querySelectorAll('.js-plotly-plot')].some(p => p._fullLayout && "
        "((p.layout.title && (p.layout.title.text || p.layout.title)) || '').includes(t))",
        arg=text, timeout=timeout)


def plot_data(page, title: str) -> dict:
    """Per trace of the figure whose title has ``title``: its type, name, point count (as
    Plotly drew it: the x arrays arrive base64-encoded) and first hover text."""
    return page.evaluate("""title => {
        const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
            p => (p.layout.title.text || '').includes(title));
        return gd._fullData.map(t => ({type: t.type, name: t.name || '', n: t._length || 0,
                                       text: (t.text || [])[0] || ''}));
    }""", title)


def click_cell(page, title: str, layer: int, head: int) -> None:
    """Click the matrix cell of (layer, head), 0-based, in the figure titled ``title``."""
    xy = page.evaluate("""([title, layer, head]) => {
        const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
            p => (p.layout.title.text || '').includes(title));
        gd.scrollIntoView();
        const L = gd._fullLayout, box = gd.getBoundingClientRect();
        return {x: box.left + L._size.l + L.xaxis.l2p(head), y: box.top + L._size.t + L.yaxis.l2p(layer)};
    }""", [title, layer, head])
    page.mouse.click(xy["x"], xy["y"])


def test_the_query_key_map_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import sync_playwright
    dialogs = []
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        page.get_by_role("link", name="Heads").click()
        page.get_by_text("a data file").click(timeout=120_000)
        page.get_by_role("button", name="Analyse the heads on 10 reviews").click(timeout=120_000)
        plot_titled(page, "Head importance", timeout=600_000)

        page.get_by_role("tab", name="Query–key map").click()
        plot_titled(page, "Every head")
        plot_titled(page, "Layer 1, head 1:")
        caption_with(page, "tokens of 10 reviews")
        traces = plot_data(page, "Layer 1, head 1:")
        assert [t["name"] for t in traces] == ["queries", "keys"]
        assert traces[0]["n"] == traces[1]["n"] > 500 and traces[0]["type"] == "scattergl"
        assert "query" in traces[0]["text"] and "<b>" in traces[0]["text"]   # the hover's token
        page.wait_for_timeout(1000)               # let Streamlit attach its selection handler
        shot(page, "qkmap_01_head.png", height=2600)

        # a click on a thumbnail maps that head (and the head below follows)
        click_cell(page, "Every head", 3, 9)
        plot_titled(page, "Layer 4, head 10:")
        caption_with(page, "Layer 4, head 10:")
        matrix = plot_data(page, "Every head")
        assert sum(t["n"] for t in matrix if t["type"] == "scattergl") == 72 * 2 * 60
        shot(page, "qkmap_02_clicked.png", height=2600)

        page.get_by_text("token kind").click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.data && "
            "p.data.some(t => t.name === '[CLS]'))", timeout=120_000)
        plot_titled(page, "Layer 4, head 10:")
        shot(page, "qkmap_03_kinds.png", height=2600)

        assert blocked == [], f"requests left localhost: {blocked}"
        assert dialogs == []
        ctx.close()
