"""The "Inside BERT" page's parts: one function per step, and classroom mode.

The numbers come from :mod:`reviewbert.anatomy.trace` (a traced pass of the sidebar's
checkpoint, cached per checkpoint and sentence), the pictures from
:mod:`reviewbert.anatomy.figures`; this module only lays them out. Each step
shows its tensor's shape, a plain caption and a heatmap, and checks what it
computed by hand against what the model itself returns.

Classroom mode (for a projector): larger type, fewer controls, and one step at
a time with Back/Next. Classroom mode draws only one step per run, and
Streamlit forgets a widget that a run does not draw, so :func:`keep_state`
carries the page's widget values across runs (and across visits to other pages).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import streamlit as st

from reviewbert.anatomy import figures as anatomy_figures
from reviewbert.anatomy import trace as anatomy
from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import CheckpointInfo
from reviewbert.model.inference import Prediction, Predictor
from reviewbert.ui import checkpoints, inside_bert_layers, runtime, state
from reviewbert.ui import prediction_card as prediction
from reviewbert.viz.figures import probs_bar
from reviewbert.viz.markdown import md_escape

DEFAULT_SENTENCE = "time flies like an arrow"
KEPT = (state.INSIDE_SENTENCE, state.INSIDE_CLASSROOM, state.INSIDE_LAYER, state.INSIDE_HEAD,
        state.INSIDE_ROW, state.INSIDE_SUBSTEP, state.INSIDE_COMPARE, state.INSIDE_WORD, state.INSIDE_MASKED)
CLASSROOM_CSS = """<style>
[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMainBlockContainer"] [data-testid="stMarkdownContainer"] li {
  font-size: 1.45rem; line-height: 1.5}
[data-testid="stMainBlockContainer"] [data-testid="stCaptionContainer"] p {font-size: 1.2rem}
[data-testid="stMainBlockContainer"] h1 {font-size: 3.2rem}
[data-testid="stMainBlockContainer"] h2 {font-size: 2.5rem}
[data-testid="stMainBlockContainer"] input, [data-testid="stMainBlockContainer"] button p {font-size: 1.4rem}
.rb-chips {font-size: 1.6rem}
</style>"""


@dataclass
class Lesson:
    """Everything the steps draw from, for one checkpoint and one sentence."""
    predictor: Predictor
    info: CheckpointInfo
    path: str
    stamp: float
    text: str                  # as typed: the cache key of the trace
    trace: anatomy.Trace
    pred: Prediction
    mlm: anatomy.MlmStatus
    classroom: bool
    emb_diff: float            # the traced embedding output against the model's own module

    @property
    def model(self):
        return self.predictor.model


# -------------------------------------------------------------------- state
def keep_state() -> None:
    """Carry the page's widget values over runs that do not draw them (see the docstring)."""
    saved = st.session_state.setdefault(state.INSIDE_SAVED, {})
    for k in KEPT:
        if k in st.session_state:
            saved[k] = st.session_state[k]
        elif k in saved:
            st.session_state[k] = saved[k]
        if k in st.session_state:
            st.session_state[k] = st.session_state[k]


