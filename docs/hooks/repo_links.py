"""MkDocs hook that resolves links written from the repository root (``docs/X.md``) in a page.

Some pages began as parts of the README and still link ``docs/benchmark-history.md`` the
way the repository shows it; on the site that link must be relative to the page. The page
files stay as written (the same link works when GitHub shows them), and ``--strict`` still
fails on a link that resolves to nothing.
"""
from __future__ import annotations

import posixpath
import re

# a Markdown link or image target that starts with docs/: ](docs/...)
REPO_LINK = re.compile(r"\]\(docs/([^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page, config, files) -> str:
    here = posixpath.dirname(page.file.src_uri)

    def relative(m: re.Match) -> str:
        return f"]({posixpath.relpath(m.group(1), here or '.')}{m.group(2) or ''})"

    return REPO_LINK.sub(relative, markdown)
