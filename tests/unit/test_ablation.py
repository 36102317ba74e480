"""bench/ablation.py: its row syntax, run folders, and the minutes of a run trained by hand."""
from __future__ import annotations

import json
import sys

import pytest

from browser_support import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import ablation as A  # noqa: E402


def test_a_row_names_balance_length_and_optionally_epochs_and_sigma():
    assert A.parse_row("undersample:128") == ("undersample", 128, 3, 0.0)
    assert A.parse_row("weighted:256") == ("weighted", 256, 1, 0.0)
    assert A.parse_row("resample:256:4") == ("resample", 256, 4, 0.0)
    assert A.parse_row("resample:256:4:0.75") == ("resample", 256, 4, 0.75)
    for bad in ("resample", "oversample:128", "resample:long", "resample:256:0",
                "resample:256:4:-1", "resample:256:4:0.5:x"):
        with pytest.raises(ValueError):
            A.parse_row(bad)
    # the plain rows keep the folders earlier runs of the script made
    assert A.run_name("resample", 256, 3, 0.0) == "resample-256"
    assert A.run_name("resample", 256, 4, 0.0) == "resample-256-e4-s0"
    assert A.run_name("resample", 256, 4, 0.75) == "resample-256-e4-s0.75"


def test_a_run_trained_by_hand_reports_its_own_minutes(tmp_path):
    run = tmp_path / "resample-256-e4-s0"
    (run / "best").mkdir(parents=True)
    fig = {"accuracy": 0.561, "relaxed_accuracy": 0.929, "auc": 0.861}
    (run / "best" / "reviewbert.json").write_text(json.dumps({
        "best": {"epoch": 4, "test": fig, "validation": fig},
        "split_sizes": {"train": 30775}, "mixed_precision": "bf16",
        "hyperparameters": {"mixed_precision": "auto"}}))
    (run / "status.json").write_text(json.dumps({
        "state": "finished", "train_seconds": 900.0, "train_cpu_seconds": 1620.0}))
    row = A.figures(run)
    assert (row["minutes"], row["cpu_minutes"]) == (15.0, 27.0)
    assert row["precision"] == "bf16"          # what "auto" resolved to, not "auto"
    assert row["best_epoch"] == 4 and row["test"] == fig
    # with the script's own clock, that one wins (it adds up restarts)
    (run / A.CLOCK).write_text(json.dumps({"seconds": 1200.0, "cpu_seconds": 2000.0}))
    assert A.figures(run)["minutes"] == 20.0
