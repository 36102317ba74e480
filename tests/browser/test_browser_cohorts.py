"""The Cohorts page driven in a real headless Chromium on the shipped demo's test split.

Every non-localhost request is blocked. The split is the demo's 2,105 test reviews,
rebuilt from the real data, in a symlinked copy of the demo (nothing is written into
checkpoints/demo), evaluated once through the page's "Evaluate" button (a minute or two
on one thread) and read from the copy's cache afterwards.

In order, on one server, one store (sqlite) and one uploads folder:

1. the error tree (a plotly icicle), the top slices (figure and table) and the heat map
   over two chosen properties; the screenshot is docs/screenshots/cohorts.png;
2. a cohort opened, saved as a slice, then offered by Error analysis' Slices tab;
3. a cohort tagged at once: the store holds its tags, with the author typed on the page;
4. the triage queue worked through three times (tag, note, relabel, "Save and next");
5. the corrected file written (the relabels applied) and the annotations downloaded;
6. a checkpoint retrained on that file (the CLI, not the browser), then compared with
   the demo on the cohorts in the Fix and compare tab.

The later tests read what the earlier ones wrote (the store, the corrected file): run the
file whole. Screenshots go to artifacts/browser/.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from demo_support import ANALYSIS, demo_copy

from browser_support import ART, CHROMIUM, ROOT, StreamlitServer, caption_with, offline_context, shot

pytestmark = [pytest.mark.e2e]
pytest.importorskip("playwright.sync_api")
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

N_TEST = 2105                  # the demo's test split
AUTHOR = "Ada Lovelace"
TRIAGER = "Grace Hopper"
SLICE_NAME = "cohort from the browser"
COHORT_TAG = "comparison"
QUEUE_TAG = "mixed"
NOTE = "The words and the stars disagree; checked by hand."
NAME_BOX = "Your name (recorded with every tag, note and relabel)"


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    root = tmp_path_factory.mktemp("cohorts-demo")
    demo_copy(root / "ckpts")      # without the demo's own cache: the page evaluates it
    ART.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{root / 'store.db'}"
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(data_dir),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "REVIEWBERT_CACHE": str(root / "cache"),
           "REVIEWBERT_DB": db_url, "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / "streamlit_cohorts_demo.log") as srv:
        srv.root, srv.db_url = root, db_url
        yield srv


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        yield p, tmp_path_factory.mktemp("profiles")


def new_page(browser, name: str):
    p, profiles = browser
    ctx, blocked = offline_context(p, profiles / name)
    page = ctx.new_page()
    page.dialogs, page.errors, page.blocked = [], [], blocked
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    return ctx, page


def settle(page, timeout: int = 300_000):
    page.wait_for_timeout(150)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidgetRunningIcon]')"
                           " && !document.querySelector('[data-stale=true]')", timeout=timeout,
                           polling=100)


def clean(page):
    """No exception, no error message, no dialog, no page error, nothing off localhost."""
    settle(page)
    main = page.locator("[data-testid=stMain]")
    assert main.locator("[data-testid=stException]").count() == 0, main.inner_text()[:3000]
    assert page.locator("[data-testid=stAlertContentError]").count() == 0, main.inner_text()[:3000]
    assert not page.dialogs and not page.errors and not page.blocked


def store(server):
    from reviewbert.store import db
    db.close_all()
    return db.open_store(server.db_url)


def analysis_folder(server) -> Path:
    """The demo copy's prediction cache of its test split (written or copied there)."""
    return next((server.root / "ckpts" / "demo" / ANALYSIS).glob("*/predictions.parquet")).parent


def alert(page, kind: str, starts: str, timeout: int = 120_000) -> str:
    """The text of the first ``kind`` (Success, Warning…) message starting with ``starts``."""
    box = page.locator(f"[data-testid=stAlertContent{kind}]").filter(has_text=starts).first
    box.wait_for(timeout=timeout)
    return box.inner_text()


def open_cohorts(page, server, evaluate_timeout: int = 300_000, goto: bool = True):
    """The Cohorts page on the demo's test split, evaluated through the page if it must be."""
    if goto:
        page.goto(server.url + "/cohorts")
        page.get_by_text("Failing cohorts").first.wait_for(timeout=120_000)
        settle(page)
    evaluate = page.get_by_role("button", name=f"Evaluate {N_TEST:,} reviews", exact=True)
    evaluate.or_(page.get_by_text(f"of {N_TEST:,} reviews")).first.wait_for(timeout=120_000)
    if evaluate.count():
        evaluate.click()
    caption_with(page, f"of {N_TEST:,} reviews", timeout=evaluate_timeout)
    settle(page)


