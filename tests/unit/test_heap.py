"""reviewbert.server.heap: long-lived objects frozen out of Streamlit's after-run collection,
without keeping reference cycles dropped since the last freeze."""
from __future__ import annotations

import gc
import weakref

import pytest

from reviewbert.server import heap


class Node:
    pass


@pytest.fixture(autouse=True)
def unfrozen():
    yield
    gc.unfreeze()


def test_a_freeze_takes_what_is_alive_out_of_later_collections():
    a = Node()
    a.cycle = a
    ref = weakref.ref(a)
    frozen = heap.freeze_long_lived()
    assert frozen > 0 and gc.get_freeze_count() > 0
    del a
    gc.collect(2)                   # what Streamlit runs after each script run
    assert ref() is not None        # frozen: that collection did not walk it


def test_the_next_freeze_frees_cycles_dropped_since_the_last():
    a = Node()
    a.cycle = a
    ref = weakref.ref(a)
    heap.freeze_long_lived()
    del a
    heap.freeze_long_lived()        # e.g. the next model load
    assert ref() is None


def test_objects_made_after_a_freeze_are_collected_as_usual():
    heap.freeze_long_lived()
    b = Node()
    b.cycle = b
    ref = weakref.ref(b)
    del b
    gc.collect(2)
    assert ref() is None


def test_a_run_that_imported_modules_freezes_and_one_that_did_not_does_not(monkeypatch):
    heap.freeze_long_lived()
    assert heap.freeze_if_imported() is False          # nothing imported since
    fake = {f"reviewbert_fake_module_{i}": object() for i in range(heap.IMPORTS_WORTH_A_FREEZE)}
    for name, mod in fake.items():
        monkeypatch.setitem(__import__("sys").modules, name, mod)
    a = Node()
    a.cycle = a
    ref = weakref.ref(a)
    assert heap.freeze_if_imported() is True           # e.g. a page's first import of torch
    del a
    gc.collect(2)
    assert ref() is not None                           # it was frozen then
    assert heap.freeze_if_imported() is False          # and not again on the next run


def test_freezing_the_new_objects_leaves_the_frozen_ones_alone():
    """freeze_new walks only what is not frozen yet: a cycle dropped after an earlier
    freeze stays (until the next full freeze), a new object alive now is frozen."""
    old = Node()
    old.cycle = old
    old_ref = weakref.ref(old)
    heap.freeze_long_lived()
    before = gc.get_freeze_count()
    del old
    new = Node()
    new.cycle = new
    new_ref = weakref.ref(new)
    assert heap.freeze_new() > before           # the new objects joined the frozen ones
    assert old_ref() is not None                # not walked: not freed
    del new
    gc.collect(2)
    assert new_ref() is not None                # frozen by freeze_new
    heap.freeze_long_lived()                    # the next model load frees both
    assert old_ref() is None and new_ref() is None
