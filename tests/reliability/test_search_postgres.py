"""A search across processes on a real PostgreSQL server (``make distributed``).

Three ``reviewbert search`` workers, each its own process with its own --out folder,
share one grid through ``--storage postgresql://…`` on a throwaway server (Debian's
postgres, initdb in a temporary folder, 127.0.0.1 only). Every grid point must run
exactly once; the Train page (AppTest) must list all three workers' trials with their
states; a worker SIGKILLed mid-trial must leave its trial failed and re-run, never
lost and never counted twice. The server is stopped and its folder removed by the
fixture's finaliser, even when a test fails. Figures: artifacts/distributed/*.json.
"""
from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from streamlit.testing.v1 import AppTest

from reviewbert.training import runs
from reviewbert.ui import state as S

from toyreviews import ROOT, quiet_env, write_toy_csv

pytestmark = [pytest.mark.distributed]
ART = ROOT / "artifacts" / "distributed"
APP = str(ROOT / "app.py")
LR_BERT, LR_CLASSIFIER = [1e-5, 5e-5], [1e-3, 1e-2, 1e-1]
GRID = ["--grid", "lr_bert=1e-5,5e-5", "--grid", "lr_classifier=1e-3,1e-2,1e-1"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("pg-data") / "toy.csv", n=300)


