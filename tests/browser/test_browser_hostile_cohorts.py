"""Hostile text (tests/hostile_texts.py) on the Cohorts page in a real headless Chromium.

One server on the hand-weighted trigger model (tests/trigger_model.py) with its own store
and cache; its data folder holds, for each text of the corpus, a file whose first review is
that text (when the reader keeps it: a text of blanks is no review), then three plain ones.
One browser page, reused for every text, on that text's file (evaluated through the page):

1. the review itself: opened from the cohort's reviews (the whole split, its first row)
   and as the head of the Triage tab's queue (every other review marked reviewed in the
   store), drawn both times as its literal characters;
2. the text as a note and then as a new tag typed into the triage form's "Tags", each
   saved with "Save and next": stored as the store keeps it (a note less its control
   characters, a tag less its surrounding blanks) and drawn back literally as the form's
   chip, or refused with its one line ("Not saved: …") and nothing stored;
3. the text typed as a new option of "Tag every review of the cohort" and the cohort
   tagged: every review of it tagged as ``triage.tag_name`` writes it, or "Not tagged: …";
4. the lexicon editor: the text as the whole lexicon, then as a phrase of the shipped
   one's brands, each saved (the file is then the text typed) or refused with the
   parser's one line, the file left as it was.

For every text: no element is created from it, no script runs, no dialog opens, the
console stays free of errors and no request leaves localhost (test_browser_hostile's
``Watch.inert``). ``make test`` runs the CORE texts; ``make hostile`` all of them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_browser_hostile import (
    CASES,
    SCAN,
    Watch,
    alert_text,
    fill_and_commit,
    fresh,
    norm,
    pw,
    quoted,
)

from browser_support import (
    ART,
    CHROMIUM,
    StreamlitServer,
    offline_context,
    select_first_row,
    shot,
    write_meta,
    write_reviews,
)
from hostile_texts import CORPUS, MARKER, PWNED, Hostile
from trigger_model import make_trigger_model

playwright = pytest.importorskip("playwright.sync_api")

assert pw                       # the module's one Playwright, a fixture of test_browser_hostile
PLAIN = [("The battery lasts two days and the screen is bright.", 5),
         ("Stopped charging after a week; the seller never answered.", 1),
         ("Okay for the price, but the speaker crackles at full volume.", 3)]
AUTHOR = "Ada — ‘hostile’ 🎭"
NAME_BOX = "Your name (recorded with every tag, note and relabel)"
SHOTS = {"script tag", "carriage returns end an HTML block"}
STTEXT = "[data-testid=stMain] [data-testid=stText]"
CHIPS = "() => [...document.querySelectorAll('[data-testid=stMultiSelectTagsContainer] [data-tag]')]" \
        ".map(e => e.getAttribute('aria-label'))"
"""The labels of the chips of the page's multiselect boxes (the values chosen)."""


def file_name(h: Hostile) -> str:
    return f"hostile-{CORPUS.index(h):02d}.jsonl"


def is_review(h: Hostile) -> bool:
    return bool(h.text.strip())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("hostile-cohorts")
    for h in CORPUS:
        write_reviews(root / "data" / file_name(h), ([(h.text, 2)] if is_review(h) else []) + PLAIN)
    write_meta(make_trigger_model(root / "ckpts" / "trig"), 5, max_length=64)
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(root / "data"),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "REVIEWBERT_CACHE": str(root / "cache"),
           "REVIEWBERT_DB": f"sqlite:///{root / 'store.db'}", "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / "streamlit_hostile_cohorts.log") as srv:
        srv.db_url, srv.lexicon = env["REVIEWBERT_DB"], root / "cache" / "lexicon.yaml"
        yield srv


@pytest.fixture(scope="module")
def store(server):
    from reviewbert.store import db
    yield db.open_store(server.db_url)
    db.close_all()


@pytest.fixture(scope="module")
def watch(server, pw, tmp_path_factory):
    """The Cohorts page (opened from the sidebar), the reviewer's name typed."""
    ctx, blocked = offline_context(pw, tmp_path_factory.mktemp("hostile-cohorts-profile"))
    page = ctx.new_page()
    page.goto(server.url)
    page.locator("textarea").first.wait_for(timeout=120_000)
    w = Watch(page, blocked)
    w.open("Cohorts", "[data-testid=stRadio]")
    w.file = None
    yield w
    ctx.close()


