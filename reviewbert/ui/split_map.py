"""The Error analysis page's Map, Drivers and Slices tabs, the Compare tab's slice
filter, and the Predict page's nearest reviews.

They only draw: vectors, projections, neighbours, drivers and slices come from
``reviewbert.analysis`` (embeddings, projection, neighbours, map_reading, drivers,
slices), figures from ``analysis/map_figures.py``, and a review opened from the map
gets the Errors tab's own card (``error_analysis.review``).
"""
from __future__ import annotations

import hashlib
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd
import streamlit as st

from reviewbert.analysis import drivers, embeddings, map_figures, map_reading, neighbours
from reviewbert.analysis import projection as projection_mod
from reviewbert.analysis import slices as slices_mod
from reviewbert.analysis.html_report import METRIC_NAMES, fmt_metric
from reviewbert.analysis.intervals import metric_intervals
from reviewbert.model.device import cpu_threads, threads_for_one_review
from reviewbert.ui import cohorts, error_analysis, nearest_reviews, runtime, state
from reviewbert.ui.nearest_reviews import PREVIEW
from reviewbert.ui.progress_bar import StreamlitProgress, in_background, wait_timed
from reviewbert.viz.markdown import md_escape

TABS = ("Map", "Drivers", "Slices")
METHODS = {"PCA 2-D": ("pca", 2), "PCA 3-D": ("pca", 3), "UMAP 2-D": ("umap", 2),
           "UMAP 3-D": ("umap", 3)}
UMAP_RATE = 400.0       # reviews/s of a warm UMAP the bar assumes (bench/split_map.py)
READ_RATE = 10_000.0    # reviews/s of the neighbours and the map's reading (for the estimate)
DRIVER_RATE = 1.0       # reviews/s of IG drivers assumed before the first run here


# ------------------------------------------------------------------ vectors
def _spec(model) -> embeddings.EmbeddingSpec:
    n = embeddings.n_layers_of(model)
    c1, c2 = st.columns(2)
    pooling = c1.radio("Sentence vector", ["cls", "mean"], key=state.MAP_POOLING, horizontal=True,
                       format_func={"cls": "[CLS]", "mean": "mean of the tokens"}.get,
                       help="[CLS] of the chosen layer is what the classifier head reads "
                            "(through the pooler) when it is the last layer.")
    layer = c2.selectbox("Layer", list(range(n, -1, -1)), key=state.MAP_LAYER,
                         format_func=lambda i: f"layer {i}" + (" (last)" if i == n else "")
                         if i else "embedding output")
    return embeddings.EmbeddingSpec(pooling, int(layer))


def vectors(preds, info, predictor, spec=None, *, ask: bool = True):
    """(vectors or None, spec): from the evaluation's pass or cache, or one pass on request
    through the page's bulk model (a cache from before embeddings existed has none)."""
    model = predictor.model             # only its config, unless a pass is needed
    spec = spec or embeddings.DEFAULT
    vecs = embeddings.vectors_for(preds, model, predictor.tokenizer, spec, compute=False)
    if vecs is not None or not ask:
        return vecs, spec
    run_key = f"{error_analysis._key(preds)}:{spec}"
    if st.session_state.get(state.MAP_RUN) == run_key:
        model, tok = error_analysis.load_eval_model(str(info.path), runtime.mtime(info.path))
        progress = StreamlitProgress(preds.n, "Sentence vectors")
        try:
            return embeddings.vectors_for(preds, model, tok, spec, progress=progress), spec
        finally:
            progress.close()
    st.info(f"These predictions have no {spec.label(embeddings.n_layers_of(model))} stored yet "
            "(they were cached before the map existed, or another vector is chosen). One "
            f"batched pass over the {preds.n:,} reviews computes them; they are then kept.")
    if runtime.button(st, "Compute the sentence vectors", type="primary", key="map_vectors_button"):
        st.session_state[state.MAP_RUN] = run_key
        st.rerun()
    return None, spec


