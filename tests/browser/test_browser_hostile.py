"""Hostile text (tests/hostile_texts.py) through five pages and their editors in a real
headless Chromium.

For 1-4, one server (the embedded MiniLM with an untrained head, and a data folder whose
reviews are the corpus itself), one browser page reused for every text:

1. Predict: paste into "Review text", click Predict;
2. Error analysis: type into "Search the text" of the misclassification browser
   (the corpus was evaluated once, so every text that survives the box is found)
   and open the first review found;
3. Inside BERT: type into "Sentence";
4. the Predict page's What if? editor: type into "Edited review", click Compare (the diff
   must draw the edit as typed, outside the struck-through words it replaced);
5. Fool the model (a second server, on the trigger model, with its own suites folder and
   store): the text sent as an entry, and as its author's name where it fits the box,
   then drawn on a second browser's board and kept by the store (less control
   characters, which the store strips), or refused with one line and nothing stored;
6. the Behaviour page's test editor: the text as a template and as a word of a word
   list, giving the engine's cases ("N cases") or its one-line error;
7. a CSV of cases imported and run: the text as a case, a capability and a test name;
8. those tests saved into a suite and opened from the Overview: the test's heading and
   the case's text drawn literally.

For every text: the page predicts (the card shows) and draws the literal
characters, or shows its message; no element is created from the text (no script,
image, frame, javascript: link, KaTeX, heading, bold...), no script runs
(``window.__pwned`` stays undefined in every frame), no dialog opens, the console
stays free of errors, and no request leaves localhost. Screenshots of a few cases go
to artifacts/browser/. ``make test`` runs the CORE texts; ``make hostile`` all of them.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from browser_support import (
    ART,
    CHROMIUM,
    VIEW_NEEDS,
    StreamlitServer,
    caption_with,
    evaluate_data_file,
    make_minilm_checkpoint,
    offline_context,
    open_view,
    select_first_row,
    shot,
    write_meta,
    write_reviews,
)
from hostile_texts import CORPUS, MARKER, PWNED, Hostile
from toyreviews import toy_rows
from trigger_model import make_trigger_model

playwright = pytest.importorskip("playwright.sync_api")

EMPTY_MESSAGES = {"predict": "Type or paste a review first", "inside": "Type a sentence in the box"}
UNREADABLE = "no character the model reads"
# `make test` runs these on every page; the whole corpus is `make hostile` (-m hostile).
CORE = {"script tag", "markdown javascript link", "streamlit directives",
        "carriage returns end an HTML block", "100,000 characters", "only zero-width characters",
        "control characters and NUL"}
CASES = [pytest.param(h, id=h.name, marks=() if h.name in CORE else pytest.mark.hostile)
         for h in CORPUS]
SHOTS = {"script tag", "markdown remote image", "carriage returns end an HTML block",
         "only zero-width characters"}
# Filler reviews beside the corpus in the evaluated file (so a search has something to miss).
FILLER = ["The battery lasts two days and the screen is bright.",
          "Stopped charging after a week; the seller never answered.",
          "Okay for the price, but the speaker crackles at full volume.",
          "Exactly as described, fast delivery, would buy again.",
          "The case cracked in the first drop. Returned it."]
ROWS = [(h.text.strip(), i % 5 + 1) for i, h in enumerate(CORPUS) if h.text.strip()] + \
       [(t, i % 5 + 1) for i, t in enumerate(FILLER)]

# Every element a text could inject, or that Markdown / LaTeX / Streamlit's directives
# would make of it. Anywhere on the page: no element with the payloads' attributes
# ("__pwned", "evil.example", "javascript:"), and no block, link, media or KaTeX element
# holding their MARKER. Inside the places that show user text (the highlighted review,
# token chips, messages and captions): no inline formatting holding it either (a code
# span is how a message quotes a text whole; the literal checks catch a partial one). (The
# app's own emphasis of a word elsewhere, e.g. "ranks *PWN* highest", is fine: the word
# inside it is escaped.)
SCAN = """([marker, pwned]) => {
  const bad = [];
  const docs = [document];
  for (const f of document.querySelectorAll('iframe')) {
    try { if (f.contentDocument) docs.push(f.contentDocument); } catch (e) { bad.push('cross-origin frame'); }
  }
  const BLOCKS = 'script, img, iframe, object, embed, style, math, a, h1, h2, h3, h4, h5, h6, ' +
    'blockquote, li, table, details, summary, pre, del, s, .katex, .katex-display, .katex-error, ' +
    '[class*=stMarkdownColored], [data-testid^=stMarkdownColored], [class*=stMarkdownBadge], ' +
    '[data-testid=stMarkdownBadge], [data-testid=stIconMaterial]';
  const TEXT = '.rb-highlight, .rb-chips, .rb-diff, .rb-compare, [data-testid=stAlert], ' +
    '[data-testid=stCaptionContainer]';
  const INLINE = 'strong, em, b, i, u, mark, sub, sup, [style*="color"]';
  for (const d of docs) {
    for (const el of d.querySelectorAll('*')) {
      if (el.matches('input, textarea')) continue;
      for (const a of el.attributes) {
        if (el.tagName === 'IFRAME' && a.name === 'srcdoc') continue;   // bertviz's own page
        // Plotly keeps an SVG label's source text here (data, never markup or a handler)
        if (el.tagName === 'text' && a.name === 'data-unformatted') continue;
        const v = a.value.toLowerCase();
        if (v.includes(pwned) || v.includes('evil.example') || v.includes('javascript:'))
          bad.push(`<${el.tagName.toLowerCase()} ${a.name}="${a.value.slice(0, 80)}">`);
      }
      if (!(el.textContent || '').includes(marker) || el.closest('[data-testid=stDataFrame]')) continue;
      const inText = el.parentElement && el.parentElement.closest(TEXT);
      if (el.matches(BLOCKS) || (inText && el.matches(INLINE) && !el.matches('.rb-w, .rb-chip, .rb-chip *')))
        bad.push(`<${el.tagName.toLowerCase()} class="${el.className}">` + el.textContent.slice(0, 80));
    }
  }
  return bad;
}"""


def norm(s: str) -> str:
    """Whitespace as the browser draws it (white-space: normal): runs collapse to one space."""
    return re.sub(r"[ \t\n\r\f]+", " ", s).strip()


def quoted(query: str) -> str:
    """A query as a message quotes it (reviewbert.viz.markdown.md_code): whitespace runs as one
    space, a word joiner after ":material" (else Streamlit draws an icon), and NUL drawn
    as U+FFFD (CommonMark's rule for it)."""
    return norm(query).replace(":material/", ":material\u2060/").replace("\x00", "\ufffd")


def fragments(h: Hostile) -> list[str]:
    return [norm(f) for f in (h.shows or (h.text,))]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("hostile")
    make_minilm_checkpoint(root / "ckpts" / "minilm")
    write_reviews(root / "data" / "hostile.jsonl", ROWS)
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(root / "data"),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / "streamlit_hostile.log") as srv:
        srv.checkpoint = root / "ckpts" / "minilm"
        yield srv


