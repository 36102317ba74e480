""""Which words mattered?": every explanation method on one prediction, their agreement
(shared by the Predict page and the Error analysis page's review card).

Latency budget of the Predict page: the attention methods (raw attention, rollout,
value norm) draw at once: rollout is a few small matrix products, value norm one
eager forward pass without gradients (tens of ms at 256 tokens). Gradient ×
input and Integrated Gradients cost about IG-steps + 3 forward + backward passes,
LIME and occlusion a few hundred forward passes (seconds at 256 tokens on a CPU),
so they run only when their button is pressed,
inside a fragment: the button reruns this section alone, and the prediction and
the attention views above it are already drawn and never wait. Results are kept
per prediction in session state, so moving a slider does not recompute them.
"""
from __future__ import annotations

import streamlit as st

from reviewbert.explain import cache as explanation_cache
from reviewbert.explain import figures as explain_figures
from reviewbert.explain import methods as explain
from reviewbert.ui import predict_contrast, runtime
from reviewbert.ui.prediction_card import show_highlight, token_chart
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.highlight import highlight_html

ROW_CLASS = "rb-explain"   # the highlighted rows (not "rb-highlight": that is the page's view)
IG_STEPS_HELP = (f"IG doubles this (up to {explain.IG_MAX_STEPS} steps) while its convergence delta is "
                 f"above {explain.DELTA_WARN:.0%} of f(x) − f(baseline). Each step is about one forward "
                 "+ backward pass of the model.")


# --------------------------------------------------------- which words mattered
def _cache(key_prefix: str, predictor, pred) -> dict:
    """This prediction's explanations, kept in session state across reruns."""
    slot = f"{key_prefix}_cache"
    key = (id(predictor), pred.text, pred.max_length, int(pred.label_id))
    cache = st.session_state.get(slot)
    if not cache or cache.get("key") != key:
        cache = {"key": key, "value_norm": {}, "gradient": {}, "perturbation": None}
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
    results, notes = [explain.RawAttention(layer, head).run(predictor, pred),
                      explain.Rollout().run(predictor, pred)], []
    vn = cache["value_norm"].get((layer, head))
    if vn is None:
        try:
            vn = cache["value_norm"][(layer, head)] = explain.ValueNorm(layer, head).run(predictor, pred)
        except explain.Unsupported as e:
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
    st.caption("Attention shows where [CLS] looks; that is not always what decides. Seven ways "
               "to score each word for the predicted class, side by side: three read the "
               "attention (raw, rollout through all layers, attention × value-vector norm), two "
               "follow the gradient of log p(predicted) through the whole network "
               "(gradient × input, Integrated Gradients), two delete words and ask the model "
               "again (LIME, occlusion). Orange: for the prediction; blue (signed methods "
               "only): against it.")
    layer, head = _layer_head(pred, key_prefix, controls)

    @st.fragment
    def section():
        cache = _cache(key_prefix, predictor, pred)
        results, notes = _attention_results(predictor, pred, layer, head, cache)
        steps = st.selectbox("Integrated Gradients steps (first try)", explain.IG_STEP_CHOICES,
                             index=explain.IG_STEP_CHOICES.index(explain.IG_STEPS), key=f"{key_prefix}_steps",
                             help=IG_STEPS_HELP)
        grads = cache["gradient"].get(steps)
        slot = st.empty()   # the button, then a line in its place: nothing below moves up
        if grads is None:
            guess = explain.GRADIENT_RATE.estimate(pred.n_tokens, explain.gradient_passes(steps))
            grads = cache["gradient"][steps] = _slow_methods(
                predictor, pred, slot, explain.gradient_methods(steps),
                f"Gradient × input and Integrated Gradients ({steps} steps)",
                lambda bar: explain.run_gradient_methods(predictor, pred, steps, progress=bar),
                button=f"Add the gradient methods ({explain.fmt_seconds(guess)})", guess=guess,
                key=f"{key_prefix}_run",
                help=f"Gradient × input and Integrated Gradients ({steps} steps): about "
                     f"{explain.gradient_passes(steps)} forward + backward passes of the model "
                     f"over {pred.n_tokens} tokens. The views above do not wait for them.")
        if grads is not None:
            slot.caption(f"Gradient methods: {_took(grads)} for {pred.n_tokens} tokens "
                         f"({steps} IG steps).")
        results = results + (grads.results if grads is not None else []) \
            + _perturbation(predictor, pred, cache, key_prefix)
        _draw(pred, results, notes, key_prefix)
        predict_contrast.why_not_the_next(predictor, pred, grads, steps, cache, key_prefix)
    section()


