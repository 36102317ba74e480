"""bertviz's head view and model view as self-contained HTML pages that need no internet.

``bertviz.head_view(..., html_action="return")`` emits a ``<script src=cdnjs…
require.min.js>`` tag, and its ``head_view.js`` starts with a ``require.config``
that fetches d3 and jQuery from cdnjs. This module builds the same page from
bertviz's own ``head_view.js`` and the same params, but the three libraries come
from ``assets/vendor/`` (npm packages, licenses beside them) and are inlined; d3
and jQuery are registered as named RequireJS modules, so bertviz's
``requirejs(['jquery','d3'], …)`` finds them without a request.

The head view draws one SVG line per head per token pair (H × T² lines), so it
shows at most :data:`MAX_TOKENS` tokens: [CLS], a window of ``MAX_TOKENS - 2``
consecutive tokens, and the final [SEP]. The window starts anywhere in the review
(:func:`head_view_tokens`' ``start``), so every part of a long review can be drawn.
The weights drawn are the model's own, taken from the full matrix: a token's
attention to tokens outside the window is simply not drawn (rows are not
renormalised).

The model view (:func:`model_view_html`, bertviz's ``model_view``: every layer × every
head as a thumbnail, click one to enlarge it) is built the same way from bertviz's
``model_view.js``, over the same token window as the head view.
"""
from __future__ import annotations

import json
import re
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np

VENDOR = Path(__file__).resolve().parents[1] / "assets" / "vendor"
VENDOR_FILES = ("jquery-3.5.1.min.js", "d3-5.7.0.min.js", "require-2.3.6.min.js")
MAX_TOKENS = 48
MIN_LINE_WEIGHT = 0.01
"""Lines for weights below this are not created: drawn at opacity < 0.01 they are
invisible, and skipping them cuts the SVG (and the drawing time) several-fold.
Hover boxes still use every weight."""

# bertviz 1.4.1 renderAttention(): one <line> per (head, left, right). Drop the faint ones,
# keeping each line's right-token index (its y2 and its hover lookup use it).
_LINE_PATCHES = (
    (""".selectAll("line")
            .data(d => d)""",
     """.selectAll("line")
            .data(d => d.map((w, j) => ({w: w, j: j})).filter(o => o.w >= RB_MIN_WEIGHT))"""),
    (""".attr("y2", (d, rightTokenIndex) => TEXT_TOP + rightTokenIndex * BOXHEIGHT + (BOXHEIGHT / 2))""",
     """.attr("y2", d => TEXT_TOP + d.j * BOXHEIGHT + (BOXHEIGHT / 2))"""),
    (""".attr("right-token-index", (d, i) => i)
        ;""", """.attr("right-token-index", d => d.j)
        ;"""),
    ("""return d / activeHeads()""", """return d.w / activeHeads()"""),
)

_REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\);", re.S)
_BLOCK_COMMENT = re.compile(r"/\*\*.*?\*\*/", re.S)  # bertviz's header comment (has URLs)

_DECODE = """<script>
function rbMilli(a) { return a.map(l => l.map(h => h.map(r => r.map(v => v / 1000)))); }
</script>
"""

_DEFINE = """
define('jquery', [], function () { return window.jQuery; });
define('d3', [], function () { return window.d3; });
"""


@lru_cache(maxsize=1)
def vendored_js() -> str:
    parts = []
    for name in VENDOR_FILES:
        src = (VENDOR / name).read_text(encoding="utf-8")
        parts.append(f"<script>/* {name} (assets/vendor) */\n{src}\n</script>")
    parts.append(f"<script>{_DEFINE}</script>")
    return "\n".join(parts)


def last_window_start(n_tokens: int, max_tokens: int = MAX_TOKENS) -> int:
    """The largest window start: the window then ends just before the final [SEP]."""
    return max(1, n_tokens - 1 - (max_tokens - 2))


def head_view_tokens(pred, max_tokens: int = MAX_TOKENS, start: int | None = None) -> list[int]:
    """Token positions shown: all of them, or [CLS] + ``max_tokens - 2`` tokens from
    ``start`` (1 = right after [CLS], the default; clamped) + the final [SEP]."""
    n = len(pred.tokens)
    if n <= max_tokens:
        return list(range(n))
    width = max_tokens - 2
    s = min(max(1, int(start or 1)), last_window_start(n, max_tokens))
    return [0] + list(range(s, s + width)) + [n - 1]


def _bertviz_js() -> str:
    import bertviz
    return (Path(bertviz.__file__).resolve().parent / "head_view.js").read_text(encoding="utf-8")


