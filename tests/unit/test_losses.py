"""Ordinal soft labels (reviewbert/training/losses.py), checked against values worked out by hand."""
import math

import pytest
import torch

from reviewbert.config import TrainConfig, config_errors
from reviewbert.training.losses import OrdinalSoftLoss, class_loss, ordinal_targets


def test_targets_are_one_hot_at_zero_and_gaussian_in_the_distance():
    y = torch.tensor([0, 2, 4])
    assert torch.equal(ordinal_targets(y, 5, 0.0), torch.eye(5)[[0, 2, 4]])
    q = ordinal_targets(y, 5, 1.0)
    # y = 2, sigma 1: weights exp(-d²/2) for d = 2,1,0,1,2, normalised
    w = [math.exp(-d * d / 2) for d in (2, 1, 0, 1, 2)]
    assert q[1].tolist() == pytest.approx([x / sum(w) for x in w], rel=1e-6)
    # y = 0: mass falls off away from the true class only
    w0 = [math.exp(-d * d / 2) for d in range(5)]
    assert q[0].tolist() == pytest.approx([x / sum(w0) for x in w0], rel=1e-6)
    assert torch.allclose(q.sum(-1), torch.ones(3))
    assert torch.allclose(q[2], q[0].flip(0))           # the scale is symmetric
    with pytest.raises(ValueError):
        ordinal_targets(y, 5, -0.5)


def test_the_soft_loss_by_hand_and_weighted():
    logits = torch.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, 0.0]])
    labels = torch.tensor([2, 0])
    sigma = 0.5
    logp = torch.log_softmax(logits, -1)
    e = math.exp(-1 / (2 * sigma ** 2))               # one class away
    f = math.exp(-4 / (2 * sigma ** 2))               # two classes away
    q2 = [f, e, 1.0]
    q0 = [1.0, e, f]
    l1 = -sum(q / sum(q2) * lp for q, lp in zip(q2, logp[0].tolist()))
    l2 = -sum(q / sum(q0) * lp for q, lp in zip(q0, logp[1].tolist()))
    assert class_loss(3, None, sigma)(logits, labels).item() == pytest.approx((l1 + l2) / 2,
                                                                              rel=1e-6)
    weighted = class_loss(3, [0.5, 1.0, 3.0], sigma)(logits, labels).item()
    assert weighted == pytest.approx((3.0 * l1 + 0.5 * l2) / 3.5, rel=1e-6)


def test_soft_labels_make_near_misses_cheaper_than_far_ones_and_vanish_to_ce():
    y = torch.tensor([4])
    near = torch.tensor([[0.0, 0.0, 0.0, 5.0, 0.0]])   # confident 4 stars for a 5-star
    far = torch.tensor([[5.0, 0.0, 0.0, 0.0, 0.0]])    # confident 1 star
    ce = torch.nn.CrossEntropyLoss()
    assert ce(near, y).item() == pytest.approx(ce(far, y).item())   # CE cannot tell them apart
    soft = OrdinalSoftLoss(5, 0.7)
    assert soft(near, y).item() < soft(far, y).item() - 1.0
    tiny = OrdinalSoftLoss(5, 0.05)
    logits = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(8) % 5
    assert tiny(logits, labels).item() == pytest.approx(ce(logits, labels).item(), rel=1e-5)
    assert isinstance(class_loss(5, None, 0.0), torch.nn.CrossEntropyLoss)


def test_the_config_field_is_validated():
    assert TrainConfig().ordinal_sigma == 0.0
    assert "ordinal_sigma" in config_errors({"ordinal_sigma": -1}, require_data=False)
    assert "ordinal_sigma" not in config_errors({"ordinal_sigma": 0.6}, require_data=False)
