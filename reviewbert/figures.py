"""Figure builders: plain results in, Plotly figures (or HTML strings) out. No Streamlit.

Columns are placed at integer x positions with the tokens as tick labels: Plotly
would merge repeated category names ("the", "the") into one column otherwise.
"""
from __future__ import annotations

import html
import re

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale

from .attention import ClsView

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


def unchecked_figure(data: list[dict], layout: dict) -> go.Figure:
    """``go.Figure`` without Plotly's property-by-property validation, for the figures
    the Predict page builds on every prediction: validating their 12-24 traces and
    axes was half of their build time (heads figure 35 -> 19 ms at 256 tokens, the
    [CLS] heatmap and head bars about 5-10 ms each). Traces are plain dicts with their
    ``type``. tests/unit/test_figures.py checks that each of these figures passes full
    validation and gives the very JSON the validated figure gives."""
    return go.Figure(data=data, layout=layout, _validate=False)


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


def cls_heatmap(view: ClsView, title: str | None = None, wrap: int | None = None) -> go.Figure:
    """The seed report's figure: rows = layers, columns = tokens (or words), viridis.

    With ``wrap``, a long review is cut into blocks of ``wrap`` columns stacked like
    lines of text (one subplot per block, one shared colour scale), so a 256-token
    review stays readable without scrolling sideways.
    """
    n_rows, n_cols = view.values.shape
    row_names = [f"layer {layer + 1}" for layer in view.layers]
    head = "mean of heads" if view.head is None else f"head {view.head + 1}"
    what = "word" if view.level == "word" else "token"
    chunks = _chunks(n_cols, wrap)
    zmax = float(view.values.max()) if view.values.size else 1.0
    span = len(chunks[0])
    # One subplot per block, its axes laid out by hand as make_subplots(rows=n, cols=1)
    # would: make_subplots and per-row update_xaxes took ~40 ms of every Predict rerun.
    gap = min(0.3 / len(chunks), 0.08)
    height = (1.0 - gap * (len(chunks) - 1)) / len(chunks)
    traces, axes = [], {}
    for r, cols in enumerate(chunks, start=1):
        idx = list(cols)
        labels = [view.labels[i] for i in idx]
        sfx = "" if r == 1 else str(r)
        top = round(1.0 - (r - 1) * (height + gap), 9)
        bottom = round(max(0.0, top - height), 9)
        traces.append(dict(
            type="heatmap", z=view.values[:, idx], x=idx, y=row_names, coloraxis="coloraxis",
            xaxis=f"x{sfx}", yaxis=f"y{sfx}",
            customdata=np.array([labels] * n_rows, dtype=object), xgap=1, ygap=1,
            hovertemplate=f"{what}: %{{customdata}}<br>%{{y}} ({head})<br>attention: %{{z:.4f}}"
                          "<extra></extra>", name=f"{what}s {idx[0] + 1}–{idx[-1] + 1}"))
        axes[f"xaxis{sfx}"] = dict(anchor=f"y{sfx}", domain=[0.0, 1.0], tickmode="array",
                                   tickvals=idx, ticktext=labels, tickangle=-60, showgrid=False,
                                   range=[idx[0] - 0.5, idx[0] + span - 0.5], **FAST_TICKS)
        axes[f"yaxis{sfx}"] = dict(anchor=f"x{sfx}", domain=[bottom, top],
                                   autorange="reversed", showgrid=False, **FAST_TICKS)
    per_block = 30 * n_rows + 95
    layout = dict(
        axes, title=dict(text=title or f"[CLS] → {what} attention, {head}"),
        coloraxis=dict(colorscale=COLORSCALE_STOPS, cmin=0, cmax=zmax,
                       colorbar=dict(title=dict(text="attention"), thickness=12)),
        height=140 + per_block * len(chunks), margin=dict(l=70, r=20, t=50, b=100))
    if len(chunks) == 1 and n_cols > 48:
        layout["width"] = figure_width(n_cols)
    return unchecked_figure(traces, layout)


