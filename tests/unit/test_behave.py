"""The behavioural-test engine (reviewbert/behave/): suite files, cases, perturbations,
scoring rules, intervals, the CSV import, and runs on a tiny random BERT with their cache."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reviewbert.behave import perturb, runner, scoring
from reviewbert.behave.cases import Case, build_cases, count_cases, expand_template
from reviewbert.behave.cases_csv import read_cases_csv
from reviewbert.behave.compare import compare, newcombe
from reviewbert.behave.figures import matrix
from reviewbert.behave.suite import (
    CaseSpec,
    SuiteError,
    TestSpec,
    dump_suite,
    merge,
    parse_suite,
    suite_fingerprint,
    with_test,
)
from reviewbert.data.examples import Review
from reviewbert.model.labels import FIVE, THREE

from conftest import make_tiny_model

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
name: small
seed: 3
lexicons:
  product: [phone, case, charger, cable]
  pos_adj: [great, excellent, amazing, lovely]
  brand: [Samsung, Motorola, Nokia]
tests:
  - name: Praise
    capability: Vocabulary
    type: MFT
    templates: ["This {product} is {pos_adj}.", "The {product} is {pos_adj}!"]
    stars: [4, 5]
    max_cases: 10
  - name: Explicit
    capability: Vocabulary
    type: MFT
    cases:
      - {text: "Not bad at all.", stars: [3, 5]}
      - {text: "=1+1 stars", stars: [1, 1]}
  - name: Really
    capability: Intensifiers
    type: DIR
    direction: up
    templates: ["The {product} is {pos_adj}."]
    perturbed: ["The {product} is really {pos_adj}."]
  - name: Lower
    capability: Robustness
    type: INV
    source: reviews
    perturbation: lowercase
  - name: Upper
    capability: Robustness
    type: INV
    source: reviews
    review_stars: [1, 3]
    perturbation: uppercase
  - name: Brand
    capability: Fairness
    type: INV
    templates: ["My {brand} {product} broke."]
    perturbation: swap
    params: {lexicon: brand}
"""

REVIEWS = [Review("Great Phone, I love it.", 5, "t"), Review("Broke after 3 days.", 1, "t"),
           Review("It is OK, nothing special.", 3, "t"), Review("Battery died. Not happy.", 2, "t")]


def _probs(rows) -> np.ndarray:
    """Probabilities whose top class is each row's first entry (others share the rest)."""
    return np.asarray(rows, dtype=float)


def one_hot(k: int, c: int = 5, p: float = 0.9) -> list[float]:
    row = [(1 - p) / (c - 1)] * c
    row[k] = p
    return row


# ----------------------------------------------------------------- scoring rules
def test_star_values_and_expected_stars():
    assert scoring.star_values(FIVE).tolist() == [1, 2, 3, 4, 5]
    assert scoring.star_values(THREE).tolist() == [1.5, 3, 4.5]
    assert scoring.expected_stars([[0, 0, 0, 0.5, 0.5]], FIVE).tolist() == [4.5]
    assert scoring.expected_stars([0.5, 0.5, 0], THREE) == pytest.approx(2.25)


@pytest.mark.parametrize("k,n,low,high", [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634),
                                          (10, 10, 0.7225, 1.0), (1, 100, 0.0018, 0.0545)])
def test_wilson_matches_published_values(k, n, low, high):
    got = scoring.wilson(k, n)
    assert got[0] == pytest.approx(low, abs=1e-4) and got[1] == pytest.approx(high, abs=1e-4)


def test_wilson_of_nothing_is_the_whole_range():
    assert scoring.wilson(0, 0) == (0.0, 1.0)


def test_mft_passes_when_the_predicted_stars_lie_in_the_range():
    probs = _probs([one_hot(3), one_hot(4), one_hot(2), one_hot(0)])
    assert scoring.mft_status(probs, [(4, 5), (4, 5), (4, 5), (1, 1)], FIVE) == \
        ["pass", "pass", "fail", "pass"]


