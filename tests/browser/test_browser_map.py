"""The Error analysis page's Map tab in a real headless Chromium, offline, on the shipped
demo checkpoint over 100 reviews of its real test split (20 per rating, as a data
file): the WebGL projector draws every review, a lasso selection lists the selected
reviews with their metrics, and clicking a review opens the Errors tab's card (every
attention view) with its nearest reviews; the Slices tab draws its forest plot.
Screenshots go to artifacts/browser/.
"""
from __future__ import annotations

import pytest

from browser_support import (
    caption_with,
    demo_server,
    evaluate_data_file,
    offline_context,
    select_first_row,
    shot,
)

pytestmark = [pytest.mark.e2e]
playwright = pytest.importorskip("playwright.sync_api")

N = 100

# The projector's plot, its points' screen positions, and how many it draws.
POINTS_JS = """() => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
        p => p._fullLayout && ((p.layout.title || {}).text || '').includes('PCA'));
    if (!gd || !gd.querySelector('canvas')) return null;
    const L = gd._fullLayout, box = gd.getBoundingClientRect(), pts = [];
    for (const t of gd._fullData) {
        if (t.type !== 'scattergl') continue;
        for (let i = 0; i < t.x.length; i++)
            pts.push([box.left + L._size.l + L.xaxis.l2p(t.x[i]),
                      box.top + L._size.t + L.yaxis.l2p(t.y[i])]);
    }
    return {n: pts.length, pts: pts, types: gd._fullData.map(t => t.type)};
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    with demo_server(tmp_path_factory.mktemp("map-browser"), N // 5, "streamlit_map.log", data_dir) as srv:
        yield srv


def test_map_tab_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import sync_playwright
    dialogs = []
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        page.get_by_role("link", name="Error analysis").click()
        evaluate_data_file(page, N)

        # the projector: every review drawn as a WebGL point, with the map's reading
        page.get_by_role("tab", name="Map").click()
        page.wait_for_function(f"() => {{ const r = ({POINTS_JS})(); return r && r.n === {N}; }}",
                               timeout=120_000)
        caption_with(page, "What the map shows.")
        drawn = page.evaluate(POINTS_JS)
        assert set(drawn["types"]) == {"scattergl"}
        page.mouse.move(5, 5)
        shot(page, "map_01_projector.png", height=1800)

        # a selection of the middle of the map lists its reviews with their metrics
        page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].find(
            p => ((p.layout.title || {}).text || '').includes('PCA')).scrollIntoView(
            {block: 'center'})""")
        page.wait_for_timeout(800)                   # Streamlit's selection handler attaches
        drawn = page.evaluate(POINTS_JS)             # on screen now: positions after scrolling
        xs = sorted(x for x, _ in drawn["pts"])
        ys = sorted(y for _, y in drawn["pts"])
        # edges in the middle of the widest gap between neighbouring points near each
        # quartile: no point within a pixel of one (the browser rounds the lasso's mouse
        # positions to whole pixels; half-way between two points 0.6 px apart, a point was
        # left out on one CPU, the PCA's coordinates moving by a rounding)
        def edge(v, q):
            k = max(range(q - 8, q + 9), key=lambda i: v[i] - v[i - 1])
            assert v[k] - v[k - 1] >= 3, v[q - 8:q + 9]
            return (v[k - 1] + v[k]) / 2
        x0, x1 = edge(xs, len(xs) // 4), edge(xs, 3 * len(xs) // 4)
        y0, y1 = edge(ys, len(ys) // 4), edge(ys, 3 * len(ys) // 4)
        inside = sum(x0 < x < x1 and y0 < y < y1 for x, y in drawn["pts"])
        assert inside > 0
        dragmode = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].find(
            p => ((p.layout.title || {}).text || '').includes('PCA'))._fullLayout.dragmode""")
        # a lasso goes round the rectangle; a box is dragged from corner to corner
        path = ((x1, y0), (x1, y1), (x0, y1), (x0, y0 + 2)) if dragmode == "lasso" else ((x1, y1),)
        page.mouse.move(x0, y0)
        page.mouse.down()
        for x, y in path:
            page.mouse.move(x, y, steps=12)
        page.mouse.up()
        caption_with(page, "reviews selected")
        page.get_by_text("Save this selection as a slice").wait_for(timeout=60_000)
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        body = page.inner_text("body")
        assert f"{inside} reviews selected" in body, (inside, body[:3000])
        assert "accuracy" in body and "against" in body and "for the rest" in body
        shot(page, "map_02_selection.png", height=2400)

        # a selected review opens the Errors tab's card, with its nearest reviews
        select_first_row(page)
        page.locator(".rb-highlight").wait_for(timeout=180_000)     # the first attention view
        body = page.inner_text("body")
        assert "What BERT attends to" in body and "Its nearest reviews" in body
        assert "nearest reviews" in body and "Predicted:" in body
        shot(page, "map_03_review_card.png", height=4200)

        # the Slices tab: every single-attribute slice against the rest, worst first
        page.get_by_role("tab", name="Slices").click()
        page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot')].some(
            p => ((p.layout.title || {}).text || '').includes('minus the rest'))""", timeout=120_000)
        page.get_by_text("Build a slice").wait_for(timeout=60_000)
        shot(page, "map_04_slices.png", height=2600)

        assert blocked == [], f"requests left localhost: {blocked}"
        assert dialogs == []
        ctx.close()
