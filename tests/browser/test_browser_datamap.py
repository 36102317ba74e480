"""The Train page's data map in a real headless Chromium, offline: a run trained (tiny random
BERT, toy file) with the data map recorded shows its scatter, one WebGL point per training
review, hover texts from the data file, and the three region counts.
Screenshot: artifacts/browser/train_datamap.png."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser_support import CHROMIUM, ROOT, StreamlitServer, offline_context, shot
from toyreviews import write_toy_csv

pytestmark = [pytest.mark.e2e]
playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

ART = ROOT / "artifacts" / "browser"


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_dir):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    import torch

    from reviewbert.config import TrainConfig
    from reviewbert.training import train
    tmp = tmp_path_factory.mktemp("datamap-browser")
    toy = write_toy_csv(tmp / "data" / "toy.csv", n=150)
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=32,
                          epochs=2, batch_size=8, seed=0, max_per_class=12, lr_bert=1e-3,
                          lr_classifier=1e-2), tmp / "ckpts" / "mapped", log=lambda *a: None)
    finally:
        torch.set_num_threads(old)
    env = {"REVIEWBERT_CHECKPOINTS": str(tmp / "ckpts"), "REVIEWBERT_DATA_DIR": str(tmp / "data"),
           "REVIEWBERT_UPLOADS_DIR": str(tmp / "uploads"), "OMP_NUM_THREADS": "1"}
    ART.mkdir(parents=True, exist_ok=True)
    with StreamlitServer(env, ART / "streamlit_datamap.log") as srv:
        srv.tmp = tmp
        yield srv


def test_the_data_map_is_drawn_on_the_train_page(server):
    from playwright.sync_api import sync_playwright
    n = json.loads((server.tmp / "ckpts" / "mapped" / "reviewbert.json").read_text())[
        "split_sizes"]["train"]
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, server.tmp / "profile")
        page = ctx.new_page()
        try:
            page.goto(server.url + "/train")
            page.get_by_text("Train a model").wait_for(timeout=90_000)
            page.locator("[data-testid=stExpander] summary").filter(has_text="Data map").click()
            box = page.locator("[data-testid=stExpander]").filter(has_text="Data map")
            for region in ("easy-to-learn", "ambiguous", "hard-to-learn"):
                expect(box.locator("[data-testid=stMetric]").filter(has_text=region)).to_be_visible(
                    timeout=60_000)
            page.wait_for_function(
                "n => [...document.querySelectorAll('.js-plotly-plot')].some("
                "p => p._fullData && p._fullData.some(t => t.type === 'scattergl' "
                "&& t.hovertext && t.hovertext.length === n "
                "&& t.hovertext.every(h => h.includes('true:'))))",
                arg=n, timeout=90_000)
            expect(box).not_to_contain_text("Hover shows no review text")
            shot(page, "train_datamap.png")
        except BaseException:
            page.screenshot(path=str(ART / "train_datamap_failure.png"), full_page=True)
            raise
        assert blocked == [], blocked
        ctx.close()
