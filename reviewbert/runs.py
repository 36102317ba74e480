"""Run folders: where a training run keeps its files, and how others read them.

One run = one folder (``checkpoints/NAME``, the ``--out`` of ``train``)::

    checkpoints/NAME/
      reviewbert.json     hyperparameters, data config, data report, best epoch's metrics
      status.json         state + progress, rewritten atomically a few times a second at most
      metrics.jsonl       one line per (epoch, split), appended with fsync:
                          {"epoch" (1-based), "split" (train|validation|test), "loss",
                           "auc" (None if undefined, then "auc_note"), "accuracy",
                           "relaxed_accuracy" (fractions 0..1; relaxed None for 3 labels),
                           "n", "step" (optimizer steps so far), "time" (unix seconds)}
      train.log           stdout/stderr when launched in the background (launch_training)
      best/               HF checkpoint (weights + tokenizer + reviewbert.json) of the best epoch
      last/               HF checkpoint + training_state.{json,safetensors} to resume from

Everything here is plain files, so a Streamlit page can poll a run that another
process is writing: ``read_status`` and ``read_metrics`` never see half a write
(status.json is replaced atomically; a torn last line of metrics.jsonl, left by a
SIGKILL mid-append, is skipped).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .model import META_FILE, atomic_write_json, atomic_write_text

STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
STATES = ("running", "finished", "stopped", "failed")


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def status(self) -> Path:
        return self.root / STATUS_FILE

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def meta(self) -> Path:
        return self.root / META_FILE

    @property
    def log(self) -> Path:
        return self.root / LOG_FILE

    @property
    def best(self) -> Path:
        return self.root / "best"

    @property
    def last(self) -> Path:
        return self.root / "last"


def run_paths(run_dir: str | os.PathLike) -> RunPaths:
    return RunPaths(Path(run_dir))


# ------------------------------------------------------------------------ status
def write_status(run_dir, status: dict) -> dict:
    """Replace status.json atomically; stamps ``updated`` (unix seconds) and ``pid``."""
    status = dict(status)
    status["updated"] = time.time()
    status.setdefault("pid", os.getpid())
    atomic_write_json(run_paths(run_dir).status, status)
    return status


def pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_status(run_dir) -> dict | None:
    """status.json as a dict, or None if the run has none (yet).

    A run whose file still says ``running`` but whose process is gone (SIGKILL,
    machine crash) is reported as state ``killed``; ``--resume`` continues it.
    """
    p = run_paths(run_dir).status
    try:
        st = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if st.get("state") == "running" and not pid_alive(st.get("pid")):
        st["state"] = "killed"
    return st


# ----------------------------------------------------------------------- metrics
def append_metrics(run_dir, rows: list[dict]) -> None:
    """Append rows to metrics.jsonl and fsync, so a line that was reported is on disk."""
    p = run_paths(run_dir).metrics
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_metrics(run_dir) -> list[dict]:
    """Every complete line of metrics.jsonl as a dict, in order (a torn tail is skipped)."""
    p = run_paths(run_dir).metrics
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def truncate_metrics(run_dir, through_epoch: int) -> list[dict]:
    """Keep only rows of epochs <= ``through_epoch`` (resume: forget unfinished epochs).

    Also drops duplicates of an (epoch, split), keeping the first, so the history a
    resumed run continues has no gaps and no repeats. Rewritten atomically.
    """
    seen, kept = set(), []
    for r in read_metrics(run_dir):
        key = (r.get("epoch"), r.get("split"))
        if isinstance(r.get("epoch"), int) and r["epoch"] <= through_epoch and key not in seen:
            seen.add(key)
            kept.append(r)
    atomic_write_text(run_paths(run_dir).metrics, "".join(json.dumps(r) + "\n" for r in kept))
    return kept


# -------------------------------------------------------------------------- runs
def read_meta(run_dir) -> dict:
    try:
        return json.loads(run_paths(run_dir).meta.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def list_runs(root: str | os.PathLike = "checkpoints") -> list[dict]:
    """Run folders under ``root`` (those with a status.json), newest first.

    Each item: ``{"name", "path", "status", "meta"}`` with status from read_status.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    runs = []
    for d in root.iterdir():
        if d.is_dir() and not d.name.startswith(".") and (d / STATUS_FILE).exists():
            runs.append({"name": d.name, "path": d, "status": read_status(d) or {},
                         "meta": read_meta(d)})
    return sorted(runs, key=lambda r: r["status"].get("updated", 0), reverse=True)


def read_log_tail(run_dir, max_chars: int = 4000) -> str:
    p = run_paths(run_dir).log
    try:
        with open(p, "rb") as f:
            f.seek(max(0, p.stat().st_size - max_chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------ background launch
def launch_training(args: list[str], run_dir, python: str | None = None) -> subprocess.Popen:
    """Start ``python -m reviewbert train ARGS --out RUN_DIR`` in the background.

    Output goes to ``RUN_DIR/train.log``. The child gets its own session, so a
    Ctrl-C in the terminal running Streamlit (or a page rerun) does not kill it;
    stop it with :func:`stop_run`. Progress is in status.json and metrics.jsonl.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [str(a) for a in args]
    if "--out" not in args:
        args += ["--out", str(run_dir)]
    cmd = [python or sys.executable, "-m", "reviewbert", "train", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # -m reviewbert must resolve to this checkout even if the page runs elsewhere
    pkg_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    log = open(run_paths(run_dir).log, "ab")
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=pkg_root, start_new_session=True)
    finally:
        log.close()  # the child holds its own descriptor


def stop_run(run_dir, sig: int = signal.SIGINT) -> bool:
    """Ask a running training to stop: it finishes its step, saves last/, exits "stopped".

    Returns False if the run is not running (no status, finished, or already gone).
    """
    st = read_status(run_dir)
    if not st or st.get("state") != "running":
        return False
    try:
        os.kill(int(st["pid"]), sig)
    except (ProcessLookupError, KeyError, ValueError):
        return False
    return True
