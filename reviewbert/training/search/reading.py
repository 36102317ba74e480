"""A search as the pages and the CLI read it: its trials from the trial folders (and, when
asked, from the study), the best one, the folders that share one study, and the final table.
Plain files first: no Optuna state is needed to read a search."""
from __future__ import annotations

import socket
from pathlib import Path

from reviewbert import config
from reviewbert.fsio import read_json
from reviewbert.training import runs
from reviewbert.training.runs import SEARCH_FILE, TRIAL_FILE
from reviewbert.training.search.folders import storage_url, worker_alive
from reviewbert.training.search.spec import SearchSpec, params_text
from reviewbert.training.search.study import open_storage, storage_errors


def read_search(search_dir, *, study: bool = False, peers: list | None = None) -> dict:
    """A search for a page: {"name", "path", "spec" (search.json), "status", "trials",
    "best"} from plain files; no Optuna state needed.

    Each trial row: {"number", "params", "state", "value", "test", "best_epoch",
    "message", "retry_of", "run" (its run folder), "local" (the folder is here)}, by
    number. ``peers``: other folders of the same study (workers with their own --out,
    or folders rsync'ed here), whose trial folders are read too. ``study=True`` also
    opens the study and adds the trials whose folders are elsewhere (their "run" is
    HOST:PATH) and the re-runs still waiting.
    """
    search_dir = Path(search_dir)
    spec = read_json(search_dir / SEARCH_FILE) or {}
    rows = {}
    for folder in [search_dir, *(peers or [])]:
        rows.update({n: r for n, r in _local_rows(Path(folder)).items() if n not in rows})
    if study and spec:
        for r in _remote_rows(spec, search_dir):
            mine = rows.get(r["number"])
            if mine is None:
                rows[r["number"]] = r
            elif mine["state"] in ("running", "killed") and r["state"] != "running":
                # its worker died elsewhere and the study knows: a copied trial.json does not
                mine.update(state=r["state"], message=r["message"] or mine["message"])
    trials = [rows[n] for n in sorted(rows)]
    done = [r for r in trials if r["state"] == "complete" and r["value"] is not None]
    pick = min if spec.get("direction") == "minimize" else max
    return {"name": spec.get("name", search_dir.name), "path": str(search_dir), "spec": spec,
            "status": runs.read_status(search_dir) or {}, "trials": trials,
            "best": pick(done, key=lambda r: r["value"]) if done else None}


def study_groups(folders) -> list[list[Path]]:
    """Search folders grouped by the study they share, in the given order: workers with
    their own --out on one --storage and study name are one search (the default
    study.db belongs to its folder alone)."""
    groups: dict[tuple, list[Path]] = {}
    for d in map(Path, folders):
        rec = read_json(d / SEARCH_FILE) or {}
        key = (rec.get("storage") or str(d.resolve()), rec.get("study") or d.name)
        groups.setdefault(key, []).append(d)
    return list(groups.values())


def group_status(folders) -> dict:
    """One status for a study's folders: the counts of the latest written, "running"
    while a worker of any folder runs (or "queued", while one waits)."""
    statuses = [runs.read_status(d) or {} for d in folders]
    latest = max(statuses, key=lambda st: st.get("updated") or 0)
    states = {st.get("state") for st in statuses}
    active = next((s for s in ("running", "queued") if s in states), None)
    return {**latest, "state": active or latest.get("state"),
            "workers": {pid: w for st in statuses for pid, w in (st.get("workers") or {}).items()}}


def _local_rows(search_dir: Path) -> dict[int, dict]:
    host, rows = socket.gethostname(), {}
    for d in sorted(search_dir.glob("trial-*")):
        rec = read_json(d / TRIAL_FILE)
        if not rec:
            continue
        if rec.get("state") == "running" and rec.get("host") == host and not worker_alive(rec):
            rec["state"] = "killed"
        rows[rec["number"]] = {k: rec.get(k) for k in ("number", "params", "state", "value",
                                                        "test", "best_epoch", "message",
                                                        "retry_of")}
        rows[rec["number"]].update(run=str(d), local=True)
    return rows


def _remote_rows(record: dict, search_dir: Path) -> list[dict]:
    import optuna
    from optuna.trial import TrialState
    url = storage_url(SearchSpec.from_dict(record), search_dir)
    try:
        with storage_errors(url):
            st = optuna.load_study(study_name=record["study"], storage=open_storage(url))
    except KeyError:  # search.json is written a moment before the study is created
        return []
    names = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned",
             TrialState.FAIL: "failed", TrialState.RUNNING: "running"}
    return [{"number": t.number, "params": t.params or t.system_attrs.get("fixed_params", {}),
             "state": names.get(t.state, "waiting"), "value": t.value, "test": None,
             "best_epoch": None, "message": t.user_attrs.get("message", ""),
             "retry_of": t.user_attrs.get("retry_of"), "local": False,
             "run": f"{t.user_attrs.get('host', '?')}:{t.user_attrs.get('run_dir', '?')}"}
            for t in st.get_trials(deepcopy=False) if not t.user_attrs.get("surplus")]


def format_table(summary: dict) -> str:
    """The final table: trial, params, state, objective (validation) and test."""
    objective = summary["spec"].get("objective", "accuracy")
    names = list(summary["spec"].get("grid", {})) + list(summary["spec"].get("ranges", {}))
    head = ["trial", *names, "state", objective, "test"]
    num = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
    body = [[str(r["number"]), *(config.format_value(r["params"].get(n)) for n in names), r["state"],
             num(r["value"]), num(r["test"])] for r in summary["trials"]]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
             for row in [head, *body]]
    best = summary["best"]
    if best:
        lines.append(f"best: trial {best['number']} ({params_text(best['params'])}): "
                     f"validation {objective} {best['value']:.4f}"
                     + (f", test {best['test']:.4f}" if best["test"] is not None else "")
                     + f" -> {Path(best['run']) / 'best'}")
    else:
        lines.append("best: no trial completed")
    return "\n".join(lines)
