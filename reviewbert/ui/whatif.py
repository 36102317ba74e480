"""What if? under a prediction (the Predict page and the Error analysis page's review card):
edit and compare, and counterfactuals on request; and the Error analysis page's
Brittleness tab. Logic in ``reviewbert.whatif.counterfactuals`` and
``reviewbert.whatif.brittleness``, figures in ``reviewbert.whatif.figures``.

Both sections are fragments: Compare, the counterfactual button and their pickers rerun
the section alone, never the prediction and the attention views above. Per session and
per review, ``{prefix}_state`` keeps the editor's history and the counterfactuals found,
and drops them when another review is predicted. The editor takes what the Predict
page's box takes: any text, cut at ``inference.MAX_CHARS`` characters (with the same
warning), drawn only through escaped HTML (``whatif/figures.diff_html``,
``viz/highlight.highlight_html``, Plotly labels through ``whatif/figures.plotly_text``), in
Markdown only as escaped words (``markdown.md_escape``), or in dataframes.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import streamlit as st

from reviewbert.explain import methods as explain
from reviewbert.model.inference import MAX_CHARS
from reviewbert.ui import runtime, state
from reviewbert.ui.prediction_card import UNREADABLE, show_highlight
from reviewbert.ui.progress_bar import StreamlitProgress, about
from reviewbert.ui.whatif_patching import where_it_acts
from reviewbert.viz.highlight import highlight_html
from reviewbert.viz.markdown import md_escape
from reviewbert.whatif import brittleness
from reviewbert.whatif import counterfactuals as whatif
from reviewbert.whatif import figures as whatif_figures

COMPARE_CLASS = "rb-compare"     # the two highlighted versions (not rb-highlight / rb-explain)
SECONDS_PER_TOKEN = [0.0]         # the last counterfactual run's pace, for the button's estimate


def _threads(predictor):
    """The Predict page's rule (``runtime.review_threads``)."""
    return runtime.review_threads(predictor)


def _state(prefix: str, predictor, pred) -> dict:
    """This review's what-if state: editor open?, history, comparison, counterfactuals."""
    slot = f"{prefix}_state"
    key = (id(predictor), pred.text, pred.max_length)
    s = st.session_state.get(slot)
    if not s or s.get("key") != key:
        s = {"key": key, "open": False, "history": whatif.History(pred.text), "cmp": None,
             "cf": {}, "auto": False, "rerun": False}
        st.session_state[slot] = s
    edit = state.take_pending_whatif(pred.text)
    if edit is not None:        # sent by another page (a behavioural test's case): compare it
        _load(prefix, s, edit)
    return s


def what_if(predictor, pred, key_prefix: str) -> None:
    """Both sections under a prediction."""
    st.header("What if?")
    st.caption("Change the review and see what the model makes of it, or let ReviewBERT look "
               "for the smallest change that turns its rating. Every number here comes from a "
               "real forward pass of the text shown.")
    edit_and_compare(predictor, pred, key_prefix)
    counterfactual_section(predictor, pred, key_prefix)


# ------------------------------------------------------------------ edit and compare
def edit_and_compare(predictor, pred, key_prefix: str) -> None:
    @st.fragment
    def section():
        st.subheader("Edit and compare")
        s = _state(key_prefix, predictor, pred)
        editor = f"{key_prefix}_editor"
        st.button("Edit and compare", key=f"{key_prefix}_edit", on_click=_load,
                  args=(key_prefix, s, pred.text, False),
                  help="Copies this review into an editor below (again: back to the original)")
        if not s["open"]:
            st.caption("Copy the review into an editor, change it, and compare both "
                       "predictions word by word.")
            return
        st.text_area("Edited review", key=editor, height=150, persist_state=state.KEEP,
                     help=f"Any text; only its first {MAX_CHARS:,} characters are read.")
        c1, c2 = st.columns([3, 1])
        names = list(explain.METHOD_NAMES)
        method = c1.selectbox("Word scores by", names, index=names.index(whatif.DEFAULT_METHOD),
                              format_func=explain.LABELS.get, key=f"{key_prefix}_method",
                              help="Attention × value norm is instant; the gradient and "
                                   "deletion methods take seconds on long reviews.")
        clicked = runtime.button(c2, "Compare", type="primary", key=f"{key_prefix}_compare")
        if clicked or s.pop("auto", False):
            _compare(predictor, pred, st.session_state.get(editor) or "", method, s)
        cmp = s["cmp"]
        if cmp is not None and cmp.after_scores is not None and cmp.after_scores.method != method:
            _compare(predictor, pred, cmp.after.text, method, s, record=False)
        if s["cmp"] is not None:
            _show_comparison(predictor, s["cmp"], key_prefix)
        _history(pred, s, key_prefix)
        where_it_acts(predictor, s["cmp"], key_prefix)
    section()


