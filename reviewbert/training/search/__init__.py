"""Hyperparameter search: an Optuna study over TrainConfig, one ``train`` process per trial.

    python -m reviewbert search --data FILE --grid lr_bert=1e-5,5e-5 \\
        --grid lr_classifier=1e-3,1e-2 --epochs 3 --out checkpoints/NAME
    python -m reviewbert search --data FILE --sampler tpe --trials 20 \\
        --range lr_bert=1e-6:1e-4:log --range batch_size=4:16 --grid labels=5,3 \\
        --prune --out checkpoints/NAME

Every ``train`` flag is accepted and applies to all trials. The objective is a
*validation* metric of the trial's best/ checkpoint; the test split is only
reported, never used to choose or prune.

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
                         re-run: see study_counts),
                         "current_trial" (of the worker that wrote it), "message",
                         "pid", "started", "updated" (a running worker's, while any runs),
                         "workers" {pid: {"state", "started"}} (every worker that ran
                         in this folder; "killed" if it died while running)}
      study.db          the Optuna study (SQLite), unless --storage names another database
      .search.lock      flock: local workers take trials and rewrite status.json in turn
      trial-0000/       a normal run folder (see runs.py), named by the Optuna trial
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

In the study each trial also has user attrs "run_dir", "host", "worker_pid" and
"worker_started" (and "message", "log_tail" when it failed; "retry_of" N for a
re-run of trial N), so a study in a shared database says where each trial's files
are and whose it is. Trial states map to Optuna's: complete -> COMPLETE, pruned ->
PRUNED, failed and stopped -> FAIL (a failed grid point is not run again).

A worker that dies mid-trial (SIGKILL, power cut, lost machine) leaves its trial
RUNNING. The next worker to look for a trial ends it FAIL (message "its search
worker died") and puts a re-run of the same parameters in the study's queue
(Optuna's ``enqueue_trial``: state WAITING, user attr "retry_of"), which the next
free worker takes; a point is re-run at most MAX_RETRIES times. A worker on the same
host sees the death at once (its pid is gone; it also stops the orphaned training);
one on another host when the dead worker's heartbeat (RDBStorage's heartbeat table,
written every HEARTBEAT_S while a trial runs) is older than GRACE_S. The dead trial's
own process, if it still runs, stops itself after its current step
($REVIEWBERT_STOP_WITH, training/signals.py). Counts and "left" follow each grid
point to its last re-run, so a point is counted once, however often it ran.

Workers: the same command on several processes or machines with one ``--storage``
(or the default study.db, for processes on one machine) shares the study; each
worker takes the next trial until ``size`` trials exist. Trial numbers are unique
in a study, so a trial numbered ``size`` or above is a worker's late claim: it is
closed at once (FAIL, user attr "surplus") and never runs or gets a folder.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from reviewbert import config
from reviewbert.config import TrainConfig
from reviewbert.errors import ConfigError
from reviewbert.fsio import atomic_write_json, read_json
from reviewbert.model.checkpoint import read_meta
from reviewbert.training import runs
from reviewbert.training.runs import SEARCH_FILE, STOP_WITH_ENV, TRIAL_FILE
from reviewbert.training.search import seed_grid

STUDY_DB = "study.db"
LOCK_FILE = ".search.lock"
FORMAT = "reviewbert-search/1"
OBJECTIVES = ("accuracy", "relaxed_accuracy", "auc", "loss")
SAMPLERS = ("grid", "tpe")
TRIAL_STATES = ("running", "complete", "pruned", "failed", "stopped")
PRUNE_STARTUP = 3
STOP_GRACE_S = 120.0  # a trial asked to stop finishes its step and saves last/ first
# a running trial's worker writes a heartbeat every HEARTBEAT_S; one silent for GRACE_S is
# dead to workers on other hosts (same host: its pid tells at once). Env: tests shorten them.
HEARTBEAT_S = int(os.environ.get("REVIEWBERT_SEARCH_HEARTBEAT_S", "20"))
GRACE_S = int(os.environ.get("REVIEWBERT_SEARCH_GRACE_S", "180"))
MAX_RETRIES = 2  # re-runs of a grid point whose worker died, before it stays failed


# ===================================================================== parsing
def _field_name(raw: str, where: str, cls: type = TrainConfig) -> str:
    name = raw.strip().replace("-", "_")
    searchable = config.searchable(cls)
    if name not in searchable:
        known = name in {f.name for f in fields(cls)}  # data, fractions
        raise ConfigError(f"{where}: " + (f"{name} cannot be searched" if known else
                          "unknown hyperparameter; searchable: " + ", ".join(searchable)))
    return name


def parse_value(name: str, text: str, flag: str = "--grid", cls: type = TrainConfig):
    """``text`` as a value of config field ``name``, checked by the field's own rule."""
    spec = config.searchable(cls)[name]
    where = f"{flag} {name}={text}"
    try:
        value = spec.parse(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a valid {spec.type.__name__}") from None
    if spec.choices and value not in spec.choices:
        raise ConfigError(f"{where}: must be one of {', '.join(map(str, spec.choices))}")
    error = spec.error(value)  # the field's own rule (epochs >= 1, labels 5 or 3, ...)
    if error:
        raise ConfigError(f"{where}: {error}")
    return value


def parse_grid(item: str, cls: type = TrainConfig) -> tuple[str, list]:
    """``NAME=V1,V2,...`` -> (field, [values])."""
    raw, sep, values = item.partition("=")
    if not sep or not values.strip():
        raise ConfigError(f"--grid expects NAME=V1,V2,..., got {item!r}")
    name = _field_name(raw, f"--grid {item}", cls)
    parsed = [parse_value(name, v, cls=cls) for v in values.split(",")]
    if len(set(map(repr, parsed))) != len(parsed):
        raise ConfigError(f"--grid {item}: a value is repeated")
    return name, parsed


def parse_range(item: str, cls: type = TrainConfig) -> tuple[str, dict]:
    """``NAME=LOW:HIGH[:log]`` -> (field, {"low", "high", "log"}) for int and float fields."""
    raw, sep, rest = item.partition("=")
    parts = rest.split(":")
    if not sep or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise ConfigError(f"--range expects NAME=LOW:HIGH or NAME=LOW:HIGH:log, got {item!r}")
    name = _field_name(raw, f"--range {item}", cls)
    if config.searchable(cls)[name].type not in (int, float):
        raise ConfigError(f"--range {item}: {name} is not a number; use --grid for its values")
    low, high = (parse_value(name, p, "--range", cls) for p in parts[:2])
    log = len(parts) == 3
    if low is None or high is None or not low < high:
        raise ConfigError(f"--range {item}: needs LOW < HIGH")
    if log and low <= 0:
        raise ConfigError(f"--range {item}: a log range needs LOW > 0")
    return name, {"low": low, "high": high, "log": log}


# ======================================================================== spec
@dataclass
class SearchSpec:
    """What to search. The CLI, search.json and the training page share it."""
    base: dict[str, Any] = field(default_factory=dict)   # train flags given, for every trial
    grid: dict[str, list] = field(default_factory=dict)  # field -> values
    ranges: dict[str, dict] = field(default_factory=dict)  # field -> {"low","high","log"}
    sampler: str = "grid"
    trials: int | None = None  # cap on trials (TPE: required; grid: default all points)
    objective: str = "accuracy"
    prune: bool = False
    prune_startup: int = PRUNE_STARTUP
    storage: str | None = None  # Optuna database URL; None = study.db in the search folder
    study_name: str | None = None  # None = the search folder's name
    sampler_seed: int | None = None

    # -- CLI round trip -----------------------------------------------------------
    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> "SearchSpec":
        base = config.given(args)
        grid, ranges = {}, {}
        for flag, items, parse, into in (("--grid", args.grid, parse_grid, grid),
                                         ("--range", args.range, parse_range, ranges)):
            for item in items or []:
                name, value = parse(item)
                if name in grid or name in ranges:
                    raise ConfigError(f"{flag} {item}: {name} is already searched")
                into[name] = value
        if getattr(args, "preset", None) == seed_grid.NAME:
            base, preset_grid = seed_grid.apply(base, grid)
            grid = {k: v for k, v in preset_grid.items() if k not in ranges}
        spec = cls(base=base, grid=grid, ranges=ranges, sampler=args.sampler,
                   trials=args.trials, objective=args.objective, prune=args.prune,
                   prune_startup=args.prune_startup, storage=args.storage,
                   study_name=args.study_name, sampler_seed=args.sampler_seed)
        spec.check()
        return spec

    @classmethod
    def from_args(cls, argv: list[str]) -> "SearchSpec":
        """Parse what :meth:`to_args` wrote (no --out, --queue, --json)."""
        p = argparse.ArgumentParser(prog="search", exit_on_error=False)
        add_arguments(p)
        config.add_arguments(p)
        try:
            return cls.from_namespace(p.parse_args([str(a) for a in argv]))
        except argparse.ArgumentError as e:
            raise ConfigError(str(e)) from None

    def to_args(self) -> list[str]:
        """argv after ``search`` for this spec; the caller adds --out (and --queue)."""
        args = config.to_argv(self.base)
        for name, values in self.grid.items():
            args += ["--grid", f"{name}={','.join(map(config.format_value, values))}"]
        for name, r in self.ranges.items():
            args += ["--range", f"{name}={config.format_value(r['low'])}:{config.format_value(r['high'])}"
                     + (":log" if r["log"] else "")]
        defaults = SearchSpec()
        for name in ("sampler", "trials", "objective", "prune_startup", "storage",
                     "study_name", "sampler_seed"):
            if getattr(self, name) != getattr(defaults, name):
                args += ["--" + name.replace("_", "-"), str(getattr(self, name))]
        if self.prune:
            args.append("--prune")
        return args

    @classmethod
    def from_dict(cls, d: dict) -> "SearchSpec":
        """From search.json (extra keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    # -- meaning --------------------------------------------------------------------
    def check(self) -> None:
        """Raise ConfigError (one line) for a spec that cannot run."""
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"--objective must be one of {', '.join(OBJECTIVES)}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"--sampler must be one of {', '.join(SAMPLERS)}")
        if not self.base.get("data"):
            raise ConfigError("search needs --data FILE")
        missing = [p for p in self.base["data"] if not Path(p).is_file()]
        if missing:
            raise ConfigError(f"--data {missing[0]}: no such file")
        if not self.grid and not self.ranges:
            raise ConfigError("nothing to search: give --grid NAME=V1,V2 (or --range with "
                              "--sampler tpe)")
        if self.sampler == "grid" and self.ranges:
            raise ConfigError("--range needs --sampler tpe (a grid sampler only takes --grid)")
        if self.sampler == "tpe" and not self.trials:
            raise ConfigError("--sampler tpe needs --trials N")
        if self.trials is not None and self.trials < 1:
            raise ConfigError("--trials must be >= 1")
        if self.prune_startup < 0:
            raise ConfigError("--prune-startup must be >= 0")
        both = sorted(set(self.base) & (set(self.grid) | set(self.ranges)))
        if both:
            raise ConfigError(f"--{both[0].replace('_', '-')} is both fixed and searched; "
                              "drop one")
        TrainConfig(**self.base)  # the fixed part alone must be a valid config
        if self.objective == "relaxed_accuracy" and 3 in self.grid.get(
                "labels", [self.base.get("labels", 5)]):
            raise ConfigError("--objective relaxed_accuracy is undefined for 3 labels")

    @property
    def direction(self) -> str:
        return "minimize" if self.objective == "loss" else "maximize"

    @property
    def size(self) -> int:
        """How many trials this search runs."""
        if self.sampler == "grid":
            points = math.prod(len(v) for v in self.grid.values())
            return min(points, self.trials) if self.trials else points
        return int(self.trials)

    def trial_args(self, params: dict) -> list[str]:
        """``train`` flags of one trial; paths absolute, as trials run from the repository root."""
        values = {**self.base, **params}
        values["data"] = [str(Path(f).resolve()) for f in values["data"]]
        if values.get("base_model") and Path(values["base_model"]).exists():
            values["base_model"] = str(Path(values["base_model"]).resolve())
        return config.to_argv(values)

    def trial_epochs(self, params: dict) -> int:
        return TrainConfig(**{**self.base, **params}).epochs

    def distributions(self) -> dict:
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
        dist = {n: CategoricalDistribution(v) for n, v in self.grid.items()}
        for n, r in self.ranges.items():
            kind = IntDistribution if config.searchable()[n].type is int else FloatDistribution
            dist[n] = kind(r["low"], r["high"], log=r["log"])
        return dist


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a SearchSpec (what to search and how), beside TrainConfig's."""
    p.add_argument("--grid", action="append", metavar="NAME=V1,V2",
                   help="values of a TrainConfig field to try (repeat for more fields); the "
                        "grid sampler runs every combination, TPE picks among them")
    p.add_argument("--preset", choices=(seed_grid.NAME,), default=None,
                   help="seed: the seed report's Table 1 grid (labels 5,3 x LR classifier "
                        "1e-3,1e-2,1e-1 x LR BERT 1e-5,1e-4,1e-3 x LR decay 0.5; weight decay "
                        "0.01, LR step 5 epochs or half a shorter --epochs); flags and "
                        "--grid/--range given override it")
    p.add_argument("--range", action="append", metavar="NAME=LOW:HIGH[:log]",
                   help="a numeric field's range, for --sampler tpe (int fields stay int)")
    p.add_argument("--sampler", choices=SAMPLERS, default="grid",
                   help="grid: every combination of --grid; tpe: Optuna TPE (needs --trials)")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="how many trials in all, over every worker (grid default: all)")
    p.add_argument("--objective", choices=OBJECTIVES, default="accuracy",
                   help="validation metric to optimise, of each trial's best/ epoch "
                        "(loss is minimised; test is only reported)")
    p.add_argument("--prune", action="store_true",
                   help="stop trials whose validation curve is below the median of "
                        "completed trials at the same epoch (Optuna MedianPruner)")
    p.add_argument("--prune-startup", type=int, default=PRUNE_STARTUP, metavar="N",
                   help=f"prune only once N trials have completed (default: {PRUNE_STARTUP})")
    p.add_argument("--storage", metavar="URL", default=None,
                   help="Optuna database (e.g. postgresql://host/db) shared by workers on "
                        "several machines (default: sqlite study.db in --out)")
    p.add_argument("--study-name", metavar="NAME", default=None,
                   help="study in --storage (default: the --out folder's name)")
    p.add_argument("--sampler-seed", type=int, default=None, metavar="N",
                   help="seed of the sampler (TPE default: random, so workers differ)")


