"""Figure builders, the offline head view, escaping, the built-in examples."""
import json
import re
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
from test_attention import fake_pred

from reviewbert.data.examples import EXAMPLES_FILE, builtin_examples, sample
from reviewbert.explain import figures as XF
from reviewbert.model import attention as A
from reviewbert.viz import figures as F
from reviewbert.viz.bertviz_view import VENDOR, VENDOR_FILES, head_view_html
from reviewbert.viz.highlight import highlight_html


def test_cls_heatmap_rows_columns_and_hover():
    p = fake_pred(L=8)
    v = A.cls_view(p, level="token", include_special=True)
    fig = F.cls_heatmap(v)
    hm = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(hm) == 1
    z = np.asarray(hm[0].z)
    assert z.shape == (6, 6)
    assert list(hm[0].y) == [f"layer {i}" for i in range(3, 9)]
    # columns are the tokens, each repeat kept apart by zero-width spaces (a category axis
    # would merge "the" and "the"), read back in the hover as they are written
    x = list(hm[0].x)
    assert [t.replace("\u200b", "") for t in x] == p.tokens and len(set(x)) == len(x)
    assert fig.layout.xaxis.type == "category"
    tpl = hm[0].hovertemplate
    assert "token: %{x}" in tpl and "%{y}" in tpl and "%{z" in tpl
    assert hm[0].customdata is None                   # no label per cell: one per column
    assert fig.layout.coloraxis.colorscale[0][1].lower() in ("#440154", "rgb(68,1,84)")  # viridis


def test_cls_heatmap_wraps_long_reviews_and_keeps_every_column():
    L, T = 6, 130
    att = np.full((L, 2, T, T), 1.0 / T, dtype=np.float32)
    toks = ["[CLS]"] + [f"w{i}" for i in range(T - 2)] + ["[SEP]"]
    p = SimpleNamespace(tokens=toks, word_ids=[None] + list(range(T - 2)) + [None],
                        words=toks[1:-1], attentions=att)
    fig = F.cls_heatmap(A.cls_view(p), wrap=48)
    hm = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(hm) == 3                                   # 48 + 48 + 34 columns
    assert sum(np.asarray(t.z).shape[1] for t in hm) == T
    assert all(np.asarray(t.z).shape[0] == L for t in hm)


def test_heads_figure_one_row_per_head():
    p = fake_pred(H=4)
    v = A.heads_view(p, layer=1)
    fig = F.heads_figure(v, layer=1)
    hm = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(hm) == 1 and list(hm[0].y) == ["head 1", "head 2", "head 3", "head 4"]
    np.testing.assert_array_equal(np.asarray(hm[0].z), v.values)
    assert "layer 2, %{y}" in hm[0].hovertemplate and hm[0].ygap == 2 and not hm[0].xgap
    wrapped = F.heads_figure(v, layer=1, wrap=4)                # 6 columns -> 2 blocks
    blocks = [t for t in wrapped.data if isinstance(t, go.Heatmap)]
    assert [np.asarray(t.z).shape for t in blocks] == [(4, 4), (4, 2)]


def test_head_bars_and_probs_bar():
    p = fake_pred(H=4)
    v = A.heads_view(p, layer=0)
    fig = F.head_bars(v, layer=0, head=2)
    np.testing.assert_allclose(fig.data[0].y, v.values[2])
    bar = F.probs_bar(["negative", "neutral", "positive"], [0.2, 0.7, 0.1], true=0)
    assert list(bar.data[0].y)[0] == "negative  (true)"
    assert bar.data[0].marker.color[1] == "#2d6cdf"


def test_token_axes_skip_per_label_measuring():
    """Every axis of the token charts opts out of plotly.js's per-label measuring
    (ticklabeloverflow + automargin): measuring 254 labels was most of the page's
    drawing time. Bar colours are colour strings: plotly.js logged a warning per
    bar for numbers."""
    T = 130
    att = np.full((6, 3, T, T), 1.0 / T, dtype=np.float32)
    toks = ["[CLS]"] + [f"w{i}" for i in range(T - 2)] + ["[SEP]"]
    p = SimpleNamespace(tokens=toks, word_ids=[None] + list(range(T - 2)) + [None],
                        words=toks[1:-1], attentions=att)
    figs = [F.cls_heatmap(A.cls_view(p), wrap=48), F.heads_figure(A.heads_view(p, 0), 0),
            F.head_bars(A.heads_view(p, 0), 0, 1)]
    for fig in figs:
        axes = [a for k, a in fig.layout.to_plotly_json().items() if k[1:5] == "axis"]
        assert len(axes) >= 2
        for a in axes:
            assert a.get("ticklabeloverflow") == "allow" and a.get("automargin") is False, a
    colors = figs[2].data[0].marker.color
    assert len(colors) == T and all(isinstance(c, str) and c.startswith("rgb") for c in colors)
    # Drawn without Streamlit's theme (its axis titles' standoff makes plotly.js measure
    # every label): each carries the theme's look in its own template, and no standoff.
    for fig in figs:
        look = fig.layout.template.layout
        assert look.font.family == F.FONT and look.paper_bgcolor == "#ffffff"
        assert look.title.font.color == F.HEADING and fig.layout.title.text
        assert "standoff" not in fig.to_json()


def _long_pred(T=130, L=6, H=3, seed=1):
    rng = np.random.default_rng(seed)
    att = rng.random((L, H, T, T)).astype(np.float32)
    att /= att.sum(-1, keepdims=True)
    toks = ["[CLS]"] + [f"w{i}" for i in range(T - 2)] + ["[SEP]"]
    return SimpleNamespace(tokens=toks, word_ids=[None] + list(range(T - 2)) + [None],
                           words=toks[1:-1], attentions=att)


