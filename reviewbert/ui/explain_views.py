"""Streamlit sections: "Which words mattered?" for one prediction, and the
faithfulness run over a checkpoint's test split.

Latency budget of the Predict page: the attention methods (raw attention, rollout,
value norm) draw at once: rollout is a few small matrix products, value norm one
eager forward pass without gradients (tens of ms at 256 tokens). Gradient ×
input and Integrated Gradients cost about IG-steps + 3 forward + backward passes
(seconds at 256 tokens on a CPU), so they run only when the button is pressed,
inside a fragment: the button reruns this section alone, and the prediction and
the attention views above it are already drawn and never wait. Results are kept
per prediction in session state, so moving a slider does not recompute them.
"""
from __future__ import annotations

import json
import time

import pandas as pd
import streamlit as st

from .. import explain as E
from .. import explain_figures as XF
from .. import faithfulness as FA
from ..examples import builtin_examples
from ..figures import highlight_html
from . import predict_panel as P

ROW_CLASS = "rb-explain"   # the highlighted rows (not "rb-highlight": that is the page's view)
IG_STEPS_HELP = (f"IG doubles this (up to {E.IG_MAX_STEPS} steps) while its convergence delta is "
                 f"above {E.DELTA_WARN:.0%} of f(x) − f(baseline). Each step is about one forward "
                 "+ backward pass of the model.")


# --------------------------------------------------------- which words mattered
def _cache(key_prefix: str, predictor, pred) -> dict:
    """This prediction's explanations, kept in session state across reruns."""
    slot = f"{key_prefix}_cache"
    key = (id(predictor), pred.text, pred.max_length, int(pred.label_id))
    cache = st.session_state.get(slot)
    if not cache or cache.get("key") != key:
        cache = {"key": key, "value_norm": {}, "gradient": {}}
        st.session_state[slot] = cache
    return cache


def _layer_head(pred, key_prefix: str, controls: dict | None) -> tuple[int, int | None]:
    if controls is not None:
        return controls["layer"], controls["head"]
    c1, c2 = st.columns(2)
    layer = c1.selectbox("Layer (raw attention, value norm)", list(range(pred.num_layers)),
                         index=pred.num_layers - 1, format_func=lambda i: f"layer {i + 1}",
                         key=f"{key_prefix}_layer")
    head = c2.selectbox("Head", [None] + list(range(pred.num_heads)), key=f"{key_prefix}_head",
                        format_func=lambda h: "mean of heads" if h is None else f"head {h + 1}")
    return layer, head


def _attention_results(predictor, pred, layer, head, cache) -> tuple[list, list[str]]:
    results, notes = [E.RawAttention(layer, head).run(predictor, pred),
                      E.Rollout().run(predictor, pred)], []
    vn = cache["value_norm"].get((layer, head))
    if vn is None:
        try:
            vn = cache["value_norm"][(layer, head)] = E.ValueNorm(layer, head).run(predictor, pred)
        except E.Unsupported as e:
            notes.append(f"Attention × value norm is not available: {e}.")
    if vn is not None:
        results.append(vn)
    return results, notes