def _clamp(key: str, options: list, default=None) -> None:
    """Before a selectbox is drawn: its kept value, if still an option, else ``default``."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0] if default is None else default


# -------------------------------------------------------------------- caches
@st.cache_data(max_entries=8, show_spinner="Taking the sentence apart…")
def _lesson_data(path: str, stamp: float, text: str) -> tuple[anatomy.Trace, Prediction, float]:
    predictor = runtime.load_predictor(path, stamp)
    tr = anatomy.trace(predictor.model, predictor.tokenizer, text, predictor.max_length)
    return tr, predictor.predict(text), anatomy.embeddings_max_diff(predictor.model, tr)


@st.cache_data(max_entries=16, show_spinner=False)
def _layer_detail(path: str, stamp: float, text: str, layer: int) -> anatomy.LayerDetail:
    tr, _, _ = _lesson_data(path, stamp, text)
    return anatomy.layer_detail(runtime.load_predictor(path, stamp).model, tr, layer)


@st.cache_data(max_entries=4, show_spinner=False)
def _positions(path: str, stamp: float) -> np.ndarray:
    return anatomy.position_similarity(runtime.load_predictor(path, stamp).model)


@st.cache_data(max_entries=16, show_spinner="Comparing the word across sentences…")
def _in_context(path: str, stamp: float, sentences: tuple[str, ...], word: str):
    """A WordInContext, or the plain message of why not (a str)."""
    p = runtime.load_predictor(path, stamp)
    try:
        return anatomy.word_in_context(p.model, p.tokenizer, list(sentences), word, p.max_length)
    except ValueError as e:
        return str(e)


@st.cache_data(max_entries=8, ttl=600, show_spinner=False)   # ttl: a base model may be added
def _mlm_status(base: str) -> anatomy.MlmStatus:
    return anatomy.mlm_status(base)


@st.cache_resource(max_entries=1, show_spinner="Loading the base model's masked-LM head…")
def _mlm_model(path: str):
    model = anatomy.load_mlm(path)
    runtime.freeze_long_lived()
    return model


def load_predictor(info: CheckpointInfo) -> Predictor | None:
    """The sidebar checkpoint's cached predictor, or None after saying why it cannot be shown."""
    try:
        predictor = runtime.load_predictor(str(info.path), runtime.mtime(info.path))
    except CheckpointError as e:
        checkpoints.load_error(e)
        return None
    why = anatomy.unsupported_reason(predictor.model)
    if why:
        st.info(why)
        return None
    return predictor


def lesson(predictor: Predictor, info: CheckpointInfo, text: str,
           classroom: bool) -> Lesson | None:
    """The traced sentence, or None after saying why there is nothing to trace."""
    path, stamp = str(info.path), runtime.mtime(info.path)
    tr, pred, emb_diff = _lesson_data(path, stamp, text)
    if prediction.unreadable(pred):
        return None
    return Lesson(predictor, info, path, stamp, text, tr, pred, _mlm_status(info.base_model),
                  classroom, emb_diff)


# -------------------------------------------------------------------- layout helpers
_md = md_escape


def _chart(les: Lesson, fig, name: str) -> None:
    if les.classroom:
        fig.update_layout(font=dict(size=17), title_font_size=21)
    st.plotly_chart(fig, key=state.INSIDE_FIG + name, config={"displayModeBar": False})


def _shape(*dims: int) -> str:
    return "[" + ", ".join(f"{d:,}" for d in dims) + "]"


def _check(label: str, diff: float, tol: float = 1e-5) -> None:
    # "✓", not an emoji: projector PCs and headless browsers often lack an emoji font.
    ok = "✓" if diff <= tol else f"✗ (above the {tol:g} tolerance)"
    st.caption(f"{ok} Checked: {label} — largest difference {diff:.1e}.")


# -------------------------------------------------------------------- page top
def sentence_input() -> tuple[str, bool]:
    """The sentence box and the classroom toggle; returns (text, classroom)."""
    keep_state()
    st.session_state.setdefault(state.INSIDE_SENTENCE, DEFAULT_SENTENCE)
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    c1.text_input("Sentence", key=state.INSIDE_SENTENCE, max_chars=5000,
                  help="Any text: a sentence is easiest to follow; a long review works too.")
    c2.toggle("Classroom", key=state.INSIDE_CLASSROOM,
              help="For a projector: larger type, fewer controls, one step at a time.")
    classroom = bool(st.session_state.get(state.INSIDE_CLASSROOM))
    if classroom:
        st.markdown(CLASSROOM_CSS, unsafe_allow_html=True)
    return st.session_state.get(state.INSIDE_SENTENCE) or "", classroom


