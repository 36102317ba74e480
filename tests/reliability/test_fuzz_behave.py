"""Behavioural suites under generated input (Hypothesis): suite YAML, the CSV import, templates.

Whatever a suite file, a CSV of cases or a template holds, reviewbert.behave either uses it or
refuses it with a one-line SuiteError that names the file, within a time limit: no other
exception, no hang, and nothing in a file is ever run (a YAML ``!!python`` tag is an error,
not a call). A suite that parses dumps back to YAML that parses equal, with the same
fingerprint, and builds its cases. The hostile-text corpus (tests/hostile_texts.py) goes
through every perturbation, a suite file and a run on the tiny model, and comes back as
the same characters.
"""
from __future__ import annotations

import csv
import io
import random

import pytest
import yaml
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from reviewbert.behave import perturb, runner
from reviewbert.behave.cases import build_cases, expand_template
from reviewbert.behave.cases_csv import read_cases_csv
from reviewbert.behave.suite import (
    TEST_KEYS,
    CaseSpec,
    SuiteError,
    TestSpec,
    dump_suite,
    parse_suite,
    placeholder_problem,
    suite_fingerprint,
    with_test,
)
from reviewbert.data.examples import Review

from fuzzing import time_limit, twins
from hostile_texts import CORPUS

ORIGIN = "fuzzed suite.yaml"


def note(what: str) -> None:
    """A Hypothesis event inside a property; nothing in a plain test."""
    try:
        event(what)
    except InvalidArgument:
        pass


def refused_in_one_line(fn, *args, origin: str):
    """``fn(*args)``, or None after a one-line SuiteError naming ``origin``; any other
    exception or a hang fails."""
    try:
        with time_limit(20, fn.__name__):
            return fn(*args)
    except SuiteError as e:
        note("refused")
        msg = str(e)
        assert msg.strip() and len(msg.splitlines()) == 1, f"not one line: {msg!r}"
        assert msg.startswith(origin), msg
        return None


# ----------------------------------------------------------------- suite files
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=True),
                    WORDS, st.sampled_from(["MFT", "INV", "DIR", "mft", "up", "down", "reviews",
                                            "typos", "swap", "lowercase", "add_sentence",
                                            "{adj}", "{adj1} {adj2}", "{nope}", "{noun} is {adj}."]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(WORDS, inner, max_size=3)), max_leaves=12)
TEST = st.dictionaries(st.sampled_from(TEST_KEYS + ("extra",)), VALUES, max_size=8)
SUITE = st.fixed_dictionaries(
    {"name": SCALARS, "tests": st.lists(TEST, max_size=4)},
    optional={"seed": SCALARS, "description": SCALARS,
              "lexicons": st.dictionaries(st.sampled_from(["adj", "noun", "adj1", "9x", "brand"]),
                                          st.one_of(st.lists(WORDS, max_size=4), VALUES),
                                          max_size=3)})


def _checked(suite) -> None:
    """A suite that parsed: dumped and parsed again it is equal, with the same fingerprint,
    and it builds its cases."""
    note("parsed")
    again = parse_suite(dump_suite(suite), ORIGIN)
    assert again == suite
    assert suite_fingerprint(again) == suite_fingerprint(suite)
    with time_limit(20, "build_cases"):
        built = build_cases(suite, [Review("My Samsung phone is great, 5 days in.", 5, "t")])
    assert set(built) == {t.name for t in suite.tests}


def _generated_suites_parse_or_fail_in_one_line(data):
    text = yaml.safe_dump(data, allow_unicode=True)
    suite = refused_in_one_line(parse_suite, text, ORIGIN, origin=ORIGIN)
    if suite is not None:
        _checked(suite)


def _any_text_parses_or_fails_in_one_line(text):
    suite = refused_in_one_line(parse_suite, text, ORIGIN, origin=ORIGIN)
    if suite is not None:
        _checked(suite)


VALID_TEST = st.fixed_dictionaries({
    "name": WORDS.filter(str.strip), "capability": st.sampled_from(["Vocabulary", "<b>x</b>", "é"]),
    "type": st.just("MFT"),
    "templates": st.lists(st.sampled_from(["{noun} is {adj}.", "{adj1} and {adj2} {noun}",
                                           "plain {{braces}} {noun}", "no placeholder"]),
                          min_size=1, max_size=3),
    "stars": st.sampled_from([[1, 2], [4, 5], 3]), "max_cases": st.integers(1, 30)})


def _valid_suites_round_trip(tests, adj, noun):
    data = {"name": "fuzz", "seed": 1, "lexicons": {"adj": adj, "noun": noun}, "tests": tests}
    suite = refused_in_one_line(parse_suite, yaml.safe_dump(data, allow_unicode=True), ORIGIN,
                                origin=ORIGIN)
    if suite is not None:
        _checked(suite)
        for t in suite.tests:
            assert len(build_cases(suite)[t.name]) <= t.max_cases


