"""reviewbert/model/row_memo.py and ``Predictor.batch_logits(remember=True)``: LIME or occlusion
stopped halfway (the user left the page) resumes where it stopped, reading only the rows
the model has not read yet, with the same result as a run never stopped."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from reviewbert.explain import methods as E
from reviewbert.model.row_memo import RowMemo

LONG = " ".join(["The battery died after two days and support never answered."] * 6)


@pytest.fixture()
def fresh(tiny_model_dir):
    """A new Predictor each time: an empty memo."""
    from reviewbert.model.inference import Predictor

    def make():
        return Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))
    return make


def test_the_memo_keeps_the_most_recently_used_rows_up_to_its_bound():
    memo = RowMemo(max_rows=2)
    memo.put_many([[1, 2], [1, 3]], np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert memo.get_many([[1, 2]])[0].tolist() == [0.0, 1.0]       # [1, 2] used last now
    memo.put_many([[1, 4]], np.array([[4.0, 5.0]]))
    got = memo.get_many([[1, 2], [1, 3], [1, 4], [2, 1]])
    assert got[1] is None and got[3] is None                        # [1, 3] went first
    assert got[0].tolist() == [0.0, 1.0] and got[2].tolist() == [4.0, 5.0]
    assert len(memo) == 2
    with pytest.raises(ValueError):
        got[0][0] = 9.0                                             # shared: read-only


def test_concurrent_writers_and_readers_leave_a_consistent_memo():
    memo = RowMemo(max_rows=500)

    def work(k):
        rows = [[k, i] for i in range(300)]
        memo.put_many(rows, np.array([[k, i] for i in range(300)], dtype=np.float32))
        for r, v in zip(rows, memo.get_many(rows)):
            assert v is None or v.tolist() == r                     # never another row's
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(memo) == 500


class Stop(Exception):
    """What Streamlit raises at a bar's update when the user has left."""


def test_a_stopped_occlusion_resumes_where_it_stopped(fresh, monkeypatch):
    from reviewbert.model.inference import Predictor
    monkeypatch.setattr(Predictor, "BATCH_TOKENS", 256)         # many batches: many stops
    whole = fresh()
    pred = whole.predict(LONG)
    expected = E.Occlusion().run(whole, pred)

    p = fresh()
    pred = p.predict(LONG)
    cost = E.Occlusion().cost(pred)
    shown = []

    def leaves_after_three(n):
        shown.append(n)
        if len(shown) == 3:
            raise Stop
    with pytest.raises(Stop):
        E.Occlusion().run(p, pred, leaves_after_three)
    before = sum(shown)
    assert 0 < before < cost

    class Bar:
        done, resumed_n = 0, 0

        def __call__(self, n):
            self.done += n

        def resumed(self, n):
            self.resumed_n += n
    read = []
    real = Predictor._padded_logits
    monkeypatch.setattr(Predictor, "_padded_logits",
                        lambda self, batch, pad: read.extend(batch) or real(self, batch, pad))
    bar = Bar()
    again = E.Occlusion().run(p, pred, bar)
    assert bar.resumed_n == before                      # what the first run showed is kept
    assert bar.done + bar.resumed_n == cost             # and the bar still ends at its total
    assert sum(len(r) for r in read) == cost - before   # the model reads only the rest
    np.testing.assert_allclose(again.scores, expected.scores, atol=1e-6)

    read.clear()
    E.Occlusion().run(p, pred, bar)                     # all known: no pass at all
    assert read == []


def test_lime_after_occlusion_reads_the_review_itself_only_once(fresh):
    p = fresh()
    pred = p.predict(LONG)
    E.Occlusion().run(p, pred)
    heard = []
    E.Lime(20).run(p, pred, type("Bar", (), {"__call__": lambda s, n: heard.append(("read", n)),
                                              "resumed": lambda s, n: heard.append(("kept", n))})())
    assert ("kept", pred.n_tokens) in heard             # LIME's first sample is the review


def test_bf16_and_unremembered_rows_stay_out_of_the_memo(fresh):
    p = fresh()
    rows = p.encode_rows(["good phone", "bad phone, broke in a week"])
    p.batch_logits(rows, precision="bf16", remember=True)
    p.batch_logits(rows)
    assert len(p.row_memo) == 0
    got = p.batch_logits(rows, remember=True)
    assert len(p.row_memo) == 2
    np.testing.assert_allclose(p.batch_logits(rows, remember=True), got)
