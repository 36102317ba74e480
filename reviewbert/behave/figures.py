"""Figures of a behavioural run: the capability × test type matrix of fail rates, and a comparison's bars.

Capabilities and test names come from suite files that anyone may write: they go on the
axes and in the hover text through ``html.escape``, because Plotly renders a subset of
HTML in labels (``<a href>``, ``<b>``, ``<br>``) and these names are data, never markup.
Plain results in, Plotly figures out; no Streamlit.
"""
from __future__ import annotations

import html
import math

import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go

from reviewbert.behave.runner import SuiteResult
from reviewbert.behave.suite import TYPES

FAIL_SCALE = [[0.0, "#1b998b"], [0.5, "#f4d35e"], [1.0, "#d7263d"]]
REGRESSION, OTHER = "#d7263d", "#8a94a6"


def _label(text: str, limit: int = 80) -> str:
    """A user's name as axis or hover text: cut, and escaped so Plotly shows it as typed."""
    text = " ".join(str(text).split())
    return html.escape(text if len(text) <= limit else text[:limit - 1] + "…", quote=False)


def matrix_cells(result: SuiteResult) -> tuple[list[str], list[list[dict | None]]]:
    """(capabilities in order of first appearance, cells [capability][type]): each cell
    pools its tests ({"failed", "scored", "tests"}), None where there is no test."""
    capabilities = list(dict.fromkeys(t.capability for t in result.tests))
    cells: list[list[dict | None]] = [[None] * len(TYPES) for _ in capabilities]
    for t in result.tests:
        i, j = capabilities.index(t.capability), TYPES.index(t.type)
        cell = cells[i][j] or {"failed": 0, "scored": 0, "tests": []}
        cell["failed"] += t.failed
        cell["scored"] += t.scored
        cell["tests"].append(t.name)
        cells[i][j] = cell
    return capabilities, cells


def matrix(result: SuiteResult) -> go.Figure:
    """The heat map of fail rates: capabilities down, MFT/INV/DIR across, colour = fail
    rate 0..1 (the cell's tests pooled), text "34 % (n=120)" (n: cases scored), blank where
    the suite has no such test."""
    capabilities, cells = matrix_cells(result)
    z = [[_rate(cell) for cell in row] for row in cells]
    text = [[_cell_text(cell) for cell in row] for row in cells]
    hover = [[_cell_tests(cell) for cell in row] for row in cells]
    labels = [_label(c) for c in capabilities]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(TYPES), y=labels, text=text, texttemplate="%{text}", customdata=hover,
        hovertemplate="%{y} · %{x}<br>%{text}<br>%{customdata}<extra></extra>",
        colorscale=FAIL_SCALE, zmin=0, zmax=1, xgap=2, ygap=2,
        colorbar={"title": "fail rate", "tickformat": ".0%"}))
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_xaxes(type="category", side="top")
    fig.update_layout(height=max(260, 34 * len(capabilities) + 120),
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def compare_bars(df) -> go.Figure:
    """Each test's difference in fail rate (b − a) with its Newcombe interval, a
    regression (the interval above zero) in red; ``df``: ``compare.compare``'s table."""
    rows = [r for r in df.to_dict("records") if not _nan(r["diff"])]
    names = [_label(f"{r['name']} ({r['type']})") for r in rows]
    fig = go.Figure(go.Bar(
        x=[r["diff"] for r in rows], y=names, orientation="h",
        marker_color=[REGRESSION if r["regression"] else OTHER for r in rows],
        error_x={"type": "data", "symmetric": False,
                 "array": [r["diff_high"] - r["diff"] for r in rows],
                 "arrayminus": [r["diff"] - r["diff_low"] for r in rows]},
        customdata=[[_label(r["capability"]), r["fail_rate_a"], r["fail_rate_b"]] for r in rows],
        hovertemplate="%{y}<br>%{customdata[0]}<br>a %{customdata[1]:.0%} → b "
                      "%{customdata[2]:.0%}<br>b − a %{x:+.0%}<extra></extra>"))
    fig.add_vline(x=0, line_color="#444", line_width=1)
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_xaxes(tickformat="+.0%", title="fail rate, b − a (95 % interval)")
    fig.update_layout(height=max(240, 24 * len(rows) + 100),
                      margin={"l": 10, "r": 10, "t": 20, "b": 40})
    return fig


def _rate(cell: dict | None) -> float | None:
    return cell["failed"] / cell["scored"] if cell and cell["scored"] else None


def _cell_text(cell: dict | None) -> str:
    if cell is None:
        return ""
    if not cell["scored"]:
        return "– (n=0)"        # every case filtered: no fail rate
    return f"{100 * cell['failed'] / cell['scored']:.0f} % (n={cell['scored']:,})"


def _cell_tests(cell: dict | None, most: int = 12) -> str:
    """The cell's tests for the hover (escaped: the names are data)."""
    if cell is None:
        return ""
    names = [_label(n) for n in cell["tests"][:most]]
    return "<br>".join(names + (["…"] if len(cell["tests"]) > most else []))


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