def model_line(les: Lesson) -> None:
    d = les.trace.dims
    st.caption(f"Checkpoint `{les.info.name}` (base `{les.info.base_model}`): {d.layers} layers, "
               f"{d.heads} heads × {d.head_dim} dimensions = hidden size {d.hidden}, "
               f"feed-forward {d.intermediate}, vocabulary {d.vocab:,}, "
               f"{d.num_labels} classes. Every number below is computed live from it.")


# -------------------------------------------------------------------- step 1
def step_tokens(les: Lesson) -> None:
    tr, d = les.trace, les.trace.dims
    st.caption(f"BERT never sees letters. The tokenizer cuts the text into WordPieces from a "
               f"fixed vocabulary of {d.vocab:,}; a piece that continues a word starts with ##. "
               "It adds [CLS] in front (the classifier will read its vector at the end) and "
               "[SEP] at the end, and each piece becomes its id: a row number in the tables "
               "of step 2.")
    special = [w is None for w in tr.word_ids]
    st.markdown(anatomy_figures.token_chips_html(tr.tokens, tr.ids, special), unsafe_allow_html=True)
    st.markdown(f"Shape: **{_shape(tr.n_tokens)}** token ids: {tr.n_tokens - 2} pieces + "
                "[CLS] + [SEP].")
    if tr.truncated:
        st.warning(f"The text has {tr.n_tokens_original:,} tokens; the model reads the first "
                   f"{tr.n_tokens - 1} and the final [SEP], so the steps do too.")
    splits = anatomy.word_splits(tr, les.predictor.tokenizer)
    lines = []
    for sp in splits:
        where = "in this sentence" if sp.in_sentence else "not in this sentence; an example"
        pieces = " ".join(sp.pieces)
        lines.append(f"“{_md(sp.word)}” → `{pieces.replace('`', '')}` (ids "
                     f"{', '.join(map(str, sp.ids))}; {where})")
    if lines:
        st.markdown("An unusual word is split into pieces the vocabulary has:  \n"
                    + "  \n".join(lines[:6]))
    st.caption(f"As one-hot rows, the ids are a {_shape(tr.n_tokens, d.vocab)} matrix of zeros "
               "with a single 1 per row; multiplying it by the token table picks that table's "
               "rows, which is all an embedding lookup is.")
    _chart(les, anatomy_figures.one_hot_figure(tr.tokens, tr.ids, d.vocab), "onehot")


# -------------------------------------------------------------------- step 2
def step_embeddings(les: Lesson) -> None:
    tr, d = les.trace, les.trace.dims
    T = tr.n_tokens
    st.caption("Each token picks one row from each of three learned tables. The token table's "
               "row is a static word vector: the same in every sentence, like word2vec. The "
               "position table's row says where it stands (attention alone does not see word "
               "order); the segment table's row says which sentence it is in (A here). The "
               "three are added, and LayerNorm rescales each token's vector to mean 0 and "
               "variance 1, then applies a learned gain and bias.")
    st.markdown(
        f"Token table {_shape(d.vocab, d.hidden)} → **{_shape(T, d.hidden)}** · position table "
        f"{_shape(d.max_positions, d.hidden)} → **{_shape(T, d.hidden)}** · segment table "
        f"{_shape(d.segments, d.hidden)} → **{_shape(T, d.hidden)}** · sum and LayerNorm: "
        f"**{_shape(T, d.hidden)}**")
    parts = [("token embeddings (static word vectors)", tr.token_emb),
             ("position embeddings", tr.position_emb),
             ("segment embeddings", tr.segment_emb),
             ("sum", tr.emb_sum), ("LayerNorm(sum): the input of layer 1", tr.embedding_output)]
    _chart(les, anatomy_figures.embeddings_figure(parts, tr.tokens), "embeddings")
    st.caption("A few dimensions are far larger than the rest, so each panel's colours stop at "
               "its 99th percentile; hover a cell for its exact value.")
    _check("this LayerNorm(sum) equals the output of the model's own embedding module",
           les.emb_diff)
    n = min(anatomy.POSITIONS_SHOWN, d.max_positions)
    st.markdown(f"**Learned positions.** BERT learns its {d.max_positions} position vectors "
                f"instead of using fixed sine waves. This compares the first {n}: each cell is "
                "the cosine similarity of two positions' vectors (1: same direction).")
    similarity = _positions(les.path, les.stamp)[:n, :n]
    _chart(les, anatomy_figures.position_similarity_figure(similarity), "positions")


