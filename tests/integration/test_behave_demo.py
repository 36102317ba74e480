"""The default behavioural suite on the shipped demo checkpoint and its real test split: the
suite's size and coverage, its cases reproducible, every test scored end to end, the plain
Vocabulary tests passed by a model that learnt stars, and the re-run read from the cache.

The per-capability and per-test fail rates are printed (run with ``-s``); the docs quote
them. The demo is used through a symlinked copy, so the suite's cache is written in a
temporary folder and never into checkpoints/demo."""
from __future__ import annotations

import math
import time
from collections import defaultdict

import pytest
from demo_support import demo_copy

from reviewbert.behave.cases import build_cases, count_cases
from reviewbert.behave.runner import run_suite
from reviewbert.behave.suite import TYPES, default_suite

# the capabilities the issue names, one row each in the app's matrix
CAPABILITIES = ("Vocabulary", "Intensifiers", "Negation", "Contrast", "Temporal",
                "Whose opinion counts", "Mixed aspects", "Explicit ratings", "Sarcasm",
                "Robustness", "Added sentences", "Fairness/Names")
# one-word verdicts at the ends of the rating ladder ("This case is awful.", "The phone is
# excellent."): a model trained on stars that fails these has not learnt stars at all
PLAIN_VOCABULARY = ("Strongly negative words", "Strongly positive words")
MIN_TESTS, MIN_CASES = 25, 3_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    """(predictor, the demo's test-split reviews, the symlinked copy of the demo)."""
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    ck = demo_copy(tmp_path_factory.mktemp("behave-demo"))
    predictor = Predictor.from_checkpoint(ck)
    reviews = test_split_examples(checkpoint_info(ck).meta, predictor.tokenizer, data_dir)
    return predictor, reviews, ck


@pytest.fixture(scope="module")
def runs(demo):
    """The default suite run twice on the demo copy: computed, then read from the cache;
    each with the wall-clock seconds of its run_suite call."""
    predictor, reviews, ck = demo
    suite = default_suite()
    out = []
    for _ in range(2):
        t0 = time.perf_counter()
        result = run_suite(predictor, suite, reviews, checkpoint=ck)
        out.append((result, time.perf_counter() - t0))
    return out


def _scored(t) -> int:
    return t.n - t.filtered


def _report(result, wall: float) -> None:
    """The fail rates, per capability (failed / scored, pooled over its tests) and per
    test, as the docs quote them."""
    by_cap: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for t in result.tests:
        by_cap[t.capability][0] += t.failed
        by_cap[t.capability][1] += _scored(t)
        by_cap[t.capability][2] += t.n
    print(f"\ndefault suite on the demo: {len(result.tests)} tests, "
          f"{sum(t.n for t in result.tests):,} cases, run_suite {wall:.1f} s "
          f"(result.seconds {result.seconds:.1f})")
    for cap in CAPABILITIES:
        failed, scored, n = by_cap[cap]
        print(f"  {cap:22s} {failed / max(scored, 1):6.1%}  ({failed}/{scored} scored, {n} cases)")
    for t in result.tests:
        print(f"    {t.type} {t.capability:22s} {t.name:36s} {t.fail_rate:6.1%} "
              f"[{t.ci_low:.2f}, {t.ci_high:.2f}] n={t.n} filtered={t.filtered}")


def test_the_default_suite_covers_every_capability_with_enough_cases(demo):
    _, reviews, _ = demo
    suite = default_suite()
    assert len(suite.tests) >= MIN_TESTS
    assert set(CAPABILITIES) <= {t.capability for t in suite.tests}
    assert {t.type for t in suite.tests} == set(TYPES)
    assert all(t.description.strip() for t in suite.tests), "every test says what it checks"
    assert any(t.source == "reviews" for t in suite.tests)
    assert count_cases(suite, reviews) >= MIN_CASES


def test_the_cases_are_the_same_on_every_build(demo):
    """Seeded: two builds of the suite on the same reviews give the same cases, so two
    checkpoints are compared on the same texts."""
    _, reviews, _ = demo
    suite = default_suite()
    a, b = build_cases(suite, reviews), build_cases(suite, reviews)
    assert set(a) == {t.name for t in suite.tests}
    assert {k: [c.text for c in v] for k, v in a.items()} == \
        {k: [c.text for c in v] for k, v in b.items()}
    real = [t.name for t in suite.tests if t.source == "reviews"]
    texts = {r.text for r in reviews}
    assert all(c.original in texts for name in real for c in a[name]), \
        "source: reviews tests perturb the checkpoint's own test reviews"


def test_every_test_of_the_default_suite_is_scored_on_the_demo(runs):
    result, wall = runs[0]
    _report(result, wall)
    suite = default_suite()
    assert [t.name for t in result.tests] == [t.name for t in suite.tests]
    assert not result.cached
    for t in result.tests:
        assert t.n > 0 and _scored(t) > 0, f"{t.name}: nothing scored ({t.n} cases)"
        assert 0.0 <= t.fail_rate <= 1.0 and not math.isnan(t.fail_rate), t.name
        assert 0.0 <= t.ci_low <= t.fail_rate + 1e-9 and t.fail_rate <= t.ci_high + 1e-9 \
            and t.ci_high <= 1.0, t.name
        assert len(t.rows) == t.n, t.name
        assert t.failed == sum(r["status"] == "fail" for r in t.rows), t.name
        assert t.filtered == sum(r["status"] == "filtered" for r in t.rows), t.name
        assert len(t.examples) <= 3 and bool(t.examples) == (t.failed > 0), t.name
    assert sum(t.n for t in result.tests) >= MIN_CASES


def test_the_demo_passes_the_plain_vocabulary_tests(runs):
    """A model that learnt stars rates "This phone is excellent." 4–5 and "This case is
    awful." 1–2; a high fail rate here means the scoring or the model is broken."""
    result, _ = runs[0]
    by_name = {t.name: t for t in result.tests}
    for name in PLAIN_VOCABULARY:
        t = by_name[name]
        assert t.capability == "Vocabulary" and t.type == "MFT"
        assert t.fail_rate < 0.3, (name, t.fail_rate, t.examples)


def test_the_second_run_is_read_from_the_cache(runs):
    (first, _), (second, wall) = runs
    assert second.cached and wall < 1.0, (second.cached, wall)
    assert second.suite_fingerprint == first.suite_fingerprint
    assert [(t.name, t.n, t.filtered, t.failed) for t in second.tests] == \
        [(t.name, t.n, t.filtered, t.failed) for t in first.tests]
