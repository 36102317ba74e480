"""The app server SIGKILLed while a reviewer triages on the Cohorts page: nothing the page
acknowledged is lost, on SQLite and on PostgreSQL.

A reviewer (a real Streamlit websocket session, bench/st_session.py, the protocol a browser
speaks) works through the Triage tab's queue on the trigger model (tests/trigger_model.py)
and a toy split: each "Save and next" adds a tag, writes a note and relabels the review.
A save is acknowledged when the page says "Saved: relabelled …" and the next review comes
up, which it does only after the store's transactions committed. Three times over one
store, the server is killed (SIGKILL, no clean-up) while the next save is being written:
the moment its tag has committed (its note, relabel and mark still to come), the moment
its note has, and the moment its relabel has (its mark still to come). After each kill a
new server starts on the same store. Afterwards every acknowledged save is in the store
(tag and author, the note's exact text, the relabel over the data's stars, the reviewed
mark), the database passes an integrity check (SQLite's ``integrity_check``;
PostgreSQL's amcheck on the store's indexes) and holds no duplicate, and a restarted
page counts the reviews the store has marked and saves again. What each kill left of its
save goes to artifacts/browser/cohort_kill_*.json. The PostgreSQL run (a throwaway
server, tests/postgres_support.py) carries the ``distributed`` marker.
"""
from __future__ import annotations

import json
import re
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from streamlit.proto.WidgetStates_pb2 import WidgetState
from test_cohort_sessions import (
    AUTHOR,
    alerts,
    cohort_checkpoint,
    cohort_env,
    open_cohorts,
    open_tab,
    save_review,
    shown_review,
)

from browser_support import ART, ROOT, StreamlitServer
from postgres_support import PostgresServer, bin_dir

sys.path.insert(0, str(ROOT / "bench"))

from st_session import StSession  # noqa: E402

SAVES = 4                               # acknowledged saves per server, before its kill
KILLS = ("tag", "note", "relabel")      # the save's step after whose commit it is killed
WHO = "Kill — ‘tester’ 🎭"
TABLES = ("review_tags", "review_notes", "review_labels", "review_marks")


def note_text(r: int, i: int) -> str:
    return f"round {r}, save {i}: it's <b>not</b> bad — 'quoted' \"twice\" 🎭\nsecond line\r\n¶"


def new_stars(run, true: int) -> int:
    """Stars neither the data's nor the form's (a review a killed save relabelled shows its
    relabel): a save that always writes its relabel."""
    slider = run.find("slider", "Its true rating")
    shown = int(slider.options[int(slider.default[0])])
    return next(s for s in (true % 5 + 1, (true + 1) % 5 + 1) if s not in (true, shown))


def _save_in_background(s, tag, note, stars) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go():
        try:
            out["run"] = save_review(s, tag, note, stars)
        except Exception as e:      # noqa: BLE001 - the server died under it: expected
            out["error"] = f"{type(e).__name__}: {e}"
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, out


def written(store, key: str, step: str, values: tuple) -> bool:
    """Whether the save of ``values`` has committed its ``step`` (the page writes the tag,
    the note, the relabel, then the reviewed mark, each in its own transaction)."""
    tag, note, stars = values
    if step == "tag":
        return tag in store.tags([key]).get(key, [])
    if step == "note":
        return store.note(key) == note
    return getattr(store.relabels([key]).get(key), "stars", None) == stars


def kill_during_save(srv, store, s, key: str, step: str, values: tuple):
    """Send one more save and SIGKILL the server the moment its ``step`` has committed; the
    save's run if it finished first, else None."""
    thread, out = _save_in_background(s, *values)
    deadline = time.monotonic() + 120
    while not written(store, key, step, values):
        assert thread.is_alive(), f"the save ended without its {step}: {out}"
        assert time.monotonic() < deadline, f"the save's {step} never committed"
        time.sleep(0.001)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    thread.join(30)
    return out.get("run")


def acknowledge(run, key: str, true: int, values: tuple) -> dict | None:
    """The save's record if the page acknowledged it: its flash, and another review up."""
    from reviewbert.cohorts.keys import review_key
    tag, note, stars = values
    said = alerts(run, f"Saved: relabelled {true}★ → {stars}★, tagged ")
    if len(said) != 1 or f"`{tag}`" not in said[0]:
        return None
    assert review_key(shown_review(run)) != key, "the same review came up again"
    return {"key": key, "tag": tag, "note": note, "stars": stars, "true": true}


def one_server(env: dict, table, store, r: int, acked: list, kills: list) -> None:
    """A server, a reviewer saving SAVES reviews, and the kill during the next save."""
    from reviewbert.cohorts.keys import review_key
    true_of = dict(zip(table["key"], table["true_stars"].astype(int)))
    srv = StreamlitServer(env, ART / f"streamlit_cohort_kill_{r}.log").__enter__()
    try:
        with StSession(srv.url, timeout=180) as s:
            open_cohorts(s)
            name = s.last.find("text_input", AUTHOR)
            s.rerun([WidgetState(id=name.id, string_value=WHO)])
            open_tab(s, "Triage")
            for i in range(SAVES + 1):
                key = review_key(shown_review(s.last))
                true = true_of[key]
                values = (f"kill-r{r}-s{i}", note_text(r, i), new_stars(s.last, true))
                if i < SAVES:
                    run = save_review(s, *values)
                    assert run.errors == [], run.errors
                    record = acknowledge(run, key, true, values)
                    assert record is not None, (values, run.texts("alert"))
                else:
                    run = kill_during_save(srv, store, s, key, KILLS[r], values)
                    record = run and acknowledge(run, key, true, values)
                    kills.append(interrupted(store, KILLS[r], key, values[0], bool(record)))
                if record:
                    acked.append(record)
    finally:
        srv.__exit__(None, None, None)


