"""bertviz's model view (every layer x every head) as built for the Predict page: offline,
the same token window as the head view, layers and heads numbered from 1, faint lines
dropped, and no token can close its script."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np

from reviewbert import headview


def pred(T=60, L=2, H=3, seed=0):
    att = np.random.default_rng(seed).dirichlet(np.ones(T), size=(L, H, T)).astype(np.float32)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(1, T - 1)] + ["[SEP]"]
    return SimpleNamespace(attentions=att, tokens=tokens, num_layers=L, num_heads=H)


def params(html: str) -> tuple[dict, np.ndarray]:
    arg = re.search(r"rbMilli\((\[.*?\]\]\]\])\)", html).group(1)
    p = json.loads(re.search(r"const params = (\{.*?\}); // HACK", html, re.S).group(1)
                   .replace("rbMilli(" + arg + ")", "null"))
    return p, np.array(json.loads(arg))


def test_same_window_as_the_head_view_and_the_models_weights():
    p = pred()
    html = headview.model_view_html(p, start=7)
    keep = headview.head_view_tokens(p, start=7)
    assert len(keep) == headview.MAX_TOKENS and keep[:2] == [0, 7] and keep[-1] == 59
    par, milli = params(html)
    assert par["attention"][0]["left_text"] == [p.tokens[i] for i in keep]
    assert par["include_layers"] == [0, 1] and par["total_heads"] == 3
    want = np.rint(p.attentions[:, :, keep][:, :, :, keep] * 1000).astype(int)
    assert np.array_equal(milli, want)


def test_offline_numbered_from_one_and_sparse():
    p = pred()
    p.tokens[3] = "</script><script>alert(1)</script>"
    html = headview.model_view_html(p, start=1)
    assert "</script><script>alert(1)" not in html
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    bertviz_part = html.split("define('d3'", 1)[1]
    assert "require.config" not in bertviz_part and "cdnjs" not in bertviz_part
    assert ".text(config.heads[i] + 1)" in html and ".text(config.layers[i] + 1)" in html
    assert "RB_MIN_WEIGHT = 0.01" in html and "filter(o => o.w >= RB_MIN_WEIGHT)" in html
    assert 'console.log("x"' not in html and 'attr("viewBox"' in html
    # without the patch target (another bertviz), all lines are drawn, nothing breaks
    assert "RB_MIN_WEIGHT" not in headview.model_view_html(p, min_weight=0)


def test_height_grows_with_layers():
    # bertviz draws a row of 7 * 12 / H px per token per layer
    assert headview.model_view_height(pred(L=6, H=12)) > headview.model_view_height(pred(L=2, H=12))
    assert headview.model_view_height(pred(L=6, H=12)) == int(6 * (48 * 7 + 10) + 38 + 30)
