"""The optimizer's parameter groups and the learning rate as a pure function of the step."""
from __future__ import annotations

from reviewbert.config import TrainConfig


def layer_depth(name: str, num_layers: int) -> int:
    """0 for embeddings, l (1..L) for encoder layer l-1, L for the pooler."""
    if ".encoder.layer." in name:
        return int(name.split(".encoder.layer.")[1].split(".")[0]) + 1
    if ".embeddings." in name:
        return 0
    return num_layers


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """AdamW groups: classifier vs BERT (per layer if layer_lr_decay != 1).

    Biases and LayerNorm weights get no weight decay: decaying a LayerNorm gain
    toward 0 (or a bias toward 0) is not the "small weights" prior decay is for.
    Each group carries its ``names`` so optimizer state can be saved by name.
    """
    prefix = model.base_model_prefix + "."
    num_layers = model.config.num_hidden_layers
    groups: dict[tuple, dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.startswith(prefix):
            lr = cfg.lr_bert * cfg.layer_lr_decay ** (num_layers - layer_depth(name, num_layers))
        else:
            lr = cfg.lr_classifier
        no_decay = name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name
        wd = 0.0 if no_decay else cfg.weight_decay
        g = groups.setdefault((lr, wd), {"params": [], "names": [], "lr": lr, "base_lr": lr,
                                         "weight_decay": wd})
        g["params"].append(p)
        g["names"].append(name)
    return list(groups.values())


def lr_factor(step: int, cfg: TrainConfig, steps_per_epoch: int, total_steps: int) -> float:
    """StepLR (x lr_decay every lr_step_epochs epochs) times an optional linear warm-up.

    Computed from the step alone (as nanoGPT's get_lr): no scheduler object whose
    state would need saving, and a mid-epoch resume gets the right rate for free.
    """
    epoch = step // max(1, steps_per_epoch)
    f = cfg.lr_decay ** (epoch // cfg.lr_step_epochs)
    warm = int(cfg.warmup_ratio * total_steps)
    if warm and step < warm:
        f *= (step + 1) / warm
    return f

