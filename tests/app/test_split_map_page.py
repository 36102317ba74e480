"""The Error analysis page's Map, Drivers and Slices tabs and the Compare tab's slice
filter, with Streamlit's AppTest (no browser) on the tiny fixture checkpoints; the
Predict page's nearest reviews. Hostile texts as slice names and phrases."""
from __future__ import annotations

import json
import shutil

import pytest
from app_support import open_view
from test_error_page import PAGE, ckpt_root, open_page, tab, texts  # noqa: F401 - ckpt_root: fixture

from hostile_texts import BY_NAME


@pytest.fixture(scope="module")
def evaluated(ckpt_root):
    return ckpt_root


def array(x):
    """A Plotly JSON array: a list, or numpy's bytes as {"dtype", "bdata"} (base64)."""
    import base64

    import numpy as np
    if isinstance(x, dict) and "bdata" in x:
        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"]).ravel()
    return np.ravel(x)


def _evaluate(monkeypatch, root):
    at = open_page(monkeypatch, root)
    if [b for b in at.button if b.key == "err_evaluate"]:
        at.button(key="err_evaluate").click().run()
        assert not at.exception, at.exception
    return at


def test_map_tab_draws_the_projector_and_its_reading(monkeypatch, evaluated):
    at = _evaluate(monkeypatch, evaluated)
    cache = next((evaluated / "a" / ".analysis").glob("*/predictions.parquet")).parent
    assert list(cache.glob("embeddings-cls-L2.npy"))       # stored by the evaluation itself
    tab(at, "Map")
    out = texts(at)
    assert "What the map shows." in out and "k-NN" in out
    assert [m.label for m in at.metric][:2] == ["Neighbour agreement", "k-NN accuracy (10 neighbours)"]
    charts = at.get("plotly_chart")
    assert charts, "no projector drawn"
    fig = json.loads(charts[0].proto.spec)
    assert {t["type"] for t in fig["data"]} == {"scattergl"}
    rows = sorted(int(r) for t in fig["data"] for r in array(t["customdata"]))
    assert rows == list(range(40))                      # every review once, by its row
    at.selectbox(key="map_color").set_value("confidence").run()
    assert not at.exception, at.exception
    at.selectbox(key="map_method").set_value("PCA 3-D").run()
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["type"] for t in fig["data"]} == {"scatter3d"}
    assert list(cache.glob("projection-cls-L2-pca-3d-*.npy"))


@pytest.mark.umap
def test_map_tab_computes_umap_on_request_in_the_background_and_caches_it(monkeypatch, evaluated):
    at = _evaluate(monkeypatch, evaluated)
    cache = next((evaluated / "a" / ".analysis").glob("*/predictions.parquet")).parent
    tab(at, "Map")
    at.selectbox(key="map_method").set_value("UMAP 2-D").run()
    assert not at.exception, at.exception
    assert any("UMAP of 40 reviews takes about" in i.value for i in at.info)
    assert not list(cache.glob("projection-cls-L2-umap-2d-*.npy"))
    at.button(key="map_umap_button").click().run(timeout=240)   # numba compiles the first time
    assert not at.exception, at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["type"] for t in fig["data"]} == {"scattergl"}
    assert sorted(int(r) for t in fig["data"] for r in array(t["customdata"])) == list(range(40))
    assert list(cache.glob("projection-cls-L2-umap-2d-*.npy"))
    assert not at.get("progress")                          # the bar is gone once it is drawn
    again = _evaluate(monkeypatch, evaluated)                # a new session: from the cache
    tab(again, "Map")
    again.selectbox(key="map_method").set_value("UMAP 2-D").run()
    assert not [b for b in again.button if b.key == "map_umap_button"]
    assert again.get("plotly_chart")


