"""The prediction card, the four attention views and the downloads."""
from __future__ import annotations

import io
import json

import numpy as np
import streamlit as st

from reviewbert.model import attention
from reviewbert.model.inference import Prediction
from reviewbert.ui import runtime, state
from reviewbert.ui.png_download import png_download
from reviewbert.viz import bertviz_view as bertviz_html
from reviewbert.viz import figures, highlight
from reviewbert.viz.bertviz_view import MAX_TOKENS as HV_MAX
from reviewbert.viz.bertviz_view import last_window_start

# The Predict page's tabs under the prediction card; only the open one is built.
VIEWS = ("What BERT attends to", "Which words mattered?", "Its nearest reviews", state.WHATIF_VIEW,
         state.LAYERS_VIEW)
# The attention views, tabs of their own under the layer and head controls; only the open
# one is built (attention_views).
ATTENTION_VIEWS = ("Highlighted review", "[CLS] per layer", "Every head of a layer",
                   "Head view (bertviz)")
HEATMAP_WRAP = 48  # columns per row of the [CLS] heatmap: a 256-token review wraps into 6 rows
UNREADABLE = ("This text has no character the model reads: only invisible or control "
              "characters (zero-width spaces, byte-order marks, NUL…), which the tokenizer "
              "drops. BERT would see nothing but [CLS] and [SEP], so there is nothing to rate "
              "or to highlight.")


def unreadable(pred: Prediction) -> bool:
    """True, after saying why, when the tokenizer kept no word of the text: every view
    below draws words, and a rating of [CLS] [SEP] alone would mean nothing."""
    if pred.words:
        return False
    st.info(UNREADABLE)
    return True


def layers_view(info, predictor, pred: Prediction) -> None:
    """The Layers tab (``reviewbert/ui/predict_layers.py``), imported when first opened: the
    rarest tab need not be in the model load's pre-imports (frame.VIEW_MODULES)."""
    from reviewbert.ui import predict_layers
    predict_layers.layers_view(info, predictor, pred)


def prediction_card(pred: Prediction, true_stars: int | None = None, source: str | None = None):
    scheme = pred.scheme
    true_id = scheme.class_of(true_stars) if (true_stars and scheme) else None
    c1, c2 = st.columns([2, 3])
    with c1:
        st.markdown(f"<div class='rb-stars' style='font-size:2.6rem;color:#f5a623;"
                    f"letter-spacing:2px;line-height:1.1'>{pred.stars}</div>",
                    unsafe_allow_html=True)
        st.markdown(f"**Predicted: {pred.label}** ({pred.probs[pred.label_id]:.0%} probability)")
        if true_stars:
            ok = true_id == pred.label_id
            verdict = "✅ correct" if ok else "❌ misclassified"
            st.markdown(f"True rating: **{'★' * true_stars}{'☆' * (5 - true_stars)}** "
                        f"({true_stars} star{'s' if true_stars > 1 else ''}) — {verdict}")
        if source:
            st.caption(f"Review from: {source}")
        st.caption(f"{pred.n_tokens} tokens, {len(pred.words)} words, "
                   f"{pred.num_layers} layers × {pred.num_heads} heads")
        # Inside the column: the page below keeps its place whether they show or not (a
        # chart or component that moves is built anew in the browser, on every click).
        if pred.chars_cut:
            st.warning("This text is very long: only its first 100,000 characters were read.")
        if pred.truncated:
            st.warning(f"Truncated: the review has {pred.n_tokens_original:,} tokens but the "
                       f"model reads at most {pred.max_length}. The prediction and the attention "
                       f"use only the first {pred.max_length - 2} wordpieces.")
    with c2:
        st.plotly_chart(figures.probs_bar(list(scheme.names), pred.probs, pred.label_id, true_id),
                        key="probs_chart", config={"displayModeBar": False})


def attention_controls(pred: Prediction) -> dict:
    st.markdown("Layer and head for the attention views and for *Which words mattered?*'s "
                "attention methods, numbered from 1.")
    c1, c2, c3, c4 = st.columns(4)
    layer = c1.selectbox("Layer", list(range(pred.num_layers)), index=pred.num_layers - 2
                         if pred.num_layers > 1 else 0, format_func=lambda i: f"layer {i + 1}",
                         key="att_layer")
    head_opts = [None] + list(range(pred.num_heads))
    head = c2.selectbox("Head", head_opts, key="att_head",
                        format_func=lambda h: "mean of heads" if h is None else f"head {h + 1}")
    level = c3.radio("Columns", ["token", "word"], horizontal=True, key="att_level",
                     help="word: the attention of a word's WordPieces is summed")
    include = c4.checkbox("Include [CLS]/[SEP]", value=False, key="att_special",
                          help="Unticked: the special tokens are dropped and each row is "
                               "renormalised to sum to 1")
    return dict(layer=layer, head=head, level=level, include_special=include)


