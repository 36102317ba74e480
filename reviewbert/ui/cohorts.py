"""The Cohorts page's finding views: the review properties, the error tree, SliceLine's top
slices, the heat map over two properties, and one cohort opened (its reviews, saved as a
slice, tagged at once).

They only draw: the properties, the tree and the slices come from ``reviewbert.cohorts``,
the figures from ``reviewbert.cohorts.figures``; the hygiene and triage views are in
``ui/cohorts_triage.py``, the fix loop in ``ui/cohorts_fix.py``.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from reviewbert.analysis import slices as slices_mod
from reviewbert.cohorts import conditions, finder, pipeline, properties, triage
from reviewbert.cohorts import figures as cohort_figures
from reviewbert.cohorts import lexicon as lexicon_mod
from reviewbert.store import db
from reviewbert.ui import runtime, state
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.markdown import md_code, md_escape

TABS = ("Cohorts", "Heat map", "Hygiene", "Triage", "Fix and compare")
TEXT_PREVIEW = 200
SHOWN_REVIEWS = 500


def preds_key(preds) -> str:
    return f"{preds.meta.get('key')}:{preds.meta.get('checkpoint', {}).get('sha256')}:{preds.n}"


# ------------------------------------------------------------------ the properties
def lexicon_in_force() -> lexicon_mod.Lexicon:
    """The user's lexicon, or the shipped one after one line saying why the user's cannot
    be read (nothing the user wrote is lost: the file stays as it is, to be fixed)."""
    try:
        return lexicon_mod.load_lexicon()
    except lexicon_mod.LexiconError as e:
        st.error(f"{md_escape(str(e))} — the shipped lexicon is used until it is fixed.")
        return lexicon_mod.parse_lexicon(lexicon_mod.shipped_text(), "the shipped lexicon")


def properties_table(preds) -> pd.DataFrame:
    """The split's properties: from the cache beside the predictions, else computed here
    with a progress bar (kept in the session when there is no cache folder)."""
    lexicon = lexicon_in_force()
    memo = f"{preds_key(preds)}:{lexicon.fingerprint}"
    kept = st.session_state.get("coh_table")
    if kept and kept[0] == memo:
        return kept[1]
    bar = StreamlitProgress(preds.n, "Reading the reviews' properties")
    try:
        table = pipeline.review_properties(preds, progress=bar, lexicon=lexicon)
    finally:
        bar.bar.empty()
    st.session_state["coh_table"] = (memo, table)
    return table


def lexicon_editor() -> None:
    """The lexicon behind the aspect, brand, negation and contrast properties, editable."""
    with st.expander("The lexicon: aspects, brands, negations and contrast words"):
        where = lexicon_mod.user_path()
        st.caption(f"Saved to {md_code(str(where), 200)}; the properties are recomputed with "
                   "it. Each list is matched as whole words, case-insensitively.")
        current = where.read_text(encoding="utf-8") if where.is_file() else lexicon_mod.shipped_text()
        text = st.text_area("Lexicon (YAML)", current, height=320, key=state.COH_LEXICON,
                            max_chars=lexicon_mod.MAX_CHARS)
        if runtime.button(st, "Save the lexicon", key=state.COH_LEXICON + "_save"):
            try:
                lexicon_mod.save_lexicon(text)
                st.session_state[state.COH_FLASH] = ("success", "Saved the lexicon.")
            except (lexicon_mod.LexiconError, OSError) as e:
                st.session_state[state.COH_FLASH] = ("warning",
                                                     f"Not saved: {md_escape(str(e))}")
            st.rerun()


@st.cache_data(max_entries=8, show_spinner="Growing the error tree and finding slices…")
def _found(key: str, target: str, _table: pd.DataFrame) -> pipeline.CohortsResult:
    return pipeline.find_cohorts(_table, target)


def author() -> str:
    """Who tags, notes and relabels: typed once above the tabs, kept for the session."""
    kept = state.COH_AUTHOR + "_kept"
    if state.COH_AUTHOR not in st.session_state:
        st.session_state[state.COH_AUTHOR] = st.session_state.get(kept, "")
    name = st.text_input("Your name (recorded with every tag, note and relabel)",
                         key=state.COH_AUTHOR, max_chars=db.MAX_NAME)
    st.session_state[kept] = name
    return name


def store_or_say():
    """The shared store, or None after one line saying why it cannot be opened."""
    try:
        return db.open_store()
    except db.StoreError as e:
        st.error(md_escape(str(e)))
        return None


def flash() -> None:
    shown = st.session_state.pop(state.COH_FLASH, None)
    if shown:
        getattr(st, shown[0])(shown[1])


# ------------------------------------------------------------------ the Cohorts tab
def _label(c: finder.Cohort) -> str:
    where = "tree node" if c.kind != "slice" else "slice"
    return (f"{where} · {c.n:,} reviews · {100 * c.error_rate:.0f}% errors · "
            f"{c.query or 'every review'}")


def found_tab(preds, table: pd.DataFrame, who: str) -> None:
    lexicon_editor()
    target = st.radio("An error is", list(pipeline.TARGETS), key=state.COH_TARGET,
                      format_func=pipeline.TARGETS.get, horizontal=True)
    result = _found(preds_key(preds), target, table)
    o = result.overall
    st.markdown(f"**{o.errors:,} of {o.n:,} reviews** are {pipeline.TARGETS[target]} "
                f"({100 * o.error_rate:.1f}%).")
    st.subheader("The error tree")
    st.caption("A shallow decision tree (scikit-learn) on the properties, predicting whether a "
               "review is an error. Each box: its reviews, error rate (colour) and the share "
               "of all errors it holds (coverage). Model outcomes (predicted stars, confidence) "
               "are not features: they would give the answer away.")
    st.plotly_chart(cohort_figures.tree_figure(result.nodes), key="coh_tree")
    st.subheader("The top slices")
    st.caption("SliceLine's slices whose error rate is above the split's, in the order of its "
               "score (large slices far above the split's rate first): size, "
               "error rate with a 95 % Wilson interval, lift over the whole split, and the "
               "p-value of a one-sided binomial test adjusted by Benjamini–Hochberg over every "
               "candidate tried. Adjusted p ≤ 0.05 is marked significant.")
    shown = _shown_slices(result.slices)
    if shown:
        st.plotly_chart(cohort_figures.slices_figure(shown), key="coh_slices_fig")
        st.dataframe(_slices_frame(shown), hide_index=True, key="coh_slices_table")
    cohorts = {_label(c): c for c in [*result.nodes, *shown]}
    st.subheader("Open a cohort")
    picked = st.selectbox("Cohort", list(cohorts), key=state.COH_OPEN)
    if picked is not None:
        cohort_view(preds, table, cohorts[picked], who)


def _shown_slices(found: list) -> list:
    """The slices to draw: the significant ones unless the user asks for every candidate
    (a slice that may be chance is not a finding to act on)."""
    hidden = sum(not c.significant for c in found)
    every = st.toggle(f"Also show the {hidden:,} slices that are not significant", value=False,
                      key=state.COH_ALL_SLICES, disabled=not hidden)
    shown = found if every else [c for c in found if c.significant]
    if not found:
        st.info("No slice has an error rate above the split's.")
    elif not shown:
        st.info(f"None of the {len(found):,} slices above the split's error rate is significant "
                "after the correction: they may be chance. Turn on the switch to see them.")
    return shown


def _slices_frame(found: list) -> pd.DataFrame:
    return pd.DataFrame([{
        "definition": c.query, "n": c.n, "errors": c.errors,
        "error rate": f"{100 * c.error_rate:.1f}%",
        "95% interval": f"{100 * c.ci_low:.1f}–{100 * c.ci_high:.1f}%",
        "lift": round(c.lift, 2), "p adjusted": float(f"{c.p_adjusted:.3g}"),
        "significant": bool(c.significant)} for c in found])


def cohort_view(preds, table: pd.DataFrame, cohort: finder.Cohort, who: str) -> None:
    """One cohort: its numbers, its reviews, and the two actions on all of them."""
    mask = conditions.mask_of(cohort.conditions, table)
    st.markdown(f"{md_code(cohort.query or 'every review', 300)}: **{int(mask.sum()):,} "
                f"reviews**, error rate {100 * cohort.error_rate:.1f}% "
                f"[{100 * cohort.ci_low:.1f}–{100 * cohort.ci_high:.1f}%], "
                f"{100 * cohort.coverage:.1f}% of all errors.")
    flash()
    reviews_table(preds, table, mask, key=state.COH_REVIEWS)
    c1, c2 = st.columns(2)
    with c1:
        _save_slice(preds, cohort)
    with c2:
        _tag_cohort(table, mask, who)


def reviews_table(preds, table: pd.DataFrame, mask, key: str) -> None:
    """The cohort's reviews (the first 500), one of them opened on the Predict page."""
    rows = table.index[mask][:SHOWN_REVIEWS]
    f = preds.frame.iloc[rows]
    shown = pd.DataFrame({"text": [t[:TEXT_PREVIEW] for t in f["text"].astype(str)],
                          "true": table["true_stars"].to_numpy()[rows],
                          "predicted": table["pred_stars"].to_numpy()[rows],
                          "confidence": table["confidence"].to_numpy()[rows].round(2)})
    event = st.dataframe(shown, hide_index=True, key=key, on_select="rerun",
                         selection_mode="single-row")
    picked = (event.selection.rows if event is not None else []) or []
    if picked:
        row = int(rows[picked[0]])
        st.text(str(preds.frame["text"].iloc[row]))
        if runtime.button(st, "Open on Predict", key=key + "_open"):
            state.send_review(str(preds.frame["text"].iloc[row]),
                              int(preds.frame["stars"].iloc[row]), "a cohort's review")
            st.switch_page(state.PREDICT_PAGE)


