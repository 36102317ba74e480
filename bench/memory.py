"""Peak memory (RSS) of the app, of training and of evaluation, each in a fresh process.

- app: ``streamlit run app.py`` on the demo checkpoint (bench/load.app_server),
  driven by one real websocket session (bench/st_session.py) through 100
  predictions of mixed length (short, 128, 256 tokens). The server's VmHWM (peak)
  and VmRSS are read from /proc after the 1st prediction and every 5th from the
  10th: the peak, and the growth from the 10th to the last (a leak would show
  there). RSS moves by several MB from one reading to the next as glibc maps and
  unmaps big blocks, so the growth is read as the trend of the least-squares line
  through the readings from the 10th on (its slope times the predictions between),
  with the readings' scatter around that line (``rss_scatter_mb``) as the noise; the
  plain difference of the two end readings is reported as well.
- train: ``python -m reviewbert train`` on real data, batch size 16, max length
  256, reviews of at least 300 tokens (so every batch is a full 16 x 256), on the
  CPU; stopped (SIGINT: it finishes the step and saves last/) once ``--steps``
  optimizer steps are done.
- eval: ``python -m reviewbert evaluate --split all`` of the demo checkpoint on
  >= 10,000 real reviews (no prediction cache read or written).

train and eval run under tests/peak_rss.py, which reports the process's own
VmHWM (ru_maxrss would carry a forking parent's peak into the child).
Targets: app <= 1024 MB, train <= 4096 MB, eval <= 1536 MB, growth from the 10th
to the 100th prediction (the trend) <= 8 MB. The last stdout line is JSON:

    python bench/memory.py [--predictions 100] [--steps 6] [--only app,train,eval]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from load import DEMO, app_server, mem_mb, model_cache, reviews_of_mixed_length  # noqa: E402

from reviewbert.training import runs  # noqa: E402

from st_session import StSession  # noqa: E402

TARGETS = {"app_peak_mb": 1024, "train_peak_mb": 4096, "eval_peak_mb": 1536,
           "app_growth_10_to_100_mb": 8}
PEAK = ROOT / "tests" / "peak_rss.py"


def data_dir() -> Path:
    return Path(os.environ.get("REVIEWBERT_DATA_DIR", ROOT.parent / "shared" / "data"))


def app(ckpt: Path, tmp: Path, n: int, say) -> dict:
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(ckpt))
    texts = reviews_of_mixed_length(tok, n, 1, random.Random(0))
    marks = {}
    with app_server(ckpt, tmp) as srv, StSession(srv.url) as s:
        pid = srv.proc.pid
        start = mem_mb(pid)
        s.open()
        for i, text in enumerate(texts, 1):
            res = s.predict(text)
            if res.label is None or res.errors:
                raise SystemExit(f"prediction {i} failed: {res.errors or 'no prediction card'}")
            if i in (1, 10, n) or (i > 10 and i % 5 == 0):
                marks[i] = mem_mb(pid)
                if i in (1, 10, n) or i % 25 == 0:
                    say(f"app after prediction {i}: RSS {marks[i]['rss_mb']} MB, "
                        f"peak {marks[i]['hwm_mb']} MB")
        loads = model_cache(srv.url)
    first, last = marks[min(10, n)], marks[n]
    trend, scatter = rss_trend({k: v["rss_mb"] for k, v in marks.items() if k >= min(10, n)})
    return {"peak_mb": last["hwm_mb"], "rss_start_mb": start["rss_mb"],
            "rss_after_10_mb": first["rss_mb"], "rss_after_last_mb": last["rss_mb"],
            "growth_10_to_100_mb": trend, "rss_scatter_mb": scatter,
            "end_difference_10_to_100_mb": round(last["rss_mb"] - first["rss_mb"], 1),
            "peak_growth_10_to_100_mb": round(last["hwm_mb"] - first["hwm_mb"], 1),
            "predictions": n, "model_loads": loads["loads"],
            "rss_by_prediction": {str(k): v["rss_mb"] for k, v in sorted(marks.items())}}


def rss_trend(rss_by_prediction: dict[int, float]) -> tuple[float, float]:
    """(growth over the readings' span by their least-squares line, scatter of the
    readings around it: the standard deviation of the residuals), in MB."""
    x = np.array(sorted(rss_by_prediction), dtype=float)
    y = np.array([rss_by_prediction[int(k)] for k in x])
    if len(x) < 3:
        return round(float(y[-1] - y[0]), 1), 0.0
    slope, icept = np.polyfit(x, y, 1)
    return round(float(slope * (x[-1] - x[0])), 1), round(float(np.std(y - (slope * x + icept))), 1)


def under_peak_rss(out_json: Path, args: list[str], **kw) -> subprocess.Popen:
    """``python tests/peak_rss.py OUT.json -m reviewbert ARGS`` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([sys.executable, str(PEAK), str(out_json), "-m", "reviewbert", *args],
                            cwd=ROOT, env=env, **kw)


