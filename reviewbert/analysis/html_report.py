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
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import plotly.io as pio

from reviewbert.analysis import breakdown, drivers
from reviewbert.analysis import figures as analysis_figures
from reviewbert.analysis.calibration import reliability
from reviewbert.analysis.slices import worst_reading
from reviewbert.analysis.sources import describe
from reviewbert.model import attention
from reviewbert.viz import figures, highlight

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
h1{font-size:1.7rem;margin-bottom:.2rem}
h2{margin-top:2.4rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #dde;padding:.3rem .55rem;
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
    split_map: object | None = None         # analysis.map_summary.MapSummary
    behaviour: object | None = None         # behave.runner.SuiteResult (cached beside the checkpoint)
    cohorts: object | None = None           # cohorts.pipeline.CohortsResult
    saved_cohorts: dict | None = None       # {slice name: its cohort query} saved on the page


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


def split_map_section(sm, names, fig) -> str:
    """The map of the split: projector, its reading, neighbours, drivers, worst slices."""
    r, nb = sm.reading, sm.neighbours
    out = ["<h2>The map of the split</h2>", fig(sm.figure),
           f"<p>{_e(sm.axis)} {_e(r.plain)}</p>",
           f'<p class="note">Vectors: {_e(sm.vectors_label)}; neighbours: the {nb.k} nearest '
           "by cosine similarity. Neighbour agreement (share of a review's neighbours whose "
           f"true rating is its predicted one): <b>{nb.mean_agreement:.1%}</b>; k-NN accuracy "
           f"{r.knn_accuracy:.1%}.</p>"]
    if sm.drivers is not None:
        d = sm.drivers
        per = f"{d.seconds_per_1000 / 60:.1f} min per 1,000 reviews" if d.seconds_per_1000 else ""
        out.append(f"<h3>What drives each predicted rating</h3><p class=\"note\">{len(d.rows):,} "
                   f"reviews explained ({_e(per)}); mean score of each word over the reviews "
                   "that contain it (at least 5), stop-words hidden.</p>")
        rows = []
        for c, name in enumerate(names):
            cells = "".join(
                "<td class=\"text\">" + _e(", ".join(f"{w} ({n})" for w, n in zip(
                    sm.tops[m][c]["word"].head(8), sm.tops[m][c]["reviews"].head(8)))) + "</td>"
                for m in drivers.METHODS)
            rows.append(f"<tr><th>{_e(name)}</th>{cells}</tr>")
        head = "".join(f"<th>{_e(drivers.LABELS[m])}</th>" for m in drivers.METHODS)
        out.append(f"<table><thead><tr><th>predicted</th>{head}</tr></thead>"
                   f"<tbody>{''.join(rows)}</tbody></table>")
    out.append("<h3>The slices it fails on</h3>")
    out.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in worst_reading(sm.worst)) + "</ul>")
    cols = ["slice", "n", "accuracy", "low", "high", "rest_accuracy", "gap", "gap_low", "gap_high",
            "expected"]
    pct = {c: (lambda v: fmt_metric("accuracy", v)) for c in cols[2:]}
    out.append(_table(sm.worst.head(10)[cols], text_cols=("slice",), formats=pct))
    return "\n".join(out)


# ------------------------------------------------------------------ the page
def build_report(r: ReportInputs) -> str:
    fig = _Figures()
    parts = [f"<h1>Error analysis: {_e(r.checkpoint)}</h1>", _provenance(r.preds)]
    parts += _metrics_sections(r, fig)
    if r.word_tops is not None or r.examples:
        parts += _attention_sections(r, fig)
    if r.issues is not None:
        parts += _issues_section(r)
    if r.split_map is not None:
        parts.append(split_map_section(r.split_map, r.preds.names, fig))
    if r.comparison is not None:
        parts += _comparison_section(r)
    if r.cohorts is not None:
        parts += cohorts_section(r.cohorts, r.saved_cohorts or {}, fig)
    if r.behaviour is not None:
        parts += behaviour_section(r.behaviour, fig)
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>ReviewBERT error analysis: {_e(r.checkpoint)}</title>"
            f"<style>{CSS}{highlight.HIGHLIGHT_CSS}</style></head><body>\n{body}\n</body></html>\n")


