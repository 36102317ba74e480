"""Fine-tuning: the training loop and what it is made of, one concept per module; the runs
it leaves, and the searches that start many.

- ``loop``         :func:`train`, the loop itself, readable top to bottom
- ``setup``        what a run needs before its first step, as named steps in RNG order
- ``run``          ``Run`` (what the steps share) and the run's reviewbert.json
- ``sampler``      length-grouped, class-mixed batches; the balanced draw of "resample"
- ``optim``        AdamW's parameter groups; the learning rate as a pure function of the step
- ``resume``       the resume state, without pickle; the config a resumed run keeps
- ``hooks``        :class:`TrainHooks` and the default ones (steps.jsonl, TensorBoard)
- ``status``       tqdm and status.json, with one ETA
- ``signals``      SIGINT/SIGTERM: stop after this step, save last/
- ``losses``       the training loss (weighted, ordinal soft labels, distilled)
- ``distill``      knowledge distillation: teachers on the same split, their mean probabilities
- ``runs``         run folders: their files, launching, the queue
- ``jobs``         what the Train page starts: a named run folder and its queued launch
- ``catalog``      which checkpoints the app offers, and under which name
- ``experiments``  runs side by side: the seed report's Table 1 and overlaid curves
- ``card``         a checkpoint's model card, written from measured results only
- ``search``       hyperparameter search (Optuna), one training run per trial

The hyperparameters are :class:`reviewbert.config.TrainConfig`. The names below are
imported on first use: the app's pages read ``runs`` and ``catalog`` before their first
paint, and the loop imports torch.
"""
from __future__ import annotations

import importlib

_LAZY = {"train": "reviewbert.training.loop", "TrainHooks": "reviewbert.training.hooks",
         "resume_config": "reviewbert.training.resume"}

__all__ = ["train", "TrainHooks", "resume_config"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
