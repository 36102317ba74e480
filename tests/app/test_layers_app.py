"""The Predict page's Layers tab with AppTest, on a tiny checkpoint whose reviewbert.json
records a toy training file: a button when the probes are not trained, then the bar, this
review's per-layer probabilities and the per-layer accuracy; a new session reads the cache
beside the checkpoint instead of training again."""
from __future__ import annotations

from pathlib import Path

import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from reviewbert.layers import analysis as layer_analysis
from reviewbert.ui import state

from browser_support import write_meta
from conftest import make_tiny_model
from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")
REVIEW = "good phone, good battery, the screen is <b>bright</b>"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("layers-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=200)
    write_meta(make_tiny_model(root / "tiny", layers=2), 5, data_file=toy, max_length=64,
               max_per_class=30)
    return root


def predicted(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.text_area(key="review_text").input(REVIEW)
    at.button(key="predict_btn").click()
    at.run()
    open_view(at, state.LAYERS_VIEW)
    assert not at.exception, at.exception
    return at


def captions(at) -> str:
    return "\n".join(str(c.value) for c in at.caption)


def test_train_on_request_then_read_from_the_cache(monkeypatch, ckpt_root):
    at = predicted(monkeypatch, ckpt_root)
    assert any("not been trained" in str(i.value) for i in at.info)
    assert layer_analysis.latest(ckpt_root / "tiny") is None
    at.button(key="layers_train").click()
    at.run()
    assert not at.exception, at.exception
    assert not any("not been trained" in str(i.value) for i in at.info)
    text = captions(at)
    assert "The probes pick" in text or "does not pick" in text
    assert "Probes fitted on" in text
    assert len(at.get("plotly_chart")) >= 3           # the prediction's bars and both views
    done = layer_analysis.latest(ckpt_root / "tiny")
    assert done is not None and [r["layer"] for r in done.layers] == [0, 1, 2]

    again = predicted(monkeypatch, ckpt_root)           # a new session: from the cache
    assert not any("not been trained" in str(i.value) for i in again.info)
    assert "Probes fitted on" in captions(again)
    assert [b for b in again.button if b.key == "layers_train"] == []
