"""The Behaviour and Fool the model pages in a real headless Chromium, every non-localhost
request blocked, on the hand-weighted trigger model (tests/trigger_model.py: "excellent"
makes a review 4 stars, "terrible" 2, anything else 3), so that which case passes is known:

- a small user suite run from the page: the matrix, a test's cases, a failing case opened
  on Predict and in What if?;
- a test written in the editor, previewed, run and saved into a suite file;
- the suite compared on two checkpoints, the regression flagged;
- Fool the model with two browser contexts, a student and a teacher, each seeing the
  other's entries on the board, and the entries saved as tests.

Screenshots go to artifacts/browser/ (the board's is docs/screenshots/fool.png).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from browser_support import (
    ART,
    CHROMIUM,
    ROOT,
    StreamlitServer,
    caption_with,
    offline_context,
    shot,
    write_meta,
    write_reviews,
)
from conftest import make_tiny_model
from trigger_model import DOWN, UP, make_trigger_model

pytest.importorskip("playwright.sync_api")

ROWS = [("the phone is fine", 3), (f"an {UP} case", 5), ("the battery died", 1),
        ("works as described", 4), ("screen cracked on day two", 2), ("fast delivery", 4)]
SUITE = {
    "name": "small", "description": "a few tests whose outcome the trigger model fixes",
    "seed": 0, "lexicons": {"product": ["phone", "case", "charger", "cable"]},
    "tests": [
        {"name": "Excellent is 4-5 stars", "capability": "Vocabulary", "type": "MFT",
         "templates": [f"The {{product}} is {UP}."], "stars": [4, 5]},
        {"name": "Terrible is 1 star", "capability": "Vocabulary", "type": "MFT",
         "templates": [f"The {{product}} is {DOWN}."], "stars": [1, 1]},
        {"name": "Praise moves it up", "capability": "Added sentences", "type": "DIR",
         "direction": "up", "source": "reviews", "perturbation": "add_sentence",
         "params": {"sentences": [f"It is {UP}."], "where": "end"}},
        {"name": "Uppercase changes nothing", "capability": "Robustness", "type": "INV",
         "source": "reviews", "perturbation": "uppercase"},
    ]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("behave")
    data = write_reviews(root / "data" / "small.jsonl", ROWS)
    # the trigger model is made last: the newest checkpoint is the one the sidebar opens on
    write_meta(make_tiny_model(root / "ckpts" / "random"), 5, max_length=64)
    write_meta(make_trigger_model(root / "ckpts" / "trig"), 5, data_file=data, max_length=64,
               max_per_class=2)
    (root / "suites").mkdir()
    (root / "suites" / "small.yaml").write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data.parent),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1",
           "REVIEWBERT_SUITES": str(root / "suites"), "REVIEWBERT_CACHE": str(root / "cache"),
           "REVIEWBERT_DB": f"sqlite:///{root / 'store.db'}"}
    with StreamlitServer(env, ART / "streamlit_behave.log") as srv:
        srv.root = root
        yield srv


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        yield p, tmp_path_factory.mktemp("profiles")


def new_page(browser, name: str, path: str = ""):
    p, profiles = browser
    ctx, blocked = offline_context(p, profiles / name)
    page = ctx.new_page()
    page.dialogs, page.errors, page.blocked = [], [], blocked
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    return ctx, page


def settle(page):
    page.wait_for_timeout(150)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidgetRunningIcon]')"
                           " && !document.querySelector('[data-stale=true]')", timeout=120_000,
                           polling=100)


def select_row(page, grid_index: int, row: int) -> None:
    """Tick row ``row`` (0-based) of the page's ``grid_index``-th st.dataframe."""
    grid = page.locator('[data-testid="stDataFrame"]').nth(grid_index)
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 14, box["y"] + 35 + 17 + 35 * row)
    settle(page)


def open_behaviour(page, server, suite: str = "small"):
    page.goto(server.url + "/behaviour")
    page.get_by_text("What can't the model do?").wait_for(timeout=120_000)
    settle(page)
    page.get_by_role("combobox", name="Suite", exact=True).click()
    page.get_by_role("option", name=suite, exact=True).click()
    settle(page)


def test_the_matrix_a_tests_cases_and_a_failing_case_on_predict(server, browser):
    ctx, page = new_page(browser, "overview")
    open_behaviour(page, server)
    page.get_by_role("button", name="Run 4 tests").click()
    caption_with(page, "scored cases")
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some("
                           "p => p._fullLayout && JSON.stringify(p.data).includes('Vocabulary'))",
                           timeout=60_000)
    shot(page, "behave_01_matrix.png", 1800)
    # (a st.dataframe is drawn on a canvas: what a row holds is read where it opens)
    # "Terrible is 1 star" is the second row: every case fails (the model says 2 stars)
    select_row(page, 0, 1)
    caption_with(page, "Terrible is 1 star · MFT · Vocabulary")
    caption_with(page, "4 failed")
    select_row(page, 1, 0)
    caption_with(page, "✗ fail")
    assert f"is {DOWN}." in page.locator("[data-testid=stMain]").inner_text()
    page.get_by_role("button", name="Open on Predict").click()
    page.get_by_text("Review text").wait_for(timeout=60_000)
    page.wait_for_function("t => [...document.querySelectorAll('textarea')].some("
                           "a => a.value.includes(t))", arg=f"is {DOWN}.", timeout=60_000)
    page.locator(".rb-stars").first.wait_for(timeout=60_000)
    assert "2 stars" in page.locator("body").inner_text()
    shot(page, "behave_02_case_on_predict.png", 1400)
    assert not page.dialogs and not page.errors and not page.blocked
    ctx.close()


