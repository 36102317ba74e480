"""Turns for the Predict page's heavy work (reviewbert/server/admission.py): arrival order, a
bounded number at a time, never a hang."""
import threading
import time

import pytest

from reviewbert.server import admission


@pytest.fixture
def one_slot(monkeypatch):
    monkeypatch.setattr(admission, "_gate", threading.Semaphore(1))


def test_waiting_runs_get_their_turns_in_arrival_order(one_slot):
    order, inside, most = [], [0], [0]
    release = threading.Event()
    lock = threading.Lock()

    def run(name, hold=None):
        with admission.turn() as had:
            assert had
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(name)
            if hold:
                hold.wait(5)
            time.sleep(0.01)
            with lock:
                inside[0] -= 1

    first = threading.Thread(target=run, args=("first", release))
    first.start()
    time.sleep(0.05)
    later = []
    for name in "abcde":                       # they arrive one after another, all waiting
        t = threading.Thread(target=run, args=(name,))
        t.start()
        later.append(t)
        time.sleep(0.03)
    release.set()
    for t in [first, *later]:
        t.join(10)
    assert order == ["first", *"abcde"]
    assert most[0] == 1                        # one slot: never two inside


def test_a_run_that_waited_too_long_goes_ahead_without_a_turn(one_slot):
    held = threading.Event()
    done = threading.Event()

    def holder():
        with admission.turn():
            held.set()
            done.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    t0 = time.perf_counter()
    with admission.turn(timeout=0.1) as had:
        assert had is False
    assert 0.09 <= time.perf_counter() - t0 < 2
    assert admission._gate.acquire(timeout=0.05) is False   # the holder's turn was not given up
    with admission.turn(enabled=False) as had:               # no wait at all when disabled
        assert had is False
    done.set()
    t.join(5)
    assert admission._gate.acquire(timeout=1)                # and the holder's went back
    admission._gate.release()


def test_an_exception_or_a_stop_inside_gives_the_turn_back(one_slot):
    with pytest.raises(RuntimeError):
        with admission.turn():
            raise RuntimeError("st.stop() raises too")
    with admission.turn(timeout=0.5) as had:
        assert had is True


def test_one_slot_per_usable_core():
    from reviewbert.model.device import usable_cores
    assert admission.slots() == max(1, usable_cores())