def test_mft_passes_for_one_prediction():
    assert scoring.mft_passes(4, (4, 5), FIVE) and not scoring.mft_passes(2, (4, 5), FIVE)
    assert scoring.mft_passes(0, (2, 2), THREE) and not scoring.mft_passes(1, (4, 5), THREE)


def test_mft_on_three_labels_passes_when_the_class_overlaps_the_range():
    neg, neu, pos = (one_hot(k, 3) for k in range(3))
    got = scoring.mft_status(_probs([neg, neg, neu, pos, pos]),
                             [(2, 3), (3, 5), (3, 3), (4, 4), (1, 3)], THREE)
    assert got == ["pass", "fail", "pass", "pass", "fail"]


def test_inv_fails_on_a_changed_class_or_a_move_beyond_the_tolerance():
    base = [0.0, 0.0, 0.1, 0.8, 0.1]                   # E★ 4.0, top 4 stars
    small = [0.0, 0.0, 0.2, 0.7, 0.1]                  # E★ 3.9: same class, |Δ| 0.1
    large = [0.0, 0.1, 0.2, 0.6, 0.1]                  # E★ 3.7: same class, |Δ| 0.3
    flipped = [0.0, 0.0, 0.0, 0.45, 0.55]              # E★ 4.55 and 5 stars on top
    orig = _probs([base, base, base])
    got = scoring.inv_status(orig, _probs([small, large, flipped]), FIVE, 0.25)
    assert got == ["pass", "fail", "fail"]
    assert scoring.inv_status(orig[:2], _probs([small, large]), FIVE, 0.35) == ["pass", "pass"]
    # a flip fails whatever the tolerance
    assert scoring.inv_status(orig[:1], _probs([flipped]), FIVE, 4.0) == ["fail"]


def test_dir_filters_originals_at_the_edge_and_fails_against_the_direction():
    top = one_hot(4)
    mid = [0.0, 0.0, 0.2, 0.6, 0.2]                    # E★ 4.0
    down_a_bit = [0.0, 0.0, 0.22, 0.6, 0.18]           # E★ 3.96: within 0.1
    down_more = [0.0, 0.1, 0.2, 0.6, 0.1]              # E★ 3.7
    orig = _probs([top, mid, mid, mid])
    new = _probs([top, down_a_bit, down_more, top])
    assert scoring.dir_status(orig, new, FIVE, 0.1, "up") == ["filtered", "pass", "fail", "pass"]
    assert scoring.dir_status(orig, new, FIVE, 0.35, "up")[2] == "pass"
    bottom = one_hot(0)
    assert scoring.dir_status(_probs([bottom, mid, mid]), _probs([bottom, top, down_more]),
                              FIVE, 0.1, "down") == ["filtered", "fail", "pass"]
    # three labels: "positive" is the top edge
    assert scoring.dir_status(_probs([one_hot(2, 3), one_hot(1, 3)]),
                              _probs([one_hot(2, 3), one_hot(2, 3)]), THREE, 0.1, "up") == \
        ["filtered", "pass"]


def _cases(n: int, original: bool = True, stars=None) -> list[Case]:
    return [Case("t", i, f"text {i}", f"orig {i}" if original else None, stars, None)
            for i in range(n)]


def test_a_tests_counts_rate_interval_and_examples():
    spec = TestSpec("t", "Cap", "DIR", templates=("x",), perturbed=("y",), direction="up")
    orig = _probs([one_hot(4)] * 2 + [one_hot(2)] * 8)
    new = _probs([one_hot(4)] * 2 + [one_hot(0)] * 5 + [one_hot(3)] * 3)
    r = scoring.score_test(spec, _cases(10), new, orig, FIVE)
    assert (r.n, r.filtered, r.failed) == (10, 2, 5)
    assert r.fail_rate == pytest.approx(5 / 8)
    assert (r.ci_low, r.ci_high) == pytest.approx(scoring.wilson(5, 8))
    assert len(r.examples) == 3 and all(e["status"] == "fail" for e in r.examples)
    assert len(r.rows) == 10 and r.rows[2]["delta"] == pytest.approx(r.rows[2]["e_stars"] -
                                                                     r.rows[2]["orig_e_stars"])
    assert r.rows[0]["status"] == "filtered" and r.rows[0]["pred_stars"] == [5, 5]
    all_filtered = scoring.score_test(spec, _cases(2), new[:2], orig[:2], FIVE)
    assert np.isnan(all_filtered.fail_rate) and (all_filtered.ci_low, all_filtered.ci_high) == (0, 1)