class Watch:
    """The one page, and everything that must not happen on it."""

    def __init__(self, page, blocked):
        self.page, self.blocked = page, blocked
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: m.type == "error" and self.errors.append(
            f"{m.text} {m.location.get('url', '')}"))
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("response", lambda r: r.status >= 400 and self.errors.append(f"{r.status} {r.url}"))

    def open(self, link: str, ready: str):
        """Go to the app's page named ``link`` in the sidebar (no reload: loading a page's
        own URL makes Streamlit probe ``/<page>/_stcore/…``, two 404s in the console)."""
        self.page.get_by_role("link", name=link).click()
        self.page.locator(ready).first.wait_for(timeout=120_000)
        self.settle()

    def settle(self):
        """Until Streamlit's script run is over and no element is left stale."""
        self.page.wait_for_timeout(150)
        self.page.wait_for_function(
            "() => !document.querySelector('[data-testid=stStatusWidgetRunningIcon]') && "
            "!document.querySelector('[data-stale=true]')", timeout=120_000, polling=100)

    def inert(self, h: Hostile):
        """Nothing ran, opened, loaded or was injected, for text ``h``."""
        page = self.page
        page.wait_for_timeout(200)       # an onerror/onload would have fired by now
        for f in page.frames:
            assert f.evaluate(f"() => typeof window.{PWNED}") == "undefined", (h.name, f.url)
        injected = page.evaluate(SCAN, [MARKER, PWNED])
        assert injected == [], f"{h.name}: elements made from the text: {injected}"
        assert self.dialogs == [], f"{h.name}: dialog {self.dialogs}"
        assert self.blocked == [], f"{h.name}: requests left localhost: {self.blocked}"
        assert self.errors == [], f"{h.name}: console errors {self.errors}"

    def alert_with(self, text: str):
        self.page.locator("[data-testid=stAlert]").filter(has_text=text).first.wait_for(timeout=60_000)