def type_name(page, name: str):
    box = page.get_by_role("textbox", name=NAME_BOX, exact=True)
    box.fill(name)
    box.press("Enter")
    settle(page)


def open_tab(page, name: str):
    page.get_by_role("tab", name=name, exact=True).click()
    settle(page)


def open_list(page, label: str):
    """Open the selectbox ``label``'s list (a click on a page still laying itself out can
    land before the box listens: tried again)."""
    box = page.get_by_role("combobox", name=label, exact=True)
    for _ in range(5):
        box.click()
        try:
            page.get_by_role("option").first.wait_for(timeout=5_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError(f"the list of {label!r} does not open")


def pick(page, label: str, option: str):
    """Choose ``option`` in the selectbox ``label``, typed to filter (its list is drawn
    only as far as it is scrolled)."""
    open_list(page, label)
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).first.click()
    settle(page)


def options(page, label: str) -> list[str]:
    open_list(page, label)
    found = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return found


def plot_drawn(page, check: str, timeout: int = 120_000):
    """Until a plotly chart ``p`` for which the JavaScript expression ``check`` holds."""
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some("
                           f"p => p._fullLayout && p.data && p.data[0] && ({check}))", timeout=timeout)


GRID = """h => {
    const t = [...document.querySelectorAll('[data-testid=stDataFrame] table')].find(
        t => [...t.querySelectorAll('thead th')].some(c => c.innerText === h));
    return t ? {head: [...t.querySelectorAll('thead th')].map(c => c.innerText),
                rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.children].map(c => c.innerText)),
                count: Number(t.getAttribute('aria-rowcount')) - 1} : null;
}"""


def grid(page, header: str, timeout: int = 120_000) -> dict:
    """The st.dataframe with a column ``header``: its header, the rows it has drawn (its
    accessible table: the canvas' visible rows) and how many rows it holds."""
    page.wait_for_function(f"h => {{ const g = ({GRID})(h); return g && g.rows.length > 0; }}",
                           arg=header, timeout=timeout)
    return page.evaluate(GRID, header)


ICICLE = ("p.data[0].type === 'icicle' && [...p.querySelectorAll('text')].some("
          "t => t.textContent.includes('every review' + r + ' of ' + n))")
HEATMAP = ("p.data[0].type === 'heatmap' && p._fullLayout.xaxis.title.text === 'negations'"
           " && p._fullLayout.yaxis.title.text === 'true_stars' && p.querySelectorAll('.hm image').length")


def overall(page) -> tuple[int, float]:
    """(errors, error rate in %) of the whole split, as the Cohorts tab states them."""
    main = page.locator("[data-testid=stMain]").inner_text()
    m = re.search(rf"([\d,]+) of {N_TEST:,} reviews are a wrong prediction \((\d+\.\d)%\)", main)
    assert m, main[:3000]
    return int(m[1].replace(",", "")), float(m[2])


def slices_drawn(page) -> list[str]:
    """The Top slices figure's bars: their labels as drawn."""
    check = "p.data[0].type === 'bar' && p.layout.title.text.includes('Top slices')"
    plot_drawn(page, check + " && p.querySelectorAll('.bars path').length > 0")
    return page.evaluate(f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => "
                         f"p.data && p.data[0] && {check}).map(p => [...p.querySelectorAll("
                         "'.ytick text')].map(t => t.textContent))[0]")


def test_the_tree_the_slices_and_the_heat_map_of_the_demo(server, browser):
    ctx, page = new_page(browser, "found")
    t0 = time.perf_counter()
    open_cohorts(page, server)
    errors, rate = overall(page)
    assert 0 < errors < N_TEST and rate == round(100 * errors / N_TEST, 1)
    # the tree's root is the whole split, at the split's error rate
    page.wait_for_function(f"([r, n]) => [...document.querySelectorAll('.js-plotly-plot')].some("
                           f"p => p._fullLayout && p.data && p.data[0] && {ICICLE})",
                           arg=[f"{rate:.1f}%", f"{N_TEST:,}"], timeout=120_000)
    bars = slices_drawn(page)
    table = grid(page, "p adjusted")
    assert table["head"][:4] == ["definition", "n", "errors", "error rate"]
    # every slice, drawn as a bar and listed as a row, fails more often than the split
    # (the rows read are those the grid has drawn: all of them, up to about ten)
    assert table["count"] == len(bars) > 0 and len(table["rows"]) >= min(len(bars), 5), (table, bars)
    assert {r[0] for r in table["rows"]} <= set(bars), (table, bars)
    for definition, n, wrong, pct, *_ in table["rows"]:
        assert 0 < int(wrong) < int(n) < N_TEST and float(pct.rstrip("%")) > rate, definition
    clean(page)
    shot(page, "cohorts_demo.png", 2200)
    shutil.copy(ART / "cohorts_demo.png", ROOT / "docs" / "screenshots" / "cohorts.png")
    print(f"the tree and the slices drew {time.perf_counter() - t0:.1f} s after the page opened")
    open_tab(page, "Heat map")
    pick(page, "Across", "negations")
    pick(page, "Down", "true_stars")
    plot_drawn(page, HEATMAP)
    # one row per true rating: the heat map's rows are the five star values
    ys = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].find(p => p.data && "
                       "p.data[0] && p.data[0].type === 'heatmap').data[0].y")
    assert len(ys) == 5, ys
    clean(page)
    shot(page, "cohorts_heatmap.png", 1600)
    ctx.close()


