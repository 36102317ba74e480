"""Fine-tune BERT to predict review stars: the hyperparameters and the training loop.

Read ``_train()`` top to bottom: ``setup`` (resume state -> data, tokenized once
-> model -> optimizer -> Accelerate -> run folder), then per epoch
``train_epoch`` (steps), ``evaluate_epoch`` (train subset, validation, test) and
``record_epoch`` (metrics.jsonl, best/, last/). The steps share one ``_Run``.
``TrainHooks`` see every step and epoch; the default ones write steps.jsonl and,
with ``--report-to tensorboard``, TensorBoard events.

Why it is fast (the benchmark compares it with HF ``Trainer`` padding every
review to 256 tokens in batches of 6, as the seed project did):

- reviews are tokenized once, before the first epoch;
- each batch is padded to its own longest review, not to ``max_length``;
- batches group reviews of similar length (shuffle, cut into mega-batches of
  50 batches, sort each by length rank within its class, shuffle the batch
  order), like HF ``group_by_length`` but with the classes mixed in every
  batch, so little of a batch is padding and accuracy per epoch is kept;
- attention runs through PyTorch's fused SDPA kernel; evaluation runs under
  ``torch.inference_mode`` and walks reviews sorted by length;
- the per-step loss is read back from the device about once a second, in one
  batch, not at every step.

The model is unchanged: one linear classifier on BERT's pooled [CLS].

The same file runs on one CPU, one GPU, or several processes under
``accelerate launch`` / ``torchrun`` (Accelerate does the device placement, DDP,
mixed precision and gathering; only the main process writes files).
"""
from __future__ import annotations

import functools
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from . import __version__, losses
from .data import CLASS_BALANCE, ClassUse
from .evaluate import (EncodedDataset, PadCollator, cpu_bf16_units, encode_texts, eval_loader,
                       predict_probs)
from .labels import get_scheme
from .metrics import compute_metrics, format_metrics
from .model import (DEFAULT_BASE_MODEL, META_FILE, CheckpointError, DiskFullError,
                    atomic_write_json, clean_failed_saves, describe_device, fault_point,
                    is_disk_full, load_for_training, pick_device, recover_checkpoint,
                    save_checkpoint_atomic)
from .runs import (LAUNCHED_ENV, StepsWriter, append_metrics, read_meta, read_status,
                   run_has_state, run_paths, truncate_metrics, truncate_steps, write_status)

STATE_JSON = "training_state.json"
STATE_TENSORS = "training_state.safetensors"
META_FORMAT = "reviewbert/1"
SPLITS = ("train", "validation", "test")
GROUPS = ("basic", "advanced", "data", "internal")  # how a form lays the knobs out
MIXED_PRECISIONS = ("auto", "no", "bf16", "fp16")


