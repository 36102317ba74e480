""""Why this star and not the next": contrastive Integrated Gradients on Predict's "Which
words mattered?" tab (compute: ``reviewbert/explain/contrast.py``).

Two pickers (rating a, rating b; at first the predicted rating and the runner-up), then
two columns: plain IG of log p(predicted), as the rows above it show, and IG of
logit[a] − logit[b], green toward a and red toward b, under a caption with the
completeness check. It appears once the gradient methods have run (plain IG is what it
is drawn beside). It costs as much as plain IG, so the first pair of a prediction waits
for its button; once asked, another pair is computed at once under a progress bar in the
button's place. Results are kept per prediction in the section's session-state cache and
beside the checkpoint (the explain cache): a pair any session computed draws at once.
"""
from __future__ import annotations

import streamlit as st

from reviewbert.explain import cache as explanation_cache
from reviewbert.explain import contrast as contrast_ig
from reviewbert.explain import methods as explain
from reviewbert.ui import runtime
from reviewbert.ui.prediction_card import show_highlight
from reviewbert.ui.progress_bar import StreamlitProgress
from reviewbert.viz.highlight import highlight_html
from reviewbert.viz.markdown import md_escape

TITLE = "Why this star and not the next"
TOWARD_A, TOWARD_B = (46, 160, 67), (214, 39, 40)   # green, red: the two ratings, not for/against
ROW_CLASS = "rb-contrast"


def _pair(pred, key_prefix: str, cache: dict) -> tuple[int, int]:
    """The two pickers; set to (predicted, runner-up) once per prediction, then the user's."""
    names = contrast_ig.rating_names(pred)
    ka, kb = f"{key_prefix}_contrast_a", f"{key_prefix}_contrast_b"
    if not cache.get("contrast_pair_set"):
        # the pickers outlive a prediction (their keys are fixed): a new review starts again
        # from its own predicted rating and runner-up
        st.session_state[ka], st.session_state[kb] = contrast_ig.default_pair(pred)
        cache["contrast_pair_set"] = True
    c1, c2 = st.columns(2)
    options = list(range(len(names)))
    a = c1.selectbox("Why rating a…", options, format_func=lambda i: names[i], key=ka)
    b = c2.selectbox("…and not rating b", options, format_func=lambda i: names[i], key=kb)
    return a, b


def _compute(predictor, pred, a: int, b: int, steps: int, slot, cache: dict,
             key_prefix: str) -> contrast_ig.Contrast | None:
    """The contrast: from the explain cache at once; else, once asked for (the button the
    first time per prediction, then every new pair), under a progress bar in ``slot``."""
    method = contrast_ig.ContrastiveIG(a, b, steps)
    if explanation_cache.stored(predictor, pred, method) is not None:
        return contrast_ig.contrast(predictor, pred, a, b, steps)
    guess = explain.GRADIENT_RATE.estimate(pred.n_tokens, method.passes(steps))
    names = contrast_ig.rating_names(pred)
    if not cache.get("contrast_asked"):
        # as costly as plain IG: not spent on every click of the gradient methods' button
        if not runtime.button(slot, f"Contrast {md_escape(names[a])} with {md_escape(names[b])} "
                                    f"({explain.fmt_seconds(guess)})",
                              key=f"{key_prefix}_contrast_run",
                              help=f"Integrated Gradients of logit[{names[a]}] − logit[{names[b]}]: "
                                   f"about {method.passes(steps)} forward + backward passes."):
            return None
        cache["contrast_asked"] = True
    bar = StreamlitProgress(method.cost(pred), f"Contrastive IG ({steps} steps)", unit="wordpieces",
                            guess=guess, where=slot)
    try:
        return contrast_ig.contrast(predictor, pred, a, b, steps, progress=bar, on_wait=bar.waiting)
    except Exception as e:  # noqa: BLE001 - say why, keep the rest of the tab
        st.warning(f"Contrastive IG failed on this model: {type(e).__name__}: {e}")
        return None
    finally:
        bar.close()


def _row(title: str, detail: str, block: str) -> None:
    st.markdown(f"**{md_escape(title)}** <span style='color:#777;font-size:0.85rem'>"
                f"({md_escape(detail)})</span>", unsafe_allow_html=True)
    show_highlight(block)


def _columns(pred, read: str, ig, c: contrast_ig.Contrast) -> None:
    """Plain IG on the left, the contrast on the right; the words the model read."""
    tail = "…" if read != pred.text else ""
    left, right = st.columns(2)
    with left:
        _row(f"Integrated Gradients: {pred.label}", ig.detail,
             highlight_html(read, pred.word_spans, ig.scores, signed=True, css_class=ROW_CLASS) + tail)
    with right:
        _row(f"{c.a_name} rather than {c.b_name}", c.detail,
             highlight_html(read, pred.word_spans, c.scores, rgb=TOWARD_A, signed=True,
                            rgb_neg=TOWARD_B, css_class=ROW_CLASS) + tail)
    a, b = md_escape(c.a_name), md_escape(c.b_name)
    st.caption(f"Left: orange for {md_escape(pred.label)}, blue against it (against every other "
               f"rating at once). Right: :green[green] pushes the model toward **{a}** rather than "
               f"**{b}**, :red[red] toward **{b}**; the stronger the colour, the larger the "
               f"word's share of logit[{a}] − logit[{b}]. Completeness: "
               f"{md_escape(contrast_ig.completeness_text(c))}."
               + (" Read from the cache next to the checkpoint." if c.from_cache else ""))
    if c.delta_too_large:
        st.warning(f"Contrastive IG did not converge well even at {c.n_steps} steps (delta "
                   f"{c.relative_delta:.0%} of the change): the words do not add up to it.")
    if c.cache_error:
        st.caption(f"Not cached: {md_escape(c.cache_error)}")


def why_not_the_next(predictor, pred, grads, steps: int, cache: dict, key_prefix: str) -> None:
    """The section, under the other methods. ``grads``: the gradient methods' Outcome (None
    until they ran); ``cache``: this prediction's session-state dict of explanations."""
    st.markdown(f"##### {TITLE}")
    ig = next((r for r in (grads.results if grads is not None else [])
               if r.method == "integrated_gradients"), None)
    if ig is None:
        st.caption("Add the gradient methods above to ask why the model chose one rating "
                   "rather than another (Integrated Gradients of the difference of their logits).")
        return
    a, b = _pair(pred, key_prefix, cache)
    try:
        contrast_ig.check_pair(pred, a, b)
    except contrast_ig.ContrastError as e:
        st.info(md_escape(str(e)[:1].upper() + str(e)[1:]) + ".")
        return
    done = cache.setdefault("contrast", {})
    slot = st.empty()
    if (a, b, steps) not in done:
        got = _compute(predictor, pred, a, b, steps, slot, cache, key_prefix)
        if got is None:
            return
        done[(a, b, steps)] = got
    read = pred.text[:pred.word_spans[-1][1]] if pred.truncated and pred.word_spans else pred.text
    _columns(pred, read, ig, done[(a, b, steps)])
