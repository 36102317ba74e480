"""What if? in a real headless Chromium, every non-localhost request blocked, on the
hand-weighted trigger model (tests/trigger_model.py: "excellent" makes a review 4 stars):
edit and compare, the three counterfactual kinds, a counterfactual into the editor, hostile
texts typed into the editor (drawn as their literal characters, nothing injected or run),
and the Error analysis page's Brittleness tab. Screenshots go to artifacts/browser/."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_browser_hostile import SCAN, fragments, norm

from browser_support import (
    ART,
    CHROMIUM,
    RunPause,
    StreamlitServer,
    caption_with,
    evaluate_data_file,
    offline_context,
    open_view,
    shot,
    write_meta,
    write_reviews,
)
from hostile_texts import BY_NAME, MARKER, PWNED
from trigger_model import UP, make_trigger_model

pytest.importorskip("playwright.sync_api")

REVIEW = f"The phone is fine. The screen is {UP}, and the battery lasts a day."
HOSTILE = ("script tag", "markdown javascript link", "carriage returns end an HTML block",
           "control characters and NUL", "streamlit directives")
ROWS = [(f"the {UP} phone", 4), ("fine phone and fine price", 3), ("the battery is terrible", 2),
        (f"{UP} screen and {UP} sound", 5), ("okay case", 3), ("the charger is fine", 1)]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    from playwright.sync_api import sync_playwright
    root = tmp_path_factory.mktemp("whatif")
    data = write_reviews(root / "data" / "small.jsonl", ROWS)
    write_meta(make_trigger_model(root / "ckpts" / "trig"), 5, max_length=64)
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data.parent),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1"}
    dialogs, errors = [], []
    pause = RunPause(root / "run-pause")
    with StreamlitServer({**env, **pause.env()}, ART / "streamlit_whatif.log") as srv, \
            sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path_factory.mktemp("chromium-profile"))
        pg = ctx.new_page()
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(srv.url)
        pg.get_by_text("Review text").wait_for(timeout=90_000)
        pg.pause = pause
        yield pg, blocked, dialogs, errors
        ctx.close()


def settle(pg):
    pg.wait_for_timeout(150)
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidgetRunningIcon]')"
                         " && !document.querySelector('[data-stale=true]')", timeout=120_000,
                         polling=100)


def edit_text(pg) -> str:
    """The diff's text outside the removed marks: the edit as drawn."""
    return pg.evaluate("""() => {
        const d = document.querySelector('.rb-diff:not(.rb-cf)');
        if (!d) return null;
        const c = d.cloneNode(true);
        c.querySelectorAll('.rb-removed').forEach(e => e.remove());
        c.querySelectorAll('br').forEach(e => e.replaceWith('\\n'));
        return c.textContent;
    }""")


def compare(pg, text: str):
    box = pg.get_by_role("textbox", name="Edited review")
    box.fill(text)
    box.blur()
    pg.wait_for_timeout(300)
    pg.get_by_role("button", name="Compare", exact=True).click()


def test_edit_compare_counterfactuals_and_hostile_edits_offline(page):
    pg, blocked, dialogs, errors = page
    pg.locator("textarea").first.fill(REVIEW)
    pg.locator("textarea").first.blur()
    pg.wait_for_timeout(300)
    pg.get_by_role("button", name="Predict").click()
    open_view(pg, "What if?")
    pg.get_by_role("button", name="Edit and compare").click(timeout=120_000)
    pg.get_by_role("textbox", name="Edited review").wait_for(timeout=60_000)
    assert pg.get_by_role("textbox", name="Edited review").input_value() == REVIEW
    compare(pg, REVIEW.replace(UP, "great"))
    pg.locator(".rb-diff .rb-removed").first.wait_for(timeout=60_000)
    settle(pg)
    assert pg.locator(".rb-diff .rb-removed").first.inner_text() == UP
    assert pg.locator(".rb-diff .rb-added").first.inner_text() == "great"
    assert norm(edit_text(pg)) == norm(REVIEW.replace(UP, "great"))
    assert pg.locator(".rb-compare").count() == 2
    assert "Edit: 3 stars" in pg.inner_text("[data-testid=stMain]")
    pg.get_by_text("The edit:").scroll_into_view_if_needed()
    shot(pg, "whatif_01_edit_and_compare.png", height=2600)

    pg.get_by_role("button", name="Find counterfactuals").click()
    pg.get_by_text("HotFlip: one word swapped").wait_for(timeout=120_000)
    settle(pg)
    body = pg.inner_text("[data-testid=stMain]")
    assert f"Deleting this word turns 4 stars into 3 stars: {UP}." in body
    assert "Dropping sentence S2 changes the rating" in body and "Towards 5 stars" in body
    pg.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                         "((p.layout.title && p.layout.title.text) || '').includes('sentence dropped'))",
                         timeout=30_000)
    pg.get_by_text("Minimal deletion flip").scroll_into_view_if_needed()
    shot(pg, "whatif_02_counterfactuals.png", height=3000)
    pg.get_by_role("button", name="Compare in the editor").click()
    pg.wait_for_function("t => document.querySelector('textarea[aria-label=\"Edited review\"]')"
                         "?.value === t", arg=REVIEW.replace(f"{UP},", ","), timeout=60_000)
    settle(pg)
    assert norm(edit_text(pg)) == norm(REVIEW.replace(f"{UP},", ","))

    for name in HOSTILE:
        hostile_edit(pg, name)
    assert blocked == [], f"requests left localhost: {blocked}"
    assert dialogs == [] and errors == []