def which_words_mattered(predictor, pred, key_prefix: str = "ww", controls: dict | None = None):
    """The section: every method's word scores for ``pred``, their agreement and a reading.

    ``controls`` (the page's ``V.attention_controls``): raw attention and value norm
    follow its layer and head; without it the section draws its own two pickers.
    ``key_prefix`` keeps the widget keys of several uses apart (one per page).
    """
    st.subheader("Which words mattered?")
    st.caption("Attention shows where [CLS] looks; that is not always what decides. Five ways "
               "to score each word for the predicted class, side by side: three read the "
               "attention (raw, rollout through all layers, attention × value-vector norm), two "
               "follow the gradient of log p(predicted) through the whole network "
               "(gradient × input, Integrated Gradients). Orange: for the prediction; blue "
               "(signed methods only): against it.")
    layer, head = _layer_head(pred, key_prefix, controls)

    @st.fragment
    def section():
        cache = _cache(key_prefix, predictor, pred)
        results, notes = _attention_results(predictor, pred, layer, head, cache)
        steps = st.selectbox("Integrated Gradients steps (first try)", E.IG_STEP_CHOICES,
                             index=E.IG_STEP_CHOICES.index(E.IG_STEPS), key=f"{key_prefix}_steps",
                             help=IG_STEPS_HELP)
        grads = cache["gradient"].get(steps)
        slot = st.empty()   # the button, then a line in its place: nothing below moves up
        if grads is None:
            guess = E.GRADIENT_RATE.estimate(pred.n_tokens, E.gradient_passes(steps))
            if slot.button(f"Add the gradient methods ({E.fmt_seconds(guess)})",
                         key=f"{key_prefix}_run",
                         help=f"Gradient × input and Integrated Gradients ({steps} steps): about "
                              f"{E.gradient_passes(steps)} forward + backward passes of the model "
                              f"over {pred.n_tokens} tokens. The views above do not wait for them."):
                try:
                    with st.spinner(f"Integrated Gradients, {steps} steps…"):
                        grads = cache["gradient"][steps] = E.run_gradient_methods(predictor, pred, steps)
                except Exception as e:  # noqa: BLE001 - say why, keep the attention methods
                    st.warning(f"The gradient methods failed on this model: {type(e).__name__}: {e}")
        if grads:
            slot.caption(f"Gradient methods: {sum(r.seconds for r in grads):.1f} s for "
                         f"{pred.n_tokens} tokens ({steps} IG steps).")
        results = results + (grads or [])
        _draw(pred, results, notes, key_prefix)
    section()


def _draw(pred, results, notes, key_prefix: str):
    rho = E.spearman_matrix(results)
    st.markdown(f"**Reading:** {E.reading(results, pred, rho)}")
    for note in notes:
        st.caption(note)
    for r in results:
        if r.delta_too_large:
            st.warning(f"Integrated Gradients did not converge well even at {r.n_steps} steps: "
                       f"its convergence delta is {r.relative_delta:.0%} of f(x) − f(baseline) "
                       f"= {r.output_diff:.3f} (more than {E.DELTA_WARN:.0%}), so its scores do "
                       "not add up to the output change; read them with care.")
    # A switch, not tabs: tabs would build and draw the wide heatmap on every prediction.
    view = st.segmented_control("Show as", ["Highlighted text", "Heatmap"],
                                default="Highlighted text", key=f"{key_prefix}_view")
    if view != "Heatmap":
        for r in results:
            extra = f" · {r.seconds * 1000:.0f} ms" if r.seconds else ""
            if r.relative_delta is not None:
                extra += f" · convergence delta {r.relative_delta:.1%}"
            st.markdown(f"**{r.label}** <span style='color:#777;font-size:0.85rem'>"
                        f"({E.md_escape(r.detail)}{extra})</span>", unsafe_allow_html=True)
            st.markdown(highlight_html(pred.text, pred.word_spans, r.scores, signed=r.signed,
                                       css_class=ROW_CLASS), unsafe_allow_html=True)
    else:
        st.plotly_chart(XF.methods_heatmap(results, pred.words), key=f"{key_prefix}_heatmap")
    if len(results) > 1:
        st.plotly_chart(XF.agreement_heatmap([r.label for r in results], rho),
                        key=f"{key_prefix}_rho", config={"displayModeBar": False})
        st.caption("Spearman ρ between two methods' word rankings: 1 = same order, 0 = "
                   "unrelated, negative = opposite. Needs at least 3 words.")


# ------------------------------------------------------------------ faithfulness
@st.cache_data(max_entries=8, show_spinner="Hashing the checkpoint's weights…")
def weights_hash(path: str, stamp: float) -> str:
    return FA.weights_sha256(path)


def _texts(info) -> tuple[list[str], str, str]:
    """(texts, source name, a note for the page) of the checkpoint's test split, or
    of the built-in examples when it cannot be rebuilt here."""
    reviews, why = P.load_test_reviews(str(info.path), P.mtime(info.path))
    if reviews is not None:
        return [r.text for r in reviews], "test split", ""
    texts = [r.text for r in builtin_examples()]
    return texts, "built-in examples", (f"This checkpoint's test split cannot be rebuilt here "
                                        f"({why}); scoring the {len(texts)} built-in examples.")


