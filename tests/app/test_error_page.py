"""The Error analysis page, driven with Streamlit's AppTest (no browser), on tiny
fixture checkpoints whose test split is a small toy file."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from browser_support import write_meta
from conftest import make_tiny_model
from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGE = "pages/error_analysis.py"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    """Two 5-label checkpoints trained on nothing, whose reviewbert.json names a toy file
    (40 per class, so a test split of 40 reviews), and a 3-label one."""
    root = tmp_path_factory.mktemp("err-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=250)
    a = root / "a"
    shutil.copytree(tiny_model_dir, a)
    write_meta(a, 5, data_file=toy, max_length=48, max_per_class=40)
    write_meta(make_tiny_model(root / "b", seed=3), 5, data_file=toy, max_length=48,
               max_per_class=40)
    return root


def open_page(monkeypatch, root, checkpoint: str = "a") -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.selectbox(key="checkpoint").set_value(str(root / checkpoint)).run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def ensure_evaluated(monkeypatch, root) -> None:
    """The checkpoint's test split evaluated and cached, by a first visit's button if
    no test before has done it (so that a test run alone, or in another order, holds)."""
    at = open_page(monkeypatch, root)
    if [b for b in at.button if b.key == "err_evaluate"]:
        at.button(key="err_evaluate").click().run()
        assert not at.exception, at.exception
    assert list((root / "a" / ".analysis").glob("*/predictions.parquet"))


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error, at.success) for e in kind]
    return "\n".join(str(p) for p in parts)


def tab(at, name: str) -> AppTest:
    at.session_state["err_tab"] = name
    at.run()
    assert not at.exception, at.exception
    return at


def test_evaluate_once_then_every_section(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root)
    assert "have not been evaluated" in texts(at)
    cache = ckpt_root / "a" / ".analysis"
    assert not cache.exists()
    at.button(key="err_evaluate").click().run()
    assert not at.exception, at.exception
    assert len(list(cache.glob("*/predictions.parquet"))) == 1     # saved beside the checkpoint
    out = texts(at)
    assert "40 reviews · test split of toy.csv" in out and "cached in" in out
    assert [t.label for t in at.tabs] == ["Overview", "Errors", "Label issues",
                                          "Per-rating attention", "Map", "Drivers", "Slices",
                                          "Brittleness", "Compare", "Export"]
    # overview: the four metrics with intervals, per class, the seed-filter table
    metrics = at.dataframe[0].value
    assert list(metrics["metric"])[:2] == ["accuracy", "relaxed accuracy (±1 star)"]
    assert all("–" in v for v in metrics["95% interval"])

    # errors: the browser's filters narrow the table
    import pandas as pd
    frame = pd.read_parquet(next(cache.glob("*/predictions.parquet")))
    tab(at, "Errors")
    assert f"{(frame['label'] != frame['pred']).sum()} of 40 reviews" in texts(at)
    at.checkbox(key="err_only_wrong").uncheck().run()
    assert "40 of 40 reviews" in texts(at)
    at.multiselect(key="err_true").set_value(["1 star"]).run()
    assert "8 of 40 reviews" in texts(at)
    at.text_input(key="err_search").input("terrible").run()
    assert "8 of 40 reviews" in texts(at)          # every 1-star toy review says "terrible"
    at.text_input(key="err_search").input("excellent").run()
    assert "0 of 40 reviews" in texts(at)

    # label issues: cleanlab's count and the metrics without the flagged reviews
    out = texts(tab(at, "Label issues"))
    assert "cleanlab flags" in out and "upper bound" in out

    # per-rating attention: one pass on request, cached with the predictions
    tab(at, "Per-rating attention")
    at.button(key="err_att_button").click().run()
    assert not at.exception, at.exception
    assert len(list(cache.glob("*/attention.parquet"))) == 1
    assert at.selectbox(key="err_att_layer").value == 0           # second-to-last of 2 layers

    # compare with checkpoint b: evaluated on request on the very same reviews
    tab(at, "Compare")
    at.button(key="err_compare_button").click().run()
    assert not at.exception, at.exception
    assert "McNemar's test" in texts(at)
    assert len(list((ckpt_root / "b" / ".analysis").glob("*/predictions.parquet"))) == 1

    # export: predictions CSV, the one-file report, every figure as HTML
    tab(at, "Export")
    at.button(key="err_build_report").click().run()
    assert not at.exception, at.exception
    labels = [b.label for b in at.get("download_button")]
    assert {"Predictions CSV", "Download the report", "HTML (interactive, offline)"} <= set(labels)
    assert "rating_words" in at.selectbox(key="err_fig").options


def test_second_visit_reads_the_cache(monkeypatch, ckpt_root):
    """A visit after the evaluation: no button, the page opens on the saved predictions."""
    ensure_evaluated(monkeypatch, ckpt_root)
    at = open_page(monkeypatch, ckpt_root)
    assert "have not been evaluated" not in texts(at) and "cached in" in texts(at)
    assert not [b for b in at.button if b.key == "err_evaluate"]


def test_predict_page_samples_among_cached_mistakes(monkeypatch, ckpt_root):
    import pandas as pd
    ensure_evaluated(monkeypatch, ckpt_root)
    at = open_page(monkeypatch, ckpt_root)
    frame = pd.read_parquet(next((ckpt_root / "a" / ".analysis").glob("*/predictions.parquet")))
    wrong = set(frame.loc[frame["label"] != frame["pred"], "text"])
    at.switch_page("pages/predict.py").run()
    at.checkbox(key="sample_wrong").check().run()
    for _ in range(3):
        at.button(key="sample_btn").click().run()
        assert not at.exception, at.exception
        assert at.text_area(key="review_text").value in wrong
        assert "misclassified" in texts(at)