# Every review's neighbours and the map's reading (READ_RATE: about a second a split) are
# computed in this thread, started as soon as the page shows a split whose vectors are
# stored (start_reading), so the Map tab's first open finds them done or under way.
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reviewbert-map-reading")


def _read(vecs, preds):
    with cpu_threads(threads_for_one_review(False)):    # the other half: sessions, browser
        nb = neighbours.split_neighbours(vecs, preds.y, preds.pred, preds.scheme.num_labels)
        return nb, map_reading.read_map(vecs, preds.y, preds.pred, preds.names, nb)


@st.cache_resource(max_entries=6, show_spinner=False)
def _reading_job(key: str, _vecs, _preds) -> tuple[Future, float]:
    """The reading of these vectors, shared by every session (read-only), as a future, and
    when it started (``time.perf_counter``)."""
    return _READER.submit(_read, _vecs, _preds), time.perf_counter()


def start_reading(preds, predictor) -> None:
    """Start the map's reading of the default vectors of ``preds`` in the background, if
    they are stored (the page calls this once it shows a split, whichever tab is open)."""
    model = predictor.model
    vecs = embeddings.vectors_for(preds, model, predictor.tokenizer, embeddings.DEFAULT,
                                  compute=False)
    if vecs is not None:
        name = embeddings.DEFAULT.name(embeddings.n_layers_of(model))
        _reading_job(f"{error_analysis._key(preds)}:{name}", vecs, preds)


def _reading(key: str, vecs, preds):
    job, t0 = _reading_job(key, vecs, preds)
    wait_timed(job, t0, "Finding every review's neighbours", max(1.0, preds.n / READ_RATE))
    return job.result()


def _projection(preds, vecs, name: str, method: str, dims: int):
    folder = preds.folder
    if method == "pca":
        return projection_mod.project(vecs, "pca", dims, folder=folder, vectors_name=name)
    cached = projection_mod.cached(vecs, "umap", dims, folder=folder, vectors_name=name)
    if cached is not None:
        return cached
    run = f"umap:{name}:{dims}:{preds.n}"
    guess = max(5.0, preds.n / UMAP_RATE)
    if st.session_state.get(state.MAP_RUN) != run:       # asked for in this session: go on
        st.info(f"UMAP of {preds.n:,} reviews takes about {guess:.0f} s on a 2-core CPU (plus "
                "~20 s the first time umap-learn compiles in a fresh install); it is cached.")
        if not runtime.button(st, f"Compute UMAP {dims}-D", type="primary", key="map_umap_button"):
            return None
        st.session_state[state.MAP_RUN] = run
    # in a worker: a click elsewhere stops this run, not the UMAP, and the next run waits
    # for the same job (then finds it in the cache)
    return in_background(f"{folder}:{run}", lambda: projection_mod.project(
        vecs, "umap", dims, folder=folder, vectors_name=name),
        f"UMAP {dims}-D of {preds.n:,} reviews", guess)