class ConfigError(ValueError):
    """Hyperparameters that cannot work (the CLI prints the message, exit status 2).

    ``errors`` maps each offending field to its message (each names the field)."""

    def __init__(self, message: str, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.errors = errors or {}


def _h(text: str, group: str, **kw) -> dict:
    return {"help": text, "group": group, **kw}


@dataclass
class TrainConfig:
    """Every knob of a run. The CLI flags, the training page and reviewbert.json
    ("hyperparameters") are all generated from / stored as this one dataclass.
    Each field's metadata has ``help``, ``group`` (one of GROUPS: "basic" = the
    seed's knobs, "advanced", "data", "internal" = speed/bookkeeping) and maybe
    ``choices``; ``config_errors`` checks values without raising."""
    # --- data (passed to data.build_splits) ---
    data: list[str] = field(default_factory=list, metadata=_h(
        "review file(s): JSON, JSONL or CSV; repeat the flag for several files", "data"))
    labels: int = field(default=5, metadata=_h("5 (1-5 stars) or 3 (negative/neutral/positive)",
                                               "basic", choices=(5, 3)))
    text_column: str | None = field(default=None, metadata=_h(
        "text column (default: guessed)", "data"))
    rating_column: str | None = field(default=None, metadata=_h(
        "rating column (default: guessed)", "data"))
    title_column: str | None = field(default=None, metadata=_h(
        "title column (default: guessed)", "data"))
    prepend_title: bool = field(default=False, metadata=_h(
        "prepend the review title to its text", "data"))
    min_tokens: int = field(default=0, metadata=_h(
        "drop reviews shorter than this many tokens (the seed report used 100)", "basic"))
    max_per_class: int | None = field(default=None, metadata=_h(
        "cap on reviews per class before splitting (default: all of the smallest class; "
        "with class_balance resample/weighted, all of each class)", "advanced"))
    class_balance: str = field(default="undersample", metadata=_h(
        "how training uses the classes (validation and test stay balanced, the same reviews "
        "either way): undersample = a balanced training split, every class cut to the "
        "rarest; resample = every training review, each epoch a fresh balanced draw; "
        "weighted = every training review, loss weighted n_total/(n_classes*n_class)",
        "advanced", choices=CLASS_BALANCE))
    fractions: tuple[float, float, float] = field(default=(0.7, 0.1, 0.2), metadata=_h(
        "train/validation/test fractions", "data", nargs=3))
    split_seed: int = field(default=42, metadata=_h("seed of the balanced split", "data"))
    # --- model ---
    base_model: str = field(default=DEFAULT_BASE_MODEL, metadata=_h(
        "base encoder: HF hub name or local folder; the default is embedded (no network)",
        "advanced"))
    max_length: int = field(default=256, metadata=_h(
        "truncate reviews to this many tokens", "basic"))
    freeze_encoder: bool = field(default=False, metadata=_h(
        "train only the classifier on frozen BERT features (feature-based approach)",
        "advanced"))
    # --- optimisation ---
    epochs: int = field(default=3, metadata=_h("training epochs", "basic"))
    batch_size: int = field(default=8, metadata=_h(
        "reviews per step and process (the seed used 6)", "basic"))
    # 5e-5, the usual BERT fine-tuning rate (the seed's 1e-5 was for the 5x larger
    # bert-base). bench/train_throughput.py, one epoch on 700 reviews, 3 seeds each,
    # 1,000 test reviews: batch 8 at 5e-5 with class-mixed length groups 42.7% (the
    # HF Trainer baseline at batch 6, 5e-5: 42.9%); batch 16 at 1e-4 36.4%, batch 8
    # at 1e-4 36.5%, batch 6 at 5e-5 without class mixing 39.7%.
    lr_bert: float = field(default=5e-5, metadata=_h(
        "learning rate of the BERT encoder", "basic"))
    lr_classifier: float = field(default=1e-3, metadata=_h(
        "learning rate of the (freshly initialised) classifier, as in the seed", "basic"))
    weight_decay: float = field(default=0.01, metadata=_h(
        "AdamW weight decay (not applied to biases and LayerNorm weights)", "basic"))
    lr_decay: float = field(default=0.5, metadata=_h(
        "multiply learning rates by this ...", "basic"))
    lr_step_epochs: int = field(default=5, metadata=_h(
        "... every this many epochs (StepLR)", "basic"))
    layer_lr_decay: float = field(default=1.0, metadata=_h(
        "layer-wise LR decay: layer l of L gets lr_bert*decay^(L-l), embeddings l=0; 1.0 = off",
        "advanced"))
    warmup_ratio: float = field(default=0.0, metadata=_h(
        "linear warm-up over this fraction of all steps (0 = none, as in the seed)", "advanced"))
    max_grad_norm: float = field(default=1.0, metadata=_h(
        "gradient clipping norm (0 = off)", "advanced"))
    ordinal_sigma: float = field(default=0.0, metadata=_h(
        "ordinal soft labels (SORD): train on targets q_k ∝ exp(-(k-y)²/(2σ²)) instead of "
        "one-hot, so a 4-star guess for a 5-star review costs less than a 1-star guess; "
        "σ in classes, 0 = hard labels (plain cross-entropy)", "advanced"))
    teachers: list[str] = field(default_factory=list, metadata=_h(
        "knowledge distillation: checkpoint folder(s) of earlier runs on the same split "
        "(checked); the training target mixes each review's label with the teachers' mean "
        "probabilities for it; repeat the flag for several", "advanced"))
    distill_weight: float = field(default=0.5, metadata=_h(
        "with teachers: the teachers' share α of the training target (1 − α: the review's "
        "own label)", "advanced"))
    seed: int = field(default=42, metadata=_h(
        "seed for initialisation, shuffling and dropout", "advanced"))
    # --- speed / bookkeeping ---
    eval_batch_size: int = field(default=64, metadata=_h("batch size for evaluation", "internal"))
    train_eval_max: int = field(default=2000, metadata=_h(
        "evaluate the train split on a fixed random subset of at most this many reviews "
        "(0 = all); validation and test are always evaluated in full", "internal"))
    group_by_length: bool = field(default=True, metadata=_h(
        "batch reviews of similar length together (less padding)", "advanced"))
    num_workers: int = field(default=0, metadata=_h(
        "DataLoader worker processes (batches are pre-tokenized, so 0 is usually best)",
        "internal"))
    mixed_precision: str = field(default="auto", metadata=_h(
        "autocast of the training step: auto (bf16 where it is measured faster at the same "
        "accuracy: a CPU with AMX-BF16 or AVX512-BF16 units, detected at run time, or a GPU "
        "with bf16; fp32 elsewhere), no (fp32), bf16 (emulated and slower on a CPU without "
        "those units) or fp16 (GPU only); evaluation and checkpoints stay fp32", "advanced",
        choices=MIXED_PRECISIONS))
    save_every_steps: int = field(default=200, metadata=_h(
        "also save last/ every this many steps, so --resume continues mid-epoch "
        "(0 = epoch ends only)", "internal"))
    # mlflow/wandb are not wired: TensorBoard needs no server and no account.
    report_to: str = field(default="none", metadata=_h(
        "experiment tracker: none, or tensorboard (event files in OUT/tensorboard/)",
        "advanced", choices=("none", "tensorboard")))

    def __post_init__(self):
        errors = field_errors(asdict(self))
        if errors:
            raise ConfigError("; ".join(errors.values()), errors)
        self.data = [str(p) for p in (self.data or [])]
        self.teachers = [str(p) for p in (self.teachers or [])]
        self.fractions = tuple(float(f) for f in self.fractions)
        # a form or a JSON file may say 3.0 for 3, or 1 for 1.0
        hints = _field_types()
        for f in fields(self):
            v = getattr(self, f.name)
            if hints[f.name] is int and isinstance(v, float):
                setattr(self, f.name, int(v))
            elif hints[f.name] is float and isinstance(v, int):
                setattr(self, f.name, float(v))

    @classmethod
    def from_dict(cls, d: dict, strict: bool = False) -> "TrainConfig":
        """From reviewbert.json's "hyperparameters" (unknown keys from other versions
        ignored) or, with ``strict``, from a --config file (unknown keys: ConfigError)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if strict and unknown:
            raise ConfigError(f"unknown field(s): {', '.join(unknown)}",
                              {k: f"{k} is not a TrainConfig field" for k in unknown})
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def validate_field(cls, name: str, value) -> str | None:
        """The ConfigError message for one field's value (it names the field), or None."""
        if name not in _RULES:
            return f"{name} is not a TrainConfig field"
        ok, need = _RULES[name]
        try:
            good = ok(value)
        except (TypeError, ValueError):
            good = False
        return None if good else f"{name} {need}, got {value!r}"


# ------------------------------------------------------------- validation
def _is_int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or \
        (isinstance(v, float) and v.is_integer())


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_col(v) -> bool:
    return v is None or (isinstance(v, str) and bool(v.strip()))


def _is_fractions(v) -> bool:
    v = list(v)
    return len(v) == 3 and all(_is_num(x) and x >= 0 for x in v) and abs(sum(v) - 1) <= 1e-6


# field -> (is the value fine?, what it must be). The message is "<field> <must ...>, got <v>".
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "data": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(p, (str, os.PathLike))
                                                            for p in v),
             "must be a list of file paths"),
    "labels": (lambda v: _is_int(v) and v in (5, 3), "must be 5 or 3"),
    "text_column": (_is_col, "must be a column name or empty (guess)"),
    "rating_column": (_is_col, "must be a column name or empty (guess)"),
    "title_column": (_is_col, "must be a column name or empty (guess)"),
    "prepend_title": (lambda v: isinstance(v, bool), "must be true or false"),
    "min_tokens": (lambda v: _is_int(v) and v >= 0, "must be an integer >= 0"),
    "max_per_class": (lambda v: v is None or (_is_int(v) and v >= 1),
                      "must be empty (all reviews) or an integer >= 1"),
    "class_balance": (lambda v: v in CLASS_BALANCE, "must be " + ", ".join(CLASS_BALANCE[:-1])
                      + " or " + CLASS_BALANCE[-1]),
    "fractions": (_is_fractions, "must be three numbers >= 0 summing to 1"),
    "split_seed": (_is_int, "must be an integer"),
    "base_model": (lambda v: isinstance(v, str) and bool(v.strip()),
                   "must be a model name or folder"),
    "max_length": (lambda v: _is_int(v) and v >= 8, "must be an integer >= 8"),
    "freeze_encoder": (lambda v: isinstance(v, bool), "must be true or false"),
    "epochs": (lambda v: _is_int(v) and v >= 1, "must be an integer >= 1"),
    "batch_size": (lambda v: _is_int(v) and v >= 1, "must be an integer >= 1"),
    # > 0, not >= 0, for both rates: a zero rate trains nothing (to keep BERT fixed,
    # use freeze_encoder; a classifier that never learns is never what was meant).
    "lr_bert": (lambda v: _is_num(v) and v > 0, "must be > 0"),
    "lr_classifier": (lambda v: _is_num(v) and v > 0, "must be > 0"),
    "weight_decay": (lambda v: _is_num(v) and v >= 0, "must be >= 0"),
    "lr_decay": (lambda v: _is_num(v) and 0 < v <= 1, "must be in (0, 1]"),
    "lr_step_epochs": (lambda v: _is_int(v) and v >= 1, "must be an integer >= 1"),
    "layer_lr_decay": (lambda v: _is_num(v) and 0 < v <= 1, "must be in (0, 1]"),
    "warmup_ratio": (lambda v: _is_num(v) and 0 <= v < 1, "must be in [0, 1)"),
    "max_grad_norm": (lambda v: _is_num(v) and v >= 0, "must be >= 0 (0 = off)"),
    "ordinal_sigma": (lambda v: _is_num(v) and 0 <= v <= 10, "must be in [0, 10] (0 = off)"),
    "teachers": (lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(p, (str, os.PathLike)) and str(p).strip() for p in v),
        "must be a list of checkpoint folders"),
    "distill_weight": (lambda v: _is_num(v) and 0 <= v <= 1, "must be in [0, 1]"),
    "seed": (_is_int, "must be an integer"),
    "eval_batch_size": (lambda v: _is_int(v) and v >= 1, "must be an integer >= 1"),
    "train_eval_max": (lambda v: _is_int(v) and v >= 0, "must be an integer >= 0 (0 = all)"),
    "group_by_length": (lambda v: isinstance(v, bool), "must be true or false"),
    "num_workers": (lambda v: _is_int(v) and v >= 0, "must be an integer >= 0"),
    "mixed_precision": (lambda v: v in MIXED_PRECISIONS, "must be auto, no, bf16 or fp16"),
    "save_every_steps": (lambda v: _is_int(v) and v >= 0, "must be an integer >= 0 (0 = off)"),
    "report_to": (lambda v: v in ("none", "tensorboard"), "must be none or tensorboard"),
}


