"""bertviz's model view (every layer x every head) as built for the Predict page: offline,
the same token window as the head view, layers and heads numbered from 1, faint lines
dropped, and no token can close its script."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np

from reviewbert.viz import bertviz_view as headview


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


def test_the_components_data_are_the_drawn_weights_in_255ths():
    """What a prediction sends the app's component: a bitmap of the weights the views draw
    (>= the threshold) and each of them in 1/255ths; decoding gives them back, the rest 0."""
    p = pred(L=2, H=3)
    args, bits, vals = headview.view_data(p, "head", layer=1, heads=[2], start=7)
    keep = headview.head_view_tokens(p, start=7)
    att = p.attentions[:, :, keep][:, :, :, keep]
    assert args["shape"] == list(att.shape) and args["layer"] == 1 and args["heads"] == [2]
    assert args["tokens"][0] == "[CLS]" and len(args["tokens"]) == len(keep)
    mask = np.unpackbits(np.frombuffer(bits, np.uint8))[:att.size].astype(bool)
    got = np.zeros(att.size)
    got[mask] = np.frombuffer(vals, np.uint8) / 255
    drawn = att.ravel() >= headview.MIN_LINE_WEIGHT
    assert np.array_equal(mask, drawn)
    assert np.abs(got[drawn] - att.ravel()[drawn]).max() <= 1 / 510 + 1e-9
    assert (got[~drawn] == 0).all()


def test_the_component_is_bertvizs_views_as_functions_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("REVIEWBERT_WEB_CACHE", str(tmp_path))
    folder = headview.component_dir()
    names = {f.name for f in folder.iterdir()}
    assert names == {"index.html", "bridge.js", "head_view.js", "model_view.js",
                     "jquery-3.5.1.min.js", "d3-5.7.0.min.js"}
    page = (folder / "index.html").read_text()
    assert all(f'src="{n}"' in page for n in names - {"index.html"})
    for name in ("head_view.js", "model_view.js"):
        js = (folder / name).read_text()
        assert "PYTHON_PARAMS" not in js and "requirejs" not in js and "cdnjs" not in js
        assert js.startswith("var RB_MIN_WEIGHT") and js.rstrip().endswith("};")
    assert "window.rbHeadView = function (params, $, d3)" in (folder / "head_view.js").read_text()
    assert headview.component_dir() == folder                       # written once
