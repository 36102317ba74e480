"""Figure builders for What if? (``reviewbert.whatif.counterfactuals``) and brittleness: plain results in,
Plotly figures or HTML strings out. No Streamlit, no model.

- :func:`diff_html`: the edited review with the words added and removed marked;
- :func:`probability_change`: both versions' class probabilities, the change written in;
- :func:`word_change_bars`: one method's word scores, edit minus original, per word;
- :func:`sentence_bars`: the change of every class probability when each sentence is dropped;
- :func:`brittleness_histogram`: words needed to change the rating, correct vs wrong.

Review text is data: every piece of it goes through ``html.escape`` (in the HTML, and in
Plotly labels and hovers, whose pseudo-HTML would otherwise render ``<b>`` or ``<a>``),
and line endings become ``<br>`` as in ``highlight.highlight_html``.
"""
from __future__ import annotations

import html

import numpy as np
import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go

from reviewbert.viz.figures import unchecked_figure
from reviewbert.viz.highlight import LINE_ENDS

ADDED, REMOVED = (42, 157, 92), (214, 39, 40)
BEFORE_COLOR, AFTER_COLOR = "#b8c4d9", "#2d6cdf"
CLASS_COLORS = ("#d62728", "#e8871e", "#7f7f7f", "#2a9d5c", "#2d6cdf")


def plotly_text(text: str, limit: int = 120) -> str:
    """User text for a Plotly label or hover: one line, cut, HTML-escaped (Plotly turns
    ``&lt;`` back into a literal ``<`` and renders no tag from it)."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return html.escape(text, quote=False)


def _mark(text: str, rgb, struck: bool) -> str:
    r, g, b = rgb
    # A removed word keeps its distance by a margin, not a space: the text outside the
    # removed marks is exactly the edit as typed.
    deco = "text-decoration: line-through; margin:0 0.3em; " if struck else ""
    kind = "rb-removed" if struck else "rb-added"
    return (f'<span class="{kind}" style="background: rgba({r},{g},{b},0.22); {deco}'
            f'border-radius:3px; padding:0 2px">{html.escape(text)}</span>')


MAX_MARKED = 2000
"""More changed words than this (a whole other text pasted in): the edit is drawn as typed,
unmarked, rather than as thousands of marks (a 100,000-character paste would be ~4 MB)."""


def too_many_changes(changes) -> bool:
    return sum(len(c.old) + len(c.new) for c in changes if c.op != "equal") > MAX_MARKED


def diff_html(before_text: str, before_spans, after_text: str, after_spans, changes,
              css_class: str = "rb-diff") -> str:
    """The edited text as typed, words added on green, removed ones struck through on red
    where they were (outside the removed marks, the text is exactly the edit). ``changes``:
    ``whatif.diff_words`` of the two word lists; spans are the words' character spans in
    each text (``whatif.text_diff`` gives all three)."""
    out, pos = [], 0
    for c in ([] if too_many_changes(changes) else changes):
        if c.op in ("delete", "replace"):
            if c.new:       # removed words go before the words that replaced them
                s = after_spans[c.new[0]][0]
                out.append(html.escape(after_text[pos:s]))
                pos = s
            out.append(_mark(" ".join(before_text[slice(*before_spans[i])] for i in c.old),
                             REMOVED, True))
        for j in c.new:
            s, e = after_spans[j]
            out.append(html.escape(after_text[pos:s]))
            piece = after_text[s:e]
            out.append(html.escape(piece) if c.op == "equal" else _mark(piece, ADDED, False))
            pos = e
    out.append(html.escape(after_text[pos:]))
    body = LINE_ENDS.sub("<br>", "".join(out))
    return (f'<div class="{html.escape(css_class)}" style="line-height:1.9; font-size:1.02rem; '
            f'white-space:normal; overflow-wrap:anywhere">{body}</div>')


def probability_change(names, before, after, labels=("original", "edit")) -> go.Figure:
    """Grouped horizontal bars: each class's probability before and after, Δ written in."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    delta = after - before
    y = [plotly_text(n, 40) for n in names]
    traces = [dict(type="bar", orientation="h", x=before, y=y, name=labels[0],
                   marker=dict(color=BEFORE_COLOR),
                   hovertemplate="%{y}: %{x:.3f}<extra>" + labels[0] + "</extra>"),
              dict(type="bar", orientation="h", x=after, y=y, name=labels[1],
                   marker=dict(color=AFTER_COLOR), text=[f"{d:+.1%}" for d in delta],
                   textposition="outside", cliponaxis=False,
                   hovertemplate="%{y}: %{x:.3f} (%{text})<extra>" + labels[1] + "</extra>")]
    return unchecked_figure(traces, dict(
        barmode="group", height=90 + 52 * len(names), margin=dict(l=10, r=60, t=40, b=30),
        title=dict(text="Class probabilities: original and edit (change written in)"),
        xaxis=dict(range=[0, 1.08], tickformat=".0%"), yaxis=dict(autorange="reversed"),
        legend=dict(orientation="h", y=1.12, x=0.5, xanchor="center")))