@functools.cache
def _field_types() -> dict[str, type]:
    """int/float/... per field (Optional unwrapped), for normalising form values."""
    import typing
    out = {}
    for name, typ in typing.get_type_hints(TrainConfig).items():
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        out[name] = args[0] if args and typing.get_origin(typ) is not tuple else typ
    return out


@functools.cache
def list_fields() -> frozenset[str]:
    """TrainConfig's list fields (data, teachers): the CLI takes each as a flag repeated
    once per item, the form as several values."""
    import typing
    return frozenset(name for name, typ in typing.get_type_hints(TrainConfig).items()
                     if typing.get_origin(typ) is list)


def field_errors(d: dict) -> dict[str, str]:
    """{field: message} for the given fields' values (type and range; no files checked)."""
    return {k: m for k, v in d.items() if (m := TrainConfig.validate_field(k, v))}


def config_errors(d: dict, require_data: bool = True) -> dict[str, str]:
    """{field: message} for a config dict about to be launched, without raising: what
    ``TrainConfig(**d)`` would reject, plus (``require_data``) no data file or a data
    file that does not exist. Missing fields take their defaults."""
    errors = field_errors(d)
    if require_data and "data" not in errors:
        paths = list(d.get("data") or [])
        missing = [str(p) for p in paths if not Path(p).is_file()]
        if not paths:
            errors["data"] = "data must name at least one review file"
        elif missing:
            errors["data"] = f"data file not found: {', '.join(missing)}"
    if "teachers" not in errors:
        gone = [str(p) for p in d.get("teachers") or [] if not Path(p).is_dir()]
        if gone:
            errors["teachers"] = f"teacher checkpoint folder not found: {', '.join(gone)}"
    return errors


def config_fields(group: str | None = None) -> list:
    """TrainConfig's dataclass fields (all, or one of GROUPS), in declaration order."""
    return [f for f in fields(TrainConfig) if group is None or f.metadata.get("group") == group]


# Flags that may differ on --resume; everything else must match the stopped run.
RESUME_OVERRIDABLE = ("epochs", "save_every_steps", "eval_batch_size", "train_eval_max",
                      "num_workers", "report_to")