def _perturbation(predictor, pred, cache: dict, key_prefix: str) -> list:
    """LIME and occlusion, on request (forward passes only, but hundreds of them)."""
    slot = st.empty()
    if cache["perturbation"] is None:
        passes = explain.perturbation_passes(len(pred.words))
        guess = explain.PERTURBATION_RATE.estimate(pred.n_tokens, passes)
        cache["perturbation"] = _slow_methods(
            predictor, pred, slot, explain.perturbation_methods(), "LIME and occlusion",
            lambda bar: explain.run_perturbation_methods(predictor, pred, progress=bar),
            button=f"Add LIME and occlusion ({explain.fmt_seconds(guess)})", guess=guess,
            key=f"{key_prefix}_perturb",
            help=f"LIME: {explain.LIME_SAMPLES} copies of the review with words deleted; "
                 f"occlusion: each of the {len(pred.words)} words deleted in turn. Forward "
                 "passes only, batched.")
    done = cache["perturbation"]
    if done is None:
        return []
    slot.caption(f"LIME and occlusion: {_took(done)} for {pred.n_tokens} tokens.")
    return done.results


def _took(done: explanation_cache.Outcome) -> str:
    seconds = f"{sum(r.seconds for r in done.results):.1f} s"
    return f"{seconds}, read from the cache next to the checkpoint" if done.from_cache else seconds


def _slow_methods(predictor, pred, slot, methods, what: str, run, *, button: str, guess,
                  key: str, help: str) -> explanation_cache.Outcome | None:
    """Methods that take seconds: read from the cache next to the checkpoint when any
    session computed them before; else, on a click, computed under a progress bar in the
    button's place (or waited for, while another session computes the very same), then
    cached. None: not asked for yet, or failed (said why)."""
    ckpt, cache_key = explanation_cache.place(predictor, pred, methods)
    got = explanation_cache.load(ckpt, cache_key, pred)
    if got is not None:
        return explanation_cache.Outcome(got, True)
    if not runtime.button(slot, button, key=key, help=help):
        return None
    bar = StreamlitProgress(explain.cost(methods, pred), what, unit="wordpieces", guess=guess,
                            where=slot)
    try:
        out = explanation_cache.cached_or_computed(ckpt, cache_key, lambda: run(bar),
                                                   on_wait=bar.waiting, pred=pred)
    except Exception as e:  # noqa: BLE001 - say why, keep the other methods
        st.warning(f"{what} failed on this model: {type(e).__name__}: {e}")
        return None
    finally:
        bar.close()
    if out.cache_error:
        st.caption(f"Not cached: {out.cache_error}")
    return out


def _draw(pred, results, notes, key_prefix: str):
    rho = explain.spearman_matrix(results)
    st.markdown(f"**Reading:** {explain.reading(results, pred, rho)}")
    for note in notes:
        st.caption(note)
    for r in results:
        if r.delta_too_large:
            st.warning(f"Integrated Gradients did not converge well even at {r.n_steps} steps: "
                       f"its convergence delta is {r.relative_delta:.0%} of f(x) − f(baseline) "
                       f"= {r.output_diff:.3f} (more than {explain.DELTA_WARN:.0%}), so its scores do "
                       "not add up to the output change; read them with care.")
    # A switch, not tabs: tabs would build and draw the wide heatmap on every prediction.
    view = st.segmented_control("Show as", ["Highlighted text", "Heatmap"],
                                default="Highlighted text", key=f"{key_prefix}_view")
    if view != "Heatmap":
        # the words the model read: the rest of a truncated review has no score to show
        read = pred.text[:pred.word_spans[-1][1]] if pred.truncated and pred.word_spans \
            else pred.text
        if len(read) < len(pred.text):
            st.caption(f"Each row shows the review up to the last word the model read "
                       f"({pred.max_length - 2} wordpieces); the rest has no score.")
        for r in results:
            extra = f" · {r.seconds * 1000:.0f} ms" if r.seconds else ""
            if r.relative_delta is not None:
                extra += f" · convergence delta {r.relative_delta:.1%}"
            st.markdown(f"**{r.label}** <span style='color:#777;font-size:0.85rem'>"
                        f"({explain.md_escape(r.detail)}{extra})</span>", unsafe_allow_html=True)
            show_highlight(highlight_html(read, pred.word_spans, r.scores, signed=r.signed,
                                          css_class=ROW_CLASS) + ("…" if read != pred.text else ""))
    else:
        token_chart(explain_figures.methods_heatmap(results, pred.words), f"{key_prefix}_heatmap")
    if len(results) > 1:
        st.plotly_chart(explain_figures.agreement_heatmap([r.label for r in results], rho),
                        key=f"{key_prefix}_rho", config={"displayModeBar": False})
        st.caption("Spearman ρ between two methods' word rankings: 1 = same order, 0 = "
                   "unrelated, negative = opposite. Needs at least 3 words.")