def peak_of(out_json: Path, proc: subprocess.Popen, timeout: float) -> dict:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        raise SystemExit(f"{proc.args[3:6]} ran past {timeout:.0f} s") from None
    if not out_json.exists():
        raise SystemExit(f"{proc.args[3:6]} wrote no peak (exit {proc.returncode})")
    return json.loads(out_json.read_text())


def train(tmp: Path, steps: int, say, timeout: float = 1200) -> dict:
    d = data_dir()
    run = tmp / "train-run"
    out = tmp / "train-peak.json"
    log = open(tmp / "train.log", "w")
    args = ["train", "--data", str(d / "cell_phones_and_accessories_5core_sample.json"),
           "--data", str(d / "earphone_reviews_in.csv"),
           "--data", str(d / "unlocked_mobile_10k.csv"),
           "--min-tokens", "300", "--max-per-class", "60", "--batch-size", "16",
           "--max-length", "256", "--epochs", "1", "--no-group-by-length", "--out", str(run)]
    proc = under_peak_rss(out, args, stdout=log, stderr=subprocess.STDOUT)
    trace, t0 = [], time.time()
    try:
        while proc.poll() is None and time.time() - t0 < timeout:
            st = runs.read_status(run) or {}
            step = st.get("step") or 0
            if st.get("state") == "running" and (not trace or trace[-1][0] != step):
                trace.append((step, mem_mb(proc.pid)["hwm_mb"]))
                say(f"train step {step}: peak so far {trace[-1][1]} MB")
            if step >= steps:
                runs.stop_run(run)
                break
            time.sleep(0.2)
        peak = peak_of(out, proc, timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()
    text = (tmp / "train.log").read_text(errors="replace")
    last = [h for _, h in trace[-3:]]
    return {"peak_mb": round(peak["peak_mb"], 1), "steps": (runs.read_status(run) or {}).get("step"),
            "batch_size": 16, "max_length": 256, "exit": peak["code"],
            "peak_by_step_mb": {str(s): h for s, h in trace},
            "stable_over_last_steps": len(last) == 3 and last[0] == last[-1],
            "device": next((line[len("device: "):] for line in text.splitlines()
                            if line.startswith("device:")), None)}


def evaluate(tmp: Path, say, timeout: float = 1800) -> dict:
    d = data_dir()
    out = tmp / "eval-peak.json"
    args = ["evaluate", "--checkpoint", str(DEMO), "--split", "all",
           "--data", str(d / "unlocked_mobile_10k.csv"), "--data", str(d / "unlocked_mobile_5k.csv"),
           "--no-cache", "--json"]
    proc = under_peak_rss(out, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True)
    stdout, _ = proc.communicate(timeout=timeout)
    peak = peak_of(out, proc, 60)
    result = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    say(f"eval of {result.get('n')} reviews: peak {peak['peak_mb']:.1f} MB in {peak['seconds']} s")
    return {"peak_mb": round(peak["peak_mb"], 1), "reviews": result.get("n"),
            "seconds": peak["seconds"], "exit": peak["code"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predictions", type=int, default=100)
    ap.add_argument("--steps", type=int, default=6, help="optimizer steps before training stops")
    ap.add_argument("--only", default="app,train,eval")
    args = ap.parse_args(argv)
    which = set(args.only.split(","))
    say = lambda s: print(s, file=sys.stderr)  # noqa: E731
    tmp = Path(tempfile.mkdtemp(prefix="rb-memory-"))
    out = {}
    try:
        if "app" in which:
            out["app"] = app(DEMO, tmp / "app", args.predictions, say)
        if "train" in which:
            out["train"] = train(tmp, args.steps, say)
        if "eval" in which:
            out["eval"] = evaluate(tmp, say)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    checks = {}
    if "app" in out:
        checks["app_peak_mb"] = out["app"]["peak_mb"] <= TARGETS["app_peak_mb"]
        checks["app_growth_10_to_100_mb"] = \
            out["app"]["growth_10_to_100_mb"] <= TARGETS["app_growth_10_to_100_mb"]
    if "train" in out:
        checks["train_peak_mb"] = out["train"]["peak_mb"] <= TARGETS["train_peak_mb"]
    if "eval" in out:
        checks["eval_peak_mb"] = out["eval"]["peak_mb"] <= TARGETS["eval_peak_mb"] \
            and (out["eval"]["reviews"] or 0) >= 10_000
    print(json.dumps({"bench": "memory", "cores": len(os.sched_getaffinity(0)), **out,
                      "targets": TARGETS, "checks": checks, "met": all(checks.values())}))


if __name__ == "__main__":
    main()