def _eta(s: float | None) -> str:
    if s is None:
        return "…"
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def faithfulness_section(predictor, info, key_prefix: str = "faith"):
    """Sample size, run (with progress and ETA) or cached result, table, charts, verdict."""
    texts, source, note = _texts(info)
    if note:
        st.info(note)
    weights = weights_hash(str(info.path), P.mtime(info.path))
    c1, c2 = st.columns(2)
    n = int(c1.number_input("Reviews to score", min_value=1, max_value=len(texts),
                            value=min(100, len(texts)), step=50, key=f"{key_prefix}_n",
                            help=f"Drawn from the {source} ({len(texts):,} reviews) with a fixed "
                                 "seed: the first n of one shuffle"))
    steps = c2.selectbox("Integrated Gradients steps (first try)", E.IG_STEP_CHOICES,
                         index=E.IG_STEP_CHOICES.index(E.IG_STEPS), key=f"{key_prefix}_steps",
                         help=IG_STEPS_HELP)
    settings = FA.Settings(ig_steps=int(steps))
    sample = FA.sample_texts(texts, n, seed=0)
    key = FA.cache_key(weights, predictor.max_length,
                       {"source": source, "seed": 0, "n": len(sample),
                        "texts_sha256": FA.texts_sha256(sample)}, settings)
    cached = FA.load_run(FA.cache_paths(info.path, key)[0])
    earlier = FA.list_runs(info.path, weights)
    if cached is None:
        per = [r.seconds / r.n for r in earlier if r.n]
        guess = f" (≈ {_eta(per[0] * n)} at the last run's pace)" if per else ""
        intro = st.empty()     # the offer to run, cleared once the run is done
        with intro.container():
            st.markdown(f"No result cached for these {n} reviews yet{guess}. Every method "
                        "explains every review, then each ranking is tested by deleting and "
                        f"keeping words ({', '.join(map(str, FA.KS))} %), against "
                        f"{FA.RANDOM_DRAWS} random rankings.")
            clicked = st.button(f"Run on {n} reviews", type="primary", key=f"{key_prefix}_run")
        if clicked:
            intro.empty()
            bar = st.progress(0.0, text="Starting…")

            def progress(done, total, elapsed, eta):
                bar.progress(done / total, text=f"{done}/{total} reviews · {_eta(elapsed)} so far "
                                                 f"· about {_eta(eta)} left")
            cached = FA.run(predictor, info.path, sample, settings, source=source,
                            progress=progress, weights=weights)
            bar.empty()
            if cached.cache_error:
                st.warning(cached.cache_error)
    shown = cached
    others = [r for r in earlier if cached is None or r.key != cached.key]
    if others:
        def name(i: int) -> str:
            if i < 0:
                return f"this run ({n} reviews)"
            r = others[i]
            return (f"{r.n} reviews of the {r.sample.get('source')}, IG "
                    f"{r.settings.get('ig_steps')} steps, "
                    f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(r.created))}")
        options = ([-1] if cached is not None else []) + list(range(len(others)))
        pick = st.selectbox("Show", options, format_func=name, key=f"{key_prefix}_show",
                            help="Results cached for this checkpoint's weights")
        shown = cached if pick < 0 else others[pick]
    if shown is not None:
        show_run(shown, key_prefix)


def show_run(result: FA.FaithfulnessRun, key_prefix: str = "faith"):
    summary = FA.summarize(result)
    st.subheader("Verdict")
    for line in FA.verdict(result, summary):
        st.markdown(line)
    st.subheader("Per method and k")
    st.caption(f"{result.n} reviews · mean drop in p(predicted class) with its "
               f"{int(FA.CONFIDENCE * 100)} % bootstrap interval over reviews. Comprehensiveness "
               "(delete the method's top k % words): higher is more faithful. Sufficiency (keep "
               "only them): lower is more faithful. AOPC: the mean over the k's.")
    st.dataframe(pd.DataFrame(FA.table_rows(result, summary)), hide_index=True,
                 key=f"{key_prefix}_table")
    st.plotly_chart(XF.faithfulness_curves(summary, result.labels, result.ks),
                    key=f"{key_prefix}_curves")
    st.plotly_chart(XF.aopc_bars(summary, result.labels), key=f"{key_prefix}_aopc")
    st.download_button("Results JSON", json.dumps(FA.summary_json(result, summary), indent=1),
                       "faithfulness.json", "application/json", key=f"{key_prefix}_dl",
                       on_click="ignore")
