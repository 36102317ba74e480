"""The one-file HTML report (offline, escaped), and on the shipped demo checkpoint with its
real test split: the prediction cache written and reused, cleanlab's ranked list, the report.

The demo test split (2,105 reviews) is evaluated once per test run, in fp32, through the
CLI (conftest.demo_evaluation, shared with the card's and the split map's tests); this
module reports from a copy of the demo folder made of symlinks and that prediction cache
(so every cache lands in a temporary folder, not in the repository).
"""
from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from demo_support import DEMO, demo_copy

from reviewbert.analysis.html_report import ReportInputs, build_report
from reviewbert.analysis.intervals import metric_intervals
from reviewbert.analysis.label_issues import find_issues
from reviewbert.analysis.predictions import SplitPredictions, build_frame
from reviewbert.data.examples import Review
from reviewbert.model.labels import FIVE

from toyreviews import cli

XSS = '<img src=x onerror=alert(1)> great </script><script>alert(2)</script> phone'
# fp32: the run's shared evaluation (the card's figures are fp32). bf16 is checked on a
# sample below (on a CPU without bf16 units torch emulates it: the 2,105 reviews took
# ~290 s in bf16 on a 2-core AVX2 CPU, against ~20 s in fp32).
PRECISION = "fp32"
BF16_SAMPLE = 96


class Sources(HTMLParser):
    """Every external resource a page would load: script src, link href, img src…"""

    def __init__(self):
        super().__init__()
        self.external, self.scripts, self.tags = [], 0, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            v = a.get(key) or ""
            if tag in ("script", "link", "img", "iframe") and re.match(r"\s*(https?:)?//", v):
                self.external.append((tag, v))


def offline_problems(html: str) -> list:
    p = Sources()
    p.feed(html)
    return p.external


def synthetic_preds(n=300, seed=0) -> SplitPredictions:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n)
    logits = rng.normal(0, 1, (n, 5))
    logits[np.arange(n), y] += 2
    y[:20] = (y[:20] + 2) % 5                   # some wrong ratings for cleanlab
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    texts = [XSS if i < 20 else f"review number {i}" for i in range(n)]
    reviews = [Review(t, int(c) + 1, "synthetic") for t, c in zip(texts, y)]
    frame = build_frame(reviews, FIVE, p, rng.integers(5, 200, n))
    return SplitPredictions(frame, FIVE, {"max_length": 128, "precision": "fp32",
                                          "data": {"n": n, "source": {"kind": "reviews"}}})


def test_report_is_self_contained_and_escapes_reviews():
    preds = synthetic_preds()
    issues = find_issues(preds)
    assert issues.count > 0 and set(issues.ranked[:5]) & set(range(20))
    tops = {c: pd.DataFrame({"word": ["<script>bad</script>", "battery"],
                             "attention": [0.2, 0.1], "reviews": [5, 7]}) for c in range(5)}
    html = build_report(ReportInputs(preds, "ckpt <b>name</b>", issues=issues, word_tops=tops,
                                     layer=4, intervals=metric_intervals(
                                         preds.y, preds.probs, 5, n_resamples=100,
                                         auc_resamples=30)))
    assert offline_problems(html) == []
    assert html.count("plotly.js v") == 1                 # plotly.js inlined once
    # confusion, ROC, calibration, length, per-rating words
    assert html.count("Plotly.newPlot") == 5
    assert "<script>bad" not in html and "layer 5" in html
    # the review is shown, as text: no tag of it survives
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img" not in html and "alert(2)</script>" not in html
    assert "ckpt &lt;b&gt;name&lt;/b&gt;" in html
    for section in ("Metrics", "Per class", "Confusion matrix", "ROC", "Calibration",
                    "Accuracy by review length", "Per-rating attention",
                    "Label issues (cleanlab)"):
        assert f"<h2>{section}</h2>" in html