# ------------------------------------------------------------------ the Map tab
def map_tab(preds, info, predictor) -> None:
    st.subheader("The map of the split: where the reviews and the errors live")
    st.caption("Each point is one review, placed by the model's own sentence vector. Close "
               "points are reviews the model treats as alike. Drag a box or a lasso to list "
               "reviews; click one to open it.")
    issues = error_analysis._issues(error_analysis._key(preds), preds)[0]
    model = predictor.model
    with st.expander("Vectors", expanded=False):
        spec = _spec(model)
    vecs, spec = vectors(preds, info, predictor, spec)
    if vecs is None:
        return
    name = spec.name(embeddings.n_layers_of(model))
    c1, c2 = st.columns(2)
    method = c1.selectbox("Projection", list(METHODS), key=state.MAP_METHOD)
    options = [c for c in map_figures.COLOR_BY if issues is not None or "cleanlab" not in c]
    colour = c2.selectbox("Colour by", options, key=state.MAP_COLOR)
    # the reading goes above the scatter, filled once the scatter is sent: it waits for
    # every review's neighbours (_reading_job) if they are not found yet
    reading_box = st.container()
    proj = _projection(preds, vecs, name, *METHODS[method])
    if proj is None:
        _reading_here(reading_box, preds, vecs, name)
        return
    col = map_figures.colouring(colour, preds, None if issues is None else issues.flagged)
    title = f"{proj.title} of the {spec.label(embeddings.n_layers_of(model))}"
    if proj.explained:
        title += " (" + " + ".join(f"{e:.0%}" for e in proj.explained) + " of the variance)"
    if proj.method == "pca":
        st.markdown(map_reading.axis_reading(proj.coords, preds.y, preds.names))
    fig = map_figures.projector_figure(proj.coords, col, map_figures.hover_texts(preds), title)
    st.plotly_chart(fig, key=state.MAP_CHART, on_select="rerun",
                    selection_mode=("points", "box", "lasso"),
                    config={"displaylogo": False, "scrollZoom": True})
    st.caption(("Read from the cache; computed" if proj.cached else "Computed") +
               f" in {proj.seconds:.1f} s for {preds.n:,} reviews.")
    nb = _reading_here(reading_box, preds, vecs, name)
    rows = selected_rows(preds)
    if rows is None or not len(rows):
        st.caption("Select reviews with the box or lasso tool (2-D), or click a point.")
        return
    selection_view(preds, predictor, vecs, rows, nb)


def _reading_here(box, preds, vecs, name: str):
    """The map's reading, drawn in ``box`` (above the scatter); returns the neighbours."""
    nb, reading = _reading(f"{error_analysis._key(preds)}:{name}", vecs, preds)
    with box:
        _reading_view(reading, nb)
    return nb


def _reading_view(r, nb) -> None:
    st.markdown("**What the map shows.** " + r.text)
    c1, c2, c3 = st.columns(3)
    c1.metric("Neighbour agreement", f"{nb.mean_agreement:.1%}",
              help=f"Mean share of a review's {nb.k} nearest neighbours (cosine) whose true "
                   "rating is the rating the model predicts for it.")
    c2.metric(f"k-NN accuracy ({nb.k} neighbours)", f"{r.knn_accuracy:.1%}",
              help="Each review's rating guessed by its neighbours' majority, leave-one-out, "
                   f"against the classifier's {r.model_accuracy:.1%}.")
    c3.metric("Silhouette by true rating", "n/a" if r.silhouette is None else f"{r.silhouette:.2f}",
              help="scikit-learn, cosine, on up to 3,000 reviews: 1 = compact separate "
                   "clusters, 0 = overlapping.")


def selected_rows(preds) -> np.ndarray | None:
    """Rows of the split selected on the map (box, lasso or a click), kept for the Slices tab."""
    sel = st.session_state.get(state.MAP_CHART) or {}
    points = (sel.get("selection") or {}).get("points") or []
    rows = []
    for p in points:
        cd = p.get("customdata")
        cd = cd[0] if isinstance(cd, (list, tuple)) and cd else cd
        if cd is not None:
            rows.append(int(cd))
    rows = np.unique(np.asarray(rows, dtype=np.int64)) if rows else np.zeros(0, np.int64)
    rows = rows[(rows >= 0) & (rows < preds.n)]
    st.session_state[state.MAP_SELECTION] = (error_analysis._key(preds), rows.tolist())
    return rows