# ------------------------------------------------------------------ batching
def balanced_draw(labels, per_class: int, seed: int, epoch: int) -> np.ndarray:
    """The training reviews of one epoch under ``class_balance="resample"``: ``per_class``
    indices of each class, a pure function of (labels, seed, epoch), so a resumed run
    draws the same ones.

    Each class walks through seeded permutations of its reviews, ``per_class`` at a
    time: a class with m reviews shows m // per_class disjoint draws before any review
    comes back (then a new permutation). The rarest class (m == per_class) is all of
    it every epoch. Indices come out by class, in draw order.
    """
    labels = np.asarray(labels)
    out = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        per_cycle = max(1, len(members) // per_class)
        cycle, slot = divmod(int(epoch), per_cycle)
        order = np.random.default_rng([int(seed), int(c), cycle, 0x7E5A]).permutation(len(members))
        out.append(members[order[slot * per_class:(slot + 1) * per_class]])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


class LengthGroupedSampler(Sampler[int]):
    """Indices in a random order where consecutive batches have similar lengths.

    The order is a pure function of (seed, epoch): a resumed run replays the same
    epoch and skips the batches it already did. Set ``.epoch`` before iterating.
    ``group`` = batch_size * num_processes, the samples of one optimizer step
    across all processes, so every process gets a batch of similar length.

    With ``labels``, each step also mixes the classes. Review length goes with
    the rating (1-star reviews run longer than 5-star ones), so batches of
    neighbours in plain length order are mostly one class, and a run of such
    steps pulls the classifier from class to class: after one epoch on 700
    reviews that cost ~3 accuracy points against random batches of the same size
    (bench/train_throughput.py). Here a mega-batch is ordered by each review's
    length *rank within its class* (0 = shortest of its class ... 1 = longest),
    so a step takes the classes in proportion, each at a similar length quantile:
    nearly the padding saving, without the class runs.

    With ``resample_per_class`` (``class_balance="resample"``, needs ``labels``) an
    epoch orders only :func:`balanced_draw`'s reviews for that epoch, not all of them.
    """

    def __init__(self, lengths: list[int], group: int, seed: int, grouped: bool = True,
                 mega_batches: int = 50, labels: list[int] | None = None,
                 resample_per_class: int | None = None):
        self.lengths, self.group, self.seed = lengths, group, seed
        self.grouped, self.mega = grouped, mega_batches
        self.labels = None if labels is None else np.asarray(labels)
        self.per_class = resample_per_class
        if self.per_class is not None and self.labels is None:
            raise ValueError("resampling needs the labels")
        self.epoch = 0

    def __len__(self):
        if self.per_class is None:
            return len(self.lengths)
        return self.per_class * len(np.unique(self.labels))

    def _epoch_order(self, rng: np.random.Generator) -> np.ndarray:
        """This epoch's reviews in a random order: all of them, or the balanced draw."""
        if self.per_class is None:
            return rng.permutation(len(self.lengths))
        drawn = balanced_draw(self.labels, self.per_class, self.seed, self.epoch)
        return drawn[rng.permutation(len(drawn))]

    def _by_length(self, part: np.ndarray) -> np.ndarray:
        lengths = np.asarray(self.lengths)[part]
        if self.labels is None:
            return part[np.argsort(-lengths, kind="stable")]
        key = np.zeros(len(part))
        labels = self.labels[part]
        for c in np.unique(labels):
            members = np.flatnonzero(labels == c)
            ranks = np.argsort(np.argsort(-lengths[members], kind="stable"), kind="stable")
            key[members] = (ranks + 0.5) / len(members)
        return part[np.argsort(key, kind="stable")]

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        idx = self._epoch_order(rng)
        if self.grouped:
            size = self.group * self.mega
            idx = np.concatenate([self._by_length(idx[i:i + size])
                                  for i in range(0, len(idx), size)] or [idx])
            steps = [idx[i:i + self.group] for i in range(0, len(idx), self.group)]
            # sorted mega-batches would run long->short; shuffle the steps so the
            # model does not see a length (and so label) trend inside an epoch.
            # A short last step stays last.
            full = [s for s in steps if len(s) == self.group]
            tail = steps[len(full):]
            idx = np.concatenate([full[i] for i in rng.permutation(len(full))] + tail) \
                if steps else idx
        return iter(idx.tolist())


# ------------------------------------------------------------- optimisation
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


# ------------------------------------------------------- resume state (no pickle)
def save_training_state(folder: Path, optimizer, progress: dict, scaler=None) -> None:
    """AdamW moments + RNG into safetensors, counters into JSON. No pickle anywhere,
    so loading a resume state can never execute code."""
    from safetensors.torch import save_file
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
    import json

    from safetensors.torch import load_file
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


# ------------------------------------------------------------- stop signals
class StopFlag:
    """SIGINT/SIGTERM set a flag; the loop stops after the current step and saves."""

    def __init__(self):
        self.event = threading.Event()
        self._old = {}

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers only work there (e.g. called from a UI thread)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: the user really means it
        self.event.set()
        print(f"\n{signal.Signals(signum).name}: stopping after this step and saving last/ ...",
              file=sys.stderr, flush=True)

    def restore(self):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


# ------------------------------------------------------------- status / ETA
def _queue_fields(run_dir) -> dict:
    """What status.json says of how long this very process waited in the device queue
    (runs.device_slot), to carry into the statuses it writes next."""
    old = read_status(run_dir) or {}
    return {k: old[k] for k in ("device", "queued_at", "wait_seconds")
            if k in old and old.get("pid") == os.getpid()}


class PhaseStatus:
    """A ``progress(n)`` callback for work before the first step (scoring the
    distillation teachers): status.json says "running", what is being done, and an
    ETA from the rate so far, so the training page shows it as the CLI's tqdm does."""

    def __init__(self, run_dir, total: int, what: str, enabled: bool = True):
        self.run_dir, self.total, self.what, self.enabled = Path(run_dir), total, what, enabled
        self.done, self.t0, self.last = 0, time.time(), 0.0
        if enabled:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.keep = _queue_fields(run_dir)
            self.write()

    def write(self) -> None:
        spent = time.time() - self.t0
        eta = spent * (self.total - self.done) / self.done if self.done else None
        write_status(self.run_dir, {
            **self.keep, "state": "running", "step": 0, "total_steps": 0,
            "eta_seconds": None if eta is None else round(eta, 1),
            "message": f"{self.what}: {self.done:,} of {self.total:,} "
                       f"({100 * self.done / max(self.total, 1):.0f} %)"})

    def __call__(self, n: int) -> None:
        self.done += n
        if self.enabled and time.time() - self.last >= 2.0:
            self.last = time.time()
            self.write()


class Progress:
    """tqdm bar + status.json (main process only), with one ETA for both.

    ETA = remaining steps x seconds per training step (measured in this session)
    + remaining evaluations x the duration of the last one.
    """

    def __init__(self, run_dir, enabled: bool, total_steps: int, step: int, epochs: int,
                 global_batch: int):
        from tqdm.auto import tqdm
        self.run_dir, self.enabled, self.total, self.epochs = run_dir, enabled, total_steps, epochs
        self.global_batch = global_batch
        self.start_step, self.train_s, self.eval_s, self.last_write = step, 0.0, None, 0.0
        self.train_cpu_s = 0.0  # process CPU time in steps: a load-independent speed measure
        self.bar = tqdm(total=total_steps, initial=step, unit="step", disable=not enabled,
                        file=sys.stderr, dynamic_ncols=True)
        self.keep = _queue_fields(run_dir) if enabled else {}

    def eta(self, step: int, epochs_done: int) -> float | None:
        done = step - self.start_step
        if done <= 0:
            return None
        evals = (self.epochs - epochs_done) * (self.eval_s or 0.0)
        return (self.total - step) * self.train_s / done + evals

    def samples_per_s(self, step: int) -> float | None:
        done = step - self.start_step
        return done * self.global_batch / self.train_s if done > 0 and self.train_s > 0 else None

    def status(self, state: str, step: int, epochs_done: int, message: str = "",
               force: bool = True, extra: dict | None = None):
        if not self.enabled or (not force and time.time() - self.last_write < 2.0):
            return
        self.last_write = time.time()
        eta = self.eta(step, epochs_done) if state == "running" else 0.0
        sps = self.samples_per_s(step)
        write_status(self.run_dir, {
            **self.keep,
            "state": state, "step": step, "total_steps": self.total,
            "epoch": min(epochs_done + 1, self.epochs), "epochs": self.epochs,
            "eta_seconds": None if eta is None else round(eta, 1),
            "samples_per_s": None if sps is None else round(sps, 2),
            "message": message, "pid": os.getpid(),
            "train_seconds": round(self.train_s, 2), "train_cpu_seconds": round(self.train_cpu_s, 2),
            **(extra or {})})


# ------------------------------------------------------------------- hooks
class TrainHooks:
    """Callbacks from the training loop; subclass and override what you need.

    - ``after_step(info)``, after every optimizer step: epoch (1-based), step
      (optimizer steps so far), batch (batches done in this epoch),
      steps_per_epoch, total_steps, lr (lr_bert x schedule), time (unix
      seconds), loss: that step's loss as a detached 0-d tensor on the device.
      ``float()`` it only when needed: on a GPU every read waits for the device
      (StepLog reads a second's worth at once).
    - ``after_epoch(info)``, after an epoch's evaluation and saves: epoch,
      epochs, step, lr, time, train / validation / test (metric dicts: loss,
      auc, accuracy, relaxed_accuracy, n), best (the best epoch so far), is_best.
    - ``before_save(info)``, before last/ or best/ is written: kind, epoch, step.
    - ``on_end(info)``, once when the loop ends: state (finished, stopped or
      failed), step.

    A truthy return from ``after_step`` or ``after_epoch`` stops the run as a
    SIGINT would (last/ saved, state "stopped", ``--resume`` continues), e.g. a
    pruned search trial. Hooks run on every process under DDP; a stop request
    is shared, so all processes stop at the same step.
    """

    def after_step(self, info: dict):
        return None

    def after_epoch(self, info: dict):
        return None

    def before_save(self, info: dict):
        return None

    def on_end(self, info: dict):
        return None


class _BufferedSteps(TrainHooks):
    """Step rows wait in memory for up to ``flush_s`` and go out together: one device
    sync for all their losses (reading a loss every step would stall a GPU), then
    :meth:`emit` with each row's loss as a float."""

    def __init__(self, flush_s: float):
        self.flush_s, self.rows, self.last = flush_s, [], time.monotonic()

    def after_step(self, info):
        self.rows.append(info)
        if time.monotonic() - self.last >= self.flush_s:
            self.flush()

    def flush(self):
        if self.rows:
            losses = torch.stack([r["loss"].float() for r in self.rows]).cpu().tolist()
            self.emit(list(zip(self.rows, losses)))
            self.rows = []
        self.last = time.monotonic()

    def emit(self, rows: list[tuple[dict, float]]) -> None:
        raise NotImplementedError


class StepLog(_BufferedSteps):
    """steps.jsonl (format: runs.py), the default hook of the main process.

    Flushed before every save, so steps.jsonl always reaches the step that last/ holds.
    """

    def __init__(self, run_dir, flush_s: float = 1.0):
        super().__init__(flush_s)
        self.writer = StepsWriter(run_dir)

    def emit(self, rows):
        self.writer.write([{"epoch": r["epoch"], "step": r["step"], "loss": round(loss, 6),
                            "lr": r["lr"], "time": round(r["time"], 3)} for r, loss in rows])

    def before_save(self, info):
        self.flush()

    def on_end(self, info):
        self.flush()
        self.writer.close()


class TrackerLog(_BufferedSteps):
    """Per-step loss and lr, per-epoch metrics, to Accelerate's trackers (``--report-to``)."""

    def __init__(self, accelerator, flush_s: float = 5.0):
        super().__init__(flush_s)
        self.acc = accelerator

    def emit(self, rows):
        for r, loss in rows:
            self.acc.log({"train/step_loss": loss, "train/lr": r["lr"]}, step=r["step"])

    def after_epoch(self, info):
        self.flush()
        values = {f"{split}/{k}": info[split][k] for split in SPLITS
                  for k in ("loss", "auc", "accuracy", "relaxed_accuracy")
                  if isinstance(info[split].get(k), (int, float))}
        self.acc.log({**values, "epoch": info["epoch"]}, step=info["step"])

    def on_end(self, info):
        self.flush()
        # tracker.finish(), not accelerator.end_training(): that also tears down the
        # process group, and train() may be called again in this process (a search)
        for t in self.acc.trackers:
            t.finish()


# ------------------------------------------------------------------ helpers
def _set_threads(accelerator) -> None:
    """On CPU, give each process its share of the cores, unless OMP_NUM_THREADS says
    otherwise (torchrun sets it to 1 per process, which is right there too).

    A run started by ``runs.launch`` (the training page), alone on a CPU, leaves
    room for the app beside it: nice +10 and one core fewer
    (REVIEWBERT_TRAIN_NICE / REVIEWBERT_TRAIN_THREADS override), so that a
    prediction on the main page stays within ~3x its idle time
    (bench/predict_while_training.py).
    """
    if accelerator.device.type != "cpu":
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    background = os.environ.get(LAUNCHED_ENV) == "1" and accelerator.num_processes == 1 \
        and int(os.environ.get("WORLD_SIZE", "1")) == 1
    if background:
        _lower_priority(int(os.environ.get("REVIEWBERT_TRAIN_NICE", "10")))
        threads = os.environ.get("REVIEWBERT_TRAIN_THREADS") or \
            os.environ.get("OMP_NUM_THREADS") or max(1, cores - 1)
        torch.set_num_threads(max(1, int(threads)))
        # the tokenizers' Rust pool (tokenizing the data) reads this when it starts
        os.environ.setdefault("RAYON_NUM_THREADS", str(torch.get_num_threads()))
        return
    if os.environ.get("OMP_NUM_THREADS"):
        return
    local = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    torch.set_num_threads(max(1, cores // max(1, local)))


def _lower_priority(nice: int) -> None:
    """Add ``nice`` to every thread of this process, and put them in Linux's SCHED_IDLE
    class (unless REVIEWBERT_TRAIN_SCHED=normal). Linux keeps both per thread (new
    threads inherit their creator's), so os.nice() alone would leave threads started
    earlier (tqdm's monitor, a thread pool) at full priority.

    Why SCHED_IDLE and not nice alone: a prediction runs an OpenMP region on every core
    and waits at its barriers for its slowest thread. With nice +10, the thread that
    shares a core with training still waits for the scheduler's time slice, and a
    256-token prediction took 11x its idle time on 2 cores
    (bench/predict_while_training.py); a SCHED_IDLE thread yields its core at once.
    """
    if nice <= 0:
        return
    idle = os.environ.get("REVIEWBERT_TRAIN_SCHED", "idle") == "idle" and hasattr(os, "SCHED_IDLE")
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            cur = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, cur + nice))
            if idle:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass  # the thread ended meanwhile


def _better(new: dict, old: dict | None) -> bool:
    """Best = higher validation accuracy; a tie goes to the lower validation loss."""
    if old is None:
        return True
    na, oa = new.get("accuracy") or -1.0, old.get("accuracy") or -1.0
    if na != oa:
        return na > oa
    return (new.get("loss") or math.inf) < (old.get("loss") or math.inf)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _metric_fields(m: dict) -> dict:
    keep = ("loss", "auc", "accuracy", "relaxed_accuracy", "n", "auc_note")
    return {k: m[k] for k in keep if k in m}


def resume_config(run_dir, overrides: dict | None = None) -> tuple[TrainConfig, list[str]]:
    """The stopped run's TrainConfig, with the few overridable flags applied.

    Returns (config, ignored flag names): other hyperparameters cannot change
    mid-run (the optimizer groups and the data split would no longer match).
    """
    meta = read_meta(run_dir)
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


# ==================================================================== train
def train(cfg: TrainConfig, out_dir, *, resume: bool = False, splits=None, accelerator=None,
          log=print, hooks: list[TrainHooks] | None = None) -> dict:
    """Train per ``cfg`` into run folder ``out_dir``; returns the final reviewbert.json dict.

    ``splits`` (a data.Splits) skips reading files (tests); otherwise they are
    built from ``cfg.data``, or, on resume, rebuilt from the run's reviewbert.json.
    ``hooks`` run beside the default ones (steps.jsonl, ``report_to``).
    A failure before or during training is recorded in status.json ("failed",
    with the error as message) and re-raised.
    """
    if accelerator is None:
        accelerator = make_accelerator(cfg, out_dir)
    if not resume and run_has_state(out_dir):
        raise CheckpointError(f"{out_dir} already holds a run: pass --resume to continue it, "
                              "or choose another --out")
    try:
        return _train(cfg, out_dir, resume, splits, accelerator, log, list(hooks or []))
    except BaseException as e:
        full = not isinstance(e, DiskFullError) and is_disk_full(e)
        if full:  # a full disk outside a checkpoint save (metrics, steps, status): one clear error
            e = DiskFullError(f"the disk is full (no space left on device) while writing "
                              f"{getattr(e, 'filename', None) or out_dir}: last/ keeps the last "
                              "saved state. Free some space, then continue with --resume")
        if accelerator.is_main_process:
            st = read_status(out_dir) or {}
            if resume and st.get("state") == "stopped" and not isinstance(e, KeyboardInterrupt):
                # still a stopped run (last/ intact, resumable), but say why this resume failed
                try:
                    write_status(out_dir, {**st, "message": f"resume failed: "
                                           f"{type(e).__name__}: {e}"})
                except OSError:
                    pass
            elif st.get("state") not in ("stopped", "failed", "finished"):
                interrupted = isinstance(e, KeyboardInterrupt)
                try:  # on a full disk even this small file may not fit
                    write_status(out_dir, {**st, "state": "stopped" if interrupted else "failed",
                                           "eta_seconds": None, "pid": os.getpid(),
                                           "message": "interrupted" if interrupted
                                           else f"{type(e).__name__}: {e}"})
                except OSError:
                    pass
        if full:
            raise e from None
        raise


def resolve_mixed_precision(mixed_precision: str, device) -> str:
    """``"auto"`` → ``"bf16"`` where bf16 autocast is measured faster at the same accuracy:
    a CPU with AMX-BF16 or AVX512-BF16 units (the README's "bf16 training on a CPU" gives
    the step times and the accuracy of the demo recipe both ways) or a CUDA GPU that
    supports bf16; ``"no"`` (fp32) elsewhere, where bf16 is emulated on a CPU and slower.
    Any other value is returned as given."""
    if mixed_precision != "auto":
        return mixed_precision
    device = torch.device(device)
    if device.type == "cpu":
        return "bf16" if cpu_bf16_units() else "no"
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "no"
    return "no"


def make_accelerator(cfg: TrainConfig, out_dir):
    """The run's Accelerator: device, processes, ``mixed_precision``, ``report_to``.

    cpu=True on a machine with no GPU: without it Accelerate ignores torchrun's
    WORLD_SIZE there and every process would train alone (gloo needs the hint).
    Accelerate keeps one state per process and refuses a second, different mixed
    precision; a search or a test trains several configs in one process, so that
    state is dropped first (as transformers' Trainer does; the process group stays).
    """
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    device = pick_device()
    mp = resolve_mixed_precision(cfg.mixed_precision, device)
    if AcceleratorState._shared_state.get("_mixed_precision", mp) != mp:
        AcceleratorState._reset_state()
    tracking = {} if cfg.report_to == "none" else \
        {"log_with": cfg.report_to, "project_dir": str(out_dir)}
    try:
        return Accelerator(mixed_precision=mp, cpu=device.type == "cpu", **tracking)
    except ValueError as e:  # e.g. fp16 without a GPU
        raise ConfigError(f"mixed_precision={cfg.mixed_precision}: {e}",
                          {"mixed_precision": str(e)}) from None


def _train(cfg, out_dir, resume, splits, accelerator, log, hooks) -> dict:
    run = setup(cfg, out_dir, resume, splits, accelerator, log, hooks)
    end = "failed"
    run.stop.install()
    try:
        for epoch in range(run.epochs_done, cfg.epochs):
            if train_epoch(run, epoch):  # stopped mid-epoch; last/ holds this step
                end = "stopped"
                return build_meta(run)
            results = evaluate_epoch(run, epoch)
            record_epoch(run, epoch, results)
            if stop_requested(run) and run.epochs_done < cfg.epochs:
                run.progress.status(
                    "stopped", run.step, run.epochs_done,
                    f"stopped after epoch {run.epochs_done}; continue with --resume")
                end = "stopped"
                return build_meta(run)
        end = "finished"
        end_hooks(run, end)  # steps.jsonl complete before status says finished
    finally:
        run.stop.restore()
        run.progress.bar.close()
        if end != "finished":
            end_hooks(run, end)

    best = run.best
    run.progress.status("finished", run.step, cfg.epochs,
                        f"best epoch {best['epoch']}: validation accuracy "
                        f"{100 * (best['validation'].get('accuracy') or 0):.1f}%"
                        if best else "done")
    run.accelerator.wait_for_everyone()
    return build_meta(run)


# ------------------------------------------------------------ the run's state
@dataclass
class _Run:
    """What the named steps share: ``setup`` builds it, the steps advance its counters."""
    cfg: TrainConfig
    out_dir: Path
    accelerator: Any
    say: Callable
    scheme: Any
    tokenizer: Any
    datasets: dict            # split -> EncodedDataset
    eval_dls: dict            # split -> DataLoader (train = a fixed subset)
    data_cfg: dict | None     # reviewbert.json "data"
    report: Any               # data.DataReport, or None
    old_meta: dict            # reviewbert.json of the run being resumed
    model: Any                # as prepared by Accelerate (DDP-wrapped under torchrun)
    unwrapped: Any
    optimizer: Any
    sampler: LengthGroupedSampler
    class_use: ClassUse       # how the training split's classes are used (class_balance)
    loss_fn: torch.nn.Module  # losses.class_loss: weighted, ordinal, or DistillLoss (indices)
    train_dl: Any
    steps_per_epoch: int
    total_steps: int
    device_desc: str
    epochs_done: int
    batches_done: int         # of the current epoch, when resumed mid-epoch
    step: int                 # optimizer steps so far
    best: dict | None
    progress: Progress | None = None
    teachers: list | None = None  # distillation: describe_teachers(), for reviewbert.json
    stop: StopFlag = field(default_factory=StopFlag)
    hooks: list = field(default_factory=list)

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def paths(self):
        return run_paths(self.out_dir)



# -------------------------------------------------------------------- setup
def setup(cfg: TrainConfig, out_dir, resume: bool, splits, accelerator, log,
          hooks: list | None = None) -> _Run:
    """Resume state -> data (tokenized once) -> model -> optimizer -> Accelerate ->
    the run folder (status "running", default hooks). RNG use is in this order."""
    from accelerate.utils import set_seed

    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside ours at every save

    main = accelerator.is_main_process
    say = log if main else (lambda *a, **k: None)
    _set_threads(accelerator)
    rp = run_paths(out_dir)
    scheme = get_scheme(cfg.labels)

    # ---- 1. resume state (last/ holds weights + optimizer + counters) -------
    state, tensors, old_meta = None, None, {}
    if resume:
        for folder in (rp.last, rp.best):
            recover_checkpoint(folder)  # a crash between a save's two renames
            if main:
                clean_failed_saves(folder)  # ... or mid-write (a model's size each)
        old_meta = read_meta(out_dir)
        if (rp.last / STATE_JSON).exists():
            state, tensors = load_training_state(rp.last)
        else:
            say(f"{rp.last} has no resume state: starting {out_dir} from the beginning")
    if state and state.get("num_processes", 1) != accelerator.num_processes:
        raise CheckpointError(
            f"run was saved with {state['num_processes']} processes, resuming with "
            f"{accelerator.num_processes}: the mid-epoch position would not match")

    # ---- 2. data: balanced splits, tokenized once --------------------------
    set_seed(cfg.seed)
    from .model import load_tokenizer
    tokenizer = load_tokenizer(str(rp.last) if state else cfg.base_model)
    splits, data_cfg = _load_splits(cfg, splits, scheme, tokenizer, state, old_meta)
    report = getattr(splits, "report", None)
    if report is not None and not state:
        say(report.format())
    if not splits.train:
        raise ConfigError("the training split is empty")
    datasets, eval_sets = _encode_splits(cfg, splits, tokenizer, say)
    class_use = ClassUse.of(cfg.class_balance,
                            np.bincount(datasets["train"].labels, minlength=scheme.num_labels))
    teachers, soft = _teacher_targets(cfg, data_cfg, scheme, splits, accelerator, say, out_dir)

    # ---- 3. model -------------------------------------------------------------
    if state:
        from .model import load_checkpoint
        model, _, _ = load_checkpoint(rp.last, device=torch.device("cpu"))
    else:
        model, _ = load_for_training(cfg.base_model, scheme)
    # training_loss computes the loss, not the model: record the kind it would have set
    model.config.problem_type = "single_label_classification"
    if cfg.freeze_encoder:
        for p in model.base_model.parameters():
            p.requires_grad_(False)

    # ---- 4. optimizer (moments restored on resume) ----------------------------
    optimizer = torch.optim.AdamW(param_groups(model, cfg))
    if tensors is not None:
        restore_optimizer(optimizer, tensors)

    # ---- 5. batches ----------------------------------------------------------
    pad = PadCollator(tokenizer.pad_token_id)
    sampler = LengthGroupedSampler(datasets["train"].lengths,
                                   cfg.batch_size * accelerator.num_processes,
                                   seed=cfg.seed, grouped=cfg.group_by_length,
                                   labels=datasets["train"].labels,
                                   resample_per_class=class_use.draw_per_class)
    # Each iteration over a DataLoader draws a worker seed from its generator; a
    # private one keeps the global RNG (dropout) identical between a resumed run
    # and one that never stopped.
    train_set = datasets["train"]
    if soft is not None:  # batches carry review indices; DistillLoss holds labels and targets
        train_set = EncodedDataset(train_set.ids, range(len(train_set)))
    train_dl = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler,
                          collate_fn=pad, num_workers=cfg.num_workers,
                          generator=torch.Generator().manual_seed(cfg.seed))
    eval_dls = {k: eval_loader(v, cfg.eval_batch_size, tokenizer.pad_token_id, cfg.num_workers)
                for k, v in eval_sets.items() if len(v)}

    # ---- 6. Accelerate: device, DDP, mixed precision, sharded loaders ---------
    model, optimizer, train_dl = accelerator.prepare(model, optimizer, train_dl)
    # prepare() patched forward with autocast (when mixed); take it off, so evaluation
    # stays fp32: training_loss runs the step under accelerator.autocast() instead
    unwrapped = accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    eval_dls = {k: accelerator.prepare(v) for k, v in eval_dls.items()}
    step = state["step"] if state else 0
    if state and main and "rng/torch_cpu" in tensors:
        torch.set_rng_state(tensors["rng/torch_cpu"])
        if "rng/cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng/cuda"])
    else:  # different dropout per process
        torch.manual_seed(cfg.seed + 1000 * accelerator.process_index + step)
    if state and state.get("scaler") and accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(state["scaler"])

    device_desc = describe_device(accelerator.device)
    if accelerator.num_processes > 1:
        device_desc += f" x {accelerator.num_processes} processes"
    if accelerator.mixed_precision != "no":
        device_desc += f", {describe_mixed_precision(accelerator)}"
    run = _Run(cfg=cfg, out_dir=Path(out_dir), accelerator=accelerator, say=say, scheme=scheme,
               tokenizer=tokenizer, datasets=datasets, eval_dls=eval_dls, data_cfg=data_cfg,
               report=report, old_meta=old_meta, model=model,
               unwrapped=unwrapped, optimizer=optimizer, sampler=sampler,
               class_use=class_use, loss_fn=losses.class_loss(
                   scheme.num_labels, class_use.weights, cfg.ordinal_sigma, accelerator.device,
                   teacher_probs=soft, train_labels=datasets["train"].labels,
                   distill_weight=cfg.distill_weight),
               teachers=teachers,
               train_dl=train_dl, steps_per_epoch=len(train_dl),
               total_steps=len(train_dl) * cfg.epochs, device_desc=device_desc,
               epochs_done=state["epochs_done"] if state else 0,
               batches_done=state["batches_done"] if state else 0, step=step,
               best=(state or {}).get("best") or (old_meta.get("best") if state else None))

    # ---- 7. the run folder ----------------------------------------------------
    if main:
        rp.root.mkdir(parents=True, exist_ok=True)
        truncate_metrics(out_dir, run.epochs_done)  # resume: forget epochs not in last/
        truncate_steps(out_dir, run.step)           # ... and steps
        atomic_write_json(rp.meta, build_meta(run))
        say(f"device: {device_desc}; {len(datasets['train'])} train reviews, "
            f"{run.steps_per_epoch} steps/epoch x {cfg.epochs} epochs")
        if state:
            say(f"resuming {out_dir} at step {run.step} (epoch {run.epochs_done + 1}, "
                f"batch {run.batches_done}/{run.steps_per_epoch})")
    run.hooks = _default_hooks(run) + list(hooks or [])
    run.progress = Progress(out_dir, main, run.total_steps, run.step, cfg.epochs,
                            cfg.batch_size * accelerator.num_processes)
    run.progress.status("running", run.step, run.epochs_done, "starting")
    return run


