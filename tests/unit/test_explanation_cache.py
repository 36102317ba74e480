"""reviewbert/explain/cache.py: a review's slow explanations are computed once for the
server, kept next to the checkpoint, keyed by all that decides them, and shared by the
sessions that ask at the same time."""
from __future__ import annotations

import json
import shutil
import threading
import time

import numpy as np
import pytest
import torch

from reviewbert.explain import cache as C
from reviewbert.explain import methods as E

REVIEW = "The battery died after two days, unbelievably poor quality!"


@pytest.fixture()
def ckpt(tiny_model_dir, tmp_path):
    out = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, out)
    C._MEMORY.clear()
    yield out
    C._MEMORY.clear()


@pytest.fixture()
def predictor(ckpt):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(ckpt, torch.device("cpu"))


def test_results_survive_the_file_round_trip(predictor):
    pred = predictor.predict(REVIEW)
    results = E.explain(predictor, pred, E.gradient_methods(4, None) + E.perturbation_methods(20))
    back = C.from_json(json.loads(json.dumps(C.to_json(results))))
    assert [r.method for r in back] == [r.method for r in results]
    for a, b in zip(results, back):
        np.testing.assert_array_equal(a.scores, b.scores)
        np.testing.assert_array_equal(a.token_scores, b.token_scores)
        assert (a.delta, a.n_steps, a.detail, a.target) == (b.delta, b.n_steps, b.detail, b.target)
    with pytest.raises(ValueError):
        C.from_json({**C.to_json(results), "version": C.VERSION + 1})


def test_the_key_follows_the_weights_the_words_and_every_setting(predictor, ckpt):
    pred = predictor.predict(REVIEW)
    where, k = C.place(predictor, pred, E.perturbation_methods())
    assert where == ckpt
    other = predictor.predict(REVIEW + " Really.")
    assert C.place(predictor, other, E.perturbation_methods())[1] != k          # other words
    assert C.place(predictor, pred, E.perturbation_methods(100))[1] != k        # LIME samples
    assert C.place(predictor, pred, [E.Lime(seed=1), E.Occlusion()])[1] != k    # LIME's seed
    assert C.place(predictor, pred, E.gradient_methods(8))[1] != \
        C.place(predictor, pred, E.gradient_methods(16))[1]                     # IG steps
    assert C.place(predictor, pred, E.perturbation_methods())[1] == k           # stable
    weights = next(ckpt.glob("*.safetensors"))
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1                                                               # new weights
    weights.write_bytes(bytes(blob))
    assert C.place(predictor, pred, E.perturbation_methods())[1] != k
    predictor.checkpoint = None                                                 # no folder
    assert C.place(predictor, pred, E.perturbation_methods())[0] is None


def test_computed_once_then_read_by_anyone_even_after_a_restart(predictor, ckpt):
    pred = predictor.predict(REVIEW)
    methods = E.perturbation_methods(20)
    where, k = C.place(predictor, pred, methods)
    calls = []

    def compute():
        calls.append(1)
        return E.explain(predictor, pred, methods)
    first = C.cached_or_computed(where, k, compute)
    assert not first.from_cache and first.cache_error is None and calls == [1]
    assert C.path(ckpt, k).is_file()
    again = C.cached_or_computed(where, k, compute)
    assert again.from_cache and calls == [1]
    C._MEMORY.clear()                                                  # a restarted server
    disk = C.cached_or_computed(where, k, compute)
    assert disk.from_cache and calls == [1]
    np.testing.assert_array_equal(disk.results[0].scores, first.results[0].scores)
    C._MEMORY.clear()
    C.path(ckpt, k).write_text('{"version": 1, "results": [{"method"')  # torn: computed again
    assert not C.cached_or_computed(where, k, compute, pred=pred).from_cache and calls == [1, 1]
    blob = C.to_json(first.results)                                    # hostile: wrong sizes
    blob["results"][0]["scores"] = blob["results"][0]["scores"][:-1]
    C._MEMORY.clear()
    C.path(ckpt, k).write_text(json.dumps(blob))
    assert C.load(ckpt, k, pred) is None
    blob["results"][0]["scores"] = ["NaN"] * len(pred.words)
    C.path(ckpt, k).write_text(json.dumps(blob))
    assert C.load(ckpt, k, pred) is None