def on_file(watch: Watch, h: Hostile) -> None:
    """The page on ``h``'s file, evaluated, its name typed, on the Cohorts tab."""
    page = watch.page
    fresh(watch)
    if watch.file != file_name(h):
        box = page.get_by_role("combobox", name="Data file", exact=True)
        box.click()
        box.fill(file_name(h))
        page.get_by_role("option", name=file_name(h), exact=True).click()
        watch.settle()
        n = len(PLAIN) + is_review(h)
        evaluate = page.get_by_role("button", name=f"Evaluate {n} reviews", exact=True)
        if evaluate.count():
            evaluate.click()
        page.get_by_role("tab", name="Cohorts", exact=True).wait_for(timeout=120_000)
        watch.settle()
        watch.file = file_name(h)
    open_tab(watch, "Cohorts")
    name = page.get_by_role("textbox", name=NAME_BOX, exact=True)
    if name.input_value() != AUTHOR:
        fill_and_commit(watch, name, AUTHOR)


def open_tab(watch: Watch, name: str) -> None:
    watch.page.get_by_role("tab", name=name, exact=True).click()
    watch.settle()


def keys_of(h: Hostile) -> tuple[str | None, list[str]]:
    """(the key of ``h``'s review or None, the keys of the plain reviews)."""
    from reviewbert.cohorts.keys import review_key
    return (review_key(h.text.strip()) if is_review(h) else None), [review_key(t) for t, _ in PLAIN]


def queue_head(watch: Watch, store, h: Hostile) -> str:
    """The Triage tab with one review left in its queue: ``h``'s, else the first plain one
    (the rest marked reviewed in the store); its key."""
    mine, plain = keys_of(h)
    head = mine or plain[0]
    store.mark_reviewed([k for k in [mine, *plain] if k and k != head], "the test")
    store.unmark_reviewed(head)
    open_tab(watch, "Cohorts")          # (away and back: the tab's run reads the store again)
    open_tab(watch, "Triage")
    toggle = watch.page.locator("[data-testid=stCheckbox]").filter(has_text="Only wrong predictions")
    if toggle.locator("input").is_checked():
        toggle.click()
        watch.settle()
    watch.page.get_by_text("1 reviews in the queue", exact=False).first.wait_for(timeout=60_000)
    watch.settle()
    return head


EXPANDERS_HOLDING = """marker => [...document.querySelectorAll('details')].filter(d => {
    const c = d.cloneNode(true);
    c.querySelectorAll('textarea, input').forEach(e => e.remove());
    return c.textContent.includes(marker);
}).length"""
"""The expanders whose own text (their text boxes' values left out) holds the marker."""


def inert_here(watch: Watch, h: Hostile, *tags: str) -> None:
    """Watch.inert, less two things that are text, never markup: a tag chosen in a select
    box as the ``title`` and ``aria-label`` of its chip (and "Remove <tag>" of its remove
    button), which React sets as attributes; and an expander (the lexicon editor's) that
    holds the text only as the value of its text box. Anything else is still reported."""
    page = watch.page
    page.wait_for_timeout(200)
    for f in page.frames:
        assert f.evaluate(f"() => typeof window.{PWNED}") == "undefined", (h.name, f.url)
    own = {f'<{el} {attr}="{(prefix + t)[:80]}">' for t in tags for prefix in ("", "Remove ")
           for el in ("span", "button", "div") for attr in ("title", "aria-label")}
    boxed = page.evaluate(EXPANDERS_HOLDING, MARKER) == 0
    injected = [f for f in page.evaluate(SCAN, [MARKER, PWNED])
                if f not in own and not (boxed and f.startswith("<details "))]
    assert injected == [], f"{h.name}: elements made from the text: {injected}"
    assert (watch.dialogs, watch.blocked, watch.errors) == ([], [], []), h.name


def shown_text(page) -> str:
    page.locator(STTEXT).first.wait_for(timeout=60_000)
    return page.locator(STTEXT).first.inner_text()


def as_drawn(text: str) -> str:
    """A review as st.text draws it: whitespace runs as one space (norm); NUL as U+FFFD."""
    return norm(text.replace("\x00", "\ufffd"))


