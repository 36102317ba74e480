"""The Train page's search view: a form that becomes a SearchSpec (or the seed report's
grid), every search's progress, and the selected search's dashboard of Optuna figures.

The search itself is ``python -m reviewbert search … --queue`` in its own
process (reviewbert.training.search, on Optuna); this only builds its spec and reads
its folder and study. Figures come from reviewbert.training.search.figures.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.io
import streamlit as st

from reviewbert import config
from reviewbert.errors import ConfigError
from reviewbert.training import experiments, jobs, runs, search
from reviewbert.training.search import figures as search_figures
from reviewbert.training.search import seed_grid
from reviewbert.ui import config_form, runtime, state, train
from reviewbert.ui.png_download import png_download

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
    """The searches' dashboard first (when there is one), then the form for a new one."""
    _apply_preset()
    if searches_view(root):
        st.divider()
        st.header("New search")
    paths, extra = train.data_section()
    st.subheader("2 · Fixed for every trial")
    st.caption("Epochs is the cap per trial; with pruning, trials behind the median stop early.")
    _preset_box()
    values, _, errors = config_form.config_form(paths, extra)
    train.data_report(values)
    st.subheader("4 · What to search")
    rows = st.data_editor(
        pd.DataFrame(st.session_state.get(state.SEARCH_ROWS) or DEFAULT_ROWS), num_rows="dynamic",
        hide_index=True, key=state.SEARCH_FIELD + "rows",
        column_config={
            "hyperparameter": st.column_config.SelectboxColumn(options=searchable(), required=True),
            "values": st.column_config.TextColumn(
                help="A list (1e-5, 5e-5) for a grid, or a range low:high or low:high:log "
                     "for TPE")}).to_dict("records")
    spec, errors = _how_to_search(values, rows, errors)
    c1, c2 = st.columns([3, 1])
    name = c1.text_input("Search name (its folder)", key=state.SEARCH_FIELD + "name",
                         value=jobs.suggest_name(root, "search"))
    if runtime.button(c2, "Launch search", type="primary", key="search_btn",
                          disabled=spec is None or bool(errors)):
        try:
            folder = jobs.check_name(root, name)
            runs.launch("search", spec.to_args(), folder, queue=True, log_name="search.log")
        except (ConfigError, runs.RunBusyError, OSError) as e:
            st.error(str(e))
        else:
            st.session_state[state.TRAIN_FLASH] = ("success", f"Search **{folder.name}** queued.")
            st.session_state[state.SEARCH_SHOWN] = str(folder)
            st.rerun()


def _how_to_search(values: dict, rows: list[dict], errors: dict):
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
    return spec, errors


# ----------------------------------------------------------------- the seed's grid
def _preset_box() -> None:
    with st.expander("Seed report grid: the seed's Table 1, sized to your budget"):
        st.caption(seed_grid.__doc__.split("\n\n")[1].replace("\n", " "))
        c1, c2, c3, c4 = st.columns(4)
        epochs = c1.number_input("Budget: epochs", 1, 1000, 4, key=state.SEED_BUDGET + "epochs")
        per_class = c2.number_input("Budget: reviews per class", 5, 10**7, 60, step=10,
                                    key=state.SEED_BUDGET + "max_per_class")
        max_length = c3.number_input("Budget: max length (tokens)", 8, 512, 128, step=16,
                                     key=state.SEED_BUDGET + "max_length")
        st.caption(seed_grid.describe(int(epochs)))
        if runtime.button(c4, "Fill the form", key="seed_preset_btn", type="secondary",
                              help="Sets the searched rows, epochs, cap per class, max length, weight "
                                   "decay and LR step; everything else in the form stays"):
            st.session_state[state.PENDING_SEARCH_PRESET] = {
                "epochs": int(epochs), "max_per_class": int(per_class),
                "max_length": int(max_length)}
            st.rerun()


