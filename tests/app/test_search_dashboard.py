"""The Train page's Search view as a dashboard (AppTest): Optuna's figures of a finished
search, fANOVA naming the parameter a seeded toy objective makes important, the trials
as the seed's Table 1, a clicked trial selected and overlaid, and the seed-grid preset."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from reviewbert.ui import state as S

from search_support import build_search
from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name, var in (("ckpts", "REVIEWBERT_CHECKPOINTS"), ("data", "REVIEWBERT_DATA_DIR"),
                      ("uploads", "REVIEWBERT_UPLOADS_DIR")):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(tmp_path / name))
    write_toy_csv(tmp_path / "data" / "toy.csv", n=100)
    return tmp_path


def search_view() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(S.TRAIN_PAGE).run()
    at.radio(key=S.TRAIN_VIEW).set_value("Search").run()
    assert not at.exception, at.exception
    return at


def charts(at) -> dict[str, dict]:
    """The drawn Plotly figures by their key's last part (history, importances, ...)."""
    return {el.key.rsplit("_", 1)[-1]: json.loads(el.proto.spec)
            for el in at.get("plotly_chart") if (el.key or "").startswith(S.SEARCH_FIG)}


def text_of(at) -> str:
    parts = [e.value for kind in (at.error, at.warning, at.info, at.success) for e in kind]
    return "\n".join(map(str, parts + [m.value for m in at.markdown] + [c.value for c in at.caption]))


def test_a_finished_search_shows_optunas_figures_and_names_the_important_parameter(env):
    build_search(env / "ckpts" / "toy-grid", env / "data" / "toy.csv")
    at = search_view()
    figs = charts(at)
    assert set(figs) == {"history", "importances", "parallel", "contour", "slice",
                         "intermediate"}, set(figs)
    titles = {k: f["layout"]["title"]["text"] for k, f in figs.items()}
    assert titles["history"] == "Optimisation history"
    status = json.loads((env / "ckpts" / "toy-grid" / "status.json").read_text())
    n_done = status["complete"]
    assert titles["importances"] == f"Parameter importances (fANOVA), {n_done} finished trials"
    bar = figs["importances"]["data"][0]
    assert bar["type"] == "bar" and bar["y"][-1] == "lr_bert"   # the longest bar: on top
    assert max(bar["x"]) == bar["x"][-1] and bar["x"][-1] > 0.5
    assert "lr_bert" in titles["contour"] and "lr_bert" in titles["slice"]
    assert figs["contour"]["data"][0]["type"] == "contour"
    assert sum(t.get("mode") == "lines" for t in figs["parallel"]["data"]) == n_done  # a line each
    # the intermediate values: one curve per trial, the pruned ones dotted and named so
    curves = [t for t in figs["intermediate"]["data"] if t.get("name", "").startswith("Trial")]
    assert len(curves) == 24 and status["pruned"] > 0
    pruned = [t for t in curves if t.get("line", {}).get("dash") == "dot"]
    assert len(pruned) == status["pruned"]
    assert all("(pruned)" in t["hovertemplate"] for t in pruned)
    # the app's theme (.streamlit/config.toml), as the exports get it
    assert figs["history"]["layout"]["paper_bgcolor"] == "#ffffff"
    assert figs["history"]["layout"]["font"]["color"] == "#1f2430"
    assert "fANOVA" in text_of(at) and f"{n_done} finished trials" in text_of(at)
    assert "too few" not in text_of(at) and "rank noise" not in text_of(at)
    # the trials as the seed's Table 1: one best row per label count, marked
    table = next(d.value for d in at.dataframe if "best" in d.value.columns)
    assert len(table) == 24 and list(table["best"]).count("★") == 1
    best = table[table["best"] == "★"].iloc[0]
    assert best["trial"] == status["best_trial"] and best["LR BERT"] == 3e-5
    assert "% correct (test | val)" in table.columns
    assert not at.exception, at.exception


def test_few_trials_get_a_note_and_a_clicked_trial_is_selected_and_overlaid(env):
    build_search(env / "ckpts" / "small", env / "data" / "toy.csv",
                 grid={"lr_bert": [1e-5, 1e-4], "lr_classifier": [1e-3, 1e-2]}, prune=False)
    at = search_view()
    assert "only 4 finished trials for 2 parameter(s)" in text_of(at)
    assert "⚠ too few trials to trust" in json.dumps(charts(at)["importances"], ensure_ascii=False)
    # export: the chosen figure as PNG (kaleido in Debian's Chromium) and as offline HTML
    at.selectbox(key=S.SEARCH_EXPORT).set_value("contour").run()
    at.button(key="search_make_png").click().run()
    assert not at.exception, at.exception
    png = at.session_state[S.SEARCH_PNG]
    assert ":contour:" in png[0] and png[1][:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png[1]) > 10_000
    # a click on trial 2's point in the history (what the browser sends back)
    key = next(el.key for el in at.get("plotly_chart") if el.key.endswith("_history"))
    at.session_state[key] = {"selection": {"points": [{"x": 2, "y": 0.4, "curve_number": 0,
                                                        "point_index": 2}],
                                           "point_indices": [2], "box": [], "lasso": []}}
    at.run()
    assert not at.exception, at.exception
    assert "Selected trials, overlaid" in text_of(at)
    assert at.session_state[S.PENDING_OVERLAY] == [str(env / "ckpts" / "small" / "trial-0002")]
    # ... and the Runs view's table comes with that trial selected and its curves drawn
    at.radio(key=S.TRAIN_VIEW).set_value("Runs").run()
    assert not at.exception, at.exception
    assert "Selected runs, overlaid" in text_of(at)


def test_the_seed_grid_preset_fills_the_search_form(env):
    at = search_view()
    at.number_input(key=S.SEED_BUDGET + "epochs").set_value(3)
    at.number_input(key=S.SEED_BUDGET + "max_per_class").set_value(40)
    at.number_input(key=S.SEED_BUDGET + "max_length").set_value(64)
    at.button(key="seed_preset_btn").click().run()
    assert not at.exception, at.exception
    at.multiselect(key=S.TRAIN_FILES).set_value([str(env / "data" / "toy.csv")]).run()
    assert at.number_input(key=S.CONFIG_FIELD + "epochs").value == 3
    assert at.number_input(key=S.CONFIG_FIELD + "max_per_class").value == 40
    assert at.number_input(key=S.CONFIG_FIELD + "max_length").value == 64
    assert at.number_input(key=S.CONFIG_FIELD + "lr_step_epochs").value == 1
    assert at.number_input(key=S.CONFIG_FIELD + "weight_decay").value == 0.01
    assert "18 trial(s), objective: validation accuracy" in text_of(at)
