"""Does the main page stay usable while a run trains on the same CPU?

A prediction the way the app makes it (``Predictor.from_checkpoint`` +
``predict`` of a 256-token review; the real embedded all-MiniLM-L6-v2 saved as
a checkpoint with an untrained head: timing does not care) is timed idle, then
again while a real training run on ../shared/data, launched the way the
training page launches it (``runs.launch_training(..., queue=True)``: nice +10,
one core fewer than the machine has), is in its training steps. The run is
stopped afterwards and its folder deleted.

Target: a prediction during training takes at most 3x its idle time (p50).
Run it alone on the machine, without OMP_NUM_THREADS (the app does not set it).
The last stdout line is JSON: idle/training p50 and p95 (ms), their ratios,
the target and whether it is met, and what the training process ran with.

    python bench/predict_while_training.py [--reps 30] [--data FILE]
        [--max-per-class 300] [--max-length 128] [--epochs 5]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # browser_support.make_minilm_checkpoint

from predict_latency import text_of, timeit  # noqa: E402

from reviewbert.model.device import cpu_threads, threads_beside_training
from reviewbert.model.inference import Predictor
from reviewbert.training import runs  # noqa: E402

from browser_support import make_minilm_checkpoint  # noqa: E402

TARGET = 3.0


def default_data() -> Path:
    d = Path(os.environ.get("REVIEWBERT_DATA_DIR", ROOT.parent / "shared" / "data"))
    return d / "unlocked_mobile_10k.csv"


def wait_until_training(run: Path, proc, timeout: float) -> dict:
    """Status once the run is in its optimizer steps (running, step > 0). Its message may
    say "evaluating": a tiny run's epochs are shorter than the status file's 2-second
    throttle, so the forced "evaluating epoch N" writes are the ones seen."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        st = runs.read_status(run) or {}
        if st.get("state") == "running" and (st.get("step") or 0) > 0:
            return st
        if proc.poll() is not None:
            raise SystemExit(f"training exited ({proc.returncode}) before its steps:\n"
                             f"{runs.read_log_tail(run)}")
        time.sleep(0.5)
    raise SystemExit(f"training did not reach its steps in {timeout:.0f} s:\n"
                     f"{runs.read_log_tail(run)}")


def stats(xs: list[float]) -> tuple[float, float]:
    return round(statistics.median(xs), 2), round(float(np.percentile(xs, 95)), 2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30, help="timed predictions per phase")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--data", type=Path, default=default_data())
    ap.add_argument("--max-per-class", type=int, default=300)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds to wait for the run to reach its training steps")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        raise SystemExit(f"no data file {args.data} (set REVIEWBERT_DATA_DIR or --data)")

    import transformers
    transformers.logging.set_verbosity_error()
    tmp = Path(tempfile.mkdtemp(prefix="rb-predict-while-training-"))
    proc = None
    try:
        ckpt = make_minilm_checkpoint(tmp / "minilm")
        predictor = Predictor.from_checkpoint(ckpt, torch.device("cpu"))
        predictor.warm_up()
        text = text_of(predictor.tokenizer, 256)
        idle = timeit(lambda: predictor.predict(text), args.warmup, args.reps)
        print(f"idle: p50 {stats(idle)[0]} ms, p95 {stats(idle)[1]} ms", file=sys.stderr)

        run = tmp / "run"
        proc = runs.launch_training(
            ["--data", args.data, "--max-per-class", args.max_per_class,
             "--max-length", args.max_length, "--epochs", args.epochs], run, queue=True)
        before = wait_until_training(run, proc, args.timeout)
        child = psutil.Process(proc.pid)
        manners = {"train_nice": child.nice(), "train_device": None}
        # exactly what the Predict page does (predict_panel.run): one thread fewer while
        # the device's slot is held by a training run
        assert runs.device_busy(run.parent), "the run does not hold the CPU slot"

        def app_predict():
            with cpu_threads(threads_beside_training(runs.device_busy(run.parent))):
                return predictor.predict(text)
        busy = timeit(app_predict, args.warmup, args.reps)
        after = runs.read_status(run) or {}
        log = runs.read_log_tail(run, 20000)
        print(f"training: p50 {stats(busy)[0]} ms, p95 {stats(busy)[1]} ms "
              f"(run at step {before.get('step')} -> {after.get('step')})", file=sys.stderr)
        runs.stop_run(run)
        try:
            proc.wait(120)
        except Exception:  # noqa: BLE001 - a bench must not leave a trainer behind
            proc.kill()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    for line in log.splitlines():  # "device: CPU (1 threads); ...": the trainer's threads
        if line.startswith("device:"):
            manners["train_device"] = line[len("device: "):].split(";")[0]
    (i50, i95), (t50, t95) = stats(idle), stats(busy)
    summary = {"bench": "predict_while_training", "model": "all-MiniLM-L6-v2 (6x12, hidden 384)",
               "tokens": 256, "reps": args.reps, "cores": len(os.sched_getaffinity(0)),
               "predict_threads": torch.get_num_threads(), **manners,
               "run_steps_during": (after.get("step") or 0) - (before.get("step") or 0),
               "idle_p50_ms": i50, "idle_p95_ms": i95,
               "training_p50_ms": t50, "training_p95_ms": t95,
               "ratio_p50": round(t50 / i50, 3), "ratio_p95": round(t95 / i95, 3),
               "target": f"training_p50 <= {TARGET} x idle_p50",
               "meets_target": t50 <= TARGET * i50}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