def _apply_preset() -> None:
    """The preset asked for on the last run, applied before the form's widgets exist."""
    budget = st.session_state.pop(state.PENDING_SEARCH_PRESET, None)
    if not budget:
        return
    for name, value in seed_grid.fixed(**budget).items():
        st.session_state[state.CONFIG_FIELD + name] = value
    st.session_state[state.SEARCH_ROWS] = seed_grid.editor_rows()
    st.session_state.pop(state.SEARCH_FIELD + "rows", None)  # the editor's edits: start anew
    st.session_state[state.SEARCH_FIELD + "sampler"] = "grid"
    st.session_state[state.TRAIN_FLASH] = ("success", "The form holds the seed report grid: "
                                           + seed_grid.describe(budget["epochs"]) + ".")


# ------------------------------------------------------------------- the searches
def searches_view(root: Path) -> bool:
    """The chosen search's dashboard (refreshed while it runs); False if there is none."""
    folders = sorted((d for d in Path(root).iterdir() if search.is_search_dir(d)),
                     key=lambda d: d.stat().st_mtime, reverse=True) if Path(root).is_dir() else []
    if not folders:
        return False
    st.subheader("Searches")
    groups = {str(g[0]): g for g in search.study_groups(folders)}
    if st.session_state.get(state.SEARCH_SHOWN) not in groups:
        st.session_state[state.SEARCH_SHOWN] = next(iter(groups))
    st.selectbox("Search", list(groups), key=state.SEARCH_SHOWN,
                 format_func=lambda k: _label(groups[k]))
    group = groups[st.session_state[state.SEARCH_SHOWN]]
    active = search.group_status(group).get("state") in train.ACTIVE
    st.fragment(run_every=train.REFRESH_SECONDS if active else None)(dashboard)(group)
    return True


def _label(group: list[Path]) -> str:
    st_ = search.group_status(group)
    workers = f" · {len(group)} worker folders" if len(group) > 1 else ""
    return f"{group[0].name} · {st_.get('state', '?')}{workers}"


def dashboard(group: list[Path]) -> None:
    """Progress, Optuna's figures, the trials as the seed's Table 1 and their curves."""
    folder, peers = group[0], group[1:]
    try:
        info = search.read_search(folder, study=True, peers=peers)
    except ConfigError as e:  # its database cannot be reached: the files still can
        st.warning(f"The study cannot be read ({e}); showing the trial folders only.")
        info = search.read_search(folder, peers=peers)
    status = {**info["status"], **search.group_status(group)}
    _progress(info, status, group)
    if not info["trials"]:
        st.info("No trial has started yet.")
        return
    picked = _figures(folder)
    _trials_table(info, folder, peers, picked)


def _progress(info: dict, status: dict, group: list[Path]) -> None:
    spec, size = info["spec"], status.get("size") or info["spec"].get("size") or 0
    done = sum(1 for t in info["trials"] if t["state"] in ("complete", "pruned", "failed"))
    st.markdown(f"**{info['name']}** · {train.STATE_ICONS.get(status.get('state'), '')} "
                f"{status.get('state', '?')} · objective validation {spec.get('objective', '?')}"
                + (f" · study `{spec.get('study')}` on {len(group)} worker folders"
                   if len(group) > 1 else ""))
    retried = f" · {status['retried']} re-run after a worker died" if status.get("retried") else ""
    st.progress(min(1.0, done / size) if size else 0.0, text=(
        f"{status.get('complete', 0)} done · {status.get('pruned', 0)} pruned · "
        f"{status.get('failed', 0)} failed · {status.get('left', 0)} left of {size}{retried}"))
    best = info["best"]
    if best:
        params = ", ".join(f"{k}={v}" for k, v in best["params"].items())
        st.markdown(f"Best so far: trial {best['number']} ({params}): {best['value']:.4f}")
    if status.get("state") in train.ACTIVE and runtime.button(st, "Stop search", key=f"stop_{group[0].name}"):
        for d in group:
            runs.stop_run(d)


# ------------------------------------------------------------------- the dashboard
@st.cache_data(max_entries=16, show_spinner="Drawing the study's figures…")
def _cached_figures(folder: str, signature: tuple, _study):
    """As JSON: a figure rebuilt from it has the same spec on every run (an unpickled one
    orders its layout differently), so a chart keeps its id and its click selection."""
    imp = search_figures.importances(_study)
    return {k: f.to_json() for k, f in search_figures.dashboard(_study, imp).items()}, imp


LAYOUT = (("history", "importances"), ("parallel",), ("contour", "slice"), ("intermediate",))


