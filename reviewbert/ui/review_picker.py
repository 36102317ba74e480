"""Which reviews a whole-split page works on.

Shared by the Error analysis and Heads pages: the checkpoint's own test split (the
default), its training split (where the Train page's data map saves its slices), a file
of the data folder, or an upload (:func:`pick_data`); each page passes
its own session keys (:class:`PickerKeys`, from ``ui/state.py``), so the two pages
keep separate choices. :class:`StreamlitProgress` is the pages' ``progress(n)``
callback: a bar with the rate and the time left.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from reviewbert.analysis.sources import (
    CACHE_MAX_REVIEWS,
    all_reviews,
    describe_test_split,
    named_split,
)
from reviewbert.data import DataError
from reviewbert.data import files as datafiles
from reviewbert.data.examples import Review
from reviewbert.model.labels import get_scheme
from reviewbert.ui import runtime

SOURCES = ("test split", "train split", "data file", "upload")
LABELS = {"test split": "this checkpoint's test split", "train split": "its training split",
          "data file": "a data file", "upload": "an uploaded file"}


@dataclass(frozen=True)
class PickerKeys:
    """The session keys of one page's picker (see ui/state.py)."""
    source: str          # radio: test split / train split / data file / upload
    file: str            # selectbox: data file (str path)
    upload: str          # file_uploader
    uploaded: str        # str path of the saved upload
    upload_error: str    # str: why the last upload was not kept


@dataclass
class Choice:
    """The reviews chosen for evaluation."""
    reviews: Sequence             # objects with .text, .stars, .source
    source: dict                  # description (analysis.sources)
    key: str                      # identifies checkpoint + reviews in session state


@st.cache_data(max_entries=4, show_spinner="Reading every review of the file…")
def file_reviews(path: str, stamp: float, labels: int, meta_data: dict | None):
    """(reviews or None, description, why not) for every unique review of one file."""
    try:
        report, chunks, desc = all_reviews([path], get_scheme(labels), {"data": meta_data or {}})
    except DataError as e:
        return None, {}, str(e).splitlines()[0][:300]
    if report.unique_texts > CACHE_MAX_REVIEWS:
        return None, desc, (f"{report.unique_texts:,} reviews is more than the page holds "
                            f"({CACHE_MAX_REVIEWS:,}); use `python -m reviewbert evaluate "
                            f"--split all --data {path} --save-predictions out.parquet`")
    reviews = [Review(e.text, int(e.stars), e.source) for chunk in chunks for e in chunk]
    if not reviews:
        return None, desc, "no usable review in this file"
    return reviews, desc, ""


@st.cache_data(max_entries=2, show_spinner="Rebuilding the checkpoint's training split…")
def train_reviews(path: str, stamp: float, _meta: dict, _tokenizer):
    """(reviews or None, description, why not): the checkpoint's training split, rebuilt
    from its reviewbert.json as training built it (the data map's rows are its rows)."""
    try:
        reviews, desc, _ = named_split(_meta, "train", _tokenizer)
    except DataError as e:
        return None, {}, str(e).splitlines()[0][:300]
    if len(reviews) > CACHE_MAX_REVIEWS:
        return None, desc, (f"{len(reviews):,} training reviews is more than the page holds "
                            f"({CACHE_MAX_REVIEWS:,})")
    return [Review(e.text, int(e.stars), e.source) for e in reviews], desc, ""


def _save_upload(keys: PickerKeys):
    f = st.session_state.get(keys.upload)
    if f is None:
        return
    try:
        st.session_state[keys.uploaded] = str(datafiles.save_upload(f.name, f.getvalue()))
    except datafiles.UploadError as e:
        st.session_state[keys.uploaded] = None
        st.session_state[keys.upload_error] = f"Upload **{f.name}** not kept: {e}"


def pick_data(info, predictor, keys: PickerKeys, label: str = "Reviews to evaluate") -> Choice | None:
    """Which reviews: the checkpoint's own test split, a data file, or an upload."""
    test, why = runtime.load_test_reviews(str(info.path), runtime.mtime(info.path))
    # the training split is rebuilt from the same record as the test split
    options = list(SOURCES) if test is not None else list(SOURCES[2:])
    kind = st.radio(label, options, key=keys.source, horizontal=True, format_func=LABELS.get)
    if test is None:
        st.caption(f"This checkpoint's test split is not available: {why}")
    stamp = runtime.mtime(info.path)
    base = f"{info.path}:{stamp}:{predictor.max_length}"
    if kind == "test split":
        return Choice(test, describe_test_split(info.meta), f"{base}:test")
    if kind == "train split":
        reviews, desc, why = train_reviews(str(info.path), stamp, info.meta, predictor.tokenizer)
        if reviews is None:
            st.error(f"This checkpoint's training split cannot be rebuilt here: {why}")
            return None
        return Choice(reviews, desc, f"{base}:train")
    if kind == "data file":
        files = [str(p) for p in datafiles.list_data_files()]
        if not files:
            st.warning(f"No review files in `{datafiles.data_dir()}` or `{datafiles.uploads_dir()}`.")
            return None
        path = st.selectbox("Data file", files, key=keys.file, format_func=lambda p: Path(p).name)
    else:
        st.file_uploader("Review file (CSV/TSV, JSON lines or JSON array, optionally gzipped)",
                         type=["csv", "tsv", "json", "jsonl", "gz"], key=keys.upload,
                         on_change=_save_upload, args=(keys,),
                         help=f"At most {datafiles.MAX_UPLOAD_BYTES >> 20} MB; kept in "
                              f"`{datafiles.uploads_dir()}`.")
        err = st.session_state.pop(keys.upload_error, None)
        if err:
            st.error(err)
        path = st.session_state.get(keys.uploaded)
        if not path:
            return None
    reviews, desc, why = file_reviews(path, Path(path).stat().st_mtime, info.scheme.num_labels,
                                      info.meta.get("data"))
    if reviews is None:
        st.error(f"`{Path(path).name}`: {why}")
        return None
    return Choice(reviews, desc, f"{base}:{path}:{Path(path).stat().st_mtime}")