def _teacher_targets(cfg, data_cfg, scheme, splits, accelerator, say, out_dir):
    """(describe_teachers(), [n_train, labels] mean teacher probabilities), or (None, None)
    without teachers. Teachers on another split are a ConfigError (reviewbert.distill)."""
    if not cfg.teachers:
        return None, None
    from . import distill
    try:
        infos = distill.check_teachers(cfg.teachers, data_cfg, scheme.num_labels)
    except distill.TeacherError as e:
        raise ConfigError(str(e), {"teachers": str(e)}) from e
    t0 = time.time()
    texts = [e.text for e in splits.train]
    status = PhaseStatus(out_dir, len(texts) * len(infos),
                         f"distillation: {len(infos)} teacher(s) scoring the training reviews",
                         enabled=accelerator.is_main_process)
    with distill.fork_rng():  # scoring must not move the run's RNG (dropout, shuffles)
        probs = distill.teacher_probs(infos, texts, accelerator.device,
                                      batch_size=cfg.eval_batch_size,
                                      show_progress=accelerator.is_main_process,
                                      on_progress=status)
    say(f"distillation: {len(infos)} teacher(s) scored {len(probs)} training reviews in "
        f"{time.time() - t0:.0f}s; target = {cfg.distill_weight:g} x teachers + "
        f"{1 - cfg.distill_weight:g} x label")
    return distill.describe_teachers(infos), probs


