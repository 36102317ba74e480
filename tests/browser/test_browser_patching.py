"""Activation patching from a What if? edit on the shipped demo, in a real headless Chromium
with every non-localhost request blocked: predict a review, edit one word, compare, then
"Where does the change act?" draws the layer × word grid (the changed word restoring all
of the difference below the first layer) and the layer × head grid. Screenshot:
artifacts/browser/patching_01_grid.png."""
from __future__ import annotations

import pytest

from browser_support import caption_with, demo_server, offline_context, open_view, shot

pytestmark = [pytest.mark.e2e]
pytest.importorskip("playwright.sync_api")

CLEAN, EDIT = "The battery is great", "The battery is terrible"


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    with demo_server(tmp_path_factory.mktemp("patch-browser"), 1, "streamlit_patching.log",
                     data_dir) as srv:
        yield srv


def test_patching_an_edit_on_the_demo_draws_both_grids(server, tmp_path):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        pg = ctx.new_page()
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(server.url)
        pg.get_by_text("Review text").wait_for(timeout=120_000)
        pg.locator("textarea").first.fill(CLEAN)
        pg.locator("textarea").first.blur()
        pg.wait_for_timeout(300)
        pg.get_by_role("button", name="Predict").click()
        open_view(pg, "What if?")
        pg.get_by_role("button", name="Edit and compare").click(timeout=120_000)
        box = pg.get_by_role("textbox", name="Edited review")
        box.wait_for(timeout=60_000)
        box.fill(EDIT)
        box.blur()
        pg.wait_for_timeout(300)
        pg.get_by_role("button", name="Compare", exact=True).click()
        pg.locator(".rb-diff .rb-removed").first.wait_for(timeout=120_000)
        pg.get_by_role("button", name="Where does the change act?").click(timeout=120_000)
        grid = ("() => [...document.querySelectorAll('.js-plotly-plot')].find(p => p._fullLayout && "
                "((p.layout.title && p.layout.title.text) || '').includes('(layer, word)'))")
        pg.wait_for_function(grid, timeout=180_000)
        caption_with(pg, "restores")
        data = pg.evaluate(f"() => {{ const p = ({grid})(); return {{z: p.data[0].z, "
                           f"x: p.layout.xaxis.ticktext}}; }}")
        assert data["x"] == ["[CLS]", "The", "battery", "is", "great→terrible", "[SEP]"]
        assert len(data["z"]) == 7 and abs(data["z"][0][4] - 1.0) < 1e-3
        assert abs(data["z"][6][0] - 1.0) < 1e-3                    # the last layer: [CLS]
        pg.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                             "((p.layout.title && p.layout.title.text) || '').includes('one head'))",
                             timeout=30_000)
        pg.get_by_text("Where does the change act?").first.scroll_into_view_if_needed()
        shot(pg, "patching_01_grid.png", height=2600)
        assert not errors, errors
        assert not blocked, blocked
        ctx.close()
