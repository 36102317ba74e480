"""Many sessions on one Streamlit server while a run trains (bench/load.py's code, shorter).

``test_sessions_while_training`` (marked ``load``: only ``make load`` runs it) opens
20 real websocket sessions on ``streamlit run app.py`` serving the real embedded
MiniLM (untrained head), while a tiny BERT trains on a toy file through the Train
page's launch path, and asserts that every prediction came back with the session's
own review, nothing failed or logged an error, and the server loaded the model once.
Latency is recorded (artifacts/load/load.json), never asserted: benchmarks measure speed.

The unit tests of the two bugs the load and memory benches found:
``test_cpu_threads_survive_overlapping_predictions`` (overlapping predictions beside
a training run left torch at one thread for good) and
``test_head_view_html_is_not_kept_by_urllib`` (every head view drawn stayed in memory).
"""
from __future__ import annotations

import json
import shutil
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from browser_support import ROOT, make_minilm_checkpoint
from toyreviews import write_toy_csv

sys.path.insert(0, str(ROOT / "bench"))

ART = ROOT / "artifacts" / "load"


def test_cpu_threads_survive_overlapping_predictions():
    """Two sessions predict beside a training run, their cpu_threads blocks overlapping
    (A in, B in, A out, B out): afterwards, and in a new thread (Streamlit runs each
    script in one), torch has its thread count back; inside, one thread fewer."""
    import torch

    from reviewbert.model.device import cpu_threads, threads_beside_training

    old = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def session(name, entered, wait_for, then=None):
            with cpu_threads(threads_beside_training(True)):
                seen[name] = torch.get_num_threads()
                entered.set()
                wait_for.wait(10)
            if then is not None:
                then.set()

        a = threading.Thread(target=session, args=("a", a_in, b_in, a_out))
        a.start()
        assert a_in.wait(10)
        b = threading.Thread(target=session, args=("b", b_in, a_out))
        b.start()
        a.join(10)
        b.join(10)
        assert seen == {"a": 2, "b": 2}
        after = []
        t = threading.Thread(target=lambda: after.append(torch.get_num_threads()))
        t.start()
        t.join()
        assert after == [3]
    finally:
        torch.set_num_threads(old)


def test_the_head_view_travels_as_weights_not_as_an_html_page():
    """The head view was a ~1 MB HTML page per 256-token prediction, put through st.iframe
    (whose urlparse kept the last 128 of them: ~400 MB, bench/memory.py). It is now the
    app's component: the page loads once, a prediction sends its weights as bytes."""
    from reviewbert.viz import bertviz_view as headview
    src = (ROOT / "reviewbert" / "ui" / "prediction_card.py").read_text()
    assert "st.iframe" not in src and "head_view_html" not in src
    rng = np.random.default_rng(0)
    att = rng.dirichlet(np.full(256, 0.05), size=(6, 12, 256)).astype(np.float32)
    pred = SimpleNamespace(attentions=att, tokens=["[CLS]"] + [f"w{i}" for i in range(254)]
                           + ["[SEP]"], num_layers=6, num_heads=12)
    args, bits, vals = headview.view_data(pred, "head", layer=3)
    assert len(bits) + len(vals) + len(json.dumps(args)) < 100_000


@pytest.mark.load
def test_sessions_while_training(tmp_path, tiny_model_dir):
    from load import run_load
    write_toy_csv(tmp_path / "toy.csv", n=300)
    base = tmp_path / "tiny-base"
    shutil.copytree(tiny_model_dir, base)
    ckpt = make_minilm_checkpoint(tmp_path / "minilm")
    lines = []
    out = run_load(ckpt, tmp_path / "load",
                   ["--data", tmp_path / "toy.csv", "--base-model", base, "--max-length", 32,
                    "--max-per-class", 40, "--epochs", 400],
                   sessions=20, per_session=2, idle=3, idle_after=2, think=(0.0, 0.5),
                   warmup=1, train_timeout=300, say=lines.append)
    ART.mkdir(parents=True, exist_ok=True)
    (ART / "load.json").write_text(json.dumps(out, indent=1))
    report = "\n".join(lines)
    assert out["failed_sessions"] == 0, report
    assert out["errors"] == 0, report
    assert out["server_log_errors"] == [], report
    assert out["predictions"] == 20 * 2, report
    assert out["training"]["state_during"] == "running", report
    assert out["training"]["app_saw_cpu_busy"], report
    assert out["one_model_copy"], report


@pytest.mark.load
def test_saturate_counts_runs_that_drew_their_own_review(tmp_path):
    """bench/load.py's capacity phase: sessions pressing Predict back to back. Every run it
    counts drew that session's review; the rate is runs over the window's wall time."""
    from load import app_server, saturate
    from transformers import AutoTokenizer
    ckpt = make_minilm_checkpoint(tmp_path / "minilm")
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    with app_server(ckpt, tmp_path / "srv") as srv:
        out = saturate(srv.url, tok, srv.proc.pid, sessions=3, seconds=4.0)
    assert out["errors"] == 0, out["error_samples"]
    assert out["runs"] >= 3                      # every session finished at least one run
    assert out["seconds"] >= 4.0                 # the window, plus the runs in flight at its end
    assert out["runs_per_s"] == pytest.approx(out["runs"] / out["seconds"], rel=0.02)
    assert out["server_cpu_ms_per_run"] > 0
