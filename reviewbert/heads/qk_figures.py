"""Figures of the Heads page's query–key map: one head's queries and keys in one joint
projection (Plotly scattergl), and every head's small map in a layers × heads matrix to
pick one from.

The numbers come from ``reviewbert/heads/qkmap.py``. A hover shows the token in its review,
a few wordpieces each side, the token in bold: the review is data, so every piece of it
goes through ``html.escape`` first (Plotly renders a subset of HTML in hover labels).
In the matrix, as in the Heads page's heatmaps (``heads/figures.py``), a cell's x and y
are the head's and the layer's 0-based positions (what a click reports), layer 1 at the top.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reviewbert.heads.figures import clickable
from reviewbert.heads.qkmap import KINDS

COLOUR_BY = {"type": "query or key", "position": "position in the review", "kind": "token kind"}
SIDES = (("queries", "query", "#1b9e77", "circle"), ("keys", "key", "#e7298a", "diamond"))
KIND_COLOURS = {"[CLS]": "#d1495b", "[SEP]": "#edae49", "punctuation": "#7a7a7a",
                "word": "#2d6cdf", "subword": "#9b5de5"}
THUMB = 0.42            # half the width of a head's small map, in cells
CELL_PX = 66


def hover_texts(tokens: pd.DataFrame, side: str) -> list[str]:
    """Per token: query or key, review and position, kind, and the escaped window with the
    token in bold."""
    out = []
    for r, p, kind, left, tok, right in zip(tokens.review, tokens.position, tokens.kind,
                                            tokens.left, tokens.token, tokens.right):
        shown = tok[2:] if tok.startswith("##") and not left.endswith(" ") and left else tok
        out.append(f"<b>{side}</b> · review {int(r) + 1}, token {int(p)} ({html.escape(kind)})<br>"
                   f"{html.escape(left)}<b>{html.escape(shown)}</b>{html.escape(right)}")
    return out


def _points(coords: np.ndarray, n: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(coords)[side * n:(side + 1) * n]
    return c[:, 0], c[:, 1]


def qk_figure(coords, tokens: pd.DataFrame, colour: str, title: str) -> go.Figure:
    """One head's map: ``coords`` [2n, 2] (the n tokens' queries, then their keys), coloured
    by ``colour`` (a key of :data:`COLOUR_BY`)."""
    if colour not in COLOUR_BY:
        raise ValueError(f"colour must be one of {', '.join(COLOUR_BY)}, not {colour!r}")
    n = len(tokens)
    texts = [hover_texts(tokens, s[1]) for s in SIDES]
    if colour == "kind":
        traces = _by_kind(coords, tokens, texts)
    else:
        traces = []
        for i, (name, _, hue, symbol) in enumerate(SIDES):
            x, y = _points(coords, n, i)
            marker = dict(size=5, opacity=0.7, symbol=symbol, color=hue)
            if colour == "position":
                marker.update(color=tokens.position.to_numpy(), colorscale="Viridis", cmin=0,
                              cmax=max(int(tokens.position.max()), 1),
                              colorbar=dict(title=dict(text="position")) if i == 0 else None,
                              showscale=i == 0)
            traces.append(go.Scattergl(x=x, y=y, mode="markers", name=name, marker=marker,
                                       text=texts[i], hovertemplate="%{text}<extra></extra>"))
    return go.Figure(traces, dict(
        title=dict(text=title), height=640, margin=dict(l=40, r=20, t=70, b=40),
        legend=dict(orientation="h", y=-0.06, itemsizing="constant"), hovermode="closest",
        xaxis=dict(showticklabels=False, zeroline=False, title=None),
        yaxis=dict(showticklabels=False, zeroline=False, title=None, scaleanchor="x")))


def _by_kind(coords, tokens: pd.DataFrame, texts: list[list[str]]) -> list:
    """One trace per token kind, queries as circles and keys as diamonds."""
    n = len(tokens)
    kinds = tokens.kind.to_numpy()
    out = []
    for kind in KINDS:
        idx = np.flatnonzero(kinds == kind)
        if not len(idx):
            continue
        both = np.concatenate([idx, n + idx])
        xy = np.asarray(coords)[both]
        out.append(go.Scattergl(
            x=xy[:, 0], y=xy[:, 1], mode="markers", name=kind,
            marker=dict(size=5, opacity=0.7, color=KIND_COLOURS[kind],
                        symbol=["circle"] * len(idx) + ["diamond"] * len(idx)),
            text=[texts[0][i] for i in idx] + [texts[1][i] for i in idx],
            hovertemplate="%{text}<extra></extra>"))
    return out


def thumbnails_figure(thumbs: np.ndarray, alive: np.ndarray, selected: tuple[int, int] | None) -> go.Figure:
    """Every head's small map (``qkmap.thumbnails``: [L, H, 2, n, 2] in [-1, 1]) in its cell
    of a layers × heads grid; a click on a cell selects that head (``selected`` is framed)."""
    L, H = alive.shape
    li, h = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    heat = go.Heatmap(z=[[1.0 if a else None for a in row] for row in alive], showscale=False,
                      colorscale=[[0, "#f3f4f7"], [1, "#f3f4f7"]], xgap=3, ygap=3,
                      customdata=np.stack([li + 1, h + 1], axis=-1),
                      hovertemplate="layer %{customdata[0]}, head %{customdata[1]}: click to "
                                    "map it<extra></extra>")
    fig = go.Figure(heat, dict(
        title=dict(text="Every head: queries (green) and keys (pink); click one to map it"),
        height=110 + 62 * L, width=max(560, 110 + CELL_PX * H), showlegend=False,
        margin=dict(l=60, r=20, t=50, b=45), plot_bgcolor="white",
        xaxis=dict(title=dict(text="head"), tickmode="array", tickvals=list(range(H)),
                   ticktext=[str(i + 1) for i in range(H)], range=[-0.5, H - 0.5], showgrid=False,
                   zeroline=False),
        yaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(L)),
                   ticktext=[str(i + 1) for i in range(L)], range=[L - 0.5, -0.5], showgrid=False,
                   zeroline=False)))
    clickable(fig, fig.data[0], size=int(CELL_PX * 0.8))
    for side, (name, _, hue, _) in enumerate(SIDES):
        pts = thumbs[:, :, side]                                  # [L, H, n, 2]
        x = (np.arange(H)[None, :, None] + THUMB * pts[..., 0]).ravel()
        y = (np.arange(L)[:, None, None] - THUMB * pts[..., 1]).ravel()
        keep = np.isfinite(x) & np.isfinite(y)
        fig.add_trace(go.Scattergl(x=x[keep], y=y[keep], mode="markers", name=name,
                                   hoverinfo="skip", marker=dict(size=2.5, color=hue, opacity=0.7)))
    if selected is not None:
        sl, sh = selected
        fig.add_shape(type="rect", x0=sh - 0.48, x1=sh + 0.48, y0=sl - 0.48, y1=sl + 0.48,
                      line=dict(color="#d1495b", width=2))
    return fig


def click_targets(fig: go.Figure):
    """The transparent square markers a click lands on (one per head still there)."""
    (sc,) = [t for t in fig.data if t.type == "scatter" and t.marker.symbol == "square"]
    return sc