# ------------------------------------------------------------------ 1. the review itself
@pytest.mark.parametrize("h", CASES)
def test_the_review_in_the_cohort_and_in_the_queue(watch, store, h):
    if not is_review(h):
        pytest.skip("the reader keeps no review of blanks: the file holds the plain ones only")
    page = watch.page
    on_file(watch, h)
    select_first_row(page)                  # the whole split's first review: this text
    page.get_by_role("button", name="Open on Predict").wait_for(timeout=60_000)
    watch.settle()
    assert as_drawn(shown_text(page)) == as_drawn(h.text.strip()), f"{h.name}: the cohort drew it so"
    watch.inert(h)
    queue_head(watch, store, h)
    assert as_drawn(shown_text(page)) == as_drawn(h.text.strip()), f"{h.name}: the queue drew it so"
    if h.name in SHOTS:
        shot(page, f"hostile_cohorts_{h.name.replace(' ', '_')}.png", height=1800)
    watch.inert(h)


# ------------------------------------------------------------------ 2. note and tag
def said_after(watch: Watch, button, starts: tuple[str, ...]) -> str:
    """Click ``button``; the one message it drew that starts with one of ``starts``."""
    page = watch.page
    button.click()
    page.locator("[data-testid=stAlert]").filter(
        has_text=re.compile("^(" + "|".join(map(re.escape, starts)) + ")")).first.wait_for(
        timeout=60_000)
    watch.settle()
    shown = [norm(t) for t in page.locator("[data-testid=stAlert]").all_inner_texts()]
    said = [t for t in shown if t.startswith(starts)]
    assert len(said) == 1, shown
    return said[0]


def save_and_next(watch: Watch) -> str:
    return said_after(watch, watch.page.get_by_role("button", name="Save and next"),
                      ("Saved", "Not saved"))


def expected_note(typed: str) -> tuple[str | None, str | None]:
    """(the refusal's message or None, the note stored), as the store decides (db.clean_text)."""
    from reviewbert.store import db
    if not db._CONTROL.sub("", typed).strip():
        return None, None                   # a blank note is no note: nothing refused, none kept
    try:
        return None, db.clean_text(typed, "note", db.MAX_NOTE)
    except db.StoreError as e:
        return f"Not saved: {e}", None


def add_tag(watch: Watch, label: str, text: str) -> str:
    """``text`` typed into the box ``label`` as a new option and taken (Enter); what the
    box's input kept (an input drops line breaks)."""
    page = watch.page
    box = page.get_by_role("combobox", name=label, exact=True)
    box.click()
    box.fill(text)
    typed = box.input_value()
    page.keyboard.press("Enter")
    if label == "Tags":             # until its chip is drawn: a click before is lost
        page.wait_for_function(f"t => ({CHIPS})().includes(t)", arg=typed, timeout=60_000)
    page.keyboard.press("Escape")
    box.blur()                      # (a click that blurs it first may be lost in the redraw)
    page.wait_for_timeout(300)
    watch.settle()
    return typed


@pytest.mark.parametrize("h", CASES)
def test_a_note_and_a_tag_in_the_triage_form(watch, store, h):
    """The text as the review's note, then as a tag added in the form: stored as the store
    keeps it and the tag drawn back as a chip, or refused in one line, nothing stored."""
    from reviewbert.store import db
    page = watch.page
    on_file(watch, h)
    key = queue_head(watch, store, h)
    before_note = store.note(key)
    typed = fill_and_commit(watch, page.get_by_role("textbox", name="Note", exact=True), h.text)
    refused, kept = expected_note(typed)
    said = save_and_next(watch)
    if refused:
        assert said == norm(refused) and store.note(key) == before_note, (h.name, said)
    else:
        assert said.startswith("Saved") and store.note(key) == kept, (h.name, said)
    watch.inert(h)
    queue_head(watch, store, h)
    before = store.tags([key]).get(key, [])
    typed = add_tag(watch, "Tags", h.text)
    said = save_and_next(watch)
    from reviewbert.cohorts import triage
    try:
        tag = triage.tag_name(typed)
    except db.StoreError as e:
        assert said == norm(f"Not saved: {e}"), (h.name, said)
        assert store.tags([key]).get(key, []) == before, h.name
    else:
        assert said.startswith("Saved, tagged") and quoted(tag)[:60] in said, (h.name, said)
        assert AUTHOR in [r.author for r in store.tag_records([key]) if r.tag == tag], h.name
        queue_head(watch, store, h)         # the form drawn again: the tag is its chip
        assert norm(tag) in [norm(c) for c in page.evaluate(CHIPS)], (h.name, page.evaluate(CHIPS))
    inert_here(watch, h, typed, typed.strip())


