"""Helpers of the head tests (tests/unit/test_heads.py, test_pruning.py): a few reviews, and
the tiny random BERT made lively enough that masking a head moves its logits."""
from __future__ import annotations

import torch

TEXTS = ["The battery died after two days. Support never answered!",
         "Great phone, fast and light.", "ok", "Screen cracked, but the seller refunded me. "
         "Would buy again? Maybe.", "Worst purchase ever, it overheats and restarts."]


def lively(model, seed: int = 0):
    """The tiny random BERT with weights drawn at std 0.3 instead of 0.02, so that a
    head's output moves the logits visibly (at 0.02 a masked head changes them by ~1e-4)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "LayerNorm" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model
