"""A killed app server while a run trains: the run goes on, and a restarted app reattaches.

The Train page (a real Streamlit server, driven in Debian's headless Chromium) launches
a run on real data (a tiny random BERT, so that steps are quick on 2 busy cores): a
detached `train --queue` process whose parent is the server. The server is SIGKILLed
mid-training (no clean shutdown).
The run keeps training and keeps the device slot (a second launch waits as queued);
a NEW server on the same checkpoints folder shows it running and updating; it is
stopped from that page and ends "stopped" with a loadable last/ and its whole history.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from reviewbert.training import jobs
from reviewbert.training import runs as R

from browser_support import CHROMIUM, ROOT, StreamlitServer, launch_run, offline_context, progress_text
from launch_support import state, values, wait


def last_step(run: Path) -> int:
    rows = R.read_steps(run)
    return rows[-1]["step"] if rows else 0


def test_launched_run_outlives_its_sigkilled_launcher_and_is_killed_only_once_gone(tmp_path):
    """runs.launch from a process that is then SIGKILLed (as a server is): the child
    is in its own session, reads /dev/null (not the launcher's stdin pipe), and stays
    "running"; SIGKILLed itself, it is "killed" (gone, or a zombie nobody reaps)."""
    fake = tmp_path / "fake-python"  # stands in for `python -m reviewbert train`
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    run = tmp_path / "run"
    code = ("import sys, time\nfrom reviewbert.training import runs\n"
            "p = runs.launch('train', [], sys.argv[1], python=sys.argv[2])\n"
            "print(p.pid, flush=True)\ntime.sleep(60)\n")
    pid = None
    with subprocess.Popen([sys.executable, "-c", code, str(run), str(fake)], cwd=ROOT,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as launcher:
        try:
            pid = int(launcher.stdout.readline())
            started = R.read_status(run)["started"]
            os.kill(launcher.pid, signal.SIGKILL)
            assert launcher.wait(10) == -signal.SIGKILL
            assert R.process_state(pid, started) == "alive" and state(run) == "running"
            assert psutil.Process(pid).ppid() != launcher.pid
            assert os.getsid(pid) == pid
            assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
            os.kill(pid, signal.SIGKILL)
            wait(lambda: state(run) == "killed", timeout=10, what="state killed")
            assert R.process_state(pid, started) in ("gone", "zombie")
        finally:
            launcher.kill()
            if pid and R.process_state(pid) == "alive":
                os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
def test_run_survives_a_killed_server_and_a_new_server_reattaches(tmp_path, data_dir,
                                                                  tiny_model_dir, monkeypatch):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    from playwright.sync_api import sync_playwright
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    # the queue lives in ckpts/.queue for the servers and for this process alike; full
    # priority for the runs (SCHED_IDLE would starve them on a busy 2-core machine)
    monkeypatch.delenv(R.QUEUE_DIR_ENV, raising=False)
    for k, v in {"OMP_NUM_THREADS": "1", "REVIEWBERT_TRAIN_NICE": "0"}.items():
        monkeypatch.setenv(k, v)
    env = {"REVIEWBERT_CHECKPOINTS": str(ckpts), "REVIEWBERT_DATA_DIR": str(data_dir),
           "REVIEWBERT_UPLOADS_DIR": str(tmp_path / "uploads")}
    run, second = ckpts / "survivor", None
    with sync_playwright() as p:
        ctx, blocked = offline_context(p, tmp_path / "profile")
        page = ctx.new_page()
        try:
            # --- server A launches the run from its page, then is SIGKILLed mid-training
            with StreamlitServer(env, tmp_path / "streamlit_a.log") as a:
                page.goto(a.url + "/train")
                page.get_by_text("Train a model").wait_for(timeout=90_000)
                # real data, 64 tokens, 40 reviews per class; stopped long before 500 epochs
                launch_run(page, "unlocked_mobile_10k.csv", "survivor",
                           {"Epochs": 500, "Max length (tokens)": 64},
                           {"Cap per class": 40, "Base model": str(tiny_model_dir)},
                           timeout=90_000)
                # killed in the training steps of epoch 2, with epoch 1's metrics written
                wait(lambda: (m := R.read_metrics(run)) and last_step(run) > m[-1]["step"],
                     timeout=180, what="steps after epoch 1's metrics")
                st = R.read_status(run)
                pid, started = st["pid"], st["started"]
                assert st["state"] == "running"
                assert psutil.Process(pid).ppid() == a.proc.pid   # the server launched it
                assert os.getsid(pid) != os.getsid(a.proc.pid)    # in a session of its own
                history = R.read_metrics(run)
                os.kill(a.proc.pid, signal.SIGKILL)
                assert a.proc.wait(10) == -signal.SIGKILL
            at_kill = last_step(run)

            # --- the orphaned run trains on, still holding the device slot
            wait(lambda: last_step(run) >= at_kill + 3, timeout=60,
                 what="steps after the server was killed")
            assert R.process_state(pid, started) == "alive"
            assert psutil.Process(pid).ppid() != a.proc.pid
            assert state(run) == "running"                        # not "killed"
            assert R.device_busy(ckpts)
            # a second launch waits for the device (its process starts while server B does)
            second, _ = jobs.start_run(values(data_dir, epochs=1), ckpts, "second")

            # --- a NEW server on the same folder reattaches: running, with live progress
            with StreamlitServer(env, tmp_path / "streamlit_b.log") as b:
                page.goto(b.url + "/train")
                page.get_by_text("Train a model").wait_for(timeout=90_000)
                picker = page.locator("[data-testid=stSelectbox]").filter(
                    has=page.get_by_text("Run", exact=True)).first.locator("input")
                picker.click(timeout=60_000)
                picker.fill("survivor")
                page.keyboard.press("Enter")
                page.wait_for_function(
                    "() => { const p = document.querySelector('[data-testid=stProgress]');"
                    " return p && p.innerText.includes('running') && /step [1-9]/.test(p.innerText); }",
                    timeout=60_000)
                seen = progress_text(page)
                page.wait_for_function(
                    "(b) => { const p = document.querySelector('[data-testid=stProgress]');"
                    " return p && p.innerText !== b && p.innerText.includes('running'); }",
                    arg=seen, timeout=60_000)

                wait(lambda: (R.read_status(second) or {}).get("ahead") == 1, timeout=90,
                     what="the second run to wait behind the first")
                assert state(second) == "queued" and not R.read_steps(second)
                assert R.cancel_run(second)

                # --- stop from the new server's page
                page.get_by_role("button", name="Stop", exact=True).click()
                wait(lambda: state(run) == "stopped", timeout=120, what="the run to stop")
                page.wait_for_function("() => document.body.innerText.includes('stopped')",
                                       timeout=60_000)
            assert blocked == [], blocked
        except BaseException:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            ctx.close()
            for r in (run, second):
                if r is not None and state(r) in R.ACTIVE:
                    R.stop_run(r)

    # --- ended cleanly: the process is gone (a zombie if no init reaps orphans here),
    # and status.json says "stopped", never "killed"
    wait(lambda: R.process_state(pid, started) != "alive", timeout=30, what="the run to exit")
    assert state(run) == "stopped"
    assert not R.device_busy(ckpts)
    steps = [s["step"] for s in R.read_steps(run)]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= at_kill + 3
    final = R.read_metrics(run)
    assert history and final[:len(history)] == history          # nothing lost or rewritten
    keys = [(m["epoch"], m["split"]) for m in final]
    assert len(keys) == len(set(keys))
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.training.resume import load_training_state
    model, tok, info = load_checkpoint(run / "last")
    progress, _ = load_training_state(run / "last")
    assert progress["step"] == steps[-1]                         # last/ = where it stopped
