"""A trial's training as its own process (:class:`TrainingTrial`: started, followed,
stopped, its result read) and the signals that stop a search (:class:`Signals`)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from reviewbert.model.checkpoint import read_meta
from reviewbert.training import runs
from reviewbert.training.runs import STOP_WITH_ENV
from reviewbert.training.search.spec import SearchSpec

STOP_GRACE_S = 120.0  # a trial asked to stop finishes its step and saves last/ first


class TrainingTrial:
    """One trial as its own ``train`` process.

    Its own process because Accelerate cannot be set up twice in one process with
    another precision, and because a trial that crashes must not take the study down.
    """

    def __init__(self, spec: SearchSpec, params: dict, run_dir: Path):
        self.run_dir = Path(run_dir).resolve()  # the child runs from the repository root
        # the trial stops (saving last/) if this worker dies: see training/signals.py
        watch = {STOP_WITH_ENV: f"{os.getpid()}:{runs.process_started() or ''}"}
        self.proc = runs.launch_training(spec.trial_args(params), self.run_dir, env=watch)
        self.seen = 0  # validation epochs already handed to the driver

    def poll(self) -> tuple[list[dict], bool]:
        """(new validation rows, still running)."""
        alive = self.proc.poll() is None  # before reading: rows written before exit are seen
        rows = [r for r in runs.read_metrics(self.run_dir)
                if r.get("split") == "validation" and isinstance(r.get("epoch"), int)
                and r["epoch"] > self.seen]
        if rows:
            self.seen = max(r["epoch"] for r in rows)
        return rows, alive

    def wait(self, timeout: float) -> None:
        """Until the process ends, or ``timeout`` seconds."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGINT (it saves last/ and exits); SIGKILL if it has not exited after grace_s."""
        if self.proc.poll() is not None:
            return
        if not runs.stop_run(self.run_dir):  # status.json not (yet) saying running
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=grace_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # or a second Ctrl-C
            self.proc.kill()
            self.proc.wait()

    def result(self) -> dict:
        """After exit: {"returncode", "best" (reviewbert.json's), "state", "log_tail"}."""
        rc = self.proc.wait()
        return {"returncode": rc, "best": read_meta(self.run_dir, strict=False).get("best"),
                "state": (runs.read_status(self.run_dir) or {}).get("state"),
                "log_tail": runs.read_log_tail(self.run_dir, 2000)}


class Signals:
    """SIGINT/SIGTERM: stop the current trial gracefully, then the search; a second
    Ctrl-C while waiting for the trial kills it."""

    def __init__(self, event: threading.Event):
        self.event, self.old = event, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.event.set()
        print(f"\n{signal.Signals(signum).name}: stopping the current trial, then the search",
              file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        for sig, old in self.old.items():
            signal.signal(sig, old)