def attention_views(pred: Prediction, c: dict, key: str = state.ATTENTION_VIEW,
                    hv_key: str = state.HV_WINDOW) -> None:
    """The four attention views of ``pred`` for the controls ``c``, one tab each, and only
    the open tab built and sent: the review highlighted by one layer's [CLS] attention
    (first: readable without a legend), the [CLS] heatmap of every layer (the seed
    report's figure), every head of a layer, and bertviz's head and model views.

    Built together, one under the other, a 256-token prediction cost the server and the
    browser several times more to draw (Plotly's tick labels of the heatmaps, bertviz's
    SVG; ``bench/first_second.py``), though all but the first view lay below the fold.
    Opening another tab redraws from the same shared prediction, with
    no forward pass. ``key`` holds the open tab, ``hv_key`` the head view's window slider
    (bertviz_view).

    The open tab is kept while another tab of the page is open (Streamlit drops the state
    of a widget that a run does not draw): each run that draws the tabs writes the open
    one into ``key + "_kept"``, and it is put back only when the tabs' own state was
    dropped (tabs have no ``persist_state``, state.KEEP). Put back on every run, a run
    still in flight undid a click on another tab made right after *Predict*
    (``tests/browser/test_browser.py::test_a_tab_clicked_while_predict_runs_draws_the_new_review``)."""
    kept = f"{key}_kept"
    if key not in st.session_state and kept in st.session_state:
        st.session_state[key] = st.session_state[kept]
    tabs = st.tabs(ATTENTION_VIEWS, key=key, on_change="rerun")
    st.session_state[kept] = next((v for v, t in zip(ATTENTION_VIEWS, tabs) if t.open),
                                  ATTENTION_VIEWS[0])
    views = (highlight_view, cls_layers_view, heads_view,
             lambda p, c: bertviz_view(p, c, key=hv_key))
    for tab, view in zip(tabs, views):
        if tab.open:
            with tab:
                view(pred, c)


def token_chart(fig, key: str) -> None:
    """A chart with a label per token, drawn without Streamlit's chart theme: the theme
    makes plotly.js measure every tick label (figures.OWN_TEMPLATE says why). The figure
    carries the theme's look itself."""
    st.plotly_chart(fig, key=key, theme=None)


def show_highlight(html_block: str) -> None:
    """A highlighted review (highlight.highlight_html: escaped, a ``<div>`` of ``<span>``s)
    as HTML, not through Markdown: Streamlit's Markdown parser re-reads every span, a
    visible share of the browser's work for a long review, and there is no Markdown in it."""
    st.html(html_block)


def cls_layers_view(pred: Prediction, c: dict):
    st.subheader("[CLS] → token attention, last layers")
    st.caption("The classifier reads only the [CLS] position, so this is where the model "
               "looks when it decides (the seed report's figure). Rows: layers; brighter = more.")
    view = attention.cls_view(pred, head=c["head"], level=c["level"], include_special=c["include_special"])
    fig = figures.cls_heatmap(view, wrap=HEATMAP_WRAP)
    token_chart(fig, "cls_heatmap")
    downloads(pred, fig)


def heads_view(pred: Prediction, c: dict):
    st.subheader(f"Every head of layer {c['layer'] + 1}")
    view = attention.heads_view(pred, c["layer"], level=c["level"], include_special=c["include_special"])
    token_chart(figures.heads_figure(view, c["layer"]), "heads_fig")
    head = 0 if c["head"] is None else c["head"]
    if c["head"] is None:
        st.caption("Enlarged below: head 1 (pick a head above to enlarge another).")
    token_chart(figures.head_bars(view, c["layer"], head), "head_bars")


