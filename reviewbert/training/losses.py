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

import numpy as np
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
        return soft_cross_entropy(logits, q, labels, self.weight)


def soft_cross_entropy(logits: torch.Tensor, q: torch.Tensor, labels: torch.Tensor,
                       weight: torch.Tensor | None = None) -> torch.Tensor:
    """-Σ_k q_k log p_k per review; the mean, or the mean weighted by ``weight[label]``."""
    per_review = -(q * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
    if weight is None:
        return per_review.mean()
    w = weight[labels]
    return (w * per_review).sum() / w.sum()


class DistillLoss(torch.nn.Module):
    """Knowledge distillation (reviewbert.training.distill): cross-entropy against
    ``alpha · teacher + (1 − alpha) · label target`` (one-hot, or ordinal at σ > 0),
    class-weighted like the other losses.

    Called as ``loss(logits, idx)`` where ``idx`` are the batch's indices into the
    training split: the labels and the teachers' probabilities for every training
    review are held here, so the batches carry indices in place of labels.
    """

    def __init__(self, teacher_probs, labels, alpha: float, num_labels: int,
                 sigma: float = 0.0, weight: torch.Tensor | None = None):
        super().__init__()
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha, self.num_labels, self.sigma = float(alpha), num_labels, float(sigma)
        teacher = torch.as_tensor(np.asarray(teacher_probs), dtype=torch.float32)
        labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        if teacher.shape != (labels.shape[0], num_labels):
            raise ValueError(f"teacher probabilities {tuple(teacher.shape)} do not match "
                             f"{labels.shape[0]} reviews x {num_labels} labels")
        self.register_buffer("teacher", teacher)
        self.register_buffer("labels", labels)
        self.register_buffer("weight", weight if weight is not None else None)

    def forward(self, logits: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        idx = idx.to(self.labels.device)
        y = self.labels[idx]
        q = self.alpha * self.teacher[idx] + \
            (1.0 - self.alpha) * ordinal_targets(y, self.num_labels, self.sigma)
        return soft_cross_entropy(logits, q.to(logits.device), y.to(logits.device),
                                  self.weight)


def class_loss(num_labels: int, weights=None, ordinal_sigma: float = 0.0,
               device=None, *, teacher_probs=None, train_labels=None,
               distill_weight: float = 0.5) -> torch.nn.Module:
    """The training loss: cross-entropy (class-weighted when ``weights`` is given), on
    hard labels, or on ordinal soft labels when ``ordinal_sigma`` > 0; with
    ``teacher_probs`` (and every training review's label), :class:`DistillLoss`, which
    is called with review indices in place of labels."""
    weight = None if weights is None else torch.tensor(weights, dtype=torch.float32,
                                                       device=device)
    if teacher_probs is not None:
        return DistillLoss(teacher_probs, train_labels, distill_weight, num_labels,
                           ordinal_sigma, weight).to(device)
    if ordinal_sigma > 0:
        return OrdinalSoftLoss(num_labels, ordinal_sigma, weight)
    return torch.nn.CrossEntropyLoss(weight=weight)
