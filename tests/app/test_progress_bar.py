"""reviewbert/ui/progress_bar.py: the pages' bar for long work shows the count, the rate
and the time left, steps back when the work grows, sits in the slot it is given, and
leaves nothing behind once closed."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script():
    import time

    import streamlit as st

    from reviewbert.ui.progress_bar import StreamlitProgress
    slot = st.empty()
    slot.button("Add the work")                       # the bar takes the button's place
    bar = StreamlitProgress(1000, "LIME and occlusion", unit="wordpieces", guess=12.0,
                            where=slot)
    steps = st.session_state.get("steps", [])
    for step in steps:
        time.sleep(0.02)
        if step == "grow":
            bar.grow(1000)
        else:
            bar(step)
    if st.session_state.get("close"):
        bar.close()
    st.write("below")


def run(**session) -> AppTest:
    at = AppTest.from_function(_script, default_timeout=30)
    for k, v in session.items():
        at.session_state[k] = v
    return at.run()


def bar_of(at):
    bars = at.get("progress")
    assert len(bars) == 1, bars
    return bars[0].proto


def test_the_bar_says_how_far_how_fast_and_how_long_is_left():
    at = run()
    assert not at.exception, at.exception
    p = bar_of(at)
    assert p.value == 0 and p.text == "LIME and occlusion: starting, about 12 s…"
    assert not at.button                                # the slot now holds the bar
    p = bar_of(run(steps=[250]))
    assert p.value == 25
    assert p.text.startswith("LIME and occlusion: 250 / 1,000 wordpieces · ")
    assert "wordpieces/s · " in p.text and p.text.endswith(" left")


def test_work_found_on_the_way_steps_the_bar_back_and_close_leaves_nothing():
    p = bar_of(run(steps=[500, "grow"]))
    assert p.value == 25 and "500 / 2,000 wordpieces" in p.text
    p = bar_of(run(steps=[3000]))                        # more than planned: full, not past it
    assert p.value == 100
    at = run(steps=[1000], close=True)
    assert not at.get("progress") and [m.value for m in at.markdown] == ["below"]


# ------------------------------------------------------------------ in_background
class FakeBar:
    """What ``where.progress`` returns: records the texts, as st.progress would draw them."""

    def __init__(self, texts):
        self.texts = texts

    def progress(self, value, text=""):
        assert 0 <= value <= 1
        self.texts.append(text)
        return self

    def empty(self):
        self.texts.append(None)


class Where:
    def __init__(self):
        self.texts = []

    def progress(self, value, text=""):
        return FakeBar(self.texts).progress(value, text)


def test_one_job_per_key_however_many_runs_wait_for_it():
    import threading
    import time

    from reviewbert.ui.progress_bar import in_background
    calls, results = [], []

    def work():
        calls.append(1)
        time.sleep(0.4)
        return "coords"
    where = [Where() for _ in range(3)]
    runs = [threading.Thread(target=lambda w=w: results.append(
        in_background("k1", work, "UMAP", 0.2, where=w, poll=0.05))) for w in where]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    assert calls == [1] and results == ["coords"] * 3            # one UMAP, three waiters
    texts = where[0].texts
    assert texts[0] == "UMAP: starting, a few seconds…" and texts[-1] is None  # shown, then gone
    assert any("longer than the 0 s guessed" in t for t in texts[1:-1])      # past the guess
    assert in_background("k1", work, "UMAP", 1.0, where=Where()) == "coords" and len(calls) == 2


def test_the_work_s_exception_reaches_the_page_and_the_next_ask_tries_again():
    import pytest

    from reviewbert.ui.progress_bar import in_background
    tries = []

    def fails():
        tries.append(1)
        raise ValueError("UMAP needs more reviews than its 15 neighbours")
    for _ in range(2):
        with pytest.raises(ValueError, match="more reviews"):
            in_background("k2", fails, "UMAP", 1.0, where=Where(), poll=0.01)
    assert len(tries) == 2


def test_a_job_finished_while_nobody_waited_is_handed_to_the_next_ask():
    import time

    from reviewbert.ui import progress_bar as P
    calls = []

    def work():
        calls.append(1)
        return "coords"

    class Stopped(BaseException):                       # as Streamlit's StopException
        pass

    class StoppedBar(Where):
        def progress(self, value, text=""):
            raise Stopped()
    import pytest
    with pytest.raises(Stopped):                        # the page stopped at its first step
        P.in_background("k3", lambda: (time.sleep(0.2), work())[1], "UMAP", 5.0,
                        where=StoppedBar())
    time.sleep(0.5)                                     # the worker finished unwatched
    assert calls == [1] and "k3" in P._JOBS
    assert P.in_background("k3", work, "UMAP", 5.0, where=Where()) == "coords"
    assert calls == [1] and "k3" not in P._JOBS         # handed over, not computed again
