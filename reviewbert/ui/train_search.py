"""The Train page's search view: a form that becomes a SearchSpec, and every search's progress.

The search itself is ``python -m reviewbert search … --queue`` in its own
process (reviewbert.search, on Optuna); this only builds its spec and reads
its folder.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from .. import config, jobs, runs, search
from ..errors import ConfigError
from . import config_form, state, train

DEFAULT_ROWS = [{"hyperparameter": "lr_bert", "values": "1e-5, 5e-5"},
                {"hyperparameter": "lr_classifier", "values": "1e-3, 1e-2"}]


def searchable() -> list[str]:
    return [f.name for f in config.group_fields("basic") + config.group_fields("advanced")]


def spec_from_form(values: dict, rows: list[dict], sampler: str, trials: int | None,
                   objective: str, prune: bool, storage: str | None) -> search.SearchSpec:
    """The SearchSpec for the form; ConfigError says what is wrong, in CLI terms."""
    grid, ranges = {}, {}
    for row in rows:
        name, text = (row.get("hyperparameter") or "").strip(), str(row.get("values") or "").strip()
        if not name and not text:
            continue
        if not name or not text:
            raise ConfigError("each searched row needs a hyperparameter and its values")
        if ":" in text:
            key, r = search.parse_range(f"{name}={text}")
            ranges[key] = r
        else:
            key, vals = search.parse_grid(f"{name}={text.replace(' ', '')}")
            grid[key] = vals
    base = {k: v for k, v in values.items() if k not in grid and k not in ranges}
    spec = search.SearchSpec(base=base, grid=grid, ranges=ranges, sampler=sampler,
                         trials=trials or None, objective=objective, prune=prune,
                         storage=storage or None)
    spec.check()
    return spec


def search_section(root: Path) -> None:
    paths, extra = train.data_section()
    st.subheader("2 · Fixed for every trial")
    st.caption("Epochs is the cap per trial; with pruning, trials behind the median stop early.")
    values, _, errors = config_form.config_form(paths, extra)
    train.data_report(values)
    st.subheader("4 · What to search")
    rows = st.data_editor(
        pd.DataFrame(DEFAULT_ROWS), num_rows="dynamic", hide_index=True, key=state.SEARCH_FIELD + "rows",
        column_config={
            "hyperparameter": st.column_config.SelectboxColumn(options=searchable(), required=True),
            "values": st.column_config.TextColumn(
                help="A list (1e-5, 5e-5) for a grid, or a range low:high or low:high:log "
                     "for TPE")}).to_dict("records")
    c1, c2, c3, c4 = st.columns(4)
    sampler = c1.radio("Sampler", search.SAMPLERS, horizontal=True, key=state.SEARCH_FIELD + "sampler",
                       help="grid: every combination; tpe: Optuna's TPE over lists and ranges")
    trials = c2.number_input("Trials (TPE; grid: cap)", value=None, min_value=1, step=1,
                             key=state.SEARCH_FIELD + "trials", placeholder="all grid points")
    objective = c3.selectbox("Objective (validation)", search.OBJECTIVES,
                             key=state.SEARCH_FIELD + "objective",
                             help="The test split is reported, never used to pick or prune.")
    prune = c4.checkbox("Prune (median)", key=state.SEARCH_FIELD + "prune",
                        help="Optuna's MedianPruner after each epoch")
    storage = st.text_input("Optuna storage URL (optional)", key=state.SEARCH_FIELD + "storage",
                            placeholder="default: study.db in the search folder; e.g. "
                                        "postgresql://user@host/db to share with other machines")
    spec = None
    try:
        spec = spec_from_form(values, rows, sampler, trials, objective, prune, storage.strip())
        st.success(f"{spec.size} trial(s), objective: validation {spec.objective} "
                   f"({spec.direction}).")
    except ConfigError as e:
        if not errors:
            st.error(str(e))
    c1, c2 = st.columns([3, 1])
    name = c1.text_input("Search name (its folder)", key=state.SEARCH_FIELD + "name",
                         value=jobs.suggest_name(root, "search"))
    if c2.button("Launch search", type="primary", key="search_btn",
                 disabled=spec is None or bool(errors)):
        try:
            folder = jobs.check_name(root, name)
            runs.launch("search", spec.to_args(), folder, queue=True, log_name="search.log")
        except (ConfigError, runs.RunBusyError, OSError) as e:
            st.error(str(e))
        else:
            st.session_state[state.TRAIN_FLASH] = ("success", f"Search **{folder.name}** queued.")
            st.rerun()
    searches_view(root)


def searches_view(root: Path) -> None:
    folders = sorted((d for d in Path(root).iterdir() if search.is_search_dir(d)),
                     key=lambda d: d.stat().st_mtime, reverse=True) if Path(root).is_dir() else []
    if not folders:
        return
    st.subheader("Searches")
    active = any((runs.read_status(d) or {}).get("state") in train.ACTIVE for d in folders)
    st.fragment(run_every=train.REFRESH_SECONDS if active else None)(_searches)(folders)


def _searches(folders: list[Path]) -> None:
    for d in folders:
        info = search.read_search(d)
        status, spec = info["status"], info["spec"]
        size = status.get("size") or spec.get("size") or 0
        done = sum(1 for t in info["trials"] if t["state"] in ("complete", "pruned", "failed"))
        with st.container(border=True):
            st.markdown(f"**{info['name']}** · {train.STATE_ICONS.get(status.get('state'), '')} "
                        f"{status.get('state', '?')} · objective validation "
                        f"{spec.get('objective', '?')}")
            st.progress(done / size if size else 0.0, text=(
                f"{status.get('complete', 0)} done · {status.get('pruned', 0)} pruned · "
                f"{status.get('failed', 0)} failed · {status.get('left', size - done)} left of {size}"))
            best = info["best"]
            if best:
                params = ", ".join(f"{k}={v}" for k, v in best["params"].items())
                st.markdown(f"Best so far: trial {best['number']} ({params}): {best['value']:.4f}")
            if info["trials"]:
                st.dataframe([{"trial": t["number"], "state": t["state"], "value": t["value"],
                               "test": t["test"], **(t["params"] or {})} for t in info["trials"]],
                             hide_index=True)
            if status.get("state") in train.ACTIVE and st.button("Stop search", key=f"stop_{d.name}"):
                runs.stop_run(d)