def _provenance(p) -> str:
    """Which reviews, how they were scored, and when."""
    meta = p.meta
    src = (meta.get("data") or {}).get("source") or {}
    check = meta.get("fp32_check")
    prec = meta.get("precision", "fp32")
    if check:
        prec += (f" (on a sample of {check['n']} reviews re-scored in fp32, "
                 f"{check['agree']} got the same class)")
    return (f'<p class="meta">{_e(p.n)} reviews: {_e(describe(src))}. max_length '
            f"{_e(meta.get('max_length'))}, forward pass in {_e(prec)}. Generated "
            f"{_e(datetime.now(timezone.utc).isoformat(timespec='seconds'))} by ReviewBERT.</p>")


def _metrics_sections(r: ReportInputs, fig) -> list[str]:
    """Metrics with intervals, per class, confusion, ROC, calibration, length."""
    p, names = r.preds, r.preds.names
    rel = reliability(p.y, p.probs)
    cm = breakdown.confusion(p.y, p.pred, len(names))
    by_length = breakdown.length_bins(p.n_tokens, p.correct, p.meta.get("max_length"))
    return [
        "<h2>Metrics</h2>", metrics_table(p.metrics(), r.intervals),
        '<p class="note">Intervals: 95% percentile bootstrap over reviews. Two '
        "checkpoints whose intervals overlap widely are not shown to differ.</p>",
        "<h2>Per class</h2>",
        _table(breakdown.per_class(p.y, p.pred, names), text_cols=(),
               formats={c: (lambda v: f"{v:.3f}") for c in ("precision", "recall", "f1")}),
        "<h2>Confusion matrix</h2>", fig(analysis_figures.confusion_figure(cm, names)),
        "<h2>ROC</h2>", fig(analysis_figures.roc_figure(breakdown.roc_curves(p.y, p.probs, names))),
        "<h2>Calibration</h2>",
        f"<p>Expected calibration error: <b>{rel.ece:.3f}</b> (10 bins).</p>",
        fig(analysis_figures.reliability_figure(rel)),
        "<h2>Accuracy by review length</h2>", fig(analysis_figures.length_figure(by_length)),
        "<p>The seed dropped reviews under 100 tokens. What that filter changes:</p>",
        _table(breakdown.seed_filter(p.y, p.probs, p.n_tokens, names), text_cols=(), formats={
            "share": lambda v: fmt_metric("share", v),
            "accuracy": lambda v: fmt_metric("accuracy", v),
            "relaxed_accuracy": lambda v: fmt_metric("accuracy", v),
            "auc": lambda v: fmt_metric("auc", v), "loss": lambda v: fmt_metric("loss", v)}),
    ]


def _attention_sections(r: ReportInputs, fig) -> list[str]:
    """Per-rating attention, and one example per rating drawn as the seed report did."""
    names, parts = r.preds.names, []
    if r.word_tops is not None:
        parts.append("<h2>Per-rating attention</h2>")
        parts.append(f'<p class="note">Mean [CLS] attention (mean of heads) per word in layer '
                     f"{(r.layer or 0) + 1}, over the reviews of each {_e(r.rating_by)}.</p>")
        parts.append(fig(analysis_figures.rating_words_figure(r.word_tops, names, r.layer or 0,
                                                              r.rating_by)))
    if r.examples:
        parts.append("<h3>One example per rating: its most confident correct prediction</h3>")
        for c, pred in sorted(r.examples.items()):
            view = attention.cls_view(pred, level="word", include_special=False)
            title = f"{names[c]}: predicted {pred.label} ({pred.probs[pred.label_id]:.0%})"
            parts.append(f'<p class="note">{_e(title)}</p>')
            parts.append(f'<p class="text">{_e(pred.text[:TEXT_CHARS])}</p>')
            parts.append(fig(figures.cls_heatmap(view, title=title, wrap=48)))
    return parts


def _issues_section(r: ReportInputs) -> list[str]:
    iss = r.issues
    return [
        "<h2>Label issues (cleanlab)</h2>",
        f"<p>cleanlab's <code>find_label_issues</code> flags <b>{iss.count}</b> of "
        f"{iss.n} reviews ({iss.count / max(iss.n, 1):.1%}) whose given rating is "
        "probably wrong, judged from the model's held-out probabilities.</p>",
        side_by_side({"all reviews": iss.metrics_all,
                      "without the flagged reviews": iss.metrics_clean}),
        f'<p class="note">{_e(CLEAN_CAVEAT)}</p>',
        f"<h3>The {min(TOP_ISSUES, iss.count)} most likely mislabelled</h3>",
        _table(iss.table(r.preds, TOP_ISSUES).drop(columns=["row"])),
    ]


