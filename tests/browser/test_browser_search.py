"""The Search view's dashboard in a real headless Chromium, offline: Optuna's figures draw
with the plotly.js Streamlit serves (no request off localhost), and a click on a trial's
point in the optimisation history selects its run and overlays its curves.
Screenshots: artifacts/browser/search_dashboard.png, search_trial_clicked.png."""
from __future__ import annotations

import pytest

from browser_support import ART, CHROMIUM, ROOT, StreamlitServer, offline_context
from search_support import build_search
from toyreviews import write_toy_csv

playwright = pytest.importorskip("playwright.sync_api")

FIGURES = 6  # history, importances, parallel, contour, slice, intermediate values


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from pathlib import Path
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    tmp = tmp_path_factory.mktemp("search-browser")
    write_toy_csv(tmp / "data" / "toy.csv", n=100)
    (tmp / "ckpts").mkdir()
    build_search(tmp / "ckpts" / "toy-grid", tmp / "data" / "toy.csv")
    env = {"REVIEWBERT_CHECKPOINTS": str(tmp / "ckpts"), "REVIEWBERT_DATA_DIR": str(tmp / "data"),
           "REVIEWBERT_UPLOADS_DIR": str(tmp / "uploads"), "OMP_NUM_THREADS": "1"}
    ART.mkdir(parents=True, exist_ok=True)
    with StreamlitServer(env, ART / "streamlit_search.log") as srv:
        srv.tmp = tmp
        yield srv


DRAWN = ("n => [...document.querySelectorAll('.js-plotly-plot')].filter("
         "p => p._fullData && p._fullData.length && p.querySelector('.main-svg')).length >= n")


def history_point(page, number: int) -> dict:
    """Page coordinates of trial ``number``'s marker in the optimisation history."""
    return page.evaluate("""n => {
        const plot = [...document.querySelectorAll('.js-plotly-plot')].find(
            p => (p.layout.title.text || '') === 'Optimisation history');
        plot.scrollIntoView({block: 'center'});
        const trace = plot._fullData.findIndex(t => t.name === 'Objective Value');
        const i = plot._fullData[trace].x.indexOf(n);
        const xa = plot._fullLayout.xaxis, ya = plot._fullLayout.yaxis;
        const box = plot.querySelector('.nsewdrag').getBoundingClientRect();
        return {x: box.left + xa.l2p(n), y: box.top + ya.l2p(plot._fullData[trace].y[i])};
    }""", number)


def settled(page, tries: int = 40) -> None:
    """Wait until the figures stop resizing after a viewport change (plotly relayouts
    them); a click during a relayout can land on a moving point."""
    js = ("() => [...document.querySelectorAll('.js-plotly-plot')].map(p => "
          "JSON.stringify(p.getBoundingClientRect())).join()")
    last = None
    for _ in range(tries):
        page.wait_for_timeout(300)
        now = page.evaluate(js)
        if now == last:
            return
        last = now


def click_trial(page, number: int, tries: int = 4) -> None:
    """Click trial ``number``'s point until its selection shows. Under two test workers
    on two cores the chart can still be relaying out (or not yet listening) when the
    first click lands, and plotly then drops it; each try re-reads the point's place."""
    for attempt in range(tries):
        settled(page)
        point = history_point(page, number)
        page.mouse.move(point["x"], point["y"])   # plotly finds the clicked point on hover
        page.wait_for_timeout(300)
        page.mouse.click(point["x"], point["y"])
        try:
            page.get_by_text("Selected trials, overlaid").wait_for(timeout=20_000)
            return
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: click again
            if attempt == tries - 1:
                raise


def test_the_dashboard_draws_offline_and_a_clicked_trial_is_selected(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, server.tmp / "profile", viewport=(1400, 1000))
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(server.url + "/train")
            page.get_by_text("Train a model").wait_for(timeout=90_000)
            page.locator("[data-testid=stRadio] label").filter(has_text="Search").click()
            page.wait_for_function(DRAWN, arg=FIGURES, timeout=120_000)
            titles = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')]"
                                   ".map(p => p.layout.title.text)")
            assert "Optimisation history" in titles and any(
                t.startswith("Parameter importances (fANOVA)") for t in titles), titles
            page.set_viewport_size({"width": 1400, "height": 3000})
            page.wait_for_timeout(1500)
            page.screenshot(path=str(ART / "search_dashboard.png"), full_page=True)
            page.screenshot(path=str(ROOT / "docs" / "screenshots" / "search.png"))   # the Train guide's
            page.set_viewport_size({"width": 1400, "height": 1000})
            settled(page)

            last = int(page.evaluate("() => Math.max(...[...document.querySelectorAll("
                                     "'.js-plotly-plot')].find(p => p.layout.title.text === "
                                     "'Optimisation history')._fullData[0].x)"))  # a finished one
            click_trial(page, last)
            page.wait_for_function(DRAWN, arg=FIGURES + 4, timeout=60_000)  # + 4 curve charts
            heading = page.locator("[data-testid=stMarkdownContainer]").filter(
                has_text="Selected trials, overlaid").first.inner_text()
            assert f"toy-grid/trial-{last:04d}" in heading, heading   # that trial, only
            assert heading.count("trial-") == 1, heading
            page.get_by_text("Selected trials, overlaid").scroll_into_view_if_needed()
            page.wait_for_timeout(800)
            page.screenshot(path=str(ART / "search_trial_clicked.png"), full_page=True)
            # the Runs view's table comes with the same run selected and overlaid
            page.locator("[data-testid=stRadio] label").filter(has_text="Runs").first.click()
            page.get_by_text("Selected runs, overlaid").wait_for(timeout=60_000)
        except BaseException:
            page.screenshot(path=str(ART / "search_failure.png"), full_page=True)
            raise
        finally:
            ctx.close()
        assert blocked == [], blocked
        assert errors == [], errors