@pytest.fixture(scope="module")
def pw():
    """The one Playwright of the module (its sync API runs one at a time in a thread)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def watch(server, pw, tmp_path_factory):
    ctx, blocked = offline_context(pw, tmp_path_factory.mktemp("hostile-profile"))
    page = ctx.new_page()
    page.goto(server.url)
    page.locator("textarea").wait_for(timeout=120_000)
    yield Watch(page, blocked)
    ctx.close()


VIEW_BUILT = """need => {
    const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(
        p => p._fullLayout && p._fullData.some(t => t.type === 'heatmap' || t.orientation !== 'h'));
    if (need.charts && charts.length < need.charts) return false;
    if (!need.headview) return true;
    const f = document.querySelector('iframe');
    return !!(f && f.contentDocument && f.contentDocument.querySelector('#vis svg text'));
}"""
"""The open attention view is built (browser_support.VIEW_NEEDS), whatever its tokens."""


def rendered_review(page) -> str:
    return norm(page.locator(".rb-highlight").first.inner_text())


def assert_shown(page, h: Hostile):
    """The review is drawn as its literal characters."""
    shown = rendered_review(page)
    for frag in fragments(h):
        assert frag in shown, f"{h.name}: {frag[:120]!r} not drawn as text in {shown[:300]!r}"


def wait_for_review(page, h: Hostile):
    """Until the highlighted review holds every fragment of ``h`` (the previous text lacks them)."""
    page.wait_for_function(
        """frags => {
            const h = document.querySelector('.rb-highlight');
            if (!h) return false;
            const t = h.innerText.replace(/[ \\t\\n\\r\\f]+/g, ' ');
            return frags.every(f => t.includes(f));
        }""", arg=[f[:2000] for f in fragments(h)], timeout=60_000, polling=200)


# ------------------------------------------------------------------ 1. Predict
@pytest.mark.parametrize("h", CASES)
def test_predict_page(watch, h):
    page = watch.page
    box = page.get_by_label("Review text")
    box.fill(h.text)
    box.blur()
    page.wait_for_timeout(300)                 # let Streamlit take the new text
    page.get_by_role("button", name="Predict").click()
    if h.predicts:
        wait_for_review(page, h)
        # the card's stars are HTML in Markdown, drawn up to 0.2 s after the highlighted
        # review on the page's first prediction (browser_support.DRAWN says why)
        page.locator(".rb-stars").first.wait_for(timeout=30_000)
        watch.settle()
        assert page.locator(".rb-stars").count() == 1
        assert "Predicted:" in page.inner_text("[data-testid=stMain]")
        assert_shown(page, h)
        # a NUL shows as U+FFFD (highlight.escape_text), not dropped
        assert rendered_review(page).count("\ufffd") == h.text.count("\x00"), h.name
        # the other attention views are tabs, built when opened: each draws the text's
        # tokens (Plotly's tick labels, bertviz's SVG), each is scanned
        for view in list(VIEW_NEEDS)[1:]:
            open_view(page, view)
            page.wait_for_function(VIEW_BUILT, arg=VIEW_NEEDS[view], timeout=60_000, polling=200)
            watch.settle()
            watch.inert(h)
        open_view(page, next(iter(VIEW_NEEDS)))       # the next text starts on the highlight
        page.locator(".rb-highlight").wait_for(timeout=60_000)
        watch.settle()
    else:
        watch.alert_with(EMPTY_MESSAGES["predict"] if not h.text.strip() else UNREADABLE)
        watch.settle()
        assert page.locator(".rb-stars").count() == 0     # no stale card from the last text
    if h.name in SHOTS:
        shot(page, f"hostile_predict_{h.name.replace(' ', '_')}.png", height=1800)
    watch.inert(h)


# ------------------------------------------------------------------ 2. Error analysis search
@pytest.fixture(scope="module")
def error_page(watch):
    page = watch.page
    watch.open("Error analysis", "[data-testid=stRadio]")
    evaluate_data_file(page, len(ROWS))
    page.get_by_role("tab", name="Errors").click()
    page.get_by_text("Only misclassified").first.click()      # every review, right or wrong
    caption_with(page, f"{len(ROWS)} of {len(ROWS)} reviews")
    watch.settle()
    return watch


@pytest.mark.parametrize("h", CASES)
def test_error_search(error_page, h):
    watch = error_page
    page = watch.page
    box = page.get_by_label("Search the text")
    box.fill(h.text)
    query = box.input_value()               # what an <input> keeps (it drops line breaks)
    box.press("Enter")
    found = [t for t, _ in ROWS if query.strip() and query.strip().lower() in t.lower()]
    if not query.strip():
        caption_with(page, f"{len(ROWS)} of {len(ROWS)} reviews.")
        watch.settle()
    elif not found:
        watch.alert_with("No review contains")
        watch.settle()
        message = norm(page.locator("[data-testid=stAlert]").filter(
            has_text="No review contains").first.inner_text())
        assert quoted(query)[:60] in message, (h.name, message)   # the query, as typed
    else:
        # this query's caption (the last query's may have had the same count)
        caption_with(page, f"{len(found)} of {len(ROWS)} reviews contain {quoted(query)[:60]}")
        watch.settle()
        select_first_row(page)
        if h.predicts:
            wait_for_review(page, h)
            watch.settle()
            assert page.locator(".rb-stars").count() == 1
            assert_shown(page, h)
        else:
            watch.alert_with(UNREADABLE)
            watch.settle()
            assert page.locator(".rb-stars").count() == 0
    if h.name in SHOTS:
        shot(page, f"hostile_error_{h.name.replace(' ', '_')}.png", height=2400)
    watch.inert(h)


# ------------------------------------------------------------------ 3. Inside BERT
@pytest.fixture(scope="module")
def tokenizer(server):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(server.checkpoint)


@pytest.fixture(scope="module")
def inside_page(watch):
    watch.open("Inside BERT", ".rb-chips")
    return watch


@pytest.mark.parametrize("h", CASES)
def test_inside_bert(inside_page, tokenizer, h):
    from reviewbert.model.inference import encode
    watch = inside_page
    page = watch.page
    box = page.get_by_role("textbox", name="Sentence", exact=True)
    box.fill(h.text)
    sentence = box.input_value()           # max_chars=5000 and no line breaks
    box.press("Enter")
    tokens = encode(tokenizer, sentence, 256).tokens if sentence.strip() else []
    if h.predicts:
        # the chips are the tokenizer's WordPieces, as text, and every step is drawn
        page.wait_for_function(
            """want => {
                const c = [...document.querySelectorAll('.rb-chips .rb-chip > span:first-child')];
                return c.length === want.length && c.every((s, i) => s.textContent === want[i])
                    && document.querySelectorAll('[data-testid=stMain] h2').length >= 6;
            }""", arg=tokens, timeout=60_000, polling=200)
        watch.settle()
    else:
        watch.alert_with(EMPTY_MESSAGES["inside"] if not sentence.strip() else UNREADABLE)
        watch.settle()
        assert page.locator(".rb-chips").count() == 0
    if h.name in SHOTS:
        shot(page, f"hostile_inside_{h.name.replace(' ', '_')}.png", height=1800)
    watch.inert(h)


# ------------------------------------------------------------------ 4. the What if? editor
EDITOR_MESSAGES = {"empty": "The editor is empty", "unreadable": UNREADABLE}
DIFF_TEXT = """() => {
    const d = document.querySelector('.rb-diff:not(.rb-cf)');
    if (!d) return null;
    const c = d.cloneNode(true);
    c.querySelectorAll('.rb-removed').forEach(e => e.remove());   // the edit as drawn
    c.querySelectorAll('br').forEach(e => e.replaceWith('\\n'));     // (a detached node
    return c.textContent.replace(/[ \\t\\n\\r\\f]+/g, ' ').trim();  // has no innerText)
}"""


@pytest.fixture(scope="module")
def editor_page(watch):
    """The Predict page with a review predicted and its What if? editor open."""
    page = watch.page
    watch.open("Predict", "textarea")
    box = page.get_by_label("Review text")
    box.fill(FILLER[0])
    box.blur()
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Predict").click()
    open_view(page, "What if?")
    page.get_by_role("button", name="Edit and compare").click(timeout=120_000)
    page.get_by_role("textbox", name="Edited review").wait_for(timeout=60_000)
    watch.settle()
    return watch


@pytest.mark.parametrize("h", CASES)
def test_what_if_editor(editor_page, h):
    """Typed into the editor and compared: the diff draws the edit as its literal characters
    (outside the struck-through removed words), or the editor says why it cannot."""
    watch = editor_page
    page = watch.page
    box = page.get_by_role("textbox", name="Edited review")
    box.fill(h.text)
    typed = box.input_value()                 # what the textarea keeps (CR becomes LF)
    box.blur()
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Compare", exact=True).click()
    if h.predicts:
        frags = [f.replace("\x00", "\ufffd")[:2000] for f in fragments(h)]
        page.wait_for_function(f"frags => {{ const t = ({DIFF_TEXT})(); "
                               "return t !== null && frags.every(f => t.includes(f)); }",
                               arg=frags, timeout=60_000, polling=200)
        watch.settle()
        assert norm(page.evaluate(DIFF_TEXT)) == norm(typed.replace("\x00", "\ufffd"))
    else:
        watch.alert_with(EDITOR_MESSAGES["empty" if not h.text.strip() else "unreadable"])
        watch.settle()
    if h.name in SHOTS:
        shot(page, f"hostile_editor_{h.name.replace(' ', '_')}.png", height=2400)
    watch.inert(h)


# ================================================================== Behaviour and Fool the model
# A second server on the hand-weighted trigger model (tests/trigger_model.py), with its
# own suites folder, cache and store, as tests/browser/test_browser_behave.py serves them.
# Enough reviews per rating that the checkpoint's test split is not empty (else the page
# says so in an info box, above whatever a tab shows).
BEHAVE_ROWS = toy_rows(100)
ROOM = "class"                   # the Fool page's default room


@pytest.fixture(scope="module")
def behave_server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("hostile-behave")
    data = write_reviews(root / "data" / "small.jsonl", BEHAVE_ROWS)
    write_meta(make_trigger_model(root / "ckpts" / "trig"), 5, data_file=data, max_length=64,
               max_per_class=10)
    (root / "suites").mkdir()
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data.parent),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1",
           "REVIEWBERT_SUITES": str(root / "suites"), "REVIEWBERT_CACHE": str(root / "cache"),
           "REVIEWBERT_DB": f"sqlite:///{root / 'store.db'}"}
    with StreamlitServer(env, ART / "streamlit_hostile_behave.log") as srv:
        srv.db_url = env["REVIEWBERT_DB"]
        yield srv


@pytest.fixture(scope="module")
def behave_browser(behave_server, pw, tmp_path_factory):
    return pw, tmp_path_factory.mktemp("hostile-behave-profiles")


def watched_page(behave_browser, server, name: str, link: str, ready: str) -> Watch:
    """A page of its own browser context, opened on the app's page ``link`` from the sidebar."""
    p, profiles = behave_browser
    ctx, blocked = offline_context(p, profiles / name)
    page = ctx.new_page()
    page.goto(server.url)
    page.locator("textarea").first.wait_for(timeout=120_000)
    watch = Watch(page, blocked)
    watch.open(link, ready)
    return watch