def interrupted(store, when, key: str, tag: str, acknowledged: bool) -> dict:
    """What of the save the kill interrupted reached the store (for the artifact)."""
    return {"when": when, "acknowledged": acknowledged,
            "tag": tag in store.tags([key]).get(key, []), "note": store.note(key) is not None,
            "relabel": key in store.relabels([key]), "mark": key in store.reviewed([key])}


def check_integrity(store, url: str) -> None:
    """SQLite's integrity_check, or amcheck on every index of the store's tables; and no
    row the constraints forbid, read through the store's own engine."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite:///"):]) as raw:
            assert raw.execute("pragma integrity_check").fetchall() == [("ok",)]
            assert raw.execute("pragma foreign_key_check").fetchall() == []
    else:
        with store.engine.begin() as c:
            c.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS amcheck")
            indexes = c.execute(sa.text(
                "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class t "
                "ON t.oid = i.indrelid WHERE t.relname = ANY(:names)"), {"names": list(TABLES)}
            ).scalars().all()
            assert len(indexes) >= len(TABLES)
            for index in indexes:
                c.execute(sa.text("SELECT bt_index_check(CAST(:i AS regclass), true)"), {"i": index})
    with store.engine.begin() as c:
        assert c.exec_driver_sql("SELECT review_key, tag FROM review_tags GROUP BY review_key, tag "
                                 "HAVING COUNT(*) > 1").all() == []
        assert c.exec_driver_sql("SELECT review_key FROM review_labels WHERE stars = previous "
                                 "OR stars NOT BETWEEN 1 AND 5").all() == []


def check_acknowledged(store, acked: list) -> None:
    """Each acknowledged save whole in the store: its tag under its author, its note's exact
    text, its relabel over the data's stars, its reviewed mark."""
    keys = [a["key"] for a in acked]
    tags = {(t.review_key, t.tag): t.author for t in store.tag_records(keys)}
    notes, relabels, reviewed = store.notes(keys), store.relabels(keys), store.reviewed(keys)
    found = {a["key"]: (tags.get((a["key"], a["tag"])),
                        getattr(notes.get(a["key"]), "note", None),
                        getattr(relabels.get(a["key"]), "stars", None),
                        getattr(relabels.get(a["key"]), "previous", None),
                        reviewed.get(a["key"], (None,))[0]) for a in acked}
    want = {a["key"]: (WHO, a["note"], a["stars"], a["true"], WHO) for a in acked}
    lost = {k: (found[k], v) for k, v in want.items() if found[k] != v}
    assert lost == {}, f"acknowledged saves lost or changed (found, saved): {lost}"


def restarted_page_agrees(env: dict, store, table) -> None:
    """A new server's Triage tab counts the reviews the store has marked, and saves again."""
    with StreamlitServer(env, ART / "streamlit_cohort_kill_after.log") as srv, \
            StSession(srv.url, timeout=180) as s:
        open_cohorts(s)
        run = open_tab(s, "Triage")
        marked = len(store.reviewed(table["key"].tolist()))
        said = [t for t in run.texts("markdown") if "marked reviewed" in t]
        assert said and re.search(rf"· {marked:,} of {len(table):,} marked reviewed", said[0]), said
        run = save_review(s, "after-the-kills", "the store still writes", 3)
        assert alerts(run, "Saved") and run.errors == [], (run.texts("alert"), run.errors)
        assert len(store.reviewed(table["key"].tolist())) == marked + 1


def kill_while_triaging(tmp_path: Path, url: str) -> None:
    from reviewbert.store import db
    env = {**cohort_env(tmp_path), "REVIEWBERT_DB": url}
    table = cohort_checkpoint(tmp_path, env)
    ART.mkdir(parents=True, exist_ok=True)
    store = db.open_store(url)
    acked: list[dict] = []
    kills: list[dict] = []          # what each kill left of its save (artifacts/browser)
    try:
        for r in range(len(KILLS)):
            one_server(env, table, store, r, acked, kills)
        (ART / f"cohort_kill_{url.split(':')[0]}.json").write_text(json.dumps(kills, indent=1))
        assert len(acked) >= SAVES * len(KILLS)
        db.close_all()
        store = db.open_store(url)
        check_acknowledged(store, acked)
        check_integrity(store, url)
        restarted_page_agrees(env, store, table)
    finally:
        db.close_all()


def test_a_killed_server_loses_no_acknowledged_save_sqlite(tmp_path):
    kill_while_triaging(tmp_path, f"sqlite:///{tmp_path / 'team.db'}")


@pytest.mark.distributed
def test_a_killed_server_loses_no_acknowledged_save_postgres(tmp_path):
    if bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (make distributed installs it)")
    with PostgresServer() as pg:
        kill_while_triaging(tmp_path, pg.url)
