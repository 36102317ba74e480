"""reviewbert/ui/runtime/clicks.py: a click recorded by its callback is read once, by the run it
started or by the run that replaced it, and is dropped rather than fired later; a request
is kept until its work is done.

A run that Streamlit stops for a newer one leaves the session's state as the button's
callback left it; these tests start from that state (``state.CLICKS`` set as the callback
sets it: the click's time, and whether a fragment's run recorded it) and run the script
as the replacing run does. The race itself, in a browser, is
tests/browser/test_browser_whatif.py::test_compare_then_a_click_elsewhere_still_compares.
"""
from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from reviewbert.ui import state as S
from reviewbert.ui.runtime import clicks

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _script():
    import time

    from reviewbert.ui.runtime.clicks import Request
    REQUEST = Request("work")

    import streamlit as st

    from reviewbert.ui import runtime
    from reviewbert.ui.runtime import clicks
    recorded, started = clicks.pending(), time.monotonic()
    if st.session_state.get("draw", True):
        if runtime.button(st, "Go", key="go", disabled=st.session_state.get("disabled", False)):
            st.session_state["fired"] = st.session_state.get("fired", 0) + 1
    if st.session_state.get("ask"):
        st.session_state.pop("ask")
        REQUEST.ask()
    if REQUEST.asked():
        st.session_state["worked"] = st.session_state.get("worked", 0) + 1
        if not st.session_state.get("stop_before_done"):
            REQUEST.done()
    st.write(f"fired {st.session_state.get('fired', 0)}")
    clicks.forget_unread(recorded, started)   # the frame's last step (ui/runtime/runs.py)


def script(**session) -> AppTest:
    at = AppTest.from_function(_script, default_timeout=30)
    for k, v in session.items():
        at.session_state[k] = v
    return at


def now(by_fragment: bool = False, age: float = 0.0) -> tuple[float, bool]:
    """A recorded click, as the button's callback records it, ``age`` seconds ago."""
    return time.monotonic() - age, by_fragment


def fired(at) -> int:
    assert not at.exception, at.exception
    return int(at.markdown[-1].value.split()[-1])


def test_a_click_fires_once():
    at = script().run()
    assert fired(at) == 0
    at.button(key="go").click().run()
    assert fired(at) == 1
    at.run()
    assert fired(at) == 1, "the click fired again in a later run"
    assert not at.session_state[S.CLICKS]


def test_a_click_whose_run_was_stopped_is_read_by_the_next_run_once():
    at = script(**{S.CLICKS: {"go": now()}}).run()
    assert fired(at) == 1
    at.run()
    assert fired(at) == 1


def test_a_click_not_read_by_a_whole_run_is_dropped_not_fired_later():
    """The user left the page, or the button is no longer drawn: the run ends, the click
    goes, and drawing the button again does not fire it."""
    at = script(**{S.CLICKS: {"go": now()}, "draw": False}).run()
    assert fired(at) == 0
    assert not at.session_state[S.CLICKS]
    at.session_state["draw"] = True
    at.run()
    assert fired(at) == 0


def test_the_end_of_a_run_keeps_a_click_recorded_after_it_started():
    """Under fast reruns a newer run's thread records its click beside the run that is
    finishing: that run's end must not drop it."""
    recorded = {"old": now(age=2.0), "new": now()}
    clicks.forget_unread(recorded, recorded_before=time.monotonic() - 1.0)
    assert list(recorded) == ["new"]


def test_a_disabled_button_drops_its_click():
    at = script(**{S.CLICKS: {"go": now()}, "disabled": True}).run()
    assert fired(at) == 0
    at.session_state["disabled"] = False
    at.run()
    assert fired(at) == 0


def test_a_click_is_read_only_within_click_s():
    """The run stopped by a fast rerun ends in an exception, like one that called
    st.stop(): its unread clicks are dropped by age, not by the frame."""
    at = script(**{S.CLICKS: {"go": now(age=clicks.CLICK_S - 1)}}).run()
    assert fired(at) == 1
    at = script(**{S.CLICKS: {"go": now(age=clicks.CLICK_S + 1)}}).run()
    assert fired(at) == 0