def inert_all(h: Hostile, *watches: Watch) -> None:
    for w in watches:
        w.inert(h)


def fresh(*watches: Watch) -> None:
    """Forget what earlier texts did on these long-lived pages, so that one text's failure
    (a remote image fetched) is not every later text's (the lists are shared: emptied in place)."""
    for w in watches:
        del w.dialogs[:], w.errors[:], w.blocked[:]


def alert_text(page, starts: str) -> str:
    page.locator("[data-testid=stAlert]").filter(has_text=starts).first.wait_for(timeout=60_000)
    return norm(page.locator("[data-testid=stAlert]").filter(has_text=starts).first.inner_text())


# ------------------------------------------------------------------ 5. Fool the model
ST_TEXTS = "() => [...document.querySelectorAll('[data-testid=stText]')].map(e => e.innerText)"


@pytest.fixture(scope="module")
def fool(behave_server, behave_browser):
    """A student writing entries and a teacher's board, in two browser contexts."""
    from reviewbert.store import db
    student = watched_page(behave_browser, behave_server, "student", "Fool the model",
                           "textarea")
    teacher = watched_page(behave_browser, behave_server, "teacher", "Fool the model",
                           "textarea")
    teacher.page.get_by_role("tab", name="The class's board").click()
    teacher.settle()
    yield student, teacher, db.open_store(behave_server.db_url)
    db.close_all()