def test_the_default_tolerances():
    assert TestSpec("a", "c", "INV").tol == 0.25 and TestSpec("a", "c", "DIR").tol == 0.1
    assert TestSpec("a", "c", "INV", tolerance=0.5).tol == 0.5


# ----------------------------------------------------------- templates, cases
def test_the_same_placeholder_gets_the_same_word_and_numbered_ones_differ():
    lex = {"adj": ("good", "bad", "fine"), "noun": ("phone", "case")}
    out = expand_template("{adj} {noun}, so {adj}: {adj1} or {adj2}", lex, 1000, random.Random(0))
    assert len(out) == 3 * 2 * 2 * 1   # adj, noun, then adj1 ≠ adj2 ≠ adj (three words)
    for text in out:
        first, rest = text.split(", so ")
        again, pair = rest.split(": ")
        a1, a2 = pair.split(" or ")
        assert first.split()[0] == again and len({again, a1, a2}) == 3


def test_expansion_samples_max_cases_and_the_sample_is_stable():
    lex = {"a": tuple(f"a{i}" for i in range(30)), "b": tuple(f"b{i}" for i in range(30))}
    one = expand_template("{a} {b}", lex, 25, random.Random(5))
    assert len(one) == len(set(one)) == 25
    assert one == expand_template("{a} {b}", lex, 25, random.Random(5))
    assert one != expand_template("{a} {b}", lex, 25, random.Random(6))
    # a space too large to list is sampled from its range, distinct words still distinct
    big = {"w": tuple(f"w{i}" for i in range(2000))}
    got = expand_template("{w1} {w2} {w3}", big, 50, random.Random(1))
    assert len(got) == 50 and all(len(set(t.split())) == 3 for t in got)


