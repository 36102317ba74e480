"""A search worker (:class:`SearchWorker`): takes trials from the study, runs each as its
own training process, reports its epochs to the pruner, tells the study how it ended, and
keeps status.json; plus :func:`study_counts`, the counts status.json shows.

Workers: the same command on several processes or machines with one ``--storage``
(or the default study.db, for processes on one machine) shares the study; each
worker takes the next trial until ``size`` trials exist. Trial numbers are unique
in a study, so a trial numbered ``size`` or above is a worker's late claim: it is
closed at once (FAIL, user attr "surplus") and never runs or gets a folder.
"""
from __future__ import annotations

import math
import os
import socket
import threading
import warnings
from pathlib import Path

from reviewbert.fsio import read_json
from reviewbert.training import runs
from reviewbert.training.runs import TRIAL_FILE
from reviewbert.training.search import study as search_study
from reviewbert.training.search.folders import (
    claim_folder,
    folder_lock,
    now_iso,
    trial_dir,
    worker_alive,
    write_trial,
)
from reviewbert.training.search.spec import SearchSpec, params_text
from reviewbert.training.search.trials import TrainingTrial


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
        with folder_lock(self.dir):  # one local worker creates the tables and search.json
            self.record = claim_folder(spec, self.dir)
            self.study = search_study.open_study(spec, self.dir)
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
        with folder_lock(self.dir):
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
                  "started": now_iso(), "finished": None}
        # Under the folder's lock, which a local worker's dead-trial check also holds: it
        # sees this trial's host, pid and trial.json all at once or none of them. Seen in
        # between (the host set, the pid not yet), a running trial read as one whose
        # worker had died, and it was failed and run again (a fifth trial in a grid of 4).
        with folder_lock(self.dir):
            run_dir.mkdir(parents=True, exist_ok=True)
            for key, value in (("run_dir", str(run_dir.resolve())), ("host", self.host),
                               ("worker_pid", self.pid), ("worker_started", self.started)):
                trial.set_user_attr(key, value)
            write_trial(run_dir, record)
        self.write_status("running", f"trial {number}: {params_text(params)}", current=number)
        self.log(f"trial {number}: {params_text(params)} -> {run_dir}")
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
        record.update(outcome, finished=now_iso())
        record.pop("log_tail", None)
        if not self.tell(trial, outcome):
            record.update(state="failed", message=(
                "another worker took this worker for dead (no heartbeat for "
                f"{search_study.GRACE_S} s) and re-ran the trial; this result is not in the study"))
        write_trial(run_dir, record)
        value = "" if record["value"] is None else f" {self.spec.objective} {record['value']:.4g}"
        self.log(f"trial {number} {record['state']}{value}"
                 + (f": {record['message']}" if record["message"] else ""))
        return record

    def follow(self, trial, runner) -> dict:
        """Report each new validation epoch to Optuna, prune or stop the trial if asked;
        returns the outcome fields of trial.json (state, value, test, ...)."""
        objective, last_epoch = self.spec.objective, self.spec.trial_epochs(trial.params)
        reported: dict[str, float] = {}
        beat = search_study.Heartbeat(self.study, trial)
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
        (:func:`study.retry_dead_trial`): on this host when the worker's pid is gone, on any
        host when its heartbeat is older than GRACE_S (Optuna's ``fail_stale_trials``)."""
        import optuna
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            rec, folder = _trial_record(t, self.dir)
            if rec.get("host") != self.host or worker_alive(rec):
                continue
            try:  # row-locked: of two workers that see the death, one ends it
                if not self.study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL):
                    continue
            except UpdateFinishedTrialError:
                continue
            again = search_study.retry_dead_trial(self.study, t)
            message = f"its search worker (pid {rec.get('worker_pid')}) died; " + (
                f"re-run as trial {again}" if again is not None
                else f"not re-run: already re-run {search_study.MAX_RETRIES} times")
            self.log(f"trial {t.number}: {message}")
            if folder is not None:
                runs.stop_run(folder)  # the orphaned training, if it still runs
                if rec.get("number") is not None:
                    write_trial(folder, {**rec, "state": "failed", "finished": now_iso(),
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
        with folder_lock(self.dir):
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
