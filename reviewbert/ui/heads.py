"""The Heads page's components: choose reviews, analyse the heads once (cached beside the
checkpoint), then importance against the measured masking drop, the pruning curve, the
head atlas with its roles, what fine-tuning changed, and one head on one review.

They only draw: the numbers come from ``reviewbert.heads.analysis`` (computed through
``reviewbert.heads.importance`` and ``reviewbert.heads.roles``), the figures from
``reviewbert.heads.figures``.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from reviewbert.analysis.sources import describe
from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import figures as heads_figures
from reviewbert.heads import importance as heads
from reviewbert.heads.roles import ROLES, STAT_LABELS
from reviewbert.model.device import cpu_threads, threads_beside_training
from reviewbert.training.catalog import checkpoints_root
from reviewbert.training.runs import device_busy
from reviewbert.ui import review_picker, runtime, state
from reviewbert.ui.progress_bar import StreamlitProgress, seconds_text
from reviewbert.ui.review_picker import Choice, PickerKeys

TABS = ("Importance", "Pruning", "Roles", "Fine-tuning", "Query–key map")
KEYS = PickerKeys(state.HEADS_SOURCE, state.HEADS_FILE, state.HEADS_UPLOAD, state.HEADS_UPLOADED,
                  state.HEADS_UPLOAD_ERROR)
DEFAULT_N = 300
EXPECTED_RATE = 150
"""Review passes per second the bar assumes before the first analysis (about what the
demo reaches on a small CPU: ``bench/heads.py``); the bar then shows the real rate."""
EXAMPLE_CHOICES = 40        # reviews offered for "one head on one review"
EXAMPLE_TOKENS = 64         # at most this many tokens drawn in that heatmap


def supported(predictor) -> bool:
    why = heads.unsupported_reason(predictor.model)
    if why:
        st.info(why)
    return why is None


def pick_reviews(info, predictor) -> tuple[Choice, list] | None:
    """(the choice, the analysed sample) after the source picker and the sample size."""
    choice = review_picker.pick_data(info, predictor, KEYS, label="Reviews to analyse")
    if choice is None:
        return None
    total = len(choice.reviews)
    st.session_state.setdefault(state.HEADS_N, min(DEFAULT_N, total))
    if st.session_state[state.HEADS_N] > total:
        st.session_state[state.HEADS_N] = total
    n = st.number_input(f"Reviews analysed (a seeded sample of the {total:,})", 1, total,
                        key=state.HEADS_N, step=50,
                        help="Every head is masked alone on each of them (72 passes for a 6 x 12 "
                             "model) and the pruning curve adds 64 more: time grows with them, "
                             "and so does the precision (1 point of accuracy is 3 of 300 reviews).")
    return choice, head_analysis.sample_reviews(choice.reviews, int(n), seed=0)


def analysis(info, predictor, choice: Choice, reviews: list):
    """The analysis of ``reviews``: from the cache, or computed on request with a bar."""
    kw = dict(max_length=predictor.max_length, base_model=info.base_model,
              settings=head_analysis.Settings())
    key = head_analysis.analysis_key(info.path, reviews, **kw)
    res = head_analysis.lookup(info.path, reviews, **kw)
    kept = st.session_state.get(state.HEADS_RESULT)
    if res is None and kept and kept[0] == key:
        res = kept[1]                       # computed, but there was nowhere to cache it
    if res is None and st.session_state.get(state.HEADS_RUN) == key:
        res = _compute(info, predictor, choice, reviews, kw)
        st.session_state[state.HEADS_RESULT] = (key, res)
    if res is None:
        n = len(reviews)
        passes = head_analysis.planned(n, predictor.model, kw["settings"])
        st.info(f"The heads of this checkpoint have not been analysed on these **{n:,} reviews** "
                f"({describe(choice.source)}) yet. It takes {passes:,} review passes, about "
                f"{seconds_text(passes / EXPECTED_RATE)} on a 2-core CPU; the result is then "
                "saved beside the checkpoint, so the next visit (and `python -m reviewbert "
                "heads`) reads it instead.")
        if runtime.button(st, f"Analyse the heads on {n:,} reviews", type="primary", key="heads_analyse"):
            st.session_state[state.HEADS_RUN] = key
            st.rerun()
        return None
    st.caption(f"{res.n:,} reviews · {describe(res.source or choice.source)} · masking and "
               f"pruning passes in {res.precision}"
               + (" · read from the cache beside the checkpoint" if res.from_cache else
                  f" · computed in {sum(res.seconds.values()):.0f} s"))
    return res


def _compute(info, predictor, choice: Choice, reviews: list, kw: dict):
    progress = StreamlitProgress(head_analysis.planned(len(reviews), predictor.model,
                                                       kw["settings"]),
                                 "Analysing the heads", unit="review passes")
    busy = predictor.device.type == "cpu" and device_busy(checkpoints_root())
    try:
        with cpu_threads(threads_beside_training(busy)):
            return head_analysis.analyze(predictor.model, predictor.tokenizer, info.path, reviews,
                                         info.scheme, progress=progress,
                                         on_stage=progress.describe, source=choice.source, **kw)
    finally:
        progress.close()


# ------------------------------------------------------------------ clicks
def _clicked(chart_key: str):
    """on_select of a layers × heads heatmap: show the clicked head on a review below."""
    def pick():
        sel = st.session_state.get(chart_key) or {}
        points = (sel.get("selection") or {}).get("points") or []
        if points:
            st.session_state[state.HEADS_LAYER] = int(points[0]["y"])
            st.session_state[state.HEADS_HEAD] = int(points[0]["x"])
    return pick


def _grid_chart(fig, name: str) -> None:
    key = f"{state.HEADS_CHART}{name}"
    st.plotly_chart(fig, key=key, on_select=_clicked(key), selection_mode="points",
                    config={"displayModeBar": False}, width="content")


# ------------------------------------------------------------------ sections
def importance_section(res) -> None:
    st.subheader("Which heads does the classifier need?")
    rho, rho_acc = res.spearman("probability"), res.spearman("accuracy")
    _grid_chart(heads_figures.importance_figure(res, rho), "importance")
    st.caption("Michel et al. (2019): a head's importance is |∂loss/∂ξ| summed over the reviews, "
               "ξ a gate on the head's output, then divided by its layer's L2 norm. Hover a head "
               "for what masking it alone really costs on the same reviews; click it to see it "
               "on a review below.")
    st.markdown(f"**Does the score predict the real thing?** Spearman's ρ between importance and "
                f"the measured drop of the predicted class's probability: **{_num(rho)}**; with "
                f"the drop in accuracy: {_num(rho_acc)} (coarser: one review is "
                f"{100 / res.n:.2g} points).")
    st.plotly_chart(heads_figures.importance_scatter(res, rho), key="heads_scatter")
    top = head_analysis.top_heads(res, 8)
    st.dataframe(pd.DataFrame([{"layer": t["layer"], "head": t["head"],
                                "importance": t["importance"],
                                "probability drop (points)": 100 * t["probability_drop"],
                                "accuracy drop (points)": 100 * t["accuracy_drop"],
                                "role": t["role"]} for t in top]),
                 hide_index=True, width="content",
                 column_config={c: st.column_config.NumberColumn(format="%.2f")
                                for c in ("importance", "probability drop (points)",
                                          "accuracy drop (points)")})


def pruning_section(res, info) -> None:
    st.subheader("How many heads can go?")
    st.plotly_chart(heads_figures.pruning_figure(res.pruning), key="heads_pruning")
    st.markdown(f"**{head_analysis.removable_sentence(res)}**")
    st.caption("Masked means ξ = 0 for those heads, all at once, and every review scored again. "
               "The dotted line is Michel et al.'s result on BERT (40 % of the heads pruned with "
               "no noticeable loss); random order is the mean of "
               f"{res.settings.get('random_draws', '?')} draws, the band their range. The "
               "importance that "
               "orders the heads was measured on these same reviews: on new reviews expect a "
               "little less.")
    frac, _ = head_analysis.removable(res)
    suggest = frac if frac > 0 else 0.1
    st.markdown("A checkpoint with those heads **physically removed** (smaller Q, K, V and "
                "output matrices; scored on the validation split so that the test split still "
                "measures it):")
    st.code(f"python -m reviewbert heads prune --checkpoint {info.path} --fraction {suggest:g} "
            f"--out {info.path}-pruned", language="bash")


def atlas_section(res) -> None:
    st.subheader("What does each head do?")
    options = ["role", *STAT_LABELS]
    labels = {"role": "role (Kovaleva et al.)", **STAT_LABELS}
    colour = st.selectbox("Colour by", options, key=state.HEADS_COLOUR, format_func=labels.get)
    _grid_chart(heads_figures.atlas_figure(res, colour), "atlas")
    counts = {r: sum(row.count(r) for row in res.roles) for r in ROLES}
    st.caption(" · ".join(f"{r}: {n}" for r, n in counts.items()) + ". Hover a head for all its "
               "numbers (Clark et al. 2019), click it to see it on a review below.")
    with st.expander("How a head gets its role"):
        st.markdown(ROLE_RULE)


ROLE_RULE = """With V = attention on [CLS] + [SEP] + punctuation and D = attention on the previous
token + itself + the next token (averaged over every row of every review), the first rule
that holds:

1. **vertical**: V ≥ 0.5 and D < 0.2 (every row looks at the same few tokens);
2. **diagonal**: D ≥ 0.5 and V < 0.3 (each token looks at itself or a neighbour);
3. **vertical + diagonal**: V + D ≥ 0.6, with V ≥ 0.2 and D ≥ 0.2;
4. **block**: the attention kept in the token's own sentence exceeds an even spread by
   0.15 or more (sentences end at . ! ?);
5. **heterogeneous**: anything else.

Kovaleva et al. (2019) named these patterns by looking at attention maps; here the numbers
decide, so a head near a threshold could go either way: hover it for its numbers."""


def finetune_section(res) -> None:
    st.subheader("What did fine-tuning change?")
    if res.finetune_js is None:
        st.info(f"Not available: {res.finetune_note}.")
        return
    _grid_chart(heads_figures.finetune_figure(res.finetune_js, res.alive), "finetune")
    st.markdown(f"**{head_analysis.finetune_sentence(res)}**")
    st.caption(f"For each head: the Jensen–Shannon divergence (bits, 0 = same, 1 = disjoint) "
               f"between the attention rows of the base model ({res.base_model}) and of this "
               "checkpoint on the same reviews, averaged over every row.")


# ------------------------------------------------------------------ one head on one review
def head_detail(res, predictor, reviews: list) -> None:
    st.subheader("One head on one review")
    L, H = res.alive.shape
    c1, c2, c3 = st.columns([1, 1, 4])
    layer = c1.selectbox("Layer", list(range(L)), key=state.HEADS_LAYER,
                         format_func=lambda i: f"layer {i + 1}")
    head = c2.selectbox("Head", list(range(H)), key=state.HEADS_HEAD,
                        format_func=lambda h: f"head {h + 1}")
    rows = _example_rows(reviews)
    row = c3.selectbox("Review", rows, key=state.HEADS_EXAMPLE,
                       format_func=lambda i: _preview(reviews[i].text))
    if not res.alive[layer, head]:
        st.info(f"Layer {layer + 1}, head {head + 1} was removed from this checkpoint.")
        return
    _head_numbers(res, layer, head)
    pred = predictor.predict(reviews[row].text)
    n = min(len(pred.tokens), EXAMPLE_TOKENS)
    if len(pred.tokens) > n:
        st.caption(f"The first {n} of its {len(pred.tokens)} tokens are drawn (rows and columns); "
                   "the weights are the model's own, from the whole review.")
    fig = heads_figures.head_attention_figure(pred.tokens[:n], pred.attentions[layer, head, :n, :n],
                                              layer, head, res.roles[layer][head])
    st.plotly_chart(fig, key="heads_example_fig")


def _example_rows(reviews: list) -> list[int]:
    """Rows offered as examples: shorter reviews first (a readable token x token map)."""
    order = sorted(range(len(reviews)), key=lambda i: (len(reviews[i].text) > 400, i))
    return order[:EXAMPLE_CHOICES]


def _preview(text: str, n: int = 90) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[:n] + "…"


def _head_numbers(res, layer: int, head: int) -> None:
    a = {s: float(v[layer, head]) for s, v in res.atlas.items()}
    js = None if res.finetune_js is None else float(res.finetune_js[layer, head])
    st.markdown(
        f"**Layer {layer + 1}, head {head + 1}: {res.roles[layer][head]}.** Importance "
        f"{res.importance[layer, head]:.2f}; masking it alone costs "
        f"{100 * res.masking.accuracy_drop[layer, head]:.1f} points of accuracy and "
        f"{100 * res.masking.probability_drop[layer, head]:.2f} points of probability. Attention "
        f"on [CLS] {a['cls']:.2f}, [SEP] {a['sep']:.2f}, punctuation {a['punct']:.2f}, previous "
        f"{a['prev']:.2f}, itself {a['self']:.2f}, next {a['next']:.2f}; entropy "
        f"{a['entropy']:.2f} nats" + ("" if js is None else f"; JS from the base model {js:.3f} bits")
        + ".")


def download(res) -> None:
    st.download_button("Download the analysis (JSON)", lambda: json.dumps(res.to_json()),
                       "heads.json", "application/json", key="heads_dl_json", on_click="ignore",
                       help="What `python -m reviewbert heads --json` prints: importance, masking "
                            "drops, Spearman, pruning curves, atlas and roles, JS divergence")


def _num(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.2f}"
