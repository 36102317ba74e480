"""The Compare tab's filter: two checkpoints compared on the reviews of a saved slice
(slices are saved on the Map and Slices tabs, ``ui/split_map.py``, and cohorts on the
Cohorts page, ``ui/cohorts.py``)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from reviewbert.analysis import slices
from reviewbert.analysis.predictions import SplitPredictions
from reviewbert.ui import cohorts, state
from reviewbert.viz.markdown import md_escape


def pick(preds, flagged=None) -> np.ndarray | None:
    """The rows of the saved slice chosen here, or None for every review."""
    saved = slices.load_saved(preds.folder)
    if not saved:
        return None
    choice = st.selectbox("Reviews", ["every review", *saved], key=state.CMP_SLICE,
                          help="A slice saved on the Map or Slices tab, or a cohort saved on "
                               "the Cohorts page: compare the two checkpoints on its reviews only.")
    if choice == "every review":
        return None
    try:
        spec = saved[choice]
        table = cohorts.properties_table(preds) if spec.where else None
        return slices.mask_of(spec, preds, flagged, table)
    except slices.SliceError as e:
        st.warning(md_escape(str(e)))
        return None


def subset(preds, mask) -> SplitPredictions:
    """The same evaluation restricted to ``mask``'s rows (not cached)."""
    return SplitPredictions(preds.frame[np.asarray(mask)].reset_index(drop=True), preds.scheme,
                            preds.meta, None)