def cohort_options(page, kind: str) -> list[tuple[str, int, str]]:
    """(option, its reviews, its query) of the cohorts of ``kind`` ("tree node" or "slice")
    that the "Cohort" box offers (typed to filter: its list is drawn as it scrolls)."""
    open_list(page, "Cohort")
    page.keyboard.type(f"{kind} · ")
    page.get_by_role("option").first.wait_for(timeout=30_000)
    found = []
    for option in page.get_by_role("option").all_inner_texts():
        m = re.fullmatch(rf"{kind} · ([\d,]+) reviews · \d+% errors · (.+)", option)
        assert m, option
        found.append((option, int(m[1].replace(",", "")), m[2]))
    page.keyboard.press("Escape")
    return found


def open_cohort(page, kind: str) -> tuple[int, str]:
    """Open the first cohort of ``kind`` ("tree node" or "slice") with a condition."""
    option, n, query = next(c for c in cohort_options(page, kind) if c[2] != "every review")
    pick(page, "Cohort", option)
    caption_with(page, f"{n:,} reviews, error rate")
    return n, query


def test_a_cohort_saved_as_a_slice_is_offered_by_error_analysis_and_behaviour(server, browser):
    ctx, page = new_page(browser, "slice")
    open_cohorts(page, server)
    n, query = open_cohort(page, "slice")
    box = page.get_by_role("textbox", name="Save as a slice named", exact=True)
    box.fill(SLICE_NAME)
    box.press("Enter")
    settle(page)
    page.get_by_role("button", name="Save as slice", exact=True).click()
    alert(page, "Success", "Saved the slice")
    clean(page)
    saved = json.loads((analysis_folder(server) / "slices.json").read_text(encoding="utf-8"))
    assert saved["slices"][SLICE_NAME]["where"] == query
    page.get_by_role("link", name="Error analysis").click()
    page.get_by_role("tab", name="Slices", exact=True).click(timeout=120_000)
    page.get_by_text("Saved slices", exact=True).wait_for(timeout=180_000)
    settle(page)
    assert SLICE_NAME in options(page, "Slice")
    pick(page, "Slice", SLICE_NAME)
    caption_with(page, f"{n:,} of {N_TEST:,} reviews")
    clean(page)
    # the behavioural tests' perturbations start from the slice's reviews, and run on them
    page.get_by_role("link", name="Behaviour").click()
    page.get_by_text("What can't the model do?").first.wait_for(timeout=120_000)
    settle(page)
    pick(page, "Real reviews", SLICE_NAME)
    caption_with(page, f"The perturbation tests start from the {n:,} reviews of {SLICE_NAME}")
    page.get_by_role("button", name=re.compile(r"^Run \d+ tests")).click()
    page.get_by_text(re.compile(r"scored cases, [\d,]+ failed")).first.wait_for(timeout=300_000)
    clean(page)
    ctx.close()


def test_a_cohort_is_tagged_at_once_with_its_author(server, browser):
    import pandas as pd

    from reviewbert.cohorts import conditions
    ctx, page = new_page(browser, "tag")
    open_cohorts(page, server)
    type_name(page, AUTHOR)
    n, query = open_cohort(page, "tree node")
    pick(page, "Tag every review of the cohort", COHORT_TAG)
    page.get_by_role("button", name=f"Tag {n:,} reviews", exact=True).click()
    said = alert(page, "Success", "Tagged")
    m = re.match(r"Tagged ([\d,]+) reviews .+ \(([\d,]+) had it already\)", said)
    assert m, said
    added, already = (int(g.replace(",", "")) for g in m.groups())
    assert added + already == n and added > 0
    clean(page)
    records = [r for r in store(server).tag_records() if r.tag == COHORT_TAG]
    assert len(records) == added and {r.author for r in records} == {AUTHOR}
    table = pd.read_parquet(analysis_folder(server) / "properties.parquet")
    cohort = set(table["key"][conditions.mask_of(conditions.parse_query(query), table)])
    assert {r.review_key for r in records} == cohort and len(cohort) == added
    ctx.close()