# ===================================================================== folders
def is_search_dir(path) -> bool:
    return (Path(path) / SEARCH_FILE).is_file()


def trial_dir(search_dir, number: int) -> Path:
    return Path(search_dir) / f"trial-{number:04d}"


def study_name(spec: SearchSpec, search_dir) -> str:
    return spec.study_name or Path(search_dir).resolve().name


def storage_url(spec: SearchSpec, search_dir) -> str:
    return spec.storage or f"sqlite:///{Path(search_dir).resolve() / STUDY_DB}"


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _json_form(obj):
    return json.loads(json.dumps(obj))


@contextmanager
def _folder_lock(search_dir):
    """Workers on one machine take turns at asking for a trial and rewriting status.json."""
    path = Path(search_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _claim_folder(spec: SearchSpec, search_dir: Path) -> dict:
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
        record["created"] = _now_iso()
    atomic_write_json(path, record)
    return record


def _write_trial(run_dir: Path, record: dict) -> None:
    atomic_write_json(run_dir / TRIAL_FILE, record)


# ======================================================================= study
def _grid_sampler(search_space: dict, seed: int):
    """Optuna's GridSampler, minus its ``study.stop()`` after the last point (that only
    works inside ``study.optimize``; our ask/tell loop stops on ``size`` itself), and
    with a new trial's point chosen by its rank among the study's new trials (re-runs
    of dead trials, enqueued with fixed params, do not count). Optuna's own rule, the
    trial number, would skip the points whose numbers re-runs took and then pick them
    at random, which two workers asking at once can both do: one point twice, one
    never. Ranks are unique because trial numbers are."""
    from optuna.samplers import GridSampler

    class AskTellGridSampler(GridSampler):
        def after_trial(self, study, trial, state, values):
            pass

        def before_trial(self, study, trial):
            if "grid_id" in trial.system_attrs or "fixed_params" in trial.system_attrs:
                return
            rank = sum(1 for t in study._storage.get_all_trials(study._study_id, deepcopy=False)
                       if t.number < trial.number and "fixed_params" not in t.system_attrs)
            study._storage.set_trial_system_attr(trial._trial_id, "search_space",
                                                 self._search_space)
            # a rank past the grid is a surplus claim, closed unrun by the worker
            study._storage.set_trial_system_attr(trial._trial_id, "grid_id",
                                                 rank % len(self._all_grids))

    return AskTellGridSampler(search_space, seed=seed)


def open_study(spec: SearchSpec, search_dir):
    """The Optuna study of this search: created on first use, else loaded (shared)."""
    import optuna

    url = storage_url(spec, search_dir)
    if spec.sampler == "grid":
        # the same seed in every worker: trial n takes grid point n of the same order
        sampler = _grid_sampler(spec.grid, seed=spec.sampler_seed or 0)
    else:
        # TPE's random start: a third of the budget, within Optuna's default of 10;
        # constant_liar keeps parallel workers from proposing the same point
        sampler = optuna.samplers.TPESampler(
            seed=spec.sampler_seed, n_startup_trials=max(2, min(10, spec.size // 3)),
            constant_liar=True)
    # from epoch 1 on: a bad learning rate shows in the first epoch, and searches are
    # a few epochs long, so waiting longer would save little
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=spec.prune_startup,
                                          n_warmup_steps=0, interval_steps=1)
              if spec.prune else optuna.pruners.NopPruner())
    with _storage_errors(url):
        return _first_of_racing_workers(lambda: optuna.create_study(
            storage=_storage(url, heartbeat=True), study_name=study_name(spec, search_dir),
            sampler=sampler, pruner=pruner, direction=spec.direction, load_if_exists=True))


def _first_of_racing_workers(create, attempts: int = 6):
    """Workers started together on an empty database all create Optuna's tables at once;
    all but one then fail (PostgreSQL: IntegrityError, duplicate key in pg_type; SQLite:
    "table studies already exists"). The tables exist by then: try again after a short
    random pause."""
    import random
    import time

    import sqlalchemy.exc
    for attempt in range(attempts):
        try:
            return create()
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                sqlalchemy.exc.OperationalError) as e:
            racing = not isinstance(e, sqlalchemy.exc.OperationalError) or any(
                w in str(e) for w in ("already exists", "database is locked"))
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.2 + random.random() * 0.8)


