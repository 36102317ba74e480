"""Hostile text (tests/hostile_texts.py) through three pages and the What if? editor in a
real headless Chromium.

One server (the embedded MiniLM with an untrained head, and a data folder whose
reviews are the corpus itself), one browser page reused for every text:

1. Predict: paste into "Review text", click Predict;
2. Error analysis: type into "Search the text" of the misclassification browser
   (the corpus was evaluated once, so every text that survives the box is found)
   and open the first review found;
3. Inside BERT: type into "Sentence";
4. the Predict page's What if? editor: type into "Edited review", click Compare (the diff
   must draw the edit as typed, outside the struck-through words it replaced).

For every text: the page predicts (the card shows) and draws the literal
characters, or shows its message; no element is created from the text (no script,
image, frame, javascript: link, KaTeX, heading, bold...), no script runs
(``window.__pwned`` stays undefined in every frame), no dialog opens, the console
stays free of errors, and no request leaves localhost. Screenshots of a few cases go
to artifacts/browser/. ``make test`` runs the CORE texts; ``make hostile`` all of them.
"""
from __future__ import annotations

import re
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
    write_reviews,
)
from hostile_texts import CORPUS, MARKER, PWNED, Hostile

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
def watch(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path_factory.mktemp("hostile-profile"))
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
