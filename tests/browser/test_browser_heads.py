"""The Heads page and the Predict page's model view in a real headless Chromium, offline, on
the shipped demo checkpoint (trained MiniLM, 6 x 12 heads) and 20 reviews of its real
test split (as a data file, 4 per rating, to keep the CPU time small: 40 took 120 s of
make test's time on a 2-core EPYC): analyse with a
progress bar and an ETA, hover and click the importance heatmap, see the clicked head on
a review, the pruning curve, the atlas, the fine-tuning divergence; then bertviz's model
view beside the head view. Screenshots go to artifacts/browser/."""
from __future__ import annotations

import shutil

import pytest

from browser_support import (
    ART,
    ROOT,
    caption_with,
    demo_server,
    offline_context,
    shot,
)

pytestmark = [pytest.mark.heads]
playwright = pytest.importorskip("playwright.sync_api")



@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    with demo_server(tmp_path_factory.mktemp("heads-browser"), 4, "streamlit_heads.log", data_dir) as srv:
        yield srv


def plot_titled(page, text: str, timeout=120_000):
    page.wait_for_function(
        "t => [...document.querySelectorAll('.js-plotly-plot')].some(p => p._fullLayout && "
        "((p.layout.title && (p.layout.title.text || p.layout.title)) || '').includes(t))",
        arg=text, timeout=timeout)


def click_cell(page, title: str, layer: int, head: int) -> None:
    """Click the heatmap cell of (layer, head), 0-based, in the figure titled ``title``."""
    xy = page.evaluate("""([title, layer, head]) => {
        const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
            p => (p.layout.title.text || '').includes(title));
        const L = gd._fullLayout, box = gd.getBoundingClientRect();
        return {x: box.left + L._size.l + L.xaxis.l2p(head), y: box.top + L._size.t + L.yaxis.l2p(layer)};
    }""", [title, layer, head])
    page.mouse.click(xy["x"], xy["y"])


def test_heads_page_and_model_view_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import sync_playwright
    dialogs = []
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        page.get_by_role("link", name="Heads").click()

        # 20 held-out reviews from the data folder: analyse them once, with a bar and an ETA
        page.get_by_text("a data file").click(timeout=120_000)
        page.get_by_role("button", name="Analyse the heads on 20 reviews").click(timeout=120_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=stProgress]')].some("
            "e => e.innerText.includes('review passes') && e.innerText.includes('left'))",
            timeout=120_000)
        shot(page, "heads_00_progress.png", height=1200)
        plot_titled(page, "Head importance", timeout=600_000)
        caption_with(page, "Spearman")
        page.wait_for_timeout(1000)               # let Streamlit attach its selection handler
        shot(page, "heads_01_importance.png", height=2400)
        shutil.copy(ART / "heads_01_importance.png", ROOT / "docs" / "screenshots" / "heads.png")

        # click a head: its numbers and its attention on a review below
        click_cell(page, "Head importance", 3, 9)
        caption_with(page, "Layer 4, head 10:")
        plot_titled(page, "Layer 4, head 10")
        page.mouse.move(5, 5)
        body = page.inner_text("body")
        assert "masking it alone costs" in body
        shot(page, "heads_02_head_on_a_review.png", height=3600)

        page.get_by_role("tab", name="Pruning").click()
        plot_titled(page, "Pruning curve")
        caption_with(page, "of the heads")
        shot(page, "heads_03_pruning.png", height=1600)

        page.get_by_role("tab", name="Roles").click()
        plot_titled(page, "Head atlas")
        shot(page, "heads_04_atlas.png", height=1600)

        page.get_by_role("tab", name="Fine-tuning").click()
        plot_titled(page, "What fine-tuning changed")
        caption_with(page, "Kovaleva")
        shot(page, "heads_05_finetune.png", height=1600)

        model_view(page)

        assert blocked == [], f"requests left localhost: {blocked}"
        assert dialogs == []
        ctx.close()


def model_view(page) -> None:
    """The Predict page: bertviz's model view beside the head view, same window, offline."""
    page.get_by_role("link", name="Predict").click()
    page.locator("textarea").fill("Battery died after two days and support never answered.")
    page.locator("textarea").blur()
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Predict").click()
    page.get_by_role("tab", name="Head view (bertviz)").click(timeout=120_000)
    page.get_by_role("tab", name="Model view (every layer × every head)").click(timeout=120_000)
    page.wait_for_function("""() => [...document.querySelectorAll('iframe')]
        .map(f => f.contentDocument).some(d => d && d.querySelector('#vis svg line')
             && d.querySelectorAll('.attn_background').length === 72)""", timeout=120_000)
    shot(page, "heads_06_model_view.png", height=3000)