def test_a_suites_cases_are_the_same_in_another_process():
    """No salted hash(): the sample and every draw are the same whatever PYTHONHASHSEED."""
    code = ("import json, sys\nfrom reviewbert.behave.suite import parse_suite\n"
            "from reviewbert.behave.cases import build_cases\nfrom reviewbert.data.examples import Review\n"
            "s = parse_suite(sys.stdin.read())\n"
            "revs = [Review('Great Phone, I love it.', 5, 't'), Review('Broke after 3 days.', 1, 't')]\n"
            "print(json.dumps({k: [c.text for c in v] for k, v in build_cases(s, revs).items()}))")
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        p = subprocess.run([sys.executable, "-c", code], input=SUITE, capture_output=True,
                           text=True, cwd=ROOT, env=env, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        outs.append(p.stdout)
    assert outs[0] == outs[1]
    here = {k: [c.text for c in v] for k, v in build_cases(parse_suite(SUITE), REVIEWS[:2]).items()}
    assert json.loads(outs[0]) == here


def test_build_cases_per_type():
    suite = parse_suite(SUITE)
    got = build_cases(suite, REVIEWS)
    assert list(got) == [t.name for t in suite.tests]
    assert len(got["Praise"]) == 10 and all(c.stars == (4, 5) and c.original is None
                                            for c in got["Praise"])
    assert [c.text for c in got["Explicit"]] == ["Not bad at all.", "=1+1 stars"]
    assert len(got["Really"]) == 16
    for c in got["Really"]:
        assert c.text == c.original.replace(" is ", " is really ")
    assert {c.original for c in got["Lower"]} == {r.text for r in REVIEWS}
    assert all(c.text == c.original.lower() and c.true_stars for c in got["Lower"])
    assert {c.true_stars for c in got["Upper"]} == {1, 2, 3}
    assert all(c.text != c.original for c in got["Brand"]) and len(got["Brand"]) == 12
    assert [c.index for c in got["Brand"]] == list(range(12))
    assert count_cases(suite, REVIEWS) == sum(map(len, got.values()))
    assert build_cases(suite, REVIEWS) == got
    assert build_cases(suite, REVIEWS, seed=99)["Praise"] != got["Praise"]


# ------------------------------------------------------------------ perturbations
TEXTS = {"typos": "The battery life is wonderful and the screen looks gorgeous.",
         "swap": "My Samsung phone and my samsung tablet.",
         "change_number": "It broke after 3 days, 5 stars anyway.",
         "contract": "I do not like it, it is not what I wanted.",
         "expand": "I don't like it, it's not what I wanted."}
LEXICONS = {"brand": ("Samsung", "Motorola", "Nokia", "Apple"), "neutral": ("I bought it.", "Ok.")}
PARAMS = {"swap": {"lexicon": "brand"}, "add_sentence": {"sentences": "neutral"}}


@pytest.mark.parametrize("name", sorted(perturb.PERTURBATIONS))
def test_every_perturbation_is_deterministic_for_a_seed(name):
    p = perturb.PERTURBATIONS[name]
    text = TEXTS.get(name, "Great phone, it works well. Fast delivery!")
    params = {**p.params, **PARAMS.get(name, {})}
    state = random.getstate()
    np_state = np.random.get_state()[1].copy()
    outs = [p.fn(text, random.Random(s), LEXICONS, **params) for s in (11, 11, 12, 13, 14)]
    assert outs[0] is not None and outs[0] != text
    assert outs[0] == outs[1]
    assert random.getstate() == state                       # the global RNGs are left alone
    assert (np.random.get_state()[1] == np_state).all()
    if name in ("typos", "add_url", "add_order_number", "add_punctuation", "swap"):
        assert len(set(outs)) > 1                           # the seed matters


def test_the_word_perturbations():
    rng = random.Random(0)
    assert perturb.contract("I do not think It is bad. DO NOT buy.", rng, {}) == \
        "I don't think It's bad. DON'T buy."
    assert perturb.expand("I can't and won’t, it's", rng, {}) == "I cannot and will not, it is"
    assert perturb.contract("Nothing to contract.", rng, {}) is None
    out = perturb.swap("The samsung and SAMSUNG phones; Samsungs stay.", rng,
                       {"brand": ("Samsung", "Nokia")}, lexicon="brand")
    assert out == "The nokia and NOKIA phones; Samsungs stay."
    longest = perturb.swap("I live in New York City.", rng,
                           {"place": ("New York", "New York City", "Paris")}, lexicon="place")
    assert longest in ("I live in New York.", "I live in Paris.")     # never "Paris City."
    assert perturb.swap("No brand here.", rng, LEXICONS, lexicon="brand") is None
    for _ in range(20):
        changed = perturb.change_number("Rated 5 stars, 4/5, 10 out of 10, arrived in 3 days.",
                                        random.Random(_), {})
        assert changed.startswith("Rated 5 stars, 4/5, 10 out of 10, arrived in ")
        assert not changed.endswith(" 3 days.")
    assert perturb.change_number("Code 1234567890123 only.", rng, {}) is None
    assert perturb.strip_punctuation("Great!!!", rng, {}) == "Great"
    assert perturb.add_sentence("Fine", random.Random(1), LEXICONS, sentences="neutral",
                                where="end").startswith("Fine. ")


# -------------------------------------------------------------------- suite files
BAD_SUITES = [
    ("- just a list", "a mapping"),
    ("name: x\ntests: []\nextra: 1", "unknown key 'extra'"),
    ("!!python/object/apply:os.system ['echo pwned']", "line 1"),
    ("name: x\ntests:\n  - {name: a, capability: c, type: MFT, templates: ['{nope}'], stars: [4, 5]}",
     "test 'a': templates item 1: placeholder {nope} names no lexicon"),
    ("name: x\ntests:\n  - {name: a, capability: c, type: MFT, cases: [{text: t, stars: [5, 4]}]}",
     "test 'a': case 1 stars"),
    ("name: x\ntests:\n  - {name: a, capability: c, type: MFT, cases: [{text: t, stars: [0, 4]}]}",
     "whole stars 1–5"),
    ("name: x\ntests:\n  - {name: a, capability: c, type: MFT, cases: [{text: t, stars: 3}]}\n"
     "  - {name: a, capability: c, type: MFT, cases: [{text: t, stars: 3}]}", "two tests are called 'a'"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: INV, source: reviews, perturbation: typo}",
     "test 'T': unknown perturbation 'typo'"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: DIR, source: reviews, perturbation: typos}",
     "direction is missing"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: INV, source: reviews}", "needs either"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: MFT, templates: [hi]}", "stars is missing"),
    ("name: x\nlexicons: {a: [x]}\ntests:\n  - {name: T, capability: c, type: MFT, "
     "templates: ['{a1} {a2}'], stars: 3}", "lexicon 'a', which has 1"),
    ("name: x\nlexicons: {a: [yes, no]}\ntests: []", "quote yes"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: INV, source: reviews, perturbation: swap,"
     " params: {lexicon: brand}}", "params of swap: lexicon names no lexicon"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: MFT, max_cases: 0, cases: []}",
     "max_cases must be a whole number"),
    ("a: [", "line 1"),
    ("name: x\nlexicons: {a: [" + ", ".join(["w"] * 2001) + "]}\ntests: []", "more than 2,000 items"),
    ("name: x\ntests:\n  - {name: T, capability: c, type: MFT, cases: [{text: '" + "x" * 2001 +
     "', stars: 3}]}", "longer than 2,000"),
]


