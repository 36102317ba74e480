"""Contrastive Integrated Gradients (why rating a and not b) on a tiny random BERT:
completeness, antisymmetry, the pair's checks, a 3-label model and the cache."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from reviewbert.explain import contrast as C
from reviewbert.explain import methods as E

REVIEW = "The battery died after two days, unbelievably poor quality!"


def _predictor(folder):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(folder, torch.device("cpu"))


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, tmp_path_factory):
    # a copy: the contrasts are cached beside the checkpoint, and the shared one stays clean
    folder = tmp_path_factory.mktemp("contrast") / "tiny"
    shutil.copytree(tiny_model_dir, folder)
    predictor = _predictor(folder)
    return predictor, predictor.predict(REVIEW)


def test_attributions_sum_to_the_logit_difference_change_within_captums_delta(tiny):
    predictor, pred = tiny
    c = C.contrast(predictor, pred, n_steps=8)
    assert (c.a, c.b) == C.default_pair(pred) and c.a == pred.label_id and c.a != c.b
    # the runner-up: the most probable rating after the predicted one
    assert c.b == int(np.argsort(-pred.probs)[1])
    # f(x) is logit[a] − logit[b]: the same number as log p(a) − log p(b) of the prediction
    assert c.logit_diff == pytest.approx(float(np.log(pred.probs[c.a] / pred.probs[c.b])), abs=1e-4)
    assert c.logit_diff > 0           # a is the predicted rating, b the runner-up
    change = c.logit_diff - c.baseline_diff
    assert abs(c.total - change) <= abs(c.delta) + 1e-5
    assert c.relative_delta <= E.DELTA_WARN    # the doubling policy got it under 5 %
    assert c.scores.shape == (len(pred.words),) and c.token_scores.shape == (pred.n_tokens,)
    assert float(c.scores.sum()) == pytest.approx(c.total, abs=1e-4)   # specials get 0
    assert np.abs(c.scores).max() > 0
    assert "logit[" in c.detail and C.completeness_text(c).count(f"{c.delta:+.2g}") == 1


def test_swapping_the_two_ratings_negates_the_attributions(tiny):
    predictor, pred = tiny
    a, b = C.default_pair(pred)
    ab = C.contrast(predictor, pred, a, b, n_steps=8)
    ba = C.contrast(predictor, pred, b, a, n_steps=8)
    assert (ba.a, ba.b) == (b, a)
    np.testing.assert_allclose(ba.token_scores, -ab.token_scores, atol=1e-5)
    assert ba.logit_diff == pytest.approx(-ab.logit_diff, abs=1e-5)
    assert ba.delta == pytest.approx(-ab.delta, abs=1e-5)


def test_the_same_rating_twice_or_no_rating_is_refused_in_one_line(tiny):
    predictor, pred = tiny
    with pytest.raises(C.ContrastError, match="two different ratings") as e:
        C.contrast(predictor, pred, 2, 2)
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
    for bad in (5, -1, True, "3"):
        with pytest.raises(C.ContrastError, match="not a class of this model"):
            C.method(pred, bad, 0)


def test_a_three_label_model_contrasts_its_own_classes(tmp_path):
    from conftest import make_tiny_model
    predictor = _predictor(make_tiny_model(tmp_path / "tiny3", num_labels=3))
    pred = predictor.predict(REVIEW)
    c = C.contrast(predictor, pred, n_steps=8)
    assert {c.a, c.b} <= {0, 1, 2} and c.a != c.b
    assert {c.a_name, c.b_name} <= set(pred.scheme.names) and len(pred.scheme.names) == 3
    assert abs(c.total - (c.logit_diff - c.baseline_diff)) <= abs(c.delta) + 1e-5
    other = next(i for i in range(3) if i not in (c.a, c.b))
    assert C.contrast(predictor, pred, other, c.a, n_steps=8).b == c.a
    with pytest.raises(C.ContrastError):
        C.method(pred, 3, 0)


def test_a_contrast_is_cached_beside_the_checkpoint_per_pair(tiny):
    predictor, pred = tiny
    a, b = C.default_pair(pred)
    first = C.contrast(predictor, pred, a, b, n_steps=16)
    files = list((predictor.checkpoint / "explanations").glob("*.json"))
    again = C.contrast(predictor, pred, a, b, n_steps=16)
    assert again.from_cache and not first.from_cache
    np.testing.assert_array_equal(again.scores, first.scores)
    assert again.delta == first.delta and again.detail == first.detail
    swapped = C.contrast(predictor, pred, b, a, n_steps=16)      # another pair: another entry
    assert not swapped.from_cache
    assert len(list((predictor.checkpoint / "explanations").glob("*.json"))) == len(files) + 1
