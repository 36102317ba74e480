"""Helpers for tests that launch real training runs in the background (jobs.start_run):
wait for a condition, read a run's state, and the small real-data config they launch."""
from __future__ import annotations

import time

from reviewbert.training import runs


def wait(pred, timeout=240, what="condition", every=0.2):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def state(run):
    return (runs.read_status(run) or {}).get("state")


def values(data_dir, epochs):
    return {"data": [str(data_dir / "unlocked_mobile_10k.csv")], "labels": 5, "epochs": epochs,
            "max_length": 48, "max_per_class": 25, "batch_size": 8, "eval_batch_size": 64,
            "save_every_steps": 0, "train_eval_max": 50}
