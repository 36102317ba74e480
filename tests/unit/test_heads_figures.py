"""The Heads page's figures, built from a hand-made result with one head removed: heads
and layers numbered from 1 in the hover, a click target on every head still there and
none on the removed one, roles as categories, the pruning curve's three orders and
Michel's 40 % line."""
from __future__ import annotations

import numpy as np
import pytest

from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import figures as heads_figures
from reviewbert.heads import importance as heads
from reviewbert.heads import roles as head_roles


@pytest.fixture
def res():
    L, H = 2, 3
    alive = np.ones((L, H), dtype=bool)
    alive[1, 2] = False
    rng = np.random.default_rng(0)
    nan_gone = lambda a: np.where(alive, a, np.nan)  # noqa: E731
    curve = [{"fraction": f, "heads_masked": k, "accuracy": 0.6 - f / 2,
              "relaxed_accuracy": 0.9 - f / 4, "auc": 0.85 - f / 5} for f, k in ((0.0, 0), (0.4, 2))]
    rand = [dict(p, **{f"{m}_{e}": p[m] + d for m in ("accuracy", "relaxed_accuracy", "auc")
                       for e, d in (("min", -0.05), ("max", 0.05))}) for p in curve]
    atlas = {s: nan_gone(rng.random((L, H))) for s in head_roles.STATS}
    atlas["cls"][0, 0] = 0.9
    return head_analysis.HeadsResult(
        n=10, alive=alive, importance_raw=np.where(alive, rng.random((L, H)), 0.0),
        masking=heads.MaskingDrops(0.6, 0.7, nan_gone(rng.random((L, H)) / 10),
                                   nan_gone(rng.random((L, H)) / 10)),
        pruning={"least": curve, "most": curve, "random": rand}, atlas=atlas,
        finetune_js=nan_gone(rng.random((L, H))))


def overlay(fig):
    (sc,) = [t for t in fig.data if t.type == "scatter" and t.marker.symbol == "square"]
    return sc


def test_importance_figure_clicks_and_hover(res):
    fig = heads_figures.importance_figure(res, rho=0.5)
    sc = overlay(fig)
    cells = set(zip(sc.x, sc.y))
    assert cells == {(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)}          # not (head 3, layer 2)
    first = list(sc.customdata[0])
    assert first[:2] == [1, 1]                                          # numbered from 1
    assert first[-1] == pytest.approx(res.importance[0, 0])            # the cell's value
    assert "%{z" not in sc.hovertemplate and "customdata[0]" in sc.hovertemplate
    assert fig.layout.clickmode == "event+select" and "0.50" in fig.layout.title.text
    heat = fig.data[0]
    assert heat.hoverinfo == "skip" and heat.z[1][2] is None           # the removed head: blank


def test_atlas_by_role_and_by_number(res):
    fig = heads_figures.atlas_figure(res, "role")
    assert fig.data[0].text[0][0] == heads_figures.ROLE_SHORT[res.roles[0][0]]
    assert list(fig.data[0].colorbar.ticktext) == list(head_roles.ROLES)
    assert overlay(fig).text[0] == res.roles[0][0]                      # the hover: full name
    fig = heads_figures.atlas_figure(res, "entropy")
    assert fig.data[0].z[0][1] == pytest.approx(res.atlas["entropy"][0, 1])


def test_pruning_figure(res):
    fig = heads_figures.pruning_figure(res.pruning)
    names = {t.name for t in fig.data if t.name}
    assert names == {v[0] for v in heads_figures.ORDER_STYLE.values()}
    assert sum(1 for t in fig.data if t.fill == "toself") == 3          # the random band, x3
    vlines = [s for s in fig.layout.shapes if s.x0 == s.x1 == 40]
    assert len(vlines) == 3


def test_finetune_and_head_figures(res):
    fig = heads_figures.finetune_figure(res.finetune_js, res.alive)
    bars = [t for t in fig.data if t.type == "bar"][0]
    assert bars.x[1] == pytest.approx(np.nanmean(res.finetune_js[1]))
    fig = heads_figures.head_attention_figure(["[CLS]", "good", "[SEP]"], np.eye(3), 0, 1, "diagonal")
    assert "Layer 1, head 2 (diagonal)" in fig.layout.title.text
