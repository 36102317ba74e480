"""A finished search built without training: the real SearchWorker and Optuna study, with
trials whose run folders a seeded toy objective writes as a `train` process would
(status.json, metrics.jsonl per epoch and split, reviewbert.json with the best epoch).

The toy objective makes ``lr_bert`` the parameter that matters: validation accuracy
peaks at lr_bert = 3e-5 and falls off with the distance in decades; ``lr_classifier``
and ``lr_decay`` move it by at most a point, plus seeded noise of ±0.5 points.
"""
from __future__ import annotations

import math
import random
import time
from pathlib import Path

from reviewbert.fsio import atomic_write_json
from reviewbert.training import runs, search

GRID = {"lr_bert": [1e-5, 3e-5, 1e-4, 3e-4], "lr_classifier": [1e-3, 1e-2, 1e-1],
        "lr_decay": [0.5, 0.9]}
EPOCHS = 3


def final_accuracy(params: dict, number: int) -> float:
    rng = random.Random(number)
    off = abs(math.log10(params["lr_bert"]) - math.log10(3e-5))
    minor = 0.01 * (params["lr_classifier"] == 1e-2) + 0.005 * (params.get("lr_decay") == 0.9)
    return 0.62 - 0.2 * off + minor + rng.uniform(-0.005, 0.005)


class ToyRunTrial:
    """One epoch per poll; writes the files of a run; stop() = a pruned run's SIGINT."""

    def __init__(self, spec, params, run_dir: Path):
        self.dir, self.params = Path(run_dir), params
        self.number = int(self.dir.name.split("-")[1])
        self.final = final_accuracy(params, self.number)
        self.epoch, self.epochs = 0, spec.trial_epochs(params)
        runs.write_status(self.dir, {"state": "running", "epoch": 0, "epochs": self.epochs})

    def _rows(self, epoch: int) -> list[dict]:
        acc = self.final * (0.55 + 0.45 * epoch / self.epochs)
        return [{"epoch": epoch, "split": split, "loss": 1.6 - acc - shift,
                 "auc": 0.5 + acc / 2, "accuracy": acc + shift,
                 "relaxed_accuracy": min(1.0, acc + 0.3), "n": 50, "step": epoch * 10,
                 "time": time.time()}
                for split, shift in (("train", 0.03), ("validation", 0.0), ("test", -0.01))]

    def poll(self):
        if self.epoch >= self.epochs:
            return [], False
        self.epoch += 1
        rows = self._rows(self.epoch)
        runs.append_metrics(self.dir, rows)
        return [rows[1]], self.epoch < self.epochs

    def stop(self, grace_s=0):
        runs.write_status(self.dir, {"state": "stopped", "epoch": self.epoch,
                                     "epochs": self.epochs, "message": "pruned"})
        self.epochs = self.epoch

    def result(self):
        by_split = {r["split"]: r for r in self._rows(self.epoch)}
        best = {"epoch": self.epoch, "validation": by_split["validation"], "test": by_split["test"]}
        atomic_write_json(self.dir / "reviewbert.json", {
            "labels": 5, "best": best,
            "hyperparameters": {"labels": 5, "lr_bert": self.params["lr_bert"],
                                "lr_classifier": self.params["lr_classifier"],
                                "lr_decay": self.params.get("lr_decay", 0.5),
                                "weight_decay": 0.01, "epochs": self.epochs}})
        runs.write_status(self.dir, {"state": "finished", "epoch": self.epoch,
                                     "epochs": self.epochs})
        return {"returncode": 0, "state": "finished", "log_tail": "", "best": best}


def build_search(folder: Path, data_file: Path, grid: dict | None = None,
                 prune: bool = True) -> search.SearchSpec:
    """Run a whole toy search into ``folder`` (a few seconds, no training)."""
    spec = search.SearchSpec(base={"data": [str(data_file)], "epochs": EPOCHS},
                             grid=grid or GRID, prune=prune, prune_startup=12)
    spec.check()
    worker = search.SearchWorker(spec, folder, start_trial=ToyRunTrial, poll_s=0,
                                 log=lambda *a: None)
    assert worker.run() == "finished"
    return spec
