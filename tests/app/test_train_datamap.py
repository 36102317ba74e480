"""The Train page's data map, driven with Streamlit's AppTest: drawn for a recorded run, a clear
note for a run trained before it, and its regions saved as Error analysis slices."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from reviewbert.analysis.slices import load_saved
from reviewbert.config import TrainConfig
from reviewbert.datamap import NOT_RECORDED
from reviewbert.datamap.slices import SLICE_NAMES
from reviewbert.training import train
from reviewbert.ui import state as S

from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def env(monkeypatch, tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    toy = write_toy_csv(data / "toy.csv", n=150)
    for name, var in (("ckpts", "REVIEWBERT_CHECKPOINTS"), ("data", "REVIEWBERT_DATA_DIR"),
                      ("uploads", "REVIEWBERT_UPLOADS_DIR"), ("ckpts/.queue", "REVIEWBERT_QUEUE_DIR"),
                      ("cache", "REVIEWBERT_CACHE")):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=32, epochs=2,
                      batch_size=8, seed=0, max_per_class=12, lr_bert=1e-3, lr_classifier=1e-2)
    train(cfg, tmp_path / "ckpts" / "mapped", log=lambda *a: None)
    yield tmp_path
    torch.set_num_threads(old)


def runs_view() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(S.TRAIN_PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def datamap_expander(at):
    found = [e for e in at.expander if e.label == "Data map"]
    assert len(found) == 1, [e.label for e in at.expander]
    return found[0]


def test_a_recorded_run_shows_its_map_and_region_counts(env):
    at = runs_view()
    box = datamap_expander(at)
    assert {m.label for m in box.metric} == {"easy-to-learn", "ambiguous", "hard-to-learn"}
    n = json.loads((env / "ckpts" / "mapped" / "reviewbert.json").read_text())["split_sizes"]["train"]
    assert sum(int(m.value.replace(",", "")) for m in box.metric) == n
    chart = [c for c in at.get("plotly_chart") if c.key == "datamap_figure"]
    assert len(chart) == 1
    fig = json.loads(chart[0].proto.spec)
    assert len(fig["data"][0]["hovertext"]) == n
    assert all("true:" in h for h in fig["data"][0]["hovertext"])  # texts from the data file
    assert "Hover shows no review text" not in " ".join(c.value for c in box.caption)


def test_a_run_from_before_the_data_map_says_so(env):
    (env / "ckpts" / "mapped" / "datamap.safetensors").unlink()
    at = runs_view()
    box = datamap_expander(at)
    assert any(NOT_RECORDED in i.value for i in box.info)
    assert not [c for c in at.get("plotly_chart") if c.key == "datamap_figure"]


def test_the_regions_are_saved_as_error_analysis_slices(env):
    at = runs_view()
    at.button(key="datamap_slices_btn").click().run()
    assert not at.exception, at.exception
    box = datamap_expander(at)
    assert box.success, [e.value for e in box.error]
    folders = list((env / "ckpts" / "mapped" / "best").glob(".analysis/*/slices.json")) or \
        list((env / "cache").rglob("slices.json"))
    assert len(folders) == 1
    saved = load_saved(folders[0].parent)
    assert set(saved) <= set(SLICE_NAMES.values()) and saved
    assert all(spec.rows for spec in saved.values())
    # Error analysis, on the best checkpoint's training split, offers them
    at.selectbox(key="checkpoint").set_value(str(env / "ckpts" / "mapped" / "best")).run()
    at.switch_page(S.ERROR_PAGE)
    at.run()
    at.radio(key=S.ERR_SOURCE).set_value("train split").run()
    assert not at.exception, at.exception
    at.session_state[S.ERR_TAB] = "Slices"
    at.run()
    assert not at.exception, at.exception
    assert set(at.selectbox(key=S.SLC_SAVED).options) == set(saved)
