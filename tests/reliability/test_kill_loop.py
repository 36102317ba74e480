"""Kill loop: SIGKILL a tiny training run at 10 random points, resume it each time.

``make faults`` (CI's step after make test) runs four kills, one at each kind of point
(~45-70 s on 2 cores), then the ten (~95 s): the same loop and the same checks.

Points: mid-training (after a random number of new steps), inside an epoch's
evaluation, while a checkpoint's files are being written, and between the two
renames that swap a checkpoint in (the last three held open by
``model.fault_point``'s "pause", so the kill lands inside them). After every kill
``--resume`` continues. At the end the run is finished, ``last/`` and ``best/``
load, metrics.jsonl holds each (epoch, split) exactly once in order, steps.jsonl
each step exactly once, and no temporary save folder is left.

REVIEWBERT_KILL_SEED picks other points (the seed is in every failure message).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reviewbert.fsio import FAULT_ENV, FAULT_MARK_ENV
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.training.runs import read_metrics, read_status, read_steps

from toyreviews import ROOT, quiet_env, write_toy_csv

EPOCHS = 5
SEED = int(os.environ.get("REVIEWBERT_KILL_SEED", "13"))
SPLITS = ("train", "validation", "test")


def _flags(toy: Path, tiny: Path) -> list[str]:
    # 150 reviews -> 105 train -> 27 steps/epoch at batch 4; last/ every 5 steps
    return ["--data", str(toy), "--base-model", str(tiny), "--max-length", "24",
            "--batch-size", "4", "--epochs", str(EPOCHS), "--save-every-steps", "5",
            "--seed", "0", "--train-eval-max", "30", "--eval-batch-size", "64"]


def _start(run: Path, args: list[str], fault: str | None, mark: Path, log) -> subprocess.Popen:
    env = quiet_env(**{FAULT_ENV: fault or "", FAULT_MARK_ENV: str(mark)})
    return subprocess.Popen([sys.executable, "-m", "reviewbert", "train", *args, "--out", str(run)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)


def _assert_checkpoints_load(run: Path, why: str) -> None:
    """What a reader (the app, a resume) finds: each of last/ and best/ loads, or, killed
    between a swap's renames, its .old copy does (the resume puts it back)."""
    for name in ("last", "best"):
        folder = run / name
        if not folder.exists():
            folder = run / f"{name}.old"
        if folder.exists():
            load_checkpoint(folder)
        else:  # none yet: best/ before the first epoch ends, last/ before its first save
            assert name == "best" or len(read_steps(run)) <= 5, (why, name)


def _wait(pred, proc: subprocess.Popen, what: str, timeout: float = 60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        got = pred()
        if got:
            return got
        if proc.poll() is not None:
            return None  # it ended first (finished, or failed: checked by the caller)
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what} (seed {SEED})")


def _metric_keys(run: Path) -> list[tuple]:
    return [(r.get("epoch"), r.get("split")) for r in read_metrics(run)]


def _expected(epochs: int) -> list[tuple]:
    return [(e, s) for e in range(1, epochs + 1) for s in SPLITS]


def _assert_history_is_a_prefix(run: Path, why: str) -> None:
    """Right after a kill: metrics in order with no repeat (maybe an epoch half
    written: resume drops it), steps strictly increasing."""
    keys = _metric_keys(run)
    assert keys == _expected(EPOCHS)[:len(keys)], (why, keys)
    steps = [r["step"] for r in read_steps(run)]
    assert steps == sorted(set(steps)), (why, steps)


@pytest.mark.faults
def test_ten_kills_at_random_points_and_resume_every_time(tmp_path, tiny_model_dir):
    kill_loop(tmp_path, tiny_model_dir,
              ["step"] * 4 + ["evaluate"] * 2 + ["save-write"] * 2 + ["save-swap"] * 2)


@pytest.mark.faults
def test_four_kills_one_at_each_kind_of_point(tmp_path, tiny_model_dir):
    kill_loop(tmp_path, tiny_model_dir, ["step", "evaluate", "save-write", "save-swap"])


def kill_loop(tmp_path: Path, tiny_model_dir: Path, plan: list[str]) -> None:
    """SIGKILL at each point of ``plan`` (shuffled), resume, then finish and check it all."""
    rng = random.Random(SEED)
    toy = write_toy_csv(tmp_path / "toy.csv", n=150)
    run, mark = tmp_path / "run", tmp_path / "fault.mark"
    plan = list(plan)
    rng.shuffle(plan)
    args = _flags(toy, tiny_model_dir)
    survived = []
    log = open(tmp_path / "train.err", "ab")
    for i, point in enumerate(plan):
        mark.unlink(missing_ok=True)
        fault = None if point == "step" else f"{point}@{rng.randint(1, 2)}:pause"
        proc = _start(run, args if i == 0 else ["--resume"], fault, mark, log)
        why = f"kill {i + 1} ({point}, seed {SEED})"
        try:
            if point == "step":  # a random moment of training: some new steps after the start
                seen = len(read_steps(run))
                want = rng.randint(1, 12)
                reached = _wait(lambda: len(read_steps(run)) >= seen + want, proc, why)
            else:
                reached = _wait(mark.exists, proc, why)
            assert proc.poll() is None, f"{why}: the run ended before the kill ({proc.returncode})"
            assert reached, why
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert read_status(run)["state"] == "killed", why
        _assert_history_is_a_prefix(run, why)
        _assert_checkpoints_load(run, why)
        survived.append(point)
    log.close()

    done = subprocess.run([sys.executable, "-m", "reviewbert", "train", "--resume", "--out",
                           str(run)], cwd=ROOT, env=quiet_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(survived) == len(plan)

    status = read_status(run)
    assert status["state"] == "finished", status
    # metrics: every (epoch, split) once, in order: no gap, no duplicate
    assert _metric_keys(run) == _expected(EPOCHS)
    # steps: 1..total, each once
    steps = [r["step"] for r in read_steps(run)]
    assert steps == list(range(1, status["total_steps"] + 1))
    # both checkpoints load; best/ is the epoch reviewbert.json names
    meta = json.loads((run / "reviewbert.json").read_text())
    for name in ("last", "best"):
        model, tok, info = load_checkpoint(run / name)
        assert model.config.num_labels == 5
    assert json.loads((run / "best" / "reviewbert.json").read_text())["checkpoint"]["epoch"] \
        == meta["best"]["epoch"]
    assert json.loads((run / "last" / "training_state.json").read_text())["epochs_done"] == EPOCHS
    # no save left half-done: no temporary folders, no .old copies
    leftovers = [p.name for p in run.iterdir() if ".tmp" in p.name or p.name.endswith(".old")]
    assert not leftovers, leftovers
