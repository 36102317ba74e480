"""Text from users and files inside Streamlit Markdown: shown as typed, never as formatting.

A review, a label name from a config.json or a path in an error message may hold
``*``, ``[x](javascript:…)`` or ``$…$``; every Markdown (and LaTeX) special
character gets a backslash, so Streamlit renders it literally.
"""
from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def md_escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", str(text))
