"""The Error analysis page's components: choose reviews, evaluate them once, then the
overview, the misclassification browser, label issues, per-rating attention, the
comparison with another checkpoint and the exports.

They only draw. Predictions come from ``reviewbert.analysis`` (computed through
``reviewbert.model.batch_predict`` and cached beside the checkpoint), figures from
``reviewbert.analysis.figures`` and ``reviewbert.viz.figures``, and a browsed review is
drawn with the Predict page's own components (``ui/prediction_card.py``).
"""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from reviewbert.analysis import breakdown, lookup, predict_split, word_attention
from reviewbert.analysis import figures as analysis_figures
from reviewbert.analysis.calibration import reliability
from reviewbert.analysis.compare import compare
from reviewbert.analysis.html_report import CLEAN_CAVEAT, METRIC_NAMES, ReportInputs, build_report, fmt_metric
from reviewbert.analysis.intervals import metric_intervals
from reviewbert.analysis.label_issues import find_issues
from reviewbert.analysis.predictions import export_frame, planned_reviews
from reviewbert.analysis.sources import describe
from reviewbert.model import attention
from reviewbert.model.checkpoint import list_checkpoints, load_checkpoint
from reviewbert.model.device import resolve_precision
from reviewbert.training.catalog import checkpoints_root
from reviewbert.ui import explanations, review_picker, runtime, slice_filter, state, whatif
from reviewbert.ui import prediction_card as prediction
from reviewbert.ui.png_download import png_download
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.ui.progress_bar import seconds_text as _seconds
from reviewbert.ui.review_picker import Choice, PickerKeys
from reviewbert.viz import figures
from reviewbert.viz.markdown import md_code

TABS = ("Overview", "Errors", "Label issues", "Per-rating attention", "Map", "Drivers", "Slices",
        "Brittleness", "Compare", "Export")
SORTS = {"star distance": "largest star distance first",
         "confidence when wrong": "most confident mistakes first",
         "longest": "longest first", "shortest": "shortest first",
         "split order": "as in the split"}
TEXT_PREVIEW = 160
EXPECTED_RATE = 150   # reviews/s the bar assumes before the first evaluation's own rate


KEYS = PickerKeys(state.ERR_SOURCE, state.ERR_FILE, state.ERR_UPLOAD, state.ERR_UPLOADED,
                  state.ERR_UPLOAD_ERROR)


def pick_data(info, predictor) -> Choice | None:
    """Which reviews: the checkpoint's own test split, a data file, or an upload."""
    return review_picker.pick_data(info, predictor, KEYS)


# ------------------------------------------------------------------ loading
@st.cache_resource(max_entries=2, show_spinner="Loading the checkpoint for bulk evaluation…")
def load_eval_model(path: str, stamp: float):
    """The checkpoint with PyTorch's fused (sdpa) attention, for whole-split passes; the
    Predictor's eager model (needed for attention weights) is for the attention pass."""
    model, tok, _ = load_checkpoint(path)
    runtime.freeze_long_lived()
    return model, tok


# ------------------------------------------------------------------ evaluation
def _evaluate(info, choice: Choice, what: str):
    model, tok = load_eval_model(str(info.path), runtime.mtime(info.path))
    precision = resolve_precision("auto", model.device)
    progress = StreamlitProgress(planned_reviews(len(choice.reviews), precision), what)
    try:
        return predict_split(model, tok, info.path, choice.reviews, info.scheme,
                             max_length=_max_length(info), precision=precision,
                             progress=progress, source=choice.source)
    finally:
        progress.close()


def _max_length(info) -> int:
    return runtime.load_predictor(str(info.path), runtime.mtime(info.path)).max_length