# ------------------------------------------------------------------ 3. a cohort's tag
@pytest.mark.parametrize("h", CASES)
def test_a_new_tag_for_the_whole_cohort(watch, store, h):
    """The text typed as a new option of the cohort's tag box, the whole split tagged:
    every review of it holds the tag as ``triage.tag_name`` writes it, under the author, and
    the message names that tag; or "Not tagged: …" in one line and no tag added."""
    from reviewbert.cohorts import triage
    from reviewbert.store import db
    page = watch.page
    on_file(watch, h)
    mine, plain = keys_of(h)
    keys = [k for k in (mine, *plain) if k]
    before = store.tags(keys)
    typed = add_tag(watch, "Tag every review of the cohort", h.text)
    said = said_after(watch, page.get_by_role("button", name=f"Tag {len(keys)} reviews", exact=True),
                      ("Tagged", "Not tagged"))
    try:
        tag = triage.tag_name(typed)
    except db.StoreError as e:
        assert said == norm(f"Not tagged: {e}") and store.tags(keys) == before, (h.name, said)
    else:
        had = sum(tag in before.get(k, []) for k in keys)
        assert said == norm(f"Tagged {len(keys) - had} reviews {quoted(tag)} ({had} had it already)."), \
            (h.name, said)
        records = {r.review_key: r.author for r in store.tag_records(keys) if r.tag == tag}
        assert set(records) == set(keys) and AUTHOR in records.values(), h.name
    inert_here(watch, h, typed, typed.strip())


# ------------------------------------------------------------------ 4. the lexicon editor
def visible(text: str) -> str:
    return norm(text.replace("\u2060", ""))


def lexicon_outcome(server, typed: str) -> str | None:
    """The parser's refusal of ``typed`` as the user's lexicon file, or None (saved)."""
    from reviewbert.cohorts import lexicon
    try:
        lexicon.parse_lexicon(typed, str(server.lexicon))
        return None
    except lexicon.LexiconError as e:
        return str(e)


LEXICON = "The lexicon: aspects, brands, negations and contrast words"


def lexicon_box(watch: Watch):
    """The lexicon editor's text box, its expander opened if it is closed."""
    page = watch.page
    box = page.get_by_role("textbox", name="Lexicon (YAML)", exact=True)
    watch.settle()
    if not box.is_visible():
        page.get_by_text(LEXICON).first.click()
        box.wait_for(timeout=30_000)
        watch.settle()
    return box


@pytest.mark.parametrize("h", CASES)
def test_the_lexicon_editor(watch, server, h):
    """The text as the whole lexicon, then as a phrase of the shipped one's brands: saved
    as typed, or refused with the parser's one line and the file left as it was."""
    from reviewbert.cohorts import lexicon
    page = watch.page
    server.lexicon.unlink(missing_ok=True)          # the shipped lexicon in force
    on_file(watch, h)
    as_phrase = lexicon.shipped_text().replace(
        "brands: [", "brands: [" + json.dumps(h.text, ensure_ascii=False) + ", ", 1)
    try:
        for text in (h.text, as_phrase):
            before = server.lexicon.read_bytes() if server.lexicon.exists() else None
            typed = fill_and_commit(watch, lexicon_box(watch), text)   # (a textarea: LF for CR)
            lexicon_box(watch)              # (the run that took the text may close it)
            page.get_by_role("button", name="Save the lexicon").click()
            refused = lexicon_outcome(server, typed)
            said = alert_text(page, "Not saved" if refused else "Saved the lexicon")
            watch.settle()
            if refused:
                # (md_escape puts invisible word joiners where Streamlit would draw an
                # emoji, a colour or an icon: the words read as typed)
                assert visible(said) == visible(quoted(f"Not saved: {refused}")), (h.name, said)
                assert (server.lexicon.read_bytes() if server.lexicon.exists() else None) == before
            else:
                assert said == "Saved the lexicon.", (h.name, said)
                assert server.lexicon.read_text(encoding="utf-8") == typed, h.name
            inert_here(watch, h)
    finally:
        server.lexicon.unlink(missing_ok=True)