def _storage(url: str, heartbeat: bool = False):
    """Optuna's RDBStorage for ``url``. ``heartbeat``: a worker's, with heartbeats on and
    :func:`retry_dead_trial` called for each trial whose heartbeat went stale."""
    import optuna
    # SQLite: wait for another worker's write instead of failing at once
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    if not heartbeat:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine)
    with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url, engine_kwargs=engine, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
            heartbeat_stale_trial_callback=retry_dead_trial)


def retry_dead_trial(study, trial) -> int | None:
    """Queue a re-run of ``trial`` (a FrozenTrial just failed because its worker died):
    the same params, WAITING, user attr "retry_of"; its number, or None once the point
    was re-run MAX_RETRIES times. (Not Optuna's RetryHeartbeatStaleTrialCallback: that
    copies the dead trial's user attrs, its host, pid and folder, into the re-run.)"""
    from optuna.trial import TrialState
    retries = int(trial.user_attrs.get("retries", 0))
    if retries >= MAX_RETRIES:
        return None
    study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number,
                                                  "retries": retries + 1})
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    return max((t.number for t in waiting if t.user_attrs.get("retry_of") == trial.number),
               default=None)


@contextmanager
def _storage_errors(url: str):
    """A database that cannot be opened is a one-line error, not a traceback."""
    import sqlalchemy.exc
    try:
        yield
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--storage {url}: {first}") from None


