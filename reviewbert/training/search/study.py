"""A search's Optuna study: opened (or created) in its storage, with the grid sampler
that workers sharing it need, heartbeats, and the re-run of a trial whose worker died.

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
"""
from __future__ import annotations

import os
import time
import warnings
from contextlib import contextmanager

from reviewbert.errors import ConfigError
from reviewbert.training.search.folders import storage_url, study_name
from reviewbert.training.search.spec import SearchSpec

# a running trial's worker writes a heartbeat every HEARTBEAT_S; one silent for GRACE_S is
# dead to workers on other hosts (same host: its pid tells at once). Env: tests shorten them.
HEARTBEAT_S = int(os.environ.get("REVIEWBERT_SEARCH_HEARTBEAT_S", "20"))
GRACE_S = int(os.environ.get("REVIEWBERT_SEARCH_GRACE_S", "180"))
MAX_RETRIES = 2  # re-runs of a grid point whose worker died, before it stays failed


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
    with storage_errors(url):
        return _first_of_racing_workers(lambda: optuna.create_study(
            storage=open_storage(url, heartbeat=True), study_name=study_name(spec, search_dir),
            sampler=sampler, pruner=pruner, direction=spec.direction, load_if_exists=True))


def _first_of_racing_workers(create, attempts: int = 6):
    """Workers started together on an empty database all create Optuna's tables at once;
    all but one then fail (PostgreSQL: IntegrityError, duplicate key in pg_type; SQLite:
    "table studies already exists"). The tables exist by then: try again after a short
    random pause."""
    import random

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


def open_storage(url: str, heartbeat: bool = False):
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
def storage_errors(url: str):
    """A database that cannot be opened is a one-line error, not a traceback."""
    import sqlalchemy.exc
    try:
        yield
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--storage {url}: {first}") from None


class Heartbeat:
    """Records the trial's heartbeat in the study at most every HEARTBEAT_S."""

    def __init__(self, study, trial):
        self.study, self.trial, self.last = study, trial, 0.0

    def __call__(self) -> None:
        if time.monotonic() - self.last >= HEARTBEAT_S:
            self.trial.storage.record_heartbeat(self.trial._trial_id)
            self.last = time.monotonic()
