"""Figures of the split map: the projector (WebGL), the per-rating drivers and the
slices' forest plot. Plain data in, Plotly out; no Streamlit.

The projector draws with WebGL (``Scattergl`` in 2-D, ``Scatter3d`` in 3-D), so
10,000 points pan and zoom smoothly. Every point's ``customdata`` is its row in the
split (what a box or lasso selection hands back). Review text on hover goes through
``html.escape``: Plotly renders a subset of HTML in hover labels, and a review is data.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reviewbert.analysis.figures import CLASS_COLORS
from reviewbert.viz.figures import png_bytes as figure_png

COLOR_BY = ("true rating", "predicted rating", "correct or wrong", "star distance",
            "confidence", "length (tokens)", "source file", "label issue (cleanlab)")
DISTANCE_COLORS = ("#1b998b", "#c5a100", "#f46036", "#d7263d", "#6a0d1f")
OTHER_COLORS = ("#2e86ab", "#e8871e", "#6a4c93", "#1b998b", "#d7263d", "#8c564b", "#7f7f7f",
                "#bcbd22", "#17becf", "#e377c2")
HOVER_CHARS = 90


@dataclass
class Colouring:
    """How points are coloured: categorical (``labels`` per point, ``order``, ``colors``)
    or continuous (``values`` per point, ``title``)."""
    title: str
    labels: np.ndarray | None = None
    order: list | None = None
    colors: list | None = None
    values: np.ndarray | None = None


def colouring(by: str, preds, flagged=None) -> Colouring:
    """The colouring of ``preds``' points for one of :data:`COLOR_BY`."""
    names = preds.names
    if by in ("true rating", "predicted rating"):
        cls = preds.y if by == "true rating" else preds.pred
        return Colouring(by, np.array(names, dtype=object)[cls], list(names), list(CLASS_COLORS))
    if by == "correct or wrong":
        lab = np.where(preds.correct, "correct", "wrong")
        return Colouring(by, lab, ["correct", "wrong"], ["#9bb7d4", "#d7263d"])
    if by == "star distance":
        d = np.abs(preds.y - preds.pred)
        order = [f"{i} star{'s' if i != 1 else ''} off" for i in range(int(d.max(initial=0)) + 1)]
        return Colouring(by, np.array(order, dtype=object)[d], order, list(DISTANCE_COLORS))
    if by == "confidence":
        return Colouring(by, values=preds.confidence)
    if by == "length (tokens)":
        return Colouring("tokens", values=preds.n_tokens.astype(float))   # capped at the 98th pct
    if by == "source file":
        src = preds.frame["source"].astype(str).replace("", "(none)").to_numpy()
        order = sorted(set(src))
        return Colouring(by, src, order, [OTHER_COLORS[i % len(OTHER_COLORS)]
                                          for i in range(len(order))])
    if by == "label issue (cleanlab)":
        if flagged is None:
            raise ValueError("no cleanlab result to colour by")
        lab = np.where(np.asarray(flagged), "flagged by cleanlab", "not flagged")
        return Colouring(by, lab, ["not flagged", "flagged by cleanlab"], ["#9bb7d4", "#d7263d"])
    raise ValueError(f"colour by one of {', '.join(COLOR_BY)}, not {by!r}")


def hover_texts(preds) -> np.ndarray:
    """Per point: the first words (escaped), true and predicted rating, confidence."""
    names = preds.names
    out = []
    for text, y, p, c in zip(preds.frame["text"], preds.y, preds.pred, preds.confidence):
        t = " ".join(str(text).split())
        t = t if len(t) <= HOVER_CHARS else t[:HOVER_CHARS] + "…"
        out.append(f"{html.escape(t)}<br>true <b>{html.escape(names[y])}</b> · predicted "
                   f"<b>{html.escape(names[p])}</b> ({c:.0%})")
    return np.array(out, dtype=object)


def _trace(coords, rows, hover, name, marker, dims, showlegend=True):
    common = dict(mode="markers", name=name, customdata=rows, hovertext=hover[rows],
                  hovertemplate="%{hovertext}<extra></extra>", marker=marker,
                  showlegend=showlegend)
    if dims == 3:
        return go.Scatter3d(x=coords[rows, 0], y=coords[rows, 1], z=coords[rows, 2], **common)
    return go.Scattergl(x=coords[rows, 0], y=coords[rows, 1], **common)