def test_sessions_asking_at_once_share_one_computation(predictor):
    pred = predictor.predict(REVIEW)
    where, k = C.place(predictor, pred, E.perturbation_methods(20))
    calls, waits, got = [], [], []

    def compute():
        calls.append(1)
        time.sleep(0.6)
        return E.explain(predictor, pred, E.perturbation_methods(20))

    def ask():
        got.append(C.cached_or_computed(where, k, compute, on_wait=lambda: waits.append(1),
                                        poll=0.05))
    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and len(got) == 3 and waits              # the others waited for it
    assert sorted(o.from_cache for o in got) == [False, True, True]
    assert not C._LOCKS                                          # nothing left behind


def test_a_stopped_computation_hands_over_to_the_one_waiting(predictor):
    class Stopped(BaseException):                                # as Streamlit's StopException
        pass
    pred = predictor.predict(REVIEW)
    where, k = C.place(predictor, pred, E.perturbation_methods(20))
    started = threading.Event()

    def stopped():
        started.set()
        time.sleep(0.3)
        raise Stopped()
    out = {}

    def first():
        with pytest.raises(Stopped):
            C.cached_or_computed(where, k, stopped)
    t = threading.Thread(target=first)
    t.start()
    started.wait(5)
    out["second"] = C.cached_or_computed(
        where, k, lambda: E.explain(predictor, pred, E.perturbation_methods(20)), poll=0.05)
    t.join()
    assert not out["second"].from_cache and len(out["second"].results) == 2


def test_a_folder_that_cannot_be_written_still_shows_and_says_so(predictor, ckpt, monkeypatch):
    pred = predictor.predict(REVIEW)
    where, k = C.place(predictor, pred, E.perturbation_methods(20))

    def full(*a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(C, "atomic_write_json", full)
    out = C.cached_or_computed(where, k, lambda: E.explain(predictor, pred,
                                                            E.perturbation_methods(20)))
    assert "No space left on device" in out.cache_error and len(out.results) == 2
    assert not C.path(ckpt, k).exists()
    assert C.cached_or_computed(where, k, lambda: pytest.fail("computed twice")).from_cache


def test_one_method_is_read_from_the_pages_pair_or_its_own_entry(predictor, ckpt):
    """What if?'s comparison asks for one method of each version: the original's LIME comes
    from the pair the Predict page stored (no model pass), the edit's is computed once and
    stored under its own key, and the next comparison of the same edit reads both."""
    from reviewbert.whatif import counterfactuals as whatif
    before = predictor.predict(REVIEW)
    after = predictor.predict(REVIEW.replace("poor", "great"))
    pair = E.perturbation_methods()
    stored_pair = C.cached_or_computed(*C.place(predictor, before, pair),
                                       lambda: E.explain(predictor, before, pair), pred=before)
    lime = E.method_by_name("lime")
    assert C.stored(predictor, before, lime) is not None            # found inside the pair
    assert C.stored(predictor, after, lime) is None
    assert whatif.compare_cost(before, after, "lime", predictor=predictor) == lime.cost(after)
    read = []
    cmp = whatif.compare(predictor, before, after, "lime", progress=read.append)
    assert sum(read) == lime.cost(after)                # only the edit went through the model
    np.testing.assert_array_equal(cmp.before_scores.scores, stored_pair.results[0].scores)
    alone = lime.run(predictor, after)                  # the same numbers as computed alone
    np.testing.assert_allclose(cmp.after_scores.scores, alone.scores, rtol=1e-5, atol=1e-7)
    assert (ckpt / C.FOLDER / f"{C.place(predictor, after, [lime])[1]}.json").exists()
    C._MEMORY.clear()                                   # as after a restart: from the files
    again = []
    cmp2 = whatif.compare(predictor, before, after, "lime", progress=again.append)
    assert again == [] and whatif.compare_cost(before, after, "lime", predictor=predictor) == 0
    np.testing.assert_array_equal(cmp2.after_scores.scores, cmp.after_scores.scores)
    # a method that reads attentions only is computed, never stored
    files = set((ckpt / C.FOLDER).iterdir())
    whatif.compare(predictor, before, after, "value_norm")
    assert set((ckpt / C.FOLDER).iterdir()) == files
    # other settings are other numbers: never read from the page's pair
    assert C.stored(predictor, before, E.Lime(n_samples=E.LIME_SAMPLES + 10)) is None
