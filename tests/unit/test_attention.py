"""Attention arithmetic: head averaging, word merging, special-token exclusion."""
from types import SimpleNamespace

import numpy as np
import pytest

from reviewbert.model import attention as A


def fake_pred(L=3, H=2, seed=0):
    # [CLS] un ##believ ##able phone [SEP]  -> words: "unbelievable", "phone"
    tokens = ["[CLS]", "un", "##believ", "##able", "phone", "[SEP]"]
    word_ids = [None, 0, 0, 0, 1, None]
    T = len(tokens)
    rng = np.random.default_rng(seed)
    att = rng.random((L, H, T, T)).astype(np.float32)
    att /= att.sum(-1, keepdims=True)
    return SimpleNamespace(tokens=tokens, word_ids=word_ids, words=["Unbelievable", "phone"],
                           attentions=att)


def test_head_average_and_select():
    p = fake_pred()
    avg = A.head_average(p.attentions)
    assert avg.shape == (3, 6, 6)
    np.testing.assert_allclose(avg, p.attentions.mean(1))
    np.testing.assert_allclose(A.select_heads(p.attentions, 1), p.attentions[:, 1])
    np.testing.assert_allclose(A.select_heads(p.attentions, None), avg)
    with pytest.raises(ValueError):
        A.select_heads(p.attentions, 2)


def test_merge_words_sums_pieces_and_keeps_specials():
    rows = np.array([[0.1, 0.2, 0.05, 0.05, 0.3, 0.3]])
    merged, cols = A.merge_words(rows, [None, 0, 0, 0, 1, None])
    assert cols == [None, 0, 1, None]
    np.testing.assert_allclose(merged, [[0.1, 0.3, 0.3, 0.3]])
    assert merged.sum() == pytest.approx(1.0)


def test_drop_special_renormalises_rows_to_one():
    rows = np.array([[0.5, 0.1, 0.3, 0.1], [0.2, 0.2, 0.2, 0.4]])
    out = A.drop_special(rows, np.array([True, False, False, True]))
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out[0], [0.25, 0.75])
    # a row with nothing left stays zero instead of dividing by zero
    assert A.drop_special(np.array([[1.0, 0.0]]), np.array([True, False])).tolist() == [[0.0]]


def test_last_layers():
    assert A.last_layers(12) == [6, 7, 8, 9, 10, 11]
    assert A.last_layers(2) == [0, 1]


@pytest.mark.parametrize("level,include,n_cols", [("token", True, 6), ("token", False, 4),
                                                   ("word", True, 4), ("word", False, 2)])
def test_cls_view_shapes_and_sums(level, include, n_cols):
    p = fake_pred(L=8)
    v = A.cls_view(p, head=None, level=level, include_special=include)
    assert v.values.shape == (6, n_cols)             # last six of eight layers
    assert v.layers == [2, 3, 4, 5, 6, 7]
    assert len(v.labels) == n_cols
    np.testing.assert_allclose(v.values.sum(-1), 1.0, rtol=1e-5)
    if level == "word":
        assert "Unbelievable" in v.labels
    if include:
        assert v.labels[0] == "[CLS]" and v.labels[-1] == "[SEP]"


def test_cls_view_word_level_matches_manual_sum():
    p = fake_pred()
    v = A.cls_view(p, layers=[0], head=1, level="word", include_special=True)
    row = p.attentions[0, 1, 0]
    np.testing.assert_allclose(v.values[0], [row[0], row[1:4].sum(), row[4], row[5]], rtol=1e-6)


def test_heads_view_rows_are_heads():
    p = fake_pred(H=4)
    v = A.heads_view(p, layer=1, include_special=False)
    assert v.values.shape == (4, 4)
    np.testing.assert_allclose(v.values.sum(-1), 1.0, rtol=1e-5)


def test_word_scores_one_per_word_sum_to_one():
    p = fake_pred()
    s = A.word_scores(p, layer=2, head=None)
    assert s.shape == (2,)
    assert s.sum() == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("head", [None, 0, 5])
def test_one_query_row_is_the_row_of_the_whole_average(head):
    """query_rows slices the row before averaging the heads: the same numbers as
    averaging every [T, T] matrix first, a pruned (all-zero) head left out of the mean."""
    rng = np.random.default_rng(3)
    att = rng.random((4, 6, 9, 9)).astype(np.float32)
    att /= att.sum(-1, keepdims=True)
    att[2, 1] = 0.0                                        # a removed head
    whole = A.select_heads(att[[1, 2, 3]], head)           # [3, 9, 9]
    for q in (0, 4):
        np.testing.assert_allclose(A.query_rows(att, [1, 2, 3], head, q), whole[:, q, :], rtol=1e-6)
    assert np.allclose(A.head_average(att)[2], att[2][[0, 2, 3, 4, 5]].mean(0))
