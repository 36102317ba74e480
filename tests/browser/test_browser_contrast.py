""""Why this star and not the next" on the shipped demo in a real headless Chromium, every
non-localhost request blocked: drawn beside plain IG with green/red words, then redrawn for
another pair. Screenshots go to artifacts/browser/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_support import ART, CHROMIUM, StreamlitServer, caption_with, offline_context, open_view, shot

pytestmark = [pytest.mark.e2e]
pytest.importorskip("playwright.sync_api")

REVIEW = "Works fine. Screen is great <img src=x onerror=alert(1)> but it arrived with a scratch."
NAMES = ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")
RIGHT = "document.querySelectorAll('.rb-contrast')"


def coloured_words(page) -> dict:
    """How many words of the contrast column are drawn green and red."""
    return page.evaluate(f"""() => {{ const row = {RIGHT}[1];
        const spans = [...row.querySelectorAll('span.rb-w')].map(s => s.getAttribute('style') || '');
        return {{green: spans.filter(s => s.includes('rgba(46,160,67')).length,
                 red: spans.filter(s => s.includes('rgba(214,39,40')).length}}; }}""")


def test_the_contrast_is_drawn_beside_ig_and_redrawn_for_another_pair(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    from demo_support import demo_copy
    from playwright.sync_api import sync_playwright
    demo_copy(tmp_path / "ckpts")           # the demo's files symlinked: caches go to tmp_path
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(tmp_path / "ckpts"), "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / "streamlit_contrast.log") as srv, sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "chromium-profile")
        pg = ctx.new_page()
        dialogs = []
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        pg.goto(srv.url)
        pg.get_by_text("Review text").wait_for(timeout=90_000)
        pg.locator("textarea").fill(REVIEW)
        pg.locator("textarea").blur()
        pg.wait_for_timeout(300)
        pg.get_by_role("button", name="Predict").click()
        open_view(pg, "Which words mattered?")
        caption_with(pg, "Add the gradient methods above")
        pg.get_by_role("button", name="Add the gradient methods").click(timeout=60_000)
        # the pickers start at the predicted rating and the runner-up; the button names them
        button = pg.get_by_role("button", name=re.compile("^Contrast "))
        button.wait_for(timeout=120_000)
        a, b = re.match(r"Contrast (\d stars?) with (\d stars?)", button.inner_text()).groups()
        assert a != b and f"Predicted: {a}" in pg.inner_text("body")
        button.click()
        caption_with(pg, f"toward {a} rather than {b}")
        pg.wait_for_function(f"() => {RIGHT}.length === 2", timeout=30_000)
        words = coloured_words(pg)
        assert words["green"] + words["red"] > 3, words
        assert "<img src=x onerror=alert(1)>" in pg.locator(".rb-contrast").nth(1).inner_text()
        assert pg.locator(".rb-contrast img").count() == 0          # the review stays text
        body = pg.inner_text("body")
        assert "Completeness" in body and "convergence delta" in body
        pg.get_by_text("Why this star and not the next").scroll_into_view_if_needed()
        shot(pg, "contrast_01_default.png", height=3600)

        other = next(n for n in NAMES if n not in (a, b))
        box = pg.locator('[data-testid="stSelectbox"]').filter(
            has=pg.get_by_text("…and not rating b", exact=True)).first
        box.locator("input").click()
        box.locator("input").fill(other)
        pg.keyboard.press("Enter")
        caption_with(pg, f"toward {a} rather than {other}")      # no second button: at once
        pg.wait_for_function(f"() => {RIGHT}.length === 2", timeout=30_000)
        assert coloured_words(pg)["green"] + coloured_words(pg)["red"] > 3
        shot(pg, "contrast_02_other_pair.png", height=3600)
        assert blocked == [], f"requests left localhost: {blocked}"
        assert dialogs == []
        ctx.close()