def _figures(folder: Path) -> list[int]:
    """Draw the figures; returns the trials clicked in them."""
    try:
        study = search_figures.load_study(folder)
        signature = search_figures.study_signature(study)
    except (ConfigError, ValueError, KeyError) as e:
        st.warning(f"No figures: the study cannot be opened ({e}).")
        return []
    specs, imp = _cached_figures(str(folder), signature, study)
    figs = {name: plotly.io.from_json(spec) for name, spec in specs.items()}
    st.caption(f"Parameter importances: fANOVA (Optuna's FanovaImportanceEvaluator) on "
               f"**{imp.n_trials} finished trials**; contour and slice show the two most "
               f"important: {', '.join(imp.top) or 'none yet'}. Click a point of the history "
               "or a curve of the validation per epoch to select its trial below.")
    if imp.note:
        st.warning(f"Parameter importances: {imp.note}.", icon="⚠️")
    picked: list[int] = []
    for row in LAYOUT:
        for col, name in zip(st.columns(len(row)), row):
            picked += _chart(col, name, figs[name], folder)
    _export(figs, folder, signature)
    return list(dict.fromkeys(picked))


def _chart(col, name: str, fig, folder: Path) -> list[int]:
    key = f"{state.SEARCH_FIG}{folder.name}_{name}"
    options = {"displaylogo": False}
    if name not in search_figures.CLICKABLE:
        col.plotly_chart(fig, key=key, theme=None, config=options)
        return []
    event = col.plotly_chart(fig, key=key, theme=None, config=options, on_select="rerun",
                             selection_mode="points")
    points = ((event or {}).get("selection") or {}).get("points") or []
    return search_figures.clicked_trials(name, fig, points)


def _export(figs: dict, folder: Path, signature: tuple) -> None:
    c1, c2, c3 = st.columns([2, 1, 1])
    name = c1.selectbox("Export a figure", list(figs), key=state.SEARCH_EXPORT,
                        format_func=lambda n: search_figures.TITLES[n])
    fig = figs[name]
    c2.download_button("HTML (interactive, offline)", lambda: search_figures.figure_html(fig),
                       f"{folder.name}_{name}.html", "text/html", key="search_dl_html",
                       on_click="ignore", help="plotly.js inside: opens without a network")
    key = f"{folder}:{name}:{hash(signature)}"
    png_download(c3, fig, state_key=state.SEARCH_PNG, figure_key=key,
                 file_name=f"{folder.name}_{name}.png", key_prefix="search_",
                 note=" The HTML download works without it.")


def _trials_table(info: dict, folder: Path, peers: list[Path], picked: list[int]) -> None:
    """This search's trials as the seed's Table 1; clicked trials come selected, and the
    selected ones' curves are overlaid (and selected in the Runs view's table too)."""
    df = experiments.runs_table(experiments.trial_runs([folder, *peers]))
    if df.empty:
        return
    table = experiments.seed_table(df, info["spec"].get("objective", "accuracy"))
    st.markdown("**Trials, as the seed report's Table 1** (test | validation at the best "
                "epoch; ★ the best of each label count by the validation objective)")
    rows = [i for i, n in enumerate(table["trial"]) if n in picked]
    event = st.dataframe(
        table.drop(columns=["path"]), hide_index=True, on_select="rerun",
        selection_mode="multi-row", selection_default={"selection": {"rows": rows}},
        key=f"{state.SEARCH_TABLE}{folder.name}_{'-'.join(map(str, picked))}",
        column_config={"LR BERT": st.column_config.NumberColumn(format="%.0e"),
                       "LR classifier": st.column_config.NumberColumn(format="%.0e")})
    chosen = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if picked:
        paths = [str(p) for p in table.loc[rows, "path"]]
        st.session_state[state.PENDING_OVERLAY] = paths
        if paths:
            st.session_state[state.PENDING_LIVE_RUN] = paths[0]
    if chosen:
        sel = table.iloc[chosen]
        st.markdown("**Selected trials, overlaid**: " + ", ".join(f"`{r}`" for r in sel["run"])
                    + " (dash = trial, colour = split)")
        train.charts(experiments.curves(list(sel["path"]), list(sel["run"])), "search_overlay")