def fill_and_commit(watch: Watch, box, text: str) -> str:
    """``text`` typed into ``box`` and taken by Streamlit; what the box kept."""
    box.fill(text)
    kept = box.input_value()
    box.blur()
    watch.page.wait_for_timeout(300)
    watch.settle()
    return kept


def expected_entry(author: str, typed: str) -> tuple[str | None, str | None, str | None]:
    """(the message a send must show instead of an entry, or None; the stored author, the
    stored text), as the page (fool._send) and the store (db.clean_*) decide."""
    from reviewbert.store import db
    text = typed.strip()
    if not text:
        return "Write a review first", None, None
    if all(unicodedata.category(c) in ("Cf", "Cc") or c.isspace() for c in text):
        return "The model reads no word in this review", None, None   # nothing to rate
    try:
        return None, db.clean_name(author, "author", empty_ok=True), \
            db.clean_text(text, "text", db.MAX_TEXT)
    except db.StoreError as e:
        return f"Not saved: {e}", None, None


def board_entry(page, entry_id: int) -> tuple[str, str]:
    """(header, text) of entry ``entry_id`` among the board's latest, once drawn."""
    page.wait_for_function(f"() => ({ST_TEXTS})().some(t => t.startsWith('#{entry_id} ·'))",
                           timeout=30_000, polling=200)
    shown = page.evaluate(ST_TEXTS)
    i = next(i for i, t in enumerate(shown) if t.startswith(f"#{entry_id} ·"))
    return shown[i], shown[i + 1]


