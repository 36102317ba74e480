"""The Cohorts page's data views: hygiene (duplicates, leakage, conflicting labels) and the
triage queue (tags, a note, a relabel and a "reviewed" mark on one review after another).

Every write goes to the shared store (``reviewbert/store/db.py``) with who and when; the
queue's order and the hygiene checks come from ``reviewbert.cohorts``.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from reviewbert.analysis.label_issues import find_issues
from reviewbert.analysis.sources import named_split
from reviewbert.cohorts import hygiene, triage
from reviewbert.data import DataError
from reviewbert.store import db
from reviewbert.ui import runtime, state
from reviewbert.ui.cohorts import flash, preds_key, store_or_say
from reviewbert.viz.markdown import md_code, md_escape

PAIRS_SHOWN = 300
QUEUE_SHOWN = 50


# ------------------------------------------------------------------ the Hygiene tab
@st.cache_data(max_entries=4, show_spinner="Reading the checkpoint's training split…")
def _train_texts(path: str, stamp: float, _meta: dict) -> tuple[list[str] | None, str]:
    try:
        reviews, _, _ = named_split(_meta, "train")
    except (DataError, OSError) as e:
        return None, str(e).splitlines()[0][:300]
    return [r.text for r in reviews], ""


def hygiene_tab(preds, info, is_test_split: bool) -> None:
    st.caption("Exact duplicates (equal once case, spacing and punctuation are ignored) and "
               "near-duplicates (cosine ≥ 0.9 over word 1–2-grams) among these reviews; with the "
               "checkpoint's own test split, the test reviews that also sit in its training "
               "split (leakage), and the metrics without them.")
    train, why = None, ""
    if is_test_split:
        asked = st.session_state.get(state.COH_HYGIENE_RUN) == preds_key(preds)
        if asked:
            train, why = _train_texts(str(info.path), runtime.mtime(info.path), info.meta)
        elif runtime.button(st, "Check the training split for leakage too", key="coh_leak"):
            st.session_state[state.COH_HYGIENE_RUN] = preds_key(preds)
            st.rerun()
    if why:
        st.warning(f"The training split cannot be rebuilt here: {md_escape(why)}")
    texts = preds.frame["text"].astype(str).tolist()
    with st.spinner("Looking for duplicates…"):
        report = hygiene.cached_report(preds, train_texts=train)
    _hygiene_counts(report, train is not None)
    _hygiene_tables(report, texts, train)
    if train is not None and report.leaked_rows:
        st.subheader("The test metrics without the leaked reviews")
        st.dataframe(pd.DataFrame(hygiene.metrics_without(preds, report.leaked_rows)),
                     hide_index=True)


def _hygiene_counts(report, with_train: bool) -> None:
    cols = st.columns(4 if with_train else 3)
    cols[0].metric("Exact duplicate pairs", f"{report.exact_pairs:,}")
    cols[1].metric("Near-duplicate pairs", f"{report.near_pairs:,}")
    cols[2].metric("Groups with conflicting labels", f"{report.conflicting_groups:,}")
    if with_train:
        cols[3].metric("Test reviews also in training", f"{len(report.leaked_rows):,}")


def _hygiene_tables(report, texts: list[str], train) -> None:
    if len(report.pairs):
        with st.expander(f"Duplicate pairs ({len(report.pairs):,})"):
            p = report.pairs.head(PAIRS_SHOWN)
            st.dataframe(pd.DataFrame({
                "similarity": p["similarity"].round(3), "kind": p["kind"],
                "review": [texts[i][:200] for i in p["row_a"]],
                "its duplicate": [texts[i][:200] for i in p["row_b"]]}), hide_index=True)
    if len(report.conflicts):
        with st.expander(f"Conflicting labels ({report.conflicting_rows:,} reviews)"):
            c = report.conflicts.head(PAIRS_SHOWN)
            st.dataframe(pd.DataFrame({"group": c["group"], "stars": c["stars"],
                                       "text": c["text"].astype(str).str[:200]}), hide_index=True)
    if train is not None and len(report.leakage):
        with st.expander(f"Leaked test reviews ({len(report.leaked_rows):,})"):
            lk = report.leakage.head(PAIRS_SHOWN)
            st.dataframe(pd.DataFrame({
                "similarity": lk["similarity"].round(3),
                "test review": [texts[i][:200] for i in lk["row_a"]],
                "in training": [train[i][:200] for i in lk["row_b"]]}), hide_index=True)


# ------------------------------------------------------------------ the Triage tab
@st.cache_data(max_entries=4, show_spinner="Running cleanlab…")
def _label_quality(key: str, _preds):
    try:
        return find_issues(_preds).quality
    except ValueError:
        return None


def queue_tab(preds, table: pd.DataFrame, who: str) -> None:
    store = store_or_say()
    if store is None:
        return
    k = state.COH_QUEUE
    c1, c2, c3 = st.columns(3)
    order = c1.radio("Order", ("confidence", "cleanlab"), key=k + "order",
                     format_func={"confidence": "most confident mistakes first",
                                  "cleanlab": "cleanlab's label quality, lowest first"}.get)
    only_wrong = c2.toggle("Only wrong predictions", True, key=k + "wrong")
    hide = c3.toggle("Hide reviewed", True, key=k + "hide")
    reviewed = set(store.reviewed(table["key"].tolist()))
    queue = triage.queue(table, order=order, reviewed=reviewed, hide_reviewed=hide,
                         only_wrong=only_wrong,
                         label_quality=_label_quality(preds_key(preds), preds)
                         if order == "cleanlab" else None)
    done = int(table["key"].isin(reviewed).sum())
    st.caption(f"{len(queue):,} reviews in the queue · {done:,} of {len(table):,} marked "
               "reviewed (by anyone, in the shared store).")
    flash()
    if queue.empty:
        st.success("Nothing left in the queue.")
        return
    row = int(queue.index[0])
    _one_review(preds, table, row, store, who)
    with st.expander(f"The next {min(QUEUE_SHOWN, len(queue)):,} in the queue"):
        q = queue.head(QUEUE_SHOWN)
        st.dataframe(pd.DataFrame({
            "text": preds.frame["text"].astype(str).iloc[q.index].str[:160].to_numpy(),
            "true": q["true_stars"].to_numpy(), "predicted": q["pred_stars"].to_numpy(),
            "confidence": q["confidence"].round(2).to_numpy()}), hide_index=True)


def _one_review(preds, table, row: int, store, who: str) -> None:
    """The queue's head: its text, what it has, and the form that saves tags, a note and a
    relabel (and marks it reviewed, so the next one comes up)."""
    key = str(table["key"].iloc[row])
    true = int(table["true_stars"].iloc[row])
    st.markdown(f"**True {true}★ · predicted {table['pred_stars'].iloc[row]:g}★ · confidence "
                f"{table['confidence'].iloc[row]:.2f}**")
    st.text(str(preds.frame["text"].iloc[row]))
    relabel = store.relabels([key]).get(key)
    k = state.COH_QUEUE + key[-12:] + "_"
    # What the form started with, kept while it is up (a fresh form, its widgets not in
    # the session yet, starts from the store): a save changes only what this reviewer
    # changed, never a tag, note or relabel another session stored meanwhile.
    shown = st.session_state.get(k + "shown")
    if shown is None or k + "tags" not in st.session_state:
        shown = st.session_state[k + "shown"] = (
            tuple(store.tags([key]).get(key, [])), store.note(key) or "",
            relabel.stars if relabel else true)
    # every tag the form started with among its options, even one removed from the store
    # since: a tag the form did not show would count as one this reviewer removed
    vocabulary = triage.vocabulary(store)
    vocabulary += [t for t in shown[0] if t not in vocabulary]
    with st.form(k + "form", border=True):
        st.multiselect("Tags", vocabulary, default=list(shown[0]),
                       key=k + "tags", accept_new_options=True,
                       help="; ".join(f"{t}: {d}" for t, d in triage.TAXONOMY.items()))
        st.text_area("Note", shown[1], key=k + "note", max_chars=db.MAX_NOTE)
        st.select_slider("Its true rating", [1, 2, 3, 4, 5], key=k + "stars", value=shown[2],
                         help="Change it when the data's rating is wrong (a relabel).")
        # saved in the callback, before the next run draws the page: by then another
        # session may have marked this review reviewed, and its form would not be drawn
        runtime.form_submit(st, "Save and next", key=k + "save", type="primary",
                            on_click=_save_review, args=(store, key, true, shown, k, who))


def _save_review(store, key, true, shown, k, who) -> None:
    """The form's values against what it started with (``shown``): tags added and removed,
    the note and the stars if changed; then the review marked reviewed."""
    note = st.session_state.get(k + "note", shown[1])
    stars = st.session_state.get(k + "stars", shown[2])
    try:
        # a tag typed here is stored as a cohort's tag is ("Battery life" → "battery-life")
        tags = list(dict.fromkeys(t if t in shown[0] else triage.tag_name(t)
                                  for t in st.session_state.get(k + "tags", shown[0])))
        for t in tags:
            if t not in shown[0]:
                store.tag(key, t, who)
        for t in shown[0]:
            if t not in tags:
                store.untag(key, t)
        if note != shown[1]:
            store.set_note(key, note, who)
        if stars != shown[2]:
            store.relabel(key, int(stars), true, who)
        store.mark_reviewed([key], who)
        st.session_state.pop(k + "shown", None)
        st.session_state[state.COH_FLASH] = (
            "success", "Saved" + (f": relabelled {true}★ → {stars}★" if stars != true else "")
            + (f", tagged {', '.join(md_code(t) for t in tags)}" if tags else "") + ".")
    except db.StoreError as e:
        st.session_state[state.COH_FLASH] = ("warning", f"Not saved: {md_escape(str(e))}")
