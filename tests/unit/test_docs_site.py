"""The documentation site builds with ``mkdocs build --strict`` and loads nothing from off
the machine, so it opens in a classroom with no network (docs/, mkdocs.yml).

"Offline" here means what a browser fetches by itself when it opens a page: no script,
stylesheet, font, image or frame from an http(s) address in any built page, no
``@import`` or ``url()`` of one in any built stylesheet, and nothing that makes Material's
bundle fetch its optional parts from a CDN (a Mermaid diagram). Links the reader clicks
(``<a href="https://…">``) are not fetched and are allowed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCHED = {"script": ("src",), "link": ("href",), "img": ("src", "srcset"), "iframe": ("src",),
           "source": ("src", "srcset"), "video": ("src", "poster"), "audio": ("src",),
           "embed": ("src",), "object": ("data",), "input": ("src",)}
REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_REMOTE = re.compile(r"@import\s+(url\()?\s*['\"]?\s*(https?:)?//|url\(\s*['\"]?\s*(https?:)?//", re.I)


class _Fetches(HTMLParser):
    """Every address the page makes the browser fetch, and inline <style> text."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and (attrs.get("rel") or "").lower() in ("next", "prev", "canonical"):
            return                      # navigation hints: not fetched
        for name in FETCHED.get(tag, ()):
            value = attrs.get(name) or ""
            self.urls += [u.strip().split(" ")[0] for u in value.split(",")] if "srcset" in name else [value]
        if attrs.get("style"):
            self.styles.append(attrs["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    return out


def test_every_page_of_the_nav_is_built(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    for page in ("index.html", "guide/predict.html", "guide/train.html", "guide/inside-bert.html",
                 "guide/error-analysis.html", "guide/faithfulness.html", "guide/heads.html",
                 "teach.html", "error-analysis-15-minutes.html", "own-data.html", "cli.html",
                 "architecture.html", "performance.html", "benchmark-history.html", "testing.html",
                 "security.html"):
        assert page in pages, f"{page} missing from the built site"


def test_the_cli_reference_is_rendered_from_the_parsers(site):
    from reviewbert.cli import COMMANDS
    html = (site / "cli.html").read_text(encoding="utf-8")
    assert "cli-reference" not in html, "the hook did not replace its marker"
    for name in COMMANDS:
        assert f'id="{name}"' in html, f"no section for `{name}`"
    assert 'id="heads-prune"' in html                 # nested subcommands too
    assert "--checkpoint" in html and "usage: python -m reviewbert train" in html


def test_no_built_page_loads_anything_from_off_the_machine(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 16
    for page in pages:
        parser = _Fetches()
        parser.feed(page.read_text(encoding="utf-8"))
        remote = [u for u in parser.urls if REMOTE.match(u)]
        assert remote == [], f"{page.relative_to(site)} loads {remote}"
        styles = [s for s in parser.styles if CSS_REMOTE.search(s)]
        assert styles == [], f"{page.relative_to(site)} has a remote @import/url() in {styles}"
        # Material's bundle would fetch Mermaid from unpkg.com for such a block
        assert 'class="mermaid"' not in page.read_text(encoding="utf-8"), page


def test_no_built_stylesheet_imports_anything_from_off_the_machine(site):
    sheets = sorted(site.rglob("*.css"))
    assert sheets, "no stylesheet built"
    for sheet in sheets:
        found = CSS_REMOTE.findall(sheet.read_text(encoding="utf-8"))
        assert found == [], f"{sheet.relative_to(site)} imports from off the machine: {found}"


def test_the_offline_check_sees_a_cdn_script_and_a_web_font():
    """The checks above would catch what Material adds when the config goes online."""
    parser = _Fetches()
    parser.feed('<script src="https://unpkg.com/iframe-worker/shim"></script>'
                '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
                '<style>@import url("https://fonts.googleapis.com/x.css");</style>')
    assert [u for u in parser.urls if REMOTE.match(u)] == [
        "https://unpkg.com/iframe-worker/shim", "https://fonts.googleapis.com/css?family=Roboto"]
    assert any(CSS_REMOTE.search(s) for s in parser.styles)
