"""Hostile review texts: what a user may paste, and what each page must do with it.

Every text is data. A page either predicts it (the prediction card shows) and draws
it as the literal characters typed, or says in a plain message why it cannot. No
text may inject an element, run a script (each payload's JavaScript would set
``window.__pwned``), open a dialog or make the browser fetch anything (the Markdown
image points off the machine, at evil.example).

``PWN`` marks the part of each payload that Markdown, LaTeX or Streamlit's own
directives would turn into formatting: an element holding ``PWN`` (a heading, bold,
a KaTeX formula, a link) means the text was rendered instead of shown.

Used by tests/browser/test_browser_hostile.py (Predict, Error analysis search, Inside BERT)
and the unit tests of the escaping helpers.
"""
from __future__ import annotations

from dataclasses import dataclass

MARKER = "PWN"
PWNED = "__pwned"            # the global every payload's JavaScript would set


@dataclass(frozen=True)
class Hostile:
    name: str
    text: str
    predicts: bool = True             # False: the page shows a message instead
    shows: tuple[str, ...] = ()       # literal fragments the rendered text must hold;
                                      # empty: the whole text (whitespace collapsed)
    why: str = ""


def _long_text() -> str:
    """100,000 characters: a real-looking review repeated, with markers at both ends."""
    start, end = "LONGSTART the battery is great ", " LONGEND"
    body = "the screen <b>cracked</b> & the seller said **nothing**; "
    n = 100_000 - len(start) - len(end)
    return start + (body * (n // len(body) + 1))[:n] + end


LONG = _long_text()

CORPUS: tuple[Hostile, ...] = (
    # ---- HTML and JavaScript, in several encodings
    Hostile("script tag", "Great phone <script>window.__pwned=1;alert('PWN')</script> five stars"),
    Hostile("img onerror", "Nice <img src=x onerror=\"window.__pwned=1;alert(1)\"> case"),
    Hostile("svg onload", "Bad charger <svg onload=\"window.__pwned=1\"><circle r=9></svg> broke"),
    Hostile("html entities", "Escaped &lt;script&gt;window.__pwned=1&lt;/script&gt; &amp;amp; "
                             "&quot;ok&quot;"),
    Hostile("url encoded", "Link %3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E returned"),
    Hostile("fullwidth and escapes", "Fullwidth ＜script＞window.__pwned=1＜/script＞ and "
            "\\u003cscript\\u003e and \\x3cimg\\x3e"),
    Hostile("javascript url", "Click javascript:window.__pwned=1 or "
            "<a href=\"javascript:window.__pwned=1\">PWN here</a> for a refund"),
    Hostile("iframe srcdoc", "Case <iframe srcdoc=\"<script>parent.window.__pwned=1</script>\">"
            "</iframe> fits"),
    Hostile("style and link injection", "Bright <style>body{display:none}</style>"
            "<a href=\"http://evil.example/\" style=\"position:fixed;inset:0\">PWN</a> screen"),
    Hostile("attribute breakout", "Speaker \" onmouseover=\"window.__pwned=1\" x=' "
            "'><b>PWN</b> loud"),
    # ---- Markdown, LaTeX and Streamlit's directives
    Hostile("markdown javascript link", "See [PWN link](javascript:window.__pwned=1) and "
            "<javascript:alert(1)> please"),
    Hostile("markdown remote image", "Photo ![PWN](http://evil.example/x.png) of the box"),
    Hostile("latex inline and block", "Math $\\alert{PWN}$ and $$\\frac{PWN}{2}$$ and "
            "\\(PWN\\) signs"),
    Hostile("streamlit directives", "Colour :red[PWN red] :rainbow[PWN] :material/home: "
            ":smile: :red-background[PWN]"),
    Hostile("bold italics strike", "**PWN bold** __PWN__ *PWN italic* ~~PWN struck~~ `PWN code`"),
    Hostile("heading and blocks", "# PWN heading\n\n> PWN quote\n\n- PWN item\n\n---\n\n"
            "| PWN | table |\n|---|---|\n| a | b |",
            shows=("# PWN heading", "> PWN quote", "- PWN item", "| PWN | table |")),
    Hostile("raw html block after blank lines", "fine\n\n<div onclick=\"window.__pwned=1\">"
            "PWN div</div>\n\n<details open><summary>PWN</summary>x</details>",
            shows=("fine", "<div onclick=\"window.__pwned=1\">PWN div</div>",
                   "<details open><summary>PWN</summary>x</details>")),
    Hostile("carriage returns end an HTML block",
            "ok\r\r**PWN bold** [PWN](javascript:window.__pwned=1)\r\r# PWN",
            shows=("ok", "**PWN bold** [PWN](javascript:window.__pwned=1)", "# PWN"),
            why="CommonMark ends a line at a lone CR, so two close any HTML block"),
    # ---- sizes and unusual characters
    Hostile("100,000 characters", LONG, shows=("LONGSTART the battery is great",
                                               "the screen <b>cracked</b> & the seller said "
                                               "**nothing**;", "LONGEND")),
    Hostile("only emoji", "😡😡😡 📱💥 👎"),
    Hostile("only whitespace", " \t\n   \n\t ", predicts=False,
            why="nothing to read: the page asks for a review"),
    Hostile("right to left and bidi overrides",
            "الهاتف ممتاز جدا \u202eevil.exe\u202c עברית \u2067PWN\u2069 \u200fdone"),
    Hostile("zero-width characters", "good\u200bphone\ufeff with\u200c zero\u200dwidth \u2060joins"),
    Hostile("only zero-width characters", "\u200b\ufeff\u200b\u2060", predicts=False,
            why="no character the model reads: the page says so instead of a traceback"),
    Hostile("control characters and NUL", "before\x00NUL \x01\x02\x07\x08\x1b[31m"
            "PWN\x1b[0m \x7f after", shows=("before", "NUL", "[31mPWN", "[0m", "after"),
            why="NUL becomes U+FFFD in the browser; the other controls stay data"),
    Hostile("only control characters and NUL", "\x00\x01\x02\x00\x7f", predicts=False,
            why="no character the model reads"),
)

BY_NAME = {h.name: h for h in CORPUS}
assert len(BY_NAME) == len(CORPUS), "duplicate names"
