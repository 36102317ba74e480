"""Training losses: cross-entropy on hard labels, or on ordinal soft labels.

Star ratings are ordered, and plain cross-entropy does not know it: calling a 5-star
review 4-star costs as much as calling it 1-star. Soft ordinal labels (SORD, Díaz &
Marathe, CVPR 2019) train on a target distribution that puts most of the mass on the
true class and the rest on its neighbours, falling off with the squared distance:

    q_k(y) ∝ exp(-(k - y)² / (2 σ²))

with σ in classes (σ = 0: one-hot, plain cross-entropy). The loss is the cross-entropy
against q, -Σ_k q_k log p_k, per review; with class weights (class_balance="weighted")
it is PyTorch's weighted mean, Σ w[y]·loss / Σ w[y], as ``CrossEntropyLoss(weight=…)``
computes for hard labels. Written here, not taken from a library: PyTorch's
``CrossEntropyLoss`` accepts probability targets, but with ``weight`` it weights each
target class inside the sum and divides by the batch size, which is not the per-review
weighting that "weighted" means.
"""
from __future__ import annotations

import torch


def ordinal_targets(labels: torch.Tensor, num_labels: int, sigma: float) -> torch.Tensor:
    """(batch, num_labels) soft targets q_k(y) ∝ exp(-(k-y)²/(2σ²)); one-hot at σ = 0."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    if sigma == 0:
        return torch.nn.functional.one_hot(labels, num_labels).float()
    k = torch.arange(num_labels, device=labels.device, dtype=torch.float32)
    d2 = (k[None, :] - labels[:, None].float()) ** 2
    return torch.softmax(-d2 / (2.0 * sigma * sigma), dim=-1)


class OrdinalSoftLoss(torch.nn.Module):
    """Cross-entropy against :func:`ordinal_targets`, optionally class-weighted by the
    true label (weighted mean over the batch)."""

    def __init__(self, num_labels: int, sigma: float, weight: torch.Tensor | None = None):
        super().__init__()
        if sigma <= 0:
            raise ValueError("OrdinalSoftLoss needs sigma > 0 (sigma 0 is plain cross-entropy)")
        self.num_labels, self.sigma = num_labels, float(sigma)
        self.register_buffer("weight", weight if weight is not None else None)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        q = ordinal_targets(labels, self.num_labels, self.sigma)
        per_review = -(q * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
        if self.weight is None:
            return per_review.mean()
        w = self.weight[labels]
        return (w * per_review).sum() / w.sum()


def class_loss(num_labels: int, weights=None, ordinal_sigma: float = 0.0,
               device=None) -> torch.nn.Module:
    """The training loss: cross-entropy (class-weighted when ``weights`` is given), on
    hard labels, or on ordinal soft labels when ``ordinal_sigma`` > 0."""
    weight = None if weights is None else torch.tensor(weights, dtype=torch.float32,
                                                       device=device)
    if ordinal_sigma > 0:
        return OrdinalSoftLoss(num_labels, ordinal_sigma, weight)
    return torch.nn.CrossEntropyLoss(weight=weight)