def selection_view(preds, predictor, vecs, rows, nb) -> None:
    """The selected reviews with their metrics, save as a slice, and one opened."""
    mask = np.zeros(preds.n, dtype=bool)
    mask[rows] = True
    stats = slices_mod.slice_stats(mask, preds.y, preds.pred, "selection")
    acc = stats.accuracy
    line = f"**{len(rows):,} reviews selected**"
    if acc is not None and stats.gap is not None:
        line += (f": accuracy {acc.value:.1%} [{acc.low:.1%}, {acc.high:.1%}] against "
                 f"{stats.rest_accuracy.value:.1%} for the rest (gap {stats.gap.value:+.1%}, "
                 f"95 % interval {stats.gap.low:+.1%} to {stats.gap.high:+.1%}); neighbour "
                 f"agreement {nb.agreement[rows].mean():.0%}.")
    st.markdown(line)
    _save_selection(preds, rows)
    table = review_table(preds, rows, nb)
    sig = hashlib.sha1(np.asarray(rows).tobytes()).hexdigest()[:10]
    event = st.dataframe(table, key=f"{state.MAP_TABLE}_{sig}", hide_index=True, height=300,
                         on_select="rerun", selection_mode="single-row",
                         column_order=("true", "predicted", "confidence", "distance",
                                       "agreement", "tokens", "text"),
                         column_config={"confidence": st.column_config.NumberColumn(format="%.2f"),
                                        "agreement": st.column_config.NumberColumn(
                                            "neighbours agree", format="percent"),
                                        "text": st.column_config.TextColumn(width="large")})
    picked = (event.selection.rows if event is not None else []) or []
    if len(rows) == 1 or picked:
        row = int(rows[0]) if len(rows) == 1 else int(table["row"].iloc[picked[0]])
        neighbours_view(preds, vecs, row)
        error_analysis.review(preds, predictor, row)


def review_table(preds, rows, nb=None) -> pd.DataFrame:
    names, f = preds.names, preds.frame
    text = f["text"].to_numpy()[rows]
    out = pd.DataFrame({
        "row": rows, "true": [names[i] for i in preds.y[rows]],
        "predicted": [names[i] for i in preds.pred[rows]],
        "confidence": preds.confidence[rows], "distance": np.abs(preds.y - preds.pred)[rows],
        "tokens": preds.n_tokens[rows],
        "text": [t if len(t) <= PREVIEW else t[:PREVIEW] + "…" for t in text]})
    if nb is not None:
        out.insert(5, "agreement", nb.agreement[rows])
    return out


def _save_selection(preds, rows) -> None:
    flash = st.session_state.pop(state.MAP_FLASH, None)
    if flash:
        getattr(st, flash[0])(flash[1])
    with st.form("map_save_form", clear_on_submit=True, border=False):
        c1, c2 = st.columns([3, 1])
        name = c1.text_input("Save this selection as a slice", key=state.MAP_SLICE_NAME,
                             placeholder="e.g. short 3-star cluster", max_chars=200)
        if runtime.form_submit(c2, "Save slice", key="map_save_btn"):
            _save(preds, name, slices_mod.SliceSpec(rows=tuple(int(r) for r in rows)),
                  state.MAP_FLASH)
            st.rerun()


def _save(preds, name, spec, flash_key) -> None:
    try:
        if preds.folder is None:
            raise slices_mod.SliceError("these predictions are not cached, so there is nowhere "
                                        "to keep a slice")
        stored = slices_mod.save_slice(preds.folder, name, spec)
        st.session_state[flash_key] = ("success", f"Saved the slice “{md_escape(stored)}”: "
                                       "it is on the Slices and Compare tabs.")
    except (slices_mod.SliceError, OSError) as e:
        st.session_state[flash_key] = ("warning", f"Not saved: {md_escape(str(e))}")


# ------------------------------------------------------------------ neighbours
def neighbours_view(preds, vecs, row: int) -> None:
    idx, sim = neighbours.nearest(vecs, rows=[row])
    nearest_reviews.show(preds, idx[0], sim[0], "**Its nearest reviews in the model's vector "
                         "space** (cosine). ", int(preds.pred[row]))


