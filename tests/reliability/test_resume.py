"""Stopping and resuming: SIGKILL mid-epoch, SIGINT via runs.stop_run, metric and step history."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.training.runs import (
    append_metrics,
    launch_training,
    read_metrics,
    read_status,
    read_steps,
    stop_run,
    truncate_metrics,
)

from toyreviews import ROOT, cli, quiet_env, write_toy_csv


def flags(toy, tiny, epochs=2):
    return ["--data", toy, "--base-model", tiny, "--max-length", "32", "--batch-size", "4",
            "--epochs", str(epochs), "--save-every-steps", "20", "--lr-bert", "1e-3",
            "--lr-classifier", "1e-2", "--seed", "0", "--train-eval-max", "100"]


def wait_for(pred, timeout=120, what="condition"):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def saved_state(run):
    try:
        return json.loads((run / "last" / "training_state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def expected_rows(epochs):
    return [(e, s) for e in range(1, epochs + 1) for s in ("train", "validation", "test")]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=500)


def test_sigkill_mid_epoch_then_resume_continues_exactly(tmp_path, toy, tiny_model_dir):
    run = tmp_path / "killed"
    args = [sys.executable, "-m", "reviewbert", "train", *flags(toy, tiny_model_dir),
            "--out", run]
    proc = subprocess.Popen(list(map(str, args)), cwd=ROOT, env=quiet_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # kill once a mid-epoch save of epoch 2 exists (epoch 1 is in metrics.jsonl)
        wait_for(lambda: (s := saved_state(run)) and s["epochs_done"] == 1
                 and s["batches_done"] >= 20, what="a mid-epoch save in epoch 2")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert read_status(run)["state"] == "killed"  # file says running, process is gone
    killed_at = saved_state(run)
    # the killed run may have got further than its checkpoint (even written epoch 2's
    # metrics) and died mid-append: resume must drop all of that
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"epoch": 2, "split": "train", "loss": 1, "accuracy": 0.5}) + "\n")
        f.write('{"epoch": 2, "split": "valid')  # torn line
    # steps.jsonl is flushed before every save, so it reaches last/'s step (and maybe
    # beyond it: those steps are redone, so resume must drop them)
    assert read_steps(run)[-1]["step"] >= killed_at["step"]
    with open(run / "steps.jsonl", "a") as f:
        f.write(json.dumps({"epoch": 2, "step": killed_at["step"] + 1, "loss": 9.0}) + "\n")
        f.write('{"epoch": 2, "st')  # torn line

    res = cli("train", "--out", run, "--resume", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resuming {run} at step {killed_at['step']} (epoch 2, batch " \
           f"{killed_at['batches_done']}/88)" in res.stdout
    rows = read_metrics(run)
    assert [(r["epoch"], r["split"]) for r in rows] == expected_rows(2)  # no gaps, no repeats
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 6
    st = read_status(run)
    assert st["state"] == "finished" and st["step"] == st["total_steps"] == 2 * 88

    # resuming == never having stopped: same batches, AdamW moments and dropout RNG
    ref = tmp_path / "reference"
    res = cli("train", *flags(toy, tiny_model_dir), "--out", ref, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    a = load_file(str(run / "last" / "model.safetensors"))
    b = load_file(str(ref / "last" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)
    ref_rows = read_metrics(ref)
    for r, q in zip(rows, ref_rows):
        assert r["accuracy"] == pytest.approx(q["accuracy"]) and \
            r["loss"] == pytest.approx(q["loss"], rel=1e-4)
    # one line per step, no repeats, and each step's loss as if it had never stopped
    steps, ref_steps = read_steps(run), read_steps(ref)
    assert [r["step"] for r in steps] == [r["step"] for r in ref_steps] == list(range(1, 177))
    assert [r["epoch"] for r in steps] == [1] * 88 + [2] * 88
    assert [r["loss"] for r in steps] == pytest.approx([r["loss"] for r in ref_steps], rel=1e-4)
    assert len((run / "steps.jsonl").read_text().splitlines()) == 176


def test_sigint_stops_gracefully_and_resume_finishes(tmp_path, toy, tiny_model_dir,
                                                     monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run = tmp_path / "stopped"
    proc = launch_training(flags(toy, tiny_model_dir, epochs=2), run)  # what the page does
    try:
        wait_for(lambda: saved_state(run), what="the first save")  # the loop is running
        assert stop_run(run)  # SIGINT
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (run / "train.log").read_text()
    assert rc == 130, log[-2000:]
    st = read_status(run)
    assert st["state"] == "stopped" and "--resume" in st["message"]
    assert "SIGINT" in log and "Traceback" not in log
    state = saved_state(run)
    assert state["step"] == st["step"]  # last/ holds the very step it stopped at
    assert [r["step"] for r in read_steps(run)] == list(range(1, st["step"] + 1))
    model, tok, info = load_checkpoint(run / "last")  # loadable, with tokenizer
    assert info.meta["checkpoint"]["step"] == st["step"]
    assert not stop_run(run)  # nothing left to stop

    res = cli("train", "--out", run, "--resume", "--epochs", "2", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert [(r["epoch"], r["split"]) for r in read_metrics(run)] == expected_rows(2)
    assert read_status(run)["state"] == "finished"
    assert [r["step"] for r in read_steps(run)] == list(range(1, 177))


def test_truncate_metrics_drops_unfinished_epochs_torn_lines_and_repeats(tmp_path):
    append_metrics(tmp_path, [{"epoch": e, "split": s, "accuracy": 0.1 * e}
                              for e in (1, 2) for s in ("train", "validation", "test")])
    append_metrics(tmp_path, [{"epoch": 1, "split": "train", "accuracy": 0.9}])  # a repeat
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"epoch": 3, "spl')  # SIGKILL mid-write
    assert len(read_metrics(tmp_path)) == 7  # the torn line is skipped when reading
    kept = truncate_metrics(tmp_path, through_epoch=1)
    assert [(r["epoch"], r["split"]) for r in kept] == expected_rows(1)
    assert kept[0]["accuracy"] == pytest.approx(0.1)  # the first line of a repeat wins
    assert read_metrics(tmp_path) == kept
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