def _load_splits(cfg, splits, scheme, tokenizer, state, old_meta):
    """(splits, reviewbert.json "data"): given, the resumed run's own, or read from cfg.data."""
    if splits is not None:
        return splits, None
    from . import data
    if state and old_meta.get("data"):  # the very split the run started with
        return data.splits_from_meta(old_meta, tokenizer=tokenizer), old_meta["data"]
    if not cfg.data:
        raise data.DataError("no data files given (--data FILE)")
    kw = dict(seed=cfg.split_seed, fractions=cfg.fractions, class_balance=cfg.class_balance,
              max_per_class=cfg.max_per_class, min_tokens=cfg.min_tokens,
              options=data.ReadOptions(text_column=cfg.text_column,
                                       rating_column=cfg.rating_column,
                                       title_column=cfg.title_column,
                                       prepend_title=cfg.prepend_title))
    return (data.build_splits(cfg.data, scheme, tokenizer=tokenizer, **kw),
            data.data_config(cfg.data, scheme, **kw))


def _encode_splits(cfg, splits, tokenizer, say) -> tuple[dict, dict]:
    """Every split tokenized once; plus the evaluation sets (train: a fixed subset)."""
    def encode(examples):
        return EncodedDataset(encode_texts(tokenizer, [e.text for e in examples], cfg.max_length),
                              [e.label for e in examples])

    t0 = time.time()
    datasets = {name: encode(getattr(splits, name)) for name in SPLITS}
    if cfg.train_eval_max and len(datasets["train"]) > cfg.train_eval_max:
        # a fixed subset, so the train curve compares like with like across epochs
        pick = np.random.default_rng(cfg.seed).choice(len(datasets["train"]), cfg.train_eval_max,
                                                      replace=False)
        tr = datasets["train"]
        eval_sets = {"train": EncodedDataset([tr.ids[i] for i in pick], [tr.labels[i] for i in pick])}
    else:
        eval_sets = {"train": datasets["train"]}
    eval_sets.update(validation=datasets["validation"], test=datasets["test"])
    say(f"tokenized {sum(len(d) for d in datasets.values())} reviews in {time.time() - t0:.1f}s "
        f"(mean {np.mean(datasets['train'].lengths):.0f} tokens, max_length {cfg.max_length})")
    return datasets, eval_sets