# -------------------------------------------------------------------- step 3
def _layer_head_pickers(les: Lesson) -> tuple[int, int]:
    d = les.trace.dims
    _clamp(state.INSIDE_LAYER, list(range(d.layers)))
    _clamp(state.INSIDE_HEAD, list(range(d.heads)))
    c1, c2 = st.columns(2)
    layer = c1.selectbox("Layer", list(range(d.layers)), key=state.INSIDE_LAYER,
                         format_func=lambda i: f"layer {i + 1}")
    head = c2.selectbox("Head", list(range(d.heads)), key=state.INSIDE_HEAD,
                        format_func=lambda h: f"head {h + 1}")
    return layer, head


def step_head(les: Lesson) -> None:
    tr, d = les.trace, les.trace.dims
    T = tr.n_tokens
    layer, head = _layer_head_pickers(les)
    hs = anatomy.head_step(tr, layer, head)
    st.caption(f"The layer's input {_shape(T, d.hidden)} goes through three Linear layers "
               f"({_shape(d.hidden, d.hidden)} each). Their outputs are cut into {d.heads} heads "
               f"of {d.head_dim} dimensions; these are head {head + 1}'s pieces: a query (what "
               "this token looks for), a key (what it offers) and a value (what it passes on).")
    rows = tr.tokens
    cols = st.columns(3)
    for col, name, m, what in zip(cols, ("Q", "K", "V"), (hs.query, hs.key, hs.value),
                                  ("queries", "keys", "values")):
        with col:
            st.markdown(f"**{name}** {_shape(T, d.head_dim)}")
            _chart(les, anatomy_figures.matrix_heatmap(m, rows, f"{what}, layer {layer + 1} head {head + 1}"),
                   f"{name}")
    st.markdown(f"Scores: every query against every key, QKᵀ/√{d.head_dim} (÷ "
                f"{1 / hs.scaling:.3g}) → **{_shape(T, T)}**. Then a softmax along each row "
                "turns a row of scores into weights that sum to 1: the **attention filter**. "
                f"Finally the filter mixes the values: A·V → **{_shape(T, d.head_dim)}**, "
                "the **filtered values**, each token's new vector made of the others'.")
    c1, c2, c3 = st.columns(3)
    with c1:
        _chart(les, anatomy_figures.matrix_heatmap(hs.scores, rows, "scores QKᵀ/√d", cols=rows,
                                      col_name="key"), "scores")
        st.caption("Row: the token that asks. Column: the token it is compared with.")
    with c2:
        _chart(les, anatomy_figures.matrix_heatmap(hs.attention, rows, "attention filter softmax(QKᵀ/√d)",
                                      cols=rows, col_name="key", signed=False), "attention")
        st.caption("Each row sums to 1. This is the same matrix that the heatmaps on the main "
                   "page draw (there for [CLS]'s row).")
    with c3:
        _chart(les, anatomy_figures.matrix_heatmap(hs.filtered, rows, "filtered values A·V"), "filtered")
        st.caption("Row i is the mix of all value rows, weighted by row i of the filter.")
    _check(f"this hand-made filter equals the attention the model returned for layer "
           f"{layer + 1}, head {head + 1} (the main page's)",
           float(np.abs(hs.attention - les.pred.attentions[layer, head]).max()))
    _softmax_row(les, hs)


