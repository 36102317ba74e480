"""Figure builders for the explanations and their faithfulness: plain results in,
Plotly figures out. No Streamlit, no model.

- :func:`methods_heatmap`: rows = methods, columns = words, each row scaled by its
  own largest |score| (methods live on different scales: attention shares, log-
  probability attributions), on one diverging scale whose colours match the
  highlighted text (orange for the prediction, blue against it, white = 0).
- :func:`agreement_heatmap`: the Spearman matrix.
- :func:`faithfulness_curves` and :func:`aopc_bars`: ERASER's measures per method
  and k, with the bootstrap intervals as error bars.
"""
from __future__ import annotations

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go
from plotly.colors import get_colorscale
from plotly.subplots import make_subplots

from reviewbert.viz.figures import FAST_TICKS, OWN_TEMPLATE, _chunks, figure_width, unchecked_figure

# Same colours as highlight.highlight_html: rgb (for) and rgb_neg (against).
RDBU = get_colorscale("RdBu")      # the agreement matrix's scale (reversed there)
DIVERGING = [[0.0, "rgb(45,108,223)"], [0.5, "rgb(255,255,255)"], [1.0, "rgb(255,170,0)"]]
METHOD_COLORS = {"raw_attention": "#e8871e", "rollout": "#2a9d5c", "value_norm": "#9b59b6",
                 "grad_x_input": "#d62728", "integrated_gradients": "#2d6cdf",
                 "lime": "#8c564b", "occlusion": "#17becf", "random": "#7f7f7f"}
MEASURE_TITLES = {"comprehensiveness": "Comprehensiveness ↑ (delete the top k %)",
                  "sufficiency": "Sufficiency ↓ (keep only the top k %)"}


def row_scaled(scores, signed: bool) -> np.ndarray:
    """One method's scores divided by their largest |score| (signed: in [-1, 1];
    unsigned: negatives drawn as 0, in [0, 1])."""
    s = np.asarray(scores, dtype=np.float64)
    if not signed:
        s = np.clip(s, 0.0, None)
    top = float(np.abs(s).max()) if s.size else 0.0
    return s / top if top > 0 else np.zeros_like(s)


def methods_heatmap(results, words: list[str], wrap: int | None = 48) -> go.Figure:
    """Rows = methods (``TokenScores``), columns = the review's words, wrapped every
    ``wrap`` columns into stacked blocks like lines of text."""
    names = [f"{r.label}" for r in results]
    z = np.stack([row_scaled(r.scores, r.signed) for r in results]) if results else np.zeros((0, 0))
    raw = np.stack([np.asarray(r.scores, dtype=np.float64) for r in results]) if results else z
    n_rows, n_cols = z.shape if z.ndim == 2 else (0, 0)
    chunks = _chunks(max(n_cols, 1), wrap)
    fig = make_subplots(rows=len(chunks), cols=1, vertical_spacing=min(0.3 / len(chunks), 0.08))
    span = len(chunks[0])
    for b, cols in enumerate(chunks, start=1):
        idx = [i for i in cols if i < n_cols]
        if not idx:
            continue
        labels = [words[i] for i in idx]
        custom = np.dstack([np.array([labels] * n_rows, dtype=object),
                            np.round(raw[:, idx], 5).astype(object)])
        fig.add_trace(go.Heatmap(
            z=z[:, idx], x=idx, y=names, coloraxis="coloraxis", customdata=custom,
            xgap=1, ygap=1, name=f"words {idx[0] + 1}–{idx[-1] + 1}",
            hovertemplate="word: %{customdata[0]}<br>%{y}<br>score: %{customdata[1]}"
                          "<br>scaled: %{z:.2f}<extra></extra>"), row=b, col=1)
        fig.update_xaxes(tickmode="array", tickvals=idx, ticktext=labels, tickangle=-60,
                         showgrid=False, range=[idx[0] - 0.5, idx[0] + span - 0.5],
                         row=b, col=1, **FAST_TICKS)
        fig.update_yaxes(autorange="reversed", showgrid=False, row=b, col=1, **FAST_TICKS)
    per_block = 30 * max(n_rows, 1) + 95
    fig.update_layout(
        template=OWN_TEMPLATE,          # drawn with theme=None: see figures.OWN_TEMPLATE
        title="Which words mattered: each method's word scores (each row scaled to its largest |score|)",
        coloraxis=dict(colorscale=DIVERGING, cmin=-1, cmax=1,
                       colorbar=dict(title="scaled", thickness=12,
                                     tickvals=[-1, 0, 1], ticktext=["against", "0", "for"])),
        height=140 + per_block * len(chunks), margin=dict(l=170, r=20, t=50, b=100))
    if len(chunks) == 1:
        fig.update_layout(width=figure_width(n_cols) + 110 if n_cols > 48 else None)
    return fig


