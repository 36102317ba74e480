"""Figure builders for the error-analysis page and the HTML report: plain results in,
Plotly figures out. No Streamlit. (The attention heatmaps come from ``reviewbert.viz.figures``.)

Any text taken from a review (words on an axis) goes through ``html.escape``:
Plotly renders a subset of HTML in labels, and a review is data.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reviewbert.analysis.breakdown import row_normalised
from reviewbert.analysis.calibration import Reliability

CLASS_COLORS = ("#d7263d", "#f46036", "#c5a100", "#1b998b", "#2e86ab", "#6a4c93")
ACCENT = "#2d6cdf"


def confusion_figure(cm, names, title: str = "Confusion matrix") -> go.Figure:
    """Counts and row shares in one: colour = share of the true class's reviews, text =
    count and share. A transparent marker sits on every cell so that a click selects it
    (Plotly heatmaps have no point selection; scatter points do): ``customdata`` of
    the selected point is [true class, predicted class]."""
    cm = np.asarray(cm)
    share = row_normalised(cm)
    k = len(names)
    text = [[f"{cm[i, j]}<br>{share[i, j]:.0%}" for j in range(k)] for i in range(k)]
    fig = go.Figure(go.Heatmap(
        z=share, x=list(range(k)), y=list(range(k)), text=text, texttemplate="%{text}",
        colorscale="Blues", zmin=0, zmax=1, hoverinfo="skip",
        colorbar=dict(title="share of row", tickformat=".0%", thickness=12)))
    ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    fig.add_trace(go.Scatter(
        x=jj.ravel(), y=ii.ravel(), mode="markers",
        marker=dict(symbol="square", size=46, color="rgba(0,0,0,0)"),
        customdata=np.stack([ii.ravel(), jj.ravel(), cm.ravel()], axis=1),
        hovertext=[f"true {names[i]}, predicted {names[j]}: {cm[i, j]} reviews "
                   f"({share[i, j]:.1%} of {names[i]})" for i, j in zip(ii.ravel(), jj.ravel())],
        hovertemplate="%{hovertext}<extra>click to list them</extra>", showlegend=False,
        selected=dict(marker=dict(color="rgba(0,0,0,0)")),
        unselected=dict(marker=dict(opacity=1))))
    ticks = dict(tickmode="array", tickvals=list(range(k)), ticktext=list(names))
    fig.update_layout(title=title, height=140 + 62 * k, width=170 + 80 * k,
                      margin=dict(l=90, r=20, t=50, b=70), clickmode="event+select",
                      xaxis=dict(title="predicted", **ticks),
                      yaxis=dict(title="true", autorange="reversed", **ticks))
    return fig


def roc_figure(curves: list[dict]) -> go.Figure:
    """One-vs-rest ROC curves (``breakdown.roc_curves``) with their AUCs."""
    fig = go.Figure()
    for i, c in enumerate(curves):
        fig.add_trace(go.Scatter(
            x=c["fpr"], y=c["tpr"], mode="lines", name=f"{c['name']} (AUC {c['auc']:.3f})",
            line=dict(color=CLASS_COLORS[i % len(CLASS_COLORS)], width=2),
            hovertemplate=f"{c['name']}<br>FPR %{{x:.3f}}<br>TPR %{{y:.3f}}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="chance",
                             line=dict(color="#999", dash="dot"), hoverinfo="skip"))
    fig.update_layout(title="ROC, one class against the rest", height=420,
                      margin=dict(l=60, r=20, t=50, b=50),
                      xaxis=dict(title="false positive rate", range=[0, 1]),
                      yaxis=dict(title="true positive rate", range=[0, 1.02]),
                      legend=dict(x=0.98, xanchor="right", y=0.02, yanchor="bottom"))
    return fig


def reliability_figure(rel: Reliability) -> go.Figure:
    """Reliability diagram: accuracy per confidence bin against the diagonal, with the
    share of reviews per bin as bars underneath, and the ECE in the title."""
    mids = (rel.edges[:-1] + rel.edges[1:]) / 2
    width = float(rel.edges[1] - rel.edges[0])
    filled = rel.count > 0
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28],
                        vertical_spacing=0.06)
    fig.add_trace(go.Bar(x=mids[filled], y=rel.accuracy[filled], width=width * 0.92,
                         marker_color=ACCENT, name="accuracy",
                         customdata=np.stack([rel.confidence[filled], rel.count[filled]], 1),
                         hovertemplate="confidence %{customdata[0]:.3f}<br>accuracy %{y:.3f}"
                                       "<br>%{customdata[1]} reviews<extra></extra>"), 1, 1)
    fig.add_trace(go.Scatter(x=rel.confidence[filled], y=rel.confidence[filled],
                             mode="markers", marker=dict(color="#e8871e", size=8),
                             name="mean confidence", hoverinfo="skip"), 1, 1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line=dict(color="#999", dash="dot"), hoverinfo="skip"), 1, 1)
    fig.add_trace(go.Bar(x=mids, y=rel.count / max(rel.n, 1), width=width * 0.92,
                         marker_color="#b8c4d9", name="share of reviews",
                         hovertemplate="%{y:.1%} of reviews<extra></extra>"), 2, 1)
    fig.update_layout(title=f"Reliability (top class): ECE {rel.ece:.3f}", height=480,
                      margin=dict(l=60, r=20, t=50, b=50), bargap=0,
                      legend=dict(orientation="h", y=-0.18))
    fig.update_yaxes(title_text="accuracy", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title_text="reviews", tickformat=".0%", row=2, col=1)
    fig.update_xaxes(title_text="confidence (highest class probability)", range=[0, 1],
                     row=2, col=1)
    return fig


def length_figure(bins) -> go.Figure:
    """Accuracy per token-count bin (``breakdown.length_bins``) with 95 % intervals."""
    b = bins[bins["n"] > 0]
    fig = go.Figure(go.Bar(
        x=b["tokens"], y=b["accuracy"], marker_color=ACCENT,
        error_y=dict(type="data", symmetric=False, array=b["high"] - b["accuracy"],
                     arrayminus=b["accuracy"] - b["low"], color="#444"),
        text=[f"n={n}" for n in b["n"]], textposition="inside", insidetextanchor="start",
        hovertemplate="%{x} tokens<br>accuracy %{y:.1%}<br>%{text}<extra></extra>"))
    fig.update_layout(title="Accuracy by review length (wordpieces)", height=360,
                      margin=dict(l=60, r=20, t=50, b=60),
                      xaxis=dict(title="tokens (without [CLS]/[SEP], before truncation)"),
                      yaxis=dict(title="accuracy", tickformat=".0%", range=[0, 1]))
    return fig


def rating_words_figure(tops: dict, names, layer: int, what: str = "true rating") -> go.Figure:
    """One bar chart per class (``word_attention.top_words``): its words of highest
    mean [CLS] attention in ``layer`` (0-based)."""
    k = len(names)
    fig = make_subplots(rows=1, cols=k, subplot_titles=[html.escape(n) for n in names],
                        horizontal_spacing=0.07)
    for c in range(k):
        df = tops.get(c)
        if df is None or df.empty:
            continue
        fig.add_trace(go.Bar(
            x=df["attention"], y=[html.escape(w) for w in df["word"]], orientation="h",
            marker_color=CLASS_COLORS[c % len(CLASS_COLORS)], customdata=df["reviews"],
            hovertemplate="%{y}: %{x:.4f}<br>in %{customdata} reviews<extra></extra>",
            showlegend=False), 1, c + 1)
        fig.update_yaxes(autorange="reversed", row=1, col=c + 1)
    fig.update_layout(title=f"Words with the highest mean [CLS] attention, layer {layer + 1}, "
                            f"by {what}", height=440, margin=dict(l=60, r=20, t=80, b=40))
    fig.update_xaxes(tickformat=".3f")
    return fig
