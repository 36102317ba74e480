"""Hostile text without a browser: the escaping helpers, and the hostile corpus
(tests/hostile_texts.py) through the Predict, Error analysis and Inside BERT pages with
AppTest on a tiny model. tests/browser/test_browser_hostile.py drives the same corpus in Chromium.
"""
from __future__ import annotations

import html
import re

import pytest
from app_support import open_view
from test_app import predict
from test_error_page import ckpt_root, open_page, tab, texts  # noqa: F401 - ckpt_root: fixture

from reviewbert.ui.prediction_card import UNREADABLE
from reviewbert.viz.highlight import highlight_html
from reviewbert.viz.markdown import md_code, md_escape

from hostile_texts import BY_NAME, CORPUS, LONG

INSIDE = "pages/inside_bert.py"


# ------------------------------------------------------------------ helpers
def test_md_code_shows_any_text_exactly():
    assert md_code("**bold** [x](javascript:alert(1))") == "`**bold** [x](javascript:alert(1))`"
    assert md_code(" a \n\n\t b ") == "`a b`"             # no blank line to end a block
    assert md_code("use `x` or ``y``") == "``` use `x` or ``y`` ```"   # fence longer than any run
    assert md_code("`tick") == "`` `tick ``"
    # Streamlit rewrites ":material/" to ":material_" even in a code span: a word joiner stops it
    assert md_code(":material/home:") == "`:material\u2060/home:`"
    assert md_escape("a :material/home: b") == "a :material\u2060/home: b"
    long = md_code(LONG, limit=80)
    assert long.endswith("…`") and len(long) < 90 and "LONGEND" not in long


def test_md_escape_keeps_entities_literal():
    assert md_escape("&lt;script&gt; &amp;") == "\\&lt;script\\&gt; \\&amp;"


def test_md_escape_keeps_emoji_shortcodes_and_colour_directives_as_typed():
    # Streamlit draws ":smile:" as an emoji and ":red[x]" in red after reading the backslashes
    assert md_escape(":smile: :+1:") == ":\u2060smile: :\u2060\\+1:"
    assert md_escape(":red[PWN]") == ":\u2060red\\[PWN\\]"
    assert md_escape("at 12:30, a: b") == "at 12:30, a: b"       # other colons stay


@pytest.mark.parametrize("ending", ["\n", "\r", "\r\n"])
def test_highlight_html_has_no_line_ending_for_markdown(ending):
    """A blank line (in any of Markdown's three line endings) would close the HTML block
    and let Markdown render the rest of the review: every line ending becomes <br>."""
    text = f"ok{ending}{ending}**PWN** [x](javascript:alert(1)){ending}{ending}# PWN"
    spans = [(0, 2)]
    out = highlight_html(text, spans, [1.0])
    assert "\r" not in out and "\n" not in out
    assert out.count("<br>") == 4
    assert "**PWN** [x](javascript:alert(1))" in out and "# PWN" in out


# ------------------------------------------------------------------ pages (AppTest)
def highlighted(at) -> str:
    return next(m.value for m in at.html if "rb-highlight" in str(m.value))


def test_every_hostile_text_on_the_predict_page(monkeypatch, ckpt_root):
    """Each text predicts (its highlight escaped, on one line) or gets its message; none
    raises. AppTest passes a lone CR through, which a browser's textarea would not."""
    from test_app import app
    at = app(monkeypatch, ckpt_root)
    for h in CORPUS:
        predict(at, h.text)
        out = texts(at)
        if h.predicts:
            assert "Predicted:" in out, h.name
            hl = highlighted(at)
            assert "\r" not in hl and "\n" not in hl, h.name
            # only the view's own tags: without them, and unescaped, it is the text as typed
            assert set(re.findall(r"</?([a-z]+)", hl)) <= {"div", "span", "br"}, h.name
            shown = html.unescape(re.sub(r"<[^>]*>", "", hl.replace("<br>", "\n")))
            # as typed, a NUL drawn as U+FFFD (highlight.escape_text)
            assert shown == re.sub(r"\r\n?", "\n", h.text).replace("\x00", "\ufffd"), h.name
        else:
            assert "Predicted:" not in out, h.name
            assert ("text box is empty" in out) if not h.text.strip() else (UNREADABLE in out)


def test_error_search_names_the_query_escaped(monkeypatch, ckpt_root):
    at = open_page(monkeypatch, ckpt_root)
    at.button(key="err_evaluate").click().run()
    at = tab(at, "Errors")
    at.checkbox(key="err_only_wrong").uncheck().run()
    hostile = BY_NAME["markdown javascript link"].text
    at.text_input(key="err_search").input(hostile).run()
    assert not at.exception, at.exception
    assert f"No review contains {md_code(hostile)}" in texts(at)
    at.text_input(key="err_search").input("e").run()
    assert "reviews contain `e`" in texts(at)


@pytest.mark.parametrize("name", ["only zero-width characters", "only control characters and NUL"])
def test_inside_bert_says_why_for_unreadable_text(monkeypatch, ckpt_root, name):
    at = open_page(monkeypatch, ckpt_root)
    at.switch_page(INSIDE)
    at.run()
    at.text_input(key="inside_sentence").input(BY_NAME[name].text).run()
    assert not at.exception, at.exception
    assert UNREADABLE in texts(at)
    assert [h.value for h in at.main.header] == []



def test_every_hostile_text_in_the_what_if_editor(monkeypatch, ckpt_root):
    """The What if? editor takes what the review box takes: each text is compared (its diff
    and both highlighted versions drawn with the view's own tags only, the diff's text
    outside the removed marks being the text as typed) or gets its message; none raises."""
    from test_app import app
    at = app(monkeypatch, ckpt_root)
    predict(at, "The battery died after two days. Poor quality!")
    open_view(at, "What if?")
    at.button(key="wi_edit").click().run()
    for h in CORPUS:
        at.text_area(key="wi_editor").input(h.text)
        at.button(key="wi_compare").click().run()
        assert not at.exception, (h.name, at.exception)
        out = texts(at)
        if not h.predicts:
            assert ("editor is empty" in out) if not h.text.strip() else (UNREADABLE in out), h.name
            continue
        diff = next(m.value for m in at.markdown if 'class="rb-diff' in str(m.value))
        assert set(re.findall(r"</?([a-z]+)", diff)) <= {"div", "span", "br"}, h.name
        assert "\r" not in diff and "\n" not in diff, h.name
        kept = re.sub(r'<span class="rb-removed"[^>]*>.*?</span>', "", diff)
        shown = html.unescape(re.sub(r"<[^>]*>", "", kept.replace("<br>", "\n")))
        assert shown == re.sub(r"\r\n?", "\n", h.text), h.name
        for row in (m.value for m in at.html if 'class="rb-compare"' in str(m.value)):
            assert set(re.findall(r"</?([a-z]+)", row)) <= {"div", "span", "br"}, h.name
