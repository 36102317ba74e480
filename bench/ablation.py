"""Issue 12's ablation: how training uses the classes x how much of each review it reads.

Each row is the demo recipe (``scripts/train-demo.sh``: its settings, all five files
of ../shared/data, split seed 42, seed 42) with ``--class-balance B`` and
``--max-length L``, trained once, at a similar budget of training samples:

- ``undersample``: 3 epochs over the same 7,375 balanced reviews (22,125 samples);
- ``resample``: 3 epochs, each a fresh balanced draw of 7,375 from the 30,775
  training reviews (22,125 samples);
- ``weighted``: 1 epoch over all 30,775 training reviews with a class-weighted loss
  (1.4x the others' samples: one epoch is the least it can do).

A row may also name its epochs and ordinal soft-label sigma,
``BALANCE:MAXLEN:EPOCHS:SIGMA`` (e.g. ``resample:256:4:0.75``): the recipe choices beyond
class balance and length. Its run folder is ``BALANCE-MAXLEN-eEPOCHS-sSIGMA``; a run
trained there by hand (``scripts/train-demo.sh`` with RUN, BALANCE, MAXLEN, EPOCHS,
SIGMA) is read back, with the minutes of its own status.json.

Validation and test are the same balanced reviews in every row (tested in
tests/unit/test_class_balance.py), so the rows compare. The figures are the run's best
epoch by validation accuracy, on the test split (2,105 reviews); minutes are the
wall-clock training time of that row on this machine (evaluation of the three
splits after each epoch included). Run it alone: two torch processes on two cores
slow each other.

    python bench/ablation.py [--rows undersample:128 resample:256 ...] [--out DIR]

A finished row is not trained again: its figures are read back from its run
folder, so the script can be stopped and started again (a stopped row resumes
from its last checkpoint, and its minutes add up). Each finished row is also kept
in ``bench/results/ablation.json`` (committed, with the machine, the precision and
the date it was measured on), and a row found there is not trained again either:
run folders are not committed, and hours of CPU should not be lost with them
(``--retrain`` trains every named row anew). The last stdout line is JSON: every
row, and each row's accuracy gain in points over ``undersample:128`` when that row
is there; it is also written to ``OUT/ablation.json``, which
``scripts/train-demo.sh`` puts in the model card.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.fsio import atomic_write_json
from reviewbert.model.checkpoint import trained_precision
from reviewbert.model.device import cpu_description
from reviewbert.training.runs import read_status

ROWS = ("undersample:128", "resample:128", "weighted:128",
        "undersample:256", "resample:256", "weighted:256")
EPOCHS = {"undersample": 3, "resample": 3, "weighted": 1}
BASELINE = "undersample:128"
CLOCK = "ablation_seconds.json"     # the row's training seconds so far, across restarts
RESULTS = ROOT / "bench" / "results" / "ablation.json"   # every row measured so far (committed)


def kept_rows(path: Path = RESULTS) -> dict:
    try:
        return json.loads(path.read_text()).get("rows", {})
    except (OSError, ValueError, AttributeError):
        return {}


def children_cpu() -> float:
    """CPU seconds of every finished, waited-for descendant (the trainer under bash)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def finished(run: Path) -> bool:
    return (read_status(run) or {}).get("state") == "finished"


def clock(run: Path) -> dict:
    """{"seconds": wall, "cpu_seconds": CPU or None where a restart did not record it}."""
    try:
        c = json.loads((run / CLOCK).read_text())
        return {"seconds": float(c["seconds"]), "cpu_seconds": c.get("cpu_seconds")}
    except (OSError, ValueError, KeyError, TypeError):
        return {"seconds": 0.0, "cpu_seconds": 0.0}


def parse_row(row: str) -> tuple[str, int, int, float]:
    """``BALANCE:MAXLEN[:EPOCHS[:SIGMA]]`` -> (balance, max length, epochs, ordinal sigma);
    epochs default to EPOCHS[balance], sigma to 0 (plain cross-entropy)."""
    parts = row.split(":")
    if len(parts) not in (2, 3, 4) or parts[0] not in EPOCHS or not parts[1].isdigit():
        raise ValueError(row)
    epochs = int(parts[2]) if len(parts) > 2 else EPOCHS[parts[0]]
    sigma = float(parts[3]) if len(parts) > 3 else 0.0
    if epochs < 1 or sigma < 0:
        raise ValueError(row)
    return parts[0], int(parts[1]), epochs, sigma


