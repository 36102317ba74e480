"""The shipped suite's results on the demo, drawn by the Behaviour page in a real headless
Chromium with every non-localhost request blocked: the suite is run once through the
library on a symlinked copy of the demo (its cache written there), and the page must then
read it, not run it again. Its screenshot is docs/screenshots/behaviour.png."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from demo_support import DEMO, demo_copy

from browser_support import ART, CHROMIUM, ROOT, StreamlitServer, caption_with, offline_context, shot

pytestmark = [pytest.mark.e2e]
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    from reviewbert.behave.runner import run_suite
    from reviewbert.behave.suite import default_suite
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.inference import Predictor
    if not Path(CHROMIUM).exists() or not (DEMO / "model.safetensors").exists():
        pytest.skip("Chromium or the demo is missing")
    root = tmp_path_factory.mktemp("behave-demo")
    demo = demo_copy(root / "ckpts")
    reviews = test_split_examples(json.loads((DEMO / "reviewbert.json").read_text()),
                                  data_dir=data_dir)
    result = run_suite(Predictor.from_checkpoint(demo), default_suite(), reviews,
                       checkpoint=demo)
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data_dir),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1",
           "REVIEWBERT_SUITES": str(root / "suites"), "REVIEWBERT_CACHE": str(root / "cache")}
    with StreamlitServer(env, ART / "streamlit_behave_demo.log") as srv:
        srv.result = result
        yield srv


def test_the_demos_results_are_read_from_the_cache_and_drawn(server, tmp_path):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        t0 = time.perf_counter()
        page.get_by_role("link", name="Behaviour").click()
        caption_with(page, "read from the cache")
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some("
                               "p => p._fullLayout && JSON.stringify(p.data).includes('Negation'))",
                               timeout=60_000)
        seconds = time.perf_counter() - t0
        body = page.locator("body").inner_text()
        n = len(server.result.tests)
        assert f"{n} tests" in body
        assert page.get_by_role("button", name="tests (").count() == 0    # no "Run N tests (M cases)"
        shot(page, "behave_demo_matrix.png", 1500)
        shutil.copy(ART / "behave_demo_matrix.png", ROOT / "docs" / "screenshots" / "behaviour.png")
        print(f"the Behaviour page drew the demo's cached results {seconds:.2f} s after the click")
        assert not errors and not blocked
        ctx.close()