def test_unchecked_figures_pass_validation_and_give_the_validated_json():
    """The Predict page's figures skip Plotly's validation (F.unchecked_figure) for speed.
    Validating them afterwards must neither fail (no misspelt property slipped through)
    nor change a byte of what Streamlit sends to plotly.js."""
    import plotly.io as pio
    p = _long_pred()
    figs = {"cls": F.cls_heatmap(A.cls_view(p), wrap=48),
            "cls_one_block": F.cls_heatmap(A.cls_view(p, level="word")),
            "heads": F.heads_figure(A.heads_view(p, 2), 2),
            "bars": F.head_bars(A.heads_view(p, 2), 2, 1),
            "probs": F.probs_bar(["1", "2", "3", "4", "5"], [0.1, 0.2, 0.3, 0.25, 0.15], 2, 3),
            "agreement": XF.agreement_heatmap(["raw", "rollout", "IG"],
                                              [[1, 0.5, np.nan], [0.5, 1, -0.2], [np.nan, -0.2, 1]])}
    for name, fig in figs.items():
        validated = go.Figure(fig.to_dict())            # raises on any invalid property
        got = json.loads(pio.to_json(fig, validate=False))
        want = json.loads(pio.to_json(validated, validate=False))
        assert got == want, name


def test_highlight_html_escapes_the_review():
    text = 'Nice <img src=x onerror=alert(1)> & "cheap"'
    spans = [(0, 4), (5, 9), (10, 15)]
    html = highlight_html(text, spans, [0.5, 0.3, 0.2])
    assert "<img" not in html
    assert "&lt;img" in html and "&amp;" in html
    assert html.count('class="rb-w') == 3
    # a NUL is drawn as U+FFFD (st.html's parser would drop it), in a word and between
    nul = highlight_html("a\x00b \x00 c", [(0, 3), (6, 7)], [0.5, 0.2])
    assert "\x00" not in nul and nul.count("\ufffd") == 2


def test_head_view_is_offline_and_inlines_the_vendored_libs():
    p = fake_pred(L=2, H=4)
    p.tokens[4] = "</script><script>alert(1)</script>"
    html = head_view_html(p, layer=1, heads=[0])
    assert "cdnjs" not in html
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)       # nothing to fetch
    bertviz_part = html.split("define('d3'", 1)[1]          # after the vendored libraries
    assert "require.config" not in bertviz_part and "cloudflare" not in bertviz_part
    assert "http" not in bertviz_part
    # every URL left is an XML namespace or text inside a library, never a resource
    allowed = ("http://www.w3.org/", "https://d3js.org", "https://requirejs.org/docs/errors")
    for url in re.findall(r"https?://[^\s\"'<>)]+", html):
        assert url.startswith(allowed), url
    for name in VENDOR_FILES:
        assert (VENDOR / name).read_text(encoding="utf-8")[200:400] in html
    assert "d3 version" in html and "requirejs(['jquery', 'd3']" in html
    assert html.count("<script>alert(1)</script>") == 0                # token is data
    assert "\\u003c/script\\u003e" in html


def test_head_view_weights_are_the_attention_in_thousandths():
    p = _long_pred(T=40, L=3, H=2)
    html = head_view_html(p, layer=0)
    arg = re.search(r"rbMilli\((\[.*?\]\]\]\])\)", html).group(1)
    want = np.rint(p.attentions * 1000).astype(int)
    assert np.array_equal(np.array(json.loads(arg)), want)
    assert arg == json.dumps(want.tolist(), separators=(",", ":"))     # byte for byte


def test_vendored_js_has_licenses():
    for lic in ("LICENSE-d3", "LICENSE-jquery", "LICENSE-requirejs"):
        assert (VENDOR / lic).stat().st_size > 500


def test_builtin_examples_cover_every_rating():
    ex = builtin_examples()
    assert len(ex) >= 25
    counts = {s: sum(e.stars == s for e in ex) for s in range(1, 6)}
    assert all(c >= 5 for c in counts.values()), counts
    assert max(len(e.text.split()) for e in ex) > 120          # a couple of long ones
    assert all(json.loads(line)["text"].strip() for line in EXAMPLES_FILE.read_text().splitlines())


def test_sample_filters_and_misclassified_is_bounded():
    import random
    ex = builtin_examples()
    r, note = sample(ex, random.Random(0), stars=2)
    assert r.stars == 2 and note == ""
    calls = []
    r, note = sample(ex, random.Random(0), stars=5, misclassified=lambda x: calls.append(x) or False,
                     max_tries=3)
    assert len(calls) == 3 and "no misclassified" in note
    r, _ = sample(ex, random.Random(0), misclassified=lambda x: x.stars == 4)
    assert r.stars == 4


def test_scale_colors_are_the_colour_scales_own_within_one_of_256_levels():
    from plotly.colors import sample_colorscale
    rng = np.random.default_rng(0)
    fractions = np.concatenate([[0.0, 1.0, 0.5, -0.2, 1.7, np.nan], rng.random(500)])
    got = F.scale_colors(fractions)
    want = sample_colorscale(F.COLORSCALE, np.clip(np.nan_to_num(fractions), 0, 1))

    def rgb(c):
        return np.array([float(x) for x in re.findall(r"[\d.]+", c)])
    assert len(got) == len(fractions)
    assert got[0] == want[0] and got[1] == want[1]          # both ends exact
    # one level of the table is 1/255 of the scale: viridis moves < 2 units per level
    worst = max(np.abs(rgb(g) - rgb(w)).max() for g, w in zip(got, want))
    assert worst <= 2.0, worst
    assert len(set(got[6:])) > 100                          # a scale, not one colour
