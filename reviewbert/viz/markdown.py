"""Text from users and files inside Streamlit Markdown: shown as typed, never as formatting.

A review, a label name from a config.json or a path in an error message may hold
``*``, ``[x](javascript:…)``, ``$…$`` or ``&lt;``; every Markdown (and LaTeX) special
character gets a backslash, so Streamlit renders it literally (``&`` too, else an entity
such as ``&lt;`` is decoded). That suits words and names; a whole text typed by a user
goes in :func:`md_code`.
"""
from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&])")


# Streamlit's frontend rewrites every ":material/" in a Markdown source to ":material_"
# (its icon syntax) before parsing, even inside a code span and after a backslash: a word
# joiner (U+2060, invisible, zero width) in between keeps the text as typed.
_ICON = ":material/"
_ICON_SAFE = ":material\u2060/"


# Streamlit also reads ":smile:" as an emoji and ":red[x]" as a colour directive after the
# backslashes are gone; the same word joiner after such a colon keeps them as typed.
_SHORTCODE = re.compile(r":(?=[\\A-Za-z0-9_+\-]+(?::|\[))")


def md_escape(text: str) -> str:
    escaped = _SPECIAL.sub(r"\\\1", str(text)).replace(_ICON, _ICON_SAFE)
    return _SHORTCODE.sub(":\u2060", escaped)


def md_code(text: str, limit: int = 80) -> str:
    """Any text as a Markdown code span: shown exactly, nothing in it parsed. Escaping is not
    enough for text from anywhere: Streamlit's Markdown turns ``http://…`` in plain text
    into a link and ``:smile:`` into an emoji *after* the backslashes are read. Whitespace
    runs show as one space (no line to end a block); longer than ``limit`` characters, the
    text is cut (a pasted 100,000-character review is named, not repeated)."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit].rstrip() + "…"
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""
    return f"{fence}{pad}{text.replace(_ICON, _ICON_SAFE)}{pad}{fence}"
