"""The "Fool the model" page: a class writes reviews meant to fool the model, and sees them live.

A student writes a review and the stars they meant; the model answers at once, and the
entry is saved in the shared store (``reviewbert.store.db``: an SQLite file by default, a
PostgreSQL URL in ``REVIEWBERT_DB`` for a class across machines) before the page says so.
Every session of the same room sees the class's entries on its board, refreshed every few
seconds by a Streamlit fragment. One click turns the room's entries into minimum-
functionality tests of a user suite, one per capability, that the Behaviour page runs.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from reviewbert.behave import library
from reviewbert.behave import suite as suites
from reviewbert.behave.scoring import expected_stars, mft_passes
from reviewbert.store import db
from reviewbert.ui import runtime, state
from reviewbert.ui.inside_bert import CLASSROOM_CSS
from reviewbert.viz.markdown import md_code, md_escape

DEFAULT_ROOM = "class"
BOARD_SECONDS = 2.0
"""How often a board asks the store for new entries: a student's entry shows on the
teacher's projector within this, and 20 boards polling cost the store ten small reads a
second."""
OTHER = "other"
LATEST = 5              # entries the board shows in full, newest first, above the table
TABS = ("Write a review", "The class's board")


def capabilities() -> list[str]:
    """What a student can say their review tests: the shipped suite's capabilities, then
    "other"."""
    seen = dict.fromkeys(t.capability for t in suites.default_suite().tests)
    return [*seen, OTHER]


def store():
    """The shared store, or None with its one-line error shown."""
    try:
        return db.open_store()
    except db.StoreError as e:
        st.error(f"The class's store cannot be opened: {md_escape(e)}")
        return None


def room_and_name() -> tuple[str, str]:
    if state.FOOL_ROOM not in st.session_state:
        st.session_state[state.FOOL_ROOM] = st.query_params.get("room", DEFAULT_ROOM)
    c1, c2, c3 = st.columns([2, 2, 1])
    room = c1.text_input("Room", key=state.FOOL_ROOM, max_chars=80, persist_state=state.KEEP,
                         help="Everyone who types the same room shares one board; the "
                              "teacher can hand out the link with ?room=NAME")
    name = c2.text_input("Your name (optional)", key=state.FOOL_AUTHOR, max_chars=80,
                         persist_state=state.KEEP)
    c3.toggle("Classroom mode", key=state.FOOL_CLASSROOM, persist_state=state.KEEP,
              help="Larger type, for a projector")
    return (room.strip() or DEFAULT_ROOM), name.strip()


# ------------------------------------------------------------------ a student's entry
def write_a_review(info, predictor, room: str, name: str) -> None:
    st.markdown("Write a review that **you** would rate one way and the model will get "
                "wrong: a negation far from its word, sarcasm, a mixed verdict… The model "
                "answers at once, and your entry joins the class's board.")
    with st.form("fool_form", border=True, clear_on_submit=False):
        st.text_area("Your review", key=state.FOOL_TEXT, height=120, max_chars=5000)
        c1, c2 = st.columns(2)
        c1.select_slider("The stars you meant", options=[1, 2, 3, 4, 5], value=(1, 1),
                         key=state.FOOL_STARS)
        options = capabilities()
        c2.selectbox("What it tests", options, index=options.index(OTHER),
                     key=state.FOOL_CAPABILITY)
        sent = runtime.form_submit(st, "Send", type="primary", key=state.FOOL_SEND)
    if sent:
        _send(info, predictor, room, name)
    last = st.session_state.get(state.FOOL_LAST)
    if last and last.get("room") == room:
        _verdict(last)


def _send(info, predictor, room: str, name: str) -> None:
    text = (st.session_state.get(state.FOOL_TEXT) or "").strip()
    if not text:
        st.info("Write a review first: the box is empty.")
        return
    lo, hi = st.session_state.get(state.FOOL_STARS) or (1, 1)
    with runtime.review_threads(predictor):
        pred = predictor.predict(text)
    if not pred.words:          # only zero-width or control characters: nothing to rate
        st.info("The model reads no word in this review: write one with words.")
        return
    scheme = predictor.scheme
    e = float(expected_stars(pred.probs[None, :], scheme)[0])
    shown = scheme.stars_of(pred.label_id)
    fooled = not mft_passes(pred.label_id, (lo, hi), scheme)
    s = store()
    if s is None:
        return
    try:
        entry_id = s.add_entry(room, name, text, (lo, hi),
                               st.session_state.get(state.FOOL_CAPABILITY) or OTHER,
                               str(info.path.name), pred.label, (min(shown), max(shown)), e,
                               fooled)
    except db.StoreError as err:
        st.error(f"Not saved: {md_escape(err)}")
        return
    st.session_state[state.FOOL_LAST] = {"id": entry_id, "room": room, "fooled": fooled,
                                         "meant": (lo, hi), "label": pred.label, "e": e}


def _stars(lo: int, hi: int) -> str:
    return f"{lo}★" if lo == hi else f"{lo}–{hi}★"


def _verdict(last: dict) -> None:
    meant = _stars(*last["meant"])
    said = f"{last['label']} (expected rating {last['e']:.2f}★)"
    if last["fooled"]:
        st.success(f"**You fooled it!** You meant {meant}; the model says {said}. "
                   f"Entry #{last['id']} is on the board.")
    else:
        st.info(f"**The model got it:** you meant {meant}; it says {said}. Entry "
                f"#{last['id']} is on the board. Try again?")


# ------------------------------------------------------------------ the board
def board(room: str) -> None:
    """The room's entries, refreshed every BOARD_SECONDS (a fragment: only it reruns)."""
    st.fragment(run_every=BOARD_SECONDS)(_board)(room)
    _save_as_tests(room)