def send_and_check(fool, h: Hostile, author: str) -> bool:
    """One entry sent with ``author``: stored and drawn on the teacher's board as typed, or
    refused with its one-line message and nothing stored. Whether it was stored."""
    student, teacher, store = fool
    page = student.page
    author = fill_and_commit(student, page.get_by_label("Your name (optional)"), author)
    box = page.get_by_label("Your review")
    box.fill(h.text)
    typed = box.input_value()                 # max_chars=5000: the long text is cut
    before = store.entries(ROOM)
    page.get_by_role("button", name="Send").click()
    refused, want_author, want_text = expected_entry(author, typed)
    if refused:
        message = alert_text(page, refused.split(":")[0])
        assert message.startswith(norm(refused)[:60]), (h.name, message, refused)
        student.settle()
        assert store.entries(ROOM) == before, f"{h.name}: a refused entry was stored"
        return False
    entry_id = (before[-1].id if before else 0) + 1
    alert_text(page, f"Entry #{entry_id} is on the board")
    student.settle()
    stored = store.entry(entry_id)
    # the store strips control characters from a text by design (db.clean_text)
    assert (stored.text, stored.author) == (want_text, want_author), h.name
    header, shown = board_entry(teacher.page, entry_id)
    assert norm(want_author or "someone") in norm(header), (h.name, header)
    cut = want_text if len(want_text) <= 400 else want_text[:400] + "…"
    assert norm(shown) == norm(cut), f"{h.name}: board drew {shown[:200]!r}"
    return True


@pytest.mark.parametrize("h", CASES)
def test_fool_the_model_entry_on_the_board(fool, h):
    """The text as an entry, and as its author's name where it fits the name box (80
    characters): stored as typed (less control characters), drawn literally on a second
    browser's board, or refused with one line; nothing injected in either browser."""
    student, teacher, _ = fool
    fresh(student, teacher)
    stored = send_and_check(fool, h, h.text if len(h.text) <= 80 else "")
    if not stored and h.text.strip() and len(h.text) <= 80:
        # the name was refused (control characters): the text alone, under no name
        send_and_check(fool, h, "")
    teacher.settle()
    if h.name in SHOTS:
        shot(teacher.page, f"hostile_fool_{h.name.replace(' ', '_')}.png", height=1800)
    inert_all(h, student, teacher)


# ------------------------------------------------------------------ 6. the Behaviour editor
TEMPLATES = "Templates, one per line, with {placeholders}"
WORDS = "Word lists, one per line: name: word, word, …"
EDITOR_SPOTS = {"template": lambda t: (t, "product: phone, case"),
                "word list": lambda t: ("This {product} works.", f"product: {t}")}


@pytest.fixture(scope="module")
def behaviour(behave_server, behave_browser):
    """The Behaviour page, in its own browser context."""
    return watched_page(behave_browser, behave_server, "behaviour", "Behaviour",
                        "[data-testid=stTab]")


@pytest.fixture(scope="module")
def editor(behaviour):
    behaviour.page.get_by_role("tab", name="Write a test").click()
    behaviour.page.get_by_label(TEMPLATES).wait_for(timeout=60_000)
    behaviour.settle()
    return behaviour


def editor_outcome(templates: str, words: str) -> str:
    """What the editor must show for these fields (its other fields left as they open):
    the one-line error, or "N cases" of its preview, as the engine decides."""
    from reviewbert.behave import cases as behave_cases
    from reviewbert.behave import suite as suites
    from reviewbert.ui.behaviour_editor import editor_suite
    form = {"name": "Negation at a distance (mine)", "capability": "Negation", "type": "MFT",
            "description": "", "templates": templates, "words": words, "max_cases": 100,
            "stars": (1, 2)}
    try:
        suite = editor_suite(form, suites.default_suite())
        n = len(behave_cases.build_cases(suite)[suite.tests[0].name])
        return f"{n:,} case{'s' if n != 1 else ''}"
    except suites.SuiteError as e:
        return str(e)


EDITOR_SHOWS = """() => {
    const main = document.querySelector('[data-testid=stMain]');
    const a = main.querySelectorAll('[data-testid=stAlert]');
    if (a.length) return [...a].map(e => e.innerText).join(' | ');
    const m = [...main.querySelectorAll('[data-testid=stMarkdownContainer]')]
        .map(e => e.innerText).find(t => / cases?\\. The first \\d+:/.test(t));
    return m ? m.split('.')[0] : '';
}"""
"""The editor's one error, or its "N cases" line ("" while neither is drawn)."""
NORM_JS = "t => t.replace(/[ \\t\\n\\r\\f]+/g, ' ').trim()"