def _load(key_prefix: str, s: dict, text: str, compare_now: bool = True) -> None:
    """A button's callback (it runs before the rerun, so the editor can still be set):
    put ``text`` in the editor, open it, and compare it at once unless told not to."""
    st.session_state[f"{key_prefix}_editor"] = text
    s["open"], s["auto"] = True, compare_now


def _compare(predictor, pred, text: str, method: str, s: dict, record: bool = True) -> None:
    """Predict the edit, compare it with the original and keep it in the history."""
    if not text.strip():
        s["cmp"] = None
        st.info("The editor is empty: type a review to compare (or press **Edit and "
                "compare** to start again from the original).")
        return
    with _threads(predictor):
        after = predictor.predict(text)
    if not after.words:
        s["cmp"] = None
        st.info(UNREADABLE)
        return
    work = whatif.compare_cost(pred, after, method, predictor=predictor)
    bar = StreamlitProgress(work, f"{explain.LABELS[method]} of both versions",
                            unit="wordpieces") if work else None
    try:
        with _threads(predictor):
            cmp = whatif.compare(predictor, pred, after, method, progress=bar,
                                 on_wait=None if bar is None else bar.waiting)
    except explain.Unsupported as e:
        st.warning(f"{explain.LABELS[method]} is not available for this model: {e}")
        cmp = whatif.compare(predictor, pred, after, None)
    finally:
        if bar is not None:
            bar.close()
    cmp.after = _slim(cmp.after)
    s["cmp"] = cmp
    if record:
        s["history"].add(cmp)


def _slim(pred):
    """A Prediction without its attention weights and value vectors (19 MB at 256 tokens):
    what the comparison draws needs neither, and it stays in the session."""
    from dataclasses import replace
    return replace(pred, attentions=np.zeros((0, 0, 0, 0), dtype=np.float32), values=None)


def _rating_line(p) -> str:
    return f"**{md_escape(p.label)}** ({p.probs[p.label_id]:.0%}) {p.stars}"


def _show_comparison(predictor, cmp: whatif.Comparison, key_prefix: str) -> None:
    before, after = cmp.before, cmp.after
    c1, c2 = st.columns(2)
    c1.markdown(f"Original: {_rating_line(before)}")
    verdict = "the rating changes" if before.label_id != after.label_id else "same rating"
    c2.markdown(f"Edit: {_rating_line(after)} — {verdict}")
    if after.chars_cut:
        st.warning(f"The edit is very long: only its first {MAX_CHARS:,} characters were read.")
    if after.truncated:
        st.caption(f"The edit has {after.n_tokens_original:,} tokens; the model reads the "
                   f"first {after.max_length}.")
    names = list(before.scheme.names)
    st.plotly_chart(whatif_figures.probability_change(names, before.probs, after.probs),
                    key=f"{key_prefix}_probs", config={"displayModeBar": False})
    diff = whatif.text_diff(predictor.tokenizer, before.text, after.text)
    st.markdown(f"**The edit**: {diff.added} word{'s' * (diff.added != 1)} added (green), "
                f"{diff.removed} removed (struck through, red)."
                + (f" More than {whatif_figures.MAX_MARKED:,} changed words: the edit is shown "
                   "as typed, unmarked." if whatif_figures.too_many_changes(diff.changes) else ""))
    # Through Markdown, unlike the rows below: the edit is the text as typed, and Markdown
    # shows a NUL in it as U+FFFD, where st.html drops it (make hostile checks it is shown).
    st.markdown(whatif_figures.diff_html(diff.before, diff.before_spans, diff.after,
                                         diff.after_spans, diff.changes), unsafe_allow_html=True)
    b, a = cmp.before_scores, cmp.after_scores
    if a is None or b is None:
        return
    st.markdown(f"**{md_escape(a.label)}**, original then edit "
                f"<span style='color:#777;font-size:0.85rem'>({md_escape(a.detail)})</span>",
                unsafe_allow_html=True)
    for p, r in ((before, b), (after, a)):
        show_highlight(highlight_html(p.text, p.word_spans, r.scores, signed=r.signed,
                                      css_class=COMPARE_CLASS))
    st.plotly_chart(whatif_figures.word_change_bars(cmp.word_rows(), a.label),
                    key=f"{key_prefix}_words", config={"displayModeBar": False})


