"""A search's folder: its layout (search.json, status.json, the trial folders), the lock
local workers share, and the search.json the first worker writes and the others check.

A search = one folder (``--out``)::

    checkpoints/NAME/
      search.json       the spec, written once by the first worker (later workers and
                        reruns must match it, except "trials"):
                        {"format": "reviewbert-search/1", "name" (folder name),
                         "study" (the study's name in the storage), the SearchSpec's
                         fields as given: "study_name" (null = folder name),
                         "grid" {field: [values]},
                         "ranges" {field: {"low", "high", "log"}}, "sampler" (grid|tpe),
                         "sampler_seed", "trials" (cap given, or null), "size" (trials
                         this search runs), "objective" (accuracy|relaxed_accuracy|auc|loss),
                         "direction" (maximize|minimize), "prune", "prune_startup",
                         "storage" (Optuna database URL, null = study.db here),
                         "base" (train flags given, as TrainConfig fields),
                         "config" (the full base TrainConfig, defaults included), "created"}
      search.log        stdout/stderr when started by runs.launch("search", ..., log_name=...)
      status.json       the search's own status (runs.write_status, atomic):
                        {"state" (queued|running|finished|stopped|failed|cancelled, as
                         for a run; read_status says "killed" if its pid is gone),
                         "size", "complete", "pruned", "failed", "running", "waiting"
                         (re-runs queued), "retried" (trials whose worker died, re-run),
                         "left" (points not started yet + re-runs waiting), "best_trial",
                         "best_value", "objective" (counts and best over the whole
                         study, every worker's trials; a point counts once, as its last
                         re-run: see worker.study_counts),
                         "current_trial" (of the worker that wrote it), "message",
                         "pid", "started", "updated" (a running worker's, while any runs),
                         "workers" {pid: {"state", "started"}} (every worker that ran
                         in this folder; "killed" if it died while running)}
      study.db          the Optuna study (SQLite), unless --storage names another database
      .search.lock      flock: local workers take trials and rewrite status.json in turn
      trial-0000/       a normal run folder (see training/runs.py), named by the Optuna trial
      trial-0001/ ...   number, so workers sharing a study never collide, plus:
        trial.json      {"search" (name), "number", "params" {field: value},
                         "retry_of" (the dead trial this one re-runs, or null),
                         "state" (running|complete|pruned|failed|stopped; read_search
                         says "killed" if it still says running but its worker is gone),
                         "value" (objective on validation, best/ epoch; pruned: last
                         reported), "objective", "direction", "test" (the same metric
                         on test, for reporting only), "best_epoch",
                         "intermediate" {epoch: value reported to the pruner},
                         "message", "host", "worker_pid", "worker_started" (its
                         start time, unix s), "started", "finished" (ISO times)}
"""
from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from reviewbert.config import TrainConfig
from reviewbert.errors import ConfigError
from reviewbert.fsio import atomic_write_json
from reviewbert.training import runs
from reviewbert.training.runs import SEARCH_FILE, TRIAL_FILE
from reviewbert.training.search.spec import SearchSpec

STUDY_DB = "study.db"
LOCK_FILE = ".search.lock"
FORMAT = "reviewbert-search/1"
TRIAL_STATES = ("running", "complete", "pruned", "failed", "stopped")


def is_search_dir(path) -> bool:
    return (Path(path) / SEARCH_FILE).is_file()


def trial_dir(search_dir, number: int) -> Path:
    return Path(search_dir) / f"trial-{number:04d}"


def study_name(spec: SearchSpec, search_dir) -> str:
    return spec.study_name or Path(search_dir).resolve().name


def storage_url(spec: SearchSpec, search_dir) -> str:
    return spec.storage or f"sqlite:///{Path(search_dir).resolve() / STUDY_DB}"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _json_form(obj):
    return json.loads(json.dumps(obj))


@contextmanager
def folder_lock(search_dir):
    """Workers on one machine take turns at asking for a trial and rewriting status.json."""
    path = Path(search_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def claim_folder(spec: SearchSpec, search_dir: Path) -> dict:
    """Write search.json, or check that the one there describes the same search."""
    record = {"format": FORMAT, "name": search_dir.resolve().name,
              "study": study_name(spec, search_dir), **asdict(spec),
              "direction": spec.direction, "size": spec.size,
              "config": asdict(TrainConfig(**spec.base))}
    path = search_dir / SEARCH_FILE
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        new = _json_form(record)
        # "config" follows from "base" (and TrainConfig's defaults, which may have changed)
        differ = [k for k in new if k not in ("trials", "size", "created", "config")
                  and old.get(k) != new[k]]
        if differ:
            raise ConfigError(f"{search_dir} holds another search (differs in: "
                              f"{', '.join(differ)}); choose another --out")
        record["created"] = old.get("created")
    else:
        if runs.run_paths(search_dir).meta.exists() or runs.run_paths(search_dir).metrics.exists():
            raise ConfigError(f"{search_dir} holds a training run; choose another --out")
        record["created"] = now_iso()
    atomic_write_json(path, record)
    return record


def write_trial(run_dir: Path, record: dict) -> None:
    atomic_write_json(run_dir / TRIAL_FILE, record)


def worker_alive(rec: dict) -> bool:
    """Whether the worker a trial.json names (its pid and start time) still runs."""
    return runs.pid_alive(rec.get("worker_pid"), rec.get("worker_started"))
