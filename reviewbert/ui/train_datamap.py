"""The Train page's "Data map" of a run: the dataset-cartography scatter of its training reviews
(reviewbert/datamap), the region counts, and a button that saves the hard-to-learn and
ambiguous regions as Error analysis slices."""
from __future__ import annotations

from pathlib import Path

import pandas as pd  # noqa: F401 - whole before Plotly (tests/unit/test_structure.py)
import streamlit as st

from reviewbert.datamap import DataMapError, read_datamap, stats
from reviewbert.datamap import figures as datamap_figures
from reviewbert.datamap import slices as datamap_slices
from reviewbert.datamap.record import run_folder
from reviewbert.training.datamap import FILE
from reviewbert.ui import runtime
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.markdown import md_code, md_escape


def _stamp(run_dir: Path) -> float:
    try:
        return (run_folder(run_dir) / FILE).stat().st_mtime
    except OSError:
        return 0.0


@st.cache_data(max_entries=8, show_spinner=False)
def _map(path: str, stamp: float):
    """(data map, statistics frame, why there is none) of one version of the file."""
    dm, why = read_datamap(path)
    return dm, (stats.cartography(dm.probability, dm.correct) if dm is not None else None), why


@st.cache_data(max_entries=4, show_spinner="Reading the training reviews for the hover…")
def _texts(path: str, stamp: float):
    dm, _ = read_datamap(path)
    return datamap_slices.hover_texts(dm, path) if dm is not None else (None, "")


def datamap_section(run_dir: Path) -> None:
    """An expander with the run's data map, or why it has none."""
    with st.expander("Data map", expanded=False):
        _body(Path(run_dir))


def _body(run_dir: Path) -> None:
    stamp = _stamp(run_dir)
    dm, frame, why = _map(str(run_dir), stamp)
    if dm is None:
        st.info(f"No data map: {md_escape(why)}.")
        return
    counts = stats.region_counts(frame)
    st.caption(
        f"Each training review's probability of its true rating over the {dm.epochs} recorded "
        f"epoch(s) (of {dm.epochs_planned}), from the training steps' own forward passes "
        "(Swayamdipta et al. 2020): confidence = its mean, variability = its spread, colour "
        "= how often the prediction was right. Regions: ambiguous when the variability is "
        f"at least {stats.AMBIGUOUS_VARIABILITY}, else easy-to-learn when the confidence is "
        f"at least {stats.EASY_CONFIDENCE}, else hard-to-learn."
        + (" With one epoch nothing can vary yet." if dm.epochs == 1 else ""))
    cols = st.columns(len(counts))
    for col, (region, n) in zip(cols, counts.items()):
        col.metric(region, f"{n:,}", help=f"{100 * n / max(dm.n, 1):.1f} % of {dm.n:,} reviews")
    texts, note = _texts(str(run_dir), stamp)
    if note:
        st.caption(f"Hover shows no review text: {md_escape(note)}")
    names = _class_names(run_dir, dm)
    st.plotly_chart(datamap_figures.datamap_figure(frame, dm.labels, texts, names),
                    key="datamap_figure", config={"displayModeBar": False})
    _slices_button(run_dir, dm, frame)


def _class_names(run_dir: Path, dm):
    from reviewbert.model.checkpoint import read_meta
    names = read_meta(run_folder(run_dir), strict=False).get("label_names")
    return list(names) if names else None


def _slices_button(run_dir: Path, dm, frame) -> None:
    st.caption("Saves the hard-to-learn and ambiguous regions as slices beside the best "
               "checkpoint's predictions of this run's training split (evaluated first if "
               "they are not cached), for Error analysis' Slices tab.")
    if not runtime.button(st, "Save as slices for Error analysis", key="datamap_slices_btn"):
        return
    from reviewbert.analysis.predictions import planned_reviews
    from reviewbert.model.device import pick_device, resolve_precision
    try:
        n = datamap_slices.training_review_count(run_dir)
        precision = resolve_precision("auto", pick_device())
        progress = StreamlitProgress(planned_reviews(n, precision), "Evaluating the training split")
        try:
            preds = datamap_slices.train_predictions(run_dir, progress, precision)
        finally:
            progress.close()
        saved = datamap_slices.save_region_slices(dm, frame, preds)
    except (DataMapError, OSError) as e:
        st.error(f"Slices not saved: {md_escape(str(e))}")
        return
    if not saved:
        st.info("Nothing saved: the hard-to-learn and ambiguous regions are empty.")
        return
    st.success("Saved " + ", ".join(f"{md_code(k)} ({v:,} reviews)" for k, v in saved.items())
               + f" beside the predictions of {md_code(str(preds.meta['checkpoint']['path']))} "
               "on its training split.")
