"""Figures of the Heads page: plain results in (``reviewbert.heads.analysis.HeadsResult``), Plotly out.

Every layers × heads heatmap has layer 1 at the top and head 1 on the left, numbered
from 1; a cell's x and y are the head's and the layer's 0-based positions (what a click
reports) and its ``customdata`` starts with [layer, head] numbered from 1 (the hover).
A head removed from a pruned checkpoint is a blank cell.
"""
from __future__ import annotations

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reviewbert.heads.importance import MICHEL_FRACTION
from reviewbert.heads.roles import ROLES, STAT_LABELS

ORDER_STYLE = {"least": ("least important first", "#2d6cdf"),
               "random": ("random order (mean, min–max band)", "#7a7a7a"),
               "most": ("most important first", "#d1495b")}
ROLE_COLOURS = {"vertical": "#2d6cdf", "diagonal": "#e09f3e", "vertical + diagonal": "#9b5de5",
                "block": "#3a9d5d", "heterogeneous": "#c9ced6"}
ROLE_SHORT = {"vertical": "V", "diagonal": "D", "vertical + diagonal": "V+D", "block": "B",
              "heterogeneous": "H"}
CELL = 46           # px per head column
HEAD = "layer %{customdata[0]}, head %{customdata[1]}"


def _grid_layout(L: int, H: int, title: str) -> dict:
    return dict(title=dict(text=title), height=120 + 44 * L, width=max(560, 150 + CELL * H),
                margin=dict(l=70, r=20, t=60, b=50),
                xaxis=dict(title=dict(text="head"), tickmode="array", tickvals=list(range(H)),
                           ticktext=[str(h + 1) for h in range(H)], constrain="domain"),
                yaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(L)),
                           ticktext=[str(li + 1) for li in range(L)], autorange="reversed"))


def _custom(L: int, H: int, *extra: np.ndarray) -> np.ndarray:
    """Per cell: [layer, head] numbered from 1 (for the hover text), then ``extra``."""
    li, h = np.meshgrid(np.arange(1, L + 1), np.arange(1, H + 1), indexing="ij")
    return np.stack([li, h, *[np.asarray(e, dtype=float) for e in extra]], axis=-1)


def _none(a: np.ndarray) -> list:
    return [[None if not np.isfinite(v) else float(v) for v in row] for row in np.asarray(a, float)]


def importance_figure(res, rho: float | None = None) -> go.Figure:
    """Normalised importance; hover: the drops measured by masking the head alone."""
    imp = res.importance
    L, H = imp.shape
    acc, prob = res.masking.accuracy_drop * 100, res.masking.probability_drop * 100
    rho_text = "" if rho is None else f" · Spearman with the measured drop: {rho:.2f}"
    heat = go.Heatmap(
        z=_none(imp), colorscale="Blues", zmin=0, customdata=_custom(L, H, acc, prob),
        colorbar=dict(title=dict(text="importance")),
        text=[["" if not np.isfinite(v) else f"{v:.2f}" for v in row] for row in imp],
        texttemplate="%{text}", textfont=dict(size=10),
        hovertemplate=(HEAD + "<br>importance %{z:.3f}<br>masked alone: accuracy "
                       "−%{customdata[2]:.1f} points, predicted-class probability "
                       "−%{customdata[3]:.2f} points<extra></extra>"))
    fig = go.Figure(heat, _grid_layout(L, H, "Head importance (Michel et al., normalised per "
                                              "layer)" + rho_text))
    return clickable(fig, fig.data[0])



def clickable(fig: go.Figure, heat, row: int | None = None, col: int | None = None,
              size: int = 36, text=None) -> go.Figure:
    """Plotly heatmaps have no point selection (scatter points do): a transparent square
    marker on every cell of ``heat`` takes over its hover text and makes a click select the
    cell, as the Error analysis page's confusion matrix does. The point's x and y are the
    cell's head and layer (0-based); removed heads get no marker. ``text``: what the hover's
    %{text} says (default: the heatmap's cell text)."""
    z = np.array([[np.nan if v is None else v for v in r] for r in heat.z], dtype=float)
    cd = np.asarray(heat.customdata, dtype=float)
    k = cd.shape[-1]
    L, H = z.shape
    li, h = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    keep = np.isfinite(z).ravel()
    full = np.concatenate([cd, z[..., None]], axis=-1).reshape(L * H, k + 1)[keep]
    text = heat.text if text is None else text
    text = None if text is None else np.asarray(text, dtype=object).ravel()[keep]
    fig.add_trace(go.Scatter(
        x=h.ravel()[keep], y=li.ravel()[keep], mode="markers", showlegend=False,
        marker=dict(symbol="square", size=size, color="rgba(0,0,0,0)"),
        customdata=full, text=text,
        hovertemplate=heat.hovertemplate.replace("%{z", f"%{{customdata[{k}]"),
        selected=dict(marker=dict(color="rgba(0,0,0,0)")),
        unselected=dict(marker=dict(opacity=1))), row=row, col=col)
    heat.hoverinfo, heat.hovertemplate = "skip", None
    fig.update_layout(clickmode="event+select")
    return fig