def _softmax_row(les: Lesson, hs: anatomy.HeadStep) -> None:
    tr = les.trace
    T = tr.n_tokens
    default = min(2, T - 1)                       # "flies" in "time flies like an arrow"
    if les.classroom:
        row = default
    else:
        opts = list(range(T))
        if st.session_state.get(state.INSIDE_ROW) not in opts:
            st.session_state[state.INSIDE_ROW] = default
        row = st.selectbox("Spell out the softmax of row", opts, key=state.INSIDE_ROW,
                           format_func=lambda i: f"{i}: {tr.tokens[i]}")
    s = hs.scores[row].astype(np.float64)
    e = np.exp(s - s.max())
    st.markdown(f"**Row “{_md(tr.tokens[row])}”, by hand:** weight = e^(score − max) / sum; "
                f"the sum of e^(score − max) here is {e.sum():.4f}.")
    st.dataframe({"key token": tr.tokens, "score": np.round(s, 4),
                  "e^(score − max)": np.round(e, 4), "weight": np.round(e / e.sum(), 4)},
                 hide_index=True, height=min(400, 38 + 35 * T))


# -------------------------------------------------------------------- step 4
def step_layer(les: Lesson) -> None:
    tr, d = les.trace, les.trace.dims
    T = tr.n_tokens
    layer = int(st.session_state.get(state.INSIDE_LAYER, 0) or 0)
    det = _layer_detail(les.path, les.stamp, les.text, layer)
    ratio = d.intermediate / d.hidden
    st.caption(f"Layer {layer + 1} (pick another in step 3). The {d.heads} heads' filtered "
               f"values, {_shape(T, d.head_dim)} each, side by side make {_shape(T, d.hidden)} "
               f"again. A Linear layer {_shape(d.hidden, d.hidden)} mixes the heads; the "
               "layer's input is added back (the residual) and LayerNorm rescales: add & norm. "
               f"The feed-forward block then works on each token alone: expand ×{ratio:g} to "
               f"{_shape(T, d.intermediate)}, {d.activation.upper()}, back to "
               f"{_shape(T, d.hidden)}, and add & norm again. That is the layer's output and "
               "the next layer's input.")
    what = {"input": "the layer's input (the previous layer's output)",
            "heads concatenated": f"{d.heads} heads × {d.head_dim}, side by side",
            "output projection": f"Linear {_shape(d.hidden, d.hidden)}",
            "add & norm 1": "LayerNorm(projection + input)",
            "feed-forward expand": f"Linear {_shape(d.hidden, d.intermediate)}",
            "activation": d.activation.upper(),
            "feed-forward back": f"Linear {_shape(d.intermediate, d.hidden)}",
            "add & norm 2": "LayerNorm(back + add & norm 1): the layer's output"}
    st.dataframe({"step": list(det.names), "shape": [_shape(*s) for s in det.shapes],
                  "what happens": [what[n] for n in det.names],
                  "mean token norm": np.round(det.norms.mean(axis=1), 3)}, hide_index=True)
    _chart(les, anatomy_figures.norms_figure(det.norms, list(det.names), tr.tokens, layer), "norms")
    names = list(det.names)
    if les.classroom:
        shown = "feed-forward expand"
    else:
        _clamp(state.INSIDE_SUBSTEP, names, "heads concatenated")
        shown = st.selectbox("Draw the matrix after", names, key=state.INSIDE_SUBSTEP)
    i = names.index(shown)
    _chart(les, anatomy_figures.matrix_heatmap(det.matrices[i], tr.tokens,
                                  f"layer {layer + 1}, after “{shown}” {_shape(*det.shapes[i])}"),
           "substep")
    _check(f"these steps rebuild layer {layer + 1}'s output exactly", det.max_diff_to_trace)
    prediction.bertviz_view(les.pred, {"layer": layer, "head": None}, key=state.INSIDE_HV_WINDOW)
    inside_bert_layers.layer_probabilities_view(les)


