"""bench/tfidf_baseline.py: its settings are chosen on validation, class weights only
where the training classes are imbalanced (a checkpoint trained on every review)."""
from __future__ import annotations

import random
import sys

from reviewbert.data import Example

from browser_support import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import tfidf_baseline as B  # noqa: E402

WORDS = {0: ["broke", "refund", "awful", "dead"], 1: ["great", "love", "perfect", "fast"]}
FILLER = ["phone", "case", "screen", "battery", "it", "the", "was", "charger", "day"]


def _reviews(counts: dict[int, int], seed: int) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for label, n in counts.items():
        for _ in range(n):
            words = rng.sample(FILLER, 4) + ([rng.choice(WORDS[label])] if rng.random() < 0.6
                                             else [rng.choice(WORDS[1 - label])])
            rng.shuffle(words)
            out.append(Example(" ".join(words), 1 + 4 * label, label, "toy"))
    return out


def test_balanced_training_tries_no_class_weights():
    (c, weight), tried = B.select_settings(_reviews({0: 40, 1: 40}, 0), _reviews({0: 20, 1: 20}, 1))
    assert weight is None and {w for _, w in tried} == {None}
    assert {c for c, _ in tried} == set(B.C_GRID) and c in B.C_GRID


def test_imbalanced_training_also_tries_balanced_weights_and_keeps_the_best_on_validation():
    (c, weight), tried = B.select_settings(_reviews({0: 15, 1: 150}, 0),
                                           _reviews({0: 30, 1: 30}, 1))
    assert {w for _, w in tried} == {None, "balanced"}
    assert len(tried) == 2 * len(B.C_GRID)
    assert tried[(c, weight)] == max(tried.values())
    # a C given by hand is the only C tried, still with both weightings
    _, tried = B.select_settings(_reviews({0: 15, 1: 150}, 0), _reviews({0: 30, 1: 30}, 1), C=1.0)
    assert set(tried) == {(1.0, None), (1.0, "balanced")}