def _history(pred, s: dict, key_prefix: str) -> None:
    hist = s["history"]
    if not len(hist):
        return
    st.markdown(f"**Edits kept** (the last {hist.size}, newest first), against the original "
                f"({md_escape(pred.label)}, {pred.probs[pred.label_id]:.0%}):")
    rows = pd.DataFrame(hist.rows(pred.scheme, pred.probs))
    rows["text"] = [_preview(t) for t in rows["text"]]
    st.dataframe(rows, hide_index=True, key=f"{key_prefix}_history_table",
                 column_config={"p": st.column_config.NumberColumn(format="%.2f"),
                                rows.columns[3]: st.column_config.NumberColumn(format="%+.3f"),
                                "text": st.column_config.TextColumn(width="large")})
    c1, c2, c3 = st.columns([2, 1, 1])
    c1.selectbox("Edit", list(range(len(hist))), key=f"{key_prefix}_pick",
                        format_func=lambda i: f"edit {i + 1}: {hist.edits[i].label}",
                        label_visibility="collapsed")
    c2.button("Back to this edit", key=f"{key_prefix}_back", on_click=_back,
              args=(key_prefix, s, [e.text for e in hist.edits]))
    c3.button("Clear the edits", key=f"{key_prefix}_clear", on_click=_clear, args=(s, pred.text))


def _picked(key: str, options: list):
    """The option a selectbox holds now (a callback runs before the rerun that draws it)."""
    i = st.session_state.get(key) or 0
    return options[min(int(i), len(options) - 1)]


def _back(key_prefix: str, s: dict, texts: list[str]) -> None:
    _load(key_prefix, s, _picked(f"{key_prefix}_pick", texts))


def _clear(s: dict, original: str) -> None:
    s["history"], s["cmp"] = whatif.History(original), None


# ------------------------------------------------------------------ counterfactuals
def counterfactual_section(predictor, pred, key_prefix: str) -> None:
    @st.fragment
    def section():
        st.subheader("Counterfactuals")
        st.caption("Three ways to turn the rating, each text checked by its own forward pass "
                   "before it is shown: the fewest words whose deletion changes the rating "
                   "(greedy along one explanation's ranking, then pruned), each sentence "
                   "dropped in turn, and HotFlip's single-word swaps (ranked by the gradient "
                   "through the embedding matrix, Ebrahimi et al. 2018).")
        s = _state(key_prefix, predictor, pred)
        names = list(explain.METHOD_NAMES)
        method = st.selectbox("Deletion flip follows the ranking of", names,
                              index=names.index(whatif.DEFAULT_METHOD), format_func=explain.LABELS.get,
                              key=f"{key_prefix}_cf_method",
                              help="A more faithful ranking finds more flips: occlusion, LIME "
                                   "and Integrated Gradients take seconds on long reviews.")
        found = s["cf"].get(method)
        if found is None:
            guess = SECONDS_PER_TOKEN[0] * pred.n_tokens
            when = f" (about {guess:.1f} s)" if guess else ""
            slot = st.empty()      # the button, gone once it has done its work
            if not runtime.button(slot, f"Find counterfactuals{when}", key=f"{key_prefix}_cf_run"):
                return
            slot.empty()
            found = s["cf"][method] = _find(predictor, pred, method)
        _show_counterfactuals(predictor, pred, found, key_prefix, s)
    section()