# ------------------------------------------------------------------ the demo, real data
@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_evaluation):
    """A symlinked copy of the demo checkpoint with the run's fp32 prediction cache of its
    test split, and one ``report`` run over that split (which reads the cache)."""
    folder, _ = demo_evaluation
    d = demo_copy(tmp_path_factory.mktemp("demo"), folder / "demo")
    out = d.parent / "report.html"
    t0 = time.perf_counter()
    res = cli("report", "--checkpoint", d, "--out", out, "--precision", PRECISION,
              "--no-attention", "--drivers-sample", "0", "--json", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    first = json.loads(res.stdout.strip().splitlines()[-1])
    first["read_the_cache"] = "[from the cache]" in res.stdout
    return d, out, first, time.perf_counter() - t0


def test_demo_cache_is_written_then_reused(demo, demo_evaluation):
    d, _, first, seconds = demo
    written = demo_evaluation[1]            # `evaluate` wrote the cache, `report` read it
    assert written["cached"] is False and first["read_the_cache"]
    assert first["metrics"] == written["metrics"]
    assert first["n"] == 2105
    assert first["fp32_check"] is None          # an fp32 run has nothing to check against
    folder = Path(first["cache"])
    assert folder.parent == d / ".analysis" and (folder / "predictions.parquet").exists()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["checkpoint"]["sha256"] and meta["data"]["n"] == 2105
    frame = pd.read_parquet(folder / "predictions.parquet")
    assert len(frame) == 2105 and (frame.groupby("label").size() == 421).all()
    mtime = (folder / "meta.json").stat().st_mtime_ns
    # evaluate (another command, another process) reads it: no forward pass
    t0 = time.perf_counter()
    res = cli("evaluate", "--checkpoint", d, "--precision", PRECISION, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    again = json.loads(res.stdout.strip().splitlines()[-1])
    assert again["cached"] is True and again["cache"] == first["cache"]
    assert again["metrics"] == first["metrics"]
    assert (folder / "meta.json").stat().st_mtime_ns == mtime
    assert "evaluating" not in res.stderr                  # no progress bar: nothing scored
    print(f"report {seconds:.1f} s, cached evaluate {time.perf_counter() - t0:.1f} s")
    # the same metrics as training recorded for its best epoch (fp32), within bf16's wobble
    recorded = json.loads((DEMO / "reviewbert.json").read_text())["best"]["test"]
    assert abs(again["metrics"]["accuracy"] - recorded["accuracy"]) < 0.005


@pytest.mark.e2e            # ~50 s on a 2-core AVX2 CPU: out of make test's 15 minutes
def test_demo_bf16_agrees_with_fp32(tmp_path):
    """bf16 and fp32 pick the same rating for all but at most one review in a sample of
    96 of the test split (a bf16 pass with its fp32 check, as the Error analysis page runs
    it on a bf16 CPU)."""
    from reviewbert.analysis.predictions import predict_split
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import load_checkpoint
    model, tok, info = load_checkpoint(demo_copy(tmp_path))
    reviews = test_split_examples(info.meta, tokenizer=tok)[::21][:BF16_SAMPLE]
    preds = predict_split(model, tok, info.path, reviews, info.scheme,
                          max_length=info.meta["hyperparameters"]["max_length"],
                          precision="bf16", use_cache=False, fp32_check=BF16_SAMPLE)
    check = preds.meta["fp32_check"]
    assert check["n"] == BF16_SAMPLE
    assert check["agree"] >= check["n"] - 1, check


def test_demo_cleanlab_ranked_list(demo):
    from reviewbert.analysis import lookup
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    d, _, first, _ = demo
    info = checkpoint_info(d)
    reviews = test_split_examples(info.meta)
    preds = lookup(d, reviews, info.scheme, info.meta["hyperparameters"]["max_length"])
    assert preds is not None and preds.cached
    iss = find_issues(preds)
    assert iss.count == first["label_issues"]["count"] > 0
    q = iss.quality[iss.ranked]
    assert len(set(iss.ranked.tolist())) == iss.count
    # ranked by cleanlab's self-confidence: the given rating's probability, lowest first
    given = preds.probs[iss.ranked, preds.y[iss.ranked]]
    assert np.all(np.diff(given) >= -1e-9) and np.allclose(q, given, atol=1e-6)
    assert iss.metrics_clean["n"] == 2105 - iss.count
    t = iss.table(preds, top=10)
    assert (t["given rating"] != t["predicted"]).mean() > 0.5


def test_demo_report_opens_offline(demo):
    _, out, first, _ = demo
    html = out.read_text(encoding="utf-8")
    assert offline_problems(html) == []
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?https?://", html)
    assert html.count("plotly.js v") == 1
    assert f"flags <b>{first['label_issues']['count']}</b> of 2105" in html


def test_demo_report_holds_the_failing_cohorts(demo):
    """The Cohorts page's findings in the report: the tree (a figure), its leaves and the
    top slices, each as the query the properties table answers to."""
    _, out, _, _ = demo
    html = out.read_text(encoding="utf-8")
    section = html[html.index("<h2>Failing cohorts</h2>"):]
    assert "The error tree's leaves, worst first" in section
    assert "SliceLine's top slices" in section
    assert "true_stars &gt; 4 and contrast &gt; 0" in section        # the worst leaf, escaped