def projector_figure(coords, col: Colouring, hover, title: str, *, highlight=None,
                     size: int = 5) -> go.Figure:
    """The projector. ``highlight`` rows (a selected review's neighbours, say) are drawn
    on top as rings."""
    coords = np.asarray(coords)
    dims = coords.shape[1]
    size = size if dims == 2 else max(2, size - 2)
    fig = go.Figure()
    if col.values is None:
        for i, cat in enumerate(col.order):
            rows = np.flatnonzero(col.labels == cat)
            if len(rows):
                marker = dict(size=size, color=col.colors[i % len(col.colors)], opacity=0.75)
                fig.add_trace(_trace(coords, rows, hover, f"{cat} ({len(rows):,})", marker, dims))
    else:
        rows = np.arange(len(coords))
        hi = float(np.nanpercentile(col.values, 98)) if len(rows) else 1.0
        marker = dict(size=size, color=col.values, colorscale="Viridis", opacity=0.8,
                      cmin=float(np.nanmin(col.values, initial=0)), cmax=hi,
                      colorbar=dict(title=col.title, thickness=12))
        fig.add_trace(_trace(coords, rows, hover, col.title, marker, dims, showlegend=False))
    if highlight is not None and len(highlight):
        rows = np.asarray(highlight, dtype=np.int64)
        ring = dict(size=size + 9, color="rgba(0,0,0,0)", line=dict(color="#111", width=2))
        fig.add_trace(_trace(coords, rows, hover, "selected / neighbours", ring, dims))
    axes = dict(showticklabels=False, title="", zeroline=False)
    fig.update_layout(title=title, height=640, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(itemsizing="constant"), dragmode="lasso" if dims == 2 else None,
                      clickmode="event+select", hovermode="closest", uirevision=title)
    if dims == 3:
        fig.update_layout(scene=dict(xaxis=axes, yaxis=axes, zaxis=axes))
    else:
        fig.update_xaxes(**axes)
        fig.update_yaxes(**axes, scaleanchor="x", scaleratio=1)
    return fig


def drivers_figure(tops: dict, names: list[str], title: str, value_label: str) -> go.Figure:
    """One horizontal bar chart per group (``drivers.top_drivers``): words and their mean
    score, counts on hover. Negative bars (IG against the prediction) in grey."""
    groups = [g for g in tops if tops[g] is not None and not tops[g].empty]
    if not groups:
        return go.Figure().update_layout(title=title + " (no word meets the minimum count)")
    fig = make_subplots(rows=1, cols=len(groups), horizontal_spacing=0.08,
                        subplot_titles=[html.escape(str(names[g])) for g in groups])
    for j, g in enumerate(groups):
        df = tops[g]
        col = [CLASS_COLORS[j % len(CLASS_COLORS)] if v >= 0 else "#999" for v in df["score"]]
        fig.add_trace(go.Bar(
            x=df["score"], y=[html.escape(w) for w in df["word"]], orientation="h",
            marker_color=col, customdata=df["reviews"], showlegend=False,
            hovertemplate="%{y}: %{x:.4f}<br>in %{customdata} reviews<extra></extra>"), 1, j + 1)
        fig.update_yaxes(autorange="reversed", row=1, col=j + 1)
    fig.update_layout(title=title, height=440, margin=dict(l=60, r=20, t=80, b=40),
                      xaxis_title=value_label)
    return fig


def slices_figure(table, top: int = 15) -> go.Figure:
    """A forest plot: each slice's accuracy minus the rest's, with its 95 % interval."""
    t = table.head(top).iloc[::-1]
    fig = go.Figure(go.Scatter(
        x=t["gap"], y=[html.escape(str(s)) for s in t["slice"]], mode="markers",
        marker=dict(size=9, color=np.where(t["gap_high"] < 0, "#d7263d", "#2e86ab")),
        error_x=dict(type="data", symmetric=False, array=t["gap_high"] - t["gap"],
                     arrayminus=t["gap"] - t["gap_low"]),
        customdata=np.stack([t["n"], t["accuracy"], t["rest_accuracy"]], axis=1),
        hovertemplate="%{y}<br>%{customdata[0]} reviews<br>accuracy %{customdata[1]:.1%} vs "
                      "rest %{customdata[2]:.1%}<br>gap %{x:+.1%}<extra></extra>"))
    fig.add_vline(x=0, line_dash="dot", line_color="#777")
    fig.update_layout(title="Accuracy of each slice minus the rest (95 % interval)",
                      height=max(320, 34 * len(t) + 110), margin=dict(l=260, r=20, t=50, b=50),
                      xaxis=dict(title="accuracy gap", tickformat="+.0%"))
    return fig


def svg_copy(fig: go.Figure) -> go.Figure:
    """The same figure with every WebGL ``Scattergl`` trace as a plain SVG ``Scatter``: what
    a static image renderer (kaleido) draws without a GPU."""
    data = []
    for t in fig.data:
        if t.type == "scattergl":
            d = t.to_plotly_json()
            d.pop("type", None)
            data.append(go.Scatter(**d))
        else:
            data.append(t)
    return go.Figure(data=data, layout=fig.layout)


def png_bytes(fig: go.Figure, width: int = 900, height: int = 640) -> bytes:
    """The map as a PNG (reviewbert.viz.figures.png_bytes), its WebGL traces drawn as SVG ones."""
    return figure_png(svg_copy(fig), width, height)