# ==================================================================== trials
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


# ==================================================================== driver
class SearchWorker:
    """One worker of a search: takes trials from the (maybe shared) study until none is left.

    ``start_trial(spec, params, run_dir)`` returns an object with ``poll()``,
    ``stop()`` and ``result()`` like :class:`TrainingTrial`; tests pass a fake one.
    """

    def __init__(self, spec: SearchSpec, search_dir, *, start_trial=TrainingTrial,
                 stop: threading.Event | None = None, poll_s: float = 1.0, log=print):
        self.spec, self.dir = spec, Path(search_dir)
        self.start_trial, self.poll_s, self.log = start_trial, poll_s, log
        self.stop = stop or threading.Event()
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.started = runs.process_started()  # with the pid: tells a reused pid apart
        self.dir.mkdir(parents=True, exist_ok=True)
        with _folder_lock(self.dir):  # one local worker creates the tables and search.json
            self.record = _claim_folder(spec, self.dir)
            self.study = open_study(spec, self.dir)
            self._fail_dead_trials()
        self.distributions = spec.distributions()
        self.ran = 0

    # -- the loop -----------------------------------------------------------------
    def run(self) -> str:
        """Run trials; returns this worker's end state: finished or stopped."""
        self.write_status("running", "started")
        try:
            while not self.stop.is_set():
                trial = self.next_trial()
                if trial is None:
                    break
                self.run_trial(trial)
                self.ran += 1
        except BaseException as e:  # e.g. the database went away: say so, then fail loudly
            try:
                self.write_status("stopped" if isinstance(e, KeyboardInterrupt) else "failed",
                                  f"{type(e).__name__}: {e}")
            except Exception:
                pass
            raise
        state = "stopped" if self.stop.is_set() else "finished"
        self.write_status(state, f"{state} after {self.ran} trial(s) of this worker")
        return state

    def next_trial(self):
        """Ask the study for a trial: a queued re-run first, then a new point; None when
        ``size`` points have been started and no re-run waits."""
        from optuna.trial import TrialState
        with _folder_lock(self.dir):
            self._fail_dead_trials()
            trials = self.study.get_trials(deepcopy=False)
            waiting = any(t.state == TrialState.WAITING for t in trials)
            if sum(map(_fresh, trials)) >= self.spec.size and not waiting:
                return None
            with warnings.catch_warnings():  # "Heartbeat ... supposed to be used with
                warnings.simplefilter("ignore", UserWarning)  # optimize": we record it
                trial = self.study.ask(self.distributions)
        trial.storage.record_heartbeat(trial._trial_id)
        if "retry_of" in trial.user_attrs:
            return trial
        before = [t for t in self.study.get_trials(deepcopy=False)
                  if t.number < trial.number and _fresh(t)]
        if len(before) >= self.spec.size:
            # a worker elsewhere took the last point between our count and our ask
            trial.set_user_attr("surplus", True)
            self.study.tell(trial, state=TrialState.FAIL)
            return None
        return trial

    def run_trial(self, trial) -> dict:
        params, number = dict(trial.params), trial.number
        run_dir = trial_dir(self.dir, number)
        record = {"search": self.record["name"], "number": number, "params": params,
                  "retry_of": trial.user_attrs.get("retry_of"),
                  "state": "running", "value": None, "objective": self.spec.objective,
                  "direction": self.spec.direction, "test": None, "best_epoch": None,
                  "intermediate": {}, "message": "", "host": self.host,
                  "worker_pid": self.pid, "worker_started": self.started,
                  "started": _now_iso(), "finished": None}
        # Under the folder's lock, which a local worker's dead-trial check also holds: it
        # sees this trial's host, pid and trial.json all at once or none of them. Seen in
        # between (the host set, the pid not yet), a running trial read as one whose
        # worker had died, and it was failed and run again (a fifth trial in a grid of 4).
        with _folder_lock(self.dir):
            run_dir.mkdir(parents=True, exist_ok=True)
            for key, value in (("run_dir", str(run_dir.resolve())), ("host", self.host),
                               ("worker_pid", self.pid), ("worker_started", self.started)):
                trial.set_user_attr(key, value)
            _write_trial(run_dir, record)
        self.write_status("running", f"trial {number}: {_params_text(params)}", current=number)
        self.log(f"trial {number}: {_params_text(params)} -> {run_dir}")
        runner = None
        try:
            runner = self.start_trial(self.spec, params, run_dir)
            outcome = self.follow(trial, runner)
        except Exception as e:  # e.g. the process could not start: this trial fails, not the study
            if runner is not None:
                runner.stop()
            outcome = {"state": "failed", "message": f"{type(e).__name__}: {e}"}
        except KeyboardInterrupt:  # a second Ctrl-C: no more waiting for a graceful stop
            if runner is not None:
                runner.stop(grace_s=0)
            self.stop.set()
            outcome = {"state": "stopped", "message": "interrupted"}
        record.update(outcome, finished=_now_iso())
        record.pop("log_tail", None)
        if not self.tell(trial, outcome):
            record.update(state="failed", message=(
                "another worker took this worker for dead (no heartbeat for "
                f"{GRACE_S} s) and re-ran the trial; this result is not in the study"))
        _write_trial(run_dir, record)
        value = "" if record["value"] is None else f" {self.spec.objective} {record['value']:.4g}"
        self.log(f"trial {number} {record['state']}{value}"
                 + (f": {record['message']}" if record["message"] else ""))
        return record

    def follow(self, trial, runner) -> dict:
        """Report each new validation epoch to Optuna, prune or stop the trial if asked;
        returns the outcome fields of trial.json (state, value, test, ...)."""
        objective, last_epoch = self.spec.objective, self.spec.trial_epochs(trial.params)
        reported: dict[str, float] = {}
        beat = _Heartbeat(self.study, trial)
        while True:
            beat()
            rows, alive = runner.poll()
            for row in sorted(rows, key=lambda r: r["epoch"]):
                value = row.get(objective)
                if value is None or not math.isfinite(value):
                    continue
                trial.report(float(value), row["epoch"])
                reported[str(row["epoch"])] = float(value)
                # the last epoch is trained already: pruning it would only hide a result
                if row["epoch"] < last_epoch and trial.should_prune():
                    runner.stop()
                    return {"state": "pruned", "value": float(value), "intermediate": reported,
                            "message": f"pruned after epoch {row['epoch']}"}
            if not alive:
                break
            if self._pause(runner):
                runner.stop()
                return {"state": "stopped", "intermediate": reported,
                        "message": "search stopped (SIGINT/SIGTERM)"}
        return {**self.judge(runner.result()), "intermediate": reported}

    def _pause(self, runner) -> bool:
        """Wait up to poll_s, less if the trial's process ends (a runner with ``wait``);
        True if the search was asked to stop."""
        if hasattr(runner, "wait"):
            runner.wait(self.poll_s)
            return self.stop.is_set()
        return self.stop.wait(self.poll_s)

    def judge(self, res: dict) -> dict:
        """A finished trial process -> complete (with its best/ epoch's values) or failed."""
        best, objective = res.get("best") or {}, self.spec.objective
        value = (best.get("validation") or {}).get(objective)
        if res["returncode"] == 0 and value is not None and math.isfinite(value):
            return {"state": "complete", "value": float(value), "best_epoch": best.get("epoch"),
                    "test": (best.get("test") or {}).get(objective), "message": ""}
        if res["returncode"] == 130 or res.get("state") == "stopped":
            return {"state": "stopped", "message": "the trial's run was stopped"}
        why = (f"exit status {res['returncode']}" if res["returncode"]
               else f"no validation {objective}")
        tail = (res.get("log_tail") or "").strip()
        last = tail.splitlines()[-1] if tail else ""
        return {"state": "failed", "message": f"{why}: {last}" if last else why,
                "log_tail": tail}

    def tell(self, trial, outcome: dict) -> bool:
        """Give the study the outcome; False if the trial was ended already (another
        worker took this one for dead and queued a re-run): nothing is counted twice."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState
        try:
            if outcome["state"] == "complete":
                self.study.tell(trial, outcome["value"])
                return True
            if outcome.get("message"):
                trial.set_user_attr("message", outcome["message"])
            if outcome.get("log_tail"):
                trial.set_user_attr("log_tail", outcome["log_tail"])
            self.study.tell(trial, state=TrialState.PRUNED if outcome["state"] == "pruned"
                            else TrialState.FAIL)
        except (UpdateFinishedTrialError, ValueError, RuntimeError) as e:
            if self.study._storage.get_trial(trial._trial_id).state.is_finished():
                self.log(f"trial {trial.number}: not counted, it was ended meanwhile ({e})")
                return False
            raise
        return True

    def _fail_dead_trials(self) -> None:
        """RUNNING trials whose worker died -> FAIL, each with a re-run queued
        (:func:`retry_dead_trial`): on this host when the worker's pid is gone, on any
        host when its heartbeat is older than GRACE_S (Optuna's ``fail_stale_trials``)."""
        import optuna
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            rec, folder = _trial_record(t, self.dir)
            if rec.get("host") != self.host or _worker_alive(rec):
                continue
            try:  # row-locked: of two workers that see the death, one ends it
                if not self.study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL):
                    continue
            except UpdateFinishedTrialError:
                continue
            again = retry_dead_trial(self.study, t)
            message = f"its search worker (pid {rec.get('worker_pid')}) died; " + (
                f"re-run as trial {again}" if again is not None
                else f"not re-run: already re-run {MAX_RETRIES} times")
            self.log(f"trial {t.number}: {message}")
            if folder is not None:
                runs.stop_run(folder)  # the orphaned training, if it still runs
                if rec.get("number") is not None:
                    _write_trial(folder, {**rec, "state": "failed", "finished": _now_iso(),
                                          "message": message})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)

    # -- status.json ----------------------------------------------------------------
    def counts(self) -> dict:
        return study_counts(self.study.get_trials(deepcopy=False), self.spec.size,
                            self.spec.direction, self.spec.objective)

    def write_status(self, state: str, message: str = "", current: int | None = None) -> None:
        """status.json for the whole search: counts from the study; "running" while any
        local worker of it runs (with that worker's pid, so a dead one reads "killed")."""
        with _folder_lock(self.dir):
            old = read_json(runs.run_paths(self.dir).status) or {}
            others = {pid: dict(w) for pid, w in (old.get("workers") or {}).items()
                      if pid != str(self.pid) and isinstance(w, dict)}
            for pid, w in others.items():
                if w.get("state") == "running" and not runs.pid_alive(pid, w.get("started")):
                    w["state"] = "killed"
            running = [pid for pid, w in others.items() if w.get("state") == "running"]
            overall, pid, started = state, self.pid, self.started
            if state != "running" and running:
                overall, pid, started = "running", int(running[0]), others[running[0]]["started"]
            runs.write_status(self.dir, {
                "state": overall, **self.counts(), "current_trial": current,
                "message": message, "pid": pid, "started": started,
                "workers": {**others, str(self.pid): {"state": state, "started": self.started}}})