def behaviour_section(result, fig, worst: int = 5) -> list[str]:
    """The behavioural suite's results: the matrix, every test's fail rate, and failing
    examples of the tests that fail most."""
    from reviewbert.behave import figures as behave_figures
    rows = pd.DataFrame([{
        "capability": t.capability, "type": t.type, "test": t.name, "cases": t.n,
        "filtered": t.filtered, "failed": t.failed, "fail rate": t.fail_rate,
        "95 % interval": f"{100 * t.ci_low:.1f}–{100 * t.ci_high:.1f} %"} for t in result.tests])
    pct = {"fail rate": lambda v: "–" if v != v else f"{100 * v:.1f} %"}
    parts = [f"<h2>Behavioural tests: {_e(result.suite_name)}</h2>",
             f'<p class="meta">{len(result.tests)} tests (CheckList\'s MFT, INV and DIR), '
             "each with its fail rate and a Wilson 95 % interval.</p>",
             fig(behave_figures.matrix(result)),
             _table(rows, text_cols=("capability", "test"), formats=pct)]
    failing = sorted((t for t in result.tests if t.failed),
                     key=lambda t: -t.fail_rate)[:worst]
    for t in failing:
        ex = pd.DataFrame([{"text": x.get("text"), "original": x.get("original") or "",
                            "predicted": x.get("pred"), "E★": x.get("e_stars")}
                           for x in t.examples])
        parts += [f"<h3>{_e(t.name)}: failing examples</h3>",
                  _table(ex, text_cols=("text", "original"),
                         formats={"E★": lambda v: "" if v is None else f"{float(v):.2f}"})]
    return parts


def _cohort_rows(items) -> pd.DataFrame:
    return pd.DataFrame([{
        "definition": c.query or "every review", "n": c.n, "errors": c.errors,
        "error rate": f"{100 * c.error_rate:.1f} %",
        "95 % interval": f"{100 * c.ci_low:.1f}–{100 * c.ci_high:.1f} %",
        "coverage": f"{100 * c.coverage:.1f} %", "lift": f"{c.lift:.2f}",
        **({"p adjusted": f"{c.p_adjusted:.2g}"} if c.p_adjusted is not None else {})}
        for c in items])


def cohorts_section(result, saved: dict, fig) -> list[str]:
    """Where the errors cluster: the error tree, its leaves and SliceLine's top slices (the
    Cohorts page), and the cohorts saved as slices there."""
    from reviewbert.cohorts import figures as cohort_figures
    o = result.overall
    parts = ["<h2>Failing cohorts</h2>",
             f'<p class="meta">{o.errors:,} of {o.n:,} reviews are errors ({result.target}, '
             f"{100 * o.error_rate:.1f} %). Each cohort is a pandas query over the review "
             "properties (<code>reviewbert cohorts --save-properties</code>); intervals are "
             "Wilson 95 %, slice p-values one-sided binomial, Benjamini–Hochberg adjusted.</p>",
             fig(cohort_figures.tree_figure(result.nodes)),
             "<h3>The error tree's leaves, worst first</h3>",
             _table(_cohort_rows(sorted(result.leaves, key=lambda c: -c.error_rate)),
                    text_cols=("definition",))]
    if result.slices:
        parts += ["<h3>SliceLine's top slices</h3>",
                  _table(_cohort_rows(result.slices), text_cols=("definition",))]
    if saved:
        parts += ["<h3>Cohorts saved as slices</h3>",
                  _table(pd.DataFrame({"slice": list(saved), "definition": list(saved.values())}),
                         text_cols=("slice", "definition"))]
    return parts


def _comparison_section(r: ReportInputs) -> list[str]:
    cmp, t = r.comparison, r.comparison.test
    return [
        f"<h2>Compared with {_e(r.other)}</h2>",
        side_by_side({r.checkpoint: cmp.metrics_a, r.other or "other": cmp.metrics_b}),
        f"<p>{t.b} reviews only {_e(r.checkpoint)} gets right, {t.c} only "
        f"{_e(r.other)} gets right. McNemar exact p = {t.p_exact:.4g}"
        + (f" (chi-square {t.chi2:.2f}, p = {t.p_chi2:.4g})" if t.chi2 is not None else "")
        + ".</p>",
    ]
