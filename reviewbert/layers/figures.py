"""Figures of the Layers views: plain results in (``reviewbert/layers/analysis.py``), Plotly out.

Layers are numbered as the probes number them: 0 is the embeddings' output, 1..L the
encoder layers. Any text a person typed (a review in a title) is HTML-escaped: Plotly
renders a subset of HTML in titles and hovers.
"""
from __future__ import annotations

import html

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go

METRICS = {"accuracy": "accuracy", "relaxed_accuracy": "relaxed accuracy (±1 star)",
           "auc": "macro AUC"}
STYLE = {"checkpoint": ("#2d6cdf", "rgba(45,108,223,0.18)"),
         "base": ("#7a7a7a", "rgba(122,122,122,0.18)")}
TITLE_CHARS = 60


def layer_label(layer: int) -> str:
    return "embeddings" if layer == 0 else f"layer {layer}"


def snippet(text: str, limit: int = TITLE_CHARS) -> str:
    """A review's first characters, on one line and HTML-escaped, for a title."""
    one = " ".join(str(text).split())
    one = one if len(one) <= limit else one[:limit - 1] + "…"
    return html.escape(one)


def _band(rows: list[dict], metric: str, name: str, who: str) -> list[go.Scatter]:
    """A line with its 95 % interval as a filled band (left out where undefined)."""
    line, fill = STYLE[who]
    x = [r["layer"] for r in rows]
    y = [r.get(metric) for r in rows]
    traces = []
    ci = [r.get(f"{metric}_ci") for r in rows]
    if all(c is not None for c in ci):
        traces.append(go.Scatter(x=x + x[::-1], y=[c[1] for c in ci] + [c[0] for c in ci][::-1],
                                 mode="lines", fill="toself", fillcolor=fill, line=dict(width=0),
                                 hoverinfo="skip", showlegend=False, name=f"{name} 95 %"))
    traces.append(go.Scatter(
        x=x, y=y, mode="lines+markers", name=name, line=dict(color=line, width=2.5),
        customdata=[[layer_label(layer), *(c or [None, None])] for layer, c in zip(x, ci)],
        hovertemplate=f"{name}, %{{customdata[0]}}: %{{y:.1%}}"
                      "<br>95 %: %{customdata[1]:.1%} – %{customdata[2]:.1%}<extra></extra>"))
    return traces


def accuracy_figure(layers: list[dict], base_layers: list[dict] | None = None,
                    model_accuracy: float | None = None, metric: str = "accuracy",
                    height: int = 360) -> go.Figure:
    """A probe's score after every layer, with its 95 % band: the checkpoint's probes, the base
    model's (what fine-tuning added), and the checkpoint's own classifier as a line."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    fig = go.Figure()
    if base_layers and any(r.get(metric) is not None for r in base_layers):
        for t in _band(base_layers, metric, "probe on the base model", "base"):
            fig.add_trace(t)
    for t in _band(layers, metric, "probe on the fine-tuned checkpoint", "checkpoint"):
        fig.add_trace(t)
    if model_accuracy is not None and metric == "accuracy":
        fig.add_hline(y=model_accuracy, line=dict(color="#d1495b", dash="dash", width=2),
                      annotation_text=f"the checkpoint's own classifier: {model_accuracy:.1%}",
                      annotation_position="bottom right")
    n = len(layers)
    fig.update_layout(
        title=dict(text=f"A linear probe's {METRICS[metric]} on [CLS], after each layer "
                        "(test reviews)"),
        height=height, margin=dict(l=60, r=20, t=60, b=50), legend=dict(orientation="h", y=-0.22),
        xaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(n)),
                   ticktext=[layer_label(i) for i in range(n)]),
        yaxis=dict(title=dict(text=METRICS[metric]), tickformat=".0%"))
    return fig


def probabilities_figure(probs, class_names: list[str], text: str | None = None,
                         height: int | None = None) -> go.Figure:
    """One review's class probabilities after each layer ([L+1, C]): a heat map, layers down,
    stars across, each cell's probability written in it."""
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape[1] != len(class_names):
        raise ValueError(f"probs must be [layers, {len(class_names)}], got {p.shape}")
    rows = [layer_label(i) for i in range(p.shape[0])]
    names = [html.escape(str(c)) for c in class_names]
    heat = go.Heatmap(z=p, x=names, y=rows, zmin=0, zmax=1, colorscale="Blues",
                      colorbar=dict(title=dict(text="probability"), tickformat=".0%"),
                      text=[[f"{v:.0%}" for v in row] for row in p], texttemplate="%{text}",
                      hovertemplate="%{y}: %{x} %{z:.1%}<extra></extra>")
    title = "What a linear probe reads from [CLS] after each layer"
    if text:
        title += f"<br><sup>“{snippet(text)}”</sup>"
    return go.Figure(heat, layout=dict(
        title=dict(text=title), height=height or 120 + 34 * p.shape[0],
        margin=dict(l=90, r=20, t=70, b=40),
        yaxis=dict(autorange="reversed", title=dict(text="after")),
        xaxis=dict(title=dict(text="class"), side="bottom")))
