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
        elif isinstance(step, tuple) and step[0] == "resumed":  # done before this run
            bar.resumed(step[1])
        elif isinstance(step, tuple):                 # ("wait", s): another session computes
            bar.waiting()
            time.sleep(step[1])
            bar.waiting()
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


def test_a_resumed_run_shows_what_was_done_before_and_times_only_what_is_left():
    from reviewbert.progress import resumed
    # 900 of 1,000 done before this run, then 50 in ~40 ms: ~1,200 wordpieces/s, so the 50
    # left take a few seconds; counted into the rate, the 950 would promise ~0.02 s
    p = bar_of(run(steps=[("resumed", 900), 25, 25]))
    assert p.value == 95 and "950 / 1,000 wordpieces" in p.text
    rate = float(p.text.split(" · ")[1].split()[0].replace(",", ""))
    assert rate < 2600, p.text
    # a plain callable, without resumed(), is simply told the count
    told = []
    resumed(told.append, 3)
    resumed(told.append, 0)
    resumed(None, 3)
    assert told == [3]


def test_work_taken_over_after_a_wait_is_timed_from_the_wait_s_end():
    # 1.5 s waiting for another session, which stopped; then 250 of 1,000 in ~20 ms here:
    # timed from the bar's start that would read ~160 wordpieces/s and ~5 s left
    p = bar_of(run(steps=[("wait", 1.5), 250]))
    assert "250 / 1,000 wordpieces" in p.text
    rate = float(p.text.split(" · ")[1].split()[0].replace(",", ""))
    assert rate > 1000, p.text


def test_rates_read_at_every_speed():
    from reviewbert.ui.progress_bar import rate_text
    assert rate_text(12345.6, "wordpieces") == "12,346 wordpieces/s"
    assert rate_text(2.46, "reviews") == "2.5 reviews/s"
    assert rate_text(0.25, "reviews") == "4.0 s each"       # slow work: not "0 reviews/s"
    assert rate_text(0.0, "reviews") == "? reviews/s"


def test_the_terminal_bar_starts_where_a_resumed_run_left_off(capsys):
    from reviewbert.progress import TqdmProgress
    with TqdmProgress(10, "faithfulness") as bar:
        bar.resumed(4)
        bar(1)
        assert bar.bar.n == 5 and bar.bar.initial == 4 and bar.bar.total == 10
    assert "5/10" in capsys.readouterr().err


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


def test_a_future_started_earlier_is_timed_from_its_own_start():
    """The map's neighbours start in the background as the page opens (split_map); the
    Map tab's wait for them shows the seconds since they started, not since the tab."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from reviewbert.ui.progress_bar import wait_timed
    with ThreadPoolExecutor(1) as pool:
        t0 = time.perf_counter() - 3.0                   # started 3 s before this run
        job = pool.submit(time.sleep, 0.3)
        where = Where()
        wait_timed(job, t0, "Finding every review's neighbours", 2.0, where=where, poll=0.05)
        assert job.done()
        texts = where.texts
        assert texts[0] == "Finding every review's neighbours: starting, a few seconds…"
        assert texts[-1] is None                                   # gone once done
        assert any(t and t.startswith("Finding every review's neighbours: 3 s · longer than "
                                      "the 2 s guessed") for t in texts[1:-1]), texts
        done = Where()
        wait_timed(job, t0, "Finding every review's neighbours", 2.0, where=done)
        assert done.texts == []                                    # done: nothing drawn
