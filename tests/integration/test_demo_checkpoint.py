"""The shipped demo checkpoint: compact, standard, truthful card, and the app opens on it.

- The card's figures must match a fresh `python -m reviewbert evaluate --json` on the
  checkpoint's own test split (rebuilt from ../shared/data), within the card's rounding.
- A fresh clone (only the committed checkpoints) reaches a prediction and its heatmap
  in a real browser.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from browser_support import CHROMIUM, ROOT, StreamlitServer, offline_context, open_view, wait_drawn

DEMO = ROOT / "checkpoints" / "demo"
FILES = ["cell_phones_and_accessories_5core_sample.json", "unlocked_mobile_10k.csv",
         "unlocked_mobile_5k.csv", "iphone_xr_reviews_in.csv", "earphone_reviews_in.csv"]


def test_demo_is_a_compact_standard_checkpoint():
    from safetensors import safe_open
    assert (DEMO / "config.json").exists(), "checkpoints/demo is missing: run make demo-checkpoint"
    size = sum(p.stat().st_size for p in DEMO.iterdir() if p.is_file())
    assert size <= 50 * 2**20, f"demo checkpoint is {size / 2**20:.1f} MB > 50 MB"
    assert (DEMO / "tokenizer.json").exists() or (DEMO / "vocab.txt").exists()
    with safe_open(str(DEMO / "model.safetensors"), "pt") as f:
        dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    assert dtypes == {"F16"}, dtypes
    meta = json.loads((DEMO / "reviewbert.json").read_text())
    assert meta["labels"] == 5
    assert sorted(f["name"] for f in meta["data"]["files"]) == sorted(FILES)


def test_plain_transformers_pipeline_loads_the_demo():
    from transformers import pipeline
    clf = pipeline("text-classification", model=str(DEMO), device="cpu")
    bad, good = clf(["Broke after two days. Waste of money, total junk, do not buy.",
                     "Excellent phone, fast and the battery lasts forever. Love it!"])
    assert bad["label"] in ("1 star", "2 stars")
    assert good["label"] in ("4 stars", "5 stars")


def test_card_matches_a_fresh_evaluation(demo_evaluation):
    from reviewbert.training.card import fmt, read_card_metrics
    card = read_card_metrics(DEMO / "README.md")
    # the card's figures are fp32: the run's one fp32 `evaluate` of the test split, in a
    # symlinked copy of the demo with an empty cache (so a fresh pass, and nothing written
    # into the shipped checkpoint), shared with the report's and the split map's tests
    fresh = demo_evaluation[1]
    assert fresh["precision"] == "fp32" and fresh["cached"] is False
    assert fresh["n"] == card["evaluation"]["n"]
    assert fresh["confusion_matrix"] == card["evaluation"]["confusion_matrix"]
    text = (DEMO / "README.md").read_text()
    for key in ("accuracy", "relaxed_accuracy", "auc", "loss"):
        shown = fmt(key, fresh["metrics"][key])
        assert shown == fmt(key, card["evaluation"]["metrics"][key]), key
        assert f"**{shown}**" in text, f"card table does not show {key} = {shown}"
    # the comparison rows are there, from measured results
    base = card["baseline"]["test"]
    assert f"| {fmt('accuracy', base['accuracy'])} |" in text
    assert "51.7 %" in text and "82.8 %" in text          # the seed report's Table 1


def _demo_elsewhere(tmp_path) -> Path:
    """A copy of the demo whose reviewbert.json points at data paths that do not exist,
    as on a fresh clone on another machine: only REVIEWBERT_DATA_DIR can find the files."""
    import shutil
    root = tmp_path / "checkpoints"
    shutil.copytree(DEMO, root / "demo")
    meta_path = root / "demo" / "reviewbert.json"
    meta = json.loads(meta_path.read_text())
    for f in meta["data"]["files"]:
        f["path"] = str(tmp_path / "elsewhere" / f["name"])
    meta_path.write_text(json.dumps(meta))
    return root


def _open_app(monkeypatch, root, data_dir):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    monkeypatch.setenv("REVIEWBERT_DATA_DIR", str(data_dir))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="checkpoint").value.endswith("demo")
    return at


def _sample(at):
    at.button(key="sample_btn").click()
    at.run()
    assert not at.exception, at.exception
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info])


def test_app_opens_on_the_demo_and_samples_built_in_examples(monkeypatch, tmp_path):
    at = _open_app(monkeypatch, _demo_elsewhere(tmp_path), tmp_path / "no-data-here")
    body = _sample(at)
    assert "built-in examples" in body
    assert "Predicted:" in body


def test_app_samples_the_demo_test_split_when_data_is_configured(monkeypatch, tmp_path, data_dir):
    at = _open_app(monkeypatch, _demo_elsewhere(tmp_path), data_dir)
    body = _sample(at)
    assert "test split" in body and "2,105 reviews" in body
    assert "Predicted:" in body and "True rating" in body


def test_fresh_clone_reaches_a_prediction_in_a_browser(tmp_path):
    """`git clone` of the committed tree: only the shipped checkpoints, no ../shared beside it."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    from playwright.sync_api import sync_playwright
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    kept = sorted(p.name for p in (clone / "checkpoints").iterdir() if p.is_dir())
    assert "demo" in kept
    env = {"REVIEWBERT_DATA_DIR": str(tmp_path / "no-data"), "REVIEWBERT_CHECKPOINTS": "",
           "PYTHONPATH": str(clone)}
    with StreamlitServer(env, tmp_path / "streamlit.log", cwd=clone) as srv, sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        page.goto(srv.url)
        page.get_by_text("Review text").wait_for(timeout=120_000)
        sidebar = page.inner_text("section[data-testid='stSidebar']")
        assert "demo" in sidebar
        text = "Terrible charger. It stopped working after one week and the seller ignored my emails."
        page.locator("textarea").fill(text)
        page.locator("textarea").blur()
        page.wait_for_timeout(300)
        page.get_by_role("button", name="Predict").click()
        # the first attention view, the highlighted review; then the seed report's heatmap
        wait_drawn(page, text, timeout=120_000)
        open_view(page, "[CLS] per layer")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.js-plotly-plot')].some(p => p._fullLayout && "
            "((p.layout.title && p.layout.title.text) || '').includes('[CLS] → token attention'))",
            timeout=120_000)
        body = page.inner_text("body")
        assert "Predicted:" in body
        assert "1 star" in body or "2 stars" in body
        out = ROOT / "artifacts" / "browser"
        out.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1400, "height": 2400})
        page.wait_for_timeout(500)
        page.screenshot(path=str(out / "fresh_clone_demo.png"))
        page.screenshot(path=str(ROOT / "docs" / "screenshots" / "main.png"),   # README, Predict guide
                        clip={"x": 0, "y": 0, "width": 1400, "height": 1900})
        ctx.close()
    assert blocked == []


def test_the_plain_tokenizer_encodes_every_real_review_as_transformers_does(data_dir):
    """reviewbert/model/plain_tokenizer.py (the app's load, without transformers) against the
    demo's transformers tokenizer, on the first 2,000 reviews of every real data file
    (emoji, CJK, HTML entities, embedded newlines): the same ids, offsets, words and
    wordpieces, cut at the demo's own max length."""
    from reviewbert.data import iter_reviews
    from reviewbert.model import plain_tokenizer
    from reviewbert.model.checkpoint import hf_tokenizer
    from reviewbert.model.inference import encode
    demo = ROOT / "checkpoints" / "demo"
    plain, hf = plain_tokenizer.read(demo, hf_tokenizer), hf_tokenizer(demo)
    assert plain is not None
    n = 0
    for f in sorted(data_dir.iterdir()):
        if f.suffix not in (".csv", ".json", ".jsonl"):
            continue
        for i, (text, _) in enumerate(iter_reviews(f)):
            if i == 2000:
                break
            assert encode(plain, text, 256) == encode(hf, text, 256), (f.name, text[:80])
            n += 1
    assert n > 5_000
