"""The per-layer probes in a real headless Chromium on the shipped demo, every non-localhost
request blocked: the Predict page's Layers tab (this review's probabilities after each
layer, and each layer's probe accuracy, checkpoint against base model) and Inside BERT's
step 4 drawing the same for its sentence. The probes are trained before the server starts,
on a small seeded sample of the demo's splits (the page's button trains on the whole splits);
and the pages find them in the cache beside the checkpoint.
Screenshots go to artifacts/browser/."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_support import ART, CHROMIUM, StreamlitServer, caption_with, offline_context, open_view

pytestmark = [pytest.mark.e2e]
playwright = pytest.importorskip("playwright.sync_api")

REVIEW = "Terrible battery, it died after two days and support never answered."
N = 150
CHARTS = """([names, n]) => [...document.querySelectorAll('.js-plotly-plot')].filter(
    p => p._fullLayout && p.data && names.every(t => JSON.stringify(p.data).includes(t))
).length >= n"""


def train_small(ck: Path, data_dir: Path) -> None:
    """The demo's probes with the pages' settings, on N seeded reviews of each split."""
    import torch

    from reviewbert.data.splits import splits_from_meta
    from reviewbert.heads.analysis import sample_reviews
    from reviewbert.layers import analysis as layer_analysis
    from reviewbert.model.checkpoint import load_checkpoint
    model, tok, info = load_checkpoint(ck, torch.device("cpu"), attn_implementation="eager")
    splits = splits_from_meta(info.meta, data_dir=data_dir, tokenizer=tok)
    layer_analysis.analyze(model, tok, info.path, sample_reviews(list(splits.train), N, 0),
                           sample_reviews(list(splits.test), N, 0), info.scheme, max_length=256,
                           base_model=info.base_model)
    assert layer_analysis.latest(ck) is not None


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    from demo_support import demo_copy
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("layers-browser")
    ck = demo_copy(root / "ckpts")
    train_small(ck, data_dir)
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data_dir),
           "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / "streamlit_layers.log") as srv:
        yield srv


def test_predict_layers_tab_and_inside_bert_step_4(server, tmp_path):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        page.locator("textarea").first.fill(REVIEW)
        page.locator("textarea").first.blur()
        page.wait_for_timeout(300)
        page.get_by_role("button", name="Predict").click()
        open_view(page, "Layers")
        caption_with(page, "Probes fitted on")
        # this review's heat map (layers down, stars across) and the accuracy per layer
        page.wait_for_function(CHARTS, arg=[["embeddings", "layer 6", "5 stars"], 1],
                               timeout=60_000)
        page.wait_for_function(CHARTS, arg=[["probe on the fine-tuned checkpoint",
                                             "probe on the base model"], 1], timeout=60_000)
        body = page.inner_text("[data-testid=stMain]")
        assert "The probes pick" in body or "does not pick" in body
        assert "Train the per-layer probes" not in body
        page.set_viewport_size({"width": 1400, "height": 2400})
        page.wait_for_timeout(800)
        page.screenshot(path=str(ART / "predict_layers.png"))
        page.set_viewport_size({"width": 1400, "height": 1000})

        page.goto(server.url + "/inside_bert")
        caption_with(page, "What [CLS] already says after each layer")
        page.wait_for_function(CHARTS, arg=[["embeddings", "layer 6", "5 stars"], 1],
                               timeout=120_000)
        assert "time flies like an arrow" in page.inner_text("[data-testid=stMain]")
        chart = page.locator(".js-plotly-plot").filter(has_text="What a linear probe reads").first
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        chart.screenshot(path=str(ART / "inside_bert_layers.png"))
        assert not errors, errors
        assert not blocked, blocked
        ctx.close()