def _board(room: str) -> None:
    s = store()
    if s is None:
        return
    try:
        entries = s.entries(room)
    except db.StoreError as e:
        st.error(f"The board cannot be read: {md_escape(e)}")
        return
    if not entries:
        st.info(f"No entries in room {md_code(room)} yet. Write one in **{TABS[0]}**: it appears "
                "here, and on every board of this room, within seconds.")
        return
    fooled = sum(e.fooled for e in entries)
    c1, c2, c3 = st.columns(3)
    c1.metric("Entries", len(entries))
    c2.metric("Fooled the model", fooled)
    c3.metric("Authors", len({e.author for e in entries}))
    st.markdown("**Latest**")
    for e in reversed(entries[-LATEST:]):
        with st.container(border=True):
            # st.text, never Markdown: entries are typed by anyone in the room
            st.text(f"#{e.id} · {e.author or 'someone'} meant {_stars(e.min_stars, e.max_stars)}, "
                    f"the model said {_stars(e.pred_min, e.pred_max)}: "
                    f"{'FOOLED IT' if e.fooled else 'got it'} ({e.capability})")
            st.text(e.text if len(e.text) <= 400 else e.text[:400] + "…")
    table = pd.DataFrame([{
        "#": e.id, "fooled": "✗ fooled" if e.fooled else "✓ got it", "author": e.author,
        "review": e.text, "meant": _stars(e.min_stars, e.max_stars),
        "model": _stars(e.pred_min, e.pred_max), "E★": round(e.e_stars, 2),
        "capability": e.capability} for e in reversed(entries)])
    st.dataframe(table, hide_index=True, key="fool_board_table",
                 column_config={"review": st.column_config.TextColumn(width="large")})
    per = table.groupby("capability")["fooled"].agg(
        entries="count", fooled=lambda x: int((x == "✗ fooled").sum()))
    st.bar_chart(per, horizontal=True, stack=False)


def entries_as_tests(room: str, entries) -> list[suites.TestSpec]:
    """One MFT test per capability from a room's entries (the stars each author meant)."""
    by_cap: dict[str, list] = {}
    for e in entries:
        by_cap.setdefault(e.capability, []).append(
            suites.CaseSpec(text=e.text, stars=(e.min_stars, e.max_stars)))
    return [suites.TestSpec(name=f"{room}: {cap}"[:120], capability=cap, type="MFT",
                            description=f"Reviews written in room {room!r} to fool the model.",
                            cases=tuple(cases))
            for cap, cases in sorted(by_cap.items())]


def _save_as_tests(room: str) -> None:
    c1, c2 = st.columns([2, 1])
    target = c1.text_input("Suite for the class's tests", f"class-{room}"[:60],
                           key=state.FOOL_SAVE_SUITE, label_visibility="collapsed")
    if not runtime.button(c2, "Save the class's entries as tests", key=state.FOOL_SAVE):
        return
    s = store()
    if s is None:
        return
    try:
        tests = entries_as_tests(room, s.entries(room))
        if not tests:
            st.info("There are no entries to save yet.")
            return
        for t in tests:
            library.add_test(target, t)
    except (db.StoreError, suites.SuiteError, OSError) as e:
        st.error(f"Not saved: {md_escape(e)}")
        return
    st.success(f"Saved {len(tests)} tests into suite {md_code(target)}: the Behaviour page "
               "runs them.")
    st.session_state[state.BEHAVE_PENDING_SUITE] = target
    st.page_link(state.BEHAVE_PAGE, label="Open the Behaviour page")


# ------------------------------------------------------------------ the page
def page(info, predictor) -> None:
    room, name = room_and_name()
    if st.session_state.get(state.FOOL_CLASSROOM):
        st.html(CLASSROOM_CSS)
    write, board_tab = st.tabs(TABS, key=state.FOOL_VIEW, on_change="rerun")
    if write.open:
        with write:
            write_a_review(info, predictor, room, name)
    if board_tab.open:
        with board_tab:
            board(room)
