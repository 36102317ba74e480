"""Activation patching on the shipped demo (a copy of it: the cache goes to a temporary
folder): "The battery is great" against "The battery is terrible". Run with -s to see the
grid."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from demo_support import demo_copy

from reviewbert.model.inference import softmax
from reviewbert.patching import grid as G

CLEAN, CORRUPT = "The battery is great", "The battery is terrible"


@pytest.fixture(scope="module")
def predictor(tmp_path_factory):
    from reviewbert.model.inference import Predictor
    d = demo_copy(tmp_path_factory.mktemp("patch-demo"))
    return Predictor.from_checkpoint(d, torch.device("cpu"))


def test_the_changed_word_carries_the_difference_up_to_cls(predictor):
    res = G.patch(predictor, CLEAN, CORRUPT, heads=True)
    print("\n" + " | ".join(res.columns))
    for r, row in enumerate(res.grid):
        print(f"{G.row_name(r):>12s} " + " ".join(f"{v:+.2f}" for v in row))
    print("\n".join(G.reading(res)))
    names = predictor.scheme.names
    assert res.columns == ["[CLS]", "The", "battery", "is", "great→terrible", "[SEP]"]
    # the demo reads the pair as opposite ends of the scale
    assert names[res.ratings[0]] == "5 stars" and res.ratings[1] in (0, 1)
    np.testing.assert_allclose(softmax(res.clean_logits), predictor.predict(CLEAN).probs, atol=1e-4)
    np.testing.assert_allclose(softmax(res.corrupt_logits), predictor.predict(CORRUPT).probs,
                               atol=1e-4)
    changed = 4
    # below the first layer only the changed word differs: patching it restores all of it
    assert res.grid[0, changed] == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(np.delete(res.grid[0], changed), 0.0, atol=1e-4)
    # at the last layer the classifier reads [CLS] alone
    assert res.grid[-1, 0] == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(res.grid[-1, 1:], 0.0, atol=1e-4)
    # on the way the changed word keeps most of it for a few layers
    assert res.grid[1, changed] > 0.5
    assert res.head_grid.shape == (6, 12) and np.isfinite(res.head_grid).all()
    assert np.nanmax(res.head_grid) > 0.05            # some head carries a visible share
    assert list((predictor.checkpoint / ".analysis" / "patching").glob("*.json"))
    again = G.patch(predictor, CLEAN, CORRUPT, heads=True)
    assert again.from_cache
    np.testing.assert_allclose(again.grid, res.grid, atol=1e-9)

