"""The training page's launch path on real data and the real embedded MiniLM.

jobs.start_run is what the Launch button calls: a config file, a queued
background `train` process. Here a run shows metrics while it trains, is
stopped, resumed and ends with a continuous history; a second launch waits as
queued and starts by itself when the first ends.
"""
from __future__ import annotations

import time

import pytest

from reviewbert.training import jobs
from reviewbert.training import runs as R

from launch_support import state, values, wait

pytestmark = [pytest.mark.e2e]


def test_launch_stop_resume_and_queue_on_real_data(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("REVIEWBERT_QUEUE_DIR", str(tmp_path / ".queue"))
    first, _ = jobs.start_run(values(data_dir, epochs=4), tmp_path, "first")
    second = None
    try:
        assert state(first) in ("queued", "running")
        # metrics while it runs: epoch 1's rows appear before the run ends
        wait(lambda: any(m["split"] == "validation" for m in R.read_metrics(first)),
             what="first epoch's metrics")
        assert state(first) == "running"
        assert R.read_steps(first), "no per-step loss logged"
        # a second launch waits for the device
        second, _ = jobs.start_run(values(data_dir, epochs=1), tmp_path, "second")
        time.sleep(1.0)
        assert state(second) == "queued"
        assert not R.read_metrics(second)
        # stop the first: graceful, keeps last/
        assert R.stop_run(first)
        wait(lambda: state(first) == "stopped", what="stopped")
        done_before = {m["epoch"] for m in R.read_metrics(first)}
        # the second starts by itself now that the device is free, and finishes
        wait(lambda: state(second) == "finished", what="second run to finish by itself")
        assert {m["split"] for m in R.read_metrics(second)} == {"train", "validation", "test"}
        # resume the first: continues the same history to the end
        R.resume_run(first, queue=True)
        wait(lambda: state(first) == "finished", what="resumed run to finish")
        rows = R.read_metrics(first)
        keys = [(m["epoch"], m["split"]) for m in rows]
        assert len(keys) == len(set(keys))                               # no duplicate
        assert sorted({e for e, _ in keys}) == [1, 2, 3, 4]              # no gap
        assert done_before <= {e for e, _ in keys}
        steps = [s["step"] for s in R.read_steps(first)]
        assert steps == sorted(steps) and len(steps) == len(set(steps))  # continuous step log
    finally:
        for run in (first, second):
            if run is not None and state(run) in ("queued", "running"):
                R.stop_run(run)
