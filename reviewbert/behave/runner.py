"""A behavioural suite run on a checkpoint: cases built, every distinct text scored once, results cached.

:func:`run_suite` builds the suite's cases (``behave/cases.py``), collects the distinct
texts among them (the originals of INV/DIR tests are shared between tests: a review
perturbed by five tests is read once), scores them in one batched pass through
:meth:`reviewbert.model.inference.Predictor.batch_logits` (``remember=True``: a run
stopped at a progress update resumes from the rows already read), and scores each test
(``behave/scoring.py``).

Progress counts cases: ``progress(n)`` adds up to :func:`reviewbert.behave.cases.count_cases`
of the same suite and reviews, the bar's total. (The pass itself counts wordpieces; they
are turned into the same share of the cases.) Rows read before, in this process, are
reported through ``progress.resumed`` (``reviewbert/progress.py``).

Cache, beside the checkpoint (or the per-user fallback, ``reviewbert/store/location.py``)::

    CHECKPOINT/.behave/<key>.json   one finished run, compact JSON, written atomically:
        {"format": "reviewbert-behave/1", "key", "checkpoint" (the folder as given),
         "suite" (name), "suite_fingerprint", "labels" (class names), "seconds" (the
         run's compute time), "created" (ISO time, UTC),
         "tests": [{"name", "capability", "type", "n", "filtered", "failed", "fail_rate"
                    (null when nothing was scored), "ci_low", "ci_high",
                    "rows": {column: [one value per case]} (ROW_KEYS)}]}

    key = the first 24 hex digits of sha256(JSON of the format, the code version, the
          weights' sha256 (``reviewbert.store.run_records.weights_sha256``), the suite's
          fingerprint, the reviews' fingerprint (only when a test reads reviews), max_length)

A file that cannot be read or is not ours is ignored (the run is computed again and the
file replaced); a run that cannot be written anywhere is returned uncached.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from reviewbert.behave.cases import Case, build_cases
from reviewbert.behave.scoring import MAX_EXAMPLES, TestResult, score_test
from reviewbert.behave.suite import Suite, suite_fingerprint
from reviewbert.fsio import atomic_write_text
from reviewbert.progress import resumed
from reviewbert.store.location import Place

FORMAT = "reviewbert-behave/1"
CODE_VERSION = 1
"""Raised whenever case building or scoring changes what a run gives: old files then miss."""
PLACE = Place(".behave")
ROW_KEYS = ("text", "original", "stars", "pred", "pred_stars", "e_stars", "orig_pred",
            "orig_e_stars", "delta", "status")
SUMMARY_KEYS = ("name", "capability", "type", "n", "filtered", "failed", "fail_rate",
                "ci_low", "ci_high")


@dataclass
class SuiteResult:
    """A suite's run on one checkpoint: each test's result, and where it came from."""

    suite_name: str
    suite_fingerprint: str
    checkpoint: str | None
    labels: list[str]
    tests: list[TestResult]
    seconds: float              # the compute time of the run (a cached one: of the original)
    created: str                # ISO time (UTC) the run finished
    cached: bool = False        # read back from the cache, not computed
    key: str = ""               # the cache key ("" when not cached)
    cache_error: str = field(default="", compare=False)     # why it could not be kept

    def test(self, name: str) -> TestResult:
        """The result of the test called ``name`` (KeyError if none)."""
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(name)


# ------------------------------------------------------------------------ keys
def reviews_fingerprint(reviews: Sequence) -> str:
    """sha256 over each review's stars and text, in order."""
    h = hashlib.sha256()
    for r in reviews:
        t = str(r.text).encode("utf-8", "surrogatepass")
        # the length prefix makes the encoding unambiguous whatever the text holds
        h.update(f"{int(r.stars)}:{len(t)}:".encode())
        h.update(t)
    return h.hexdigest()