# -------------------------------------------------------------------- step 5
def _comparison(les: Lesson, sentences: tuple[str, ...], word: str, name: str) -> None:
    ctx = _in_context(les.path, les.stamp, sentences, word)
    if isinstance(ctx, str):
        st.warning(ctx)
        return
    S_ = len(ctx.sentences)
    sims = {f"“{ctx.sentences[i]}” vs “{ctx.sentences[j]}”": ctx.pair_similarity(i, j)
            for i in range(S_) for j in range(i + 1, S_)}
    c1, c2 = st.columns(2)
    with c1:
        _chart(les, anatomy_figures.similarity_figure(ctx.layer_names, sims, ctx.word), f"sim_{name}")
    with c2:
        _chart(les, anatomy_figures.pca_figure(ctx.pca, ctx.sentences, ctx.layer_names, ctx.explained,
                                  ctx.word), f"pca_{name}")
    st.info(_md(anatomy.describe_drift(ctx)))


def step_context(les: Lesson) -> None:
    d = les.trace.dims
    st.caption(f"A static word vector (step 2's token table) is the same whatever the "
               f"sentence. Each layer mixes in the other tokens, so the same word ends up with "
               f"different vectors in different sentences. Each point below is the word's "
               f"{d.hidden}-dimensional vector at one stage: the static embedding, the input "
               f"embeddings (+ position, LayerNorm), then each of the {d.layers} layers.")
    for word, sentences in anatomy.SHARED_WORD_SENTENCES:
        st.markdown(f"**“{word}”**: " + " · ".join(f"“{s}”" for s in sentences))
        _comparison(les, sentences, word, word)
    if les.classroom:
        return
    with st.expander("Your own sentences"):
        st.session_state.setdefault(state.INSIDE_COMPARE, "I like this phone\nphones like this break")
        st.text_area("Sentences, one a line", key=state.INSIDE_COMPARE, height=100)
        sentences = tuple(s.strip() for s in st.session_state[state.INSIDE_COMPARE].splitlines()
                          if s.strip())
        shared = anatomy.shared_words(les.predictor.tokenizer, list(sentences)) if sentences else []
        st.caption("Words every sentence has: " + (", ".join(shared) or "none"))
        st.text_input("Shared word", key=state.INSIDE_WORD, placeholder=shared[0] if shared else "")
        word = (st.session_state.get(state.INSIDE_WORD) or "").strip() or (shared[0] if shared else "")
        if len(sentences) < 2 or not word:
            st.info("Give two or more sentences that share a word.")
            return
        _comparison(les, sentences, word, "own")


# -------------------------------------------------------------------- step 6
def step_cls(les: Lesson) -> None:
    tr, d = les.trace, les.trace.dims
    cs = anatomy.cls_step(les.model, tr)
    C = len(cs.names)
    if cs.pooled_pre is not None:
        st.caption(f"Only [CLS]'s row of the last layer goes on, {_shape(d.hidden)}. "
                   "BertForSequenceClassification does not feed it to the classifier directly: "
                   f"first the pooler, a dense layer {_shape(*cs.pooler_shape)} and tanh "
                   "(from pre-training, fine-tuned with the rest). Then the classifier, "
                   f"{_shape(C, d.hidden)} plus a bias, gives one logit per class, and a "
                   "softmax turns the logits into probabilities.")
        rows = [("[CLS], last layer", cs.cls_vector), ("pooler dense · [CLS] + b", cs.pooled_pre),
                ("tanh: the pooled vector", cs.pooled)]
    else:
        st.caption("This model has no pooler: the last layer's [CLS] row goes straight to the "
                   "classifier.")
        rows = [("[CLS], last layer", cs.cls_vector)]
    _chart(les, anatomy_figures.vectors_figure(rows, f"[CLS] → pooled {_shape(d.hidden)}"), "cls")
    _chart(les, anatomy_figures.matrix_heatmap(cs.weight, cs.names,
                                               f"classifier weights {_shape(C, d.hidden)}"),
           "classifier")
    k = int(cs.probs.argmax())
    c1, c2 = st.columns(2)
    with c1:
        _chart(les, anatomy_figures.logits_figure(cs.names, cs.logits, k), "logits")
    with c2:
        _chart(les, probs_bar(cs.names, cs.probs, k), "probs")
    st.markdown(f"By hand: **{_md(cs.names[k])}** ({cs.probs[k]:.1%}). The main page predicts "
                f"**{les.pred.stars} {_md(les.pred.label)}** ({les.pred.probs[les.pred.label_id]:.1%}).")
    _check("these probabilities equal the prediction the main page shows",
           float(np.abs(cs.probs - les.pred.probs).max()))


