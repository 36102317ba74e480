"""The patching heat maps: layer × word and layer × head, the share of the logit difference
each patch restores (``reviewbert/patching/grid.py``).

A diverging scale centred at 0 (white: the patch changes nothing), blue up to 1 (fully
restored), red for a patch that pushes the other way; the scale widens symmetrically
when a cell goes beyond ±1. n/a cells (a word whose wordpiece counts differ, a removed
head) are left blank and say "n/a". Words are the x labels as typed, HTML-escaped
(``whatif/figures.plotly_text``); the x axis is numeric with those labels as tick text,
so that a word met twice keeps two columns.
"""
from __future__ import annotations

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go

from reviewbert.patching.grid import row_name
from reviewbert.whatif.figures import plotly_text

SCALE = "RdBu"
WORD_LIMIT = 24
"""A word longer than this is cut in its tick label (the hover shows it whole, up to 120)."""


def _limits(z: np.ndarray) -> float:
    finite = np.abs(z[np.isfinite(z)])
    return max(1.0, float(finite.max()) if finite.size else 1.0)


def _cells(z: np.ndarray) -> list:
    # |v| < 0.005 prints as 0.00, not "-0.00": a sign on nothing reads as a push the other way
    return [["n/a" if not np.isfinite(v) else "0.00" if abs(v) < 0.005 else f"{v:.2f}"
             for v in row] for row in z]


def _heat(z: np.ndarray, x_text: list[str], y_text: list[str], hover: list[list[str]],
          title: str, x_title: str) -> go.Figure:
    zmax = _limits(z)
    heat = go.Heatmap(
        z=[[None if not np.isfinite(v) else float(v) for v in row] for row in z],
        x=list(range(z.shape[1])), y=list(range(z.shape[0])),
        colorscale=SCALE, zmid=0.0, zmin=-zmax, zmax=zmax, reversescale=False,
        text=_cells(z), texttemplate="%{text}" if z.size <= 400 else None,
        customdata=hover, hovertemplate="%{customdata}<br>restored: %{text}<extra></extra>",
        colorbar={"title": {"text": "restored"}, "tickvals": [-1, 0, 1],
                  "ticktext": ["−1", "0", "1 = fully"]}, xgap=1, ygap=1)
    fig = go.Figure(heat)
    fig.update_layout(title=title, height=max(260, 34 * z.shape[0] + 140),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, plot_bgcolor="#eee")
    fig.update_xaxes(tickvals=list(range(z.shape[1])), ticktext=x_text, title=x_title,
                     tickangle=-45 if z.shape[1] > 8 else 0)
    fig.update_yaxes(tickvals=list(range(z.shape[0])), ticktext=y_text, autorange=True)
    return fig


def word_grid_figure(columns: list[str], grid: np.ndarray) -> go.Figure:
    """Rows: the embeddings' output (bottom) then each layer's; columns: [CLS], words, [SEP]."""
    grid = np.asarray(grid, dtype=np.float64)
    ticks = [plotly_text(c, WORD_LIMIT) for c in columns]
    full = [plotly_text(c) for c in columns]
    rows = [row_name(r) for r in range(grid.shape[0])]
    hover = [[f"{rows[r]} · {full[j]}" for j in range(grid.shape[1])] for r in range(grid.shape[0])]
    return _heat(grid, ticks, rows, hover,
                 "Share of the logit difference restored by patching one (layer, word)", "word")


def head_grid_figure(grid: np.ndarray) -> go.Figure:
    """Rows: layers 1…L; columns: heads 1…H."""
    grid = np.asarray(grid, dtype=np.float64)
    L, H = grid.shape
    rows = [f"layer {li + 1}" for li in range(L)]
    hover = [[f"layer {li + 1} · head {h + 1}" for h in range(H)] for li in range(L)]
    return _heat(grid, [str(h + 1) for h in range(H)], rows, hover,
                 "Share restored by patching one head's output", "head")
