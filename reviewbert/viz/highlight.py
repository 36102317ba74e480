"""A review as HTML, each word's background as strong as its score: the Predict page's
highlighted review, every explanation row, the what-if texts and the report.

Apart from the figures: the app's frame sets :data:`HIGHLIGHT_CSS` on every page before
its first paint, and that must not wait for Plotly.
"""
from __future__ import annotations

import html
import re

import numpy as np

LINE_ENDS = re.compile(r"\r\n|\r|\n")


HIGHLIGHT_RGB, HIGHLIGHT_RGB_NEG = (255, 170, 0), (45, 108, 223)
HIGHLIGHT_STEPS = 10


def _alpha(k: int) -> float:
    """The background opacity of step ``k`` (1..HIGHLIGHT_STEPS) of a word's score."""
    return 0.08 + 0.82 * k / HIGHLIGHT_STEPS


HIGHLIGHT_CSS = ".rb-w{border-radius:3px;padding:0 1px}" + "".join(
    f".rb-{c}{k}{{background:rgba({r},{g},{b},{_alpha(k):.2f})}}"
    for c, (r, g, b) in (("p", HIGHLIGHT_RGB), ("n", HIGHLIGHT_RGB_NEG))
    for k in range(1, HIGHLIGHT_STEPS + 1))
"""How highlighted words look: set once per page (the app's frame, the report's
stylesheet). A word carries a class for its colour and its step of opacity (``rb-p7``:
for the prediction, 7 of 10), not its own style: a 256-token review's four highlighted
rows were ~140 kB of a prediction's page, they are ~40 kB."""


def escape_text(text: str) -> str:
    """``text`` as HTML text: escaped, and a NUL drawn as U+FFFD. Markdown turned a NUL
    into U+FFFD (CommonMark's rule); the page's highlighted blocks are ``st.html`` now,
    whose HTML parser drops it, so a NUL in a review would vanish from what is shown."""
    return html.escape(text).replace("\x00", "\ufffd")


def highlight_html(text: str, spans: list[tuple[int, int]], scores, rgb=HIGHLIGHT_RGB,
                   signed: bool = False, rgb_neg=HIGHLIGHT_RGB_NEG,
                   css_class: str = "rb-highlight") -> str:
    """The review with each word's background as strong as its score.

    Unsigned (attention): negative scores are drawn as zero, the strongest word in
    ``rgb``. Signed (gradient × input, IG): a diverging scale centred on 0, words
    for the prediction in ``rgb``, words against it in ``rgb_neg``, both scaled by
    the largest |score|, so evidence against the prediction stays visible. Opacity
    comes in :data:`HIGHLIGHT_STEPS` steps (:data:`HIGHLIGHT_CSS`).

    Every piece of the review goes through :func:`escape_text`: a review is data, and
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
            out.append(escape_text(text[pos:s]))
        against = signed and sc < 0
        strength = (abs(sc) if signed else max(float(sc), 0.0)) / top
        title = f"{sc:+.3g}" if signed else f"{sc:.3f}"
        word = escape_text(text[s:e])
        look = ""
        if strength > 0:
            k = min(HIGHLIGHT_STEPS, max(1, round(HIGHLIGHT_STEPS * strength)))
            if (rgb, rgb_neg) == (HIGHLIGHT_RGB, HIGHLIGHT_RGB_NEG):
                look = f" rb-{'n' if against else 'p'}{k}"
            else:   # other colours: the word's own style
                r, g, b = rgb_neg if against else rgb
                look = f'" style="background:rgba({r},{g},{b},{_alpha(k):.2f})'
        out.append(f'<span class="rb-w{look}" title="{title}">{word}</span>')
        pos = e
    out.append(escape_text(text[pos:]))
    # Every line ending Markdown knows (LF, CR, CRLF) becomes <br>: a blank line would end
    # the HTML block, and Markdown would render the rest of the review (a lone CR too).
    body = LINE_ENDS.sub("<br>", "".join(out))
    return (f'<div class="{html.escape(css_class)}" style="line-height:1.9; font-size:1.02rem; '
            f'white-space:normal; overflow-wrap:anywhere">{body}</div>')
