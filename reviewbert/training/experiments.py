"""Runs side by side: the seed report's Table 1 for every run, and curves to overlay.

Everything is read from run folders (reviewbert.json, status.json,
metrics.jsonl, and a search trial's trial.json), so a run trained by the CLI,
by the page, or by a search worker on another machine shows up the same way.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from reviewbert.fsio import read_json
from reviewbert.training import runs

METRICS = (("loss", "Cross-entropy"), ("auc", "AUC-ROC"), ("accuracy", "% correct"),
           ("relaxed_accuracy", "Relaxed % correct"))
PERCENT = {"accuracy", "relaxed_accuracy"}


def _trial(run_dir: Path) -> dict:
    return read_json(Path(run_dir) / runs.TRIAL_FILE) or {}


def _wall_seconds(status: dict) -> float | None:
    """From the process start to its last word (now, while it runs), less any queue wait."""
    start = status.get("started")
    end = time.time() if status.get("state") == "running" else status.get("updated")
    if not start or not end or status.get("state") == "queued":
        return None
    return max(0.0, end - start - (status.get("wait_seconds") or 0.0))


def run_row(run: dict) -> dict:
    """One row of the runs table from a ``runs.list_runs`` item."""
    meta, status = run.get("meta") or {}, run.get("status") or {}
    hp = meta.get("hyperparameters") or {}
    best = meta.get("best") or {}
    trial = _trial(run["path"])
    metrics = runs.read_metrics(run["path"])
    epochs_done = max((m["epoch"] for m in metrics if isinstance(m.get("epoch"), int)), default=0)
    row = {
        "run": run["name"],
        "state": status.get("state", "?") if trial.get("state") != "pruned" else "pruned",
        "labels": meta.get("labels") or hp.get("labels"),
        "LR classifier": hp.get("lr_classifier"), "LR BERT": hp.get("lr_bert"),
        "LR decay": hp.get("lr_decay"), "weight decay": hp.get("weight_decay"),
    }
    for key, title in METRICS:
        scale = 100.0 if key in PERCENT else 1.0
        for split, short in (("test", "test"), ("validation", "val")):
            v = (best.get(split) or {}).get(key)
            row[f"{title} {short}"] = None if v is None else round(v * scale, 3 if scale == 1 else 1)
    row.update({
        "best epoch": best.get("epoch"),
        "epochs": f"{epochs_done}/{hp.get('epochs', '?')}",
        "wall time (min)": None if (w := _wall_seconds(status)) is None else round(w / 60, 1),
        "base model": hp.get("base_model"),
        "data": ", ".join(f.get("name", "?") for f in ((meta.get("data") or {}).get("files") or []))
                or ", ".join(Path(p).name for p in hp.get("data") or []),
        "trial": trial.get("number"),
        "path": str(run["path"]),
    })
    return row


def trial_runs(search_dirs: list) -> list[dict]:
    """The trial run folders of search folders (workers of one study), as
    ``runs.list_runs`` items, named SEARCH/trial-NNNN."""
    from reviewbert.model.checkpoint import read_meta
    items = []
    for d in map(Path, search_dirs):
        for t in sorted(d.glob("trial-*")):
            if (t / runs.STATUS_FILE).exists():
                items.append({"name": f"{d.name}/{t.name}", "path": t, "kind": "trial",
                              "status": runs.read_status(t) or {},
                              "meta": read_meta(t, strict=False)})
    return items


def runs_table(run_list: list[dict]) -> pd.DataFrame:
    """The seed's Table 1 (test | validation at the best epoch) plus state and provenance."""
    return pd.DataFrame([run_row(r) for r in run_list])


def curves(run_dirs: list, names: list[str] | None = None) -> pd.DataFrame:
    """Long table of per-epoch metrics: run, epoch, split, metric, value (percent for rates)."""
    rows = []
    for i, d in enumerate(run_dirs):
        name = names[i] if names else Path(d).name
        for m in runs.read_metrics(d):
            for key, _ in METRICS:
                v = m.get(key)
                if v is not None and isinstance(m.get("epoch"), int):
                    rows.append({"run": name, "epoch": m["epoch"], "split": m.get("split"),
                                 "metric": key, "value": v * 100 if key in PERCENT else v})
    return pd.DataFrame(rows, columns=["run", "epoch", "split", "metric", "value"])


def smoothed_steps(steps: list[dict], window: int = 20) -> pd.DataFrame:
    """Per-step loss of a run with a trailing moving average (what the loss chart draws)."""
    df = pd.DataFrame(steps, columns=["step", "epoch", "loss", "lr", "time"])
    if df.empty:
        return df.assign(smoothed=[])
    df = df.sort_values("step")
    df["smoothed"] = df["loss"].rolling(window, min_periods=1).mean()
    return df


SEED_COLUMNS = ("labels", "LR classifier", "LR BERT", "LR decay", "weight decay")
OBJECTIVE_COLUMNS = {"accuracy": "% correct val", "relaxed_accuracy": "Relaxed % correct val",
                     "auc": "AUC-ROC val", "loss": "Cross-entropy val"}


def seed_table(df: pd.DataFrame, objective: str = "accuracy") -> pd.DataFrame:
    """The runs table laid out as the seed report's Table 1: its hyperparameter columns,
    then one "test | validation" column per metric, 5 labels before 3, and "★" on the
    best row of each label count by the validation ``objective`` (accuracies of 5 and
    3 labels do not compare). A run without a best epoch (pruned, failed, running)
    keeps its row with "–", as the seed listed its unstable settings."""
    if df.empty:
        return pd.DataFrame(columns=["best", *SEED_COLUMNS])
    out = df[[*SEED_COLUMNS, "state", "trial", "run", "path"]].copy()
    for metric, title in METRICS:
        digits = 1 if metric in PERCENT else 3
        out[f"{title} (test | val)"] = [_pair(t, v, digits) for t, v in
                                        zip(df[f"{title} test"], df[f"{title} val"])]
    key = df[OBJECTIVE_COLUMNS[objective]]
    out["best"] = ""
    for _, group in key.groupby(df["labels"]):
        valid = group.dropna()
        if len(valid):
            out.loc[valid.idxmin() if objective == "loss" else valid.idxmax(), "best"] = "★"
    out = out.sort_values(["labels", "LR classifier", "LR BERT", "LR decay"],
                          ascending=[False, True, True, True], kind="stable")
    return out[["best", *[c for c in out.columns if c != "best"]]].reset_index(drop=True)


def _pair(test, val, digits: int) -> str:
    def fmt(v):
        return "–" if v is None or pd.isna(v) else f"{v:.{digits}f}"
    return f"{fmt(test)} | {fmt(val)}"
