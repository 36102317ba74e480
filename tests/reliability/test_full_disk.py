"""A full disk while training: the run stops with one clear message, the previous
checkpoint stays intact and loadable, status.json says "failed" with that
message (the Train page shows it), and --resume continues once there is room.

Two ways to fill the disk: an injected ENOSPC in the third checkpoint save
(``model.fault_point``, always runs), and a real 20 MB tmpfs (runs where this
process may mount one, e.g. as root; skipped elsewhere). The real one matters:
safetensors reports a full disk as its own SafetensorError, not an OSError.
"""
from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from reviewbert.errors import DiskFullError
from reviewbert.fsio import FAULT_ENV
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.training.runs import read_metrics, read_status
from reviewbert.ui import state as S

from toyreviews import ROOT, quiet_env, write_toy_csv

APP = str(ROOT / "app.py")


def _train(run: Path, toy: Path, tiny: Path, epochs: int = 1, **env) -> subprocess.CompletedProcess:
    # 150 reviews -> 27 steps/epoch at batch 4; last/ saved at steps 5, 10, 15, ...
    args = ["--data", toy, "--base-model", tiny, "--max-length", "24", "--batch-size", "4",
            "--epochs", epochs, "--save-every-steps", "5", "--seed", "0",
            "--train-eval-max", "30", "--out", run]
    return subprocess.run([sys.executable, "-m", "reviewbert", "train", *map(str, args)],
                          cwd=ROOT, env=quiet_env(**env), capture_output=True, text=True,
                          timeout=300)


def _saved_step(run: Path) -> int:
    return json.loads((run / "last" / "training_state.json").read_text())["step"]


def _assert_failed_cleanly(proc, run: Path, saved_step: int) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith("error: the disk is full") and str(run / "last") in lines[-1]
    assert "previous version is kept" in lines[-1] and "--resume" in lines[-1]
    status = read_status(run)
    assert status["state"] == "failed"
    assert status["message"].startswith("DiskFullError: the disk is full"), status
    # the previous last/ is whole: it loads, with the state of the save before the failed one
    model, _, _ = load_checkpoint(run / "last")
    assert _saved_step(run) == saved_step
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name or p.name.endswith(".old")]


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=150)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, toy, tiny_model_dir):
    """A run whose third save (last/ at step 15) hits an injected ENOSPC."""
    run = tmp_path_factory.mktemp("full") / "run"
    proc = _train(run, toy, tiny_model_dir, **{FAULT_ENV: "save-write@3:enospc"})
    return run, proc


def test_injected_enospc_stops_the_run_and_keeps_the_previous_checkpoint(full_run):
    run, proc = full_run
    _assert_failed_cleanly(proc, run, saved_step=10)


def test_the_train_page_shows_the_failure(full_run, monkeypatch, tmp_path):
    run, _ = full_run
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(run.parent))
    monkeypatch.setenv("REVIEWBERT_QUEUE_DIR", str(tmp_path / ".queue"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(S.TRAIN_PAGE)
    at.run()
    assert not at.exception, at.exception
    shown = "\n".join(str(e.value) for e in [*at.caption, *at.markdown, *at.error])
    assert "failed" in shown and "the disk is full" in shown, shown
    assert any(b.key == "resume_btn" for b in at.button)  # and it offers to continue


def test_resume_after_space_is_freed_finishes(full_run):
    run, _ = full_run
    proc = subprocess.run([sys.executable, "-m", "reviewbert", "train", "--resume", "--out",
                           str(run)], cwd=ROOT, env=quiet_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_status(run)["state"] == "finished"
    assert [(r["epoch"], r["split"]) for r in read_metrics(run)] == \
        [(1, "train"), (1, "validation"), (1, "test")]
    load_checkpoint(run / "best")


def test_a_full_disk_outside_a_save_is_one_clear_error(tmp_path, toy, tiny_model_dir,
                                                       monkeypatch):
    """ENOSPC while appending metrics.jsonl: the same DiskFullError, status "failed"."""
    from reviewbert.config import TrainConfig
    from reviewbert.training import loop
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loop, "append_metrics", full)
    cfg = TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=24,
                      batch_size=16, epochs=1, max_per_class=10, save_every_steps=0)
    with pytest.raises(DiskFullError, match="the disk is full"):
        loop.train(cfg, tmp_path / "run", log=lambda *a: None)
    status = read_status(tmp_path / "run")
    assert status["state"] == "failed" and "disk is full" in status["message"]


# ------------------------------------------------------------- a real full disk
@pytest.fixture
def small_disk(tmp_path):
    """A 20 MB tmpfs: one tiny-model last/ (weights, tokenizer, AdamW state: ~13 MB)
    fits, a second one beside it (a save writes the new copy first) does not."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mount = shutil.which("mount")
    if mount is None or subprocess.run([mount, "-t", "tmpfs", "-o", "size=20m", "tmpfs",
                                        str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the injected ENOSPC test runs")
    try:
        yield mnt
    finally:
        subprocess.run([shutil.which("umount") or "umount", "-l", str(mnt)], capture_output=True)


def test_a_real_full_tmpfs(small_disk, toy, tiny_model_dir):
    run = small_disk / "run"
    proc = _train(run, toy, tiny_model_dir)
    _assert_failed_cleanly(proc, run, saved_step=5)