def _find(predictor, pred, method: str) -> whatif.Counterfactuals:
    guess = SECONDS_PER_TOKEN[0] * pred.n_tokens or None     # the last run's pace, if any
    left = f" · {about(guess)}" if guess else ""
    bar = st.progress(0.0, text=f"Step 1 of 3: minimal deletion flip…{left}")
    nxt = {1: "Step 2 of 3: sentence occlusion…", 2: "Step 3 of 3: HotFlip…", 3: "Done"}

    def progress(step, total, what):
        spent = time.perf_counter() - t0
        more = f" · {spent:.0f} s so far" + (f" · {about(guess - spent)} left"
                                             if guess and guess > spent else "")
        bar.progress(step / total, text=nxt[step] + more)
    t0 = time.perf_counter()
    with _threads(predictor):
        found = whatif.counterfactuals(predictor, pred, method, progress=progress)
    SECONDS_PER_TOKEN[0] = (time.perf_counter() - t0) / max(pred.n_tokens, 1)
    bar.empty()
    return found


def _show_counterfactuals(predictor, pred, found: whatif.Counterfactuals, key_prefix: str,
                          s: dict) -> None:
    st.caption(f"{found.seconds:.1f} s · {found.passes.get('search', 0)} search passes "
               f"(batched) · {found.passes.get('verify', 0)} exact fp32 passes of what is shown")
    _show_deletion(predictor, pred, found.deletion)
    _show_sentences(pred, found.sentences, key_prefix)
    _show_hotflip(pred, found.hotflip)
    every = found.all()
    if not every:
        return
    c1, c2 = st.columns([3, 1])
    c1.selectbox("Open one in the editor", list(range(len(every))), key=f"{key_prefix}_cf_pick",
                        format_func=lambda i: f"{every[i].kind}: {every[i].what}")
    c2.button("Compare in the editor", key=f"{key_prefix}_cf_send", on_click=_send,
              args=(key_prefix, s, [cf.text for cf in every]))
    if s.pop("rerun", False):
        st.rerun()          # the whole page: the editor is another fragment


def _send(key_prefix: str, s: dict, texts: list[str]) -> None:
    _load(key_prefix, s, _picked(f"{key_prefix}_cf_pick", texts))
    s["rerun"] = True