test_generated_suites_parse_or_fail_in_one_line, test_generated_suites_parse_or_fail_in_one_line_fuzz = \
    twins(_generated_suites_parse_or_fail_in_one_line, data=SUITE)
test_any_text_parses_or_fails_in_one_line, test_any_text_parses_or_fails_in_one_line_fuzz = twins(
    _any_text_parses_or_fails_in_one_line,
    text=st.one_of(st.text(max_size=300), st.lists(st.sampled_from(
        ["name: x\n", "tests:\n", "  - ", "{", "}", "[", "]", "&a ", "*a ", "<<: *a\n",
         "!!python/name:os.system ", "!!binary ", "? ", ": ", "'", '"', "\t", "\x00", "\ufeff",
         "tests: []\n", "9" * 5000]),
        max_size=20).map("".join)))
test_valid_suites_round_trip, test_valid_suites_round_trip_fuzz = twins(
    _valid_suites_round_trip, tests=st.lists(VALID_TEST, max_size=3),
    adj=st.lists(WORDS.filter(str.strip), min_size=1, max_size=5),
    noun=st.lists(WORDS.filter(str.strip), min_size=1, max_size=5))


@pytest.mark.parametrize("payload", [
    "!!python/object/apply:os.system ['touch {marker}']",
    "name: !!python/object/apply:subprocess.check_output [['touch', '{marker}']]\ntests: []",
    "tests: []\nname: !!python/object/new:os.system ['touch {marker}']",
    "name: x\ntests: []\nseed: !!python/name:os.system",
    "&a [*a]",
    "a: &a [*a, *a]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: [*d, *d]",
])
def test_nothing_in_a_suite_file_is_run(payload, tmp_path):
    marker = tmp_path / "ran"
    assert refused_in_one_line(parse_suite, payload.format(marker=marker), ORIGIN,
                               origin=ORIGIN) is None
    assert not marker.exists()


def test_aliases_cannot_expand_a_small_file_into_a_huge_suite():
    """A word aliased a million times: refused on the characters it would hold."""
    lines = ["name: x", "w0: &w0 '" + "x" * 1900 + "'"]
    lines += [f"w{i}: &w{i} [" + ", ".join([f"*w{i - 1}"] * 10) + "]" for i in range(1, 4)]
    lines += ["lexicons: {a: *w1, b: *w1, c: *w1, d: *w1}", "tests: []"]
    assert refused_in_one_line(parse_suite, "\n".join(lines), ORIGIN, origin=ORIGIN) is None


# -------------------------------------------------------------------- CSV import
CELLS = st.one_of(st.sampled_from(["1", "3", "5", "4.0", "0", "6", "x", "", " 2 ", "=1+1",
                                   "@SUM(A1)", "Imported", "Negation"]),
                  st.text(max_size=20))


def _csv_rows_import_or_fail_in_one_line(header, rows):
    buf = io.StringIO()
    csv.writer(buf).writerows([header] + rows)
    for data in (buf.getvalue(), buf.getvalue().encode("utf-8-sig")):
        tests = refused_in_one_line(read_cases_csv, data, "cases.csv", origin="cases.csv")
        if tests is None:
            continue
        note("imported")
        assert sum(len(t.cases) for t in tests) == sum(any(c.strip() for c in r) for r in rows)
        assert all(t.type == "MFT" and all(1 <= c.stars[0] <= c.stars[1] <= 5 for c in t.cases)
                   for t in tests)
        assert len({t.name for t in tests}) == len(tests)


def _valid_csv_rows_import_as_written(rows):
    buf = io.StringIO()
    csv.writer(buf).writerows([["text", "min_stars", "max_stars", "capability", "name"]] +
                              [[t, lo, lo + up, cap, name] for t, lo, up, cap, name in rows])
    tests = refused_in_one_line(read_cases_csv, buf.getvalue().encode(), "cases.csv",
                                origin="cases.csv")
    assert tests is not None
    note("imported")
    got = sorted((c.text, c.stars) for t in tests for c in t.cases)
    assert got == sorted((t, (lo, lo + up)) for t, lo, up, _, _ in rows)
    groups = {(cap.strip() or "Imported", name.strip() or "Imported cases") for *_, cap, name in rows}
    assert len(tests) == len(groups) and {t.capability for t in tests} == {g[0] for g in groups}


def _any_bytes_import_or_fail_in_one_line(data):
    refused_in_one_line(read_cases_csv, data, "cases.csv", origin="cases.csv")


test_csv_rows_import_or_fail_in_one_line, test_csv_rows_import_or_fail_in_one_line_fuzz = twins(
    _csv_rows_import_or_fail_in_one_line,
    header=st.one_of(st.just(["text", "min_stars", "max_stars"]),
                     st.just(["text", "min_stars", "max_stars", "capability", "name"]),
                     st.lists(st.sampled_from(["text", "min_stars", "max_stars", "capability",
                                               "name", "Text", "other"]), max_size=6)),
    rows=st.lists(st.lists(CELLS, min_size=2, max_size=6), max_size=8))
