"""The Error analysis page in a real headless Chromium, offline, on the shipped demo
checkpoint (trained MiniLM) on 100 reviews of its real test split (20 per rating, as
a data file, to keep the CPU time small): evaluate, click a confusion-matrix cell,
open a misclassified review and see its attention views, open the label issues and
the per-rating charts. Screenshots go to artifacts/browser/ (one is docs/screenshots/error_analysis.png).
"""
from __future__ import annotations

import shutil

import pytest

from browser_support import (
    ART,
    ROOT,
    caption_with,
    demo_server,
    evaluate_data_file,
    offline_context,
    select_first_row,
    shot,
)

pytestmark = [pytest.mark.e2e]
playwright = pytest.importorskip("playwright.sync_api")



@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    """The demo checkpoint (symlinked: the cache is written in a temporary folder) and a
    data folder holding 100 reviews of its real test split, 20 per rating."""
    with demo_server(tmp_path_factory.mktemp("err-browser"), 20, "streamlit_error.log", data_dir) as srv:
        yield srv


def plot_titled(page, text: str, timeout=120_000):
    page.wait_for_function(
        "t => [...document.querySelectorAll('.js-plotly-plot')].some(p => p._fullLayout && "
        "((p.layout.title && (p.layout.title.text || p.layout.title)) || '').includes(t))",
        arg=text, timeout=timeout)


def open_tab(page, name: str):
    page.get_by_role("tab", name=name).click()


def test_error_page_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import sync_playwright
    dialogs = []
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        page.get_by_role("link", name="Error analysis").click()

        # 100 held-out reviews from the data folder; evaluate them, then the saved predictions
        evaluate_data_file(page, 100)
        page.get_by_role("tab", name="Overview").wait_for(timeout=60_000)
        plot_titled(page, "Reliability")
        shot(page, "error_01_overview.png")
        shutil.copy(ART / "error_01_overview.png", ROOT / "docs" / "screenshots" / "error_analysis.png")

        # the confusion matrix: click an off-diagonal cell with reviews in it
        open_tab(page, "Errors")
        plot_titled(page, "Confusion matrix")
        page.wait_for_timeout(1000)          # let Streamlit attach its selection handler
        cell = page.evaluate("""() => {
            const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
                p => (p.layout.title.text || '').includes('Confusion'));
            const pts = gd._fullData[1].customdata;
            let best = null;
            for (const [i, j, n] of pts) if (i !== j && n > 0 && (!best || n > best[2])) best = [i, j, n];
            const L = gd._fullLayout, box = gd.getBoundingClientRect();
            return {x: box.left + L._size.l + L.xaxis.l2p(best[1]),
                    y: box.top + L._size.t + L.yaxis.l2p(best[0]), true: best[0], pred: best[1],
                    n: best[2], names: L.xaxis.ticktext};
        }""")
        page.mouse.click(cell["x"], cell["y"])
        caption_with(page, f"{cell['n']} of 100 reviews")
        page.mouse.move(5, 5)                # no tooltip in the screenshots
        chips = page.locator('[data-testid="stMultiSelect"]').all_inner_texts()
        assert cell["names"][cell["true"]] in chips[0] and cell["names"][cell["pred"]] in chips[1]

        # open the first review of that cell: its card and the attention views, the
        # highlighted review open (the views are tabs; only the open one is built)
        select_first_row(page)
        page.locator(".rb-highlight").wait_for(timeout=120_000)
        body = page.inner_text("body")
        assert "misclassified" in body and "What BERT attends to" in body
        assert f"Predicted: {cell['names'][cell['pred']]}" in body
        assert page.locator("iframe").count() == 0
        shot(page, "error_02_misclassified_review.png", height=4200)
        open_tab(page, "[CLS] per layer")
        plot_titled(page, "[CLS] → token attention")
        # the highlight is gone once the run ends (Streamlit removes a closed tab's elements
        # at the end of the run, after the heatmap may already have drawn)
        page.locator(".rb-highlight").wait_for(state="detached", timeout=60_000)
        open_tab(page, "Head view (bertviz)")
        page.wait_for_function("""() => [...document.querySelectorAll('iframe')]
            .map(x => x.contentDocument).some(d => d && d.querySelector('#vis svg line'))""",
                               timeout=120_000)

        # label issues (cleanlab)
        open_tab(page, "Label issues")
        caption_with(page, "cleanlab flags")
        shot(page, "error_03_label_issues.png", height=1800)

        # per-rating attention: one pass on request, then the bar charts and examples
        open_tab(page, "Per-rating attention")
        page.get_by_role("button", name="Compute per-rating attention").click(timeout=60_000)
        plot_titled(page, "Words with the highest mean [CLS] attention")
        plot_titled(page, "predicted")                                 # an example heatmap
        words = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].find(
            p => (p.layout.title.text || '').includes('Words with')).data.filter(t => t.y).length""")
        assert words == 5                                               # one chart per rating
        shot(page, "error_04_per_rating_attention.png", height=3400)

        assert blocked == [], f"requests left localhost: {blocked}"
        assert dialogs == []
        ctx.close()