def importance_scatter(res, rho: float | None = None) -> go.Figure:
    """Importance against the measured probability drop, one point per head."""
    imp, drop = res.importance, res.masking.probability_drop * 100
    keep = res.alive & np.isfinite(imp)
    li, h = np.nonzero(keep)
    pts = go.Scatter(x=imp[keep], y=drop[keep], mode="markers",
                     marker=dict(color=li + 1, colorscale="Viridis", size=9,
                                 colorbar=dict(title=dict(text="layer"))),
                     customdata=np.stack([li + 1, h + 1], axis=-1),
                     hovertemplate=("layer %{customdata[0]}, head %{customdata[1]}<br>importance "
                                    "%{x:.3f}<br>probability drop %{y:.2f} points<extra></extra>"))
    title = "Importance against the measured drop" + ("" if rho is None else f" (Spearman {rho:.2f})")
    return go.Figure(pts, dict(title=dict(text=title), height=380,
                               xaxis=dict(title=dict(text="importance (normalised per layer)")),
                               yaxis=dict(title=dict(text="drop in predicted-class probability "
                                                          "when masked alone (points)")),
                               margin=dict(l=70, r=20, t=60, b=50)))


def _curve_traces(fig, curves: dict, metric: str, row: int, col: int, legend: bool) -> None:
    for order in ("least", "random", "most"):
        name, colour = ORDER_STYLE[order]
        pts = curves[order]
        x = [100 * p["fraction"] for p in pts]
        if order == "random" and any(f"{metric}_min" in p for p in pts):
            lo = [p.get(f"{metric}_min", p[metric]) for p in pts]
            hi = [p.get(f"{metric}_max", p[metric]) for p in pts]
            fig.add_trace(go.Scatter(x=x + x[::-1], y=hi + lo[::-1], fill="toself", mode="lines",
                                     line=dict(width=0), fillcolor="rgba(122,122,122,0.2)",
                                     hoverinfo="skip", showlegend=False), row=row, col=col)
        fig.add_trace(go.Scatter(
            x=x, y=[p[metric] for p in pts], mode="lines+markers", name=name,
            line=dict(color=colour), legendgroup=order, showlegend=legend,
            customdata=[p["heads_masked"] for p in pts],
            hovertemplate=f"{name}<br>%{{x:.0f}} % of the heads (%{{customdata}}) masked: "
                          f"%{{y:.3f}}<extra></extra>"), row=row, col=col)