# ------------------------------------------------------------------ the Drivers tab
def drivers_tab(preds, predictor) -> None:
    st.subheader("What drives each rating, over the split")
    st.caption("For each predicted rating (or confusion cell): the words with the highest mean "
               "attribution by **Integrated Gradients** and **attention × value norm**, the two "
               "most faithful methods on the Faithfulness page, beside **raw attention** (last "
               "layer). A word's score is its mean over the reviews that contain it; counts "
               "on hover and in the CSV.")
    d = _drivers_if_ready(preds, predictor)
    if d is None:
        return
    if d.seconds_per_1000:
        st.caption(f"{len(d.rows):,} reviews explained; {d.seconds_per_1000 / 60:.1f} min per "
                   f"1,000 reviews on this CPU. IG's convergence delta stayed above 5 % on "
                   f"{d.over_delta} of them.")
    c1, c2, c3 = st.columns([1.4, 1, 1])
    by = c1.radio("Group by", ["predicted", "cell"], key=state.DRV_BY, horizontal=True,
                  format_func={"predicted": "predicted rating",
                               "cell": "(true, predicted) cell"}.get)
    min_count = int(c2.number_input("Min. reviews per word", 1, 1000, 5, key=state.DRV_MIN))
    hide = c3.checkbox("Hide stop-words and punctuation", value=True, key=state.DRV_HIDE)
    gid, names = drivers.groups(d, preds, by)
    counts = drivers.reviews_per_group(d, gid, len(names))
    if by == "predicted":
        for m in drivers.METHODS:
            tops = drivers.top_drivers(d, gid, len(names), m, min_count=min_count, hide_stopwords=hide)
            labels = [f"{n} ({c})" for n, c in zip(names, counts)]
            st.plotly_chart(map_figures.drivers_figure(tops, labels, drivers.LABELS[m],
                                                       drivers.UNITS[m]), key=f"drv_fig_{m}")
    else:
        _cell_view(d, preds, gid, names, counts, min_count, hide)
    csv = pd.concat([drivers.export_frame(d, preds, by=b, min_count=min_count, hide_stopwords=hide)
                     for b in ("predicted", "cell")], ignore_index=True)
    st.download_button("Drivers CSV (every group, every method, top 20)",
                       csv.to_csv(index=False), "drivers.csv", "text/csv", key="drv_csv",
                       on_click="ignore")


