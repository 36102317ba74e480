"""The dashboard's logic without Streamlit: the seed grid preset, the runs as the seed's
Table 1, which trial a click names, the theme, and the standalone HTML export."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from reviewbert.training import experiments, search
from reviewbert.training.search import figures as search_figures
from reviewbert.training.search import seed_grid


def test_the_seed_grid_is_table_1s_axes_sized_to_the_budget(tmp_path):
    data = tmp_path / "r.csv"
    data.write_text("review,rating\nfine,5\n")
    spec = search.SearchSpec.from_args(["--data", str(data), "--preset", "seed", "--epochs", "12",
                                        "--max-per-class", "60", "--max-length", "96"])
    assert spec.grid == {"labels": [5, 3], "lr_classifier": [1e-3, 1e-2, 1e-1],
                         "lr_bert": [1e-5, 1e-4, 1e-3], "lr_decay": [0.5]}
    assert spec.size == 18
    assert (spec.base["epochs"], spec.base["max_per_class"], spec.base["max_length"]) == (12, 60, 96)
    assert spec.base["weight_decay"] == 0.01 and spec.base["lr_step_epochs"] == 5  # the seed's
    short = search.SearchSpec.from_args(["--data", str(data), "--preset", "seed", "--epochs", "3"])
    assert short.base["lr_step_epochs"] == 1     # halved: the decay still acts within 3 epochs
    # what the user gives wins over the preset, and a CLI round trip keeps it all
    mine = search.SearchSpec.from_args(["--data", str(data), "--preset", "seed", "--epochs", "4",
                                        "--weight-decay", "0", "--grid", "labels=3",
                                        "--lr-bert", "2e-5"])
    assert mine.grid["labels"] == [3] and "lr_bert" not in mine.grid and mine.size == 3
    assert mine.base["weight_decay"] == 0.0 and mine.base["lr_bert"] == 2e-5
    assert search.SearchSpec.from_args(mine.to_args()) == mine
    rows = seed_grid.editor_rows()
    assert rows[0] == {"hyperparameter": "labels", "values": "5, 3"}
    assert "18 trials" in seed_grid.describe(4) and "halved to fit 4 epochs" in seed_grid.describe(4)


def row(run, labels, lr_c, lr_b, val_acc, test_acc=None, state="finished", trial=None):
    r = {"run": run, "state": state, "labels": labels, "LR classifier": lr_c, "LR BERT": lr_b,
         "LR decay": 0.5, "weight decay": 0.01, "trial": trial, "path": f"/c/{run}"}
    for _, title in experiments.METRICS:
        r[f"{title} test"] = r[f"{title} val"] = None
    if val_acc is not None:
        r.update({"% correct val": val_acc, "% correct test": test_acc or val_acc - 1,
                  "Cross-entropy val": 1.23456, "Cross-entropy test": 1.3,
                  "AUC-ROC val": 0.79, "AUC-ROC test": 0.786})
    return r


def test_the_runs_as_table_1_mark_the_best_row_of_each_label_count():
    df = pd.DataFrame([row("a", 5, 1e-3, 1e-5, 50.0), row("b", 5, 1e-2, 1e-4, 52.5, 49.0),
                       row("c", 3, 1e-3, 1e-5, 74.6), row("d", 3, 1e-1, 1e-3, 60.0),
                       row("e", 5, 1e-1, 1e-3, None, state="pruned")])
    table = experiments.seed_table(df)
    assert list(table["run"]) == ["a", "b", "e", "c", "d"]        # 5 labels first, by LRs
    assert list(table["best"]) == ["", "★", "", "★", ""]          # by validation, per labels
    b = table.set_index("run").loc["b"]
    assert b["% correct (test | val)"] == "49.0 | 52.5"
    assert b["Cross-entropy (test | val)"] == "1.300 | 1.235"
    assert table.set_index("run").loc["e", "AUC-ROC (test | val)"] == "– | –"
    by_loss = experiments.seed_table(df, "loss")
    assert by_loss["best"].tolist().count("★") == 2
    assert experiments.seed_table(pd.DataFrame()).empty


def test_a_click_names_its_trial():
    fig = go.Figure([go.Scatter(name="Trial3", x=[1, 2], y=[0.1, 0.2]),
                     go.Scatter(name="Trial10", x=[1], y=[0.3])])
    assert search_figures.clicked_trials("history", fig, [{"x": 7, "y": 0.5}, {"x": 7}]) == [7]
    assert search_figures.clicked_trials("intermediate", fig,
                                         [{"curve_number": 1, "x": 1}]) == [10]
    assert search_figures.clicked_trials("slice", fig, [{"x": 1e-5}]) == []
    assert search_figures.trial_number("pruned") is None


def test_the_theme_comes_from_the_apps_config_and_the_html_is_standalone(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[theme]\nprimaryColor = "#123456"\ntextColor = "#222222"\n'
                   'backgroundColor = "#fefefe"\nsecondaryBackgroundColor = "#eeeeee"\n')
    theme = search_figures.app_theme(cfg)
    assert theme["primaryColor"] == "#123456"
    fig = search_figures.apply_theme(go.Figure(go.Bar(x=[1], y=["a"])), theme)
    assert fig.layout.paper_bgcolor == "#fefefe" and fig.layout.font.color == "#222222"
    assert fig.data[0].marker.color == "#123456"
    assert search_figures.app_theme(tmp_path / "missing.toml")["primaryColor"]  # defaults
    html = search_figures.figure_html(fig)
    # plotly.js inline (its source names a CDN only for geo maps, never loaded here)
    assert "<script src=" not in html and len(html) > 1_000_000


@pytest.mark.parametrize("n_params, n, trusted", [(1, 9, False), (1, 10, True), (3, 14, False),
                                                  (3, 15, True)])
def test_the_too_few_rule(n_params, n, trusted):
    assert (n >= search_figures.trusted_minimum(n_params)) is trusted
