"""The failing-cohort finder on synthetic properties tables: the error tree and SliceLine's top
slices recover a planted cohort, find nothing significant in noise, and every cohort's query
selects the rows its numbers were counted on; Benjamini–Hochberg against a hand computation;
heat maps that add up; figures that build and escape what they draw.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reviewbert.cohorts import figures
from reviewbert.cohorts.conditions import Condition, mask_of, parse_query
from reviewbert.cohorts.finder import (
    FEATURES_EXCLUDED,
    MIN_CELL,
    benjamini_hochberg,
    error_tree,
    feature_columns,
    heatmap,
    leaves,
    merge_conditions,
    nice_threshold,
    overall,
    top_slices,
)

ASPECTS = ("battery", "screen", "sound", "shipping", "seller", "price", "service")
ODD_SOURCE = '<b>odd & "name"</b>.csv'
SOURCES = ("unlocked_mobile_5k.csv", "amazon_reviews_us_Wireless.tsv", ODD_SOURCE)


def planted_mask(t: pd.DataFrame) -> np.ndarray:
    """The planted cohort: long reviews (more than 150 words) with a contrast word."""
    return ((t["n_words"] > 150) & (t["contrast"] >= 1)).to_numpy()


def synthetic_table(n: int = 2000, seed: int = 0, planted: bool = True, *, base: float = 0.10,
                    rate: float = 0.60) -> pd.DataFrame:
    """A properties table with the real columns. Errors are drawn independently of every
    property at ``base``, except in the planted cohort (``rate``) when ``planted``."""
    rng = np.random.default_rng(seed)
    t = pd.DataFrame({
        "key": [f"t1:{seed:04d}{i:028x}" for i in range(n)],
        "n_words": rng.integers(1, 201, n),        # 25 % of reviews above 150 words
        "negations": rng.poisson(0.8, n),
        "contrast": rng.choice([0, 1, 2, 3], n, p=[0.5, 0.3, 0.15, 0.05]),
        "vader_compound": np.round(rng.uniform(-1, 1, n), 4),
        "vader_pos": np.round(rng.uniform(0, 1, n), 3),
        "vader_neg": np.round(rng.uniform(0, 0.5, n), 3),
        "readability": rng.normal(60, 15, n),
        "grade": rng.normal(8, 3, n),
        "exclamation_ratio": rng.exponential(0.05, n),
        "question_ratio": rng.exponential(0.02, n),
        "caps_ratio": rng.beta(1, 20, n),
        "other_brand": rng.random(n) < 0.1,
        "source": rng.choice(SOURCES, n, p=[0.5, 0.4, 0.1]),
        "label_issue": rng.random(n) < 0.05,
        "near_duplicate": rng.random(n) < 0.03,
        "true_stars": rng.integers(1, 6, n),
    })
    t["n_tokens"] = (t["n_words"] * 1.3).astype(int) + 2
    t["truncated"] = t["n_tokens"] > 240
    for a in ASPECTS:
        t[f"aspect_{a}"] = rng.random(n) < 0.2
    p = np.full(n, base)
    if planted:
        p[planted_mask(t)] = rate
    return _outcomes(t, rng.random(n) < p, rng)


def _outcomes(t: pd.DataFrame, wrong: np.ndarray, rng) -> pd.DataFrame:
    """The model-outcome columns for given wrong/right rows. A wrong prediction moves 1 or
    2 stars within 1..5, so being wrong stays independent of the true stars (clipping a
    shift would make 1- and 5-star reviews look easier)."""
    true = t["true_stars"].to_numpy()
    shift = np.zeros(len(t), dtype=int)
    for i in np.flatnonzero(wrong):
        options = [d for d in (-2, -1, 1, 2) if 1 <= true[i] + d <= 5]
        shift[i] = options[rng.integers(len(options))]
    t["pred_stars"] = (true + shift).astype(float)
    t["error_stars"] = t["pred_stars"] - true
    t["abs_error"] = t["error_stars"].abs()
    t["wrong"] = shift != 0
    t["off_by_2"] = np.abs(shift) >= 2
    t["confidence"] = np.where(shift != 0, rng.uniform(0.2, 0.6, len(t)), rng.uniform(0.5, 1, len(t)))
    return t


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


@pytest.fixture(scope="module")
def planted():
    return synthetic_table(10_000, seed=7)


@pytest.fixture(scope="module")
def planted_tree(planted):
    return error_tree(planted)


@pytest.fixture(scope="module")
def planted_slices(planted):
    return top_slices(planted)


# ----------------------------------------------------------------- the planted cohort
def test_the_tree_has_a_leaf_that_is_the_planted_cohort(planted, planted_tree):
    truth = planted_mask(planted)
    worst = leaves(planted_tree)[0]
    m = worst.mask(planted)
    assert worst.n >= 100 and (m & truth).sum() / m.sum() >= 0.9        # mostly the cohort
    assert worst.error_rate >= 0.45 and worst.lift > 2                 # well above 10-14 %
    # and one node of the tree is the cohort itself, up to the n_words/n_tokens twin
    assert max(jaccard(c.mask(planted), truth) for c in planted_tree) >= 0.9


def test_the_tree_is_a_tree(planted, planted_tree):
    nodes = planted_tree
    assert nodes[0].node_id == 0 and nodes[0].parent is None and nodes[0].conditions == ()
    assert nodes[0].n == len(planted) and nodes[0].coverage == pytest.approx(1.0)
    by_id = {c.node_id: c for c in nodes}
    for c in nodes[1:]:
        parent = by_id[c.parent]
        assert c.depth == parent.depth + 1 <= 3 and parent.kind == "node"
        assert c.p_value is None and c.p_adjusted is None
    for c in nodes:
        children = [d for d in nodes if d.parent == c.node_id]
        assert (c.kind == "leaf") == (not children)
        if children:        # no missing values here: the two children split their parent
            assert len(children) == 2 and sum(d.n for d in children) == c.n
            assert sum(d.errors for d in children) == c.errors
    assert sum(c.n for c in leaves(nodes)) == len(planted)
    assert min(c.n for c in leaves(nodes)) >= 100          # min_leaf: 1 % of 10,000


def test_a_path_keeps_each_property_to_its_tightest_bounds():
    path = [Condition("n_words", ">", 50), Condition("contrast", "<=", 3), Condition("n_words", "<=", 200),
            Condition("n_words", ">", 120), Condition("contrast", "<=", 1),
            Condition("source", "!=", "a"), Condition("source", "==", "b")]
    assert merge_conditions(path) == (Condition("n_words", ">", 120), Condition("n_words", "<=", 200),
                                      Condition("contrast", "<=", 1), Condition("source", "==", "b"))
    assert nice_threshold([150, 151, 152], 150.5) == 150                # n_words <= 150
    assert nice_threshold([0.4571, 0.4589], 0.458) == 0.458
    assert nice_threshold([-0.5, -0.25], -0.375) == -0.5


def test_the_top_slice_is_the_planted_cohort_and_significant(planted, planted_slices):
    top = planted_slices[0]
    assert jaccard(top.mask(planted), planted_mask(planted)) >= 0.6
    assert top.significant and top.p_adjusted <= 0.05 and top.error_rate >= 0.45
    assert top.kind == "slice" and top.lift > 1 and top.ci_low <= top.error_rate <= top.ci_high
    assert all(s.lift > 1 and s.p_value <= s.p_adjusted for s in planted_slices)
    scores = [s.score for s in planted_slices]
    assert scores == sorted(scores, reverse=True) and len(planted_slices) <= 20
    # BH ran over every slice SliceLine evaluated, not only the ones it returned
    assert top.extra["family"] > 1000
    base = planted["wrong"].mean()
    for s in planted_slices[:5]:        # the vectorised statistics are scipy's, one call at a time
        assert s.p_value == pytest.approx(
            stats.binomtest(s.errors, s.n, base, alternative="greater").pvalue, rel=1e-9, abs=1e-300)
        ci = stats.binomtest(s.errors, s.n).proportion_ci(0.95, method="wilson")
        assert (s.ci_low, s.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-12)


# ----------------------------------------------------------------- noise
NOISE_SEEDS = range(100, 110)


@pytest.mark.parametrize("alpha", [0.95, 0.99])
def test_noise_gives_no_significant_slice(alpha):
    """Errors independent of every property (10 % of 10,000 reviews). Under this global null
    any significant slice is a false discovery, and BH at 5 % then bounds the chance of one
    by 5 % (for the family it counts; the lattice pruning it cannot count makes that a
    little optimistic). Calibration on 100 other seeds (1000-1099): at alpha = 0.95, 0 seeds
    with a significant slice (40 with a raw p <= 0.05); at alpha = 0.99, 2 seeds (7 slices)
    against a raw p <= 0.05 in all 100. So <= 2 of these 10 seeds holds with room, and a
    finder that skipped the correction would fail at alpha = 0.99 (second assert)."""
    any_significant, any_raw = 0, 0
    for seed in NOISE_SEEDS:
        slices = top_slices(synthetic_table(10_000, seed, planted=False), alpha=alpha)
        any_significant += any(s.significant for s in slices)
        any_raw += any(s.p_value <= 0.05 for s in slices)
    assert any_significant <= 2
    if alpha == 0.99:       # the score then favours small, high-rate slices: raw p-values are small
        assert any_raw >= 8


# ----------------------------------------------------------------- Benjamini–Hochberg
def test_benjamini_hochberg_by_hand():
    # p sorted: 0.005 (rank 1), 0.01 (2), 0.03 (3), 0.04 (4), 0.2 (5); m = 5
    # m·p/rank: 0.025, 0.025, 0.05, 0.05, 0.2; the running minimum from the largest rank
    # down leaves them so; back in the input order:
    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    np.testing.assert_allclose(benjamini_hochberg(p), [0.025, 0.05, 0.05, 0.025, 0.2])
    # a step-up case: 0.04 at rank 2 of 2 (0.04) lowers 0.03 at rank 1 (0.06) to 0.04
    np.testing.assert_allclose(benjamini_hochberg([0.03, 0.04]), [0.04, 0.04])
    assert benjamini_hochberg([]).shape == (0,)
    # padding the family with p = 1 can only raise the adjusted values
    padded = benjamini_hochberg([*p, 1.0, 1.0, 1.0])[:5]
    assert (padded >= benjamini_hochberg(p) - 1e-12).all()


# ----------------------------------------------------------------- definitions = numbers
def _messy_table() -> pd.DataFrame:
    """A table with missing values, a shuffled index and a source name full of HTML and quotes."""
    t = synthetic_table(3000, seed=3)
    rng = np.random.default_rng(3)
    t.loc[rng.random(len(t)) < 0.05, "readability"] = np.nan
    t["grade"] = t["grade"].astype(float)
    t.loc[rng.random(len(t)) < 0.05, "grade"] = np.nan
    t.loc[t["source"] == ODD_SOURCE, "wrong"] |= rng.random(len(t))[t["source"] == ODD_SOURCE] < 0.5
    return t.set_index(pd.Index(rng.permutation(len(t)) * 7 + 3))


def _assert_query_is_mask(table: pd.DataFrame, conditions, query: str, n=None, errors=None,
                          target="wrong"):
    m = mask_of(conditions, table)
    selected = table.query(query) if query else table      # "" (every review): query refuses it
    assert list(selected.index) == list(table.index[m]), query
    assert parse_query(query, table.columns) == tuple(conditions)
    if n is not None:
        assert n == m.sum() and errors == table[target].to_numpy()[m].sum()


def test_every_cohort_query_selects_the_rows_of_its_numbers():
    t = _messy_table()
    for target in ("wrong", "off_by_2"):
        nodes = error_tree(t, target, max_depth=4)
        slices = top_slices(t, target, k=10)
        assert len(nodes) > 3 and slices
        for c in [*nodes, *slices]:
            _assert_query_is_mask(t, c.conditions, c.query, c.n, c.errors, target)
            assert c.query == " and ".join(x.text() for x in c.conditions)
            assert not {x.prop for x in c.conditions} & FEATURES_EXCLUDED
    assert any('source == "<b>odd & \\"name\\"</b>.csv"' in c.query for c in error_tree(t))
    cells = heatmap(t, "readability", "source")
    for r in cells.itertuples():
        _assert_query_is_mask(t, parse_query(r.query), r.query, r.n, r.errors)


def test_model_outcomes_are_never_features():
    t = synthetic_table(2000, seed=5)
    assert not set(feature_columns(t)) & FEATURES_EXCLUDED
    assert "true_stars" in feature_columns(t)
    # confidence separates right from wrong here; the finder must not see it
    assert not any("confidence" in c.query for c in [*error_tree(t), *top_slices(t)])
    with pytest.raises(ValueError, match="leak"):
        error_tree(t, features=["n_words", "confidence"])
    with pytest.raises(ValueError, match="leak"):
        top_slices(t, features=["pred_stars"])


def test_features_restrict_the_search():
    t = synthetic_table(3000, seed=6)
    for c in [*error_tree(t, features=["contrast", "source"]), *top_slices(t, features=["contrast"])]:
        assert {x.prop for x in c.conditions} <= {"contrast", "source"}


# ----------------------------------------------------------------- degenerate inputs
def _degenerate_tables():
    t = synthetic_table(400, seed=9)
    no_errors = t.assign(wrong=False, off_by_2=False)
    all_errors = t.assign(wrong=True, off_by_2=True)
    constant = t.assign(**{c: 1 for c in ("n_words", "contrast", "negations")}, source="a.csv")
    only_target = t[["key", "wrong", "off_by_2", "confidence"]]
    nan_column = t.assign(readability=np.nan, grade=np.nan)
    nullable = t.assign(aspect_battery=pd.array([True, None] * 200, dtype="boolean"),
                        negations=pd.array([1, None] * 200, dtype="Int64"))
    return {"empty": t.iloc[:0], "one row": t.iloc[:1], "ten rows": t.iloc[:10],
            "49 rows": t.iloc[:49], "no errors": no_errors, "all errors": all_errors,
            "constant columns": constant, "only the target": only_target, "all NaN": nan_column,
            "nullable dtypes": nullable}


@pytest.mark.parametrize("name", list(_degenerate_tables()))
def test_degenerate_tables_do_not_raise(name):
    t = _degenerate_tables()[name]
    nodes = error_tree(t)
    slices = top_slices(t)
    assert all(isinstance(c.to_json(), dict) for c in [*nodes, *slices])
    if len(t) == 0:
        assert nodes == [] and slices == []
    else:
        assert nodes[0].n == len(t)
    if len(t) < 50 or t["wrong"].all() or not t["wrong"].any():
        assert slices == []
    if name in ("no errors", "all errors"):
        assert len(nodes) == 1
    for c in [*nodes, *slices]:
        _assert_query_is_mask(t, c.conditions, c.query, c.n, c.errors)
    if "n_words" in t.columns:
        for x, y in (("n_words", "source"), ("aspect_battery", "negations"), ("readability", "contrast")):
            cells = heatmap(t, x, y)
            assert cells["n"].sum() + cells.attrs["n_missing"] == len(t)
            for r in cells.itertuples():
                _assert_query_is_mask(t, parse_query(r.query), r.query, r.n, r.errors)
    o = overall(t)
    assert o.n == len(t) and o.query == ""


# ----------------------------------------------------------------- heat maps, JSON, determinism
def test_the_heat_map_adds_up():
    t = synthetic_table(3000, seed=11)
    cells = heatmap(t, "n_words", "contrast", bins=5)
    assert cells["n"].sum() == len(t) and cells["errors"].sum() == t["wrong"].sum()
    assert cells.attrs["n_missing"] == 0
    assert len(cells) == 5 * 4          # n_words in 5 quantile bins, contrast by value (0..3)
    small = cells["n"] < MIN_CELL
    assert cells.loc[small, "error_rate"].isna().all()
    big = cells[~small]
    np.testing.assert_allclose(big["error_rate"], big["errors"] / big["n"])
    cells = heatmap(t, "aspect_battery", "source")          # bools and texts by value
    assert sorted(cells["x_bin"].unique()) == ["False", "True"] and cells["n"].sum() == len(t)
    t.loc[t.index[:100], "n_words"] = np.nan
    cells = heatmap(t, "n_words", "true_stars")
    assert cells["n"].sum() + cells.attrs["n_missing"] == len(t) and cells.attrs["n_missing"] == 100
    with pytest.raises(ValueError):
        heatmap(t, "no_such_property", "contrast")


def test_results_are_plain_json_and_deterministic(planted, planted_tree, planted_slices):
    again = [c.to_json() for c in [*error_tree(planted), *top_slices(planted)]]
    first = [c.to_json() for c in [*planted_tree, *planted_slices]]
    assert again == first
    text = json.dumps(first, allow_nan=False)
    assert '"p_adjusted"' in text and '"node_id"' in text
    empty_node = overall(planted.iloc[:0]).to_json()
    assert empty_node["error_rate"] is None and empty_node["ci_low"] is None


def test_the_bitset_evaluation_matches_sliceline():
    from sliceline.slicefinder import Slicefinder

    from reviewbert.cohorts.finder import _counting_slicefinder, bin_property
    t = synthetic_table(1500, seed=13)
    binned = [bin_property(t, p) for p in ("n_words", "contrast", "aspect_battery", "source",
                                            "true_stars", "vader_neg")]
    x = np.column_stack([b.codes for b in binned])
    e = t["wrong"].to_numpy(dtype=float)
    params = dict(alpha=0.95, k=15, max_l=3, min_sup=20, verbose=False)
    ours = _counting_slicefinder()(**params).fit(x, e)
    theirs = Slicefinder(**params).fit(x, e)
    np.testing.assert_array_equal(ours.top_slices_, theirs.top_slices_)
    for a, b in zip(ours.top_slices_statistics_, theirs.top_slices_statistics_):
        assert a == pytest.approx(b)
    assert ours.n_evaluated_ > sum(len(np.unique(b.codes)) for b in binned)


# ----------------------------------------------------------------- figures
def test_the_figures_build_and_escape_what_they_draw():
    t = _messy_table()
    nodes = error_tree(t)
    fig = figures.tree_figure(nodes)
    trace = fig.data[0]
    assert trace.type == "icicle" and len(trace.ids) == len(nodes)
    assert list(trace.values) == [c.n for c in nodes]
    assert trace.marker.showscale and trace.parents[0] == ""
    drawn = " ".join([*trace.labels, *(h[0] for h in trace.customdata)])
    assert "&lt;b&gt;odd &amp; \\\"name\\\"&lt;/b&gt;.csv" in drawn      # escaped, quotes kept
    assert "<b>odd" not in drawn and "&quot;" not in drawn

    cells = heatmap(t, "n_words", "source", bins=4)
    fig = figures.heatmap_figure(cells, "n_words", "source")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (3, 4) and "&lt;b&gt;odd" in " ".join(fig.data[0].y)
    assert "<b>odd" not in " ".join(fig.data[0].y)

    slices = top_slices(t, k=5)
    fig = figures.slices_figure(slices)
    bar = fig.data[0]
    assert bar.orientation == "h" and len(bar.x) == len(slices) and len(bar.error_x.array) == len(slices)
    assert fig.layout.shapes and fig.layout.shapes[0].x0 == pytest.approx(overall(t).error_rate)
    assert len(np.asarray(figures.slices_figure([]).data[0].x)) == 0
    assert len(figures.tree_figure([]).data[0].ids or ()) == 0
    assert figures.heatmap_figure(heatmap(t.iloc[:0], "n_words", "source"), "n_words", "source").data