def cache_key(checkpoint, suite: Suite, reviews: Sequence, max_length: int) -> str:
    """The cache key of a run (module docstring). OSError when the checkpoint has no
    ``.safetensors`` weights to fingerprint."""
    from reviewbert.store.run_records import weights_sha256
    reads_reviews = any(t.source == "reviews" for t in suite.tests)
    blob = json.dumps({"format": FORMAT, "code": CODE_VERSION,
                       "weights": weights_sha256(checkpoint),
                       "suite": suite_fingerprint(suite),
                       "reviews": reviews_fingerprint(reviews) if reads_reviews else "",
                       "max_length": int(max_length)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def lookup(checkpoint, suite: Suite, reviews: Sequence, max_length: int) -> SuiteResult | None:
    """The cached run of ``suite`` on ``checkpoint``, or None; never computes."""
    try:
        key = cache_key(checkpoint, suite, reviews, max_length)
    except OSError:
        return None
    return _read(checkpoint, key)


def _read(checkpoint, key: str) -> SuiteResult | None:
    path = PLACE.find(checkpoint, f"{key}.json", lambda p: p.is_file())
    if path is None:
        return None
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("key") != key:
            return None
        result = result_from_json(d)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError):
        return None     # a damaged or foreign file: computed again and replaced
    result.cached, result.key = True, key
    return result


def _write(checkpoint, key: str, result: SuiteResult) -> str:
    """Keep ``result`` under ``key``; "" or why it could not be kept."""
    d = {"format": FORMAT, "key": key, **result_json(result, rows=True)}
    d.pop("cached", None)
    try:
        path = PLACE.writable(checkpoint) / f"{key}.json"
        # compact: a 3,000-case run's rows read back at once (no indentation to parse)
        atomic_write_text(path, json.dumps(d, ensure_ascii=False, separators=(",", ":")))
    except OSError as e:
        return f"not cached: {e.strerror or e}"
    return ""


# ------------------------------------------------------------------- the run
class _CaseProgress:
    """The pass's progress (wordpieces) told to ``progress`` as cases: the same share of
    ``cases`` as of the wordpieces read, the last update landing exactly on ``cases``."""

    def __init__(self, progress, cases: int, tokens: int):
        self.progress, self.cases, self.tokens = progress, cases, max(tokens, 1)
        self.read, self.told = 0, 0

    def _step(self, tokens: int) -> int:
        self.read += tokens
        target = self.cases if self.read >= self.tokens else self.read * self.cases // self.tokens
        step, self.told = max(target - self.told, 0), max(target, self.told)
        return step

    def __call__(self, tokens: int) -> None:
        step = self._step(tokens)
        if step:
            self.progress(step)

    def resumed(self, tokens: int) -> None:
        resumed(self.progress, self._step(tokens))


def _probabilities(predictor, texts: list[str], n_cases: int, progress) -> np.ndarray:
    """Class probabilities [len(texts), classes], one batched pass, each text once."""
    from reviewbert.model.inference import softmax
    if not texts:
        return np.zeros((0, predictor.scheme.num_labels))
    rows = predictor.encode_rows(texts)
    # Texts that tokenize alike (a lowercased copy under an uncased tokenizer, a review
    # cut at max_length the same way) are one row: scored once.
    unique: dict[tuple, int] = {}
    where = [unique.setdefault(tuple(r), len(unique)) for r in rows]
    distinct = [list(r) for r in unique]
    wrapped = None if progress is None else _CaseProgress(progress, n_cases,
                                                          sum(len(r) for r in distinct))
    logits = predictor.batch_logits(distinct, remember=True, progress=wrapped)
    return softmax(np.asarray(logits, dtype=np.float64))[where]


def score_cases(predictor, suite: Suite, cases: dict[str, list[Case]],
                progress=None) -> list[TestResult]:
    """Each test's result from its cases: every distinct text (case or original) scored once."""
    index: dict[str, int] = {}
    for test_cases in cases.values():
        for c in test_cases:
            index.setdefault(c.text, len(index))
            if c.original is not None:
                index.setdefault(c.original, len(index))
    n_cases = sum(len(v) for v in cases.values())
    probs = _probabilities(predictor, list(index), n_cases, progress)
    out = []
    for spec in suite.tests:
        cs = cases.get(spec.name, [])
        p = probs[[index[c.text] for c in cs]]
        o = probs[[index[c.original] for c in cs]] if spec.type != "MFT" else None
        out.append(score_test(spec, cs, p, o, predictor.scheme))
    return out


def run_suite(predictor, suite: Suite, reviews: Sequence = (), *, checkpoint=None,
              progress=None, cache: bool = True) -> SuiteResult:
    """``suite`` run on ``predictor`` (module docstring). With ``checkpoint`` (its folder)
    the result is cached beside it: ``cache`` True reads a cached run first, False computes
    afresh (and replaces the cached file). Without ``checkpoint``, nothing is cached."""
    key = ""
    if checkpoint is not None:
        try:
            key = cache_key(checkpoint, suite, reviews, predictor.max_length)
        except OSError:
            key = ""        # no weights file to fingerprint: the run is not cached
        if key and cache:
            hit = _read(checkpoint, key)
            if hit is not None:
                return hit
    start = time.perf_counter()
    cases = build_cases(suite, reviews)
    tests = score_cases(predictor, suite, cases, progress)
    result = SuiteResult(suite.name, suite_fingerprint(suite),
                         None if checkpoint is None else str(checkpoint),
                         list(predictor.scheme.names), tests,
                         round(time.perf_counter() - start, 3),
                         datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if key:
        result.cache_error = _write(checkpoint, key, result)
        result.key = "" if result.cache_error else key
    return result


# ---------------------------------------------------------------- JSON and CSV
def _number(x: float) -> float | None:
    """A float for JSON: nan (nothing scored) as null; others exact (a cached run reads
    back equal)."""
    return None if x is None or math.isnan(float(x)) else float(x)


def summary_json(t: TestResult, rows: bool = False) -> dict:
    """One test's summary (the command line's ``tests`` items); with ``rows``, every case
    as columns (ROW_KEYS), as the cache keeps them."""
    d = {k: getattr(t, k) for k in SUMMARY_KEYS}
    for k in ("fail_rate", "ci_low", "ci_high"):
        d[k] = _number(d[k])
    if rows:
        d["rows"] = {k: [r.get(k) for r in t.rows] for k in ROW_KEYS}
    return d


def result_json(result: SuiteResult, rows: bool = False) -> dict:
    """The run as JSON: ``checkpoint``, ``suite``, ``seconds``, ``tests`` (each one's
    summary: name, capability, type, n, filtered, failed, fail_rate, ci_low, ci_high), and
    the suite's fingerprint, labels, creation time and whether it came from the cache.
    ``rows``: each test's cases too (what :func:`result_from_json` needs for the drill-down)."""
    return {"checkpoint": result.checkpoint, "suite": result.suite_name,
            "suite_fingerprint": result.suite_fingerprint, "labels": list(result.labels),
            "seconds": result.seconds, "created": result.created, "cached": result.cached,
            "tests": [summary_json(t, rows) for t in result.tests]}


def _test_from_json(d: dict) -> TestResult:
    columns = d.get("rows") or {}
    n_rows = len(columns.get("status", []))
    rows = [{k: (columns[k][i] if k in columns else None) for k in ROW_KEYS}
            for i in range(n_rows)]
    nan = float("nan")
    return TestResult(
        str(d["name"]), str(d["capability"]), str(d["type"]), int(d["n"]), int(d["filtered"]),
        int(d["failed"]), nan if d["fail_rate"] is None else float(d["fail_rate"]),
        float(d["ci_low"]), float(d["ci_high"]),
        [r for r in rows if r["status"] == "fail"][:MAX_EXAMPLES], rows)


def result_from_json(d: dict) -> SuiteResult:
    """The :class:`SuiteResult` of :func:`result_json`'s form (rows empty when it has none)."""
    return SuiteResult(str(d["suite"]), str(d.get("suite_fingerprint", "")), d.get("checkpoint"),
                       [str(x) for x in d.get("labels", [])],
                       [_test_from_json(t) for t in d["tests"]], float(d.get("seconds") or 0.0),
                       str(d.get("created", "")), bool(d.get("cached", False)))


CSV_COLUMNS = ("test", "capability", "type", "status", "text", "original", "min_stars",
               "max_stars", "pred", "pred_min_stars", "pred_max_stars", "e_stars", "orig_pred",
               "orig_e_stars", "delta")


def spreadsheet_safe(value):
    """A text cell a spreadsheet will not run: one starting with = + - @ (or a tab or
    carriage return) gets a leading quote, so "=HYPERLINK(...)" stays text (CSV injection).
    Numbers are left as they are."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def results_csv(result: SuiteResult) -> str:
    """Every case of the run, one row each (CSV_COLUMNS), safe to open in a spreadsheet."""
    buf = io.StringIO()
    # "\r\n" (RFC 4180), which is also what makes the writer quote a field holding a lone
    # "\r": with "\n" alone, such a review would break its row for every reader
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for t in result.tests:
        for r in t.rows:
            stars = r.get("stars") or [None, None]
            pred_stars = r.get("pred_stars") or [None, None]
            row = (t.name, t.capability, t.type, r["status"], r["text"], r.get("original"),
                   stars[0], stars[1], r.get("pred"), pred_stars[0], pred_stars[1],
                   r.get("e_stars"), r.get("orig_pred"), r.get("orig_e_stars"), r.get("delta"))
            writer.writerow(["" if v is None else spreadsheet_safe(v) for v in row])
    return buf.getvalue()
