"""The error-analysis page as one self-contained HTML file, and ``python -m reviewbert report``.

    python -m reviewbert report --checkpoint checkpoints/demo --out report.html
    python -m reviewbert report --checkpoint DIR --data FILE --split all --out report.html

The file opens offline: plotly.js is inlined once (Plotly's own
``include_plotlyjs=True`` output, for the first figure; the others reuse it), and
nothing is loaded from a CDN. Every piece of review text goes through
``html.escape``; inside figures Plotly's JSON encoder escapes ``<`` and ``/``.

Sections: metrics with 95 % bootstrap intervals, per-class precision/recall/F1,
confusion matrix, ROC, calibration, accuracy by length (and what the seed's
100-token filter changes), per-rating [CLS] attention with one example heatmap per
rating, label issues (cleanlab) with the metrics recomputed without them, and
optionally the comparison with a second checkpoint.
"""
from __future__ import annotations

import html
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio

from . import attention as A
from . import figures as RF
from .analysis import breakdown as B
from .analysis import figures as AF
from .analysis.calibration import reliability
from .analysis.intervals import metric_intervals
from .analysis.sources import describe

METRIC_NAMES = {"accuracy": "accuracy", "relaxed_accuracy": "relaxed accuracy (±1 star)",
                "auc": "macro AUC (one-vs-rest)", "loss": "cross-entropy loss"}
TOP_ISSUES = 50
CLEAN_CAVEAT = ("Read the second column as an upper bound, not as the model's true accuracy: "
                "cleanlab flags the reviews whose given rating the model confidently disagrees "
                "with, so dropping them also drops many of the model's own mistakes. Read the "
                "flagged reviews to judge which side is wrong.")
