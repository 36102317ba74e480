"""Hyperparameter search: a grid of tiny runs, the pruning loop on known curves, two
workers sharing one SQLite study, and clean errors for bad --grid values."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from reviewbert.cli import main
from reviewbert.config import to_argv
from reviewbert.errors import ConfigError
from reviewbert.model.checkpoint import read_meta
from reviewbert.training import search
from reviewbert.training.runs import read_metrics, read_status
from reviewbert.training.search import folders as search_folders
from reviewbert.training.search import study as search_study

from toyreviews import ROOT, cli, quiet_env, write_toy_csv

GRID = {"lr_bert": [1e-5, 5e-5], "lr_classifier": [1e-3, 1e-2]}
GRID_FLAGS = ["--grid", "lr_bert=1e-5,5e-5", "--grid", "lr_classifier=1e-3,1e-2"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=150)


def flags(toy, tiny):
    return ["--data", toy, "--base-model", tiny, "--max-length", "32", "--epochs", "1",
            "--batch-size", "8", "--train-eval-max", "50", "--seed", "0"]


def load_study(out, url=None):
    return optuna.load_study(study_name=out.name, storage=url or f"sqlite:///{out}/study.db")


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# ----------------------------------------------------------------- real trials
def test_grid_of_tiny_runs_completes_every_point(tmp_path, toy, tiny_model_dir):
    out = tmp_path / "grid"
    res = cli("search", *flags(toy, tiny_model_dir), *GRID_FLAGS, "--out", out, "--json",
              timeout=400)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]

    trials = load_study(out).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    combos = sorted((t.params["lr_bert"], t.params["lr_classifier"]) for t in trials)
    assert combos == sorted(itertools.product(*GRID.values()))
    for t in trials:
        run = out / f"trial-{t.number:04d}"
        assert t.user_attrs["run_dir"] == str(run.resolve())
        assert (run / "best" / "config.json").exists()
        assert [(r["epoch"], r["split"]) for r in read_metrics(run)] == \
            [(1, "train"), (1, "validation"), (1, "test")]
        # the trial's params reached its training, and its value is validation, not test
        hp = read_meta(run)["hyperparameters"]
        assert (hp["lr_bert"], hp["lr_classifier"]) == (t.params["lr_bert"],
                                                        t.params["lr_classifier"])
        best = read_meta(run)["best"]
        assert t.value == pytest.approx(best["validation"]["accuracy"])
        rec = json.loads((run / "trial.json").read_text())
        assert rec["state"] == "complete" and rec["number"] == t.number
        assert rec["params"] == t.params and rec["value"] == pytest.approx(t.value)
        assert rec["test"] == pytest.approx(best["test"]["accuracy"])

    st = read_status(out)
    assert st["state"] == "finished"
    assert (st["complete"], st["pruned"], st["failed"], st["left"]) == (4, 0, 0, 0)
    spec = json.loads((out / "search.json").read_text())
    assert spec["grid"] == GRID and spec["size"] == 4 and spec["base"]["epochs"] == 1
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["state"] == "finished" and len(summary["trials"]) == 4
    assert summary["best"]["number"] == st["best_trial"]
    assert f"best: trial {st['best_trial']} (" in res.stdout
    assert search.read_search(out)["trials"] == summary["trials"]

    # a rerun of the same search has nothing left to do and runs nothing twice
    assert main(["search", *map(str, flags(toy, tiny_model_dir)), *GRID_FLAGS,
                 "--out", str(out)]) == 0
    assert len(load_study(out).trials) == 4


def test_two_workers_split_one_sqlite_study(tmp_path, toy, tiny_model_dir):
    out = tmp_path / "shared"
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    cmd = [sys.executable, "-m", "reviewbert", "search", *map(str, flags(toy, tiny_model_dir)),
           *GRID_FLAGS, "--storage", url, "--out", str(out), "--json"]
    workers = [subprocess.Popen(cmd, cwd=ROOT, env=quiet_env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for _ in range(2)]
    try:
        outputs = [w.communicate(timeout=400) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    for w, (so, se) in zip(workers, outputs):
        assert w.returncode == 0, so[-2000:] + se[-3000:]

    trials = load_study(out, url).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4  # no fifth, surplus claim
    combos = [(t.params["lr_bert"], t.params["lr_classifier"]) for t in trials]
    assert sorted(combos) == sorted(itertools.product(*GRID.values()))  # none twice
    # each worker ran at least one trial, and no trial was run by both
    ran = [{int(line.split()[1]) for line in so.splitlines()
            if line.startswith("trial ") and " complete" in line} for so, _ in outputs]
    assert all(ran) and not ran[0] & ran[1] and ran[0] | ran[1] == {0, 1, 2, 3}
    assert sorted(p.name for p in out.glob("trial-*")) == [f"trial-{n:04d}" for n in range(4)]
    assert all((out / f"trial-{n:04d}" / "best").is_dir() for n in range(4))
    st = read_status(out)
    assert st["state"] == "finished" and st["complete"] == 4 and len(st["workers"]) == 2


# ---------------------------------------------------------------- pruning loop
class FakeTrial:
    """A trial whose validation curve is known: one epoch per poll, no training."""

    def __init__(self, curves, spec, params, run_dir):
        self.number = int(run_dir.name.split("-")[1])
        self.curve, self.objective = curves[self.number], spec.objective
        self.epoch, self.stopped = 0, False

    def poll(self):
        if self.stopped or self.epoch == len(self.curve):
            return [], False
        self.epoch += 1
        row = {"epoch": self.epoch, "split": "validation",
               self.objective: self.curve[self.epoch - 1]}
        return [row], self.epoch < len(self.curve)

    def stop(self, grace_s=0):
        self.stopped = True

    def result(self):
        # a test metric that would crown trial 0: the search must not look at it
        return {"returncode": 0, "state": "finished", "log_tail": "",
                "best": {"epoch": self.epoch,
                         "validation": {self.objective: self.curve[-1]},
                         "test": {self.objective: 0.99 if self.number == 0 else 0.01}}}


@pytest.mark.parametrize("objective", ["accuracy", "loss"])
def test_median_pruner_prunes_exactly_the_bad_curves(tmp_path, toy, objective):
    good = lambda n: [0.30 + n / 100, 0.50 + n / 100, 0.60 + n / 100]  # noqa: E731
    bad = [0.10, 0.15, 0.20]
    # trial 6 keeps up until the last epoch and falls below the median only there: it
    # has trained all its epochs by then, so it completes (pruning would hide a result)
    curves = {0: good(0), 1: bad, 2: good(2), 3: bad, 4: good(4), 5: bad,
              6: [0.35, 0.52, 0.53]}
    if objective == "loss":  # the same race, minimised
        curves = {n: [1 - v for v in c] for n, c in curves.items()}
    spec = search.SearchSpec(base={"data": [str(toy)], "epochs": 3},
                             grid={"seed": list(range(7))}, objective=objective,
                             prune=True, prune_startup=2)
    spec.check()
    fakes = {}

    def start(spec, params, run_dir):
        fakes[run_dir.name] = FakeTrial(curves, spec, params, run_dir)
        return fakes[run_dir.name]

    out = tmp_path / "pruned"
    worker = search.SearchWorker(spec, out, start_trial=start, poll_s=0, log=lambda *a: None)
    assert worker.run() == "finished"

    states = [t.state for t in load_study(out).trials]
    # trial 1 is bad too, but only one trial had completed before it (startup: 2)
    assert states == [TrialState.COMPLETE] * 3 + [TrialState.PRUNED, TrialState.COMPLETE,
                                                   TrialState.PRUNED, TrialState.COMPLETE]
    for n in (3, 5):  # stopped after their first epoch
        assert fakes[f"trial-{n:04d}"].stopped and fakes[f"trial-{n:04d}"].epoch == 1
        rec = json.loads((out / f"trial-{n:04d}" / "trial.json").read_text())
        assert rec["state"] == "pruned" and list(rec["intermediate"]) == ["1"]
    info = search.read_search(out)
    assert search.SearchSpec.from_dict(info["spec"]) == spec  # search.json keeps the spec
    assert [r["state"] for r in info["trials"]] == \
        ["complete", "complete", "complete", "pruned", "complete", "pruned", "complete"]
    assert info["best"]["number"] == 4  # by validation; test would have said trial 0
    st = read_status(out)
    assert (st["complete"], st["pruned"], st["best_trial"], st["left"]) == (5, 2, 4, 0)
    assert worker.next_trial() is None  # the grid is done: no eighth trial
    # a trial without its folder here (run on another machine) comes from the study
    (out / "trial-0005" / "trial.json").unlink()
    assert len(search.read_search(out)["trials"]) == 6
    row = search.read_search(out, study=True)["trials"][5]
    assert row["state"] == "pruned" and row["run"].endswith(str((out / "trial-0005").resolve()))


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize("grid, says", [
    ("foo=1", "--grid foo=1: unknown hyperparameter; searchable: "),
    ("lr_bert=1e-5,fast", "'fast' is not a valid float"),
    ("labels=5,4", "must be one of 5, 3"),
    ("epochs=0", "--grid epochs=0: epochs"),  # TrainConfig's own check, its words
])
def test_bad_grid_is_one_line_and_exit_2(tmp_path, toy, capsys, grid, says):
    out = tmp_path / "bad"
    assert main(["search", "--data", str(toy), "--out", str(out), "--grid", grid]) == 2
    assert says in one_error_line(capsys)
    assert not out.exists()


def test_spec_round_trips_through_argv(toy):
    spec = search.SearchSpec.from_args([
        "--data", str(toy), "--max-length", "32", "--no-group-by-length",
        "--sampler", "tpe", "--trials", "7", "--range", "lr_bert=1e-6:1e-4:log",
        "--range", "batch-size=4:16", "--grid", "labels=5,3", "--grid", "freeze_encoder=true,false",
        "--objective", "loss", "--prune", "--prune-startup", "1"])
    assert spec.ranges == {"lr_bert": {"low": 1e-6, "high": 1e-4, "log": True},
                           "batch_size": {"low": 4, "high": 16, "log": False}}
    assert spec.grid == {"labels": [5, 3], "freeze_encoder": [True, False]}
    assert spec.base["group_by_length"] is False and spec.direction == "minimize"
    assert search.SearchSpec.from_args(spec.to_args()) == spec
    dist = spec.distributions()
    assert isinstance(dist["batch_size"], optuna.distributions.IntDistribution)
    assert dist["lr_bert"].log and dist["labels"].choices == (5, 3)
    with pytest.raises(ConfigError, match="needs --sampler tpe"):
        search.SearchSpec.from_args(["--data", str(toy), "--range", "lr_bert=1e-6:1e-4"])
    with pytest.raises(ConfigError, match="log range needs LOW > 0"):
        search.SearchSpec.from_args(["--data", str(toy), "--sampler", "tpe", "--trials", "2",
                                     "--range", "weight_decay=0:0.1:log"])


def test_config_args_repeat_list_flags_and_round_trip_a_full_config(toy, tmp_path):
    """The Train page hands a search every form field, empty lists included."""
    from dataclasses import asdict

    from reviewbert.config import TrainConfig
    full = {**asdict(TrainConfig(data=[str(toy)])), "fractions": [0.6, 0.2, 0.2]}  # JSON: a list
    args = to_argv(full)
    assert "--teachers" not in args                        # an empty list: no flag at all
    assert args[args.index("--fractions"):][:4] == ["--fractions", "0.6", "0.2", "0.2"]
    full.pop("lr_bert")
    spec = search.SearchSpec.from_args(to_argv(full) + ["--grid", "lr_bert=1e-5,5e-5"])
    assert tuple(spec.base["fractions"]) == (0.6, 0.2, 0.2) and "teachers" not in spec.base
    two = to_argv({"data": [str(toy), "b.csv"], "teachers": ["runs/a", "runs/b"]})
    assert two == ["--data", str(toy), "--data", "b.csv", "--teachers", "runs/a",
                   "--teachers", "runs/b"]


# ------------------------------------------------------------- dead workers
class Died(BaseException):
    """A worker's sudden death (SIGKILL) inside a trial: nothing after it runs."""