def run_name(balance: str, max_length: int, epochs: int, sigma: float) -> str:
    """The row's run folder: BALANCE-MAXLEN for the plain rows (as before), with -eN-sX
    where epochs or sigma differ from the plain row's."""
    name = f"{balance}-{max_length}"
    if epochs != EPOCHS[balance] or sigma:
        name += f"-e{epochs}-s{sigma:g}"
    return name


def train_row(run: Path, balance: str, max_length: int, epochs: int, sigma: float) -> None:
    """scripts/train-demo.sh with this row's settings (TRAIN_ONLY: no export, no card)."""
    env = {**os.environ, "RUN": str(run), "BALANCE": balance, "MAXLEN": str(max_length),
           "EPOCHS": str(epochs), "SIGMA": f"{sigma:g}", "TRAIN_ONLY": "1"}
    before, t0, cpu0 = clock(run), time.perf_counter(), children_cpu()
    try:
        subprocess.run(["bash", str(ROOT / "scripts" / "train-demo.sh")], env=env, check=True)
    finally:
        if run.exists():
            # a row started before cpu_seconds was kept has none for that part: None
            cpu = before["cpu_seconds"]
            atomic_write_json(run / CLOCK, {
                "seconds": before["seconds"] + time.perf_counter() - t0,
                "cpu_seconds": None if cpu is None else cpu + children_cpu() - cpu0})


def figures(run: Path) -> dict:
    meta = json.loads((run / "best" / "reviewbert.json").read_text())
    best, c = meta["best"], clock(run)
    if not c["seconds"]:   # trained outside this script (one go): the run's own clock
        status = read_status(run) or {}
        c = {"seconds": float(status.get("train_seconds") or 0.0),
             "cpu_seconds": status.get("train_cpu_seconds")}
    pick = ("accuracy", "relaxed_accuracy", "auc")
    return {"best_epoch": best["epoch"], "train_reviews": meta["split_sizes"]["train"],
            "precision": trained_precision(meta),
            "machine": cpu_description(), "measured": time.strftime("%Y-%m-%d"),
            "test": {k: best["test"][k] for k in pick},
            "validation": {k: best["validation"][k] for k in pick},
            "minutes": round(c["seconds"] / 60, 1),
            "cpu_minutes": None if c["cpu_seconds"] is None else round(c["cpu_seconds"] / 60, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=list(ROWS),
                    metavar="BALANCE:MAXLEN[:EPOCHS[:SIGMA]]")
    ap.add_argument("--out", type=Path, default=ROOT / "checkpoints" / "runs" / "ablation")
    ap.add_argument("--retrain", action="store_true",
                    help=f"train the rows again even where {RESULTS.relative_to(ROOT)} has them")
    args = ap.parse_args(argv)
    results, kept = {}, kept_rows()
    for row in args.rows:
        try:
            balance, length, epochs, sigma = parse_row(row)
        except ValueError:
            ap.error(f"a row is BALANCE:MAXLEN[:EPOCHS[:SIGMA]] with BALANCE one of "
                     f"{sorted(EPOCHS)}: {row!r}")
        run = args.out / run_name(balance, length, epochs, sigma)
        if row in kept and not args.retrain:
            results[row] = kept[row]
        else:
            if not finished(run):
                print(f"== {row}: training in {run}", flush=True)
                train_row(run, balance, length, epochs, sigma)
            results[row] = {"class_balance": balance, "max_length": length,
                            "epochs": epochs, "ordinal_sigma": sigma, **figures(run)}
            kept[row] = results[row]
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(RESULTS, {"rows": kept})
        r = results[row]
        print(f"{row:16s} {r['test']['accuracy']:.1%} correct, {r['test']['relaxed_accuracy']:.1%} "
              f"relaxed, AUC {r['test']['auc']:.3f}, {r['minutes']} min", flush=True)
    if BASELINE in results:
        base = results[BASELINE]["test"]["accuracy"]
        for r in results.values():
            r["accuracy_gain_points"] = round(100 * (r["test"]["accuracy"] - base), 2)
    payload = {"baseline": BASELINE, "rows": results}
    atomic_write_json(args.out / "ablation.json", payload)   # the model card's --ablation
    print(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