def test_slices_tab_builds_saves_and_compares(monkeypatch, evaluated):
    at = _evaluate(monkeypatch, evaluated)
    tab(at, "Slices")
    assert "Accuracy of each slice minus the rest" in json.loads(
        at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    at.text_input(key="slc_contains").input("terrible").run()
    assert not at.exception, at.exception
    out = texts(at)
    assert "contains “terrible”" in out and "of 40 reviews" in out
    metrics = at.dataframe[1].value
    assert "accuracy gap (slice − rest)" in list(metrics["metric"])
    at.text_input(key="slc_name").input("terrible ones")
    save_button(at).click().run()
    assert not at.exception, at.exception
    folder = next((evaluated / "a" / ".analysis").glob("*/predictions.parquet")).parent
    saved = json.loads((folder / "slices.json").read_text())["slices"]
    assert saved["terrible ones"]["contains"] == "terrible"
    # the Compare tab restricts the comparison to the saved slice
    tab(at, "Compare")
    if [b for b in at.button if b.key == "err_compare_button"]:
        at.button(key="err_compare_button").click().run()
    at.selectbox(key="cmp_slice").set_value("terrible ones").run()
    assert not at.exception, at.exception
    n = int(at.dataframe[0].value.iloc[0, 1])
    assert 0 < n < 40 and "McNemar's test" in texts(at)


def save_button(at):
    return next(b for b in at.button if b.label == "Save slice")


def test_hostile_slice_names_and_phrases(monkeypatch, evaluated):
    """Hostile texts as the phrase and as the name: the page answers with a result or a
    plain message, never an exception; a saved name is stored exactly as checked."""
    from reviewbert.analysis import slices
    at = _evaluate(monkeypatch, evaluated)
    tab(at, "Slices")
    folder = next((evaluated / "a" / ".analysis").glob("*/predictions.parquet")).parent
    for name in ("script tag", "streamlit directives", "bold italics strike",
                 "right to left and bidi overrides", "control characters and NUL",
                 "only whitespace", "100,000 characters"):
        h = BY_NAME[name]
        at.text_input(key="slc_contains").input(h.text[:400]).run()
        assert not at.exception, (name, at.exception)
        if not [t for t in at.text_input if t.key == "slc_name"]:     # the phrase was refused
            assert "Choose at least one condition" in texts(at), name
            at.text_input(key="slc_contains").input("terrible").run()
        at.text_input(key="slc_name").input(h.text[:200])
        save_button(at).click().run()
        assert not at.exception, (name, at.exception)
        out = texts(at)
        try:
            stored = slices.check_name(h.text[:200])
        except slices.SliceError:
            assert "Not saved" in out or "Choose at least one condition" in out, name
            continue
        if "Saved the slice" in out:
            assert stored in json.loads((folder / "slices.json").read_text())["slices"], name


def test_drivers_tab_explains_on_request(monkeypatch, evaluated):
    at = _evaluate(monkeypatch, evaluated)
    tab(at, "Drivers")
    at.selectbox(key="drv_sample").set_value(40).run()
    at.button(key="drv_button").click().run()
    assert not at.exception, at.exception
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles[:3] == ["Integrated Gradients", "Attention × value norm",
                          "Raw attention (last layer)"]
    assert "min per 1,000 reviews" in texts(at)
    at.radio(key="drv_by").set_value("cell").run()
    assert not at.exception, at.exception
    assert any(b.label.startswith("Drivers CSV") for b in at.get("download_button"))


def test_predict_page_lists_nearest_reviews(monkeypatch, evaluated):
    from test_app import predict
    at = _evaluate(monkeypatch, evaluated)
    at.switch_page("pages/predict.py").run()
    predict(at, "Terrible phone, the battery died after two days.")
    assert not at.exception, at.exception
    open_view(at, "Its nearest reviews")
    out = texts(at)
    assert "nearest reviews" in out and "rating the model predicts" in out


def test_predict_page_finds_a_split_evaluated_after_it_first_looked(monkeypatch, evaluated, tmp_path):
    """The split's vectors are kept for every session once found, and only once found: a
    Predict before the evaluation says how to get neighbours, one after it lists them."""
    from test_app import predict
    root = tmp_path / "ckpts"
    shutil.copytree(evaluated / "b", root / "c", ignore=shutil.ignore_patterns(".analysis"))
    at = open_page(monkeypatch, root, "c")
    at.switch_page("pages/predict.py").run()
    predict(at, "Terrible phone, the battery died after two days.")
    open_view(at, "Its nearest reviews")
    assert "Evaluate this checkpoint's test split" in texts(at)
    assert "rating the model predicts" not in texts(at)
    at.switch_page(PAGE).run()
    at.button(key="err_evaluate").click().run()
    assert not at.exception, at.exception
    at.switch_page("pages/predict.py").run()
    predict(at, "Great screen, and the battery lasts two days.")
    open_view(at, "Its nearest reviews")
    out = texts(at)
    assert "nearest reviews" in out and "rating the model predicts" in out
    assert "Evaluate this checkpoint's test split" not in out