def dead_process() -> tuple[int, float]:
    """(pid, start time) of a process that has exited: a SIGKILLed worker's record."""
    from reviewbert.training.runs import process_started
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = process_started(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, started


def fake_starter(curves):
    def start(spec, params, run_dir):
        return FakeTrial(curves, spec, params, run_dir)
    return start


def dying_starter(spec, params, run_dir):
    raise Died()


def shared_spec(toy, tmp_path, points=3):
    spec = search.SearchSpec(base={"data": [str(toy)], "epochs": 2},
                             grid={"seed": list(range(points))},
                             storage=f"sqlite:///{tmp_path / 'shared.db'}", study_name="shared")
    spec.check()
    return spec


def complete_points(url):
    trials = optuna.load_study(study_name="shared", storage=url).trials
    return sorted(t.params["seed"] for t in trials if t.state == TrialState.COMPLETE), trials


def test_a_trial_being_claimed_is_not_taken_for_a_dead_workers(tmp_path, toy, monkeypatch):
    """Worker a claims a trial (its host, pid and trial.json) while worker b, in the same
    folder, checks for dead workers' trials, as b does before each of its own. b must not
    read the trial half-claimed (host set, pid not yet) as one whose worker died: that
    failed and re-ran a live trial (a fifth trial in a grid of 4, seen in CI)."""
    import threading
    spec = shared_spec(toy, tmp_path, points=1)
    out = tmp_path / "shared-folder"
    a = search.SearchWorker(spec, out, start_trial=fake_starter({0: [0.3, 0.5]}), poll_s=0,
                            log=lambda *args: None)
    b = search.SearchWorker(spec, out, start_trial=fake_starter({0: [0.3, 0.5]}), poll_s=0,
                            log=lambda *args: None)
    checks, asked = [], []
    real = optuna.trial.Trial.set_user_attr

    def set_user_attr(trial, key, value):
        real(trial, key, value)
        if key == "host":           # b asks for a trial now, between the host and the pid
            checks.append(threading.Thread(target=lambda: asked.append(b.next_trial())))
            checks[-1].start()
            checks[-1].join(0.5)
    monkeypatch.setattr(optuna.trial.Trial, "set_user_attr", set_user_attr)
    trial = a.next_trial()
    a.run_trial(trial)
    for t in checks:
        t.join(30)
    assert checks and not any(t.is_alive() for t in checks)
    assert asked == [None]          # the grid's one point is a's
    trials = optuna.load_study(study_name="shared", storage=spec.storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE]


def test_a_killed_workers_trial_fails_and_its_point_is_rerun_once(tmp_path, toy):
    spec = shared_spec(toy, tmp_path)
    a = search.SearchWorker(spec, tmp_path / "a", start_trial=dying_starter, poll_s=0,
                            log=lambda *a: None)
    a.pid, a.started = dead_process()              # its records name a pid that is gone
    with pytest.raises(Died):
        a.run()
    first = optuna.load_study(study_name="shared", storage=spec.storage).trials
    assert [t.state for t in first] == [TrialState.RUNNING]       # left behind, mid-trial
    lines = []
    b = search.SearchWorker(spec, tmp_path / "b", start_trial=fake_starter(
        {n: [0.3 + n / 10, 0.5 + n / 10] for n in range(8)}), poll_s=0, log=lines.append)
    assert b.run() == "finished"
    points, trials = complete_points(spec.storage)
    assert points == [0, 1, 2]                     # every point complete, none twice
    assert trials[0].state == TrialState.FAIL
    rerun = [t for t in trials if t.user_attrs.get("retry_of") == 0]
    assert len(rerun) == 1 and rerun[0].params == trials[0].params
    assert rerun[0].state == TrialState.COMPLETE and rerun[0].user_attrs["host"] == b.host
    rec = json.loads((tmp_path / "a" / "trial-0000" / "trial.json").read_text())
    assert rec["state"] == "failed"
    assert f"died; re-run as trial {rerun[0].number}" in rec["message"]
    st = read_status(tmp_path / "b")
    assert (st["complete"], st["failed"], st["retried"], st["left"]) == (3, 0, 1, 0)
    info = search.read_search(tmp_path / "b", peers=[tmp_path / "a"])
    assert [r["state"] for r in info["trials"]] == ["failed", "complete", "complete", "complete"]
    assert info["trials"][rerun[0].number]["retry_of"] == 0
    assert any("died; re-run as trial" in line for line in lines)
    assert b.next_trial() is None                  # nothing left, nothing asked twice


def test_a_silent_worker_on_another_host_is_failed_by_its_heartbeat(tmp_path, toy, monkeypatch):
    import time
    monkeypatch.setattr(search_study, "HEARTBEAT_S", 1)      # read there, by the storage
    monkeypatch.setattr(search_study, "GRACE_S", 1)          # and the heartbeat
    spec = shared_spec(toy, tmp_path, points=2)
    a = search.SearchWorker(spec, tmp_path / "a", start_trial=dying_starter, poll_s=0,
                            log=lambda *a: None)
    a.host = "elsewhere"                           # no pid to check: only its heartbeat
    with pytest.raises(Died):
        a.run()
    b = search.SearchWorker(spec, tmp_path / "b", start_trial=fake_starter(
        {n: [0.3, 0.4 + n / 10] for n in range(8)}), poll_s=0, log=lambda *a: None)
    b._fail_dead_trials()                          # within its grace: a's trial stays
    assert optuna.load_study(study_name="shared", storage=spec.storage).trials[0].state \
        == TrialState.RUNNING
    time.sleep(2.5)
    assert b.run() == "finished"
    points, trials = complete_points(spec.storage)
    assert points == [0, 1] and trials[0].state == TrialState.FAIL
    assert [t.user_attrs.get("retry_of") for t in trials] == [None, 0, None]  # re-runs first
    # a's folder still says running (another host's file); the study says what happened
    row = search.read_search(tmp_path / "a", study=True)["trials"][0]
    assert row["state"] == "failed"


def test_a_point_whose_reruns_keep_dying_ends_failed(tmp_path, toy):
    spec = shared_spec(toy, tmp_path, points=1)
    for i in range(search_study.MAX_RETRIES + 1):
        w = search.SearchWorker(spec, tmp_path / f"w{i}", start_trial=dying_starter,
                                poll_s=0, log=lambda *a: None)
        w.pid, w.started = dead_process()
        with pytest.raises(Died):
            w.run()
    last = search.SearchWorker(spec, tmp_path / "last", start_trial=fake_starter({}),
                               poll_s=0, log=lambda *a: None)
    assert last.run() == "finished"               # nothing left to run
    _, trials = complete_points(spec.storage)
    assert [t.state for t in trials] == [TrialState.FAIL] * (search_study.MAX_RETRIES + 1)
    st = read_status(tmp_path / "last")
    assert (st["failed"], st["retried"], st["left"], st["complete"]) == (1, search_study.MAX_RETRIES, 0, 0)


def test_importances_of_trials_that_all_scored_the_same_say_so(tmp_path, toy):
    from reviewbert.training.search import figures as search_figures
    spec = search.SearchSpec(base={"data": [str(toy)], "epochs": 1},
                             grid={"seed": [0, 1, 2], "lr_bert": [1e-5, 2e-5]})
    spec.check()
    flat = {n: [0.2] for n in range(6)}
    search.SearchWorker(spec, tmp_path / "flat", start_trial=fake_starter(flat), poll_s=0,
                        log=lambda *a: None).run()
    study = search_figures.load_study(tmp_path / "flat")
    imp = search_figures.importances(study)
    assert imp.values == {} and imp.n_trials == 6 and "same value" in imp.note
    figs = search_figures.dashboard(study, imp)
    assert set(figs) == set(search_figures.FIGURES)
    assert "same value" in figs["importances"].layout.annotations[0].text


def test_a_search_whose_study_is_not_created_yet_reads_from_its_files(tmp_path, toy):
    spec = search.SearchSpec(base={"data": [str(toy)]}, grid={"seed": [0, 1]})
    spec.check()
    out = tmp_path / "early"
    out.mkdir()
    search_folders.claim_folder(spec, out)        # search.json: the first worker's first step
    info = search.read_search(out, study=True)    # the page asks before the study exists
    assert info["trials"] == [] and info["spec"]["size"] == 2