def word_change_bars(rows: list[dict], method_label: str, top: int = 25) -> go.Figure:
    """The ``top`` words whose score changed most (``Comparison.word_rows``): kept words in
    blue (score after − before), added in green, removed in red (the score they had)."""
    rows = [r for r in rows if r["change"] is not None]
    biggest = max((abs(r["change"]) for r in rows), default=0.0)
    rows = [r for r in rows if abs(r["change"]) > 1e-6 * biggest]     # unchanged words: no bar
    rows = sorted(rows, key=lambda r: -abs(r["change"]))[:top]
    color = {"kept": AFTER_COLOR, "added": "rgb(42,157,92)", "removed": "rgb(214,39,40)"}
    labels = [f"{plotly_text(r['word'], 30)} ({r['op']})" for r in rows]
    bar = dict(type="bar", orientation="h", x=[r["change"] for r in rows],
               y=list(range(len(rows))), marker=dict(color=[color[r["op"]] for r in rows]),
               customdata=labels, hovertemplate="%{customdata}: %{x:+.4f}<extra></extra>")
    return unchecked_figure([bar], dict(
        height=100 + 22 * max(len(rows), 1), margin=dict(l=10, r=20, t=45, b=35),
        title=dict(text=f"{plotly_text(method_label, 60)}: change of each word's score (edit − original)"),
        yaxis=dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=labels,
                   autorange="reversed"),
        xaxis=dict(title=dict(text="score change"), zeroline=True), showlegend=False))


def sentence_bars(sentences: list[str], deltas, names) -> go.Figure:
    """One group of bars per sentence: how much each class's probability moves when that
    sentence is dropped (``SentenceOcclusion.deltas``)."""
    deltas = np.asarray(deltas, dtype=float).reshape(len(sentences), len(names))
    x = [f"S{i + 1}" for i in range(len(sentences))]
    hover = [plotly_text(s, 140) for s in sentences]
    traces = [dict(type="bar", x=x, y=deltas[:, c], name=plotly_text(n, 30),
                   marker=dict(color=CLASS_COLORS[c % len(CLASS_COLORS)]), customdata=hover,
                   hovertemplate="%{x}: %{customdata}<br>" + plotly_text(n, 30)
                                 + ": %{y:+.3f}<extra></extra>")
              for c, n in enumerate(names)]
    return unchecked_figure(traces, dict(
        barmode="group", height=360, margin=dict(l=10, r=10, t=50, b=40),
        title=dict(text="Each sentence dropped in turn: change of every class probability"),
        yaxis=dict(title=dict(text="p(class | without it) − p(class)"), tickformat="+.0%",
                   zeroline=True), legend=dict(orientation="h", y=-0.15)))


def brittleness_histogram(summary: dict, max_words: int) -> go.Figure:
    """Words needed to change the rating (``brittleness.summarize``), bars for the correct
    and the wrong predictions; the last bar: no change within ``max_words`` words."""
    x = [str(k) for k in range(1, max_words + 1)] + [f"> {max_words}"]
    traces = []
    for name, color in (("correct", "#2a9d5c"), ("wrong", "#d62728")):
        g = summary[name]
        counts = [g["histogram"].get(k, 0) for k in range(1, max_words + 1)] + [g["histogram"]["none"]]
        share = [c / g["n"] if g["n"] else 0.0 for c in counts]
        traces.append(dict(type="bar", x=x, y=share, name=f"{name} predictions ({g['n']})",
                           marker=dict(color=color), customdata=counts,
                           hovertemplate="%{x} words: %{y:.1%} (%{customdata})<extra>" + name + "</extra>"))
    return unchecked_figure(traces, dict(
        barmode="group", height=340, margin=dict(l=10, r=10, t=50, b=45),
        title=dict(text="Words deleted before the predicted rating changes"),
        xaxis=dict(title=dict(text="words deleted (greedy, then pruned)"), type="category"),
        yaxis=dict(title=dict(text="share of reviews"), tickformat=".0%"),
        legend=dict(orientation="h", y=1.12, x=0.5, xanchor="center")))