def _worker_alive(rec: dict) -> bool:
    return runs.pid_alive(rec.get("worker_pid"), rec.get("worker_started"))


def _fresh(t) -> bool:
    """A trial of a new point: not a re-run of a dead one, not a surplus claim."""
    return "retry_of" not in t.user_attrs and not t.user_attrs.get("surplus")


def _trial_record(t, search_dir: Path) -> tuple[dict, Path | None]:
    """(trial.json, its folder) of a study trial whose folder is on this host, else (the
    study's user attrs, None). Searches before user attr "worker_pid": trial.json."""
    folder = Path(t.user_attrs.get("run_dir") or trial_dir(search_dir, t.number))
    rec = read_json(folder / TRIAL_FILE) if folder.is_dir() else None
    if rec:
        return rec, folder
    return dict(t.user_attrs), None


class _Heartbeat:
    """Records the trial's heartbeat in the study at most every HEARTBEAT_S."""

    def __init__(self, study, trial):
        self.study, self.trial, self.last = study, trial, 0.0

    def __call__(self) -> None:
        import time
        if time.monotonic() - self.last >= HEARTBEAT_S:
            self.trial.storage.record_heartbeat(self.trial._trial_id)
            self.last = time.monotonic()


def study_counts(trials: list, size: int, direction: str, objective: str) -> dict:
    """status.json's counts over a whole study: each grid point once, as its last re-run
    ("retried": trials ended by a dead worker and run again; "waiting": re-runs queued)."""
    from optuna.trial import TrialState
    rerun = {t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs}
    final = [t for t in trials if not t.user_attrs.get("surplus") and t.number not in rerun]
    n = {s: sum(t.state == s for t in final) for s in TrialState}
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    pick = min if direction == "minimize" else max
    best = pick(complete, key=lambda t: t.value) if complete else None
    fresh = sum(map(_fresh, trials))
    return {"size": size, "complete": n[TrialState.COMPLETE], "pruned": n[TrialState.PRUNED],
            "failed": n[TrialState.FAIL], "running": n[TrialState.RUNNING],
            "waiting": n[TrialState.WAITING], "retried": len(rerun),
            "left": max(0, size - fresh) + n[TrialState.WAITING],
            "best_trial": best.number if best else None,
            "best_value": best.value if best else None, "objective": objective}


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={config.format_value(v)}" for k, v in params.items())


