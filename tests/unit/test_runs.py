"""Run folders and the machinery behind the training page: process states that never
lie, the device queue, launch/cancel/delete, --config, steps.jsonl, listing searches."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch

from reviewbert.cli import main
from reviewbert.config import TrainConfig, config_errors, group_fields
from reviewbert.errors import ConfigError
from reviewbert.training import runs
from reviewbert.training.runs import (
    RunBusyError,
    cancel_run,
    delete_run,
    launch_training,
    list_runs,
    process_started,
    read_status,
    read_steps,
    truncate_steps,
    write_config,
    write_status,
)

from toyreviews import write_toy_csv


def wait_for(pred, timeout=120, what="condition"):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=250)


def tiny_flags(toy, tiny):
    return ["--data", toy, "--base-model", tiny, "--max-length", "32", "--epochs", "1"]


# ------------------------------------------------------------------ process states
def test_zombie_child_is_killed_and_reaped(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    write_status(tmp_path, {"state": "running", "pid": child.pid,
                            "started": process_started(child.pid)})
    assert read_status(tmp_path)["state"] == "running"
    os.kill(child.pid, signal.SIGKILL)  # and nobody waits for it: a zombie
    wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE,
             what="the zombie")
    os.kill(child.pid, 0)  # still "exists": the old check would call it running
    assert read_status(tmp_path)["state"] == "killed"
    assert not psutil.pid_exists(child.pid)  # ours, so read_status reaped it


def test_reused_pid_is_killed(tmp_path):
    me = process_started()
    write_status(tmp_path, {"state": "running"})  # stamps our pid and start time
    assert read_status(tmp_path)["started"] == me and read_status(tmp_path)["state"] == "running"
    # left by a run that died long ago, whose pid now belongs to us (a process started
    # 1000 s after it): the pid is alive, the run is not
    (tmp_path / "status.json").write_text(json.dumps(
        {"state": "running", "pid": os.getpid(), "started": me - 1000}))
    assert read_status(tmp_path)["state"] == "killed"
    write_status(tmp_path, {"state": "queued", "pid": 2 ** 22 + 12345, "started": me})
    assert read_status(tmp_path)["state"] == "killed"  # no such pid
    write_status(tmp_path, {"state": "finished", "pid": 2 ** 22 + 12345})
    assert read_status(tmp_path)["state"] == "finished"  # only live states are checked


# ------------------------------------------------------------------------- queue
def test_queue_one_run_at_a_time_in_launch_order_and_cancel(tmp_path, toy, tiny_model_dir,
                                                            monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(runs.QUEUE_DIR_ENV, raising=False)
    a, b, c = (tmp_path / n for n in "abc")
    qdir = runs.queue_dir(a, runs.queue_device())
    flags = tiny_flags(toy, tiny_model_dir)
    procs = {}
    try:
        for d in (a, b, c):
            procs[d.name] = launch_training(flags, d, queue=True)
        # queued from the moment launch returns, tickets in launch order
        assert [read_status(d)["state"] for d in (a, b, c)] == ["queued"] * 3
        tickets = sorted(p.name for p in qdir.glob("*.json"))
        assert [int(t.split("-")[1].split(".")[0]) for t in tickets] == \
            [procs[n].pid for n in "abc"]
        with pytest.raises(RunBusyError):
            launch_training(flags, b, queue=True)  # one process per run folder

        wait_for(lambda: read_status(a)["state"] != "queued", what="a to get the slot")
        assert read_status(b)["state"] == "queued"  # a takes seconds more, b waits
        with pytest.raises(RunBusyError, match="running"):
            delete_run(a)

        # c's own process is waiting (it rewrote its status): cancel it
        wait_for(lambda: "ahead" in read_status(c), what="c waiting in the queue")
        with pytest.raises(RunBusyError, match="queued"):
            delete_run(c)
        assert cancel_run(c)
        assert procs["c"].returncode == 130  # reaped through its Popen: the true exit code
        assert read_status(c)["state"] == "cancelled"
        assert "cancelled while queued (SIGUSR1)" in (c / "train.log").read_text()

        assert procs["a"].wait(120) == 0
        assert procs["b"].wait(120) == 0  # started by itself once a was done
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    sa, sb = read_status(a), read_status(b)
    assert sa["state"] == sb["state"] == "finished"
    steps_a, steps_b = read_steps(a), read_steps(b)
    assert [r["step"] for r in steps_a] == [r["step"] for r in steps_b] == list(range(1, 23))
    assert steps_a[-1]["time"] <= steps_b[0]["time"]  # never both at once
    assert sb["wait_seconds"] > sa["wait_seconds"]
    with pytest.raises(FileExistsError, match="already holds a run"):
        launch_training(flags, a, queue=True)  # and its "finished" stays as it is
    assert read_status(a)["state"] == "finished"
    assert sorted(x.name for x in c.iterdir()) == ["status.json", "train.log"]  # never trained
    assert [x.name for x in qdir.iterdir()] == ["slot.lock"]
    delete_run(c)
    assert not c.exists()
    with pytest.raises(ValueError, match="not a run folder"):
        delete_run(tmp_path / ".queue")


def test_device_slot_skips_dead_tickets_and_is_free_after_release(tmp_path):
    q = runs.queue_dir(tmp_path / "run", "cpu")
    runs._write_ticket(q, 2 ** 22 + 4321, None, tmp_path / "ghost", time.time() - 60)
    with runs.device_slot(tmp_path / "run", "cpu", poll_s=0.01) as got:
        assert got and read_status(tmp_path / "run")["state"] == "running"
        assert not list(q.glob("*.json"))  # the dead ticket is gone, ours too
        with runs.device_slot(tmp_path / "other", "cpu", wait=False) as second:
            assert second is False  # busy: a plain run goes ahead without the slot
    with runs.device_slot(tmp_path / "other", "cpu", wait=False) as again:
        assert again is True


# -------------------------------------------------------------------- --config
@pytest.fixture
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_config_file_with_flag_override(tmp_path, toy, tiny_model_dir, one_thread, capsys):
    run = tmp_path / "run"
    cfg = TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=32,
                      batch_size=4, epochs=3, lr_bert=1e-3, max_per_class=20)
    path = write_config(run, cfg)
    assert path == run / "train_config.json" and json.loads(path.read_text())["batch_size"] == 4
    assert main(["train", "--config", str(path), "--out", str(run), "--epochs", "1"]) == 0
    hp = json.loads((run / "reviewbert.json").read_text())["hyperparameters"]
    assert hp["epochs"] == 1  # the flag wins
    assert (hp["batch_size"], hp["max_length"], hp["lr_bert"]) == (4, 32, 1e-3)  # the file
    sizes = json.loads((run / "reviewbert.json").read_text())["split_sizes"]
    st = read_status(run)
    assert st["state"] == "finished" and st["step"] == -(-sizes["train"] // 4)  # 1 epoch
    capsys.readouterr()

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(path.read_text()), "lr_bert": -1e-5}))
    assert main(["train", "--config", str(bad), "--out", str(tmp_path / "b")]) == 2
    assert "lr_bert must be > 0" in capsys.readouterr().err
    bad.write_text(json.dumps({"data": [str(toy)], "learning_rate": 1e-5}))
    assert main(["train", "--config", str(bad), "--out", str(tmp_path / "b")]) == 2
    assert "unknown field(s) learning_rate" in capsys.readouterr().err


def test_config_errors_name_each_field_without_raising(tmp_path):
    errors = config_errors({"lr_bert": -1e-5, "epochs": 0, "data": []})
    assert set(errors) == {"lr_bert", "epochs", "data"}
    for name, message in errors.items():
        assert message.startswith(name + " ")
    assert config_errors({"data": [str(tmp_path / "nope.csv")]}) == {
        "data": f"data file not found: {tmp_path / 'nope.csv'}"}
    bad = {"labels": 4, "weight_decay": -0.1, "lr_decay": 0, "lr_step_epochs": 0,
           "warmup_ratio": 1.0, "min_tokens": -1, "max_per_class": 0, "lr_classifier": 0,
           "batch_size": 2.5, "report_to": "mlflow", "fractions": [0.5, 0.5, 0.5],
           "prepend_title": "yes"}
    assert set(config_errors(bad, require_data=False)) == set(bad)
    assert config_errors({"lr_decay": 1, "warmup_ratio": 0, "max_per_class": None,
                          "epochs": 2.0}, require_data=False) == {}
    assert TrainConfig.validate_field("lr_bert", float("nan")).startswith("lr_bert must be > 0")
    with pytest.raises(ConfigError, match="weight_decay must be >= 0") as e:
        TrainConfig(weight_decay=-1)
    assert set(e.value.errors) == {"weight_decay"}
    assert TrainConfig(epochs=2.0).epochs == 2 and isinstance(TrainConfig(lr_bert=1).lr_bert, float)
    groups = {f.name: f.group for f in group_fields()}
    assert {k for k, g in groups.items() if g == "basic"} == {
        "labels", "lr_bert", "lr_classifier", "weight_decay", "lr_decay", "lr_step_epochs",
        "batch_size", "epochs", "max_length", "min_tokens"}


# ----------------------------------------------------------------------- steps
def test_read_steps_skips_torn_lines_and_truncate_drops_later_steps(tmp_path):
    w = runs.StepsWriter(tmp_path)
    w.write([{"epoch": 1, "step": s, "loss": 1.0, "lr": 1e-5, "time": s} for s in (1, 2, 3)])
    w.write([{"epoch": 1, "step": 2, "loss": 9.0, "lr": 1e-5, "time": 9}])  # a repeat
    w.close()
    with open(tmp_path / "steps.jsonl", "a") as f:
        f.write('{"epoch": 1, "ste')  # SIGKILL mid-append
    assert [r["step"] for r in read_steps(tmp_path)] == [1, 2, 3, 2]
    assert [r["step"] for r in read_steps(tmp_path, since_step=2)] == [3]
    kept = truncate_steps(tmp_path, through_step=2)
    assert [(r["step"], r["loss"]) for r in kept] == [(1, 1.0), (2, 1.0)]
    assert read_steps(tmp_path) == kept
    assert truncate_steps(tmp_path / "none", 5) == [] and not (tmp_path / "none").exists()


# ------------------------------------------------------------------- list_runs
def test_list_runs_finds_search_trials(tmp_path):
    write_status(tmp_path / "plain", {"state": "finished"})
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "search.json").write_text(json.dumps({"metric": "accuracy"}))
    for i in (1, 2):
        t = tmp_path / "study" / f"trial-{i:04d}"
        write_status(t, {"state": "finished"})
        (t / "trial.json").write_text(json.dumps({"number": i}))
    (tmp_path / ".queue").mkdir()
    assert sorted((r["name"], r["kind"]) for r in list_runs(tmp_path)) == [
        ("plain", "run"), ("study", "search")]
    items = {r["name"]: r for r in list_runs(tmp_path, include_trials=True)}
    assert set(items) == {"plain", "study", "study/trial-0001", "study/trial-0002"}
    t2 = items["study/trial-0002"]
    assert t2["kind"] == "trial" and t2["trial"] == {"number": 2}
    assert t2["search"]["name"] == "study" and t2["search"]["metric"] == "accuracy"
    assert items["plain"]["search"] is None and items["plain"]["trial"] is None
    # a trial queues with its search's peers, not inside the search folder
    assert runs.queue_dir(tmp_path / "study" / "trial-0001", "cpu") == \
        tmp_path.resolve() / ".queue" / "cpu"


def test_launched_child_that_fails_early_says_failed(tmp_path, monkeypatch):
    """A bad --config in a launched (queued) run: status "failed" with the reason, not a
    "killed" that makes the user look for a crash."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "bad.json").write_text(json.dumps({"data": ["x.csv"], "epochs": 0}))
    proc = launch_training(["--config", tmp_path / "bad.json"], tmp_path / "run", queue=True)
    assert proc.wait(120) == 2
    st = read_status(tmp_path / "run")
    assert st["state"] == "failed" and "epochs must be an integer >= 1" in st["message"]



