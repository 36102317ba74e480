"""Figure builders: plain results in, Plotly figures out (the highlighted review is in
``reviewbert/viz/highlight.py``). No Streamlit.

Columns are placed at integer x positions with the tokens as tick labels: Plotly
would merge repeated category names ("the", "the") into one column otherwise.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale

from reviewbert.model.attention import ClsView

COLORSCALE = "Viridis"
COLORSCALE_STOPS = get_colorscale(COLORSCALE)   # what validation turns the name into
PX_PER_COLUMN = 26      # a 256-token heatmap is ~6,700 px wide and scrolls sideways
MIN_WIDTH = 640
MAX_TICKS = 64          # more column labels than this overlap; hover still names every one
# plotly.js measures every tick label with getBoundingClientRect (a forced page
# layout each) to hide labels that stick out of the figure (ticklabeloverflow's
# default "hide past div") and, with automargin (on in plotly's templates), to grow
# the margins. With 254 token labels that was most of the drawing time of a chart
# in the app (tests/browser/test_browser.py times the page). Our labels sit inside margins
# sized for them, so neither is needed.
FAST_TICKS = dict(ticklabeloverflow="allow", automargin=False)
# The look of Streamlit's chart theme in the app's light theme (.streamlit/config.toml),
# for the token charts, which the app draws with ``theme=None`` (``token_chart`` in
# reviewbert/ui/prediction_card.py): the theme gives every axis title a ``standoff``, and
# with one plotly.js measures every tick label of the axis to place the title, whether it
# has a title or not (a clone and a forced layout per label it has not met before, and a
# 256-token review's three token charts carry hundreds of new labels; bench/first_second.py
# times the Predict click).
FONT = '"Source Sans", sans-serif'
TEXT, HEADING = "#808495", "#1f2430"
OWN_TEMPLATE = dict(layout=dict(
    font=dict(family=FONT, size=12, color=TEXT), paper_bgcolor="#ffffff", plot_bgcolor="#ffffff",
    title=dict(font=dict(family=FONT, size=16, color=HEADING, weight=600), x=0, xanchor="left"),
    hoverlabel=dict(bgcolor="#ffffff", bordercolor="#d5dae5",
                    font=dict(family=FONT, size=12, color=HEADING))))
"""The template of those figures: the theme's look, and no axis title ``standoff``
(plotly.py's default template sets one too)."""


def unchecked_figure(data: list[dict], layout: dict) -> go.Figure:
    """``go.Figure`` without Plotly's property-by-property validation, for the figures
    the Predict page builds on every prediction: validating their 12-24 traces and
    axes was half of their build time. Traces are plain dicts with their
    ``type``. tests/unit/test_figures.py checks that each of these figures passes full
    validation and gives the very JSON the validated figure gives."""
    return go.Figure(data=data, layout=layout, _validate=False)


DEBIAN_CHROMIUM = Path("/usr/bin/chromium")


def png_bytes(fig: go.Figure, width: int | None = None, height: int | None = None) -> bytes:
    """The figure as a PNG, through kaleido in a headless Chromium: Debian's where there is
    one and no ``BROWSER_PATH`` names another (kaleido never downloads a browser here).
    Seconds a figure, not milliseconds: kaleido starts a Chromium for each one."""
    if not os.environ.get("BROWSER_PATH") and DEBIAN_CHROMIUM.exists():
        os.environ["BROWSER_PATH"] = str(DEBIAN_CHROMIUM)
    return fig.to_image(format="png", width=width, height=height, scale=1)


def figure_width(n_columns: int) -> int:
    return max(MIN_WIDTH, 160 + PX_PER_COLUMN * n_columns)


def probs_bar(names: list[str], probs, predicted: int | None = None, true: int | None = None) -> go.Figure:
    """Horizontal bars of class probabilities; the predicted class in the accent colour."""
    probs = np.asarray(probs, dtype=float)
    predicted = int(probs.argmax()) if predicted is None else predicted
    colors = ["#2d6cdf" if i == predicted else "#b8c4d9" for i in range(len(names))]
    text = [f"{p:.1%}" for p in probs]
    labels = [f"{n}  (true)" if true is not None and i == true else n for i, n in enumerate(names)]
    bar = dict(type="bar", x=probs, y=labels, orientation="h", marker=dict(color=colors),
               text=text, textposition="outside", cliponaxis=False,
               hovertemplate="%{y}: %{x:.3f}<extra></extra>")
    return unchecked_figure([bar], dict(
        height=60 + 38 * len(names), margin=dict(l=10, r=50, t=10, b=30),
        xaxis=dict(range=[0, 1.0], tickformat=".0%", title=dict(text="probability")),
        yaxis=dict(autorange="reversed"), showlegend=False))


def _chunks(n: int, wrap: int | None) -> list[range]:
    if not wrap or n <= wrap:
        return [range(n)]
    return [range(i, min(i + wrap, n)) for i in range(0, n, wrap)]


def unique_labels(labels: list[str]) -> list[str]:
    """``labels`` with each repeat made distinct by zero-width spaces ("the", "the\u200b"):
    a category axis then keeps every column, and a hover's ``%{x}`` shows the label as it
    reads. One label array per block instead of a label per cell (``customdata``): the
    Predict page's charts were a third of a 256-token prediction's bytes."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        k = seen.get(label, 0)
        seen[label] = k + 1
        out.append(label + "\u200b" * k)
    return out


def _stacked_heatmaps(view: ClsView, rows: list[str], wrap: int | None, hover: str,
                      gap_cap: float = 0.08, cell_gaps: dict | None = None
                      ) -> tuple[list, dict, int]:
    """One heatmap per block of ``wrap`` columns, stacked like lines of text, sharing one
    colour axis; their axes laid out by hand as make_subplots(rows=n, cols=1) would
    (make_subplots and per-row updates were a large share of every Predict rerun)."""
    n_cols = view.values.shape[1]
    chunks = _chunks(n_cols, wrap)
    names = unique_labels(view.labels)
    span = len(chunks[0])
    gap = min(0.3 / len(chunks), gap_cap)
    height = (1.0 - gap * (len(chunks) - 1)) / len(chunks)
    step = max(1, -(-span // MAX_TICKS))            # label every step-th column when crowded
    traces, axes = [], {}
    for r, cols in enumerate(chunks, start=1):
        idx = list(cols)
        x = [names[i] for i in idx]
        sfx = "" if r == 1 else str(r)
        top = round(1.0 - (r - 1) * (height + gap), 9)
        bottom = round(max(0.0, top - height), 9)
        traces.append(dict(
            type="heatmap", z=view.values[:, idx], x=x, y=rows, coloraxis="coloraxis",
            xaxis=f"x{sfx}", yaxis=f"y{sfx}", **(cell_gaps or dict(xgap=1, ygap=1)),
            hovertemplate=hover,
            name=f"{idx[0] + 1}–{idx[-1] + 1}"))
        ticks = {} if step == 1 else dict(   # every column labelled: the names themselves
            tickmode="array", tickvals=x[::step], ticktext=[view.labels[i] for i in idx][::step])
        axes[f"xaxis{sfx}"] = dict(anchor=f"y{sfx}", domain=[0.0, 1.0], type="category",
                                   tickangle=-60, showgrid=False, range=[-0.5, span - 0.5],
                                   **ticks, **FAST_TICKS)
        axes[f"yaxis{sfx}"] = dict(anchor=f"x{sfx}", domain=[bottom, top],
                                   autorange="reversed", showgrid=False, **FAST_TICKS)
    return traces, axes, len(chunks)


def cls_heatmap(view: ClsView, title: str | None = None, wrap: int | None = None) -> go.Figure:
    """The seed report's figure: rows = layers, columns = tokens (or words), viridis.

    With ``wrap``, a long review is cut into blocks of ``wrap`` columns stacked like
    lines of text (one subplot per block, one shared colour scale), so a 256-token
    review stays readable without scrolling sideways.
    """
    n_rows, n_cols = view.values.shape
    head = "mean of heads" if view.head is None else f"head {view.head + 1}"
    what = "word" if view.level == "word" else "token"
    hover = f"{what}: %{{x}}<br>%{{y}} ({head})<br>attention: %{{z:.4f}}<extra></extra>"
    traces, axes, blocks = _stacked_heatmaps(
        view, [f"layer {layer + 1}" for layer in view.layers], wrap, hover)
    zmax = float(view.values.max()) if view.values.size else 1.0
    layout = dict(
        axes, title=dict(text=title or f"[CLS] → {what} attention, {head}"),
        coloraxis=dict(colorscale=COLORSCALE_STOPS, cmin=0, cmax=zmax,
                       colorbar=dict(title=dict(text="attention"), thickness=12)),
        height=140 + (30 * n_rows + 95) * blocks, margin=dict(l=70, r=20, t=50, b=100))
    if blocks == 1 and n_cols > 48:
        layout["width"] = figure_width(n_cols)
    layout["template"] = OWN_TEMPLATE
    return unchecked_figure(traces, layout)


def heads_figure(view: ClsView, layer: int, wrap: int | None = None) -> go.Figure:
    """Small multiples: a row of [CLS]→token attention per head of one layer (per block of
    ``wrap`` columns with ``wrap``), one heatmap per block.

    The app does not wrap this one: one block over all tokens draws at once."""
    n_heads = view.values.shape[0]
    hover = (f"token: %{{x}}<br>layer {layer + 1}, %{{y}}<br>attention: %{{z:.4f}}"
             "<extra></extra>")
    # The heads apart, as strips, and no gap between columns: at 256 tokens a column is
    # ~3 px, and a third of it was the gap (which also cost drawing time on every click).
    traces, axes, blocks = _stacked_heatmaps(
        view, [f"head {h + 1}" for h in range(n_heads)], wrap, hover, gap_cap=0.12,
        cell_gaps=dict(ygap=2))
    zmax = float(view.values.max()) if view.values.size else 1.0
    return unchecked_figure(traces, dict(
        axes, template=OWN_TEMPLATE,
        coloraxis=dict(colorscale=COLORSCALE_STOPS, cmin=0, cmax=zmax,
                       colorbar=dict(title=dict(text="attention"), thickness=12)),
        title=dict(text=f"[CLS] → token attention of every head, layer {layer + 1}"),
        height=140 + (24 * n_heads + 96) * blocks, margin=dict(l=70, r=40, t=50, b=100)))


COLOR_LEVELS = 256


@lru_cache(maxsize=1)
def _color_table() -> tuple[str, ...]:
    return tuple(sample_colorscale(COLORSCALE, np.linspace(0.0, 1.0, COLOR_LEVELS)))


def scale_colors(fractions) -> list[str]:
    """The colour scale's colour of each fraction in [0, 1] (clipped), as plotly's
    ``sample_colorscale`` gives it, taken from a table of its 256 levels (8-bit colour
    anyway): sampling 256 bars one by one was a visible share of every Predict run."""
    table = _color_table()
    idx = np.rint(np.clip(np.nan_to_num(np.asarray(fractions, float)), 0.0, 1.0)
                  * (COLOR_LEVELS - 1)).astype(int)
    return [table[i] for i in idx]


def head_bars(view: ClsView, layer: int, head: int) -> go.Figure:
    """One head enlarged: a bar per token of [CLS]→token attention."""
    values = view.values[head]
    n_cols = len(values)
    # 256 rotated tick labels cost Plotly.js seconds of layout; label at most MAX_TICKS of them.
    step = max(1, -(-n_cols // MAX_TICKS))
    # Colours computed here, not as numbers + colorscale: Streamlit's plotly.js logs
    # "Invalid color specifier" three times per bar for those (750 console lines at
    # 256 tokens, each of them drawing time spent).
    top = float(values.max()) if n_cols and values.max() > 0 else 1.0
    colors = scale_colors(np.asarray(values, float) / top)
    bar = dict(type="bar", x=list(range(n_cols)), y=values, customdata=view.labels,
               marker=dict(color=colors),
               hovertemplate=f"token: %{{customdata}}<br>layer {layer + 1}, head {head + 1}"
                             "<br>attention: %{y:.4f}<extra></extra>")
    return unchecked_figure([bar], dict(
        template=OWN_TEMPLATE, height=340,
        title=dict(text=f"Layer {layer + 1}, head {head + 1}: [CLS] → token"),
        margin=dict(l=50, r=20, t=50, b=110),
        xaxis=dict(tickmode="array", tickvals=list(range(n_cols))[::step],
                   ticktext=view.labels[::step], tickangle=-60, **FAST_TICKS),
        yaxis=dict(title=dict(text="attention"), **FAST_TICKS)))


# ------------------------------------------------------------------ training curves
SPLIT_COLORS = {"train": "#2d6cdf", "validation": "#e8871e", "test": "#2a9d5c"}
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
METRIC_AXES = {"loss": "cross-entropy", "auc": "macro AUC-ROC", "accuracy": "% correct",
               "relaxed_accuracy": "relaxed % correct (±1 star)"}


def metric_curves(curves, metric: str, title: str | None = None, height: int = 300) -> go.Figure:
    """One metric over epochs: a line per split (colour) and per run (dash), as the seed's fig. 11.

    ``curves`` is experiments.curves()'s long table (run, epoch, split, metric, value).
    """
    df = curves[curves["metric"] == metric] if len(curves) else curves
    fig = go.Figure()
    runs = list(dict.fromkeys(df["run"])) if len(df) else []
    for r_i, run in enumerate(runs):
        for split, color in SPLIT_COLORS.items():
            part = df[(df["run"] == run) & (df["split"] == split)].sort_values("epoch")
            if part.empty:
                continue
            name = split if len(runs) == 1 else f"{run} · {split}"
            fig.add_trace(go.Scatter(
                x=part["epoch"], y=part["value"], mode="lines+markers", name=name,
                line=dict(color=color, dash=RUN_DASHES[r_i % len(RUN_DASHES)]),
                hovertemplate=f"{name}<br>epoch %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=title or METRIC_AXES.get(metric, metric), height=height,
                      margin=dict(l=50, r=10, t=40, b=40), legend=dict(orientation="h", y=-0.25),
                      xaxis=dict(title="epoch", tickformat="d", rangemode="tozero"),
                      yaxis=dict(title=METRIC_AXES.get(metric, metric)))
    if not runs:
        fig.add_annotation(text="no finished epoch yet", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    return fig


def step_loss(steps, height: int = 260) -> go.Figure:
    """Training loss per optimizer step (faint) and its moving average (experiments.smoothed_steps)."""
    fig = go.Figure()
    if len(steps):
        fig.add_trace(go.Scatter(x=steps["step"], y=steps["loss"], mode="lines", name="loss",
                                 line=dict(color="rgba(45,108,223,0.25)", width=1),
                                 hovertemplate="step %{x}: %{y:.3f}<extra></extra>"))
        fig.add_trace(go.Scatter(x=steps["step"], y=steps["smoothed"], mode="lines",
                                 name="moving average", line=dict(color="#2d6cdf", width=2),
                                 hovertemplate="step %{x}: %{y:.3f} (smoothed)<extra></extra>"))
    else:
        fig.add_annotation(text="no step logged yet", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    fig.update_layout(title="training loss per step", height=height,
                      margin=dict(l=50, r=10, t=40, b=40), legend=dict(orientation="h", y=-0.3),
                      xaxis=dict(title="step"), yaxis=dict(title="cross-entropy"))
    return fig
