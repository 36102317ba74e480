"""Callbacks from the training loop (:class:`TrainHooks`) and the default ones: steps.jsonl
and, with ``--report-to tensorboard``, the tracker."""
from __future__ import annotations

import sys
import time

import torch

from reviewbert.training.run import SPLITS, Run
from reviewbert.training.runs import StepsWriter


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
    """steps.jsonl (format: training/runs.py), the default hook of the main process.

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


def default_hooks(run: Run) -> list[TrainHooks]:
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


def call_hooks(run: Run, name: str, info: dict) -> None:
    """Run every hook's ``name``; a truthy return asks the run to stop."""
    for h in run.hooks:
        if getattr(h, name)(info):
            run.stop.event.set()


def end_hooks(run: Run, state: str) -> None:
    info = {"state": state, "step": run.step}
    for h in run.hooks:
        if state == "failed":
            try:  # the original error matters more than a hook's trouble closing
                h.on_end(info)
            except Exception as e:  # noqa: BLE001
                print(f"warning: {type(h).__name__}.on_end failed: {e}", file=sys.stderr)
        else:
            h.on_end(info)