@pytest.mark.parametrize("text,expected", BAD_SUITES)
def test_a_bad_suite_is_one_line_naming_the_file_test_and_field(text, expected):
    with pytest.raises(SuiteError) as e:
        parse_suite(text, "my suite.yaml")
    msg = str(e.value)
    assert msg.startswith("my suite.yaml") and expected in msg and "\n" not in msg, msg


def test_limits_on_the_file_and_the_number_of_tests():
    with pytest.raises(SuiteError, match="over 1,000,000 bytes"):
        parse_suite("#" * 1_000_001)
    tests = "".join(f"  - {{name: t{i}, capability: c, type: MFT, cases: [{{text: x, stars: 3}}]}}\n"
                    for i in range(501))
    with pytest.raises(SuiteError, match="more than 500 tests"):
        parse_suite("name: x\ntests:\n" + tests)


def test_a_test_name_with_a_newline_still_gives_one_line():
    with pytest.raises(SuiteError) as e:
        parse_suite('name: x\ntests:\n  - {name: "a\\nb\\u2028c", capability: c, type: XYZ}')
    assert len(str(e.value).splitlines()) == 1 and "'a\\nb\\u2028c'" in str(e.value)


def test_dump_parses_back_equal_and_the_fingerprint_is_stable():
    suite = parse_suite(SUITE)
    again = parse_suite(dump_suite(suite))
    assert again == suite
    assert suite_fingerprint(again) == suite_fingerprint(suite)
    assert len(suite_fingerprint(suite)) == 64
    changed = parse_suite(SUITE.replace("max_cases: 10", "max_cases: 11"))
    assert suite_fingerprint(changed) != suite_fingerprint(suite)


def test_with_test_replaces_or_appends_and_merge_checks_the_whole():
    suite = parse_suite(SUITE)
    new = TestSpec("Praise", "Vocabulary", "MFT", cases=(CaseSpec("Love it", (5, 5)),))
    replaced = with_test(suite, new)
    assert [t.name for t in replaced.tests] == [t.name for t in suite.tests]
    assert replaced.test("Praise").cases == new.cases
    added = with_test(suite, TestSpec("New", "Other", "MFT", cases=(CaseSpec("Meh", (3, 3)),)))
    assert added.tests[-1].name == "New" and len(added.tests) == len(suite.tests) + 1
    assert [t.name for t in merge(suite, new, added.tests[-1]).tests][-1] == "New"
    with pytest.raises(SuiteError, match="names no lexicon"):
        with_test(suite, TestSpec("Bad", "c", "MFT", templates=("{zzz}",), stars=(1, 2)))