def test_device_busy_is_true_only_while_the_slot_is_held(tmp_path, monkeypatch):
    import fcntl

    from reviewbert.training.runs import device_busy
    monkeypatch.delenv("REVIEWBERT_QUEUE_DIR", raising=False)
    assert not device_busy(tmp_path)                      # no queue folder at all
    lock = tmp_path / ".queue" / "cpu" / "slot.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        assert not device_busy(tmp_path)
        fcntl.flock(fd, fcntl.LOCK_EX)                    # what a training run holds
        assert device_busy(tmp_path)
        assert not device_busy(tmp_path, "cuda:0")
    finally:
        os.close(fd)
    assert not device_busy(tmp_path)


def test_predictions_use_one_thread_fewer_only_beside_training():
    import torch

    from reviewbert.model.device import cpu_threads, threads_beside_training
    before = torch.get_num_threads()
    assert threads_beside_training(False) is None
    with cpu_threads(threads_beside_training(True)):
        assert torch.get_num_threads() == max(1, before - 1)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("cores, idle, training", [(2, 1, 1), (8, 4, 3), (1, 1, 1)])
def test_one_review_takes_half_the_cores_and_one_fewer_beside_training(cores, idle, training):
    import torch

    from reviewbert.model.device import cpu_threads, threads_for_one_review
    before = torch.get_num_threads()
    torch.set_num_threads(cores)
    try:
        assert threads_for_one_review(False) == idle
        assert threads_for_one_review(True) == training
        with cpu_threads(threads_for_one_review(False)):
            assert torch.get_num_threads() == idle
            assert threads_for_one_review(False) == idle     # asked inside: from the saved count
        assert torch.get_num_threads() == cores
    finally:
        torch.set_num_threads(before)