# -------------------------------------------------------------------- step 7
def step_mlm(les: Lesson) -> None:
    st.caption(f"Before it was fine-tuned to rate reviews, BERT was trained to fill in hidden "
               f"words. The fine-tuned checkpoint no longer has that head, but its base model "
               f"`{les.info.base_model}` does: this asks it (the base model, not the fine-tuned "
               "one) for the top 5 words for each [MASK].")
    default = anatomy.masked_default(les.trace.text)
    if les.classroom:
        text = default
    else:
        st.session_state.setdefault(state.INSIDE_MASKED, default)
        text = st.text_input("Sentence with [MASK]", key=state.INSIDE_MASKED)
    try:
        model, tok = _mlm_model(les.mlm.path)
        fills = anatomy.fill_mask(model, tok, text)
    except Exception as e:  # noqa: BLE001 - the step must never break the page
        st.warning(f"The masked-language model could not run here ({type(e).__name__}: {e}).")
        return
    if not fills:
        st.info("Put [MASK] where a word should be guessed.")
        return
    cols = st.columns(min(len(fills), 3))
    for n, f in enumerate(fills[:3]):
        with cols[n]:
            _chart(les, anatomy_figures.mask_figure(f.candidates, f"[MASK] {n + 1}: top {len(f.candidates)}"),
                   f"mask{n}")


# -------------------------------------------------------------------- all steps
STEPS: list[tuple[str, Callable[[Lesson], None]]] = [
    ("1. Tokens", step_tokens),
    ("2. Input embeddings", step_embeddings),
    ("3. One attention head, by hand", step_head),
    ("4. All heads of the layer", step_layer),
    ("5. Static versus contextual", step_context),
    ("6. From [CLS] to stars", step_cls),
    ("7. Masked language model", step_mlm),
]


def steps_for(les: Lesson) -> list[tuple[str, Callable[[Lesson], None]]]:
    """Step 7 only where the base model has an MLM head."""
    return [s for s in STEPS if s[1] is not step_mlm or les.mlm.available]


def _move(delta: int, n: int) -> None:
    st.session_state[state.INSIDE_STEP] = min(max(0, st.session_state.get(state.INSIDE_STEP, 0) + delta),
                                          n - 1)


def show(les: Lesson) -> None:
    """All the steps, or in classroom mode the current one with Back/Next."""
    steps = steps_for(les)
    last = True
    if les.classroom:
        n = len(steps)
        i = min(max(0, int(st.session_state.get(state.INSIDE_STEP, 0))), n - 1)
        last = i == n - 1
        c1, c2, c3 = st.columns([1, 5, 1])
        c1.button("◀ Back", key=state.INSIDE_BACK, on_click=_move, args=(-1, n), disabled=i == 0,
                  width="stretch")
        c2.progress((i + 1) / n, text=f"Step {i + 1} of {n}")
        c3.button("Next ▶", key=state.INSIDE_NEXT, on_click=_move, args=(1, n), disabled=last,
                  width="stretch")
        steps = steps[i:i + 1]
    for title, draw in steps:
        st.header(title)
        draw(les)
    if not les.mlm.available and last:
        st.caption(f"Step 7, the masked language model, is hidden: {les.mlm.message}")