def evaluation(info, choice: Choice):
    """The predictions for the chosen reviews: from the cache, or computed on request."""
    preds = lookup(info.path, choice.reviews, info.scheme, _max_length(info))
    kept = st.session_state.get(state.ERR_RESULT)
    if preds is None and kept and kept[0] == choice.key:
        preds = kept[1]                     # computed, but there was nowhere to cache it
    if preds is None and st.session_state.get(state.ERR_RUN) == choice.key:
        preds = _evaluate(info, choice, f"Evaluating {info.name}")
        if preds.folder is None:
            st.session_state[state.ERR_RESULT] = (choice.key, preds)
    if preds is None:
        n = len(choice.reviews)
        st.info(f"**{n:,} reviews** ({describe(choice.source)}) have not been evaluated by this "
                f"checkpoint yet. One batched pass takes about {_seconds(n / EXPECTED_RATE)} on "
                "a 2-core CPU; the predictions are then saved beside the checkpoint, so the next "
                "visit (and `python -m reviewbert evaluate`) reads them instead.")
        if runtime.button(st, f"Evaluate {n:,} reviews", type="primary", key="err_evaluate"):
            st.session_state[state.ERR_RUN] = choice.key
            st.rerun()
        return None
    check = preds.meta.get("fp32_check")
    line = (f"{preds.n:,} reviews · {describe(choice.source)} · forward pass in "
            f"{preds.meta.get('precision')}")
    if check:
        line += (f" (bf16 and fp32 agree on {check['agree']} of {check['n']} re-scored "
                 f"reviews, {check['agree'] / check['n']:.1%})")
    if preds.folder is not None:
        line += f" · cached in `{preds.folder}`"
    st.caption(line)
    return preds


def evaluated(info, predictor):
    """(choice, predictions) of the reviews picked on this page, or None while there are
    none yet (the picker or the Evaluate button said why): the first lines of every page
    that reads a whole split's predictions."""
    choice = pick_data(info, predictor)
    if choice is None:
        return None
    preds = evaluation(info, choice)
    return None if preds is None else (choice, preds)


# ------------------------------------------------------------------ derived (cached)
def _key(preds) -> str:
    return f"{preds.meta.get('key')}:{preds.meta.get('checkpoint', {}).get('sha256')}:{preds.n}"


@st.cache_data(max_entries=8, show_spinner="Bootstrapping the intervals…")
def _intervals(key: str, _preds):
    return metric_intervals(_preds.y, _preds.probs, _preds.scheme.num_labels)


@st.cache_data(max_entries=8, show_spinner="Running cleanlab…")
def _issues(key: str, _preds):
    try:
        return find_issues(_preds), ""
    except ValueError as e:
        return None, str(e)


