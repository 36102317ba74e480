"""Figure builders for the "Inside BERT" page: anatomy results in, Plotly figures out.

Pure functions, no Streamlit (like ``reviewbert/viz/figures.py``). Every matrix is a heatmap
whose hover gives the row (token), the column and the exact value; small
matrices also print their numbers in the cells, which is what a class reads
off a projector. Rows are placed at integer positions with the tokens as tick
labels, so a repeated token ("the", "the") keeps its own row.

Text from the user (tokens, sentences, words) goes through :func:`_esc` before
Plotly sees it: Plotly renders a small HTML subset in labels (``<b>``, ``<a>``)
and decodes entities, so escaping shows ``<b>`` as typed instead of obeying it.
"""
from __future__ import annotations

import html

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reviewbert.viz.figures import FAST_TICKS

SIGNED = "RdBu_r"           # negative blue, zero white, positive red
POSITIVE = "Viridis"        # attention weights, 0..1 (as on the main page)
ROW_PX = 24
HOVER_NAMES_CELLS = 20_000  # up to this many cells, the hover names the token (see _hover_names)
MAX_ROWS_PX = 640           # a long review's rows get thinner: a picture, not a scroll
TEXT_CELLS = 16             # print the numbers in the cells up to this many rows/columns
MAX_ROW_TICKS = 40


def _esc(s: str) -> str:
    return html.escape(str(s), quote=False)