@pytest.mark.parametrize("spot", list(EDITOR_SPOTS))
@pytest.mark.parametrize("h", CASES)
def test_behaviour_editor(editor, h, spot):
    """The text as a template, or as a word of a word list: the editor previews the cases
    the engine makes of it, or shows the engine's one-line error; nothing injected."""
    page = editor.page
    fresh(editor)
    templates, words = EDITOR_SPOTS[spot](h.text)
    templates = fill_and_commit(editor, page.get_by_label(TEMPLATES), templates)
    words = fill_and_commit(editor, page.get_by_role("textbox", name=WORDS), words)
    want = editor_outcome(templates, words)
    # (the last text may have shown the same: fill_and_commit waited for this one's run)
    try:
        page.wait_for_function(f"w => ({NORM_JS})(({EDITOR_SHOWS})()) === w", arg=norm(want),
                               timeout=30_000, polling=200)
    except playwright.TimeoutError:
        pass
    editor.settle()
    shown = norm(page.evaluate(EDITOR_SHOWS))
    assert shown == norm(want), f"{h.name} ({spot}): shown {shown[:200]!r}, want {want[:200]!r}"
    assert " | " not in shown, f"{h.name}: more than one message"
    if h.name in SHOTS:
        shot(page, f"hostile_editor_{spot.replace(' ', '_')}_{h.name.replace(' ', '_')}.png",
             height=1800)
    editor.inert(h)


# ------------------------------------------------------------------ 7. a CSV of cases imported
CSV_NAME = "hostile.csv"
PLAIN = "A plain review of the phone."
YTICKS = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot .ytick text')]
    .map(t => t.textContent)"""


@pytest.fixture(scope="module")
def importer(behaviour):
    behaviour.page.get_by_role("tab", name="Import / export").click()
    behaviour.page.locator("[data-testid=stFileUploader]").wait_for(timeout=60_000)
    behaviour.settle()
    return behaviour


def cases_csv(h: Hostile) -> bytes:
    """The text as a case's text, and (cut to the 200 characters a name may have) as the
    capability and name of a plain case."""
    import csv
    import io
    label = h.text if len(h.text.strip()) <= 200 else h.text[:200]
    out = io.StringIO()
    w = csv.writer(out)
    w.writerows([("text", "min_stars", "max_stars", "capability", "name"),
                  (h.text, 1, 5, "Hostile texts", "as a case"), (PLAIN, 1, 5, label, label)])
    return out.getvalue().encode("utf-8")


def tick(label: str) -> str:
    """A capability as the matrix's axis draws it (behave.figures._label, unescaped)."""
    label = " ".join(label.split())
    return label if len(label) <= 80 else label[:79] + "…"


@pytest.mark.parametrize("h", CASES)
def test_behaviour_csv_import(importer, h):
    """A CSV whose cases hold the text as a review and as a capability and test name: the
    engine's one-line error, or its tests run, the matrix's labels drawn literally;
    nothing injected."""
    from reviewbert.behave import suite as suites
    from reviewbert.behave.cases_csv import read_cases_csv
    page = importer.page
    fresh(importer)
    data = cases_csv(h)
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(
        files=[{"name": CSV_NAME, "mimeType": "text/csv", "buffer": data}])
    try:
        tests = read_cases_csv(data, origin=CSV_NAME)
    except suites.SuiteError as e:
        message = alert_text(page, CSV_NAME)
        assert message == norm(str(e)), (h.name, message)
        importer.settle()
        importer.inert(h)
        return
    n = sum(len(t.cases) for t in tests)
    caption_with(page, f"{n:,} cases in {len(tests)} tests")
    importer.settle()
    page.get_by_role("button", name="Run imported cases").click()
    caption_with(page, "scored cases")
    importer.settle()
    page.wait_for_function(f"n => ({YTICKS})().length === n", arg=len(tests), timeout=30_000)
    # (the axis is reversed: its ticks come bottom up)
    assert sorted(page.evaluate(YTICKS)) == sorted(tick(t.capability) for t in tests), h.name
    if h.name in SHOTS:
        shot(page, f"hostile_import_{h.name.replace(' ', '_')}.png", height=1800)
    importer.inert(h)


# ------------------------------------------------------------------ 8. imported tests opened
def parses(h: Hostile) -> bool:
    from reviewbert.behave import suite as suites
    from reviewbert.behave.cases_csv import read_cases_csv
    try:
        return bool(read_cases_csv(cases_csv(h)))
    except suites.SuiteError:
        return False


OPENED = [c for c in CASES if parses(c.values[0])]
HEADINGS = ("() => [...document.querySelectorAll('[data-testid=stMain] h3')]"
            ".map(e => e.textContent)")