def test_the_triage_queue_is_worked_through(server, browser):
    ctx, page = new_page(browser, "triage")
    open_cohorts(page, server)
    type_name(page, TRIAGER)
    open_tab(page, "Triage")
    done = {}
    for i in range(3):
        text, key, true, stars = triage_one(page, f"{NOTE} ({i + 1})")
        assert key not in done, "the same review came up again"
        done[key] = (true, stars, f"{NOTE} ({i + 1})")
    s = store(server)
    assert set(s.reviewed()) == set(done)
    assert {k: (r.previous, r.stars) for k, r in s.relabels().items()} == {
        k: (t, st) for k, (t, st, _) in done.items()}
    assert {r.author for r in s.relabels().values()} == {TRIAGER}
    assert {k: s.note(k) for k in done} == {k: note for k, (_, _, note) in done.items()}
    tagged = {r.review_key for r in s.tag_records() if r.tag == QUEUE_TAG and r.author == TRIAGER}
    assert tagged == set(done)
    ctx.close()


def triage_one(page, note: str) -> tuple[str, str, int, int]:
    """The queue's head tagged, noted and relabelled one star away, then "Save and next":
    (its text, its key, its true stars, its new stars), once the next review shows."""
    from reviewbert.cohorts.keys import review_key
    main = page.locator("[data-testid=stMain]")
    text = main.locator("[data-testid=stText]").first.inner_text()
    m = re.search(r"True (\d)★ · predicted (\d)★", main.inner_text())
    assert m and text.strip(), main.inner_text()[:2000]
    true = int(m[1])
    stars = true + 1 if true < 5 else true - 1
    page.get_by_role("combobox", name="Tags", exact=True).click()
    page.get_by_role("option", name=QUEUE_TAG, exact=True).click()
    page.keyboard.press("Escape")
    page.get_by_role("textbox", name="Note", exact=True).fill(note)
    slider = page.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("ArrowRight" if stars > true else "ArrowLeft")
    page.get_by_role("button", name="Save and next").click()
    alert(page, "Success", f"Saved: relabelled {true}★ → {stars}★, tagged")
    settle(page)
    page.wait_for_function("t => { const e = document.querySelector('[data-testid=stMain] "
                           "[data-testid=stText]'); return e && e.innerText !== t; }", arg=text,
                           timeout=60_000)
    clean(page)
    return text, review_key(text), true, stars


def test_the_corrected_file_and_the_annotations_are_exported(server, browser):
    """The three relabels of the triage test applied in the corrected file (read back with
    the data reader), every other review as the split has it; the CSV of annotations holds
    the tags, notes and relabels of the store."""
    import pandas as pd

    from reviewbert.cohorts.keys import review_key
    from reviewbert.data import iter_reviews
    s = store(server)
    relabels = s.relabels()
    assert len(relabels) == 3, "run the whole file: the triage test relabels three reviews"
    ctx, page = new_page(browser, "export")
    open_cohorts(page, server)
    open_tab(page, "Fix and compare")
    page.get_by_role("button", name="Write the corrected file", exact=True).click()
    said = alert(page, "Success", "Wrote")
    clean(page)
    m = re.search(r"Wrote ([\d,]+) reviews to .+ \(.*?([\d,]+) dropped duplicates.*?"
                  r"([\d,]+) relabelled", said, re.S)
    assert m, said
    written, duplicates, relabelled = (int(g.replace(",", "")) for g in m.groups())
    assert written == N_TEST - duplicates and relabelled == 3, said
    path = server.root / "uploads" / "corrected.jsonl"
    rows = list(iter_reviews(path))
    assert len(rows) == written
    split = pd.read_parquet(analysis_folder(server) / "predictions.parquet")
    before = {review_key(t): int(s_) for t, s_ in zip(split["text"], split["stars"])}
    after = {review_key(t): stars for t, stars in rows}
    assert {k: after.get(k) for k in relabels} == {k: r.stars for k, r in relabels.items()}
    assert {k: v for k, v in after.items() if k not in relabels} == {
        k: before[k] for k in after if k not in relabels}
    with page.expect_download() as download:
        page.get_by_role("button", name="Download them as CSV", exact=True).click()
    assert download.value.suggested_filename == "annotations.csv"
    records: dict[str, set] = {}
    for r in csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))):
        records.setdefault(r["key"], set()).add((r["kind"], r["value"], r["author"]))
    for key, r in relabels.items():
        assert {("tag", QUEUE_TAG, TRIAGER), ("note", s.note(key), TRIAGER),
                ("relabel", f"{r.stars} (was {r.previous})", TRIAGER),
                ("mark", "reviewed", TRIAGER)} <= records[key], records[key]
    tagged = {r.review_key for r in s.tag_records() if r.tag == COHORT_TAG}
    assert tagged and {k for k, got in records.items() if ("tag", COHORT_TAG, AUTHOR) in got} == tagged
    clean(page)
    ctx.close()


