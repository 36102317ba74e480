"""Metrics checked against values worked out by hand."""
import math

import numpy as np
import pytest

from reviewbert.model.metrics import compute_metrics, confusion, format_confusion, macro_auc


def test_five_labels_by_hand_and_missing_class_auc():
    # true  probs                       argmax  hit  |pred-true|<=1  p(true)
    # 0     .5 .2 .1 .1 .1              0       yes  yes             .5
    # 1     .1 .1 .6 .1 .1              2       no   yes (1 off)     .1
    # 4     .4 .1 .1 .1 .3              0       no   no  (4 off)     .3
    # 2     .1 .1 .2 .5 .1              3       no   yes (1 off)     .2
    y = [0, 1, 4, 2]
    p = [[.5, .2, .1, .1, .1],
         [.1, .1, .6, .1, .1],
         [.4, .1, .1, .1, .3],
         [.1, .1, .2, .5, .1]]
    m = compute_metrics(y, p, 5)
    assert m["accuracy"] == pytest.approx(1 / 4)
    assert m["relaxed_accuracy"] == pytest.approx(3 / 4)
    # CE = -(ln .5 + ln .1 + ln .3 + ln .2) / 4 = 5.809143 / 4
    assert m["loss"] == pytest.approx(1.452286, abs=1e-5)
    assert m["n"] == 4
    # class 3 ("4 stars") never occurs: its one-vs-rest ROC has no positives
    assert m["auc"] is None and "3" in m["auc_note"]


def test_three_labels_auc_by_pair_counting():
    # OvR AUC of a class = share of (positive, negative) pairs ranked correctly.
    y = [0, 0, 1, 1, 2, 2]
    p = [[.60, .30, .10],
         [.30, .40, .30],
         [.20, .70, .10],
         [.45, .20, .35],
         [.10, .10, .80],
         [.20, .30, .50]]
    # class 0: pos {.6, .3} vs neg {.2, .45, .1, .2}: .6 beats 4, .3 beats 3 -> 7/8
    # class 1: pos {.7, .2} vs neg {.3, .4, .1, .3}: .7 beats 4, .2 beats 1 -> 5/8
    # class 2: pos {.8, .5} vs neg {.1, .3, .1, .35}: all 8 pairs -> 8/8
    # macro = (7/8 + 5/8 + 1) / 3 = 0.8333
    m = compute_metrics(y, p, 3)
    assert m["auc"] == pytest.approx((7 / 8 + 5 / 8 + 1) / 3)
    assert "auc_note" not in m
    # argmax: 0 1 1 0 2 2 -> rows 0, 2, 4, 5 correct
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["relaxed_accuracy"] is None  # meaningless without ordered stars
    expected_ce = -(math.log(.6) + math.log(.3) + math.log(.7) + math.log(.2)
                    + math.log(.8) + math.log(.5)) / 6
    assert m["loss"] == pytest.approx(expected_ce)  # 0.766200
    cm = confusion(y, p, 3)
    assert cm == [[1, 1, 0], [1, 1, 0], [0, 0, 2]]
    assert sum(map(sum, cm)) == len(y)
    assert "negative" in format_confusion(cm, ["negative", "neutral", "positive"])


def test_float32_softmax_rows_are_accepted():
    # A float32 softmax sums to 1 only approximately; sklearn's AUC would refuse it.
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 5)).astype(np.float32)
    p = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32) * 0.9999
    y = np.arange(50) % 5
    auc, note = macro_auc(y, p, 5)
    assert note is None and 0.0 <= auc <= 1.0


def test_empty_split_and_bad_shapes():
    m = compute_metrics([], np.zeros((0, 5)), 5)
    assert m["n"] == 0 and m["accuracy"] is None
    with pytest.raises(ValueError):
        compute_metrics([0, 1], [[1.0, 0, 0, 0, 0]], 5)
    with pytest.raises(ValueError):
        compute_metrics([7], [[1.0, 0, 0, 0, 0]], 5)