def test_a_perturbation_opens_in_what_if(server, browser):
    ctx, page = new_page(browser, "whatif")
    open_behaviour(page, server)          # the run above is cached: no button this time
    caption_with(page, "read from the cache")
    select_row(page, 0, 2)                # Praise moves it up (DIR)
    caption_with(page, "Praise moves it up · DIR")
    page.get_by_role("switch", name="Only failing cases").uncheck()      # none failed
    settle(page)
    select_row(page, 1, 0)
    page.get_by_role("button", name="Open in What if?").click()
    page.get_by_role("tab", name="What if?", selected=True).wait_for(timeout=60_000)
    page.wait_for_function("t => [...document.querySelectorAll('textarea')].some("
                           "a => a.value.endsWith(t))", arg=f"It is {UP}.", timeout=60_000)
    shot(page, "behave_03_what_if.png", 1800)
    assert not page.dialogs and not page.errors and not page.blocked
    ctx.close()


def test_a_test_written_in_the_editor_is_previewed_run_and_saved(server, browser):
    ctx, page = new_page(browser, "editor")
    open_behaviour(page, server)
    page.get_by_role("tab", name="Write a test").click()
    settle(page)
    page.get_by_label("Templates, one per line, with {placeholders}").fill(
        f"Honestly, this {{product}} is {UP}.\nMy {{product}} is {UP}!")
    page.get_by_role("textbox", name="Word lists, one per line: name: word, word, …").fill(
        "product: phone, case, charger")
    page.get_by_label("Test name").fill("Praise in my words")
    page.keyboard.press("Tab")
    settle(page)
    caption_with(page, "6 cases")
    page.get_by_role("button", name="Run this test").click()
    caption_with(page, "scored cases")
    # the trigger model gives 4 stars to every case; the slider's default range is 1-2
    assert "6 failed" in page.locator("body").inner_text()
    page.get_by_role("button", name="Save into suite").click()
    caption_with(page, "Saved Praise in my words into suite my-tests")
    saved = yaml.safe_load((server.root / "suites" / "my-tests.yaml").read_text())
    assert [t["name"] for t in saved["tests"]] == ["Praise in my words"]
    shot(page, "behave_04_editor.png", 2000)
    assert not page.dialogs and not page.errors and not page.blocked
    ctx.close()


def test_two_checkpoints_compared_with_the_regression_flagged(server, browser):
    ctx, page = new_page(browser, "compare")
    open_behaviour(page, server)
    page.get_by_role("tab", name="Compare checkpoints").click()
    settle(page)
    page.get_by_role("button", name="Compare", exact=True).click()
    caption_with(page, "against this checkpoint")
    # a random model misses "excellent": its fail rate on that test is far above 0 %
    caption_with(page, "regression")
    assert "0 regressions" not in page.locator("[data-testid=stMain]").inner_text()
    shot(page, "behave_05_compare.png", 1800)
    assert not page.dialogs and not page.errors and not page.blocked
    ctx.close()


def send_entry(page, text: str, stars: int):
    page.get_by_label("Your review").fill(text)
    # a range slider starting at 1-1: the upper thumb moves first, then the lower one
    for thumb in (1, 0):
        page.get_by_role("slider").nth(thumb).focus()
        for _ in range(stars - 1):
            page.keyboard.press("ArrowRight")
    page.get_by_role("button", name="Send").click()
    caption_with(page, "is on the board")


def test_fool_the_model_student_and_teacher_see_each_others_entries(server, browser):
    sctx, student = new_page(browser, "student")
    tctx, teacher = new_page(browser, "teacher")
    for page in (student, teacher):
        page.goto(server.url + "/fool?room=r101")
        page.get_by_text("Fool the model").first.wait_for(timeout=120_000)
        settle(page)
    send_entry(student, f"Not {UP} at all, it broke in a day.", 1)
    caption_with(student, "You fooled it!")          # "excellent" makes it 4 stars
    teacher.get_by_role("tab", name="The class's board").click()
    teacher.wait_for_function("t => document.body.innerText.includes(t)",
                              arg="it broke in a day", timeout=20_000)
    teacher.get_by_role("tab", name="Write a review").click()
    settle(teacher)
    send_entry(teacher, "The charger works.", 3)
    caption_with(teacher, "The model got it")
    student.get_by_role("tab", name="The class's board").click()
    student.wait_for_function("t => document.body.innerText.includes(t)",
                              arg="The charger works.", timeout=20_000)
    shot(student, "fool_01_board.png", 1600)
    shutil.copy(ART / "fool_01_board.png", ROOT / "docs" / "screenshots" / "fool.png")
    teacher.get_by_role("tab", name="The class's board").click()
    settle(teacher)
    teacher.get_by_role("button", name="Save the class's entries as tests").click()
    caption_with(teacher, "Saved")
    saved = yaml.safe_load((server.root / "suites" / "class-r101.yaml").read_text())
    texts = [c["text"] for t in saved["tests"] for c in t["cases"]]
    assert sorted(texts) == sorted([f"Not {UP} at all, it broke in a day.", "The charger works."])
    for page in (student, teacher):
        assert not page.dialogs and not page.errors and not page.blocked
    sctx.close()
    tctx.close()