def test_a_fragments_click_is_read_by_the_whole_run_that_replaced_it():
    at = script(**{S.CLICKS: {"go": now(by_fragment=True)}}).run()
    assert fired(at) == 1


def test_a_fragments_run_reads_only_its_own_click(monkeypatch):
    """A click a fragment's run recorded and did not read (its button was not drawn then)
    is not fired by a later run of that fragment."""
    monkeypatch.setattr(clicks, "fragment_run", lambda: True)
    at = script(**{S.CLICKS: {"go": now(by_fragment=True)}}).run()
    assert fired(at) == 0
    at.button(key="go").click().run()
    assert fired(at) == 1


def test_the_frame_reads_a_recorded_click_and_drops_the_unread(monkeypatch, tmp_path):
    """Through the app's frame: on the first-run guide (no checkpoint), a recorded click
    on "Open the training page" opens it; on the Train page, whose run returns, a click
    on a button the page does not draw is gone once the run has ended. (The guide's run
    ends in st.stop(): its unread clicks wait out CLICK_S instead.)"""
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(tmp_path / "ckpts"))
    monkeypatch.setenv("REVIEWBERT_QUEUE_DIR", str(tmp_path / "queue"))
    monkeypatch.setenv("REVIEWBERT_UPLOADS_DIR", str(tmp_path / "uploads"))
    (tmp_path / "ckpts").mkdir()
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    assert all(r.key != S.TRAIN_VIEW for r in at.radio)
    at.session_state[S.CLICKS] = {"guide_to_train": now()}
    at.run()
    assert not at.exception, at.exception
    assert any(r.key == S.TRAIN_VIEW for r in at.radio), "the Train page did not open"
    at.session_state[S.CLICKS] = {"err_evaluate": now()}
    at.run()
    assert not at.exception, at.exception
    assert not at.session_state[S.CLICKS]


def _superseded_script():
    import streamlit as st

    from reviewbert.ui.runtime import runs
    number = runs.start_full_run()
    if st.session_state.get("newer"):
        runs.start_full_run()               # a newer full run of the session began meanwhile
    st.write("body")
    runs.stop_if_superseded(number)
    st.write("returned")


def test_a_run_replaced_by_a_newer_one_ends_stopped_not_finished():
    """ui/runtime/runs.py: a full run that a newer one replaced must not return normally, or
    Streamlit drops the fragments the newer run registered (a stale run's end clears every
    fragment it did not draw itself; tried with a two-run probe under fast reruns: the
    fragment's next click was ignored, 'does not exist anymore')."""
    at = AppTest.from_function(_superseded_script, default_timeout=30).run()
    assert [m.value for m in at.markdown] == ["body", "returned"] and not at.exception
    at = AppTest.from_function(_superseded_script, default_timeout=30)
    at.session_state["newer"] = True
    at.run()
    assert [m.value for m in at.markdown] == ["body"] and not at.exception


def test_a_request_is_kept_until_its_work_is_done():
    """A request (the Predict page's prediction) outlives the runs that end before its
    work is done, however old, and the end of a whole run; done, it is gone."""
    at = script(ask=True, stop_before_done=True).run()
    assert at.session_state["worked"] == 1
    key = "request:work"
    at.session_state[S.CLICKS] = {key: clicks.Click(time.monotonic() - 10 * clicks.CLICK_S, False, True)}
    at.run()
    assert at.session_state["worked"] == 2, "an old request was dropped before its work was done"
    assert key in at.session_state[S.CLICKS]
    at.session_state["stop_before_done"] = False
    at.run()
    assert at.session_state["worked"] == 3 and key not in at.session_state[S.CLICKS]
    at.run()
    assert at.session_state["worked"] == 3, "a done request was worked again"