def _cell_view(d, preds, gid, names, counts, min_count, hide) -> None:
    cells = [g for g in range(len(names)) if counts[g]]
    k = preds.scheme.num_labels
    off = [g for g in cells if g // k != g % k]
    default = max(off, key=lambda g: counts[g]) if off else (cells[0] if cells else 0)
    cell = st.selectbox("Cell", cells, index=cells.index(default) if cells else 0,
                        key=state.DRV_CELL, format_func=lambda g: f"{names[g]} ({counts[g]} reviews)")
    tops = {i: drivers.top_drivers(d, gid, len(names), m, min_count=min_count,
                                   hide_stopwords=hide)[cell]
            for i, m in enumerate(drivers.METHODS)}
    st.plotly_chart(map_figures.drivers_figure(
        tops, [drivers.LABELS[m] for m in drivers.METHODS], names[cell], "mean score"),
        key="drv_fig_cell")


def _drivers_if_ready(preds, predictor):
    cached = drivers.cached_drivers(preds)
    options = [100, 300, 1000, preds.n]
    options = sorted({min(o, preds.n) for o in options})
    c1, c2 = st.columns([1, 2])
    sample = c1.selectbox("Reviews to explain", options, index=min(1, len(options) - 1),
                          key=state.DRV_SAMPLE,
                          format_func=lambda n: f"all {n:,}" if n == preds.n else f"{n:,} (a sample)")
    run_key = f"{error_analysis._key(preds)}:{sample}"
    have = 0 if cached is None else int(np.isin(drivers.sample_rows(preds.n, sample), cached.rows).sum())
    rate = DRIVER_RATE if cached is None or not cached.seconds else len(cached.rows) / cached.seconds
    if have < sample and st.session_state.get(state.DRV_RUN) == run_key:
        progress = StreamlitProgress(sample, "Integrated Gradients drivers")
        try:
            return drivers.compute_drivers(preds, predictor, sample=sample, progress=progress)
        finally:
            progress.close()
    if have < sample:
        left = (sample - have) / rate
        c2.info(f"{have:,} of these {sample:,} reviews are explained. The rest take about "
                f"{error_analysis._seconds(left)} on this CPU (Integrated Gradients, batched; "
                "saved as it goes, so stopping loses little).")
        if runtime.button(c2, f"Explain {sample - have:,} reviews", type="primary", key="drv_button"):
            st.session_state[state.DRV_RUN] = run_key
            st.rerun()
        if cached is None:
            return None
    return drivers.compute_drivers(preds, predictor, sample=sample) if have >= sample else cached


# ------------------------------------------------------------------ the Slices tab
@st.cache_data(max_entries=6, show_spinner="Measuring every single-attribute slice…")
def _single_table(key: str, _preds, _flagged):
    return slices_mod.slice_table(_preds, _flagged)


def slices_tab(preds) -> None:
    st.subheader("Slices: which groups of reviews the model fails on")
    issues = error_analysis._issues(error_analysis._key(preds), preds)[0]
    flagged = None if issues is None else issues.flagged
    table = _single_table(error_analysis._key(preds), preds, flagged)
    st.caption("Every single-attribute slice (source file, length, cleanlab's flag, and the "
               "split's most common content words), sorted by how far its accuracy falls below "
               "the rest. Intervals: 95 % bootstrap; with this many slices, a few will look "
               "worse by chance.")
    if not table.empty:
        st.plotly_chart(map_figures.slices_figure(table), key="slc_forest")
        for line in slices_mod.worst_reading(table):
            st.markdown("- " + md_escape(line))
        st.dataframe(table, hide_index=True, height=300, column_config={
            c: st.column_config.NumberColumn(format="percent")
            for c in ("accuracy", "low", "high", "rest_accuracy", "gap", "gap_low", "gap_high",
                      "relaxed", "relaxed_gap", "expected")} | {
            "expected": st.column_config.NumberColumn(
                "expected from its ratings", format="percent",
                help="The slice's accuracy if each review were as easy as the rest's reviews of "
                     "the same true rating: only the gap below this is the slice's own.")})
    st.subheader("Build a slice")
    spec = _builder(preds, flagged)
    if spec.is_empty():
        st.caption("Choose at least one condition.")
    else:
        slice_view(preds, spec, flagged)
    _saved_view(preds, flagged)


def _builder(preds, flagged) -> slices_mod.SliceSpec:
    names = list(preds.names)
    c1, c2, c3 = st.columns(3)
    sources = c1.multiselect("Source file", sorted(set(preds.frame["source"].astype(str))),
                             key=state.SLC_SOURCES, placeholder="any")
    present = set(slices_mod.length_buckets(preds.n_tokens, preds.meta.get("max_length")))
    lengths = c2.multiselect("Length", [b for b in slices_mod.length_labels(
        preds.meta.get("max_length")) if b in present], key=state.SLC_LENGTHS, placeholder="any")
    issue = c3.radio("cleanlab", ["any", "flagged", "not flagged"], key=state.SLC_ISSUE,
                     horizontal=True, disabled=flagged is None)
    c4, c5, c6 = st.columns(3)
    true = c4.multiselect("True rating", names, key=state.SLC_TRUE, placeholder="any")
    pred = c5.multiselect("Predicted rating", names, key=state.SLC_PRED, placeholder="any")
    sel = st.session_state.get(state.MAP_SELECTION)
    rows = sel[1] if sel and sel[0] == error_analysis._key(preds) else []
    use_sel = c6.checkbox(f"Only the map's selection ({len(rows):,})", key=state.SLC_USE_SELECTION,
                          disabled=not rows)
    contains = st.text_input("Contains the word or phrase", key=state.SLC_CONTAINS, max_chars=400,
                             placeholder="e.g. battery, or: stopped working")
    phrase = ""
    if contains.strip():
        try:
            phrase = slices_mod.check_phrase(contains)
        except slices_mod.SliceError as e:
            st.warning(md_escape(str(e)))
    return slices_mod.SliceSpec(
        sources=tuple(sources), lengths=tuple(lengths),
        label_issue=None if issue == "any" or flagged is None else issue == "flagged",
        contains=phrase, rows=tuple(rows) if use_sel else (),
        true=tuple(names.index(n) for n in true), predicted=tuple(names.index(n) for n in pred))


def cohort_table(preds, spec):
    """The properties a cohort slice (found on the Cohorts page) is read on; None for the
    other slices, which need none."""
    return cohorts.properties_table(preds) if spec.where else None


def slice_view(preds, spec, flagged, *, save: bool = True) -> None:
    """One slice against the rest: the four metrics with intervals, its reviews, save it."""
    mask = slices_mod.mask_of(spec, preds, flagged, cohort_table(preds, spec))
    n = int(mask.sum())
    st.markdown(f"**{md_escape(spec.describe(preds.names))}**: {n:,} of {preds.n:,} reviews.")
    if n < 2 or preds.n - n < 2:
        st.info("A slice needs at least 2 reviews, and so does the rest, for intervals.")
    else:
        st.dataframe(_metrics_vs_rest(preds, mask), hide_index=True, width="content")
    if save:
        flash = st.session_state.pop("slc_flash", None)
        if flash:
            getattr(st, flash[0])(flash[1])
        with st.form("slc_save_form", clear_on_submit=True, border=False):
            c1, c2 = st.columns([3, 1])
            name = c1.text_input("Name", key=state.SLC_NAME, max_chars=200,
                                 placeholder="e.g. long earphone reviews")
            if runtime.form_submit(c2, "Save slice", key="slc_save_btn"):
                _save(preds, name, spec, "slc_flash")
                st.rerun()
    if n:
        rows = np.flatnonzero(mask)
        sig = hashlib.sha1(repr(spec).encode()).hexdigest()[:10]
        st.dataframe(review_table(preds, rows), key=f"{state.SLC_TABLE}_{sig}", hide_index=True,
                     height=260, column_order=("true", "predicted", "confidence", "distance",
                                               "tokens", "text"),
                     column_config={"confidence": st.column_config.NumberColumn(format="%.2f"),
                                    "text": st.column_config.TextColumn(width="large")})


def _metrics_vs_rest(preds, mask) -> pd.DataFrame:
    k = preds.scheme.num_labels
    a = metric_intervals(preds.y[mask], preds.probs[mask], k, auc_resamples=100)
    b = metric_intervals(preds.y[~mask], preds.probs[~mask], k, auc_resamples=100)
    st_ = slices_mod.slice_stats(mask, preds.y, preds.pred)

    def cell(m, iv):
        return "n/a" if iv is None else (f"{fmt_metric(m, iv.value)} [{fmt_metric(m, iv.low)} – "
                                         f"{fmt_metric(m, iv.high)}]")
    rows = [{"metric": name, "slice": cell(m, a.get(m)), "rest": cell(m, b.get(m))}
            for m, name in METRIC_NAMES.items()]
    for label, gap in (("accuracy gap (slice − rest)", st_.gap),
                       ("relaxed accuracy gap", st_.relaxed_gap)):
        rows.append({"metric": label, "slice": "n/a" if gap is None else
                     f"{gap.value:+.1%} [{gap.low:+.1%} – {gap.high:+.1%}]", "rest": ""})
    return pd.DataFrame(rows)


def _saved_view(preds, flagged) -> None:
    saved = slices_mod.load_saved(preds.folder)
    if not saved:
        return
    st.subheader("Saved slices")
    name = st.selectbox("Slice", list(saved), key=state.SLC_SAVED)
    try:
        slice_view(preds, saved[name], flagged, save=False)
    except slices_mod.SliceError as e:
        st.warning(md_escape(str(e)))
    if runtime.button(st, "Delete this slice", key="slc_delete"):
        slices_mod.delete_slice(preds.folder, name)
        st.rerun()