# ------------------------------------------------------------------- CSV import
def test_csv_import_groups_rows_into_mft_tests():
    data = ("\ufefftext,min_stars,max_stars,capability,name\r\n"
            '"Not bad,\r\nreally",3,5,Negation,Not bad\r\n'
            "=cmd|' /C calc'!A0,1,2,,\r\n"
            "\r\n"
            "Works fine,4.0,5,Negation,Not bad\r\n").encode()
    tests = read_cases_csv(data)
    assert [(t.name, t.capability, t.type) for t in tests] == \
        [("Not bad", "Negation", "MFT"), ("Imported cases", "Imported", "MFT")]
    assert tests[0].cases == (CaseSpec("Not bad,\r\nreally", (3, 5)), CaseSpec("Works fine", (4, 5)))
    assert tests[1].cases[0].text == "=cmd|' /C calc'!A0"
    assert merge(parse_suite(SUITE), *tests).tests[-1].name == "Imported cases"


@pytest.mark.parametrize("data,expected", [
    (b"", "cases.csv: the file is empty"),
    (b"text,min_stars\nhi,3\n", "cases.csv line 1: missing column max_stars"),
    (b"text,min_stars,max_stars,colour\nhi,3,4,red\n", "line 1: unknown column 'colour'"),
    (b"text,min_stars,max_stars\n", "no cases"),
    (b"text,min_stars,max_stars\nok,3,4\n\"two\nlines\",3,4\nbad,x,4\n",
     "cases.csv line 5: min_stars must be a whole number 1–5, got 'x'"),
    (b"text,min_stars,max_stars\nok,3,6\n", "line 2: max_stars must be a whole number 1–5, got '6'"),
    (b"text,min_stars,max_stars\nok,4,3\n", "line 2: min_stars 4 is above max_stars 3"),
    (b"text,min_stars,max_stars\n,4,5\n", "line 2: text is empty"),
    (b"text,min_stars,max_stars\nok,4\n", "line 2: expected 3 fields, got 2"),
    (b"text,min_stars,max_stars\n\xff\xfe,4,5\n", "not UTF-8"),
])
def test_csv_import_errors_name_the_line(data, expected):
    with pytest.raises(SuiteError) as e:
        read_cases_csv(data)
    assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_csv_import_limits():
    rows = "text,min_stars,max_stars\n" + "ok,3,4\n" * 10_001
    with pytest.raises(SuiteError, match="more than 10,000 rows"):
        read_cases_csv(rows)
    assert len(read_cases_csv("text,min_stars,max_stars\n" + "ok,3,4\n" * 10_000)[0].cases) == 10_000
    with pytest.raises(SuiteError, match="over 5,000,000 bytes"):
        read_cases_csv(b"text,min_stars,max_stars\n" + b"x" * 5_000_000)


# ------------------------------------------------------------------ comparison
def test_newcombe_matches_the_published_example():
    """Newcombe (1998), example (a) of method 10: 56/70 against 48/80."""
    d, low, high = newcombe(48, 80, 56, 70)
    assert d == pytest.approx(0.2) and low == pytest.approx(0.0524, abs=1e-4) \
        and high == pytest.approx(0.3339, abs=1e-4)


def _result(*tests) -> runner.SuiteResult:
    return runner.SuiteResult("s", "f", None, list(FIVE.names), list(tests), 0.0, "")


def _test_result(name, failed, n, capability="Cap", type_="MFT"):
    rows = [{"status": "fail" if i < failed else "pass"} for i in range(n)]
    return scoring.summarize(name, capability, type_, rows)


