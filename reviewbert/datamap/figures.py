"""The data map figure (Swayamdipta et al. 2020, figure 1) in Plotly: variability on x,
confidence on y, one point per training review coloured by correctness, the regions of
``stats`` outlined and labelled with their counts; hovering shows the review (escaped,
cut to :data:`HOVER_CHARS`)."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reviewbert.datamap import stats

HOVER_CHARS = 160
MAX_POINTS = 10_000
"""More reviews than this are drawn as a seeded sample of them (WebGL stays responsive);
the region counts still count every review."""

REGION_COLOURS = {stats.EASY: "#2ca02c", stats.AMBIGUOUS: "#ff7f0e", stats.HARD: "#d62728"}


def hover_text(text, names, label: int, row) -> str:
    """One point's hover: the review escaped and cut, then its numbers."""
    t = " ".join(str(text or "").split())
    if len(t) > HOVER_CHARS:
        t = t[:HOVER_CHARS - 1] + "…"
    rating = names[label] if names is not None and 0 <= label < len(names) else str(label)
    return (f"{html.escape(t)}<br>true: {html.escape(str(rating))} · "
            f"confidence {row.confidence:.2f} · variability {row.variability:.2f} · "
            f"correctness {row.correctness:.2f} · {html.escape(row.region)}")


def _sample(n: int, max_points: int, seed: int) -> np.ndarray:
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_points, replace=False))


def datamap_figure(frame: pd.DataFrame, labels=None, texts=None, names=None, *,
                   max_points: int = MAX_POINTS, seed: int = 0, title: str = "") -> go.Figure:
    """The scatter of :func:`stats.cartography`'s ``frame``; ``texts`` (row for row, or
    None) and ``labels`` / ``names`` (the true class and class names) feed the hover."""
    drawn = frame[frame["region"] != stats.UNSEEN]
    pick = drawn.index.to_numpy()[_sample(len(drawn), max_points, seed)]
    sub = frame.loc[pick]
    hover = [hover_text(texts[i] if texts is not None else "", names,
                        int(labels[i]) if labels is not None else -1, row)
             for i, row in zip(pick, sub.itertuples())]
    fig = go.Figure(go.Scattergl(
        x=sub["variability"], y=sub["confidence"], mode="markers", hovertext=hover,
        hoverinfo="text", name="reviews",
        marker=dict(size=5, opacity=0.7, color=sub["correctness"], cmin=0, cmax=1,
                    colorscale="RdYlBu", colorbar=dict(title="correctness"))))
    x_max = max(0.5, float(np.nanmax(sub["variability"])) if len(sub) else 0.5)
    _outline_regions(fig, stats.region_counts(frame), x_max)
    shown = f" ({len(sub):,} of {len(drawn):,} drawn)" if len(sub) < len(drawn) else ""
    fig.update_layout(title=title or f"Data map{shown}", height=520,
                      xaxis=dict(title="variability (std of the true rating's probability)",
                                 range=[0, x_max]),
                      yaxis=dict(title="confidence (mean probability of the true rating)",
                                 range=[0, 1.02]),
                      margin=dict(l=60, r=20, t=50, b=50), showlegend=False)
    return fig


def _outline_regions(fig: go.Figure, counts: dict, x_max: float) -> None:
    """Dashed boxes at the thresholds of ``stats``, each labelled with its count."""
    v, c = stats.AMBIGUOUS_VARIABILITY, stats.EASY_CONFIDENCE
    boxes = {stats.EASY: (0, v, c, 1.0), stats.HARD: (0, v, 0, c),
             stats.AMBIGUOUS: (v, x_max, 0, 1.0)}
    spots = {stats.EASY: (v / 2, 0.97), stats.HARD: (v / 2, 0.03),
             stats.AMBIGUOUS: ((v + x_max) / 2, 0.5)}
    for region, (x0, x1, y0, y1) in boxes.items():
        colour = REGION_COLOURS[region]
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line=dict(color=colour, dash="dash"),
                      fillcolor="rgba(0,0,0,0)", layer="below")
        x, y = spots[region]
        fig.add_annotation(x=x, y=y, text=f"<b>{region}</b> ({counts.get(region, 0):,})",
                           showarrow=False, font=dict(color=colour))
