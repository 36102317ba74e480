"""A saved slice or cohort as the reviews the behavioural tests' perturbations start from
(``reviewbert.cohorts.pipeline.slice_mask`` and ``reviews_in``): the right reviews, read on
the properties table, and a refusal (never a loose match) when the saved predictions are
not of these reviews."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reviewbert.analysis.predictions import SplitPredictions, build_frame
from reviewbert.analysis.slices import SliceError, SliceSpec
from reviewbert.cohorts import pipeline
from reviewbert.data.examples import Review
from reviewbert.model.labels import get_scheme

SCHEME = get_scheme(5)


def reviews_and_preds(n: int = 12):
    reviews = [Review(f"review {i} {'but ' * (i % 3)}", 1 + i % 5, "a.csv" if i % 2 else "b.csv")
               for i in range(n)]
    probs = np.full((n, 5), 0.05, dtype=np.float32)
    probs[np.arange(n), (np.arange(n) * 2) % 5] = 0.8
    preds = SplitPredictions(build_frame(reviews, SCHEME, probs, [10] * n), SCHEME, {}, None)
    table = pd.DataFrame({"true_stars": [r.stars for r in reviews],
                          "contrast": [i % 3 for i in range(n)],
                          "label_issue": [i % 4 == 0 for i in range(n)]})
    return reviews, preds, table


def test_a_cohort_keeps_the_reviews_its_conditions_select():
    reviews, preds, table = reviews_and_preds()
    spec = SliceSpec(where="true_stars > 3 and contrast > 0")
    kept = pipeline.reviews_in(reviews, preds, pipeline.slice_mask(spec, preds, table))
    assert kept == [r for r, s, c in zip(reviews, table["true_stars"], table["contrast"])
                    if s > 3 and c > 0]
    assert 0 < len(kept) < len(reviews)


def test_cleanlabs_flag_and_a_file_are_read_with_the_table():
    reviews, preds, table = reviews_and_preds()
    spec = SliceSpec(sources=("a.csv",), label_issue=False)
    kept = pipeline.reviews_in(reviews, preds, pipeline.slice_mask(spec, preds, table))
    assert kept == [r for i, r in enumerate(reviews) if r.source == "a.csv" and i % 4 != 0]


def test_other_reviews_than_the_predictions_are_refused():
    reviews, preds, table = reviews_and_preds()
    mask = np.ones(len(reviews), dtype=bool)
    with pytest.raises(SliceError, match="other reviews"):
        pipeline.reviews_in(reviews[1:], preds, mask[1:])
    shuffled = reviews[1:] + reviews[:1]
    with pytest.raises(SliceError, match="other reviews"):
        pipeline.reviews_in(shuffled, preds, mask)


def test_an_empty_slice_is_refused():
    reviews, preds, table = reviews_and_preds()
    with pytest.raises(SliceError, match="none of these reviews"):
        pipeline.reviews_in(reviews, preds, pipeline.slice_mask(
            SliceSpec(where="true_stars > 5"), preds, table))
