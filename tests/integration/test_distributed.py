"""The unchanged CLI under torchrun: 2 CPU processes (gloo), one set of files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.training.runs import read_metrics, read_status

from toyreviews import ROOT, quiet_env, write_toy_csv


def test_torchrun_two_cpu_processes_write_one_checkpoint_set(tmp_path, tiny_model_dir):
    toy = write_toy_csv(tmp_path / "toy.csv", n=500)
    run = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "reviewbert", "train",
           "--data", str(toy), "--base-model", str(tiny_model_dir), "--max-length", "32",
           "--epochs", "2", "--batch-size", "8", "--save-every-steps", "10", "--out", str(run)]
    p = subprocess.run(cmd, cwd=ROOT, env=quiet_env(), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]

    meta = json.loads((run / "reviewbert.json").read_text())
    assert "x 2 processes" in meta["device"]
    # 350 train reviews, 8 per process and step -> 16 per step -> 22 steps per epoch
    st = read_status(run)
    assert st["state"] == "finished" and st["total_steps"] == st["step"] == 2 * 22

    # exactly one checkpoint set, no leftovers from a second writer
    assert sorted(x.name for x in run.iterdir()) == [
        "best", "datamap.safetensors", "last", "metrics.jsonl", "reviewbert.json", "status.json",
        "steps.jsonl"]
    rows = read_metrics(run)
    assert [(r["epoch"], r["split"]) for r in rows] == [
        (e, s) for e in (1, 2) for s in ("train", "validation", "test")]
    # gather_for_metrics counted every review once: no padding duplicates, none lost
    sizes = meta["split_sizes"]
    for r in rows:
        assert r["n"] == sizes[r["split"]]
    state = json.loads((run / "last" / "training_state.json").read_text())
    assert state["num_processes"] == 2 and state["epochs_done"] == 2
    load_checkpoint(run / "best")
    # the data report is printed once (main process only)
    assert p.stdout.count("Balanced splits") == 1
