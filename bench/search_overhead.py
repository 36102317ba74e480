"""What a search costs beyond its trials' training: a 4-trial grid (lr_bert x lr_classifier,
2 x 2) run by 1, 2 and 3 worker processes, on SQLite and on a throwaway PostgreSQL server.

For each setup: the wall time (first worker started -> last one exited), every worker's
own wall time, and each trial's own work: from its first optimizer step to its last
metrics row (training and per-epoch evaluation, from steps.jsonl and metrics.jsonl).
Overhead = sum of the workers' wall times - sum of the trials' own work, as a fraction
of the latter: the study (Optuna's storage), the search loop, the process start of every
trial (Python, torch, model and data load). Target: <= 10 % for trials of at least one
minute of work. Ends with one JSON line (targets, checks, met).

    .venv/bin/python bench/search_overhead.py            # the real embedded model, real
                                                           # reviews: trials of about 1-2 min
    .venv/bin/python bench/search_overhead.py --quick    # tiny random BERT, toy reviews:
                                                           # proves the script, seconds a trial

PostgreSQL: Debian's server (``make postgres`` installs it), started in a temporary
folder on 127.0.0.1 as the distributed tests do; without it those rows are skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from reviewbert.model.device import cpu_description  # noqa: E402
from reviewbert.training import runs  # noqa: E402

TARGET = 0.10
MIN_TRIAL_S = 60.0
GRID = ["--grid", "lr_bert=1e-5,5e-5", "--grid", "lr_classifier=1e-3,1e-2"]


def trial_flags(args, tmp: Path) -> list[str]:
    if args.quick:
        from conftest import make_tiny_model
        from toyreviews import write_toy_csv
        data = write_toy_csv(tmp / "toy.csv", n=300)
        tiny = make_tiny_model(tmp / "tiny")
        return ["--data", str(data), "--base-model", str(tiny), "--max-length", "32",
                "--epochs", "2", "--batch-size", "8", "--train-eval-max", "50"]
    return ["--data", str(args.data), "--max-per-class", str(args.per_class), "--max-length",
            str(args.max_length), "--epochs", str(args.epochs), "--train-eval-max", "200"]


def own_work_s(trial: Path) -> float | None:
    """First optimizer step -> last metrics row: the trial's training and evaluation."""
    steps, metrics = runs.read_steps(trial), runs.read_metrics(trial)
    if not steps or not metrics:
        return None
    return max(m["time"] for m in metrics) - steps[0]["time"]


def setup_s(trial: Path) -> float | None:
    """The trial process's start -> its first optimizer step: Python, torch and
    transformers imports, model and data load (part of the overhead)."""
    steps, status = runs.read_steps(trial), runs.read_status(trial) or {}
    return steps[0]["time"] - status["started"] if steps and status.get("started") else None


def run_setup(flags: list[str], url: str, study: str, out: Path, workers: int) -> dict:
    cmd = [sys.executable, "-m", "reviewbert", "search", *flags, *GRID, "--seed", "0",
           "--storage", url, "--study-name", study]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd + ["--out", str(out / f"w{i}")], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(workers)]
    walls, errs = [0.0] * workers, [""] * workers

    def finish(i):  # each worker's own end, not when the loop gets to it
        errs[i] = procs[i].communicate()[1]
        walls[i] = time.perf_counter() - start
    threads = [threading.Thread(target=finish, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p, err in zip(procs, errs):
        if p.returncode != 0:
            raise RuntimeError(f"a worker failed ({p.returncode}): {err[-1500:]}")
    trials = sorted(out.glob("w*/trial-*"))
    work = [own_work_s(t) for t in trials]
    if len(trials) != 4 or None in work:
        raise RuntimeError(f"expected 4 finished trials, got {len(trials)}: {work}")
    total, setup = sum(work), sum(filter(None, map(setup_s, trials)))
    return {"workers": workers, "wall_s": round(max(walls), 2),
            "trial_process_setup_s": round(setup, 2),
            "search_loop_s": round(sum(walls) - total - setup, 2),
            "worker_wall_s": [round(w, 2) for w in walls], "trials": len(trials),
            "trial_work_s": [round(w, 2) for w in work], "sum_trial_work_s": round(total, 2),
            "overhead_s": round(sum(walls) - total, 2),
            "overhead_fraction": round((sum(walls) - total) / total, 4),
            "mean_trial_work_s": round(total / len(work), 2)}


def storages(tmp: Path):
    """(name, url factory, closer) for SQLite and, when installed, PostgreSQL."""
    from postgres_support import PostgresServer, bin_dir
    yield "sqlite", lambda tag: f"sqlite:///{tmp / f'{tag}.db'}", None
    if bin_dir() is None:
        return
    server = PostgresServer().start()
    try:
        yield "postgresql", lambda tag: server.url, server
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny model, toy data: seconds a trial")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "unlocked_mobile_10k.csv"))
    ap.add_argument("--per-class", type=int, default=400)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    args = ap.parse_args()
    results, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="search-overhead-") as tmp:
        tmp = Path(tmp)
        flags = trial_flags(args, tmp)
        seen = set()
        for name, url, _ in storages(tmp):
            seen.add(name)
            for n in args.workers:
                tag = f"{name}-{n}"
                row = run_setup(flags, url(tag), tag, tmp / tag, n)
                results.append({"storage": name, **row})
                print(f"{tag}: {json.dumps(row)}", file=sys.stderr, flush=True)
        skipped = [s for s in ("sqlite", "postgresql") if s not in seen]
    print(json.dumps(summary(args, results, skipped)))


def summary(args, results: list[dict], skipped: list[str]) -> dict:
    long_enough = [r for r in results if r["mean_trial_work_s"] >= MIN_TRIAL_S]
    checks = {f"{r['storage']}_{r['workers']}w_overhead_le_10pct": r["overhead_fraction"] <= TARGET
              for r in long_enough}
    return {"bench": "search_overhead", "machine": cpu_description(),
            "measured": time.strftime("%Y-%m-%d %H:%M"), "quick": args.quick,
            "trial_flags": "tiny random BERT, toy reviews, 2 epochs" if args.quick else
            f"embedded model, {Path(args.data).name}, {args.per_class}/class, "
            f"{args.max_length} tokens, {args.epochs} epoch(s)",
            "results": results, "skipped_storages": skipped,
            "targets": {"overhead_fraction": TARGET, "for_trials_of_at_least_s": MIN_TRIAL_S},
            "checks": checks,
            "met": bool(checks) and all(checks.values()) if checks else None,
            "note": ("overhead = (sum of worker wall times - sum of trials' own work) / sum of "
                     "trials' own work; own work = first optimizer step to last metrics row. "
                     "It splits into trial_process_setup_s (each trial's process start to its "
                     "first step: imports, model and data load) and search_loop_s (the rest: "
                     "worker start, Optuna storage, polling, process spawn and exit). "
                     "Checks only count setups whose trials average >= 60 s of work (--quick's "
                     "do not: their overhead is mostly process start). Workers share the CPU.")}


if __name__ == "__main__":
    main()