def hostile_edit(pg, name: str):
    """A hostile text compared in the editor: drawn as typed, nothing injected or run."""
    h = BY_NAME[name]
    compare(pg, h.text)
    pg.wait_for_function("""frags => {
        const d = document.querySelector('.rb-diff:not(.rb-cf)');
        if (!d) return false;
        const c = d.cloneNode(true);
        c.querySelectorAll('.rb-removed').forEach(e => e.remove());
        c.querySelectorAll('br').forEach(e => e.replaceWith('\\n'));
        const t = c.textContent.replace(/[ \\t\\n\\r\\f]+/g, ' ');
        return frags.every(f => t.includes(f));
    }""", arg=[f.replace("\x00", "\ufffd") for f in fragments(h)], timeout=60_000)
    settle(pg)
    pg.wait_for_timeout(200)
    for f in pg.frames:
        assert f.evaluate(f"() => typeof window.{PWNED}") == "undefined", name
    injected = pg.evaluate(SCAN, [MARKER, PWNED])
    assert injected == [], f"{name}: elements made from the text: {injected}"
    if name == "script tag":
        pg.get_by_text("The edit:").scroll_into_view_if_needed()
        shot(pg, "whatif_03_hostile_edit.png", height=2000)


def test_compare_then_a_click_elsewhere_still_compares(page):
    """A user clicks *Compare*, then at once a widget outside What if? (here the sampler's
    "Only misclassified"), while the run that carries the click has not yet reached the
    button: the comparison must still be drawn.

    Streamlit stops the fragment's run at its first element and starts a whole page's
    run for the other widget, which does not carry the click. Read from the button, the
    click was lost and the diff kept the previous edit (reviewbert/ui/runtime/clicks.py records
    it in the button's callback instead). Every run pauses 0.5 s at its start (RunPause,
    as a class's load slows a run); the other widget is clicked 0.05-0.25 s after the
    run of *Compare* has started, inside that pause. (CI lost a click in this test once,
    clicked 0.25 s after *Compare* itself under a loaded CPU: with Streamlit's fast reruns,
    a click that arrives before the first one's run has begun drops that run's request.)"""
    pg, blocked, dialogs, errors = page
    if not pg.get_by_role("textbox", name="Edited review").is_visible():
        pg.get_by_role("button", name="Edit and compare").click()
        pg.get_by_role("textbox", name="Edited review").wait_for(timeout=60_000)
    elsewhere = pg.get_by_text("Only misclassified")
    with pg.pause.paused(0.5):
        for word, delay in [("good", 50), ("fair", 150), ("solid", 250)]:
            edit = REVIEW.replace(UP, word)
            box = pg.get_by_role("textbox", name="Edited review")
            box.fill(edit)
            box.blur()
            settle(pg)
            runs = pg.pause.runs()
            pg.get_by_role("button", name="Compare", exact=True).click()
            # the run has started (its callbacks ran): a click made before that is dropped
            # by Streamlit's fast reruns themselves (reviewbert/ui/runtime/clicks.py)
            pg.pause.wait_run_after(runs)
            pg.wait_for_timeout(delay)
            elsewhere.click()
            try:
                pg.wait_for_function("t => { const d = document.querySelector("
                                     "'.rb-diff:not(.rb-cf) .rb-added'); return d && "
                                     "d.textContent === t; }", arg=word,
                                     timeout=20_000)
            except Exception:
                pytest.fail(f"'Only misclassified' clicked {delay} ms into Compare's run: the diff "
                            f"still shows {edit_text(pg)!r}, not the edit {edit!r}")
            settle(pg)
            assert norm(edit_text(pg)) == norm(edit)
    assert dialogs == [] and errors == []


def test_brittleness_tab(page):
    pg, blocked, dialogs, errors = page
    pg.get_by_role("link", name="Error analysis").click()
    evaluate_data_file(pg, len(ROWS))
    pg.get_by_role("tab", name="Brittleness").click()
    pg.get_by_role("button", name="Run on 6 reviews").click()
    caption_with(pg, "cached beside the checkpoint", timeout=180_000)
    settle(pg)
    body = pg.inner_text("[data-testid=stMain]")
    assert "Deleting at most 10 words (greedy along the occlusion ranking)" in body
    pg.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                         "((p.layout.title && p.layout.title.text) || '').includes('Words deleted'))",
                         timeout=30_000)
    shot(pg, "whatif_04_brittleness.png", height=2200)
    assert blocked == [] and dialogs == [] and errors == []