def bertviz_view(pred: Prediction, c: dict, key: str = state.HV_WINDOW):
    """bertviz's head view of layer ``c["layer"]`` (head ``c["head"]``, or all heads) and,
    in the tab beside it, its model view (every layer × every head), both offline.

    A review longer than the views' :data:`HV_MAX` tokens gets a slider that moves the
    drawn window along it, the same window for both views; [CLS] and [SEP] are always
    drawn. ``key`` is the slider's session-state key (one per page); the tabs' key is
    ``key + "_view"``.
    """
    st.subheader("Head view and model view (bertviz): token → token")
    st.caption("Head view: lines join each token (left) to the tokens it attends to (right); "
               "hover a token to isolate its lines, click the coloured squares to toggle heads, "
               "double-click one to show it alone. Model view: every layer × every head as a "
               "thumbnail; click one to enlarge it. Both work offline.")
    heads = None if c["head"] is None else [c["head"]]

    # A fragment: moving the window reruns (and redraws) the views alone, not the page.
    @st.fragment
    def window():
        n = len(pred.tokens)
        start = None
        # The slider's place exists for every review, so that the views below keep theirs:
        # a component that moves is a new iframe, whose scripts load again.
        # A short review's caption says that the whole of it is drawn, and a hidden slider
        # if none was drawn in this session yet: the browser fetches the sliders' code
        # now, not on the first long review's click.
        slot = st.container()
        if n <= HV_MAX:
            slot.caption(f"Showing the whole review: [CLS], its {n - 2} tokens and [SEP].")
            if not runtime.code_fetched():
                with slot:
                    runtime.prefetch_code(f"{key}_code", plotly=False)
        else:
            last = last_window_start(n)
            if st.session_state.get(key, 1) > last:     # a shorter review than the last one
                st.session_state[key] = last
            width = HV_MAX - 2
            start = slot.slider(
                "Head view window: first token drawn", 1, last, key=key,
                help=f"The head and model views draw one line per token pair per head, so "
                     f"they show {width} tokens at a time (plus [CLS] and [SEP]). Slide to move "
                     "along the review; the heatmaps show every token at once.")
            slot.caption(f"Showing [CLS], tokens {start}–{start + width - 1} of {n - 2} and [SEP]. "
                         "The weights are the model's own: attention to tokens outside the "
                         "window is not drawn, and the rows are not renormalised.")
        # only the open tab is built: the model view is 72 heads' worth of lines
        head_tab, model_tab = st.tabs([f"Head view (layer {c['layer'] + 1})",
                                       "Model view (every layer × every head)"],
                                      key=f"{key}_view", on_change="rerun")
        if head_tab.open:
            with head_tab:
                bertviz(pred, "head", key=f"{key}_head", layer=c["layer"], heads=heads,
                        start=start)
        if model_tab.open:
            with model_tab:
                bertviz(pred, "model", key=f"{key}_model", start=start)
    window()


_COMPONENT = []


def component():
    """The app's bertviz component, declared once per process (its files are written into
    the web cache the first time: bertviz_view.component_dir)."""
    if not _COMPONENT:
        import streamlit.components.v1 as components
        _COMPONENT.append(components.declare_component(
            "bertviz", path=str(bertviz_html.component_dir())))
    return _COMPONENT[0]


def prepare() -> None:
    """What the first prediction's views would otherwise pay for: bertviz itself
    (its package imports IPython) and the component's files. The model's loading thread
    calls it; the component is declared by the first script run that draws it (Streamlit
    registers a component only from a script run)."""
    import bertviz.util  # noqa: F401
    bertviz_html.component_dir()


def bertviz(pred: Prediction, kind: str, key: str, **view) -> None:
    """One of bertviz's views of ``pred`` ("head" or "model") through the app's component
    (bertviz_view.view_data: the page loads its scripts once; a prediction sends its
    weights, not a page)."""
    args, bits, vals = bertviz_html.view_data(pred, kind, **view)
    component()(**args, bits=bits, vals=vals, key=key, default=None)


def highlight_view(pred: Prediction, c: dict):
    head = "mean of heads" if c["head"] is None else f"head {c['head'] + 1}"
    st.subheader("The review, highlighted by attention")
    st.caption(f"[CLS] → word attention in layer {c['layer'] + 1}, {head} "
               "(special tokens excluded, renormalised). Hover a word for its value.")
    scores = attention.word_scores(pred, c["layer"], c["head"])
    show_highlight(highlight.highlight_html(pred.text, pred.word_spans, scores))


# ------------------------------------------------------------------ downloads
def downloads(pred: Prediction, fig):
    st.markdown("**Downloads**")
    c1, c2, c3, c4 = st.columns(4)
    png_download(c1, fig, state_key=state.PNG, figure_key=f"{hash(pred.text)}-{fig.layout.title.text}",
                 file_name="cls_attention.png", label="Heatmap PNG",
                 render_label="Render heatmap PNG", note=" The HTML download works without it.")
    c2.download_button("Heatmap HTML", lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                       "cls_attention.html", "text/html", key="dl_html", on_click="ignore",
                       help="Interactive, with plotly.js inside: opens offline")
    c3.download_button("Attention JSON", lambda: json.dumps(pred.weights_json()),
                       "attention.json", "application/json", key="dl_json", on_click="ignore")

    def npy() -> bytes:
        buf = io.BytesIO()
        np.save(buf, pred.attentions)
        return buf.getvalue()
    c4.download_button("Attention .npy", npy, "attention.npy", "application/octet-stream",
                       key="dl_npy", on_click="ignore",
                       help="float32 [layer, head, query, key]; tokens are in the JSON")
