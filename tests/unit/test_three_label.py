"""The 3-label view of a 5-label model: probabilities merged into {1,2}, {3}, {4,5} stars."""
from __future__ import annotations

import numpy as np
import pytest

from reviewbert.model.metrics import merge_to_three, three_label_view

Y5 = [0, 2, 1, 4]  # 1 star, 3 stars, 2 stars, 5 stars
P5 = np.array([[.50, .20, .10, .10, .10],
               [.10, .10, .20, .30, .30],
               [.30, .30, .20, .10, .10],
               [.05, .05, .10, .40, .40]])


def test_merge_sums_the_stars_of_each_class():
    y3, p3 = merge_to_three(Y5, P5)
    assert y3.tolist() == [0, 1, 0, 2]
    np.testing.assert_allclose(p3, [[.7, .1, .2], [.2, .2, .6], [.6, .2, .2], [.1, .1, .8]])


def test_three_label_accuracy_and_auc_by_hand():
    m = three_label_view(Y5, P5)
    # argmax: negative, positive (true neutral: wrong), negative, positive -> 3 of 4
    assert m["accuracy"] == pytest.approx(0.75) and m["n"] == 4
    # one-vs-rest AUC: negative 1 (0.7, 0.6 above 0.2, 0.1); neutral: 0.2 against
    # 0.1, 0.2, 0.1 = (1 + 0.5 + 1) / 3; positive 1 (0.8 above 0.2, 0.6, 0.2)
    assert m["auc"] == pytest.approx((1 + 2.5 / 3 + 1) / 3)
    # mean -log p(true class): ln(1/0.7), ln(1/0.2), ln(1/0.6), ln(1/0.8)
    assert m["loss"] == pytest.approx(-np.mean(np.log([.7, .2, .6, .8])))
    assert m["classes"] == {"negative": [1, 2], "neutral": [3], "positive": [4, 5]}


def test_a_split_without_neutral_reviews_has_no_auc():
    m = three_label_view([0, 4], P5[[0, 3]])
    assert m["auc"] is None and "absent" in m["auc_note"] and m["accuracy"] == 1.0
