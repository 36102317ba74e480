"""Fine-tuning: the training loop and what it is made of, one concept per module.

- ``loop``     :func:`train`, the loop itself, readable top to bottom
- ``setup``    what a run needs before its first step, as named steps in RNG order
- ``run``      ``Run`` (what the steps share) and the run's reviewbert.json
- ``sampler``  length-grouped, class-mixed batches; the balanced draw of "resample"
- ``optim``    AdamW's parameter groups; the learning rate as a pure function of the step
- ``resume``   the resume state, without pickle; the config a resumed run keeps
- ``hooks``    :class:`TrainHooks` and the default ones (steps.jsonl, TensorBoard)
- ``status``   tqdm and status.json, with one ETA
- ``signals``  SIGINT/SIGTERM: stop after this step, save last/
- ``losses``   the training loss (weighted, ordinal soft labels, distilled)
- ``distill``  knowledge distillation: teachers on the same split, their mean probabilities

The hyperparameters are :class:`reviewbert.config.TrainConfig`; a run folder's files
are described in :mod:`reviewbert.runs`.
"""
from .hooks import TrainHooks
from .loop import train
from .resume import resume_config

__all__ = ["train", "TrainHooks", "resume_config"]
