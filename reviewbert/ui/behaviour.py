"""The Behaviour page: what the model cannot do, tested CheckList's way (``reviewbert.behave``).

Four tabs, only the open one runs:

- **Overview**: a suite (the shipped one or the user's), run with a progress bar or read
  from its cache beside the checkpoint; the capability × {MFT, INV, DIR} matrix of fail
  rates; a test opens to its cases; a case opens on Predict, or in What if? with its
  perturbation already in the editor.
- **Write a test**: a template with ``{placeholders}`` and word lists, its cases
  previewed, run, and saved into a user suite (``reviewbert.behave.library``).
- **Import / export**: cases from a CSV; the results as CSV and JSON.
- **Compare checkpoints**: one suite on two checkpoints, test by test, regressions flagged.
"""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from reviewbert.analysis import slices
from reviewbert.analysis.predictions import lookup
from reviewbert.behave import cases as behave_cases
from reviewbert.behave import figures as behave_figures
from reviewbert.behave import library, runner
from reviewbert.behave import suite as suites
from reviewbert.cohorts import pipeline
from reviewbert.data.examples import builtin_examples
from reviewbert.ui import cohorts, runtime, state
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.markdown import md_code, md_escape

TABS = ("Overview", "Write a test", "Import / export", "Compare checkpoints")
STATUS_ICON = {"pass": "✓ pass", "fail": "✗ fail", "filtered": "– filtered"}


# ------------------------------------------------------------------ shared parts
def say_error(message) -> None:
    """A one-line error that may quote a suite's or a file's text: escaped, so the text is
    shown as typed (an image or a link in a test's name stays characters)."""
    st.error(md_escape(str(message)))


def split_reviews(info) -> tuple[list, str]:
    """(reviews, what they are) the perturbation tests start from: the checkpoint's test
    split, else the built-in examples, with a note saying why."""
    reviews, why = runtime.load_test_reviews(str(info.path), runtime.mtime(info.path))
    if reviews is not None:
        return list(reviews), "test split"
    st.info(f"This checkpoint's test split cannot be rebuilt here ({why}): the perturbation "
            "tests start from the built-in example reviews instead.")
    return builtin_examples(), "built-in examples"


def pick_slice(info, predictor, reviews: list, what: str) -> list:
    """The reviews the perturbation tests start from: the whole test split, or the reviews
    of a slice or cohort saved beside its predictions (Error analysis, the Cohorts page)."""
    if what != "test split":
        return reviews
    preds = lookup(info.path, reviews, info.scheme, predictor.max_length)
    saved = slices.load_saved(preds.folder) if preds is not None else {}
    if not saved:
        st.caption(f"The perturbation tests start from the {len(reviews):,} reviews of the test "
                   "split. A slice saved on Error analysis, or a cohort saved on the Cohorts "
                   "page, can narrow them.")
        return reviews
    whole = f"the whole test split ({len(reviews):,} reviews)"
    choice = st.selectbox("Real reviews", [whole, *saved], key=state.BEHAVE_SLICE,
                          help="The reviews the perturbation tests (INV, DIR) start from: the "
                               "test split, or a slice or cohort saved for it on Error analysis "
                               "or the Cohorts page.")
    if choice == whole:
        return reviews
    spec = saved[choice]
    try:
        table = (cohorts.properties_table(preds)
                 if spec.where or spec.label_issue is not None else None)
        kept = pipeline.reviews_in(reviews, preds, pipeline.slice_mask(spec, preds, table))
    except slices.SliceError as e:
        st.warning(f"{md_escape(str(e))}: the tests start from the whole test split.")
        return reviews
    st.caption(f"The perturbation tests start from the {len(kept):,} reviews of "
               f"{md_code(choice)}: {md_escape(spec.describe(info.scheme.names))}.")
    return kept