def test_compare_flags_a_significant_regression_only():
    a = _result(_test_result("x", 5, 100), _test_result("y", 10, 100), _test_result("only a", 1, 5))
    b = _result(_test_result("x", 30, 100), _test_result("y", 12, 100), _test_result("only b", 1, 5))
    df = compare(a, b)
    assert list(df["name"]) == ["x", "y", "only a", "only b"]
    assert df["regression"].tolist() == [True, False, False, False]
    assert df.loc[0, "diff"] == pytest.approx(0.25) and df.loc[0, "diff_low"] > 0
    assert np.isnan(df.loc[2, "fail_rate_b"]) and np.isnan(df.loc[3, "diff"])


def test_the_matrix_keeps_hostile_names_as_text():
    r = _result(_test_result("t <script>", 3, 10, "<b>Bold</b>", "MFT"),
                _test_result("u", 1, 4, "<b>Bold</b>", "INV"), _test_result("v", 0, 5, "Plain", "MFT"))
    fig = matrix(r)
    heat = fig.data[0]
    assert list(heat.y) == ["&lt;b&gt;Bold&lt;/b&gt;", "Plain"]
    assert list(heat.text[0]) == ["30 % (n=10)", "25 % (n=4)", ""]
    assert "&lt;script&gt;" in heat.customdata[0][0]
    assert heat.z[1][1] is None


