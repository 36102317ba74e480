"""The Faithfulness page: ERASER comprehensiveness and sufficiency of every explanation
method on the checkpoint's test split (``reviewbert.explain.faithfulness``), run with a progress
bar and ETA, cached beside the checkpoint."""
from __future__ import annotations

import json
import time

import pandas as pd
import streamlit as st

from reviewbert.data.examples import builtin_examples
from reviewbert.explain import faithfulness
from reviewbert.explain import figures as explain_figures
from reviewbert.explain import methods as explain
from reviewbert.ui import runtime
from reviewbert.ui.explanations import IG_STEPS_HELP
from reviewbert.ui.progress_bar import StreamlitProgress, about


@st.cache_data(max_entries=8, show_spinner="Hashing the checkpoint's weights…")
def weights_hash(path: str, stamp: float) -> str:
    return faithfulness.weights_sha256(path)


def _texts(info) -> tuple[list[str], str, str]:
    """(texts, source name, a note for the page) of the checkpoint's test split, or
    of the built-in examples when it cannot be rebuilt here."""
    reviews, why = runtime.load_test_reviews(str(info.path), runtime.mtime(info.path))
    if reviews is not None:
        return [r.text for r in reviews], "test split", ""
    texts = [r.text for r in builtin_examples()]
    return texts, "built-in examples", (f"This checkpoint's test split cannot be rebuilt here "
                                        f"({why}); scoring the {len(texts)} built-in examples.")


def faithfulness_section(predictor, info, key_prefix: str = "faith"):
    """Sample size, run (with progress and ETA) or cached result, table, charts, verdict."""
    texts, source, note = _texts(info)
    if note:
        st.info(note)
    weights = weights_hash(str(info.path), runtime.mtime(info.path))
    c1, c2 = st.columns(2)
    n = int(c1.number_input("Reviews to score", min_value=1, max_value=len(texts),
                            value=min(100, len(texts)), step=50, key=f"{key_prefix}_n",
                            help=f"Drawn from the {source} ({len(texts):,} reviews) with a fixed "
                                 "seed: the first n of one shuffle"))
    steps = c2.selectbox("Integrated Gradients steps (first try)", explain.IG_STEP_CHOICES,
                         index=explain.IG_STEP_CHOICES.index(explain.IG_STEPS), key=f"{key_prefix}_steps",
                         help=IG_STEPS_HELP)
    settings = faithfulness.Settings(ig_steps=int(steps))
    sample = faithfulness.sample_texts(texts, n, seed=0)
    key = faithfulness.cache_key(weights, predictor.max_length,
                       {"source": source, "seed": 0, "n": len(sample),
                        "texts_sha256": faithfulness.texts_sha256(sample)}, settings)
    cached = faithfulness.load_run(faithfulness.cache_paths(info.path, key)[0])
    earlier = faithfulness.list_runs(info.path, weights)
    if cached is None:
        per = [r.seconds / r.n for r in earlier if r.n]
        pace = per[0] * n if per else None
        guess = f" ({about(pace)} at the last run's pace)" if per else ""
        intro = st.empty()     # the offer to run, cleared once the run is done
        with intro.container():
            st.markdown(f"No result cached for these {n} reviews yet{guess}. Every method "
                        "explains every review, then each ranking is tested by deleting and "
                        f"keeping words ({', '.join(map(str, faithfulness.KS))} %), against "
                        f"{faithfulness.RANDOM_DRAWS} random rankings.")
            clicked = runtime.button(st, f"Run on {n} reviews", type="primary", key=f"{key_prefix}_run")
        if clicked:
            intro.empty()
            bar = StreamlitProgress(len(sample), "Explaining and erasing", guess=pace)
            cached = faithfulness.measure(predictor, info.path, sample, settings, source=source,
                                      progress=bar, weights=weights)
            bar.close()
            if cached.cache_error:
                st.warning(cached.cache_error)
    shown = cached
    others = [r for r in earlier if cached is None or r.key != cached.key]
    if others:
        def name(i: int) -> str:
            if i < 0:
                return f"this run ({n} reviews)"
            r = others[i]
            return (f"{r.n} reviews of the {r.sample.get('source')}, "
                    f"{len(r.settings.get('methods', []))} methods, IG "
                    f"{r.settings.get('ig_steps')} steps, "
                    f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(r.created))}")
        options = ([-1] if cached is not None else []) + list(range(len(others)))
        pick = st.selectbox("Show", options, format_func=name, key=f"{key_prefix}_show",
                            help="Results cached for this checkpoint's weights")
        shown = cached if pick < 0 else others[pick]
    if shown is not None:
        show_run(shown, key_prefix)


def show_run(result: faithfulness.FaithfulnessRun, key_prefix: str = "faith"):
    summary = faithfulness.summarize(result)
    st.subheader("Verdict")
    for line in faithfulness.verdict(result, summary):
        st.markdown(line)
    st.subheader("Per method and k")
    st.caption(f"{result.n} reviews · mean drop in p(predicted class) with its "
               f"{int(faithfulness.CONFIDENCE * 100)} % bootstrap interval over reviews. Comprehensiveness "
               "(delete the method's top k % words): higher is more faithful. Sufficiency (keep "
               "only them): lower is more faithful. AOPC: the mean over the k's.")
    st.dataframe(pd.DataFrame(faithfulness.table_rows(result, summary)), hide_index=True,
                 key=f"{key_prefix}_table")
    st.plotly_chart(explain_figures.faithfulness_curves(summary, result.labels, result.ks),
                    key=f"{key_prefix}_curves")
    st.plotly_chart(explain_figures.aopc_bars(summary, result.labels), key=f"{key_prefix}_aopc")
    st.download_button("Results JSON", json.dumps(faithfulness.summary_json(result, summary), indent=1),
                       "faithfulness.json", "application/json", key=f"{key_prefix}_dl",
                       on_click="ignore")