TEXT_CHARS = 1200       # a review longer than this is cut in the report's tables

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2rem auto;
padding:0 1rem;color:#1f2430;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem} h2{margin-top:2.4rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem} th,td{border:1px solid #dde;padding:.3rem .55rem;
text-align:right;vertical-align:top} th{background:#f3f5fa} td.text{text-align:left;max-width:640px;
white-space:pre-wrap;overflow-wrap:anywhere} .meta{color:#5a6275;font-size:.92rem} .note{color:#5a6275}
.fig{margin:.8rem 0} code{background:#f3f5fa;padding:0 .25rem}
"""


@dataclass
class ReportInputs:
    """Everything the report draws; only ``preds`` is required (missing parts are skipped)."""
    preds: object                           # analysis.predictions.SplitPredictions
    checkpoint: str
    intervals: dict | None = None           # analysis.intervals.metric_intervals
    issues: object | None = None            # analysis.label_issues.LabelIssues
    word_tops: dict | None = None           # word_attention.top_words, per class
    layer: int | None = None                # the layer of word_tops (0-based)
    rating_by: str = "true rating"
    examples: dict = field(default_factory=dict)   # class -> inference.Prediction
    comparison: object | None = None        # analysis.compare.Comparison
    other: str | None = None                # the compared checkpoint's name


# ------------------------------------------------------------------ html pieces
def _e(x) -> str:
    return html.escape(str(x))


def fmt_metric(metric: str, v) -> str:
    """A metric for people: accuracies and shares in %, AUC and loss with 3 decimals."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "n/a"
    if metric in ("accuracy", "relaxed_accuracy", "share"):
        return f"{100 * v:.1f}%"
    return f"{v:.3f}"


def _table(df: pd.DataFrame, text_cols=("text",), formats: dict | None = None) -> str:
    formats = formats or {}
    head = "".join(f"<th>{_e(c)}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        cells = []
        for c in df.columns:
            v = row[c]
            if c in text_cols:
                s = str(v)
                s = s if len(s) <= TEXT_CHARS else s[:TEXT_CHARS] + "…"
                cells.append(f'<td class="text">{_e(s)}</td>')
            else:
                f = formats.get(c)
                cells.append(f"<td>{_e(f(v) if f else v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class _Figures:
    """Figure HTML snippets; plotly.js goes into the first one only."""

    def __init__(self):
        self.first = True

    def __call__(self, fig) -> str:
        out = pio.to_html(fig, full_html=False, include_plotlyjs=self.first,
                          config={"displaylogo": False, "responsive": True})
        self.first = False
        return f'<div class="fig">{out}</div>'


def metrics_table(m: dict, intervals: dict | None) -> str:
    rows = []
    for key, name in METRIC_NAMES.items():
        if m.get(key) is None:
            continue
        iv = (intervals or {}).get(key)
        ci = f"{fmt_metric(key, iv.low)} – {fmt_metric(key, iv.high)}" if iv is not None else "n/a"
        rows.append(f"<tr><th>{_e(name)}</th><td>{fmt_metric(key, m[key])}</td><td>{ci}</td></tr>")
    return ("<table><thead><tr><th>metric</th><th>value</th><th>95% interval (bootstrap)</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def side_by_side(columns: dict[str, dict]) -> str:
    """The four metrics (and n) of several evaluations, one column each."""
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    rows = ["<tr><th>reviews</th>" + "".join(f"<td>{m.get('n')}</td>" for m in columns.values())
            + "</tr>"]
    for key, name in METRIC_NAMES.items():
        rows.append(f"<tr><th>{_e(name)}</th>"
                    + "".join(f"<td>{fmt_metric(key, m.get(key))}</td>" for m in columns.values())
                    + "</tr>")
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# ------------------------------------------------------------------ the page
def build_report(r: ReportInputs) -> str:
    p = r.preds
    names = p.names
    fig = _Figures()
    meta = p.meta
    m = p.metrics()
    parts = [f"<h1>Error analysis: {_e(r.checkpoint)}</h1>"]
    src = (meta.get("data") or {}).get("source") or {}
    check = meta.get("fp32_check")
    prec = meta.get("precision", "fp32")
    if check:
        prec += (f" (on a sample of {check['n']} reviews re-scored in fp32, "
                 f"{check['agree']} got the same class)")
    parts.append(f'<p class="meta">{_e(p.n)} reviews: {_e(describe(src))}. max_length '
                 f"{_e(meta.get('max_length'))}, forward pass in {_e(prec)}. Generated "
                 f"{_e(datetime.now(timezone.utc).isoformat(timespec='seconds'))} by ReviewBERT.</p>")

    parts.append("<h2>Metrics</h2>")
    parts.append(metrics_table(m, r.intervals))
    parts.append('<p class="note">Intervals: 95% percentile bootstrap over reviews. Two '
                 "checkpoints whose intervals overlap widely are not shown to differ.</p>")
    parts.append("<h2>Per class</h2>")
    pc = B.per_class(p.y, p.pred, names)
    parts.append(_table(pc, text_cols=(), formats={c: (lambda v: f"{v:.3f}")
                                                    for c in ("precision", "recall", "f1")}))

    parts.append("<h2>Confusion matrix</h2>")
    parts.append(fig(AF.confusion_figure(B.confusion(p.y, p.pred, len(names)), names)))
    parts.append("<h2>ROC</h2>")
    parts.append(fig(AF.roc_figure(B.roc_curves(p.y, p.probs, names))))
    rel = reliability(p.y, p.probs)
    parts.append("<h2>Calibration</h2>")
    parts.append(f"<p>Expected calibration error: <b>{rel.ece:.3f}</b> (10 bins).</p>")
    parts.append(fig(AF.reliability_figure(rel)))

    parts.append("<h2>Accuracy by review length</h2>")
    parts.append(fig(AF.length_figure(B.length_bins(p.n_tokens, p.correct,
                                                    meta.get("max_length")))))
    sf = B.seed_filter(p.y, p.probs, p.n_tokens, names)
    parts.append("<p>The seed dropped reviews under 100 tokens. What that filter changes:</p>")
    parts.append(_table(sf, text_cols=(), formats={
        "share": lambda v: fmt_metric("share", v), "accuracy": lambda v: fmt_metric("accuracy", v),
        "relaxed_accuracy": lambda v: fmt_metric("accuracy", v), "auc": lambda v: fmt_metric("auc", v),
        "loss": lambda v: fmt_metric("loss", v)}))

    if r.word_tops is not None:
        parts.append("<h2>Per-rating attention</h2>")
        parts.append(f'<p class="note">Mean [CLS] attention (mean of heads) per word in layer '
                     f"{(r.layer or 0) + 1}, over the reviews of each {_e(r.rating_by)}.</p>")
        parts.append(fig(AF.rating_words_figure(r.word_tops, names, r.layer or 0, r.rating_by)))
    if r.examples:
        parts.append("<h3>One example per rating: its most confident correct prediction</h3>")
        for c, pred in sorted(r.examples.items()):
            view = A.cls_view(pred, level="word", include_special=False)
            title = f"{names[c]}: predicted {pred.label} ({pred.probs[pred.label_id]:.0%})"
            parts.append(f'<p class="note">{_e(title)}</p>')
            parts.append(f'<p class="text">{_e(pred.text[:TEXT_CHARS])}</p>')
            parts.append(fig(RF.cls_heatmap(view, title=title, wrap=48)))

    if r.issues is not None:
        iss = r.issues
        parts.append("<h2>Label issues (cleanlab)</h2>")
        parts.append(f"<p>cleanlab's <code>find_label_issues</code> flags <b>{iss.count}</b> of "
                     f"{iss.n} reviews ({iss.count / max(iss.n, 1):.1%}) whose given rating is "
                     "probably wrong, judged from the model's held-out probabilities.</p>")
        parts.append(side_by_side({"all reviews": iss.metrics_all,
                                   "without the flagged reviews": iss.metrics_clean}))
        parts.append(f'<p class="note">{_e(CLEAN_CAVEAT)}</p>')
        parts.append(f"<h3>The {min(TOP_ISSUES, iss.count)} most likely mislabelled</h3>")
        parts.append(_table(iss.table(p, TOP_ISSUES).drop(columns=["row"])))

    if r.comparison is not None:
        cmp = r.comparison
        t = cmp.test
        parts.append(f"<h2>Compared with {_e(r.other)}</h2>")
        parts.append(side_by_side({r.checkpoint: cmp.metrics_a, r.other or "other": cmp.metrics_b}))
        parts.append(f"<p>{t.b} reviews only {_e(r.checkpoint)} gets right, {t.c} only "
                     f"{_e(r.other)} gets right. McNemar exact p = {t.p_exact:.4g}"
                     + (f" (chi-square {t.chi2:.2f}, p = {t.p_chi2:.4g})" if t.chi2 is not None
                        else "") + ".</p>")
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>ReviewBERT error analysis: {_e(r.checkpoint)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


# ------------------------------------------------------------------ CLI
def add_parser(sub) -> None:
    import argparse
    r = sub.add_parser("report", help="the error-analysis page as one offline HTML file",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Evaluates the checkpoint (or reads its prediction cache), "
                                   "then writes one self-contained HTML file: metrics with "
                                   "intervals, confusion, ROC, calibration, per-rating "
                                   "attention and cleanlab's label issues.")
    r.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="checkpoint folder, or a run folder (then its best/)")
    r.add_argument("--data", action="append", metavar="FILE", default=None,
                   help="review file(s); for --split test they must be the training files")
    r.add_argument("--split", choices=("test", "all"), default="test",
                   help="test: the checkpoint's own test split; all: every review of --data")
    r.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--max-length", type=int, default=None,
                   help="default: the checkpoint's training max_length, else 256")
    r.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                   help="auto: bf16 on a CPU with bf16 units (AMX/AVX512-BF16), else fp32")
    r.add_argument("--layer", type=int, default=None,
                   help="layer (1-based) of the per-rating attention; default: second-to-last")
    r.add_argument("--min-count", type=int, default=5,
                   help="per-rating attention: a word must occur in this many reviews")
    r.add_argument("--no-attention", action="store_true",
                   help="skip the per-rating attention pass (one more pass over the data)")
    r.add_argument("--compare", metavar="DIR", default=None,
                   help="a second checkpoint to compare with on the same reviews")
    r.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object (metrics, label issues) as the last line")
    r.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from . import data
    from .analysis import word_attention as W
    from .analysis.compare import compare
    from .analysis.label_issues import find_issues
    from .analysis.sources import CACHE_MAX_REVIEWS, all_reviews, test_split
    from .inference import Predictor
    from .metrics import format_metrics
    from .model import load_checkpoint

    model, tok, info = load_checkpoint(args.checkpoint)
    max_length = args.max_length or (info.meta.get("hyperparameters") or {}).get("max_length") or 256
    if args.split == "test":
        reviews, source, warnings = test_split(info.meta, tok, args.data)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    else:
        if not args.data:
            raise data.DataError("--split all needs --data FILE")
        report, chunks, source = all_reviews(args.data, info.scheme, info.meta)
        if report.unique_texts > CACHE_MAX_REVIEWS:
            raise data.DataError(f"{report.unique_texts:,} reviews: the report holds at most "
                                 f"{CACHE_MAX_REVIEWS:,}; use evaluate --save-predictions")
        reviews = [e for chunk in chunks for e in chunk]
    if not reviews:
        raise data.DataError("no reviews to evaluate")

    preds = _predict(model, tok, info, reviews, max_length, args, source)
    print(f"checkpoint {info.path}: {preds.n} reviews ({describe(source)}), "
          f"{preds.meta.get('precision')}" + (" [from the cache]" if preds.cached else ""))
    inputs = ReportInputs(preds, info.name, intervals=metric_intervals(
        preds.y, preds.probs, info.scheme.num_labels))
    print(format_metrics(preds.metrics()))
    try:
        inputs.issues = find_issues(preds)
        iss = inputs.issues
        print(f"cleanlab flags {iss.count} of {iss.n} reviews ({iss.count / iss.n:.1%}); "
              f"without them: {format_metrics(iss.metrics_clean)}")
    except ValueError as e:
        print(f"label issues: skipped ({e})", file=sys.stderr)

    if not args.no_attention:
        predictor = Predictor.from_checkpoint(info.path, model.device)
        layers = predictor.model.config.num_hidden_layers
        layer = (args.layer - 1) if args.layer else max(0, layers - 2)
        if not 0 <= layer < layers:
            raise data.DataError(f"--layer must be 1..{layers}")
        from .evaluate import TqdmProgress
        with TqdmProgress(preds.n, "per-rating attention") as progress:
            att = W.word_attention(preds, predictor.model, tok, progress=progress,
                                   use_cache=not args.no_cache)
        inputs.word_tops = W.top_words(att, preds.y, layer, info.scheme.num_labels,
                                       min_count=args.min_count)
        inputs.layer = layer
        inputs.examples = {c: predictor.predict(preds.frame["text"].iloc[row])
                           for c, row in W.example_rows(preds).items() if row is not None}
    if args.compare:
        model_b, tok_b, info_b = load_checkpoint(args.compare)
        if info_b.scheme != info.scheme:
            raise data.DataError("--compare needs a checkpoint with the same labels")
        preds_b = _predict(model_b, tok_b, info_b, reviews, max_length, args, source)
        inputs.comparison, inputs.other = compare(preds, preds_b), info_b.name
        t = inputs.comparison.test
        print(f"vs {info_b.name}: {format_metrics(inputs.comparison.metrics_b)}; only this one "
              f"right {t.b}, only the other right {t.c}, McNemar exact p = {t.p_exact:.4g}")

    from .model import atomic_write_text
    atomic_write_text(args.out, build_report(inputs))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e6:.1f} MB)")
    if args.json:
        iss = inputs.issues
        print(json.dumps({
            "checkpoint": str(info.path), "n": preds.n, "source": source,
            "precision": preds.meta.get("precision"), "fp32_check": preds.meta.get("fp32_check"),
            "metrics": {k: preds.metrics().get(k) for k in METRIC_NAMES},
            "intervals": {k: None if v is None else [v.low, v.high]
                          for k, v in (inputs.intervals or {}).items()},
            "label_issues": None if iss is None else {
                "count": iss.count, "metrics_without": {k: iss.metrics_clean.get(k)
                                                        for k in (*METRIC_NAMES, "n")}},
            "cache": None if preds.folder is None else str(preds.folder), "out": str(args.out)}))
    return 0


def _predict(model, tok, info, reviews, max_length, args, source):
    from .analysis.predictions import planned_reviews, predict_split
    from .evaluate import TqdmProgress, resolve_precision
    total = planned_reviews(len(reviews), resolve_precision(args.precision, model.device))
    with TqdmProgress(total, f"evaluating {info.name}") as progress:
        return predict_split(model, tok, info.path, reviews, info.scheme, max_length=max_length,
                             precision=args.precision, batch_size=args.batch_size,
                             progress=progress, source=source, use_cache=not args.no_cache)