def agreement_heatmap(labels: list[str], rho) -> go.Figure:
    """The Spearman rank correlation of every pair of methods, numbers written in."""
    rho = np.asarray(rho, dtype=np.float64)
    text = [["n/a" if not np.isfinite(v) else f"{v:.2f}" for v in row] for row in rho]
    # Drawn on every prediction: built unchecked (see figures.unchecked_figure).
    heat = dict(type="heatmap", z=np.where(np.isfinite(rho), rho, np.nan), x=labels, y=labels,
                text=text, texttemplate="%{text}", zmin=-1, zmax=1, colorscale=RDBU,
                reversescale=True, xgap=2, ygap=2,
                colorbar=dict(title=dict(text="ρ"), thickness=12),
                hovertemplate="%{y} vs %{x}<br>Spearman ρ = %{text}<extra></extra>")
    return unchecked_figure([heat], dict(
        title=dict(text="Do the methods rank the words alike? (Spearman ρ)"),
        height=120 + 52 * len(labels), margin=dict(l=170, r=20, t=50, b=120),
        xaxis=dict(tickangle=-30, **FAST_TICKS), yaxis=dict(autorange="reversed", **FAST_TICKS)))


def _err(stats) -> dict:
    mean = np.array([s.mean for s in stats])
    lo = np.array([s.lo for s in stats])
    hi = np.array([s.hi for s in stats])
    ok = np.isfinite(lo) & np.isfinite(hi)
    return dict(type="data", symmetric=False, array=np.where(ok, hi - mean, 0.0),
                arrayminus=np.where(ok, mean - lo, 0.0), thickness=1.2, width=4)


def faithfulness_curves(summary: dict, labels: dict, ks: list[int]) -> go.Figure:
    """Both ERASER measures against k, one line per method (random dashed), 95 % bars.

    ``summary`` is ``faithfulness.summarize``'s {method: {measure: {"5": Stat, …}}}."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=[MEASURE_TITLES[m] for m in MEASURE_TITLES],
                        horizontal_spacing=0.1)
    for name, per in summary.items():
        color = METHOD_COLORS.get(name, "#444")
        for c, measure in enumerate(MEASURE_TITLES, start=1):
            stats = [per[measure][str(k)] for k in ks]
            fig.add_trace(go.Scatter(
                x=list(ks), y=[s.mean for s in stats], mode="lines+markers",
                name=labels.get(name, name), legendgroup=name, showlegend=c == 1,
                line=dict(color=color, dash="dash" if name == "random" else "solid"),
                error_y=_err(stats),
                hovertemplate=f"{labels.get(name, name)}<br>k = %{{x}} %: %{{y:.3f}}<extra></extra>"),
                row=1, col=c)
    fig.update_xaxes(title="top k % of the words", tickvals=list(ks), type="log")
    fig.update_yaxes(title="drop in p(predicted class)", col=1)
    fig.update_layout(height=420, margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def aopc_bars(summary: dict, labels: dict) -> go.Figure:
    """AOPC of both measures per method, with the random ranking as a grey bar."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"{m.capitalize()} AOPC "
                                                        f"{'↑' if m == 'comprehensiveness' else '↓'}"
                                                        for m in MEASURE_TITLES],
                        horizontal_spacing=0.25)
    names = list(summary)
    ylabels = [labels.get(n, n) for n in names]
    for c, measure in enumerate(MEASURE_TITLES, start=1):
        stats = [summary[n][measure]["aopc"] for n in names]
        fig.add_trace(go.Bar(
            x=[s.mean for s in stats], y=ylabels, orientation="h", error_x=_err(stats),
            marker_color=[METHOD_COLORS.get(n, "#444") for n in names], showlegend=False,
            hovertemplate="%{y}: %{x:.3f}<extra></extra>"), row=1, col=c)
        fig.update_yaxes(autorange="reversed", row=1, col=c, **FAST_TICKS)
    fig.update_layout(height=120 + 34 * len(names), margin=dict(l=170, r=20, t=50, b=40))
    return fig