def pick_suite(key: str, label: str = "Suite") -> suites.Suite | None:
    """A selectbox of the shipped suite and the user's; the chosen one, read (None with
    its one-line error shown when it cannot be)."""
    entries = library.available()
    names = [e.name for e in entries]
    pending = st.session_state.pop(state.BEHAVE_PENDING_SUITE, None)
    if pending in names:
        st.session_state[key] = pending
    name = st.selectbox(label, names, key=key,
                        format_func=lambda n: "default (shipped)" if n == library.DEFAULT else n,
                        help=f"Your suites are YAML files in {library.folder()}")
    try:
        return library.load(name)
    except suites.SuiteError as e:
        say_error(e)
        return None


def run_or_read(predictor, info, suite, reviews, key: str, *, offer: bool = True):
    """The suite's result on this checkpoint: from the cache, or run here with a progress
    bar when the user asks (or at once with ``offer=False``). None until then."""
    found = runner.lookup(info.path, suite, reviews, predictor.max_length)
    if found is not None:
        return found
    n = behave_cases.count_cases(suite, reviews)
    slot = st.empty()
    if offer:
        with slot.container():
            st.markdown(f"{md_code(suite.name)} has {len(suite.tests)} tests and {n:,} cases; it "
                        "has not been run on this checkpoint yet.")
            if not runtime.button(st, f"Run {len(suite.tests)} tests ({n:,} cases)",
                                  type="primary", key=key):
                return None
    slot.empty()
    bar = StreamlitProgress(n, f"Running {md_escape(suite.name)}", unit="cases", where=slot)
    with runtime.review_threads(predictor):
        result = runner.run_suite(predictor, suite, reviews, checkpoint=info.path,
                                  progress=bar)
    bar.close()
    return result


def interval_text(t) -> str:
    """A test's Wilson 95 % interval in percent ("–" when no case was scored)."""
    if t.fail_rate != t.fail_rate:
        return "–"
    return f"{100 * t.ci_low:.0f}–{100 * t.ci_high:.0f} %"


def fail_rate_text(t) -> str:
    if t.fail_rate != t.fail_rate:
        return "–"
    return f"{100 * t.fail_rate:.1f} % [{interval_text(t)}]"


def tests_table(result) -> pd.DataFrame:
    return pd.DataFrame([{
        "capability": t.capability, "type": t.type, "test": t.name, "cases": t.n,
        "filtered": t.filtered, "failed": t.failed,
        "fail rate": None if t.fail_rate != t.fail_rate else round(100 * t.fail_rate, 1),
        "95 % interval": interval_text(t)}
        for t in result.tests])


# ------------------------------------------------------------------ overview
def overview(predictor, info, reviews) -> None:
    suite = pick_suite(state.BEHAVE_SUITE)
    if suite is None:
        return
    result = run_or_read(predictor, info, suite, reviews, key=state.BEHAVE_RUN)
    if result is None:
        return
    show_result(result, key_prefix="bh",
                descriptions={t.name: t.description for t in suite.tests})
    export_buttons(result, "bh_dl")


def show_result(result, key_prefix: str, descriptions: dict) -> None:
    """The matrix, the tests table and the chosen test's cases."""
    scored = [t for t in result.tests if t.n > t.filtered]
    failed = sum(t.failed for t in scored)
    total = sum(t.n - t.filtered for t in scored)
    where = "read from the cache" if result.cached else f"run in {result.seconds:.1f} s"
    st.markdown(f"**{len(result.tests)} tests, {total:,} scored cases, {failed:,} failed** "
                f"({where}). A test's fail rate is the share of its scored cases the model "
                "got wrong, with a Wilson 95 % interval.")
    st.plotly_chart(behave_figures.matrix(result), key=f"{key_prefix}_matrix")
    st.caption("MFT: a case fails when the predicted rating is outside its expected range. "
               "INV: a perturbation that should change nothing changes the top rating or moves "
               "the expected rating E★ by more than the tolerance. DIR: a change moves E★ "
               "against its direction by more than the tolerance; originals already at the "
               "end of the scale are filtered.")
    table = tests_table(result)
    event = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row",
                         key=f"{key_prefix}_tests",
                         column_config={"fail rate": st.column_config.ProgressColumn(
                             "fail rate", format="%.1f %%", min_value=0, max_value=100)})
    picked = (event.selection.rows if event is not None else []) or []
    if not picked:
        st.caption("Select a test to see its cases.")
        return
    t = result.tests[picked[0]]
    test_cases(t, key_prefix, descriptions.get(t.name, ""))