def test_a_checkpoint_retrained_on_the_corrected_file_is_compared_on_the_cohorts(server, browser):
    """Trained on the corrected file by the CLI (1 epoch, 40 reviews a class, 64 tokens:
    its scores hardly matter), beside the demo; the Fix and compare tab evaluates it on
    the demo's test split and draws one row per cohort, the saved slice's included."""
    from toyreviews import cli
    corrected = server.root / "uploads" / "corrected.jsonl"
    assert corrected.is_file(), "run the whole file: the export test writes the corrected file"
    out = server.root / "ckpts" / "retrained"
    res = cli("train", "--data", corrected, "--out", out, "--epochs", 1, "--max-per-class", 40,
              "--max-length", 64, "--batch-size", 16, "--mixed-precision", "no", timeout=300)
    assert res.returncode == 0 and (out / "best" / "config.json").is_file(), res.stderr[-3000:]
    ctx, page = new_page(browser, "compare")
    page.goto(server.url + "/cohorts")
    page.get_by_text("Failing cohorts").first.wait_for(timeout=120_000)
    settle(page)
    # the sidebar opens on the newest run's best/: the retrained one; the demo is picked
    pick(page, "Checkpoint", "demo (5 labels)")
    open_cohorts(page, server, goto=False)
    open_tab(page, "Fix and compare")
    # (the box lists the run's last/ too, first: the one to compare is its best/)
    assert "retrained/best" in options(page, "Retrained checkpoint")
    pick(page, "Retrained checkpoint", "retrained/best")
    t0 = time.perf_counter()
    page.get_by_role("button", name=f"Evaluate retrained/best on these {N_TEST:,} reviews").click()
    table = grid(page, "verdict", timeout=300_000)
    print(f"the retrained checkpoint was evaluated and compared in {time.perf_counter() - t0:.1f} s")
    assert table["head"][:2] == ["cohort", "n"] and table["head"][-2:] == ["change", "verdict"]
    assert table["rows"][0][:2] == ["every review", str(N_TEST)], table["rows"][0]
    # a row per cohort: the split, the tree's leaves, the top slices, the saved slice last
    leaves, slices, (saved, n_saved) = expected_cohorts(server)
    assert table["count"] == 2 + leaves + slices, table
    page.locator("[data-testid=stDataFrame]").filter(
        has=page.locator("th", has_text=re.compile("^verdict$"))).hover()
    page.mouse.wheel(0, 5000)
    page.wait_for_function(f"() => ({GRID})('verdict').rows.some(r => r[0] === 'saved: ' + "
                           f"{json.dumps(SLICE_NAME)})", timeout=20_000)
    rows = table["rows"] + page.evaluate(GRID, "verdict")["rows"]
    assert [r[0] for r in rows if r[0].startswith("saved: ")][0] == f"saved: {SLICE_NAME}"
    assert {r[0]: r[1] for r in rows}[f"saved: {SLICE_NAME}"] == str(n_saved)
    for row in rows:
        assert 0 < int(row[1]) <= N_TEST and row[-1], row
        assert re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]", row[-2]), row
    clean(page)
    shot(page, "cohorts_compare.png", 1800)
    ctx.close()


def expected_cohorts(server) -> tuple[int, int, tuple[str, int]]:
    """(the tree's leaves, the top slices, (the saved slice's query, its reviews)), found
    here on the demo copy's cached properties as the page finds them."""
    import pandas as pd

    from reviewbert.cohorts import conditions, pipeline
    folder = analysis_folder(server)
    props = pd.read_parquet(folder / "properties.parquet")
    found = pipeline.find_cohorts(props, "wrong")
    where = json.loads((folder / "slices.json").read_text(encoding="utf-8"))["slices"][SLICE_NAME]["where"]
    return (len(found.leaves), len(found.slices),
            (where, int(conditions.mask_of(conditions.parse_query(where), props).sum())))