def heads_figure(view: ClsView, layer: int, wrap: int | None = None) -> go.Figure:
    """Small multiples: one strip of [CLS]→token attention per head of one layer
    (per block of ``wrap`` columns with ``wrap``).

    The app does not wrap this one: 12 heads x 6 blocks is 72 subplots, which Plotly.js
    takes seconds to lay out; one strip per head over all tokens draws at once."""
    n_heads, n_cols = view.values.shape
    chunks = _chunks(n_cols, wrap)
    # One strip per head; between blocks an empty spacer row holds the tick labels.
    plan = []  # (block, head) per subplot row; head None = spacer
    for b in range(len(chunks)):
        if b:
            plan.append((b, None))
        plan.extend((b, h) for h in range(n_heads))
    heights = [1.0 if h is not None else 4.0 for _, h in plan]
    # Subplot axes laid out by hand (what make_subplots would do): make_subplots plus
    # per-row updates take ~0.6 s at 60 strips, this takes ~50 ms.
    total = sum(heights)
    tops = np.cumsum([0.0] + heights) / total
    zmax = float(view.values.max()) if view.values.size else 1.0
    span = len(chunks[0])
    traces, axes, annotations = [], {}, []
    for row, (b, h) in enumerate(plan, start=1):
        idx = list(chunks[b])
        labels = [view.labels[i] for i in idx]
        sfx = "" if row == 1 else str(row)
        dom = [1 - tops[row], 1 - tops[row - 1]]
        axes[f"yaxis{sfx}"] = dict(domain=dom, anchor=f"x{sfx}", showticklabels=False,
                                   showgrid=False, zeroline=False, **FAST_TICKS)
        if h is None:
            axes[f"xaxis{sfx}"] = dict(visible=False, anchor=f"y{sfx}")
            continue
        annotations.append(dict(text=f"h{h + 1}", x=1.0, xref="paper", xanchor="left",
                                y=sum(dom) / 2, yref="paper", yanchor="middle",
                                showarrow=False, font=dict(size=11)))
        traces.append(dict(
            type="heatmap", z=view.values[h:h + 1, idx], x=idx, y=[f"head {h + 1}"], xaxis=f"x{sfx}",
            yaxis=f"y{sfx}", customdata=[labels], coloraxis="coloraxis", xgap=1, ygap=1,
            hovertemplate=f"token: %{{customdata}}<br>layer {layer + 1}, head {h + 1}"
                          "<br>attention: %{z:.4f}<extra></extra>"))
        step = max(1, -(-len(idx) // MAX_TICKS))   # label every step-th column when crowded
        axes[f"xaxis{sfx}"] = dict(anchor=f"y{sfx}", range=[idx[0] - 0.5, idx[0] + span - 0.5],
                                   showticklabels=h == n_heads - 1, tickmode="array",
                                   tickvals=idx[::step], ticktext=labels[::step], tickangle=-60,
                                   showgrid=False, **FAST_TICKS)
    block_px = 24 * n_heads + 96
    return unchecked_figure(traces, dict(
        axes, annotations=annotations,
        coloraxis=dict(colorscale=COLORSCALE_STOPS, cmin=0, cmax=zmax,
                       colorbar=dict(title=dict(text="attention"), thickness=12)),
        title=dict(text=f"[CLS] → token attention of every head, layer {layer + 1}"),
        height=140 + block_px * len(chunks), margin=dict(l=40, r=40, t=50, b=100)))


def head_bars(view: ClsView, layer: int, head: int) -> go.Figure:
    """One head enlarged: a bar per token of [CLS]→token attention."""
    values = view.values[head]
    n_cols = len(values)
    # 256 rotated tick labels cost Plotly.js ~4 s of layout; label at most MAX_TICKS of them.
    step = max(1, -(-n_cols // MAX_TICKS))
    # Colours computed here, not as numbers + colorscale: Streamlit's plotly.js logs
    # "Invalid color specifier" three times per bar for those (750 console lines at
    # 256 tokens, a quarter of a second of drawing time).
    top = float(values.max()) if n_cols and values.max() > 0 else 1.0
    colors = sample_colorscale(COLORSCALE, np.clip(np.asarray(values, float) / top, 0, 1))
    bar = dict(type="bar", x=list(range(n_cols)), y=values, customdata=view.labels,
               marker=dict(color=colors),
               hovertemplate=f"token: %{{customdata}}<br>layer {layer + 1}, head {head + 1}"
                             "<br>attention: %{y:.4f}<extra></extra>")
    return unchecked_figure([bar], dict(
        title=dict(text=f"Layer {layer + 1}, head {head + 1}: [CLS] → token"), height=340,
        margin=dict(l=50, r=20, t=50, b=110),
        xaxis=dict(tickmode="array", tickvals=list(range(n_cols))[::step],
                   ticktext=view.labels[::step], tickangle=-60, **FAST_TICKS),
        yaxis=dict(title=dict(text="attention"), **FAST_TICKS)))


_LINE_ENDS = re.compile(r"\r\n|\r|\n")


def highlight_html(text: str, spans: list[tuple[int, int]], scores, rgb=(255, 170, 0),
                   signed: bool = False, rgb_neg=(45, 108, 223),
                   css_class: str = "rb-highlight") -> str:
    """The review with each word's background as strong as its score.

    Unsigned (attention): negative scores are drawn as zero, the strongest word in
    ``rgb``. Signed (gradient × input, IG): a diverging scale centred on 0, words
    for the prediction in ``rgb``, words against it in ``rgb_neg``, both scaled by
    the largest |score|, so evidence against the prediction stays visible.

    Every piece of the review goes through ``html.escape``: a review is data, and
    ``<img src=x onerror=...>`` must show as text, never run.
    """
    scores = np.asarray(scores, dtype=float)
    if signed:
        top = float(np.abs(scores).max()) if scores.size and np.abs(scores).max() > 0 else 1.0
    else:
        top = float(scores.max()) if scores.size and scores.max() > 0 else 1.0
    out, pos = [], 0
    for (s, e), sc in zip(spans, scores):
        if s > pos:
            out.append(html.escape(text[pos:s]))
        if signed:
            r, g, b = rgb if sc >= 0 else rgb_neg
            alpha = 0.08 + 0.82 * (abs(sc) / top) if sc != 0 else 0.0
            title = f"{sc:+.3g}"
        else:
            r, g, b = rgb
            alpha = 0.08 + 0.82 * (sc / top) if sc > 0 else 0.0
            title = f"{sc:.3f}"
        word = html.escape(text[s:e])
        out.append(f'<span class="rb-w" title="{title}" '
                   f'style="background: rgba({r},{g},{b},{alpha:.2f}); border-radius:3px; '
                   f'padding:0 1px">{word}</span>')
        pos = e
    out.append(html.escape(text[pos:]))
    # Every line ending Markdown knows (LF, CR, CRLF) becomes <br>: a blank line would end
    # the HTML block, and Markdown would render the rest of the review (a lone CR too).
    body = _LINE_ENDS.sub("<br>", "".join(out))
    return (f'<div class="{html.escape(css_class)}" style="line-height:1.9; font-size:1.02rem; '
            f'white-space:normal; overflow-wrap:anywhere">{body}</div>')


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
