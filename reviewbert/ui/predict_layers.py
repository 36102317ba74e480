"""The Predict page's Layers tab: this review's star probabilities after every layer, as a
linear probe on [CLS] reads them, and how well each layer's probe rates the test reviews
(checkpoint against base model), so that one can say where the rating is settled.

The probes are trained once per checkpoint, on request (a button, then a bar with the time
left) and cached beside it (``reviewbert/layers/analysis.py``); the Inside BERT page reads
the same cache (``reviewbert/ui/inside_bert_layers.py``). This module only lays out.
"""
from __future__ import annotations

import streamlit as st

from reviewbert.layers import analysis as layer_analysis
from reviewbert.layers import figures as layer_figures
from reviewbert.layers import probes as layer_probes
from reviewbert.ui import runtime, state
from reviewbert.ui.progress_bar import StreamlitProgress, seconds_text
from reviewbert.viz.markdown import md_escape

EXPECTED_RATE = 30
"""Reviews read per second the first bar assumes before its first update (a guess for a
small CPU; ``bench/layers_probes.py`` times the run); the bar then shows the real rate."""
CLI_HINT = "python -m reviewbert layers --checkpoint"


def cached(info) -> layer_analysis.LayersResult | None:
    """The probes of this checkpoint: cached beside it, or computed this session where nothing
    could be written; None if never trained. Reads no review."""
    res = layer_analysis.latest(info.path)
    kept = st.session_state.get(state.LAYERS_RESULT)
    if res is None and kept and kept[0] == str(info.path):
        res = kept[1]
    return res


def result(info, predictor) -> layer_analysis.LayersResult | None:
    """The probes: from the cache, or trained now if asked for, else a note and a button."""
    res = cached(info)
    if res is None and st.session_state.get(state.LAYERS_RUN) == str(info.path):
        # dropped once done (or failed): a run stopped halfway leaves it for the next run
        res = _train(info, predictor)
        st.session_state.pop(state.LAYERS_RUN, None)
    if res is not None:
        return res
    st.info("The per-layer probes of this checkpoint have not been trained yet. A logistic "
            "regression is fitted on the [CLS] vector after every layer, on "
            f"{layer_probes.TRAIN_CAP:,} reviews of its training split, and scored on its "
            "test split; the same on its base model. It reads every review once per model, "
            f"about {seconds_text(_planned_guess(info) / EXPECTED_RATE)} on a 2-core CPU; the "
            f"result is then saved beside the checkpoint (so is `{CLI_HINT} ...`'s).")
    if runtime.button(st, "Train the per-layer probes", type="primary", key="layers_train"):
        st.session_state[state.LAYERS_RUN] = str(info.path)
        st.rerun()
    return None


def _planned_guess(info) -> int:
    n_test = int((info.meta.get("split_sizes") or {}).get("test") or 2000)
    return layer_analysis.planned(layer_probes.TRAIN_CAP, n_test)


def _train(info, predictor) -> layer_analysis.LayersResult | None:
    from reviewbert.analysis.sources import named_split
    from reviewbert.data import DataError
    from reviewbert.model.device import cpu_threads, threads_beside_training
    from reviewbert.training.catalog import checkpoints_root
    from reviewbert.training.runs import device_busy
    try:
        with st.spinner("Rebuilding the checkpoint's training and test splits…"):
            train, _, _ = named_split(info.meta, "train", predictor.tokenizer)
            test, source, _ = named_split(info.meta, "test", predictor.tokenizer)
    except DataError as e:
        st.warning(f"The probes need the checkpoint's own splits: {md_escape(str(e))}")
        return None
    n_train = len(layer_analysis.training_sample(train))
    bar = StreamlitProgress(layer_analysis.planned(n_train, len(test)), "Training the probes",
                            unit="reviews")
    busy = predictor.device.type == "cpu" and device_busy(checkpoints_root())
    try:
        with cpu_threads(threads_beside_training(busy)):
            res = layer_analysis.analyze(predictor.model, predictor.tokenizer, info.path, train,
                                         test, info.scheme, max_length=predictor.max_length,
                                         base_model=info.base_model, progress=bar,
                                         on_stage=bar.describe, source=source)
    except layer_probes.LayersError as e:
        st.warning(md_escape(str(e)))
        return None
    finally:
        bar.close()
    st.session_state[state.LAYERS_RESULT] = (str(info.path), res)
    return res


def review_layers(predictor, text: str, res, names: list[str], key: str,
                  predicted: int | None = None) -> None:
    """One text's probabilities after each layer, and when the probes' guess stops changing."""
    try:
        probs = layer_probes.layer_probabilities(predictor, text, res.probes)
    except layer_probes.LayersError as e:
        st.warning(md_escape(str(e)))
        return
    st.plotly_chart(layer_figures.probabilities_figure(probs, names, text),
                    key=state.LAYERS_FIG + key, config={"displayModeBar": False})
    guess = probs.argmax(axis=1)
    final = int(guess[-1]) if predicted is None else int(predicted)
    from_layer = next((k for k in range(len(guess)) if (guess[k:] == final).all()), None)
    name = md_escape(names[final])
    if from_layer is None:
        st.caption(f"The last layer's probe does not pick **{name}**, the model's prediction: "
                   "the probe reads [CLS] directly, the model through its pooler and classifier.")
    else:
        where = "the embeddings" if from_layer == 0 else f"layer {from_layer}"
        st.caption(f"The probes pick **{name}** from {where} on: for this review, the rating "
                   "is settled there.")


def accuracy_section(res, key: str) -> None:
    """Each layer's probe accuracy on the test reviews, checkpoint against base model."""
    labels = {"accuracy": "accuracy", "relaxed_accuracy": "relaxed (±1 star)", "auc": "AUC"}
    if res.num_labels != 5:
        labels.pop("relaxed_accuracy")
    metric = st.radio("Score", list(labels), format_func=labels.get, horizontal=True,
                      key=state.LAYERS_METRIC + key)
    st.plotly_chart(layer_figures.accuracy_figure(res.layers, res.base_layers,
                                                  res.model_accuracy, metric or "accuracy"),
                    key=state.LAYERS_FIG + "accuracy" + key, config={"displayModeBar": False})
    settled = res.settled
    parts = [f"Probes fitted on {res.n_train:,} training reviews, scored on {res.n_test:,} test "
             "reviews; bands: 95 % bootstrap intervals."]
    if settled is not None:
        parts.append(f"From {'the embeddings' if settled == 0 else f'layer {settled}'} on, the "
                     "probe's accuracy is within the noise of the last layer's: that is where the "
                     "rating is settled, on average.")
    if not res.base_layers:
        parts.append(f"No base model line: {md_escape(res.base_note)}.")
    st.caption(" ".join(parts))


def layers_view(info, predictor, pred) -> None:
    """The Layers tab of the Predict page."""
    st.subheader("The rating after every layer")
    res = result(info, predictor)
    if res is None:
        return
    review_layers(predictor, pred.text, res, list(pred.scheme.names), "predict", pred.label_id)
    accuracy_section(res, "predict")