def _save_slice(preds, cohort) -> None:
    name = st.text_input("Save as a slice named", key=state.COH_SLICE_NAME,
                         max_chars=slices_mod.MAX_NAME)
    if runtime.button(st, "Save as slice", key="coh_save_slice"):
        try:
            if preds.folder is None:
                raise slices_mod.SliceError("these predictions are not cached, so there is "
                                            "nowhere to keep a slice")
            stored = slices_mod.save_slice(preds.folder, name,
                                           slices_mod.SliceSpec(where=cohort.query))
            st.session_state[state.COH_FLASH] = (
                "success", f"Saved the slice {md_code(stored)}: it is on Error analysis' "
                           "Slices, Map and Compare tabs.")
        except (slices_mod.SliceError, OSError) as e:
            st.session_state[state.COH_FLASH] = ("warning", f"Not saved: {md_escape(str(e))}")
        st.rerun()


def _tag_cohort(table, mask, who: str) -> None:
    store = store_or_say()
    if store is None:
        return
    tag = st.selectbox("Tag every review of the cohort", triage.vocabulary(store),
                       key=state.COH_TAG, accept_new_options=True)
    if runtime.button(st, f"Tag {int(mask.sum()):,} reviews", key="coh_tag_all") and tag:
        try:
            added = triage.tag_cohort(store, table, mask, tag, who)
            # the tag as stored ("Battery life" is "battery-life"), not as typed
            st.session_state[state.COH_FLASH] = (
                "success", f"Tagged {added:,} reviews {md_code(triage.tag_name(tag))} "
                           f"({int(mask.sum()) - added:,} had it already).")
        except db.StoreError as e:
            st.session_state[state.COH_FLASH] = ("warning", f"Not tagged: {md_escape(str(e))}")
        st.rerun()


# ------------------------------------------------------------------ the Heat map tab
def heatmap_tab(table: pd.DataFrame) -> None:
    st.caption("The error rate over any two properties (numbers cut at their quantiles). "
               "Cells with fewer than 5 reviews are left blank.")
    names = [c for c in table.columns if c not in finder.FEATURES_EXCLUDED or c == "true_stars"]
    k = state.COH_HEAT
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("Across", names, key=k + "x",
                     index=names.index("n_words") if "n_words" in names else 0)
    y = c2.selectbox("Down", names, key=k + "y",
                     index=names.index("vader_compound") if "vader_compound" in names else 1)
    target = c3.radio("An error is", list(pipeline.TARGETS), key=k + "target",
                      format_func=pipeline.TARGETS.get)
    if x == y:
        st.info("Pick two different properties.")
        return
    cells = finder.heatmap(table, x, y, target)
    st.plotly_chart(cohort_figures.heatmap_figure(cells, x, y), key=k + "chart")
    with st.expander("What each property means"):
        defs = properties.definitions(lexicon_in_force())
        st.dataframe(pd.DataFrame({"property": list(defs), "definition": list(defs.values())}),
                     hide_index=True)
