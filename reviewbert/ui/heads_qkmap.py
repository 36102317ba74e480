"""The Heads page's Query–key map tab: one head's queries and keys in one joint map
(AttentionViz, Yeh et al. 2023) over the page's reviews, and every head's small map in a
layers × heads matrix whose click picks the head (the same head as "One head on one review").

It only draws: the vectors, their normalisation and projections come from
``reviewbert.heads.qkmap``, the figures from ``reviewbert.heads.qk_figures``.
"""
from __future__ import annotations

import streamlit as st

from reviewbert.heads import qk_figures, qkmap
from reviewbert.model.device import cpu_threads, threads_beside_training
from reviewbert.training.catalog import checkpoints_root
from reviewbert.training.runs import device_busy
from reviewbert.ui import state
from reviewbert.ui.progress_bar import StreamlitProgress, in_background

METHODS = {"pca": "PCA", "umap": "UMAP"}
EXPECTED_RATE = 150
"""Reviews per second the bar assumes before the pass reports (one forward pass each, as the
Heads analysis's passes: ``bench/layers_qkmap.py`` times it); then it shows the real rate."""
UMAP_RATE = 400.0       # points/s of a warm UMAP the bar assumes (bench/split_map.py)
MAP_KEY = "heads_qk_map"

ABOUT = ("Every token of the reviews gives this head a **query** (what it looks for) and a "
         "**key** (what it offers); the attention of a token on another grows with the dot "
         "product of the first's query and the second's key. Both go into one map. As in "
         "AttentionViz (Yeh et al., 2023), the keys are first moved so that the two clouds "
         "share a centre and both are scaled to the same mean length, which leaves every "
         "attention row as it was: a query then sits near the keys it attends to most.")


def section(info, predictor, reviews: list) -> None:
    """The tab: colour and projection, the matrix of heads, the selected head's map."""
    st.subheader("Query–key map: where a head's queries meet its keys")
    st.caption(ABOUT)
    vecs = _vectors(info, predictor, reviews)
    if vecs is None:
        return
    layer = min(int(st.session_state.get(state.HEADS_LAYER) or 0), vecs.layers - 1)
    head = min(int(st.session_state.get(state.HEADS_HEAD) or 0), vecs.heads - 1)
    c1, c2 = st.columns(2)
    colour = c1.radio("Colour by", list(qk_figures.COLOUR_BY), key=state.HEADS_QK_COLOUR,
                      format_func=qk_figures.COLOUR_BY.get, horizontal=True)
    method = c2.radio("Projection", list(METHODS), key=state.HEADS_QK_METHOD,
                      format_func=METHODS.get, horizontal=True,
                      help="PCA: exact and all but instant. UMAP keeps neighbourhoods better "
                           "and takes longer (then it is cached). Both see the vectors scaled "
                           "to unit length, as the Error analysis map does.")
    st.plotly_chart(qk_figures.thumbnails_figure(qkmap.thumbnails(vecs), vecs.alive_mask(),
                                                 (layer, head)),
                    key=state.HEADS_QK_THUMBS, on_select=_picked, selection_mode="points",
                    config={"displayModeBar": False}, width="content")
    _head_map(vecs, layer, head, colour, method)


def _vectors(info, predictor, reviews: list):
    """Every head's vectors for these reviews: from the cache, else read now with a bar."""
    reviews = list(reviews)[:qkmap.MAX_REVIEWS]
    key = qkmap.key_of(info.path, reviews, max_length=predictor.max_length)
    vecs = qkmap.lookup(info.path, key)
    kept = st.session_state.get(state.HEADS_QK_VECTORS)
    if vecs is None and kept and kept[0] == key:
        vecs = kept[1]                      # read, but there was nowhere to cache it
    if vecs is None:
        progress = StreamlitProgress(len(reviews), "Reading every head's queries and keys",
                                     unit="reviews", guess=len(reviews) / EXPECTED_RATE)
        busy = predictor.device.type == "cpu" and device_busy(checkpoints_root())
        try:
            with cpu_threads(threads_beside_training(busy)):
                vecs = qkmap.read_or_collect(predictor.model, predictor.tokenizer, info.path,
                                             reviews, max_length=predictor.max_length,
                                             progress=progress)
        finally:
            progress.close()
        if vecs.folder is None:
            st.session_state[state.HEADS_QK_VECTORS] = (key, vecs)
    st.caption(f"{vecs.n_tokens:,} tokens of {vecs.n_reviews:,} reviews (all of them, or a "
               f"seeded sample of {qkmap.MAX_TOKENS:,}) · "
               + ("read from the cache beside the checkpoint" if vecs.from_cache else
                  f"read in {vecs.seconds:.1f} s, one pass for every head"))
    return vecs


def _picked() -> None:
    """on_select of the matrix: the clicked cell's head becomes the page's head."""
    sel = st.session_state.get(state.HEADS_QK_THUMBS) or {}
    points = (sel.get("selection") or {}).get("points") or []
    if points:
        st.session_state[state.HEADS_LAYER] = int(round(points[0]["y"]))
        st.session_state[state.HEADS_HEAD] = int(round(points[0]["x"]))


def _head_map(vecs, layer: int, head: int, colour: str, method: str) -> None:
    if head not in vecs.alive[layer]:
        st.info(f"Layer {layer + 1}, head {head + 1} was removed from this checkpoint (pruned): "
                "it has no query or key vectors. Pick another head in the matrix.")
        return
    if method == "pca":
        proj = qkmap.project_head(vecs, layer, head, "pca")
    else:
        guess = max(5.0, 2 * vecs.n_tokens / UMAP_RATE)
        try:
            proj = in_background(f"qkmap:{vecs.folder or id(vecs)}:{layer}:{head}:umap",
                                 lambda: qkmap.project_head(vecs, layer, head, "umap"),
                                 f"UMAP of layer {layer + 1}, head {head + 1}", guess)
        except ValueError as e:         # too few points for UMAP's neighbours
            st.warning(f"UMAP cannot map these {2 * vecs.n_tokens:,} points: {e}.")
            return
    n = vecs.n_tokens
    title = f"Layer {layer + 1}, head {head + 1}: {n:,} queries and {n:,} keys, {proj.title}"
    if proj.explained:
        title += " (" + " + ".join(f"{e:.0%}" for e in proj.explained) + " of the variance)"
    st.plotly_chart(qk_figures.qk_figure(proj.coords, vecs.tokens, colour, title), key=MAP_KEY,
                    config={"displaylogo": False, "scrollZoom": True})
    alpha = qkmap.normalise(*vecs.head(layer, head)).alpha
    st.caption(f"Queries scaled by α = {alpha:.3g} and keys by 1/α, then the keys moved onto "
               "the queries' centre: each query's dot products with the keys all shift by the "
               "same amount, so its attention row is unchanged. Hover a point for its token in "
               "its review. " + ("Read from the cache; computed" if proj.cached else "Computed")
               + f" in {proj.seconds:.1f} s.")
