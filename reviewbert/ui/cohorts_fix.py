"""The Cohorts page's fix loop: the corrected data file (relabels applied, duplicates and
tagged reviews dropped), the tags and notes exported, and a retrained checkpoint compared
with this one on the cohorts found.

The corrected file is written to the uploads folder, so the Train page offers it as data;
the computation is ``reviewbert.cohorts.fix`` and ``reviewbert.cohorts.compare``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from reviewbert.analysis import slices as slices_mod
from reviewbert.cohorts import compare, fix, hygiene
from reviewbert.data import files as datafiles
from reviewbert.store import db
from reviewbert.ui import error_analysis, runtime, state
from reviewbert.ui.cohorts import _found, flash, preds_key, store_or_say
from reviewbert.viz.markdown import md_code, md_escape

CORRECTED_NAME = "corrected.jsonl"


def fix_tab(preds, table: pd.DataFrame, info, choice) -> None:
    store = store_or_say()
    if store is None:
        return
    st.subheader("A corrected data file")
    st.caption("These reviews with every relabel applied, and, as you choose, their duplicates "
               "and the reviews carrying some tags dropped. It is written as JSON lines to the "
               "uploads folder, where the Train page lists it as data.")
    flash()
    k = state.COH_FIX
    keys = table["key"].tolist()
    tags = store.tags(keys)
    relabels = {key: r.stars for key, r in store.relabels(keys).items()}
    used = sorted({t for ts in tags.values() for t in ts})
    c1, c2 = st.columns(2)
    drop_dups = c1.toggle("Drop duplicates (keep the first of each group)", True, key=k + "dups")
    drop_tagged = c2.multiselect("Drop the reviews tagged", used, key=k + "drop",
                                 default=[t for t in used if t in ("label-noise", "off-topic")])
    name = st.text_input("File name", CORRECTED_NAME, key=k + "name", max_chars=120)
    if runtime.button(st, "Write the corrected file", key=k + "write", type="primary"):
        dup_rows = _duplicate_rows(preds) if drop_dups else set()
        _write(preds, relabels, dup_rows, set(drop_tagged), tags, name)
        st.rerun()
    st.subheader("Tags, notes and relabels")
    texts = dict(zip(keys, preds.frame["text"].astype(str)))
    for suffix, mime in ((".csv", "text/csv"), (".jsonl", "application/jsonl")):
        try:
            data = fix.annotations_bytes(store, texts, suffix)
        except (ValueError, db.StoreError) as e:
            st.warning(f"The {suffix[1:].upper()} export cannot be made: {md_escape(str(e))}")
            continue
        st.download_button(f"Download them as {suffix[1:].upper()}", data,
                           f"annotations{suffix}", mime, key=k + "dl" + suffix, on_click="ignore")
    st.subheader("After retraining: compare on the cohorts")
    compare_view(preds, table, info, choice)


def _duplicate_rows(preds) -> set[int]:
    """Every duplicate but the first of its group (exact or near)."""
    report = hygiene.cached_report(preds)
    groups = hygiene.groups(report.pairs, preds.n)
    seen, drop = set(), set()
    for row, g in enumerate(groups):
        if g < 0:
            continue
        if g in seen:
            drop.add(row)
        seen.add(g)
    return drop


def _write(preds, relabels, dup_rows, drop_tagged, tags, name) -> None:
    f = preds.frame
    try:
        name = Path(str(name or "").strip()).name
        if not name or not name.endswith(".jsonl"):
            raise ValueError("the file name must end in .jsonl")
        rows, summary = fix.corrected_reviews(
            f["text"].astype(str).tolist(), f["stars"].astype(int).tolist(),
            f["source"].astype(str).tolist(), relabels=relabels, drop_keys=set(),
            duplicate_rows=dup_rows, drop_tagged=drop_tagged, tags=tags)
        path = datafiles.uploads_dir() / name
        fix.write_corrected(rows, path)
        st.session_state[state.COH_FLASH] = (
            "success", f"Wrote {len(rows):,} reviews to {md_code(str(path), 200)} "
                       f"({_summary(summary)}). Pick it on the Train page.")
    except (ValueError, OSError, db.StoreError) as e:
        st.session_state[state.COH_FLASH] = ("warning", f"Not written: {md_escape(str(e))}")


def _summary(summary: dict) -> str:
    return ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in summary.items()
                     if isinstance(v, int)) or "no change"


def compare_view(preds, table, info, choice) -> None:
    st.caption("A checkpoint trained on the corrected file, scored on these same reviews: its "
               "accuracy on each cohort found here (the tree's leaves, the top slices and the "
               "saved cohort slices), with 95 % intervals, and the change over the paired "
               "differences. Reviews of this split may sit in the new checkpoint's training "
               "split if its data held them: the Hygiene tab of that checkpoint says.")
    picked = error_analysis.other_predictions(preds, info, choice, state.COH_COMPARE,
                                              state.COH_COMPARE_RUN, "Retrained checkpoint")
    if picked is None:
        return
    other, preds_b = picked
    cohorts = _cohorts(preds, table)
    result = compare.compare_on_cohorts(cohorts, table, preds.correct, preds_b.correct)
    shown = pd.DataFrame({
        "cohort": result["cohort"], "n": result["n"],
        info.name: [_pct(r, "before") for _, r in result.iterrows()],
        other.name: [_pct(r, "after") for _, r in result.iterrows()],
        "change": [f"{100 * r['change']:+.1f} [{100 * r['change_low']:+.1f}, "
                   f"{100 * r['change_high']:+.1f}]" for _, r in result.iterrows()],
        "verdict": [compare.verdict(r) for _, r in result.iterrows()]})
    st.dataframe(shown, hide_index=True, key="coh_compare_table")


def _pct(r, col: str) -> str:
    return f"{100 * r[col]:.1f}% [{100 * r[col + '_low']:.1f}–{100 * r[col + '_high']:.1f}]"


def _cohorts(preds, table) -> dict[str, str]:
    found = _found(preds_key(preds), "wrong", table)
    out = {"every review": ""}
    out.update({f"leaf {c.node_id}": c.query for c in found.leaves})
    out.update({f"slice {i + 1}": c.query for i, c in enumerate(found.slices)})
    for name, spec in slices_mod.load_saved(preds.folder).items() if preds.folder else ():
        if spec.where:
            out[f"saved: {name}"] = spec.where
    return out