def pruning_figure(curves: dict) -> go.Figure:
    """Accuracy, relaxed accuracy and AUC as 0 … 90 % of the heads are masked."""
    metrics = (("accuracy", "accuracy"), ("relaxed_accuracy", "relaxed accuracy (±1 star)"),
               ("auc", "AUC"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[m[1] for m in metrics],
                        horizontal_spacing=0.07)
    for i, (metric, _) in enumerate(metrics):
        _curve_traces(fig, curves, metric, 1, i + 1, legend=i == 0)
        fig.add_vline(x=100 * MICHEL_FRACTION, line=dict(dash="dot", color="#444"), row=1, col=i + 1,
                      annotation_text="Michel et al.: 40 %" if i == 0 else None,
                      annotation_position="bottom right", annotation_font_size=10)
        fig.update_xaxes(title_text="% of heads masked", range=[-3, 93], row=1, col=i + 1)
    base = curves["least"][0]["accuracy"]
    if base is not None:
        fig.add_hline(y=base - 0.01, line=dict(dash="dash", color="#2d6cdf", width=1), row=1, col=1,
                      annotation_text="full model − 1 point", annotation_position="top right",
                      annotation_font_size=10)
    fig.update_layout(title=dict(text="Pruning curve: heads masked 10 … 90 % at a time"),
                      height=420, margin=dict(l=60, r=20, t=90, b=50),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def atlas_figure(res, colour_by: str = "role") -> go.Figure:
    """The head atlas: role (categorical) or one of its numbers as the colour; hover: all."""
    atlas, roles = res.atlas, res.roles
    L, H = res.alive.shape
    stats = list(STAT_LABELS)
    extra = [atlas[s] for s in stats]
    lines = "<br>".join(f"{STAT_LABELS[s]}: %{{customdata[{i + 2}]:.3f}}" for i, s in enumerate(stats))
    hover = "layer %{customdata[0]}, head %{customdata[1]}: %{text}<br>" + lines + "<extra></extra>"
    text = [[r or "removed" for r in row] for row in roles]
    if colour_by == "role":
        short = [[ROLE_SHORT.get(r, "") for r in row] for row in roles]
        code = np.array([[np.nan if r is None else ROLES.index(r) for r in row] for row in roles])
        n = len(ROLES)
        scale = []
        for i, r in enumerate(ROLES):
            scale += [(i / n, ROLE_COLOURS[r]), ((i + 1) / n, ROLE_COLOURS[r])]
        heat = go.Heatmap(z=_none(code), zmin=-0.5, zmax=n - 0.5, colorscale=scale, text=short,
                          customdata=_custom(L, H, *extra), hovertemplate=hover,
                          texttemplate="%{text}",
                          colorbar=dict(tickvals=list(range(n)), ticktext=list(ROLES),
                                        title=dict(text="role")),
                          textfont=dict(size=10))
        title = "Head atlas: roles (V vertical, D diagonal, B block, H heterogeneous)"
    else:
        heat = go.Heatmap(z=_none(atlas[colour_by]), colorscale="Viridis", text=text,
                          customdata=_custom(L, H, *extra), hovertemplate=hover,
                          colorbar=dict(title=dict(text=STAT_LABELS[colour_by])))
        title = f"Head atlas: {STAT_LABELS[colour_by]}, averaged over the reviews (Clark et al.)"
    fig = go.Figure(heat, _grid_layout(L, H, title))
    return clickable(fig, fig.data[0], text=text)


def finetune_figure(js: np.ndarray, alive: np.ndarray) -> go.Figure:
    """Mean Jensen–Shannon divergence of each head from the base model, plus layer means."""
    L, H = js.shape
    fig = make_subplots(rows=1, cols=2, column_widths=[0.8, 0.2], horizontal_spacing=0.08,
                        subplot_titles=["per head", "layer mean"])
    fig.add_trace(go.Heatmap(z=_none(js), colorscale="Reds", zmin=0,
                             customdata=_custom(L, H),
                             colorbar=dict(title=dict(text="JS (bits)"), x=0.76),
                             hovertemplate=HEAD + "<br>JS divergence %{z:.3f} bits<extra></extra>"),
                  row=1, col=1)
    means = [float(np.nanmean(r)) if np.isfinite(r).any() else None for r in js]
    fig.add_trace(go.Bar(x=means, y=list(range(L)), orientation="h", marker=dict(color="#d1495b"),
                         hovertemplate="layer %{customdata}: %{x:.3f} bits<extra></extra>",
                         customdata=list(range(1, L + 1)), showlegend=False), row=1, col=2)
    layout = _grid_layout(L, H, "What fine-tuning changed: Jensen–Shannon divergence from the "
                                "base model's attention, same reviews")
    fig.update_layout(title=layout["title"], height=layout["height"], width=layout["width"] + 200,
                      margin=layout["margin"])
    fig.update_xaxes(layout["xaxis"], row=1, col=1)
    fig.update_yaxes(layout["yaxis"], row=1, col=1)
    fig.update_yaxes(layout["yaxis"] | dict(title=None), row=1, col=2)
    fig.update_xaxes(title_text="bits", row=1, col=2)
    return clickable(fig, fig.data[0], row=1, col=1)



def head_attention_figure(tokens: list[str], att: np.ndarray, layer: int, head: int,
                          role: str | None = None) -> go.Figure:
    """One head's attention on one review, token → token (rows attend to columns)."""
    n = len(tokens)
    idx = list(range(n))
    heat = go.Heatmap(z=np.asarray(att, dtype=float), x=idx, y=idx, colorscale="Viridis", zmin=0,
                      customdata=[[[tokens[i], tokens[j]] for j in idx] for i in idx],
                      hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
                      colorbar=dict(title=dict(text="attention")))
    side = min(900, max(380, 160 + 14 * n))
    ticks = dict(tickmode="array", tickvals=idx, ticktext=tokens, tickfont=dict(size=9))
    what = f" ({role})" if role else ""
    return go.Figure(heat, dict(
        title=dict(text=f"Layer {layer + 1}, head {head + 1}{what} on this review: row → column"),
        height=side + 60, width=side + 140, margin=dict(l=90, r=20, t=60, b=90),
        xaxis=dict(ticks, tickangle=-60, title=dict(text="attended to (key)")),
        yaxis=dict(ticks, autorange="reversed", title=dict(text="attending (query)"))))