def _preview(text: str, limit: int = 300) -> str:
    """A table cell's text: one line, at most ``limit`` characters (the full text goes to
    the editor with "Compare in the editor")."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _probs_line(pred, cf: whatif.Counterfactual) -> str:
    names = pred.scheme.names
    return ", ".join(f"{md_escape(n)} {p:.1%}" for n, p in zip(names, cf.probs))


def _show_deletion(predictor, pred, flip: whatif.DeletionFlip) -> None:
    st.markdown("##### Minimal deletion flip")
    if not flip.found:
        hint = (" A more faithful ranking (occlusion, LIME, Integrated Gradients) often finds "
                "one." if flip.method == whatif.DEFAULT_METHOD else "")
        st.info(md_escape(flip.sentence(pred)) + hint)
        return
    cf = flip.counterfactual
    st.markdown(f"**{md_escape(flip.sentence(pred))}**")
    st.caption(f"Its own forward pass ({cf.precision}): {_probs_line(pred, cf)}. No word of "
               "the set can be put back and keep the change; ranked by "
               f"{md_escape(explain.LABELS.get(flip.method, flip.method))}.")
    d = whatif.text_diff(predictor.tokenizer, pred.text, cf.text)
    st.markdown(whatif_figures.diff_html(d.before, d.before_spans, d.after, d.after_spans,
                                         d.changes, css_class="rb-diff rb-cf"),
                unsafe_allow_html=True)


def _show_sentences(pred, occ: whatif.SentenceOcclusion, key_prefix: str) -> None:
    st.markdown("##### Sentence occlusion")
    if not occ.drops:
        st.info("This review is one sentence: dropping it would leave nothing to read.")
        return
    names = list(pred.scheme.names)
    st.plotly_chart(whatif_figures.sentence_bars(occ.sentences, occ.deltas, names),
                    key=f"{key_prefix}_sentences", config={"displayModeBar": False})
    table = pd.DataFrame({"sentence": [f"S{i + 1}" for i in range(len(occ.drops))],
                          "text": [_preview(t) for t in occ.sentences],
                          "rating without it": [names[d.label_id] for d in occ.drops]})
    for c, n in enumerate(names):
        table[f"Δ {n}"] = occ.deltas[:, c]
    st.dataframe(table, hide_index=True, key=f"{key_prefix}_sentence_table",
                 column_config={"text": st.column_config.TextColumn(width="large"),
                                **{f"Δ {n}": st.column_config.NumberColumn(format="%+.3f")
                                   for n in names}})
    turned = [i + 1 for i, d in enumerate(occ.drops) if d.flipped]
    st.caption((f"Dropping sentence {', '.join(f'S{i}' for i in turned)} changes the rating. "
                if turned else "No single sentence changes the rating when dropped. ")
               + (f"{occ.unread} sentence(s) after the model's last token are not read, so not "
                  "dropped. " if occ.unread else "")
               + "Sentences end at . ! ? or … before a space, or at a line break.")


def _show_hotflip(pred, hf: whatif.HotFlip) -> None:
    st.markdown("##### HotFlip: one word swapped")
    names = list(pred.scheme.names)
    if not hf.by_class:
        st.info("No neighbouring rating to move towards.")
    for c, swaps in hf.by_class.items():
        st.markdown(f"Towards **{md_escape(names[c])}** (now {pred.probs[c]:.1%}):")
        if not swaps:
            st.caption("No word of this review can be swapped (none is a single wordpiece).")
            continue
        st.dataframe(pd.DataFrame({
            "swap": [cf.what for cf in swaps], "rating after": [names[cf.label_id] for cf in swaps],
            f"p({names[c]}) after": [float(cf.probs[c]) for cf in swaps],
            "first-order estimate": [cf.estimate for cf in swaps],
            "text": [_preview(cf.text) for cf in swaps]}), hide_index=True,
            column_config={f"p({names[c]}) after": st.column_config.NumberColumn(format="%.3f"),
                           "first-order estimate": st.column_config.NumberColumn(format="%+.2f"),
                           "text": st.column_config.TextColumn(width="large")})
    st.caption(f"{whatif.HOTFLIP_RULES} {hf.positions} words could be swapped; the gradient "
               f"ranked {hf.scored:,} (word, replacement) pairs, {hf.tried} were run through "
               f"the model and the best {whatif.HOTFLIP_SHOW} per rating again in fp32"
               + (f"; {hf.dropped} swaps were dropped because the tokenizer would read them "
                  "as other pieces" if hf.dropped else "") + ". The estimate is the change of "
               "log p(target) − log p(predicted) the gradient promised.")


# ------------------------------------------------------------------ brittleness tab
def brittleness_tab(predictor, info, reviews, source: str, weights: str,
                    key_prefix: str = "err_brittle") -> None:
    """How many words must go before the rating changes, over a sample of ``reviews``
    (objects with .text and .stars): run with a progress bar and ETA, cached."""
    st.subheader("Brittleness: how many words must go before the rating changes?")
    st.caption("For each review of a sample: the fewest words whose deletion changes the "
               "predicted rating (greedy along one explanation's ranking, then pruned, every "
               "flip checked by an exact pass), up to a limit. A model that changes its mind "
               "when one word goes is brittle; compare the correct predictions with the wrong.")
    # the newest cached run of these weights and reviews, if any, sets the defaults
    last = next((r for r in brittleness.list_runs(info.path, weights)
                 if r.sample.get("source") == source and r.n <= len(reviews)), None)
    c1, c2, c3 = st.columns(3)
    n = int(c1.number_input("Reviews", 1, len(reviews), last.sample["n"] if last else
                            min(100, len(reviews)), step=50, key=f"{key_prefix}_n",
                            help=f"The first n of one fixed shuffle of the {len(reviews):,} "
                                 "reviews (the Faithfulness page's sample)"))
    names = list(explain.METHOD_NAMES)
    method = c2.selectbox("Ranking", names, index=names.index(
                              last.settings["method"] if last else brittleness.DEFAULT_METHOD),
                          format_func=explain.LABELS.get, key=f"{key_prefix}_method",
                          help="Occlusion (the default) finds the most flips; value norm is "
                               "fastest but misses many")
    top = int(c3.number_input("At most words", 1, 50, int(last.settings["max_words"]) if last
                              else whatif.MAX_WORDS, key=f"{key_prefix}_max"))
    chosen = [reviews[i] for i in brittleness.sample(len(reviews), n, 0)]
    texts, stars = [r.text for r in chosen], [r.stars for r in chosen]
    settings = brittleness.Settings(method, top).resolved(predictor.device)
    key = brittleness.cache_key(weights, predictor.max_length,
                                brittleness.describe_sample(texts, stars, source, 0), settings)
    result = brittleness.load_run(brittleness.cache_paths(info.path, key)[0])
    if result is None:
        slot = st.empty()
        if not runtime.button(slot, f"Run on {n} reviews", type="primary", key=f"{key_prefix}_run"):
            earlier = brittleness.list_runs(info.path, weights)
            if earlier:
                st.caption(f"{len(earlier)} earlier run(s) of this checkpoint are cached; "
                           "pick their settings above to see one.")
            return
        slot.empty()
        result = _run_brittleness(predictor, info, texts, stars, settings, source)
    show_brittleness(result, key_prefix)


def _run_brittleness(predictor, info, texts, stars, settings, source):
    bar = StreamlitProgress(len(texts), "Deleting words until the rating changes")
    with _threads(predictor):
        result = brittleness.measure(predictor, info.path, texts, stars, settings, source=source,
                                 progress=bar)
    bar.close()
    if result.cache_error:
        st.warning(result.cache_error)
    return result


def show_brittleness(result: brittleness.BrittlenessRun, key_prefix: str = "err_brittle") -> None:
    summary = brittleness.summarize(result)
    for line in brittleness.reading(result, summary):
        st.markdown(md_escape(line))
    st.dataframe(pd.DataFrame(brittleness.table_rows(result, summary)), hide_index=True,
                 key=f"{key_prefix}_table")
    st.caption("Share of the reviews whose rating changes when at most that many words are "
               "deleted, with Wilson 95 % intervals. Upper bounds on the smallest deletion: the "
               "search is greedy, and each set is only 1-minimal.")
    st.plotly_chart(whatif_figures.brittleness_histogram(summary, int(result.settings["max_words"])),
                    key=f"{key_prefix}_hist", config={"displayModeBar": False})
    flips = sorted((r for r in result.reviews if r.get("found")), key=lambda r: (r["k"], -r["p"]))
    if flips:
        names = result.labels
        st.markdown("**The flips with the fewest words**")
        st.dataframe(pd.DataFrame({
            "words deleted": [", ".join(r["words"]) for r in flips[:20]],
            "from": [names[r["pred"]] for r in flips[:20]],
            "to": [names[r["new_pred"]] for r in flips[:20]],
            "true": [names[r["true"]] if r.get("true") is not None else "" for r in flips[:20]]}),
            hide_index=True, key=f"{key_prefix}_flips")
    st.caption(f"{result.n} reviews · {result.seconds:.0f} s of compute · "
               + ("read from the cache" if result.from_cache else "cached beside the checkpoint"))
