"""The Train page's components: data picker, launch form, live view, runs table.

They only draw: the files come from reviewbert.data.files, launches go through
reviewbert.training.jobs / reviewbert.training.runs, tables and curves from reviewbert.training.experiments,
figures from reviewbert.viz.figures.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from reviewbert import config
from reviewbert.config import TrainConfig
from reviewbert.data import DataError
from reviewbert.data import files as datafiles
from reviewbert.data.data_report import format_class_use
from reviewbert.errors import ConfigError
from reviewbert.training import experiments, jobs, runs
from reviewbert.training.distill import candidate_teachers
from reviewbert.ui import config_form, runtime, state, train_datamap
from reviewbert.viz import figures

ACTIVE = ("queued", "running")
STATE_ICONS = {"queued": "⏳", "running": "🏃", "finished": "✅", "stopped": "⏸️", "failed": "❌",
               "killed": "💀", "cancelled": "🚫", "pruned": "✂️"}
REFRESH_SECONDS = 2


def flash() -> None:
    """Show (once) the message an action left for the next run."""
    msg = st.session_state.pop(state.TRAIN_FLASH, None)
    if msg:
        getattr(st, msg[0])(msg[1])


# ------------------------------------------------------------------------ data
def _save_uploads() -> None:
    files = st.session_state.get(state.TRAIN_UPLOAD) or []
    done = st.session_state.setdefault(state.TRAIN_UPLOADED, {})
    for f in files:
        if f.file_id in done:
            continue
        try:
            path = datafiles.save_upload(f.name, f.getvalue())
        except datafiles.UploadError as e:
            done[f.file_id] = None
            st.session_state[state.TRAIN_FLASH] = ("error", f"Upload **{f.name}** not kept: {e}")
            continue
        done[f.file_id] = str(path)
        chosen = list(st.session_state.get(state.TRAIN_FILES) or [])
        st.session_state[state.TRAIN_FILES] = chosen + [str(path)] if str(path) not in chosen else chosen
        st.session_state[state.TRAIN_FLASH] = ("success", f"Uploaded **{f.name}** as `{path.name}`.")


def data_section() -> tuple[list[str], dict]:
    """Pick files (or upload one), preview them. Returns (paths, data-group field values)."""
    st.subheader("1 · Data")
    folder, uploads = datafiles.data_dir(), datafiles.uploads_dir()
    st.file_uploader("Upload a review file (CSV/TSV, JSON lines or JSON array, optionally gzipped)",
                     type=["csv", "tsv", "json", "jsonl", "gz"], accept_multiple_files=True,
                     key=state.TRAIN_UPLOAD, on_change=_save_uploads,
                     help=f"At most {datafiles.MAX_UPLOAD_BYTES >> 20} MB; stored in `{uploads}`.")
    flash()
    files = datafiles.list_data_files(folder, uploads)
    options = [str(p) for p in files]
    chosen = [p for p in st.session_state.get(state.TRAIN_FILES) or [] if p in options]
    if chosen != st.session_state.get(state.TRAIN_FILES, chosen):   # a file went away
        st.session_state[state.TRAIN_FILES] = chosen
    st.multiselect("Data files", options, key=state.TRAIN_FILES, persist_state=state.KEEP,
                   format_func=lambda p: Path(p).name + ("  (uploaded)" if Path(p).parent == uploads else ""),
                   help=f"From the data folder `{folder}` (REVIEWBERT_DATA_DIR) and uploads.",
                   placeholder="Choose one or more review files")
    if not files:
        st.warning(f"No review files in `{folder}` yet: set REVIEWBERT_DATA_DIR, or upload one.")
    extra = {}
    with st.expander("Columns, titles and split"):
        cols = st.columns(3)
        for i, f in enumerate(config.group_fields("data")):
            if f.name not in ("data", "fractions"):
                extra[f.name] = config_form.widget(f, cols[i % 3].container())
    for path in st.session_state.get(state.TRAIN_FILES) or []:
        _preview(path, extra)
    return list(st.session_state.get(state.TRAIN_FILES) or []), extra


@st.cache_data(max_entries=32, show_spinner=False)
def _cached_preview(path: str, stamp: float, options: tuple):
    from reviewbert.data import ReadOptions
    return datafiles.preview(path, ReadOptions(*options))


def _read_options(extra: dict) -> tuple:
    return (extra.get("text_column"), extra.get("rating_column"), extra.get("title_column"),
            bool(extra.get("prepend_title")))


def _preview(path: str, extra: dict) -> None:
    try:
        p = _cached_preview(path, Path(path).stat().st_mtime, _read_options(extra))
    except (DataError, OSError) as e:
        st.error(f"**{Path(path).name}** cannot be read: {e}")
        return
    with st.expander(f"Preview: {p.name} ({p.format})"):
        cols = p.columns
        st.markdown(f"Text column **{cols.get('text')}**, rating column **{cols.get('rating')}**, "
                    f"title column **{cols.get('title') or 'none found'}**.")
        st.dataframe(p.rows, hide_index=True, width="stretch",
                     column_config={"text": st.column_config.TextColumn("text", width="large")})


@st.cache_data(max_entries=16, show_spinner="Reading the files for the data report…")
def _cached_report(paths: tuple, stamps: tuple, cfg_items: tuple):
    return datafiles.training_report(list(paths), TrainConfig(**dict(cfg_items)))


def data_report(values: dict) -> bool:
    """The report ``train`` would print for these files and settings; False if unusable."""
    st.subheader("3 · Data report")
    paths = values.get("data") or []
    if not paths:
        st.info("Choose a data file above to see how many reviews each split would get.")
        return False
    keys = ("labels", "max_per_class", "class_balance", "min_tokens", "split_seed", "text_column",
            "rating_column", "title_column", "prepend_title", "base_model")
    try:
        cfg = tuple((k, values[k]) for k in keys if k in values)
        report = _cached_report(tuple(paths), tuple(Path(p).stat().st_mtime for p in paths), cfg)
    except (DataError, ConfigError, OSError) as e:
        st.error(f"These files cannot be used for training: {e}")
        return False
    d = report.to_dict()
    c1, c2, c3 = st.columns(3)
    c1.metric("Rows read", f"{d['rows_read']:,}")
    c2.metric("Unique usable reviews", f"{d['unique_texts']:,}")
    c3.metric("Reviews per class (all splits)", f"{d.get('per_class') or 0:,}")
    if d.get("split_counts"):
        st.dataframe([{"split": s, **c, "total": sum(c.values())} for s, c in d["split_counts"].items()],
                     hide_index=True)
    if d.get("training"):
        st.caption(format_class_use(d["training"]))
    skipped = d.get("skipped") or {}
    if skipped:
        st.caption("Skipped rows by reason: " + ", ".join(f"{k} {v:,}" for k, v in skipped.items()))
    with st.expander("The full report, as `train` prints it"):
        st.code(report.format(), language=None)
    if not d.get("per_class"):
        st.error("No class has any review left: every split would be empty.")
        return False
    return True


# ---------------------------------------------------------------------- launch
def launch_section(root: Path) -> None:
    paths, extra = data_section()
    st.subheader("2 · Hyperparameters")
    values, cfg, errors = config_form.config_form(
        paths, extra, options={"teachers": candidate_teachers(root, paths)})
    ok = data_report(values)
    st.subheader("4 · Launch")
    c1, c2 = st.columns([3, 1])
    if state.TRAIN_RUN_NAME not in st.session_state:
        st.session_state[state.TRAIN_RUN_NAME] = jobs.suggest_name(root)
    name = c1.text_input("Run name (its folder under the checkpoints folder)", key=state.TRAIN_RUN_NAME)
    blocked = bool(errors) or not ok
    if runtime.button(c2, "Launch", type="primary", key="launch_btn", disabled=blocked,
                          help="Starts a background training process; it waits as queued while "
                               "another run uses the device."):
        try:
            run_dir, _ = jobs.start_run(cfg, root, name)
        except (ConfigError, DataError, OSError) as e:
            st.error(str(e))
            return
        st.session_state.pop(state.TRAIN_RUN_NAME, None)
        st.session_state[state.PENDING_LIVE_RUN] = str(run_dir)
        st.session_state[state.PENDING_TRAIN_VIEW] = "Runs"
        st.session_state[state.TRAIN_FLASH] = ("success", f"Launched **{run_dir.name}**.")
        st.rerun()
    if blocked:
        st.caption("Fix the messages above to launch." if errors else
                   "Choose usable data files to launch.")


# ---------------------------------------------------------------------- live view
def _runs(root: Path) -> list[dict]:
    """Training runs and search trials; a search folder itself is shown in the Search view."""
    return [r for r in runs.list_runs(root, include_trials=True) if r.get("kind") != "search"]


def _progress(status: dict) -> None:
    run_state = status.get("state", "?")
    total, step = status.get("total_steps") or 0, status.get("step") or 0
    frac = min(1.0, step / total) if total else 0.0
    parts = [f"{STATE_ICONS.get(run_state, '')} **{run_state}**"]
    if total:
        parts.append(f"epoch {status.get('epoch', '?')}/{status.get('epochs', '?')}")
        parts.append(f"step {step:,}/{total:,}")
    if status.get("samples_per_s"):
        parts.append(f"{status['samples_per_s']:.1f} samples/s")
    if run_state == "running" and status.get("eta_seconds") is not None:
        eta = int(status["eta_seconds"])
        parts.append(f"ETA {eta // 3600}:{eta % 3600 // 60:02d}:{eta % 60:02d}")
    st.progress(frac if run_state != "finished" else 1.0, text=" · ".join(parts))
    if status.get("message"):
        st.caption(status["message"])


def charts(curves, key: str) -> None:
    """The four metric charts (the seed's figure 11) of a curves table, two per row."""
    cols = st.columns(2)
    for i, (metric, title) in enumerate(experiments.METRICS):
        if metric == "relaxed_accuracy" and len(curves) and \
                curves[curves["metric"] == metric].empty:
            title += " (not defined for 3 labels)"
        cols[i % 2].plotly_chart(figures.metric_curves(curves, metric, title), key=f"{key}_{metric}",
                                 config={"displayModeBar": False})


def _controls(run_dir: Path, status: dict) -> None:
    run_state = status.get("state")
    c1, c2, c3, c4 = st.columns(4)
    if run_state == "running" and runtime.button(c1, "Stop", key="stop_btn",
                                                 help="Finishes the current step, saves last/, exits"):
        runs.stop_run(run_dir)
        st.toast("Stopping after the current step…")
    if run_state == "queued" and runtime.button(c1, "Cancel", key="cancel_btn"):
        runs.cancel_run(run_dir)
    if run_state in ("stopped", "killed", "failed") and (run_dir / "last").is_dir() and \
            runtime.button(c2, "Resume", key="resume_btn", help="Continues from last/, history kept"):
        runs.resume_run(run_dir, queue=True)
        st.toast("Resuming (queued until the device is free)…")
    if (run_dir / "best" / "config.json").exists() and \
            runtime.button(c3, "Open on the main page", key="open_btn"):
        state.select_checkpoint(run_dir / "best")
        st.switch_page(state.PREDICT_PAGE)
    if run_state not in ACTIVE and runtime.button(c4, "Delete…", key="delete_btn"):
        st.session_state[state.CONFIRM_DELETE] = str(run_dir)
    if st.session_state.get(state.CONFIRM_DELETE) == str(run_dir):
        st.warning(f"Delete **{run_dir.name}** and its checkpoints? This cannot be undone.")
        d1, d2, _ = st.columns([1, 1, 4])
        if runtime.button(d1, "Yes, delete", key="delete_yes", type="primary"):
            try:
                runs.delete_run(run_dir)
                st.session_state[state.TRAIN_FLASH] = ("success", f"Deleted {run_dir.name}.")
            except (OSError, ValueError, RuntimeError) as e:
                st.session_state[state.TRAIN_FLASH] = ("error", f"Not deleted: {e}")
            st.session_state.pop(state.CONFIRM_DELETE, None)
            st.rerun(scope="app")
        if runtime.button(d2, "No", key="delete_no"):
            st.session_state.pop(state.CONFIRM_DELETE, None)
            st.rerun(scope="fragment")


def _live(root: Path) -> None:
    rows = _runs(root)
    if not rows:
        st.info("No run yet: start one under **New run**.")
        return
    paths = [str(r["path"]) for r in rows]
    by_path = {str(r["path"]): r for r in rows}
    state.apply_pending(state.PENDING_LIVE_RUN, state.LIVE_RUN)
    if st.session_state.get(state.LIVE_RUN) not in by_path:
        st.session_state.pop(state.LIVE_RUN, None)
    # labels without the state: a selectbox keeps its first labels while a fragment reruns
    choice = st.selectbox("Run", paths, key=state.LIVE_RUN, persist_state=state.KEEP,
                          format_func=lambda p: str(Path(p).relative_to(root)))
    run_dir = Path(choice)
    status = runs.read_status(run_dir) or {}
    _rerun_page_on_change(run_dir, status)
    _progress(status)
    if status.get("state") in ("failed", "killed"):
        st.error(f"This run {status['state']}: {status.get('message') or 'no message'}")
        with st.expander("Log tail", expanded=status.get("state") == "failed"):
            st.code(runs.read_log_tail(run_dir) or "(empty log)", language=None)
    _controls(run_dir, status)
    charts(experiments.curves([run_dir]), "live")
    st.plotly_chart(figures.step_loss(experiments.smoothed_steps(runs.read_steps(run_dir))), key="live_steps",
                    config={"displayModeBar": False})
    train_datamap.datamap_section(run_dir)


def _rerun_page_on_change(run_dir: Path, status: dict) -> None:
    """Redraw the whole page (sidebar picker, runs table) when the run changes state or
    writes its first best/; between such changes only the fragment reruns."""
    sig = (str(run_dir), status.get("state"), (run_dir / "best" / "config.json").exists())
    last = st.session_state.get(state.LIVE_SIGNATURE)
    st.session_state[state.LIVE_SIGNATURE] = sig
    if last is not None and last[0] == sig[0] and last != sig:
        st.rerun(scope="app")


def live_view(root: Path) -> None:
    """Progress, the four metric charts and the step loss of one run, refreshed in place.

    Only this fragment reruns every REFRESH_SECONDS, and only while some run is
    queued or running: the rest of the page is not redrawn.
    """
    active = any((r["status"].get("state") in ACTIVE) for r in _runs(root))
    st.fragment(run_every=REFRESH_SECONDS if active else None)(_live)(root)


# ---------------------------------------------------------------------- runs table
def runs_table(root: Path) -> None:
    """Every run as the seed's Table 1; refreshed in place while a run is active."""
    rows = _runs(root)
    if not rows:
        return
    st.subheader("All runs")
    active = any(r["status"].get("state") in ACTIVE for r in rows)
    st.fragment(run_every=3 * REFRESH_SECONDS if active else None)(_table)(root)


def _table(root: Path) -> None:
    df = experiments.runs_table(_runs(root))
    seed = st.radio("Layout", ["All columns", "As the seed report's Table 1"], horizontal=True,
                    key=state.RUNS_LAYOUT, label_visibility="collapsed") != "All columns"
    shown = experiments.seed_table(df) if seed else df
    st.caption("As the seed report's Table 1: metrics at the best epoch (by validation "
               "accuracy), test and validation side by side"
               + ("; ★ the best of each label count. " if seed else ". ")
               + "Click column headers to sort; select rows to overlay their curves below.")
    pending = st.session_state.pop(state.PENDING_OVERLAY, None)
    if pending is not None:  # trials clicked in the Search view: a new table, them selected
        st.session_state[state.OVERLAY_EPOCH] = st.session_state.get(state.OVERLAY_EPOCH, 0) + 1
    picked = [i for i, p in enumerate(shown["path"]) if p in (pending or [])]
    event = st.dataframe(shown.drop(columns=["path"]), hide_index=True, on_select="rerun",
                         selection_mode="multi-row",
                         selection_default={"selection": {"rows": picked}},
                         key=f"{state.OVERLAY_RUNS}_{st.session_state.get(state.OVERLAY_EPOCH, 0)}",
                         column_config={"LR BERT": st.column_config.NumberColumn(format="%.0e"),
                                        "LR classifier": st.column_config.NumberColumn(format="%.0e")})
    st.download_button("Export the table as CSV", shown.to_csv(index=False).encode("utf-8"),
                       "reviewbert_runs.csv", "text/csv", key="runs_csv", on_click="ignore")
    rows = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if rows:
        chosen = shown.iloc[rows]
        st.markdown("**Selected runs, overlaid** (dash = run, colour = split)")
        charts(experiments.curves(list(chosen["path"]), list(chosen["run"])), "overlay")