# ------------------------------------------------------------ runs on the tiny model
@pytest.fixture()
def tiny_copy(tiny_model_dir, tmp_path) -> Path:
    """The tiny model in a folder of this test's own (its cache starts empty)."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "tiny"))


@pytest.fixture()
def predictor(tiny_copy):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(tiny_copy)


class Spy:
    """Counts what reaches the model, and the progress told."""

    def __init__(self, predictor):
        self.calls, self.texts, self.done, self.resumed_n = 0, [], 0, 0
        encode, batch = predictor.encode_rows, predictor.batch_logits

        def encode_rows(texts):
            self.texts += list(texts)
            return encode(texts)

        def batch_logits(rows, **kw):
            self.calls += 1
            return batch(rows, **kw)
        predictor.encode_rows, predictor.batch_logits = encode_rows, batch_logits

    def __call__(self, n):
        self.done += n

    def resumed(self, n):
        self.resumed_n += n


def test_a_run_scores_each_distinct_text_once(predictor, tiny_copy):
    suite = parse_suite(SUITE)
    spy = Spy(predictor)
    result = runner.run_suite(predictor, suite, REVIEWS, progress=spy)
    assert spy.calls == 1 and len(spy.texts) == len(set(spy.texts))
    cases = build_cases(suite, REVIEWS)
    wanted = {c.text for v in cases.values() for c in v} | \
        {c.original for v in cases.values() for c in v if c.original}
    assert set(spy.texts) == wanted
    # the originals of Lower and Upper are the same reviews: read once for both tests
    assert len(spy.texts) < sum(len(v) + sum(c.original is not None for c in v)
                                for v in cases.values())
    assert spy.done == count_cases(suite, REVIEWS)
    assert [t.name for t in result.tests] == [t.name for t in suite.tests]
    assert result.labels == list(FIVE.names) and not result.cached and result.key == ""
    for t, spec in zip(result.tests, suite.tests):
        assert t.n == len(cases[spec.name]) == len(t.rows)
        assert t.failed + t.filtered <= t.n and t.type == spec.type
    assert not (tiny_copy / ".behave").exists()     # no checkpoint given: nothing cached
    # the same texts again: every row comes from the predictor's row memo, told as resumed
    again = Spy(predictor)
    runner.run_suite(predictor, suite, REVIEWS, progress=again)
    assert (again.done, again.resumed_n) == (0, count_cases(suite, REVIEWS))


def test_the_cache_returns_the_same_result_without_the_model(predictor, tiny_copy, monkeypatch):
    suite = parse_suite(SUITE)
    first = runner.run_suite(predictor, suite, REVIEWS, checkpoint=tiny_copy)
    assert first.key and list((tiny_copy / ".behave").glob("*.json"))

    def no_model(*a, **k):
        raise AssertionError("the model was called on a cache hit")
    monkeypatch.setattr(predictor, "batch_logits", no_model)
    again = runner.run_suite(predictor, suite, REVIEWS, checkpoint=tiny_copy)
    assert again.cached and again.key == first.key
    assert runner.result_json(again, rows=True) == {**runner.result_json(first, rows=True),
                                                    "cached": True}
    assert again.test("Praise").examples == first.test("Praise").examples
    looked = runner.lookup(tiny_copy, suite, REVIEWS, predictor.max_length)
    assert looked is not None and looked.cached
    # other reviews, for a suite that reads reviews: another key
    assert runner.lookup(tiny_copy, suite, REVIEWS[:3], predictor.max_length) is None


def test_other_weights_miss_the_cache(predictor, tiny_copy, tmp_path):
    suite = parse_suite(SUITE)
    runner.run_suite(predictor, suite, REVIEWS, checkpoint=tiny_copy)
    assert runner.lookup(tiny_copy, suite, REVIEWS, predictor.max_length) is not None
    other = make_tiny_model(tmp_path / "other", seed=1)
    shutil.copy(other / "model.safetensors", tiny_copy / "model.safetensors")
    assert runner.lookup(tiny_copy, suite, REVIEWS, predictor.max_length) is None


def test_a_corrupt_cache_file_is_computed_again(predictor, tiny_copy):
    suite = parse_suite(SUITE)
    first = runner.run_suite(predictor, suite, REVIEWS, checkpoint=tiny_copy)
    path = tiny_copy / ".behave" / f"{first.key}.json"
    for junk in ("{not json", json.dumps({"format": runner.FORMAT, "key": first.key, "tests": 7}),
                 "[]", "\x00\x01"):
        path.write_text(junk, encoding="utf-8")
        assert runner.lookup(tiny_copy, suite, REVIEWS, predictor.max_length) is None
        again = runner.run_suite(predictor, suite, REVIEWS, checkpoint=tiny_copy)
        assert not again.cached and again.key == first.key
        assert [t.failed for t in again.tests] == [t.failed for t in first.tests]
        assert runner.lookup(tiny_copy, suite, REVIEWS, predictor.max_length) is not None


def test_results_csv_is_one_row_per_case_and_safe_for_spreadsheets(predictor):
    import csv
    import io
    result = runner.run_suite(predictor, parse_suite(SUITE), REVIEWS)
    rows = list(csv.DictReader(io.StringIO(runner.results_csv(result))))
    assert len(rows) == sum(t.n for t in result.tests)
    texts = [r["text"] for r in rows]
    assert "'=1+1 stars" in texts and "=1+1 stars" not in texts
    deltas = [float(r["delta"]) for r in rows if r["delta"]]
    assert deltas and all(isinstance(d, float) for d in deltas)
    summary = runner.result_json(result)
    assert set(summary) >= {"checkpoint", "suite", "seconds", "tests"}
    assert set(summary["tests"][0]) == set(runner.SUMMARY_KEYS)
    json.dumps(summary, allow_nan=False)        # nan fail rates are written as null


def test_a_run_on_a_three_label_model(tmp_path):
    from reviewbert.model.inference import Predictor
    path = make_tiny_model(tmp_path / "three", num_labels=3)
    result = runner.run_suite(Predictor.from_checkpoint(path), parse_suite(SUITE), REVIEWS)
    assert result.labels == list(THREE.names)
    spans = {tuple(r["pred_stars"]) for t in result.tests for r in t.rows}
    assert spans <= {(1, 2), (3, 3), (4, 5)}
    for t in result.tests:
        for r in t.rows:
            assert 1.5 <= r["e_stars"] <= 4.5
            if t.type == "MFT":     # the class's stars overlap the expected range
                lo, hi = r["stars"]
                passed = r["pred_stars"][0] <= hi and r["pred_stars"][1] >= lo
                assert r["status"] == ("pass" if passed else "fail")
