"""Figures of the failing cohorts: the error tree, an error-rate heat map, the top slices.

Plain results of ``reviewbert.cohorts.finder`` in, Plotly figures out; no Streamlit. Every
text drawn comes from the data (a source file may be called ``<b>x</b>.csv``) and goes
through ``html.escape`` without quotes: Plotly renders a subset of HTML in labels and
hovers, and converts ``&lt;``, ``&gt;`` and ``&amp;`` back, but not ``&quot;``, so escaping
quotes would show ``source == &quot;x&quot;`` in a definition.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reviewbert.cohorts.conditions import describe

COLORSCALE = "Reds"
ACCENT = "#2d6cdf"


def esc(text) -> str:
    """Text for a Plotly label or hover: ``<``, ``>`` and ``&`` escaped, quotes kept."""
    return html.escape(str(text), quote=False)


def _rate(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _pct(x) -> str:
    x = _rate(x)
    return "–" if x is None else f"{x:.1%}"


def _node_label(node, by_id) -> str:
    """The condition a node adds to its parent's (the whole definition for the root)."""
    parent = by_id.get(node.parent)
    if parent is None:
        return describe(node.conditions)
    added = [c for c in node.conditions if c not in set(parent.conditions)]
    return " and ".join(c.text() for c in added) or describe(node.conditions)


def tree_figure(nodes, title: str = "Error tree") -> go.Figure:
    """The error tree (``finder.error_tree``) as an icicle: a box per node, as wide as its
    reviews, coloured by its error rate; the hover gives the definition, n, the error
    rate with its interval and the node's share of all errors."""
    nodes = list(nodes)
    by_id = {c.node_id: c for c in nodes}
    hover = [f"<b>{esc(c.describe())}</b><br>{c.n:,} reviews · {c.errors:,} wrong<br>"
             f"error rate {_pct(c.error_rate)} [{_pct(c.ci_low)}, {_pct(c.ci_high)}]<br>"
             f"{_pct(c.coverage)} of all errors" for c in nodes]
    fig = go.Figure(go.Icicle(
        ids=[str(c.node_id) for c in nodes],
        parents=["" if c.parent is None else str(c.parent) for c in nodes],
        values=[c.n for c in nodes], branchvalues="total",
        labels=[esc(_node_label(c, by_id)) for c in nodes],
        text=[f"{_pct(c.error_rate)} of {c.n:,}" for c in nodes],
        texttemplate="%{label}<br>%{text}",
        customdata=np.array(hover, dtype=object).reshape(-1, 1) if nodes else None,
        hovertemplate="%{customdata[0]}<extra></extra>",
        marker=dict(colors=[_rate(c.error_rate) for c in nodes], colorscale=COLORSCALE,
                    cmin=0, showscale=True,
                    colorbar=dict(title="error rate", tickformat=".0%", thickness=12)),
        tiling=dict(orientation="v"), sort=False))
    fig.update_layout(title=title, height=480, margin=dict(l=10, r=10, t=50, b=10))
    return fig


def heatmap_figure(cells: pd.DataFrame, x: str, y: str, title: str | None = None) -> go.Figure:
    """The error rate over two properties (``finder.heatmap``): colour = error rate (blank
    below ``finder.MIN_CELL`` reviews), hover = the cell's definition, n and errors."""
    xs = cells.drop_duplicates("x_order").sort_values("x_order")["x_bin"].tolist()
    ys = cells.drop_duplicates("y_order").sort_values("y_order")["y_bin"].tolist()
    nx, ny = len(xs), len(ys)
    z = np.full((ny, nx), np.nan)
    hover = np.full((ny, nx), "", dtype=object)
    for r in cells.itertuples(index=False):
        z[r.y_order, r.x_order] = r.error_rate
        hover[r.y_order, r.x_order] = (f"<b>{esc(r.query or 'every review')}</b><br>"
                                       f"{r.n:,} reviews · {r.errors:,} wrong<br>"
                                       f"error rate {_pct(r.error_rate)}")
    fig = go.Figure(go.Heatmap(
        z=z, x=[esc(v) for v in xs], y=[esc(v) for v in ys], customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", colorscale=COLORSCALE, zmin=0,
        colorbar=dict(title="error rate", tickformat=".0%", thickness=12),
        texttemplate="%{z:.0%}", hoverongaps=False))
    fig.update_layout(title=title or f"Error rate by {esc(x)} and {esc(y)}",
                      height=160 + 48 * max(ny, 1), margin=dict(l=90, r=20, t=50, b=60),
                      xaxis=dict(title=esc(x), type="category"),
                      yaxis=dict(title=esc(y), type="category"))
    return fig


def slices_figure(slices, overall_rate: float | None = None,
                  title: str = "Top slices") -> go.Figure:
    """Horizontal bars of the slices' error rates (``finder.top_slices``, worst at the
    top) with their Wilson intervals, and the overall rate as a dashed line (by default
    read back from a slice's rate and lift). Significant slices (after BH) are solid."""
    slices = list(slices)
    if overall_rate is None and slices and _rate(slices[0].lift):
        overall_rate = slices[0].error_rate / slices[0].lift
    labels = [esc(s.describe()) for s in slices]
    rates = np.array([s.error_rate for s in slices], dtype=float)
    fig = go.Figure(go.Bar(
        x=rates, y=labels, orientation="h",
        marker=dict(color=ACCENT, opacity=[1.0 if s.significant else 0.45 for s in slices]),
        error_x=dict(type="data", symmetric=False,
                     array=[s.ci_high - s.error_rate for s in slices],
                     arrayminus=[s.error_rate - s.ci_low for s in slices]),
        customdata=[[s.n, s.errors, _pct(s.coverage), "–" if s.p_adjusted is None
                     else f"{s.p_adjusted:.2g}"] for s in slices],
        hovertemplate="<b>%{y}</b><br>error rate %{x:.1%} (%{customdata[1]:,} of "
                      "%{customdata[0]:,})<br>%{customdata[2]} of all errors<br>"
                      "BH-adjusted p %{customdata[3]}<extra></extra>"))
    if overall_rate is not None:
        fig.add_vline(x=overall_rate, line=dict(dash="dash", color="#555"),
                      annotation_text=f"overall {overall_rate:.1%}",
                      annotation_position="top")
    fig.update_layout(title=title, height=140 + 34 * max(len(slices), 1),
                      margin=dict(l=20, r=20, t=60, b=40),
                      xaxis=dict(title="error rate", tickformat=".0%", rangemode="tozero"),
                      yaxis=dict(autorange="reversed", automargin=True))
    return fig