def start_workers(root: Path, url: str, study: str, toy, tiny, epochs: int) -> list:
    cmd = [sys.executable, "-m", "reviewbert", "search", "--data", str(toy), "--base-model",
           str(tiny), "--max-length", "32", "--epochs", str(epochs), "--batch-size", "8",
           "--train-eval-max", "50", "--seed", "0", *GRID, "--storage", url,
           "--study-name", study]
    return [subprocess.Popen(cmd + ["--out", str(root / f"w{i}")], cwd=ROOT, env=quiet_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for i in (1, 2, 3)]


def wait_all(workers, timeout=600) -> list[str]:
    try:
        return [w.communicate(timeout=timeout)[0] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()


def study_trials(url, study):
    return optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)


def grid_points(trials) -> list[tuple]:
    return sorted((t.params["lr_bert"], t.params["lr_classifier"]) for t in trials
                  if t.state == TrialState.COMPLETE)


def trial_folders(root: Path) -> dict[int, Path]:
    """trial number -> its folder, over the three workers' --out folders (each once)."""
    found: dict[int, Path] = {}
    for d in sorted(root.glob("w*/trial-*")):
        number = int(d.name.split("-")[1])
        assert number not in found, f"trial {number} has two folders: {found[number]}, {d}"
        found[number] = d
    return found


def search_page(root: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page(S.TRAIN_PAGE).run()
    at.radio(key=S.TRAIN_VIEW).set_value("Search").run()
    assert not at.exception, at.exception
    return at


def table_of(at):
    return next(d.value for d in at.dataframe if "best" in d.value.columns)


def report(name: str, figures: dict) -> None:
    ART.mkdir(parents=True, exist_ok=True)
    (ART / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")


def test_three_workers_run_every_grid_point_once(postgres, toy, tiny_model_dir, tmp_path,
                                                 monkeypatch):
    root = tmp_path / "ckpts"
    started = time.time()
    outputs = wait_all(start_workers(root, postgres.url, "grid", toy, tiny_model_dir, epochs=1))
    wall = time.time() - started
    trials = study_trials(postgres.url, "grid")
    real = [t for t in trials if not t.user_attrs.get("surplus")]
    assert [t.state for t in real] == [TrialState.COMPLETE] * 6, outputs
    assert grid_points(real) == sorted(itertools.product(LR_BERT, LR_CLASSIFIER))
    folders = trial_folders(root)
    assert sorted(folders) == [t.number for t in real]
    assert all((f / "best" / "config.json").exists() for f in folders.values())
    ran = {f.parent.name for f in folders.values()}
    assert ran == {"w1", "w2", "w3"}, [o[-1500:] for o in outputs]  # all three took trials
    # the Train page: one search of three worker folders, every trial with its state
    at = search_page(root, monkeypatch)
    text = "\n".join(m.value for m in at.markdown)
    assert "on 3 worker folders" in text and "6 done · 0 pruned · 0 failed · 0 left of 6" in \
        "\n".join(p.proto.text for p in at.get("progress"))
    table = table_of(at)
    assert sorted(table["trial"]) == list(range(6))
    assert set(table["state"]) == {"finished"}
    assert {r.split("/")[0] for r in table["run"]} == {"w1", "w2", "w3"}
    report("postgres_grid", {"workers": 3, "grid_points": 6, "trials": len(real),
                             "complete": len(grid_points(real)), "duplicates": 0,
                             "surplus_claims_closed": len(trials) - len(real),
                             "per_worker": {w: sum(f.parent.name == w for f in folders.values())
                                            for w in sorted(ran)},
                             "wall_s": round(wall, 1)})


def _wait_mid_trial(worker_dir: Path, worker, timeout=300) -> Path:
    """A trial folder of this worker whose training has written its first epoch."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert worker.poll() is None, worker.communicate()[0][-3000:]
        for d in worker_dir.glob("trial-*"):
            st = runs.read_status(d) or {}
            if st.get("state") == "running" and runs.read_metrics(d):
                return d
        time.sleep(0.2)
    raise AssertionError("the worker never got mid-trial")


def test_a_worker_killed_mid_trial_leaves_a_failed_trial_that_is_rerun(
        postgres, toy, tiny_model_dir, tmp_path, monkeypatch):
    root = tmp_path / "ckpts"
    workers = start_workers(root, postgres.url, "kill", toy, tiny_model_dir, epochs=4)
    killed = _wait_mid_trial(root / "w1", workers[0])
    workers[0].send_signal(signal.SIGKILL)
    outputs = wait_all(workers[1:])
    workers[0].wait()
    number = int(killed.name.split("-")[1])
    trials = {t.number: t for t in study_trials(postgres.url, "kill")
              if not t.user_attrs.get("surplus")}
    dead = trials[number]
    reruns = [t for t in trials.values() if t.user_attrs.get("retry_of") == number]
    assert dead.state == TrialState.FAIL, outputs
    assert len(reruns) == 1 and reruns[0].state == TrialState.COMPLETE
    assert reruns[0].params == dead.params
    # never lost, never counted twice: every point complete exactly once, nothing left running
    assert grid_points(trials.values()) == sorted(itertools.product(LR_BERT, LR_CLASSIFIER))
    assert not [t for t in trials.values() if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    rec = json.loads((killed / "trial.json").read_text())
    assert rec["state"] == "failed" and f"re-run as trial {reruns[0].number}" in rec["message"]
    # its training, orphaned by the kill, stopped itself after a step and saved last/
    deadline = time.time() + 60
    while (runs.read_status(killed) or {}).get("state") == "running" and time.time() < deadline:
        time.sleep(0.5)
    assert (runs.read_status(killed) or {}).get("state") == "stopped"
    assert "search worker" in runs.read_log_tail(killed)
    # the page: the dead trial failed with its reason, its re-run finished, counts right
    at = search_page(root, monkeypatch)
    progress = "\n".join(p.proto.text for p in at.get("progress"))
    assert "6 done · 0 pruned · 0 failed · 0 left of 6 · 1 re-run after a worker died" in progress
    table = table_of(at)
    assert len(table) == 7
    assert table.set_index("trial").loc[number, "state"] == "stopped"
    assert table.set_index("trial").loc[reruns[0].number, "state"] == "finished"
    report("postgres_kill", {"workers": 3, "grid_points": 6, "killed_trial": number,
                             "rerun_as": reruns[0].number, "trials": len(trials),
                             "complete": len(grid_points(trials.values())), "duplicates": 0,
                             "lost": 0, "orphan_training": "stopped"})
