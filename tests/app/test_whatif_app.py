"""What if? driven with AppTest on the hand-weighted trigger model (tests/trigger_model.py):
the editor (copy, edit, compare, history, back to an edit), the counterfactuals on
request and into the editor, hostile and empty edits, and the Error analysis page's
review card and Brittleness tab."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from reviewbert.ui.prediction_card import UNREADABLE

from browser_support import write_meta
from hostile_texts import BY_NAME
from toyreviews import write_toy_csv
from trigger_model import UP, make_trigger_model

APP = str(Path(__file__).resolve().parents[2] / "app.py")
REVIEW = f"The phone is fine. The screen is {UP}, and the battery lasts a day."


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("wi-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=150)
    write_meta(make_trigger_model(root / "trig"), 5, data_file=toy, max_length=64, max_per_class=10)
    return root


def app(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


def run(at) -> AppTest:
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error, at.success) for e in kind]
    return "\n".join(str(p) for p in parts)


def tables(at, column: str) -> list:
    """The dataframes with this column (AppTest names a dataframe's key only when it has a
    selection)."""
    return [d.value for d in at.dataframe if column in d.value.columns]


def html_of(at, css: str) -> list[str]:
    """The bodies of the page's HTML blocks (Markdown or st.html) of class ``css``."""
    return [m.value for m in [*at.markdown, *at.html] if f'class="{css}' in str(m.value)]


def predicted(monkeypatch, root, text=REVIEW) -> AppTest:
    at = app(monkeypatch, root)
    at.text_area(key="review_text").input(text)
    at.button(key="predict_btn").click()
    run(at)
    open_view(at, "What if?")
    assert not at.exception, at.exception
    return at


def compare(at, text: str) -> AppTest:
    at.text_area(key="wi_editor").input(text)
    at.button(key="wi_compare").click()
    return run(at)


def test_edit_and_compare_with_history(monkeypatch, ckpt_root):
    at = predicted(monkeypatch, ckpt_root)
    assert "What if?" in [h.value for h in at.header]
    assert not [t for t in at.text_area if t.key == "wi_editor"]       # closed until asked
    at.button(key="wi_edit").click()
    run(at)
    assert at.text_area(key="wi_editor").value == REVIEW              # the review, copied
    compare(at, REVIEW.replace(UP, "great"))
    out = texts(at)
    assert "Original: **4 stars** (97%)" in out and "Edit: **3 stars**" in out
    assert "the rating changes" in out and "1 word added (green), 1 removed" in out
    diff = html_of(at, "rb-diff")[0]
    assert re.search(r'class="rb-removed"[^>]*>excellent</span>', diff)
    assert re.search(r'class="rb-added"[^>]*>great</span>', diff)
    assert len(html_of(at, "rb-compare")) == 2                          # both versions' scores
    assert [t.shape[0] for t in tables(at, "words +")] == [1]
    compare(at, "fine")
    assert [t.shape[0] for t in tables(at, "words +")] == [2]
    at.text_area(key="wi_editor").input("typed, not yet compared")
    open_view(at, "What BERT attends to")          # another tab: the editor is not drawn...
    assert not [t for t in at.text_area if t.key == "wi_editor"]
    open_view(at, "What if?")                      # ...and its text is still there on return
    assert at.text_area(key="wi_editor").value == "typed, not yet compared"
    assert [t.shape[0] for t in tables(at, "words +")] == [2]
    at.selectbox(key="wi_method").set_value("occlusion")                # another method
    run(at)
    assert any("**Occlusion**, original then edit" in str(m.value) for m in at.markdown)
    at.selectbox(key="wi_pick").set_value(1)                            # the older edit
    at.button(key="wi_back").click()
    run(at)
    assert at.text_area(key="wi_editor").value == REVIEW.replace(UP, "great")
    assert "Edit: **3 stars**" in texts(at)
    at.button(key="wi_clear").click()
    run(at)
    assert not tables(at, "words +")