def tick_row(watch: Watch, grid_index: int, row: int) -> None:
    """Tick row ``row`` (0-based) of the page's ``grid_index``-th st.dataframe (a canvas:
    its cells are not in the DOM, so the click goes where the row's box is drawn)."""
    page = watch.page
    grid = page.locator('[data-testid="stDataFrame"]').nth(grid_index)
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 14, box["y"] + 35 + 17 + 35 * row)
    watch.settle()


def import_and_save(watch: Watch, h: Hostile, suite: str) -> None:
    """The text's CSV imported and saved into the user suite ``suite``."""
    page = watch.page
    page.get_by_role("tab", name="Import / export").click()
    watch.settle()
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(
        files=[{"name": CSV_NAME, "mimeType": "text/csv", "buffer": cases_csv(h)}])
    caption_with(page, "cases in 2 tests")
    watch.settle()
    fill_and_commit(watch, page.get_by_role("textbox", name="Save into suite"), suite)
    page.get_by_role("button", name="Save into suite").click()
    caption_with(page, f"into suite {suite}")
    watch.settle()


# A widget's key is a class of its container ("st-key-…"); the cases table's key is made
# of the test's name, letters, digits and "_" only (behaviour._slug), so "__pwned" there is
# a slug, not an attribute the text set.
KEY_CLASS = '<div class="stElementContainer element-container st-key-bh_cases_'


def inert_but_names(watch: Watch, h: Hostile, heading: str = "") -> None:
    """Watch.inert, where the page's own heading of the opened test may hold the marker
    when it reads as the literal name (an element made inside it is still reported), and
    the cases table's key may hold the name's slug."""
    page = watch.page
    page.wait_for_timeout(200)
    for f in page.frames:
        assert f.evaluate(f"() => typeof window.{PWNED}") == "undefined", (h.name, f.url)
    own = re.compile(r'<h3 class="[^"]*">' + re.escape(heading[:80]) + "$")
    injected = [f for f in page.evaluate(SCAN, [MARKER, PWNED])
                if not (heading and own.match(norm(f))) and not f.startswith(KEY_CLASS)]
    assert injected == [], f"{h.name}: elements made from the names: {injected}"
    assert (watch.dialogs, watch.blocked, watch.errors) == ([], [], []), h.name


@pytest.mark.parametrize("h", OPENED)
def test_behaviour_imported_tests_opened(behaviour, h):
    """The imported tests saved into a suite and run from the Overview: a test named after
    the text opens under a heading that reads as typed, and the case holding the text opens
    on its literal characters; nothing injected. (A test run in the Import tab itself
    cannot be opened: selecting it reruns the page without the run.)"""
    from reviewbert.behave.cases_csv import read_cases_csv
    page = behaviour.page
    fresh(behaviour)
    suite = f"hostile-{CORPUS.index(h)}"
    import_and_save(behaviour, h, suite)
    page.get_by_role("tab", name="Overview").click()
    behaviour.settle()
    page.get_by_role("combobox", name="Suite", exact=True).click()
    page.get_by_role("option", name=suite, exact=True).click()
    behaviour.settle()
    page.get_by_role("button", name="Run 2 tests").click()
    caption_with(page, "scored cases")
    behaviour.settle()
    # the case holding the text: its test first (every case passes: stars 1-5)
    tick_row(behaviour, 0, 0)
    caption_with(page, "as a case · MFT · Hostile texts")
    tick_row(behaviour, 1, 0)
    page.locator("[data-testid=stMain] [data-testid=stText]").first.wait_for(timeout=30_000)
    shown = page.locator("[data-testid=stMain] [data-testid=stText]").first.inner_text()
    assert norm(shown) == norm(h.text), f"{h.name}: the case drew {shown[:200]!r}"
    inert_but_names(behaviour, h)
    # the test named after the text (and of that capability)
    (named,) = [t for t in read_cases_csv(cases_csv(h)) if t.name != "as a case"]
    # as the app's Markdown shows a name (see quoted): NUL as U+FFFD, a word joiner
    # after ":material" (else Streamlit draws an icon)
    heading = quoted(f"{named.name} · MFT · {named.capability}")
    tick_row(behaviour, 0, 1)
    try:        # until the last test's heading is gone; a wrong one is reported below
        page.wait_for_function(f"w => ({HEADINGS})().map({NORM_JS}).join('|') === w",
                               arg=heading, timeout=20_000, polling=200)
    except playwright.TimeoutError:
        pass
    behaviour.settle()
    assert [norm(t) for t in page.evaluate(HEADINGS)] == [heading], h.name
    if h.name in SHOTS:
        shot(page, f"hostile_opened_{h.name.replace(' ', '_')}.png", height=1800)
    inert_but_names(behaviour, h, heading)