def test_cases(t, key_prefix: str, description: str = "") -> None:
    # names and descriptions come from suite files, CSV imports and a class's room: shown as
    # typed, never as Markdown
    st.subheader(f"{md_code(t.name, suites.MAX_NAME)} · {t.type} · "
                 f"{md_code(t.capability, suites.MAX_NAME)}")
    if description:
        st.text(description)
    st.markdown(f"{t.n:,} cases, {t.filtered:,} filtered, **{t.failed:,} failed** "
                f"({fail_rate_text(t)}).")
    only = st.toggle("Only failing cases", value=t.failed > 0, key=f"{key_prefix}_only")
    rows = [r for r in t.rows if r["status"] == "fail"] if only else list(t.rows)
    if not rows:
        st.info("No case of this test failed." if only else "This test has no cases.")
        return
    frame = pd.DataFrame([_case_row(t, r) for r in rows])
    event = st.dataframe(frame, hide_index=True, on_select="rerun", selection_mode="single-row",
                         key=f"{key_prefix}_cases_{_slug(t.name)}",
                         column_config={"text": st.column_config.TextColumn(width="large")})
    picked = (event.selection.rows if event is not None else []) or []
    if picked:
        open_case(rows[picked[0]], key_prefix)


def _case_row(t, r: dict) -> dict:
    row = {"status": STATUS_ICON.get(r["status"], r["status"]), "text": r["text"]}
    if t.type == "MFT":
        lo, hi = r["stars"]
        row["expected"] = f"{lo}–{hi} ★" if lo != hi else f"{lo} ★"
    else:
        row["original"] = r.get("original")
        row["original E★"] = _round(r.get("orig_e_stars"))
        row["ΔE★"] = _round(r.get("delta"))
    row["predicted"] = r["pred"]
    row["E★"] = _round(r.get("e_stars"))
    return row


def _round(x):
    return None if x is None else round(float(x), 2)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40]


def open_case(r: dict, key_prefix: str) -> None:
    """One case, and where it can be looked at with every view."""
    with st.container(border=True):
        st.markdown(f"**{STATUS_ICON.get(r['status'], r['status'])}** · predicted "
                    f"{r['pred']} (E★ {float(r['e_stars']):.2f})")
        st.text(r["text"])
        if r.get("original"):
            st.caption("Original:")
            st.text(r["original"])
        c1, c2 = st.columns(2)
        if runtime.button(c1, "Open on Predict", key=f"{key_prefix}_open"):
            state.send_review(r["text"], None, "behavioural test")
            st.switch_page(state.PREDICT_PAGE)
        base = r.get("original") or r["text"]
        if runtime.button(c2, "Open in What if?", key=f"{key_prefix}_whatif",
                          help="Predict opens on the original with this case's text in the "
                               "What if? editor, compared word by word"):
            state.send_review(base, None, "behavioural test", edit=r["text"])
            st.switch_page(state.PREDICT_PAGE)


# ------------------------------------------------------------------ export
def export_buttons(result, key_prefix: str) -> None:
    c1, c2 = st.columns(2)
    c1.download_button("Results JSON", json.dumps(runner.result_json(result), indent=1),
                       f"{result.suite_name}-results.json", "application/json",
                       key=f"{key_prefix}_json", on_click="ignore")
    c2.download_button("Every case (CSV)", runner.results_csv(result),
                       f"{result.suite_name}-cases.csv", "text/csv",
                       key=f"{key_prefix}_csv", on_click="ignore")