def test_counterfactuals_on_request_then_into_the_editor(monkeypatch, ckpt_root):
    at = predicted(monkeypatch, ckpt_root)
    assert "Minimal deletion flip" not in texts(at)
    at.button(key="wi_cf_run").click()
    run(at)
    out = texts(at)
    assert f"**Deleting this word turns 4 stars into 3 stars: {UP}\\.**" in out
    assert "Sentence occlusion" in out and "HotFlip: one word swapped" in out
    assert "Dropping sentence S2 changes the rating" in out
    assert "never a ## continuation piece" in out
    sentences, = tables(at, "rating without it")
    assert list(sentences["rating without it"]) == ["4 stars", "3 stars"]
    at.selectbox(key="wi_cf_pick").set_value(0)                         # the deletion flip
    at.button(key="wi_cf_send").click()
    run(at)
    assert at.text_area(key="wi_editor").value == REVIEW.replace(f"{UP},", ",")
    assert "Edit: **3 stars**" in texts(at)
    at.selectbox(key="wi_cf_method").set_value("occlusion")              # not found yet: a button
    run(at)
    assert [b for b in at.button if b.key == "wi_cf_run"]


def test_empty_unreadable_and_hostile_edits(monkeypatch, ckpt_root):
    at = predicted(monkeypatch, ckpt_root)
    at.button(key="wi_edit").click()
    run(at)
    compare(at, "   ")
    assert "The editor is empty" in texts(at)
    compare(at, BY_NAME["only zero-width characters"].text)
    assert UNREADABLE in texts(at)
    for name in ("script tag", "markdown javascript link", "carriage returns end an HTML block",
                 "100,000 characters"):
        text = BY_NAME[name].text
        compare(at, text)
        diff = html_of(at, "rb-diff")[0]
        assert set(re.findall(r"</?([a-z]+)", diff)) <= {"div", "span", "br"}, name
        kept = re.sub(r'<span class="rb-removed"[^>]*>.*?</span>', "", diff)
        shown = html.unescape(re.sub(r"<[^>]*>", "", kept.replace("<br>", "\n")))
        assert shown.strip() == re.sub(r"\r\n?", "\n", text[:100_000]).strip(), name
        for row in html_of(at, "rb-compare"):
            assert set(re.findall(r"</?([a-z]+)", row)) <= {"div", "span", "br"}, name


def test_error_page_review_card_and_brittleness_tab(monkeypatch, ckpt_root):
    at = app(monkeypatch, ckpt_root)
    at.switch_page("pages/error_analysis.py")
    run(at)
    at.button(key="err_evaluate").click()
    run(at)
    assert "Brittleness" in [t.label for t in at.tabs]
    at.session_state["err_tab"] = "Brittleness"
    run(at)
    at.number_input(key="err_brittle_n").set_value(6)
    at.number_input(key="err_brittle_max").set_value(3)
    run(at)
    at.button(key="err_brittle_run").click()
    run(at)
    out = texts(at)
    assert "Deleting at most 3 words \\(greedy along the occlusion ranking\\)" in out   # escaped
    assert "changes the predicted rating of" in out and "of 6 reviews" in out
    table, = tables(at, "median words (flipped)")
    assert list(table["reviews"]) == ["all", "correct", "wrong"] and table["n"].iloc[0] == 6
    assert list((ckpt_root / "trig" / "whatif").glob("*.json"))
    at2 = app(monkeypatch, ckpt_root)                                  # a new session: cached
    at2.switch_page("pages/error_analysis.py")
    run(at2)
    at2.session_state["err_tab"] = "Brittleness"
    run(at2)
    at2.number_input(key="err_brittle_n").set_value(6)
    at2.number_input(key="err_brittle_max").set_value(3)
    run(at2)
    assert "read from the cache" in texts(at2)
    assert not [b for b in at2.button if b.key == "err_brittle_run"]