test_valid_csv_rows_import_as_written, test_valid_csv_rows_import_as_written_fuzz = twins(
    _valid_csv_rows_import_as_written,
    rows=st.lists(st.tuples(st.text(min_size=1, max_size=40).filter(str.strip), st.integers(1, 3),
                            st.integers(0, 2), st.sampled_from(["", "Negation", " <b>x</b> "]),
                            st.sampled_from(["", "Not bad", "=cmd"])), min_size=1, max_size=12))
test_any_bytes_import_or_fail_in_one_line, test_any_bytes_import_or_fail_in_one_line_fuzz = twins(
    _any_bytes_import_or_fail_in_one_line,
    data=st.one_of(st.binary(max_size=400), st.text(max_size=400),
                   st.text(max_size=200).map(lambda t: "text,min_stars,max_stars\n" + t)))


# --------------------------------------------------------------------- templates
def _templates_expand_within_bounds(template, adj, max_cases, seed):
    lexicons = {"adj": tuple(dict.fromkeys(adj)), "noun": ("phone", "case")}
    if placeholder_problem(template, lexicons) is not None:
        note("unresolvable")
        test = TestSpec("t", "c", "MFT", templates=(template,), stars=(1, 5))
        suite = parse_suite("name: s\nlexicons: {adj: [good], noun: [phone]}\ntests: []")
        assert refused_in_one_line(with_test, suite, test, origin="s") is None
        return
    with time_limit(20, "expand_template"):
        out = expand_template(template, lexicons, max_cases, random.Random(seed))
        again = expand_template(template, lexicons, max_cases, random.Random(seed))
    assert out == again and 1 <= len(out) <= max_cases
    assert all("{adj}" not in t and "{noun}" not in t for t in out)


test_templates_expand_within_bounds, test_templates_expand_within_bounds_fuzz = twins(
    _templates_expand_within_bounds,
    template=st.lists(st.sampled_from(["{adj}", "{adj1}", "{adj2}", "{noun}", "{nope}", "{",
                                       "}", "{{adj}}", "{1x}", " ", "word", "é"]),
                      max_size=8).map("".join),
    adj=st.lists(WORDS.filter(str.strip), min_size=1, max_size=6),
    max_cases=st.integers(1, 40), seed=st.integers(0, 2**32))


# ---------------------------------------------------------------- hostile texts
PARAMS = {"swap": {"lexicon": "brand"}, "add_sentence": {"sentences": "neutral"}}
LEXICONS = {"brand": ("Samsung", "Nokia", "PWN"), "neutral": ("I bought it in May.",)}


@pytest.mark.parametrize("hostile", CORPUS, ids=lambda h: h.name)
def test_hostile_texts_through_every_perturbation(hostile):
    for name, p in perturb.PERTURBATIONS.items():
        params = {**p.params, **PARAMS.get(name, {})}
        with time_limit(20, f"{name} on {hostile.name}"):
            out = [p.fn(hostile.text, random.Random(4), LEXICONS, **params) for _ in range(2)]
        assert out[0] == out[1], name
        assert out[0] is None or isinstance(out[0], str), name


def test_hostile_texts_as_cases_survive_a_suite_file_and_a_run(tiny_model_dir):
    from reviewbert.model.inference import Predictor
    short = [h.text for h in CORPUS if h.text.strip() and len(h.text) <= 2000]
    suite = parse_suite("name: hostile\nlexicons: {brand: [Samsung, Nokia]}\ntests:\n"
                        "  - {name: Case, capability: c, type: INV, source: reviews,"
                        " perturbation: add_url}\n"
                        "  - {name: Lower, capability: c, type: INV, source: reviews,"
                        " perturbation: lowercase, max_cases: 400}\n")
    for i, text in enumerate(short):
        suite = with_test(suite, TestSpec(f"<b>{i}</b>", "<script>x</script>", "MFT",
                                          cases=(CaseSpec(text, (1, 5)),)))
    again = parse_suite(dump_suite(suite), ORIGIN)
    assert [c.text for t in again.tests for c in t.cases] == short
    reviews = [Review(h.text, 3, "hostile") for h in CORPUS if h.text.strip()]
    result = runner.run_suite(Predictor.from_checkpoint(tiny_model_dir), again, reviews)
    assert [r["text"] for t in result.tests[2:] for r in t.rows] == short
    assert {r["original"] for r in result.test("Case").rows} <= {r.text for r in reviews}
    assert all(r["status"] == "pass" for t in result.tests[2:] for r in t.rows)
    rows = list(csv.DictReader(io.StringIO(runner.results_csv(result))))
    assert len(rows) == sum(t.n for t in result.tests)