def _row_axis(labels: list[str]) -> dict:
    n = len(labels)
    step = max(1, -(-n // MAX_ROW_TICKS))
    idx = list(range(n))
    return dict(tickmode="array", tickvals=idx[::step], ticktext=[_esc(x) for x in labels][::step],
                autorange="reversed", showgrid=False, **FAST_TICKS)


def _limit(m: np.ndarray) -> float:
    """Colour range ±this. BERT vectors have a few dimensions far larger than the rest
    (MiniLM's [CLS] has one ~10× the others): scaled to the maximum, everything else
    would be white. So big matrices saturate at the 99th percentile of |value|;
    hover still gives every exact value."""
    a = np.abs(m[np.isfinite(m)]) if m.size else np.zeros(1)
    top = float(np.percentile(a, 99)) if a.size > 400 else float(a.max(initial=0.0))
    return top if top > 0 else 1.0


def _rows_px(n: int) -> int:
    """Pixel height of ``n`` token rows: 24 each, squeezed to MAX_ROWS_PX in all."""
    return int(min(ROW_PX * n, max(MAX_ROWS_PX, 3 * n)))


def _gap(n: int) -> int:
    """1 px between cells while cells are wide; none past 100 (a gap would hide the cell)."""
    return 1 if n <= 100 else 0


def _left_margin(labels: list[str]) -> int:
    return int(min(220, 30 + 7 * max((len(x) for x in labels), default=4)))


def _hover_names(rows: list[str], col_labels: list[str], n_cols: int, col_name: str):
    """(customdata, hover text) naming a cell's row and column. Names cost one string
    per cell in the page (customdata), so past :data:`HOVER_NAMES_CELLS` the hover
    gives positions instead (the axis still labels the tokens)."""
    if len(rows) * n_cols > HOVER_NAMES_CELLS:
        return None, f"token %{{y}} · {col_name} %{{x}}"
    custom = np.empty((len(rows), n_cols, 2), dtype=object)
    custom[:, :, 0] = np.array([_esc(r) for r in rows], dtype=object)[:, None]
    custom[:, :, 1] = np.array(col_labels, dtype=object)[None, :]
    return custom, f"%{{customdata[0]}} · {col_name} %{{customdata[1]}}"


def matrix_heatmap(m: np.ndarray, rows: list[str], title: str, cols: list[str] | None = None,
                   col_name: str = "dimension", signed: bool = True, height: int | None = None,
                   digits: int = 2) -> go.Figure:
    """One matrix: rows are tokens (or anything named by ``rows``), columns dimensions
    (or tokens, with ``cols``). ``signed``: a blue-white-red scale centred on 0;
    otherwise viridis from 0 (attention weights)."""
    m = np.asarray(m, dtype=np.float32)
    n_rows, n_cols = m.shape
    col_labels = [_esc(c) for c in cols] if cols is not None else [str(j) for j in range(n_cols)]
    custom, where = _hover_names(rows, col_labels, n_cols, col_name)
    scale = dict(colorscale=SIGNED, zmid=0.0, zmin=-_limit(m), zmax=_limit(m)) if signed else \
        dict(colorscale=POSITIVE, zmin=0.0, zmax=max(float(m.max()) if m.size else 1.0, 1e-9))
    show_text = n_rows <= TEXT_CELLS and n_cols <= TEXT_CELLS
    trace = go.Heatmap(
        z=m, x=list(range(n_cols)), y=list(range(n_rows)), customdata=custom,
        xgap=_gap(n_cols), ygap=_gap(n_rows),
        colorbar=dict(thickness=10, len=0.9),
        hovertemplate=f"{where}<br>value: %{{z:.5f}}<extra></extra>",
        texttemplate=f"%{{z:.{digits}f}}" if show_text else None, **scale)
    fig = go.Figure(trace)
    xaxis = dict(showgrid=False, title=col_name, **FAST_TICKS)
    if cols is not None:
        step = max(1, -(-n_cols // MAX_ROW_TICKS))
        xaxis.update(tickmode="array", tickvals=list(range(n_cols))[::step],
                     ticktext=col_labels[::step], tickangle=-60, title=None)
    fig.update_layout(title=_esc(title), xaxis=xaxis, yaxis=_row_axis(rows),
                      height=height or max(200, 110 + _rows_px(n_rows) + (60 if cols else 0)),
                      margin=dict(l=_left_margin(rows), r=10, t=45, b=50 if cols is None else 90))
    return fig


def token_chips_html(tokens: list[str], ids: list[int], special: list[bool]) -> str:
    """The WordPieces as chips with their ids under them (escaped: a token is data)."""
    chips = []
    for tok, i, sp in zip(tokens, ids, special):
        bg = "#e8eefc" if sp else ("#fff4d6" if tok.startswith("##") else "#eef7ee")
        chips.append(
            f'<span class="rb-chip" style="display:inline-block;margin:3px;padding:4px 8px;'
            f'border-radius:6px;background:{bg};border:1px solid #ccd;text-align:center">'
            f'<span style="font-family:monospace;font-size:1.05em">{html.escape(tok)}</span><br>'
            f'<span style="font-size:0.75em;color:#667">{int(i)}</span></span>')
    return f'<div class="rb-chips" style="line-height:1.2">{"".join(chips)}</div>'


def one_hot_figure(tokens: list[str], ids: list[int], vocab_size: int) -> go.Figure:
    """Each token as a one-hot row: a single 1 at its id among ``vocab_size`` columns."""
    fig = go.Figure(go.Scatter(
        x=list(ids), y=list(range(len(ids))), mode="markers",
        marker=dict(symbol="square", size=9, color="#d62728"),
        customdata=[_esc(t) for t in tokens],
        hovertemplate="%{customdata}: 1 in column %{x}, 0 in the other "
                      f"{vocab_size - 1:,}<extra></extra>"))
    fig.update_layout(
        title=f"One-hot rows: {len(ids)} × {vocab_size:,}, one 1 per row",
        xaxis=dict(range=[-0.5, vocab_size - 0.5], title="vocabulary id", showgrid=True, **FAST_TICKS),
        yaxis=_row_axis(tokens), height=max(200, 110 + _rows_px(len(ids))),
        margin=dict(l=90, r=10, t=45, b=50), showlegend=False)
    return fig


def embeddings_figure(parts: list[tuple[str, np.ndarray]], tokens: list[str]) -> go.Figure:
    """The embedding tables' rows for each token, their sum, and the LayerNorm output:
    one panel each, stacked, each with its own colour range (hover for the numbers)."""
    n = len(parts)
    T = len(tokens)
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.35 / max(n, 1) / 2,
                        subplot_titles=[_esc(name) for name, _ in parts])
    for r, (name, m) in enumerate(parts, start=1):
        m = np.asarray(m, dtype=np.float32)
        lim = _limit(m)
        custom, where = _hover_names(tokens, [str(j) for j in range(m.shape[1])], m.shape[1],
                                     "dimension")
        fig.add_trace(go.Heatmap(
            z=m, x=list(range(m.shape[1])), y=list(range(T)), zmin=-lim, zmax=lim, zmid=0.0,
            colorscale=SIGNED, showscale=False, customdata=custom,
            hovertemplate=f"{_esc(name)}<br>{where}<br>value: %{{z:.5f}}<extra></extra>"),
            row=r, col=1)
        fig.update_yaxes(row=r, col=1, **_row_axis(tokens))
    fig.update_xaxes(showgrid=False, **FAST_TICKS)
    fig.update_xaxes(title="dimension", row=n, col=1)
    panel = max(70, min(_rows_px(T), MAX_ROWS_PX // 2) + 40)
    fig.update_layout(height=80 + panel * n, margin=dict(l=_left_margin(tokens), r=10, t=40, b=50),
                      showlegend=False)
    return fig


def position_similarity_figure(sim: np.ndarray) -> go.Figure:
    """Cosine similarity between the learned position embeddings (positions from 0)."""
    n = sim.shape[0]
    fig = go.Figure(go.Heatmap(
        z=sim, x=list(range(n)), y=list(range(n)), colorscale=SIGNED, zmid=0.0, zmin=-1, zmax=1,
        colorbar=dict(thickness=10, title="cosine"),
        hovertemplate="positions %{y} and %{x}<br>cosine: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Learned positions: cosine similarity of the first {n}",
                      xaxis=dict(title="position", showgrid=False, **FAST_TICKS),
                      yaxis=dict(title="position", autorange="reversed", showgrid=False, **FAST_TICKS),
                      width=560, height=500, margin=dict(l=60, r=10, t=45, b=50))
    return fig


def norms_figure(norms: np.ndarray, steps: list[str], tokens: list[str], layer: int) -> go.Figure:
    """Each token's vector length after each step of one layer (rows: steps)."""
    norms = np.asarray(norms, dtype=np.float32)
    T = len(tokens)
    show_text = T <= 24
    toks = [_esc(t) for t in tokens]
    fig = go.Figure(go.Heatmap(
        z=norms, x=list(range(T)), y=list(range(len(steps))), colorscale="Blues",
        colorbar=dict(thickness=10, title="norm"),
        customdata=np.array([toks] * len(steps), dtype=object),
        texttemplate="%{z:.1f}" if show_text else None,
        hovertemplate="%{customdata}<br>norm: %{z:.3f}<extra></extra>"))
    step = max(1, -(-T // MAX_ROW_TICKS))
    fig.update_layout(
        title=f"Layer {layer + 1}: the length (L2 norm) of each token's vector after each step",
        xaxis=dict(tickmode="array", tickvals=list(range(T))[::step], ticktext=toks[::step],
                   tickangle=-60, showgrid=False, **FAST_TICKS),
        yaxis=dict(tickmode="array", tickvals=list(range(len(steps))), ticktext=list(steps),
                   autorange="reversed", showgrid=False, **FAST_TICKS),
        height=120 + 30 * len(steps) + 60, margin=dict(l=150, r=10, t=45, b=90))
    return fig


def _short(layer_names: list[str]) -> list[str]:
    return ["static" if n.startswith("static") else "input" if n.startswith("input") else n
            for n in layer_names]


def similarity_figure(layer_names: list[str], sims: dict[str, np.ndarray], word: str) -> go.Figure:
    """Cosine similarity of the word's vectors between sentences, stage by stage."""
    fig = go.Figure()
    for name, y in sims.items():
        fig.add_trace(go.Scatter(x=list(range(len(layer_names))), y=np.asarray(y, float),
                                 mode="lines+markers", name=_esc(name),
                                 customdata=[_esc(n) for n in layer_names],
                                 hovertemplate="%{customdata}<br>cosine: %{y:.3f}"
                                               "<extra>%{fullData.name}</extra>"))
    low = min(float(np.min(y)) for y in sims.values()) if sims else 0.0
    fig.update_layout(
        title=f"“{_esc(word)}”: cosine similarity between the sentences, layer by layer",
        xaxis=dict(tickmode="array", tickvals=list(range(len(layer_names))),
                   ticktext=_short(layer_names), **FAST_TICKS),
        yaxis=dict(title="cosine", range=[min(0.0, low - 0.05), 1.05], **FAST_TICKS),
        height=380, margin=dict(l=60, r=10, t=45, b=60),
        legend=dict(orientation="h", y=-0.2))
    return fig


def pca_figure(points: np.ndarray, sentences: list[str], layer_names: list[str],
               explained: np.ndarray, word: str) -> go.Figure:
    """One path per sentence through the 2-D PCA plane: a point per stage, labelled."""
    fig = go.Figure()
    short = [n.replace("layer ", "L") for n in _short(layer_names)]
    for s, sentence in enumerate(sentences):
        fig.add_trace(go.Scatter(
            x=points[s, :, 0], y=points[s, :, 1], mode="lines+markers+text", text=short,
            textposition="top center", name=_esc(sentence), marker=dict(size=9),
            customdata=[_esc(n) for n in layer_names],
            hovertemplate="%{customdata}<br>(%{x:.3f}, %{y:.3f})<extra>%{fullData.name}</extra>"))
    ev = [float(e) for e in explained]
    fig.update_layout(
        title=f"“{_esc(word)}” in 2-D (PCA of its unit vectors, all sentences and layers)",
        xaxis=dict(title=f"PC 1 ({ev[0]:.0%} of the variance)", zeroline=False, **FAST_TICKS),
        yaxis=dict(title=f"PC 2 ({ev[1]:.0%})", zeroline=False, **FAST_TICKS),
        height=420, margin=dict(l=60, r=10, t=45, b=50), legend=dict(orientation="h", y=-0.2))
    return fig


def vectors_figure(rows: list[tuple[str, np.ndarray]], title: str) -> go.Figure:
    """A few vectors of the same length as stacked one-row strips (hover for values)."""
    m = np.stack([np.asarray(v, dtype=np.float32) for _, v in rows])
    return matrix_heatmap(m, [name for name, _ in rows], title, height=110 + 34 * len(rows))


def logits_figure(names: list[str], logits: np.ndarray, predicted: int) -> go.Figure:
    logits = np.asarray(logits, dtype=float)
    colors = ["#2d6cdf" if i == predicted else "#b8c4d9" for i in range(len(names))]
    fig = go.Figure(go.Bar(x=logits, y=[_esc(n) for n in names], orientation="h",
                           marker_color=colors, text=[f"{v:+.3f}" for v in logits],
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: logit %{x:.5f}<extra></extra>"))
    lo, hi = min(0.0, float(logits.min())), max(0.0, float(logits.max()))
    pad = 0.3 * (hi - lo or 1.0)           # room for the numbers beside the bars
    fig.update_layout(title="Logits: classifier weights · pooled vector + bias",
                      height=80 + 38 * len(names), margin=dict(l=10, r=30, t=45, b=30),
                      xaxis=dict(range=[lo - pad, hi + pad], title="logit"),
                      yaxis=dict(autorange="reversed"), showlegend=False)
    return fig


def mask_figure(candidates: list[tuple[str, float]], title: str) -> go.Figure:
    words = [_esc(w) for w, _ in candidates]
    probs = [p for _, p in candidates]
    fig = go.Figure(go.Bar(x=probs, y=words, orientation="h", marker_color="#2d6cdf",
                           text=[f"{p:.1%}" for p in probs], textposition="outside",
                           cliponaxis=False, hovertemplate="%{y}: %{x:.4f}<extra></extra>"))
    fig.update_layout(title=_esc(title), height=80 + 36 * len(words),
                      xaxis=dict(range=[0, 1], tickformat=".0%"),
                      yaxis=dict(autorange="reversed"), margin=dict(l=10, r=50, t=45, b=30))
    return fig
