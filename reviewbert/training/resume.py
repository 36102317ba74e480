"""What a stopped run resumes from, without pickle: AdamW's moments and the RNG in
safetensors, the counters in JSON (``last/training_state.*``), and the config it keeps."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from reviewbert.config import RESUME_OVERRIDABLE, TrainConfig
from reviewbert.errors import CheckpointError
from reviewbert.fsio import atomic_write_json
from reviewbert.model.checkpoint import META_FILE, read_meta

STATE_JSON = "training_state.json"
STATE_TENSORS = "training_state.safetensors"


def save_training_state(folder: Path, optimizer, progress: dict, scaler=None) -> None:
    """AdamW moments + RNG into safetensors, counters into JSON. No pickle anywhere,
    so loading a resume state can never execute code."""
    opt = getattr(optimizer, "optimizer", optimizer)  # unwrap Accelerate's AcceleratedOptimizer
    tensors = {}
    for g in opt.param_groups:
        for name, p in zip(g["names"], g["params"]):
            for k, v in opt.state.get(p, {}).items():
                t = v if torch.is_tensor(v) else torch.tensor(v)
                tensors[f"optimizer/{name}/{k}"] = t.detach().cpu().contiguous()
    tensors["rng/torch_cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng/cuda"] = torch.cuda.get_rng_state()
    save_file(tensors, str(folder / STATE_TENSORS))
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    atomic_write_json(folder / STATE_JSON, {
        "format": "reviewbert-train-state/1", **progress, "param_groups": groups,
        "scaler": scaler.state_dict() if scaler is not None else None})


def load_training_state(folder: Path) -> tuple[dict, dict]:
    """(progress JSON, tensors) from last/; CheckpointError if missing or broken."""
    try:
        progress = json.loads((folder / STATE_JSON).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / STATE_TENSORS))
    except FileNotFoundError as e:
        raise CheckpointError(f"{folder} has no resume state ({e.filename})") from e
    except Exception as e:  # noqa: BLE001 - a torn or foreign file
        raise CheckpointError(f"{folder}: unreadable resume state: {e}") from e
    return progress, tensors


def restore_optimizer(optimizer, tensors: dict) -> None:
    """Put saved AdamW moments back, matched to parameters by name."""
    index, i = {}, 0
    for g in optimizer.param_groups:
        for name in g["names"]:
            index[name] = i
            i += 1
    state: dict[int, dict] = {}
    for key, t in tensors.items():
        if key.startswith("optimizer/"):
            name, k = key[len("optimizer/"):].rsplit("/", 1)
            if name not in index:
                raise CheckpointError(f"resume state has optimizer state for unknown parameter {name}")
            state.setdefault(index[name], {})[k] = t
    sd = optimizer.state_dict()
    sd["state"] = state
    optimizer.load_state_dict(sd)  # casts moments to each parameter's device/dtype


def resume_config(run_dir, overrides: dict | None = None) -> tuple[TrainConfig, list[str]]:
    """The stopped run's TrainConfig, with the few overridable flags applied.

    Returns (config, ignored flag names): other hyperparameters cannot change
    mid-run (the optimizer groups and the data split would no longer match).
    """
    meta = read_meta(run_dir, strict=False)
    if not meta.get("hyperparameters"):
        raise CheckpointError(f"{run_dir} has no {META_FILE} with hyperparameters: nothing to resume")
    cfg = TrainConfig.from_dict(meta["hyperparameters"])
    ignored = []
    for k, v in (overrides or {}).items():
        if k in RESUME_OVERRIDABLE:
            setattr(cfg, k, v)
        elif getattr(cfg, k, None) != v and not (k == "fractions" and tuple(v) == cfg.fractions):
            ignored.append(k)
    return cfg, ignored