# ==================================================================== reading
def read_search(search_dir, *, study: bool = False, peers: list | None = None) -> dict:
    """A search for a page: {"name", "path", "spec" (search.json), "status", "trials",
    "best"} from plain files; no Optuna state needed.

    Each trial row: {"number", "params", "state", "value", "test", "best_epoch",
    "message", "retry_of", "run" (its run folder), "local" (the folder is here)}, by
    number. ``peers``: other folders of the same study (workers with their own --out,
    or folders rsync'ed here), whose trial folders are read too. ``study=True`` also
    opens the study and adds the trials whose folders are elsewhere (their "run" is
    HOST:PATH) and the re-runs still waiting.
    """
    search_dir = Path(search_dir)
    spec = read_json(search_dir / SEARCH_FILE) or {}
    rows = {}
    for folder in [search_dir, *(peers or [])]:
        rows.update({n: r for n, r in _local_rows(Path(folder)).items() if n not in rows})
    if study and spec:
        for r in _remote_rows(spec, search_dir):
            mine = rows.get(r["number"])
            if mine is None:
                rows[r["number"]] = r
            elif mine["state"] in ("running", "killed") and r["state"] != "running":
                # its worker died elsewhere and the study knows: a copied trial.json does not
                mine.update(state=r["state"], message=r["message"] or mine["message"])
    trials = [rows[n] for n in sorted(rows)]
    done = [r for r in trials if r["state"] == "complete" and r["value"] is not None]
    pick = min if spec.get("direction") == "minimize" else max
    return {"name": spec.get("name", search_dir.name), "path": str(search_dir), "spec": spec,
            "status": runs.read_status(search_dir) or {}, "trials": trials,
            "best": pick(done, key=lambda r: r["value"]) if done else None}


