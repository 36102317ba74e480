"""The Behaviour page's authoring tabs: a test written from a template, cases imported from
a CSV, results exported, and one suite compared on two checkpoints.

A test written here goes through the same parser as a suite file
(``reviewbert.behave.suite.parse_suite``), so the editor, the CSV import and a hand-written
YAML file accept and refuse exactly the same things, each with the same one-line message.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st
import yaml

from reviewbert.behave import cases as behave_cases
from reviewbert.behave import compare as behave_compare
from reviewbert.behave import figures as behave_figures
from reviewbert.behave import library, runner
from reviewbert.behave import suite as suites
from reviewbert.behave.cases_csv import read_cases_csv
from reviewbert.behave.perturb import PERTURBATIONS
from reviewbert.training.catalog import checkpoints_root, list_entries
from reviewbert.ui import behaviour, runtime, state
from reviewbert.viz.markdown import md_code

EXAMPLE_TEMPLATES = "I don't think this {product} is {pos_adj}.\nThis {product} is not {pos_adj} at all."
EXAMPLE_WORDS = ("product: phone, case, charger, screen protector, cable\n"
                 "pos_adj: great, good, excellent, worth it")
PREVIEW = 12
BY_TEMPLATE = "a second template (same words)"


# ------------------------------------------------------------------ write a test
def parse_words(text: str) -> dict[str, list[str]]:
    """``name: word, word`` per line → {name: [words]} (SuiteError for a bad line)."""
    out: dict[str, list[str]] = {}
    for i, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        name, colon, words = line.partition(":")
        if not colon or not name.strip():
            raise suites.SuiteError(f"word lists, line {i}: write 'name: word, word, …'")
        out[name.strip()] = [w.strip() for w in words.split(",") if w.strip()]
    return out


def editor_suite(form: dict, default: suites.Suite) -> suites.Suite:
    """The one-test suite the editor's fields describe, parsed as a suite file is. Word
    lists the user did not write come from the shipped suite."""
    words = parse_words(form["words"])
    templates = [t for t in form["templates"].splitlines() if t.strip()]
    test = {"name": form["name"].strip(), "capability": form["capability"].strip(),
            "type": form["type"], "description": form["description"].strip(),
            "templates": templates, "max_cases": int(form["max_cases"])}
    if form["type"] == "MFT":
        test["stars"] = list(form["stars"])
    else:
        if form["perturb"] == BY_TEMPLATE:
            test["perturbed"] = [t for t in form["perturbed"].splitlines() if t.strip()]
        else:
            test["perturbation"] = form["perturb"]
        if form["type"] == "DIR":
            test["direction"] = form["direction"]
        test["tolerance"] = float(form["tolerance"])
    lexicons = {k: list(v) for k, v in default.lexicons.items()}
    lexicons.update(words)
    used = {k: v for k, v in lexicons.items()
            if any("{" + k in t for t in templates + test.get("perturbed", []))}
    text = yaml.safe_dump({"name": "editor", "description": "", "seed": 0,
                           "lexicons": used, "tests": [test]}, allow_unicode=True)
    return suites.parse_suite(text, origin="the editor")


def _form_fields() -> dict:
    k = state.BEHAVE_EDITOR
    c1, c2, c3 = st.columns([2, 2, 1])
    form = {"name": c1.text_input("Test name", "Negation at a distance (mine)", key=k + "name"),
            "capability": c2.text_input("Capability", "Negation", key=k + "cap"),
            "type": c3.radio("Type", suites.TYPES, key=k + "type", horizontal=False)}
    form["description"] = st.text_input("What it checks (one sentence)", key=k + "desc")
    form["templates"] = st.text_area("Templates, one per line, with {placeholders}",
                                     EXAMPLE_TEMPLATES, key=k + "templates", height=100)
    form["words"] = st.text_area("Word lists, one per line: name: word, word, …", EXAMPLE_WORDS,
                                 key=k + "words", height=100,
                                 help="A placeholder with no list here uses the shipped suite's "
                                      "list of that name; {pos_adj2} draws a second, different "
                                      "word from pos_adj")
    form["max_cases"] = st.number_input("At most this many cases (a seeded sample)", 1, 2000,
                                        100, key=k + "max")
    if form["type"] == "MFT":
        form["stars"] = st.slider("Expected stars", 1, 5, (1, 2), key=k + "stars")
        return form
    names = [BY_TEMPLATE, *sorted(PERTURBATIONS)]
    form["perturb"] = st.selectbox("Perturbed by", names, key=k + "perturb")
    form["perturbed"] = (st.text_area("Perturbed templates, one per line, aligned with the "
                                      "templates", key=k + "perturbed", height=100)
                         if form["perturb"] == BY_TEMPLATE else "")
    if form["type"] == "DIR":
        form["direction"] = st.radio("The change should move the rating", ("up", "down"),
                                     key=k + "dir", horizontal=True)
    default_tol = 0.25 if form["type"] == "INV" else 0.1
    form["tolerance"] = st.number_input("Tolerance (stars of E★)", 0.0, 4.0, default_tol, 0.05,
                                        key=k + "tol_" + form["type"])
    return form


def write_a_test(predictor, info, reviews) -> None:
    st.caption("Write a test from a template: every combination of the word lists fills the "
               "placeholders (or a seeded sample of them). Preview its cases, run it on this "
               "checkpoint, and save it into one of your suites.")
    form = _form_fields()
    try:
        suite = editor_suite(form, suites.default_suite())
        cases = behave_cases.build_cases(suite, reviews)[suite.tests[0].name]
    except suites.SuiteError as e:
        behaviour.say_error(e)
        return
    st.markdown(f"**{len(cases):,} case{'s' if len(cases) != 1 else ''}.** The first "
                f"{min(PREVIEW, len(cases))}:")
    st.dataframe(pd.DataFrame([{"text": c.text, **({"original": c.original} if c.original else {})}
                               for c in cases[:PREVIEW]]), hide_index=True,
                 key=state.BEHAVE_EDITOR + "preview")
    k = state.BEHAVE_EDITOR
    c1, c2, c3 = st.columns([1, 2, 1])
    ran = runtime.button(c1, "Run this test", type="primary", key=k + "run")
    target = c2.text_input("Save into suite", "my-tests", key=k + "target",
                           label_visibility="collapsed")
    if runtime.button(c3, "Save into suite", key=k + "save"):
        _save(target, suite)
    if ran:
        remember(k + "result", suite,
                 behaviour.run_or_read(predictor, info, suite, reviews, key=k + "go",
                                       offer=False))
    result = recalled(k + "result", suite)
    if result is not None:
        behaviour.show_result(result, key_prefix="bh_ed", descriptions=_descriptions(suite))


def remember(key: str, suite: suites.Suite, result) -> None:
    """Keep a run's result for this session: selecting a test in its table reruns the page,
    and the result must still be there to open."""
    st.session_state[key] = (suites.suite_fingerprint(suite), result)


def recalled(key: str, suite: suites.Suite):
    """The result :func:`remember` kept, while the suite is still the one it was run on."""
    kept = st.session_state.get(key)
    return kept[1] if kept and kept[0] == suites.suite_fingerprint(suite) else None


def _save(target: str, suite: suites.Suite) -> None:
    test = suite.tests[0]
    try:
        library.add_test(target, test, dict(suite.lexicons))
    except (suites.SuiteError, OSError) as e:
        behaviour.say_error(f"Not saved: {e}")
        return
    st.success(f"Saved {md_code(test.name, 120)} into suite {md_code(target)} "
               f"({md_code(library.path_of(target), 200)}); pick it in the Overview tab.")


def _descriptions(suite) -> dict:
    return {t.name: t.description for t in suite.tests}


# ------------------------------------------------------------------ import / export
def import_export(predictor, info, reviews) -> None:
    st.subheader("Import cases from a CSV")
    st.caption("Columns `text,min_stars,max_stars`, and optionally `capability,name`: each row "
               "is a minimum-functionality case, grouped into one test per capability and name.")
    up = st.file_uploader("Cases (CSV)", type=["csv"], key=state.BEHAVE_IMPORT)
    if up is not None:
        _imported(predictor, info, reviews, up)
    st.subheader("Export results")
    suite = behaviour.pick_suite(state.BEHAVE_EXPORT_SUITE, "Results of the suite")
    if suite is None:
        return
    found = runner.lookup(info.path, suite, reviews, predictor.max_length)
    if found is None:
        st.info("This suite has not been run on this checkpoint yet: run it in the Overview "
                "tab first. `reviewbert report` adds the latest results to its HTML report.")
        return
    behaviour.export_buttons(found, "bh_export")


def _imported(predictor, info, reviews, up) -> None:
    try:
        tests = read_cases_csv(up.getvalue(), origin=up.name)
    except suites.SuiteError as e:
        behaviour.say_error(e)
        return
    name = up.name.rsplit(".", 1)[0][:60] or "imported"
    suite = suites.Suite(name=name, description=f"cases from {up.name}", seed=0, lexicons={},
                         tests=tuple(tests))
    st.markdown(f"**{sum(len(t.cases) for t in tests):,} cases in {len(tests)} tests** from "
                f"{md_code(up.name)}.")
    k = state.BEHAVE_IMPORT
    c1, c2, c3 = st.columns([1, 2, 1])
    ran = runtime.button(c1, "Run imported cases", type="primary", key=k + "_run")
    target = c2.text_input("Save into suite", "my-tests", key=k + "_target",
                           label_visibility="collapsed")
    if runtime.button(c3, "Save into suite", key=k + "_save"):
        try:
            for t in tests:
                library.add_test(target, t)
            st.success(f"Saved {len(tests)} tests into suite {md_code(target)}.")
        except (suites.SuiteError, OSError) as e:
            behaviour.say_error(f"Not saved: {e}")
    if ran:
        remember(k + "_result", suite,
                 behaviour.run_or_read(predictor, info, suite, reviews, key=k + "_go",
                                       offer=False))
    result = recalled(k + "_result", suite)
    if result is not None:
        behaviour.show_result(result, key_prefix="bh_imp", descriptions={})


# ------------------------------------------------------------------ compare
def compare_checkpoints(predictor, info, reviews) -> None:
    st.caption("One suite on two checkpoints, on the same cases (the perturbations start from "
               "this checkpoint's test split): each test's two fail rates and their difference "
               "with a 95 % interval (Newcombe). A regression is a difference whose whole "
               "interval is above zero.")
    suite = behaviour.pick_suite(state.BEHAVE_COMPARE_SUITE)
    others = [e for e in list_entries(checkpoints_root(), show_trials=True)
              if e.path != str(info.path)]
    if suite is None:
        return
    if not others:
        st.info("There is no other checkpoint to compare with: train one on the Train page "
                "(or put a checkpoint folder in checkpoints/).")
        return
    labels = {e.path: e.label for e in others}
    other = st.selectbox("Compare with", list(labels), format_func=labels.get,
                         key=state.BEHAVE_COMPARE_OTHER)
    kept_key = state.BEHAVE_COMPARE_TABLE + "_kept"
    if runtime.button(st, "Compare", type="primary", key=state.BEHAVE_COMPARE_RUN):
        entry = next(e for e in others if e.path == other)
        st.session_state[kept_key] = ((suites.suite_fingerprint(suite), other),
                                      _compare(predictor, info, entry, suite, reviews))
    kept = st.session_state.get(kept_key)
    if kept and kept[0] == (suites.suite_fingerprint(suite), other):
        _show_comparison(kept[1], labels[other])


def _compare(predictor, info, entry, suite, reviews) -> pd.DataFrame:
    """The suite on both checkpoints (each read from its cache or run), test by test."""
    first = behaviour.run_or_read(predictor, info, suite, reviews, key="unused_a", offer=False)
    second_predictor = runtime.load_predictor(entry.path, runtime.mtime(entry.info.path))
    second = behaviour.run_or_read(second_predictor, entry.info, suite, reviews,
                                   key="unused_b", offer=False)
    return behave_compare.compare(first, second)


def _show_comparison(table: pd.DataFrame, other_label: str) -> None:
    regressions = int(table["regression"].sum())
    st.markdown(f"**{regressions} regression{'s' if regressions != 1 else ''}** of "
                f"{len(table)} tests ({md_code(other_label)} against this checkpoint).")
    st.dataframe(_compare_view(table), hide_index=True, key=state.BEHAVE_COMPARE_TABLE)
    st.plotly_chart(behave_figures.compare_bars(table), key=state.BEHAVE_COMPARE_TABLE + "_fig")


def _compare_view(table: pd.DataFrame) -> pd.DataFrame:
    pct = lambda x: None if x != x else round(100 * float(x), 1)  # noqa: E731
    return pd.DataFrame({
        "": ["⚠ regression" if r else "" for r in table["regression"]],
        "capability": table["capability"], "type": table["type"], "test": table["name"],
        "this checkpoint %": table["fail_rate_a"].map(pct),
        "other %": table["fail_rate_b"].map(pct),
        "difference (points)": table["diff"].map(pct),
        "95 % interval": [f"{pct(lo)} to {pct(hi)}" for lo, hi in
                          zip(table["diff_low"], table["diff_high"])]})
