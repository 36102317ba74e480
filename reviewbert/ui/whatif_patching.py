"""What if?'s "Where does the change act?": activation patching between the original review
and the edit, or a pair typed here (compute, cache and figures in ``reviewbert.patching``).

Drawn inside the edit-and-compare fragment (``ui/whatif.py``), so it follows the edit last
compared. The original is the clean review and the edit the corrupted one, or the other
way round, or two texts typed here. The pair must have the same number of words (a word
whose wordpiece count differs is n/a): a pair that cannot be patched says why before
anything runs. The grids run under a progress bar (stopped when the user leaves or
clicks elsewhere), are kept per session, and beside the checkpoint
(``reviewbert/patching/cache.py``). User words reach the page only through escaped
Plotly labels (``patching/figures.py``) and ``md_escape``.
"""
from __future__ import annotations

import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import streamlit as st

from reviewbert.ui import runtime, state
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.markdown import md_escape

PAIRS = ("original → edit", "edit → original", "a pair typed here")
EXPLAIN = ("Activation patching: one hidden state (one layer's output at one word's wordpieces) "
           "is copied from the clean review's run into the corrupted review's run, and the "
           "grid shows the share of the logit difference that this one patch gives back: "
           "(patched − corrupted) / (clean − corrupted), 1 = fully restored. The difference "
           "is the logit of the clean review's rating minus that of the corrupted review's "
           "(or of the clean runner-up when both get the same rating). Both reviews must "
           "have the same number of words; a word split into a different number of "
           "wordpieces in the two is n/a (blank).")


def _pair(cmp, key: str) -> tuple[str, str] | None:
    """(clean, corrupted) as chosen, or None until both texts are there."""
    choice = st.radio("Clean → corrupted", PAIRS, horizontal=True, key=f"{key}_pair",
                      help="The clean review's states are copied into the corrupted run")
    if choice != PAIRS[2] and cmp is None:
        st.caption("Compare an edit above first, or type a pair here.")
        return None
    if choice == PAIRS[0]:
        return cmp.before.text, cmp.after.text
    if choice == PAIRS[1]:
        return cmp.after.text, cmp.before.text
    c1, c2 = st.columns(2)
    clean = c1.text_area("Clean review", key=f"{key}_clean", height=100)
    corrupt = c2.text_area("Corrupted review (same number of words)", key=f"{key}_corrupt",
                           height=100)
    if not clean.strip() or not corrupt.strip():
        st.caption("Type both reviews, e.g. “The battery is great” and “The battery is "
                   "terrible”.")
        return None
    return clean, corrupt


def where_it_acts(predictor, cmp, key_prefix: str) -> None:
    """The section: pick the pair, run on a click, draw both grids and the reading."""
    from reviewbert.patching import grid as patching
    st.markdown("##### Where does the change act?")
    st.caption(EXPLAIN)
    key = f"{key_prefix}{state.PATCH}"
    texts = _pair(cmp, key)
    if texts is None:
        return
    heads = st.checkbox("Each attention head too (layer × head grid)", value=True,
                        key=f"{key}_heads")
    results = st.session_state.setdefault(f"{key}_results", {})
    slot = (id(predictor), *texts, heads)
    res = results.get(slot)
    if res is None:
        try:
            pair = patching.align(predictor.tokenizer, *texts, predictor.max_length)
        except patching.PatchingError as e:
            st.info(f"This pair cannot be patched: {md_escape(str(e))}.")
            return
        if not runtime.button(st, "Where does the change act?", key=f"{key}_run"):
            return
        res = _run(predictor, pair, texts, heads)
        results.clear()         # one pair per session: grids of old pairs are not kept
        results[slot] = res
    _show(res, predictor.scheme.names, key)


def _run(predictor, pair, texts: tuple[str, str], heads: bool):
    from reviewbert.patching import grid as patching
    bar = StreamlitProgress(patching.planned_for(predictor, pair, heads), "Patching",
                            unit="layer passes")
    try:
        with runtime.review_threads(predictor):
            return patching.patch(predictor, *texts, heads=heads, progress=bar, pair=pair)
    finally:
        bar.close()


def _show(res, names, key: str) -> None:
    from reviewbert.patching import figures
    from reviewbert.patching.grid import reading
    a, b = res.ratings
    where = "from the cache" if res.from_cache else f"{res.seconds:.1f} s"
    st.caption(f"Difference: logit({md_escape(names[a])}) − logit({md_escape(names[b])}); "
               f"clean {res.clean_metric:+.2f}, corrupted {res.corrupt_metric:+.2f} ({where}).")
    if not res.restorable:
        st.info(md_escape(reading(res)[0]))
        return
    st.plotly_chart(figures.word_grid_figure(res.columns, res.grid), key=f"{key}_words",
                    config={"displayModeBar": False})
    if res.head_grid is not None:
        st.plotly_chart(figures.head_grid_figure(res.head_grid), key=f"{key}_headgrid",
                        config={"displayModeBar": False})
    st.markdown("\n".join(f"- {md_escape(line)}" for line in reading(res)))
