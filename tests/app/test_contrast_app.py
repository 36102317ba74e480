""""Why this star and not the next" on Predict's "Which words mattered?" tab, with AppTest:
drawn with the predicted rating and the runner-up, beside plain IG, another pair redrawn."""
from pathlib import Path

import numpy as np
import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from browser_support import write_meta

APP = str(Path(__file__).resolve().parents[2] / "app.py")
REVIEW = "Battery died after two days. Poor quality!"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    import shutil
    root = tmp_path_factory.mktemp("contrast-ckpts")
    shutil.copytree(tiny_model_dir, root / "tiny")
    write_meta(root / "tiny", 5)
    return root


def contrast_rows(at) -> list[str]:
    return [str(m.value) for m in at.html if 'class="rb-contrast"' in str(m.value)]


def expected_pair(ckpt) -> tuple[int, int]:
    """The predicted rating and the runner-up, by the library itself."""
    import torch

    from reviewbert.model.inference import Predictor
    probs = Predictor.from_checkpoint(ckpt, torch.device("cpu")).predict(REVIEW).probs
    first, second = np.argsort(-probs, kind="stable")[:2]
    return int(first), int(second)


def test_the_contrast_draws_predicted_vs_runner_up_beside_ig(monkeypatch, ckpt_root):
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(ckpt_root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.text_area(key="review_text").input(REVIEW)
    at.button(key="predict_btn").click().run()
    open_view(at, "Which words mattered?")
    assert not at.exception, at.exception
    assert any("Add the gradient methods above" in str(c.value) for c in at.caption)
    assert not contrast_rows(at)
    at.button(key="ww_run").click().run()
    assert not at.exception, at.exception
    a, b = at.selectbox(key="ww_contrast_a").value, at.selectbox(key="ww_contrast_b").value
    assert (a, b) == expected_pair(ckpt_root / "tiny")        # predicted, runner-up
    assert not contrast_rows(at)                               # its own button first
    at.button(key="ww_contrast_run").click().run()
    assert not at.exception, at.exception
    rows = contrast_rows(at)
    assert len(rows) == 2                                      # plain IG | the contrast
    assert "rgba(46,160,67" in rows[1] or "rgba(214,39,40" in rows[1]   # green / red words
    caption = next(str(c.value) for c in at.caption if "Completeness" in str(c.value))
    names = ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")
    assert f"toward **{names[a]}** rather than **{names[b]}**" in caption
    assert "convergence delta" in caption and "attributions sum to" in caption
    # another pair: computed at once (no second button), redrawn
    other = next(i for i in range(5) if i not in (a, b))
    at.selectbox(key="ww_contrast_b").set_value(other).run()
    assert not at.exception, at.exception
    assert not [x for x in at.button if x.key == "ww_contrast_run"]
    caption = next(str(c.value) for c in at.caption if "Completeness" in str(c.value))
    assert f"rather than **{names[other]}**" in caption and len(contrast_rows(at)) == 2
    # the same rating twice: one line, nothing computed
    at.selectbox(key="ww_contrast_b").set_value(a).run()
    assert any("two different ratings" in str(i.value) for i in at.info)
    assert not contrast_rows(at)