def study_groups(folders) -> list[list[Path]]:
    """Search folders grouped by the study they share, in the given order: workers with
    their own --out on one --storage and study name are one search (the default
    study.db belongs to its folder alone)."""
    groups: dict[tuple, list[Path]] = {}
    for d in map(Path, folders):
        rec = read_json(d / SEARCH_FILE) or {}
        key = (rec.get("storage") or str(d.resolve()), rec.get("study") or d.name)
        groups.setdefault(key, []).append(d)
    return list(groups.values())


def group_status(folders) -> dict:
    """One status for a study's folders: the counts of the latest written, "running"
    while a worker of any folder runs (or "queued", while one waits)."""
    statuses = [runs.read_status(d) or {} for d in folders]
    latest = max(statuses, key=lambda st: st.get("updated") or 0)
    states = {st.get("state") for st in statuses}
    active = next((s for s in ("running", "queued") if s in states), None)
    return {**latest, "state": active or latest.get("state"),
            "workers": {pid: w for st in statuses for pid, w in (st.get("workers") or {}).items()}}


def _local_rows(search_dir: Path) -> dict[int, dict]:
    host, rows = socket.gethostname(), {}
    for d in sorted(search_dir.glob("trial-*")):
        rec = read_json(d / TRIAL_FILE)
        if not rec:
            continue
        if rec.get("state") == "running" and rec.get("host") == host and not _worker_alive(rec):
            rec["state"] = "killed"
        rows[rec["number"]] = {k: rec.get(k) for k in ("number", "params", "state", "value",
                                                        "test", "best_epoch", "message",
                                                        "retry_of")}
        rows[rec["number"]].update(run=str(d), local=True)
    return rows


