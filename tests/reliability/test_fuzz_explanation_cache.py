"""The explanation cache's files (<ckpt>/explanations/*.json) under generated content
(Hypothesis): whatever a file holds, torn, hostile, of another version or another review,
reading it gives the results of this review or None, and never raises."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import strategies as st

from reviewbert.explain import cache as C
from reviewbert.explain import methods as E

from fuzzing import time_limit, twins

PRED = SimpleNamespace(words=["battery", "died", "!"], n_tokens=5)
VALID = C.to_json([E.TokenScores(method="lime", label="LIME", signed=True,
                                 scores=np.array([0.1, 0.5, -0.2]),
                                 token_scores=np.array([0, 0.1, 0.5, -0.2, 0]), target=0)])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
                    | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=6)
                    | st.dictionaries(st.text(max_size=12), kids, max_size=6), max_leaves=30)
FIELDS = st.sampled_from(["version", "results", "method", "scores", "token_scores", "target",
                          "delta", "n_steps", "label", "signed", "seconds", "extra"])


def _mutated(blob, path_and_value):
    """VALID with one field (at any depth of its first result) replaced."""
    field, value = path_and_value
    out = json.loads(json.dumps(blob))
    target = out if field in ("version", "results") else out["results"][0]
    target[field] = value
    return out


def _reading_any_file_gives_fitting_results_or_none(content):
    with tempfile.TemporaryDirectory() as d:
        path = C.path(d, "k")
        path.parent.mkdir(parents=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(json.dumps(content, allow_nan=True), encoding="utf-8")
        C._MEMORY.pop("k", None)
        with time_limit(10, "explanation_cache.load"):
            got = C.load(Path(d), "k", PRED)
        C._MEMORY.pop("k", None)
    if got is not None:
        for r in got:
            assert r.scores.shape == (3,) and r.token_scores.shape == (5,)
            assert np.isfinite(r.scores).all()


CONTENT = st.one_of(JSON, st.binary(max_size=200),
                    st.tuples(FIELDS, JSON).map(lambda fv: _mutated(VALID, fv)))
test_any_cache_file_reads_as_this_review_s_results_or_none, \
    test_any_cache_file_reads_as_this_review_s_results_or_none_fuzz = \
    twins(_reading_any_file_gives_fitting_results_or_none, content=CONTENT)


def test_the_valid_file_itself_reads_back():
    with tempfile.TemporaryDirectory() as d:
        C.path(d, "v").parent.mkdir(parents=True)
        C.path(d, "v").write_text(json.dumps(VALID))
        C._MEMORY.pop("v", None)
        got = C.load(Path(d), "v", PRED)
        C._MEMORY.pop("v", None)
    assert got is not None and got[0].method == "lime"
    np.testing.assert_allclose(got[0].scores, [0.1, 0.5, -0.2], rtol=1e-6)
