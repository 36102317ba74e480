"""The "Inside BERT" page in a real headless Chromium, every non-localhost request blocked.

Serves the shipped demo checkpoint (MiniLM fine-tuned; the embedded MiniLM with an
untrained head if the demo is missing). Screenshots go to artifacts/browser/, and
one to docs/screenshots/inside_bert.png for the docs.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_support import CHROMIUM, ROOT, StreamlitServer, make_minilm_checkpoint, offline_context

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

ART = ROOT / "artifacts" / "browser"
DOCS_SHOT = ROOT / "docs" / "screenshots" / "inside_bert.png"
DEMO = ROOT / "checkpoints" / "demo"
STEPS = ["1. Tokens", "2. Input embeddings", "3. One attention head, by hand",
         "4. All heads of the layer", "5. Static versus contextual", "6. From [CLS] to stars"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("teach-ckpts")
    if (DEMO / "config.json").exists():
        # The demo's own files, linked, but allowed 256 tokens (it was trained on 128) so
        # that a 200-token review is read whole and the head view can slide to its end.
        ck = root / "demo"
        ck.mkdir()
        for f in DEMO.iterdir():
            if f.name != "reviewbert.json":
                (ck / f.name).symlink_to(f)
        meta = json.loads((DEMO / "reviewbert.json").read_text())
        meta["hyperparameters"]["max_length"] = 256
        (ck / "reviewbert.json").write_text(json.dumps(meta))
    else:
        make_minilm_checkpoint(root / "minilm")
    ART.mkdir(parents=True, exist_ok=True)
    with StreamlitServer({"REVIEWBERT_CHECKPOINTS": str(root)}, ART / "streamlit_teaching.log") as srv:
        yield srv


def long_review(n_tokens: int = 200) -> str:
    """About ``n_tokens`` wordpieces (with [CLS]/[SEP]), from "honestly" to "recommended"."""
    from transformers import AutoTokenizer

    from reviewbert.model.checkpoint import resolve_base_model
    tok = AutoTokenizer.from_pretrained(resolve_base_model(None))
    phrase = "the battery lasts two days and the screen is bright ."
    words = ["honestly"]
    while len(tok(" ".join(words + phrase.split() + ["recommended"]))["input_ids"]) <= n_tokens:
        words += phrase.split()
    return " ".join(words + ["recommended"])


def full_height(page) -> int:
    return page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")


def shot(page, name: str, clip: dict | None = None, path: Path | None = None):
    """Streamlit scrolls inside its main block: grow the viewport to the page, then shoot."""
    page.set_viewport_size({"width": 1400, "height": min(full_height(page) + 100, 15000)})
    page.wait_for_timeout(1200)
    page.screenshot(path=str(path or ART / name), clip=clip)
    page.set_viewport_size({"width": 1400, "height": 1000})


def heading(page, text: str):
    return page.locator("[data-testid=stMain] h2").filter(has_text=text).first


def test_inside_bert_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.goto(server.url + "/inside_bert")
        heading(page, STEPS[-1]).wait_for(timeout=120_000)

        # every step is drawn for the default sentence, with its charts and its checks
        for title in STEPS:
            expect(heading(page, title)).to_be_visible()
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 20",
                               timeout=60_000)
        # the last step's heading can arrive before an earlier step's check line: wait
        # for all four checks (passed or not), then read them
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=stMain]').innerText"
            ".match(/ Checked: /g) || []).length >= 4", timeout=60_000)
        body = page.inner_text("[data-testid=stMain]")
        assert body.count("✓ Checked") == 4, body
        assert "same matrix that the heatmaps on the main page draw" in body
        assert "6 layers, 12 heads × 32 dimensions = hidden size 384" in body
        assert "Step 7, the masked language model, is hidden" in body
        hv = page.frame_locator("iframe").first
        expect(hv.locator("#vis svg #left text")).to_have_count(7)   # [CLS] time flies like an arrow [SEP]
        shot(page, "inside_bert_full.png")
        page.set_viewport_size({"width": 1400, "height": min(full_height(page) + 100, 15000)})
        page.wait_for_timeout(800)
        main = page.locator("[data-testid=stMainBlockContainer]").bounding_box()
        top = heading(page, STEPS[2]).bounding_box()
        bottom = page.get_by_text("Spell out the softmax of row").bounding_box()
        page.screenshot(path=str(DOCS_SHOT), clip={"x": main["x"], "y": top["y"] - 8,
                                                   "width": main["width"],
                                                   "height": bottom["y"] - top["y"] + 10})
        page.set_viewport_size({"width": 1400, "height": 1000})

        # classroom mode: one step at a time, forward and back
        page.get_by_text("Classroom", exact=True).click()
        page.get_by_text("Step 1 of 6").wait_for()
        expect(page.locator("[data-testid=stMain] h2")).to_have_count(1)
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_text("Step 2 of 6").wait_for()
        expect(heading(page, STEPS[1])).to_be_visible()
        page.get_by_role("button", name="◀ Back").click()
        page.get_by_text("Step 1 of 6").wait_for()
        expect(heading(page, STEPS[0])).to_be_visible()
        for n in (2, 3, 4):
            page.get_by_role("button", name="Next ▶").click()
            page.get_by_text(f"Step {n} of 6").wait_for()
        expect(heading(page, STEPS[3])).to_be_visible()
        expect(page.locator("[data-testid=stMain] h2")).to_have_count(1)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ART / "inside_bert_classroom_step4.png"))

        # a 200-token review (still on step 4, where the head view is): the window moves
        # to the review's end, and [CLS]/[SEP] stay
        box = page.get_by_role("textbox", name="Sentence", exact=True)
        box.fill(long_review(200))
        box.press("Enter")
        slider = page.locator('[data-testid="stSlider"]').filter(has_text="Head view window")
        slider.wait_for(timeout=60_000)
        hv = page.frame_locator("iframe").first
        left = hv.locator("#vis svg #left text")
        expect(left).to_have_count(48, timeout=30_000)
        assert left.nth(0).text_content() == "[CLS]" and left.nth(47).text_content() == "[SEP]"
        assert left.nth(1).text_content() == "honestly"
        slider.locator('input[type="range"]').focus()
        page.keyboard.press("End")
        expect(left.nth(46)).to_have_text("recommended", timeout=30_000)
        assert left.nth(0).text_content() == "[CLS]" and left.nth(47).text_content() == "[SEP]"
        assert "honestly" not in [left.nth(i).text_content() for i in range(48)]
        shot(page, "inside_bert_200_tokens_window_end.png")

        assert blocked == [], f"requests left localhost: {blocked}"
        ctx.close()
