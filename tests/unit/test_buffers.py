"""The attention arrays' memory pool (reviewbert/model/buffers.py): reuse only once nothing reads."""
import gc

import numpy as np
import torch

from reviewbert.model.buffers import BufferPool
from reviewbert.model.inference import Predictor
from reviewbert.model.labels import FIVE


def addr(a) -> int:
    return a.__array_interface__["data"][0]


def test_a_dropped_array_is_reused_and_a_live_one_never_is():
    pool = BufferPool(spare=1, min_bytes=0)
    a = pool.take((2, 3, 4))
    assert a.shape == (2, 3, 4) and a.dtype == np.float32 and a.flags.writeable
    where = addr(a)
    a[:] = 7.0
    view = torch.from_numpy(a).numpy()[1]     # what a prediction hands out: views of views
    del a
    gc.collect()
    b = pool.take((2, 3, 4))                   # the first is still read through ``view``
    assert addr(b) != where and pool.reused == 0
    b[:] = -1.0
    assert np.all(view == 7.0)                 # untouched by the new array's writes
    del view, b
    gc.collect()
    c = pool.take((2, 3, 4))
    assert pool.reused == 1 and addr(c) in {where, addr(c)}
    assert pool.waiting() in ([24], [])


def test_only_the_largest_spare_buffers_wait_and_small_or_oversized_takes_skip_them():
    pool = BufferPool(spare=1, min_bytes=0)
    xs = [pool.take((n,)) for n in (10, 40, 20)]
    del xs
    gc.collect()
    assert pool.waiting() == [40]              # spare=1: the largest one stays
    small = pool.take((15,))                   # 40 is more than twice 15: not used
    assert pool.reused == 0 and pool.waiting() == [40]
    fit = pool.take((30,))
    assert pool.reused == 1 and pool.waiting() == [] and fit.shape == (30,)
    below = BufferPool(spare=1, min_bytes=1 << 20)
    tiny = below.take((8,))                     # under min_bytes: plain np.empty, no pool
    del tiny
    gc.collect()
    assert below.waiting() == [] and below.made == 0
    del small


def test_prefault_keeps_one_touched_buffer_for_the_first_long_prediction():
    pool = BufferPool(spare=1, min_bytes=0)
    pool.prefault((4, 8, 8))
    assert pool.waiting() == [256]
    pool.prefault((4, 8, 8))                   # already there: no second one
    assert pool.waiting() == [256]
    a = pool.take((4, 8, 8))
    assert pool.reused == 1 and np.all(a == 0.0)


def test_predictions_through_reused_memory_keep_their_own_attention(tiny_model_dir):
    """A kept prediction is never overwritten by later ones; a dropped one's memory is
    reused, and the attention written there equals a fresh computation."""
    p = Predictor.from_checkpoint(tiny_model_dir, torch.device("cpu"))
    assert p.fast is not None
    p.fast.buffers = BufferPool(spare=1, min_bytes=0)
    fresh = Predictor(p.model, p.tokenizer, FIVE, fast=False)
    texts = ["The battery died after a week.", "Great phone, the screen is bright and sharp.",
             "Poor phone, the screen is dim and the sound is thin."]
    kept = p.predict(texts[2])            # its buffer would fit the next ones: never reused
    copy = kept.attentions.copy()
    for t in texts[1:] * 3:          # each dropped at once: its memory is reused (close lengths)
        out = p.predict(t)
        np.testing.assert_allclose(out.attentions, fresh.predict(t).attentions, atol=1e-5)
        np.testing.assert_array_equal(kept.attentions, copy)
        del out
        gc.collect()
    assert p.fast.buffers.reused >= 4
    np.testing.assert_array_equal(kept.attentions, copy)


def test_dropped_buffers_beyond_the_spare_go_back_to_the_system_at_once():
    pool = BufferPool(spare=1, min_bytes=0)
    xs = [pool.take((n,)) for n in (10, 20, 30, 40)]
    del xs
    gc.collect()
    assert len(pool._returned) == 0 and pool.waiting() == [40]
