"""What the loop's steps share (:class:`Run`: ``setup`` builds it, the steps advance its
counters), and the run's reviewbert.json (:func:`build_meta`; format in training/runs.py)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from reviewbert import __version__
from reviewbert.config import TrainConfig
from reviewbert.training.runs import run_paths
from reviewbert.training.signals import StopFlag

META_FORMAT = "reviewbert/1"
SPLITS = ("train", "validation", "test")


@dataclass
class Run:
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
    sampler: Any              # sampler.LengthGroupedSampler
    class_use: Any            # data.ClassUse: how the training split's classes are used
    loss_fn: Any              # losses.class_loss: weighted, ordinal, or DistillLoss (indices)
    train_dl: Any
    steps_per_epoch: int
    total_steps: int
    device_desc: str
    epochs_done: int
    batches_done: int         # of the current epoch, when resumed mid-epoch
    step: int                 # optimizer steps so far
    best: dict | None
    progress: Any = None      # status.Progress, once the run folder is open
    teachers: list | None = None  # distillation: describe_teachers(), for reviewbert.json
    stop: StopFlag = field(default_factory=StopFlag)
    hooks: list = field(default_factory=list)
    datamap: Any = None       # datamap.DataMapRecorder, or None (not recorded)

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def paths(self):
        return run_paths(self.out_dir)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def build_meta(run: Run, checkpoint: dict | None = None) -> dict:
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
        "created": run.old_meta.get("created") or now_iso(),
        "reviewbert_version": __version__,
    }
    if checkpoint:
        meta["checkpoint"] = checkpoint
    return meta