def _metrics_frame(m: dict, iv: dict | None = None) -> pd.DataFrame:
    rows = []
    for k, name in METRIC_NAMES.items():
        if m.get(k) is None:
            continue
        i = (iv or {}).get(k)
        rows.append({"metric": name, "value": fmt_metric(k, m[k]),
                     "95% interval": "n/a" if i is None
                     else f"{fmt_metric(k, i.low)} – {fmt_metric(k, i.high)}"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ overview
def overview(preds) -> None:
    """Metrics with intervals, per class, ROC, calibration, length."""
    names = preds.names
    st.subheader("Metrics, with 95 % bootstrap intervals")
    st.dataframe(_metrics_frame(preds.metrics(), _intervals(_key(preds), preds)),
                 hide_index=True, width="content")
    st.caption("Percentile bootstrap over reviews (1,000 resamples; 300 for AUC). Two "
               "checkpoints whose intervals overlap widely are not shown to differ.")
    st.subheader("Per class")
    st.dataframe(breakdown.per_class(preds.y, preds.pred, names), hide_index=True, width="content",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("precision", "recall", "f1")})
    figs = {"roc": analysis_figures.roc_figure(breakdown.roc_curves(preds.y, preds.probs, names)),
            "calibration": analysis_figures.reliability_figure(reliability(preds.y, preds.probs))}
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(figs["roc"], key="err_roc")
    with c2:
        st.plotly_chart(figs["calibration"], key="err_calibration")
    st.subheader("Accuracy by review length")
    figs["length"] = analysis_figures.length_figure(breakdown.length_bins(preds.n_tokens, preds.correct,
                                                    preds.meta.get("max_length")))
    st.plotly_chart(figs["length"], key="err_length")
    st.markdown("**What the seed's filter changes.** The seed dropped reviews under 100 tokens "
                "before training and testing:")
    sf = breakdown.seed_filter(preds.y, preds.probs, preds.n_tokens, names)
    st.dataframe(sf, hide_index=True, column_config={
        "share": st.column_config.NumberColumn(format="percent"),
        "accuracy": st.column_config.NumberColumn(format="percent"),
        "relaxed_accuracy": st.column_config.NumberColumn("relaxed accuracy", format="percent"),
        "auc": st.column_config.NumberColumn(format="%.3f"),
        "loss": st.column_config.NumberColumn(format="%.3f")})


# ------------------------------------------------------------------ errors: confusion + browser
def _cell_clicked():
    sel = st.session_state.get(state.ERR_CONFUSION)
    points = (sel or {}).get("selection", {}).get("points") or []
    names = st.session_state.get(state.ERR_NAMES) or []
    if not points or not names:
        return
    true, pred = int(points[0]["y"]), int(points[0]["x"])
    st.session_state[state.ERR_TRUE] = [names[true]]
    st.session_state[state.ERR_PRED] = [names[pred]]
    st.session_state[state.ERR_ONLY_WRONG] = true != pred


def confusion(preds):
    names = preds.names
    st.session_state[state.ERR_NAMES] = names
    fig = analysis_figures.confusion_figure(breakdown.confusion(preds.y, preds.pred, len(names)), names,
                              title="Confusion matrix: count and share of the true class")
    st.plotly_chart(fig, key=state.ERR_CONFUSION, on_select=_cell_clicked, selection_mode="points",
                    config={"displayModeBar": False}, width="content")
    st.caption("Colour: share of the true class's reviews (row-normalised); each cell also "
               "shows the count. Click a cell to list those reviews below.")
    return fig


def filtered(preds, true: list[str], pred: list[str], only_wrong: bool, sort: str,
             search: str) -> pd.DataFrame:
    """The browser's table: rows of the split matching the filters, in the chosen order."""
    names = preds.names
    f = preds.frame
    mask = np.ones(preds.n, dtype=bool)
    if true:
        mask &= np.isin(preds.y, [names.index(n) for n in true])
    if pred:
        mask &= np.isin(preds.pred, [names.index(n) for n in pred])
    if only_wrong:
        mask &= ~preds.correct
    if search.strip():
        mask &= f["text"].str.contains(search.strip(), case=False, regex=False).to_numpy()
    rows = np.flatnonzero(mask)
    dist = np.abs(preds.y - preds.pred)[rows]
    conf = preds.confidence[rows]
    toks = preds.n_tokens[rows]
    order = {"star distance": np.lexsort((-conf, -dist)),
             "confidence when wrong": np.lexsort((-dist, -conf)),
             "longest": np.argsort(-toks, kind="stable"),
             "shortest": np.argsort(toks, kind="stable")}.get(sort, np.arange(len(rows)))
    rows = rows[order]
    text = f["text"].to_numpy()[rows]
    return pd.DataFrame({
        "row": rows, "true": [names[i] for i in preds.y[rows]],
        "predicted": [names[i] for i in preds.pred[rows]],
        "confidence": preds.confidence[rows], "distance": np.abs(preds.y - preds.pred)[rows],
        "tokens": preds.n_tokens[rows],
        "text": [t if len(t) <= TEXT_PREVIEW else t[:TEXT_PREVIEW] + "…" for t in text]})


def browser(preds, predictor):
    names = preds.names
    st.subheader("Misclassified reviews")
    c1, c2, c3, c4 = st.columns([1.2, 1.2, 1, 1.2])
    true = c1.multiselect("True rating", names, key=state.ERR_TRUE, placeholder="any")
    pred = c2.multiselect("Predicted rating", names, key=state.ERR_PRED, placeholder="any")
    sort = c4.selectbox("Sort by", list(SORTS), key=state.ERR_SORT, format_func=SORTS.get)
    st.session_state.setdefault(state.ERR_ONLY_WRONG, True)   # not value=: a cell click sets it
    only_wrong = c3.checkbox("Only misclassified", key=state.ERR_ONLY_WRONG)
    search = st.text_input("Search the text", key=state.ERR_SEARCH, placeholder="e.g. battery")
    table = filtered(preds, true, pred, only_wrong, sort, search)
    found = f" contain {md_code(search.strip())}" if search.strip() else ""
    st.caption(f"{len(table):,} of {preds.n:,} reviews{found}." + (
        " Select a row to see its prediction and every attention view of the Predict page."
        if len(table) else ""))
    if table.empty:
        if search.strip():
            st.info(f"No review contains {md_code(search.strip())} under these filters (the "
                    "search ignores case).")
        return
    # a new key per filter: a row selected under other filters must not pick another review
    sig = hashlib.sha1(repr((true, pred, only_wrong, sort, search)).encode()).hexdigest()[:10]
    event = st.dataframe(table, key=f"{state.ERR_TABLE}_{sig}", hide_index=True, height=320,
                         on_select="rerun", selection_mode="single-row",
                         column_order=("true", "predicted", "confidence", "distance", "tokens",
                                       "text"),
                         column_config={"confidence": st.column_config.NumberColumn(format="%.2f"),
                                        "text": st.column_config.TextColumn(width="large")})
    picked = (event.selection.rows if event is not None else []) or []
    if not picked:
        return
    review(preds, predictor, int(table["row"].iloc[picked[0]]))


def review(preds, predictor, row: int):
    """One review of the split with the Predict page's card and attention views."""
    f = preds.frame.iloc[row]
    text, stars = str(f["text"]), int(f["stars"])
    pred = predictor.predict(text)          # exact fp32, with attentions, like the main page
    st.divider()
    if prediction.unreadable(pred):
        return
    prediction.prediction_card(pred, stars, f"{describe((preds.meta.get('data') or {}).get('source') or {})}"
                                   f", row {row}")
    if runtime.button(st, "Open this review on the Predict page", key="err_send"):
        state.send_review(text, stars, "error analysis")
        st.switch_page(state.PREDICT_PAGE)
    st.header("What BERT attends to")
    controls = prediction.attention_controls(pred)
    prediction.attention_views(pred, controls, key=state.ERR_ATTENTION_VIEW,
                               hv_key=state.ERR_HV_WINDOW)
    explanations.which_words_mattered(predictor, pred, key_prefix=state.ERR_WW_PREFIX, controls=controls)
    whatif.what_if(predictor, pred, key_prefix=state.ERR_WHATIF_PREFIX)


# ------------------------------------------------------------------ label issues
def label_issues(preds) -> None:
    st.subheader("Label issues (cleanlab)")
    st.caption("cleanlab's `find_label_issues` ranks the reviews whose given rating is probably "
               "wrong, from the model's held-out probabilities on reviews it never trained on; "
               "the label-quality score is low when the given rating is doubtful. Amazon "
               "ratings are noisy: this tells \"the model is wrong\" from \"the rating is wrong\".")
    issues, why = _issues(_key(preds), preds)
    if issues is None:
        st.warning(f"cleanlab cannot run on these reviews: {why}")
        return
    st.markdown(f"cleanlab flags **{issues.count:,} of {issues.n:,} reviews** "
                f"({issues.count / max(issues.n, 1):.1%}).")
    m_all, m_clean = issues.metrics_all, issues.metrics_clean
    side = pd.DataFrame({"metric": ["reviews", *METRIC_NAMES.values()],
                         "all reviews": [m_all["n"], *(fmt_metric(k, m_all.get(k)) for k in METRIC_NAMES)],
                         "without the flagged ones": [m_clean["n"], *(fmt_metric(k, m_clean.get(k))
                                                                      for k in METRIC_NAMES)]})
    st.dataframe(side.astype(str), hide_index=True, width="content")
    st.caption(CLEAN_CAVEAT)
    table = issues.table(preds)
    event = st.dataframe(table.drop(columns=["row"]), key=state.ERR_ISSUES_TABLE, hide_index=True,
                         height=360, on_select="rerun", selection_mode="single-row",
                         column_config={"text": st.column_config.TextColumn(width="large")})
    picked = (event.selection.rows if event is not None else []) or []
    if picked:
        r = table.iloc[picked[0]]
        st.markdown(f"**Given {r['given rating']}, predicted {r['predicted']}** "
                    f"(label quality {r['label quality']:.3f})")
        st.text(r["text"])
        if runtime.button(st, "Open this review on the Predict page", key="err_issue_send"):
            state.send_review(r["text"], int(preds.frame["stars"].iloc[int(r["row"])]), "label issue")
            st.switch_page(state.PREDICT_PAGE)


# ------------------------------------------------------------------ per-rating attention
def rating_attention(preds, predictor) -> None:
    """The per-rating word charts and one example heatmap per rating."""
    st.subheader("What BERT attends to, per rating, over the whole split")
    st.caption("For each rating: the words with the highest mean [CLS] attention (mean of "
               "heads) in one layer. A word's attention in a review sums its WordPieces; its "
               "score is the mean over the reviews that contain it.")
    att = _word_attention_if_ready(preds, predictor)
    if att is None:
        return
    layers = len(word_attention.layer_columns_of(att))
    c1, c2, c3, c4 = st.columns(4)
    layer = c1.selectbox("Layer", list(range(layers)), index=max(0, layers - 2),
                         format_func=lambda i: f"layer {i + 1}", key=state.ERR_ATT_LAYER,
                         help="The seed found the second-to-last layer the most telling.")
    by = c2.radio("Group by", ["true rating", "predicted rating"], key=state.ERR_ATT_BY)
    min_count = c3.number_input("Min. reviews per word", 1, 1000, 5, key=state.ERR_ATT_MIN)
    hide = c4.checkbox("Hide stop-words and punctuation", value=True, key=state.ERR_ATT_HIDE)
    classes = preds.y if by == "true rating" else preds.pred
    tops = word_attention.top_words(att, classes, layer, preds.scheme.num_labels, min_count=int(min_count),
                       hide_stopwords=hide)
    st.plotly_chart(analysis_figures.rating_words_figure(tops, preds.names, layer, by),
                    key="err_rating_words")
    st.subheader("One example per rating")
    st.caption("The most confident correct prediction of each rating, drawn like the seed's "
               "figures: [CLS] → word attention in the last layers (exact fp32 pass).")
    for c, row in word_attention.example_rows(preds).items():
        if row is None:
            st.caption(f"{preds.names[c]}: no correct prediction to show.")
            continue
        pred = predictor.predict(str(preds.frame["text"].iloc[row]))
        view = attention.cls_view(pred, level="word", include_special=False)
        title = f"{preds.names[c]}: predicted {pred.label} ({pred.probs[pred.label_id]:.0%})"
        prediction.token_chart(figures.cls_heatmap(view, title=title, wrap=prediction.HEATMAP_WRAP),
                               f"err_example_{c}")


def _word_attention_if_ready(preds, predictor):
    att = _cached_attention(preds)
    if att is not None:
        return att
    if st.session_state.get(state.ERR_ATT_RUN) == _key(preds):
        progress = StreamlitProgress(preds.n, "Per-rating attention")
        try:
            return word_attention.word_attention(preds, predictor.model, predictor.tokenizer,
                                    progress=progress)
        finally:
            progress.close()
    st.info(f"This needs one more batched pass over the {preds.n:,} reviews, with attention "
            "weights (about twice as long as the evaluation); it is cached with the predictions.")
    if runtime.button(st, "Compute per-rating attention", type="primary", key="err_att_button"):
        st.session_state[state.ERR_ATT_RUN] = _key(preds)
        st.rerun()
    return None


# ------------------------------------------------------------------ brittleness
def brittleness(info, predictor, choice: Choice) -> None:
    """The Brittleness tab over the chosen reviews (``ui/whatif.py``)."""
    from reviewbert.ui.faithfulness import weights_hash
    # "test split", as the CLI and the Faithfulness page name it: the same cache entries
    source = "test split" if choice.source.get("kind") == "test split" else describe(choice.source)
    whatif.brittleness_tab(predictor, info, choice.reviews, source,
                           weights_hash(str(info.path), runtime.mtime(info.path)),
                           key_prefix=state.ERR_BRITTLE_PREFIX)


# ------------------------------------------------------------------ compare
def other_predictions(preds, info, choice: Choice, pick_key: str = state.ERR_COMPARE,
                      run_state: str = state.ERR_COMPARE_RUN, label: str = "Other checkpoint"):
    """(the other checkpoint, its predictions on the same reviews), or None while the user
    has not picked one or asked for its evaluation."""
    others = [i for i in list_checkpoints(checkpoints_root())
              if i.path != info.path and i.scheme == info.scheme]
    if not others:
        st.info("No other checkpoint with the same labels to compare with.")
        return None
    # a run's best/ before its last/ (newest first otherwise): the first offered is the one
    # a user means by "the retrained checkpoint"
    others.sort(key=lambda i: i.path.name == "last")
    by_path = {str(i.path): i for i in others}
    choice_b = st.selectbox(label, list(by_path), key=pick_key,
                            format_func=lambda p: by_path[p].name)
    other = by_path[choice_b]
    preds_b = lookup(other.path, choice.reviews, other.scheme, _max_length(info))
    if preds_b is None:
        run_key = f"{choice.key}|{other.path}"
        if st.session_state.get(run_state) == run_key:
            return other, _evaluate(other, choice, f"Evaluating {other.name}")
        if runtime.button(st, f"Evaluate {other.name} on these {preds.n:,} reviews",
                          key=pick_key + "_button"):
            st.session_state[run_state] = run_key
            st.rerun()
        return None
    return other, preds_b


def compare_section(preds, info, choice: Choice) -> None:
    st.subheader("Compare with another checkpoint on the same reviews")
    picked = other_predictions(preds, info, choice)
    if picked is None:
        return
    other, preds_b = picked
    issues = _issues(_key(preds), preds)[0]
    rows = slice_filter.pick(preds, None if issues is None else issues.flagged)
    if rows is not None:
        preds, preds_b = slice_filter.subset(preds, rows), slice_filter.subset(preds_b, rows)
    cmp = compare(preds, preds_b)
    st.dataframe(pd.DataFrame({
        "metric": ["reviews", *METRIC_NAMES.values()],
        info.name: [cmp.metrics_a["n"], *(fmt_metric(k, cmp.metrics_a.get(k)) for k in METRIC_NAMES)],
        other.name: [cmp.metrics_b["n"], *(fmt_metric(k, cmp.metrics_b.get(k)) for k in METRIC_NAMES)],
    }).astype(str), hide_index=True, width="content")
    t = cmp.test
    verdict = ("a real difference at the 5 % level" if t.p_exact < 0.05
               else "no evidence of a difference at the 5 % level")
    st.markdown(f"**McNemar's test:** {t.b:,} reviews only **{info.name}** gets right, {t.c:,} only "
                f"**{other.name}** gets right; exact p = {t.p_exact:.3g}"
                + (f" (chi-square {t.chi2:.2f}, p = {t.p_chi2:.3g})" if t.chi2 is not None else "")
                + f": {verdict}.")
    st.caption("Exact binomial test on the reviews the two disagree about (scipy; statsmodels' "
               "mcnemar is not installed).")
    for title, rows in ((f"Right by {info.name}, wrong by {other.name}", cmp.only_a),
                        (f"Right by {other.name}, wrong by {info.name}", cmp.only_b)):
        with st.expander(f"{title} ({len(rows):,})"):
            f = preds.frame.iloc[rows]
            st.dataframe(pd.DataFrame({
                "true": [preds.names[i] for i in f["label"]],
                info.name: [preds.names[i] for i in preds.pred[rows]],
                other.name: [preds.names[i] for i in preds_b.pred[rows]],
                "text": f["text"].to_numpy()}), hide_index=True)


# ------------------------------------------------------------------ exports
def page_figures(preds) -> dict:
    """The page's figures with default settings, by name (for the export tab)."""
    names = preds.names
    cm = breakdown.confusion(preds.y, preds.pred, len(names))
    figs = {"confusion": analysis_figures.confusion_figure(cm, names),
            "roc": analysis_figures.roc_figure(breakdown.roc_curves(preds.y, preds.probs, names)),
            "calibration": analysis_figures.reliability_figure(reliability(preds.y, preds.probs)),
            "length": analysis_figures.length_figure(breakdown.length_bins(preds.n_tokens, preds.correct,
                                                     preds.meta.get("max_length")))}
    att = _cached_attention(preds)
    if att is not None:
        layer = max(0, len(word_attention.layer_columns_of(att)) - 2)
        figs["rating_words"] = analysis_figures.rating_words_figure(
            word_attention.top_words(att, preds.y, layer, len(names)), names, layer)
    return figs


def _cached_attention(preds):
    from reviewbert.analysis import cache
    got = cache.read_attention(preds.folder) if preds.folder is not None else None
    return None if got is None else got[0]


def exports(preds, info, predictor):
    st.subheader("Predictions")
    st.download_button("Predictions CSV", lambda: export_frame(preds).to_csv(index=False),
                       "predictions.csv", "text/csv", key="err_dl_csv", on_click="ignore",
                       help="text, true and predicted rating, every class probability, "
                            "token count")
    st.subheader("The whole page as one HTML file")
    st.caption("Metrics with intervals, confusion matrix, ROC, calibration, per-rating "
               "attention (once computed) and the top label issues; opens offline.")
    built = st.session_state.get(state.ERR_REPORT)
    if built and built[0] == _key(preds):
        st.download_button("Download the report", built[1], "error_analysis.html", "text/html",
                           key="err_dl_report", on_click="ignore")
    elif runtime.button(st, "Build the HTML report", key="err_build_report"):
        with st.spinner("Building the report…"):
            st.session_state[state.ERR_REPORT] = (_key(preds), build_report(
                report_inputs(preds, info, predictor)))
        st.rerun()
    st.subheader("Figures")
    figs = page_figures(preds)
    name = st.selectbox("Figure", list(figs), key=state.ERR_FIG)
    fig = figs[name]
    c1, c2 = st.columns(2)
    c1.download_button("HTML (interactive, offline)",
                       lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                       f"{name}.html", "text/html", key="err_dl_fig_html", on_click="ignore")
    png_download(c2, fig, state_key=state.ERR_PNG, figure_key=f"{_key(preds)}:{name}",
                 file_name=f"{name}.png", key_prefix="err_")


def report_inputs(preds, info, predictor) -> ReportInputs:
    """What the HTML report draws, from what the page has computed (attention if cached)."""
    inputs = ReportInputs(preds, info.name, intervals=_intervals(_key(preds), preds),
                          issues=_issues(_key(preds), preds)[0])
    att = _cached_attention(preds)
    if att is not None:
        inputs.layer = max(0, len(word_attention.layer_columns_of(att)) - 2)
        inputs.word_tops = word_attention.top_words(att, preds.y, inputs.layer, preds.scheme.num_labels)
        inputs.examples = {c: predictor.predict(str(preds.frame["text"].iloc[r]))
                           for c, r in word_attention.example_rows(preds).items() if r is not None}
    return inputs
