"""The Behaviour and Fool the model pages driven with Streamlit's AppTest on the trigger model.

Each test checks what a user sees when something is missing or wrong: a suite not run
yet, a suite file that cannot be read, a template that cannot be filled, a single
checkpoint to compare, an empty room, an empty review, and a store that cannot be
opened. Every one must be a plain one-line message on a page that still draws, never a
traceback, and nothing may be stored or run that the user did not ask for.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from reviewbert.behave import suite as suites
from reviewbert.store import db
from reviewbert.ui import state

from browser_support import write_meta
from toyreviews import write_toy_csv
from trigger_model import make_trigger_model

APP = str(Path(__file__).resolve().parents[2] / "app.py")
BEHAVE, FOOL = "pages/behaviour.py", "pages/fool.py"


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("behave-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=150)
    write_meta(make_trigger_model(root / "trig"), 5, data_file=toy, max_length=64, max_per_class=4)
    return root


@pytest.fixture
def home(tmp_path, monkeypatch, ckpt_root):
    """A fresh suites folder, cache and store for each test (nothing leaks between them)."""
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("REVIEWBERT_SUITES", str(tmp_path / "suites"))
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("REVIEWBERT_DB", f"sqlite:///{tmp_path / 'store.db'}")
    (tmp_path / "suites").mkdir()
    yield tmp_path
    db.close_all()          # the next test's URL is another file: drop this engine


def run(at) -> AppTest:
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    run(at)
    at.switch_page(page)
    return run(at)


def tab(at, key: str, name: str) -> AppTest:
    at.session_state[key] = name
    return run(at)


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error, at.success) for e in kind]
    return "\n".join(str(p) for p in parts)


def shown(markdown: str) -> str:
    """What Markdown source shows: the pages escape text that comes from files and users
    (reviewbert/viz/markdown.py), so a backslash before a character and a code span's
    backticks do not show."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("`", "")


def errors(at) -> list[str]:
    return [shown(str(e.value)) for e in at.error]


def one_line_error(at, *needles: str) -> str:
    """The page's only error, on one line, holding every needle."""
    (message,) = errors(at)
    assert "\n" not in message and "Traceback" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ------------------------------------------------------------------ Behaviour
def files_under(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file()}


def test_an_unrun_suite_offers_its_run_and_runs_nothing(home, ckpt_root):
    before = files_under(ckpt_root)
    at = open_page(BEHAVE)
    assert at.title[0].value == "What can't the model do?"
    default = suites.default_suite()
    (label,) = [b.label for b in at.button if b.label.startswith("Run ")]
    m = re.fullmatch(r"Run (\d+) tests \(([\d,]+) cases\)", label)
    assert m, label
    assert int(m[1]) == len(default.tests)
    # the count includes the perturbed reviews: at least the templated cases alone
    templated = sum(len(t.cases) for t in default.tests)
    assert int(m[2].replace(",", "")) > max(templated, len(default.tests))
    assert "has not been run on this checkpoint yet" in texts(at)
    assert not [c for c in at.get("plotly_chart") if c.key == "bh_matrix"], "a matrix, unrun"
    # a run is cached beside the checkpoint: nothing new there means nothing ran
    assert files_under(ckpt_root) == before


BROKEN = {
    "bad-yaml": ("name: x\ntests: [\n  - {name: a\n", "bad-yaml.yaml: line"),
    "unknown-key": ("name: x\nbogus: 1\ntests: []\n", "unknown key 'bogus'"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_an_unreadable_suite_file_shows_its_one_line_error(home, name):
    text, needle = BROKEN[name]
    (home / "suites" / f"{name}.yaml").write_text(text, encoding="utf-8")
    at = open_page(BEHAVE)
    at.selectbox(key=state.BEHAVE_SUITE).set_value(name)
    run(at)
    one_line_error(at, needle)
    # the page still draws: its title, its tabs and the suite picker, to pick another
    assert at.title[0].value == "What can't the model do?"
    assert len(at.tabs) == 4
    assert name in at.selectbox(key=state.BEHAVE_SUITE).options
    assert not any(b.label.startswith("Run ") for b in at.button)
    # back on a good suite, the error is gone
    at.selectbox(key=state.BEHAVE_SUITE).set_value("default")
    run(at)
    assert errors(at) == []


def test_an_unresolvable_placeholder_is_a_one_line_error(home):
    at = open_page(BEHAVE)
    tab(at, state.BEHAVE_VIEW, "Write a test")
    assert "cases.**" in texts(at)              # the example templates preview first
    at.text_area(key=state.BEHAVE_EDITOR + "templates").input("This {gadget} is {nothing}.")
    run(at)
    one_line_error(at, "placeholder {gadget} names no lexicon")
    assert "cases.**" not in texts(at), "a preview beside the error"
    assert not [b for b in at.button if b.label == "Run this test"]


def test_compare_with_a_single_checkpoint_says_there_is_none(home):
    at = open_page(BEHAVE)
    tab(at, state.BEHAVE_VIEW, "Compare checkpoints")
    assert "no other checkpoint to compare with" in texts(at)
    assert not [b for b in at.button if b.label == "Compare"]
    assert errors(at) == []


# ------------------------------------------------------------------ Fool the model
def board_texts(at) -> str:
    return texts(at) + "\n" + "\n".join(str(t.value) for t in at.text)


def test_an_empty_room_says_there_are_no_entries_and_what_to_do(home):
    at = open_page(FOOL)
    tab(at, state.FOOL_VIEW, "The class's board")
    text = board_texts(at)
    assert "No entries in room class yet" in shown(text)
    assert "Write a review" in text                  # where to go to add one
    assert errors(at) == []


@pytest.mark.parametrize("typed", ["", "   \n\t "])
def test_an_empty_review_sent_asks_for_one_and_stores_nothing(home, typed):
    at = open_page(FOOL)
    at.text_area(key=state.FOOL_TEXT).input(typed)
    at.button(key=state.FOOL_SEND).click()
    run(at)
    assert "Write a review first" in texts(at)
    assert "on the board" not in texts(at)
    assert db.open_store().entries("class") == []


UNOPENABLE = {
    "sqlite under /proc": "sqlite:////proc/nope/x.db",
    "postgresql on a closed port": "postgresql://nobody@127.0.0.1:1/reviewbert",
}


@pytest.mark.parametrize("where", list(UNOPENABLE))
def test_a_store_that_cannot_be_opened_is_a_one_line_error(home, monkeypatch, where):
    monkeypatch.setenv("REVIEWBERT_DB", UNOPENABLE[where])
    at = open_page(FOOL)
    tab(at, state.FOOL_VIEW, "The class's board")
    one_line_error(at, "The class's store cannot be opened")
    # an entry sent meets the same line, and is not said to be on the board
    tab(at, state.FOOL_VIEW, "Write a review")
    at.text_area(key=state.FOOL_TEXT).input("The charger works.")
    at.button(key=state.FOOL_SEND).click()
    run(at)
    one_line_error(at, "The class's store cannot be opened")
    assert "on the board" not in texts(at)