def _json_for_script(obj) -> str:
    """JSON that cannot close the <script> it sits in (``<``, ``>``, ``&`` as \\u escapes)."""
    return (json.dumps(obj, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _int_array_json(a: np.ndarray) -> str:
    """A nested JSON list of integers (digits, commas and brackets only, so nothing to
    escape in a <script>). orjson: ``json.dumps`` of the 166,000 weights of a 48-token
    6 x 12 view was a tenth of the Predict page's server time (bench/first_second.py
    measures the server's CPU per Predict click)."""
    import orjson
    return orjson.dumps(np.ascontiguousarray(a, dtype=np.int64),
                        option=orjson.OPT_SERIALIZE_NUMPY).decode("ascii")


def head_view_html(pred, layer: int = 0, heads: list[int] | None = None,
                   max_tokens: int = MAX_TOKENS, min_weight: float = MIN_LINE_WEIGHT,
                   start: int | None = None) -> str:
    """A standalone HTML document with bertviz's head view of ``pred``'s attentions.

    Same page as ``bertviz.head_view(..., html_action="return")`` builds (its
    ``head_view.js`` and its params), with two changes: the libraries are inlined,
    and the weights travel as integers in thousandths (decoded in the page), which
    keeps a 48-token, 6x12 view under 1 MB and quick to build. ``start``: see
    :func:`head_view_tokens`.
    """
    from bertviz.util import format_special_chars

    keep = head_view_tokens(pred, max_tokens, start)
    att = pred.attentions[:, :, keep][:, :, :, keep]
    milli = np.rint(att * 1000).astype(np.int32)
    tokens = format_special_chars([pred.tokens[i] for i in keep])
    n_layers = att.shape[0]
    vis_id = f"bertviz-{uuid.uuid4().hex}"
    params = {"attention": [{"name": None, "attn": "__ATTN__", "left_text": tokens,
                             "right_text": tokens}],
              "default_filter": "0", "root_div_id": vis_id, "layer": int(layer),
              "heads": [int(h) for h in heads] if heads else None,
              "include_layers": list(range(n_layers))}
    params_js = _json_for_script(params).replace(
        '"__ATTN__"', "rbMilli(" + _int_array_json(milli) + ")")
    js = _head_view_js(min_weight).replace("PYTHON_PARAMS", params_js)
    vis_html = (f'<div id="{vis_id}" style="font-family:\'Helvetica Neue\', Helvetica, Arial, '
                f'sans-serif;"><span style="user-select:none">Layer: <select id="layer"></select>'
                f"</span><div id='vis'></div></div>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            "<style>body{margin:0;font-family:'Helvetica Neue',Helvetica,Arial,sans-serif;"
            "background:#fff;color:#1f2430} select{font-size:14px}</style></head><body>\n"
            + vendored_js() + "\n" + _DECODE + vis_html
            + '\n<script type="text/javascript">\n' + js + "\n</script>\n</body></html>")


@lru_cache(maxsize=4)
def _head_view_js(min_weight: float) -> str:
    """bertviz's head_view.js without its CDN configuration, layers numbered from 1 (as every
    other view of the app does), faint lines not drawn; ``PYTHON_PARAMS`` still in it."""
    js = _REQUIRE_CONFIG.sub("", _bertviz_js(), count=1)
    js = _BLOCK_COMMENT.sub("", js, count=1)
    js = js.replace('.val(layer).text(layer)', '.val(layer).text(layer + 1)')
    return _sparse_lines(js, min_weight)


def _sparse_lines(js: str, min_weight: float) -> str:
    """Apply :data:`_LINE_PATCHES`, or none of them if bertviz's JS is not the expected one."""
    if min_weight <= 0 or not all(old in js for old, _ in _LINE_PATCHES):
        return js
    for old, new in _LINE_PATCHES:
        js = js.replace(old, new, 1)
    return f"const RB_MIN_WEIGHT = {float(min_weight)!r};\n" + js


def head_view_height(pred, max_tokens: int = MAX_TOKENS) -> int:
    """Pixel height the embedded head view needs (bertviz: 22.5 px a token)."""
    return int(min(len(head_view_tokens(pred, max_tokens)), max_tokens) * 22.5 + 90)


# ------------------------------------------------------------------ model view
# bertviz 1.4.1 model_view.js: the same sparse lines (thumbnails and the enlarged head),
# and layers and heads numbered from 1 like every other view of the app.
_MODEL_PATCHES = (
    ("""                .data(function (d) { // Loop over all target tokens
                    return d;
                })""",
     """                .data(d => d.map((w, j) => ({w: w, j: j})).filter(o => o.w >= RB_MIN_WEIGHT))"""),
    ("""                .attr("y2", function (d, targetIndex) {
                    return y1 + (targetIndex + .5) * config.thumbnailBoxHeight;""",
     """                .attr("y2", function (d) {
                    return y1 + (d.j + .5) * config.thumbnailBoxHeight;"""),
    ("""                .attr("y2", function (d, targetIndex) {
                    return y + (targetIndex + .5) * DETAIL_BOX_HEIGHT;""",
     """                .attr("y2", function (d) {
                    return y + (d.j + .5) * DETAIL_BOX_HEIGHT;"""),
    ("""                .attr("stroke-opacity", function (d) {
                    return d;
                });""",
     """                .attr("stroke-opacity", function (d) {
                    return d.w;
                });"""),
)
_MODEL_LABELS = (
    (".text(config.heads[i])", ".text(config.heads[i] + 1)"),
    (".text(config.layers[i])", ".text(config.layers[i] + 1)"),
    ("""'Layer ' + config.layers[layerIndex] + ", Head " + config.heads[headIndex]""",
     """'Layer ' + (config.layers[layerIndex] + 1) + ", Head " + (config.heads[headIndex] + 1)"""),
    ('console.log("x", x, y)', ""),
    # a 970 px drawing: scaled down to the frame's width instead of cut off on the right
    ('.attr("width", DIV_WIDTH)',
     '.attr("width", DIV_WIDTH).attr("viewBox", "0 0 " + DIV_WIDTH + " " + config.divHeight)'
     '.style("max-width", "100%").style("height", "auto")'),
)


def _bertviz_model_js() -> str:
    import bertviz
    return (Path(bertviz.__file__).resolve().parent / "model_view.js").read_text(encoding="utf-8")


def _patched_model_js(min_weight: float) -> str:
    js = _REQUIRE_CONFIG.sub("", _bertviz_model_js(), count=1)
    js = _BLOCK_COMMENT.sub("", js, count=1)
    for old, new in _MODEL_LABELS:
        js = js.replace(old, new)
    if min_weight > 0 and all(old in js for old, _ in _MODEL_PATCHES):
        for old, new in _MODEL_PATCHES:
            js = js.replace(old, new)       # every occurrence: thumbnails and the enlarged head
        js = f"const RB_MIN_WEIGHT = {float(min_weight)!r};\n" + js
    return js


def model_view_html(pred, max_tokens: int = MAX_TOKENS, min_weight: float = MIN_LINE_WEIGHT,
                    start: int | None = None) -> str:
    """A standalone HTML document with bertviz's model view of ``pred``'s attentions
    (every layer × every head), over the same token window as :func:`head_view_html`."""
    from bertviz.util import format_special_chars

    keep = head_view_tokens(pred, max_tokens, start)
    att = pred.attentions[:, :, keep][:, :, :, keep]
    milli = np.rint(att * 1000).astype(np.int32)
    tokens = format_special_chars([pred.tokens[i] for i in keep])
    n_layers, n_heads = att.shape[0], att.shape[1]
    vis_id = f"bertviz-{uuid.uuid4().hex}"
    params = {"attention": [{"name": None, "attn": "__ATTN__", "left_text": tokens,
                             "right_text": tokens}],
              "default_filter": "0", "display_mode": "light", "root_div_id": vis_id,
              "include_layers": list(range(n_layers)), "include_heads": list(range(n_heads)),
              "total_heads": n_heads}
    params_js = _json_for_script(params).replace(
        '"__ATTN__"', "rbMilli(" + _int_array_json(milli) + ")")
    js = _patched_model_js(min_weight).replace("PYTHON_PARAMS", params_js)
    vis_html = (f'<div id="{vis_id}" style="font-family:\'Helvetica Neue\', Helvetica, Arial, '
                f'sans-serif;"><span style="user-select:none"></span><div id=\'vis\'></div></div>')
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            "<style>body{margin:0;font-family:'Helvetica Neue',Helvetica,Arial,sans-serif;"
            "background:#fff;color:#1f2430}</style></head><body>\n"
            + vendored_js() + "\n" + _DECODE + vis_html
            + '\n<script type="text/javascript">\n' + js + "\n</script>\n</body></html>")


def model_view_height(pred, max_tokens: int = MAX_TOKENS) -> int:
    """Pixel height of the model view (bertviz: a 7·12/H px row per token per layer)."""
    n = len(head_view_tokens(pred, max_tokens))
    box = 7 * (12 / pred.num_heads)
    thumbnails = pred.num_layers * (n * box + 10) + 38
    detail = n * 18 + 30 + 25
    return int(max(thumbnails, detail) + 30)


# ------------------------------------------------------------------ the app's component
# The app draws both views as one Streamlit component (reviewbert/assets/bertviz_component):
# its page and the libraries load once per browser tab, and a prediction sends only its
# tokens and its weights, as bytes (a 256-token review's head view was a 1.09 MB HTML
# document per prediction, its JavaScript inlined every time; it is now ~45 kB).
COMPONENT_ASSETS = Path(__file__).resolve().parents[1] / "assets" / "bertviz_component"
COMPONENT_LIBS = ("jquery-3.5.1.min.js", "d3-5.7.0.min.js")
_REQUIREJS_HEAD = re.compile(
    r"requirejs\(\['jquery', 'd3'\],\s*function\s*\(\$,\s*d3\)\s*\{\s*"
    r"const params = PYTHON_PARAMS;[^\n]*\n")


def _as_function(js: str, name: str) -> str:
    """bertviz's ``requirejs(['jquery', 'd3'], function ($, d3) {const params = …; …});``
    as ``window.NAME = function (params, $, d3) {…};``: drawn again for each prediction,
    with no module loader."""
    js, n = _REQUIREJS_HEAD.subn(f"window.{name} = function (params, $, d3) {{\n", js, count=1)
    body = js.rstrip()
    if n != 1 or not body.endswith("});"):
        raise RuntimeError(f"bertviz's JavaScript is not the one this app expects ({name})")
    # both files are loaded into one page: the threshold cannot be a const twice
    return body[:-3].replace("const RB_MIN_WEIGHT", "var RB_MIN_WEIGHT") + "};\n"


def component_files(min_weight: float = MIN_LINE_WEIGHT) -> dict[str, str]:
    """The component's files: its page and bridge (the Streamlit component protocol, by
    hand), d3 and jQuery (assets/vendor), and bertviz's two views as functions."""
    files = {name: (VENDOR / name).read_text(encoding="utf-8") for name in COMPONENT_LIBS}
    files["head_view.js"] = _as_function(_head_view_js(min_weight), "rbHeadView")
    files["model_view.js"] = _as_function(_patched_model_js(min_weight), "rbModelView")
    for name in ("index.html", "bridge.js"):
        files[name] = (COMPONENT_ASSETS / name).read_text(encoding="utf-8")
    return files


@lru_cache(maxsize=4)
def component_dir(min_weight: float = MIN_LINE_WEIGHT) -> Path:
    """A folder holding :func:`component_files` for Streamlit to serve: written once into
    the user's cache ($REVIEWBERT_WEB_CACHE, else ~/.cache/reviewbert/web, else the
    temporary folder), named by a hash of its contents, so an upgrade gets a new one.
    Once per process (it reads and hashes the files)."""
    import hashlib
    import os
    import tempfile

    from reviewbert.fsio import atomic_write_text
    files = component_files(min_weight)
    digest = hashlib.sha256("".join(f"{k}\0{v}\0" for k, v in sorted(files.items()))
                            .encode("utf-8")).hexdigest()[:16]
    bases = [os.environ.get("REVIEWBERT_WEB_CACHE"), Path.home() / ".cache" / "reviewbert" / "web",
             Path(tempfile.gettempdir()) / "reviewbert-web"]
    for base in filter(None, bases):
        folder = Path(base) / f"bertviz-{digest}"
        try:
            if not (folder / "index.html").is_file():
                for name, text in sorted(files.items(), key=lambda kv: kv[0] == "index.html"):
                    atomic_write_text(folder / name, text)      # the page last: it marks done
            return folder
        except OSError:
            continue
    raise OSError("no writable folder for the head view's files (set REVIEWBERT_WEB_CACHE)")


def view_data(pred, kind: str = "head", layer: int = 0, heads: list[int] | None = None,
              max_tokens: int = MAX_TOKENS, min_weight: float = MIN_LINE_WEIGHT,
              start: int | None = None) -> tuple[dict, bytes, bytes]:
    """What the component draws for ``pred``: (arguments, ``bits``, ``vals``). The window is
    :func:`head_view_tokens`'; of its weights [layers, heads, n, n], those the views draw
    (>= ``min_weight``) travel in 1/255ths (``vals``, uint8) with a bitmap of where they are
    (``bits``, numpy's packbits); the others are drawn as 0, as they would be anyway."""
    from bertviz.util import format_special_chars

    keep = head_view_tokens(pred, max_tokens, start)
    att = np.asarray(pred.attentions[:, :, keep][:, :, :, keep], dtype=np.float32)
    kept = att >= min_weight
    vals = np.clip(np.rint(att[kept] * 255), 0, 255).astype(np.uint8)
    height = head_view_height(pred, max_tokens) if kind == "head" else \
        model_view_height(pred, max_tokens)
    args = {"kind": kind, "tokens": format_special_chars([pred.tokens[i] for i in keep]),
            "shape": [int(d) for d in att.shape], "layer": int(layer),
            "heads": [int(h) for h in heads] if heads else None, "height": int(height)}
    return args, np.packbits(kept.ravel()).tobytes(), vals.tobytes()