def _remote_rows(record: dict, search_dir: Path) -> list[dict]:
    import optuna
    from optuna.trial import TrialState
    url = storage_url(SearchSpec.from_dict(record), search_dir)
    try:
        with _storage_errors(url):
            st = optuna.load_study(study_name=record["study"], storage=_storage(url))
    except KeyError:  # search.json is written a moment before the study is created
        return []
    names = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned",
             TrialState.FAIL: "failed", TrialState.RUNNING: "running"}
    return [{"number": t.number, "params": t.params or t.system_attrs.get("fixed_params", {}),
             "state": names.get(t.state, "waiting"), "value": t.value, "test": None,
             "best_epoch": None, "message": t.user_attrs.get("message", ""),
             "retry_of": t.user_attrs.get("retry_of"), "local": False,
             "run": f"{t.user_attrs.get('host', '?')}:{t.user_attrs.get('run_dir', '?')}"}
            for t in st.get_trials(deepcopy=False) if not t.user_attrs.get("surplus")]


def format_table(summary: dict) -> str:
    """The final table: trial, params, state, objective (validation) and test."""
    objective = summary["spec"].get("objective", "accuracy")
    names = list(summary["spec"].get("grid", {})) + list(summary["spec"].get("ranges", {}))
    head = ["trial", *names, "state", objective, "test"]
    num = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
    body = [[str(r["number"]), *(config.format_value(r["params"].get(n)) for n in names), r["state"],
             num(r["value"]), num(r["test"])] for r in summary["trials"]]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in [head, *body]]
    best = summary["best"]
    if best:
        lines.append(f"best: trial {best['number']} ({_params_text(best['params'])}): "
                     f"validation {objective} {best['value']:.4f}"
                     + (f", test {best['test']:.4f}" if best["test"] is not None else "")
                     + f" -> {Path(best['run']) / 'best'}")
    else:
        lines.append("best: no trial completed")
    return "\n".join(lines)
