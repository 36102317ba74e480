"""How a run reports its progress: a tqdm bar on stderr and status.json (training/runs.py's
format), with one ETA for both."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from reviewbert.training.runs import read_status, write_status


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

