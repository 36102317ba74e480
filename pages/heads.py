"""Heads: which attention heads matter, what each one does, and what fine-tuning changed."""
import streamlit as st

from reviewbert.ui import checkpoints, frame, heads, heads_qkmap, state

frame.require()

st.title("Heads")
st.caption("The heads themselves, over many reviews: which of them the classifier needs "
           "(Michel et al.'s importance, checked by masking each one), how many can go "
           "(the pruning curve), what each one does (Clark et al.'s numbers, Kovaleva et al.'s "
           "patterns) and what fine-tuning changed (divergence from the base model).")

info, predictor = checkpoints.require_predictor()
if not heads.supported(predictor):
    st.stop()

picked = heads.pick_reviews(info, predictor)
if picked is None:
    st.stop()
choice, reviews = picked
res = heads.analysis(info, predictor, choice, reviews)
if res is None:
    # the map needs one pass over the reviews, not the analysis: offered before it
    if st.toggle("Meanwhile, the query–key map (one pass over the reviews)",
                 key=state.HEADS_QK_EARLY):
        heads_qkmap.section(info, predictor, reviews)
    st.stop()

importance, pruning, roles, finetune, qk = st.tabs(heads.TABS, key=state.HEADS_TAB, on_change="rerun")
# Only the open tab runs.
if importance.open:
    with importance:
        heads.importance_section(res)
if pruning.open:
    with pruning:
        heads.pruning_section(res, info)
if roles.open:
    with roles:
        heads.atlas_section(res)
if finetune.open:
    with finetune:
        heads.finetune_section(res)
if qk.open:
    with qk:
        heads_qkmap.section(info, predictor, reviews)
st.divider()
heads.head_detail(res, predictor, reviews)
heads.download(res)