def _default_hooks(run: _Run) -> list[TrainHooks]:
    """steps.jsonl, and the tracker of ``report_to``, on the main process."""
    if not run.main:
        return []
    hooks: list[TrainHooks] = [StepLog(run.out_dir)]
    if run.cfg.report_to != "none":
        if not run.accelerator.log_with:
            run.say(f"warning: report_to={run.cfg.report_to} but the given Accelerator "
                    "has no log_with: nothing is reported")
        else:
            # purge_step: a resumed run hides what the stopped one logged after last/
            run.accelerator.init_trackers(
                "tensorboard", init_kwargs={"tensorboard": {"purge_step": run.step + 1}}
                if run.step else None)
            hooks.append(TrackerLog(run.accelerator))
    return hooks


# --------------------------------------------------------- the loop's steps
def build_meta(run: _Run, checkpoint: dict | None = None) -> dict:
    """reviewbert.json (run folder, best/, last/ with ``checkpoint``)."""
    scheme, cfg = run.scheme, run.cfg
    meta = {
        "format": META_FORMAT, "labels": scheme.num_labels, "label_names": list(scheme.names),
        "hyperparameters": asdict(cfg), "data": run.data_cfg,
        "split_sizes": {k: len(run.datasets[k]) for k in SPLITS},
        "class_balance": run.class_use.to_dict(scheme.names),
        "data_report": run.report.to_dict() if run.report is not None else None,
        "best": run.best, "device": run.device_desc,
        "distillation": ({"teachers": run.teachers, "weight": run.cfg.distill_weight}
                         if run.teachers else None),
        "mixed_precision": run.accelerator.mixed_precision,   # what "auto" resolved to
        "created": run.old_meta.get("created") or _now_iso(),
        "reviewbert_version": __version__,
    }
    if checkpoint:
        meta["checkpoint"] = checkpoint
    return meta


def call_hooks(run: _Run, name: str, info: dict) -> None:
    """Run every hook's ``name``; a truthy return asks the run to stop."""
    for h in run.hooks:
        if getattr(h, name)(info):
            run.stop.event.set()


def end_hooks(run: _Run, state: str) -> None:
    info = {"state": state, "step": run.step}
    for h in run.hooks:
        if state == "failed":
            try:  # the original error matters more than a hook's trouble closing
                h.on_end(info)
            except Exception as e:  # noqa: BLE001
                print(f"warning: {type(h).__name__}.on_end failed: {e}", file=sys.stderr)
        else:
            h.on_end(info)


def save_last(run: _Run, epochs_done: int, batches_done: int) -> None:
    """last/: weights, tokenizer, AdamW moments, RNG and counters (the resume point)."""
    call_hooks(run, "before_save", {"kind": "last", "epoch": epochs_done, "step": run.step})
    if run.main:
        counters = {"epochs_done": epochs_done, "batches_done": batches_done, "step": run.step,
                    "num_processes": run.accelerator.num_processes, "best": run.best}
        save_checkpoint_atomic(
            run.unwrapped, run.tokenizer, run.paths.last,
            meta=build_meta(run, {"kind": "last", "epochs_done": epochs_done, "step": run.step}),
            write_extra=lambda d: save_training_state(d, run.optimizer, counters,
                                                      run.accelerator.scaler))
    run.accelerator.wait_for_everyone()


def save_best(run: _Run, epoch: int) -> None:
    """best/: the weights of the best epoch so far (``epoch`` 0-based)."""
    call_hooks(run, "before_save", {"kind": "best", "epoch": epoch + 1, "step": run.step})
    if run.main:
        save_checkpoint_atomic(run.unwrapped, run.tokenizer, run.paths.best,
                               meta=build_meta(run, {"kind": "best", "epoch": epoch + 1,
                                                     "step": run.step}))


def stop_requested(run: _Run) -> bool:
    flag = run.stop.event.is_set()
    if run.accelerator.num_processes == 1:
        return flag
    # every process must stop at the same step, or DDP would wait forever
    t = torch.tensor([1.0 if flag else 0.0], device=run.accelerator.device)
    return run.accelerator.reduce(t, reduction="max").item() > 0


def training_loss(run: _Run, batch: dict) -> torch.Tensor:
    """One batch's loss, the forward under the Accelerator's autocast (bf16/fp16 when
    mixed precision is on, a no-op otherwise); the loss itself in fp32."""
    labels = batch.pop("labels")
    with run.accelerator.autocast():
        logits = run.model(**batch).logits
    return run.loss_fn(logits.float(), labels)


def describe_mixed_precision(accelerator) -> str:
    """"bf16 autocast", and on a CPU whether it has bf16 units (else bf16 is emulated)."""
    mp = accelerator.mixed_precision
    if mp != "bf16" or accelerator.device.type != "cpu":
        return f"{mp} autocast"
    units = cpu_bf16_units()
    if units:
        return f"bf16 autocast ({', '.join(u.upper().replace('_', '-') for u in units)})"
    return "bf16 autocast (emulated: no AMX-BF16/AVX512-BF16 on this CPU, likely slower than fp32)"


def set_train_mode(run: _Run) -> None:
    run.model.train()
    if run.cfg.freeze_encoder:  # features, not fine-tuning: no dropout inside BERT
        run.unwrapped.base_model.eval()


def train_epoch(run: _Run, epoch: int) -> bool:
    """The optimizer steps of epoch ``epoch`` (0-based; after a mid-epoch resume, the
    rest of it). Returns True if it stopped on request: last/ then holds this step."""
    cfg, acc, progress = run.cfg, run.accelerator, run.progress
    run.sampler.epoch = epoch  # the shuffle is a function of (seed, epoch)
    set_train_mode(run)
    loader = run.train_dl
    if run.batches_done:  # resumed mid-epoch: same order, skip what was done
        loader = acc.skip_first_batches(run.train_dl, run.batches_done)
    progress.bar.set_description(f"epoch {epoch + 1}/{cfg.epochs}")
    loss_sum, loss_n = torch.zeros((), device=acc.device), 0
    t_step, c_step = time.time(), time.process_time()
    for batch in loader:
        f = lr_factor(run.step, cfg, run.steps_per_epoch, run.total_steps)
        for g in run.optimizer.param_groups:
            g["lr"] = g["base_lr"] * f
        loss = training_loss(run, batch)
        acc.backward(loss)
        if cfg.max_grad_norm:
            acc.clip_grad_norm_(run.model.parameters(), cfg.max_grad_norm)
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        run.step += 1
        run.batches_done += 1
        loss = loss.detach()
        loss_sum += loss
        loss_n += 1
        now = time.time()
        progress.train_s += now - t_step
        progress.train_cpu_s += time.process_time() - c_step
        progress.bar.update(1)
        if loss_n % 10 == 0:
            progress.bar.set_postfix(loss=f"{loss_sum.item() / loss_n:.3f}", refresh=False)
        progress.status("running", run.step, epoch, f"training epoch {epoch + 1}", force=False)
        call_hooks(run, "after_step", {
            "epoch": epoch + 1, "step": run.step, "batch": run.batches_done,
            "steps_per_epoch": run.steps_per_epoch, "total_steps": run.total_steps,
            "loss": loss, "lr": cfg.lr_bert * f, "time": now})
        if stop_requested(run):
            save_last(run, epoch, run.batches_done)
            progress.status("stopped", run.step, epoch,
                            f"stopped at step {run.step}; continue with --resume")
            run.say(f"stopped at step {run.step}; saved {run.paths.last}")
            return True
        if cfg.save_every_steps and run.step % cfg.save_every_steps == 0 \
                and run.batches_done < run.steps_per_epoch:
            save_last(run, epoch, run.batches_done)
        t_step, c_step = time.time(), time.process_time()
    run.batches_done = 0
    return False


def evaluate_epoch(run: _Run, epoch: int) -> dict:
    """{split: metrics} on the train subset, validation and test."""
    run.progress.status("running", run.step, epoch, f"evaluating epoch {epoch + 1}")
    fault_point("evaluate")  # (tests only: a kill inside the evaluation)
    t_eval = time.time()
    k = run.scheme.num_labels
    results = {}
    for name in SPLITS:
        if name in run.eval_dls:
            y, p = predict_probs(run.unwrapped, run.eval_dls[name], run.accelerator)
            results[name] = _metric_fields(compute_metrics(y, p, k))
        else:
            results[name] = _metric_fields(compute_metrics([], np.zeros((0, k)), k))
    run.progress.eval_s = time.time() - t_eval
    return results


def record_epoch(run: _Run, epoch: int, results: dict) -> None:
    """metrics.jsonl, then best/ (if better), last/ and reviewbert.json; then the hooks."""
    if run.main:
        append_metrics(run.out_dir, [{"epoch": epoch + 1, "split": name, **results[name],
                                      "step": run.step, "time": round(time.time(), 3)}
                                     for name in SPLITS])
        run.progress.bar.write(f"epoch {epoch + 1}: " + "  |  ".join(
            f"{n} {format_metrics(results[n])}" for n in SPLITS))
    # metrics first, then checkpoints: if we die in between, resume redoes the
    # epoch and truncate_metrics drops its line, so the history has no holes.
    is_best = _better(results["validation"], (run.best or {}).get("validation"))
    if is_best:
        run.best = {"epoch": epoch + 1, "step": run.step, **results}
        save_best(run, epoch)
    save_last(run, epoch + 1, 0)
    if run.main:
        atomic_write_json(run.paths.meta, build_meta(run))
    run.epochs_done = epoch + 1
    # the rate of the epoch's last step
    f = lr_factor(max(run.step - 1, 0), run.cfg, run.steps_per_epoch, run.total_steps)
    call_hooks(run, "after_epoch", {"epoch": epoch + 1, "epochs": run.cfg.epochs,
                                    "step": run.step, "lr": run.cfg.lr_bert * f,
                                    "time": time.time(), **results, "best": run.best,
                                    "is_best": is_best})
