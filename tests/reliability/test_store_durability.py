"""The shared store under kills and crowds: nothing acknowledged is lost, on SQLite and PostgreSQL.

- A writer process adds entries in a loop and prints each id (and text) once
  ``add_entry`` has returned; it is SIGKILLed at a random moment, three times over one
  database. After each kill the store is reopened: every printed id is there with its exact
  text, and SQLite's file passes ``PRAGMA integrity_check``.
- 20 sessions (threads) write entries, tags and notes at once while a teacher's view polls
  ``entries(room, after_id)``: every entry is stored, and the view saw each exactly once,
  in id order (none skipped by a late commit).

The SQLite tests run in ``make test`` (a few seconds each). The PostgreSQL twins, with
four processes migrating a fresh database at once and the hostile texts, carry the
``distributed`` marker (``make distributed``: a throwaway server from
tests/postgres_support.py, a fresh database per test). REVIEWBERT_KILL_SEED picks other
kill moments; the seed is in every failure message. (The file is not named
test_store_db.py: pytest imports test files by their base name, and
tests/unit/test_store_db.py holds that one.)
"""
from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from reviewbert.store import db

from hostile_texts import CORPUS

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("REVIEWBERT_KILL_SEED", "7"))
ROUNDS = 3
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# texts the store keeps exactly as given: the hostile corpus without the control characters
# (stripped by design, tests/unit/test_store_db.py checks that) and the over-long or empty
TEXTS = [h.text for h in CORPUS if not CONTROLS.search(h.text) and h.text.strip()
         and len(h.text) <= db.MAX_TEXT - 10]

WRITER = """
import json, sys
from reviewbert.store.db import open_store
url, texts_file, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = json.load(open(texts_file, encoding="utf-8"))
store = open_store(url)
print("ready", flush=True)
i = start
while True:
    text = f"{texts[i % len(texts)]} #{i}"
    new = store.add_entry("killed", "writer", text, (1, 5), "Robustness", "ckpt", "3 stars",
                          (3, 3), 3.0, False)
    # the acknowledgement: printed only after add_entry returned (the commit is done)
    print(json.dumps({"id": new, "text": text}), flush=True)
    i += 1
"""


def acknowledged(out: Path) -> dict[int, str]:
    """id -> text of every complete line the writer printed (a kill may cut the last)."""
    acks = {}
    for line in out.read_text(encoding="utf-8").splitlines()[1:]:
        try:
            ack = json.loads(line)
        except json.JSONDecodeError:
            continue
        acks[ack["id"]] = ack["text"]
    return acks


def kill_a_writer(url: str, folder: Path, round_: int, rng: random.Random) -> dict[int, str]:
    """Start the writer, SIGKILL it at a random moment once it is writing; its acks."""
    texts, out = folder / "texts.json", folder / f"writer-{round_}.out"
    texts.write_text(json.dumps(TEXTS), encoding="utf-8")
    with open(out, "w", encoding="utf-8") as sink:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, url, str(texts),
                                 str(round_ * 100_000)], cwd=ROOT, stdout=sink,
                                stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while len(out.read_text(encoding="utf-8").splitlines()) < 10:
            assert proc.poll() is None, f"writer died (seed {SEED}): {proc.stderr.read()[-2000:]}"
            assert time.time() < deadline, f"writer never got going (seed {SEED})"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.4))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, SEED)
    return acknowledged(out)


def kill_loop(url: str, folder: Path) -> int:
    """ROUNDS kills over one database; after each, every ack so far is there, verbatim."""
    rng = random.Random(SEED)
    acks: dict[int, str] = {}
    for round_ in range(ROUNDS):
        new = kill_a_writer(url, folder, round_, rng)
        assert len(new) >= 9 and not set(new) & set(acks), (round_, SEED)
        acks.update(new)
        db.close_all()                              # reopen, as a restarted server would
        store = db.open_store(url)
        stored = {e.id: e.text for e in store.entries("killed")}
        lost = {i: t for i, t in acks.items() if stored.get(i) != t}
        assert lost == {}, f"round {round_}, seed {SEED}: lost or changed {list(lost)[:5]}"
        # an entry committed but killed before its line was printed may be there too
        assert len(stored) - len(acks) <= round_ + 1, (len(stored), len(acks), SEED)
    return len(acks)


def sessions_with_a_live_view(url: str, sessions: int = 20, each: int = 25) -> None:
    """``sessions`` threads write at once while a teacher's view polls; nothing is lost or
    skipped, and the tags and notes written alongside are all there."""
    store = db.open_store(url)
    barrier = threading.Barrier(sessions + 1)
    written: dict[int, str] = {}
    errors: list[BaseException] = []
    done = threading.Event()
    seen: list[int] = []

    def session(n: int) -> None:
        try:
            barrier.wait()
            for i in range(each):
                text = f"session {n} entry {i}: it's <b>fine</b> 😡"
                written[store.add_entry("class", f"s{n}", text, (1, 2), "Sarcasm", "ckpt",
                                        "5 stars", (5, 5), 4.6, True)] = text
                store.tag(f"review-{n}-{i}", "sarcasm", author=f"s{n}")
            store.set_note(f"review-{n}-0", f"note by session {n}", author=f"s{n}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def teacher() -> None:
        try:
            barrier.wait()
            while True:
                finished = done.is_set()     # read before the poll: a last poll after it
                seen.extend(e.id for e in store.entries("class", after_id=seen[-1] if seen else 0))
                if finished:
                    return
                time.sleep(0.005)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(sessions)]
    view = threading.Thread(target=teacher)
    for t in [*threads, view]:
        t.start()
    for t in threads:
        t.join(300)
    done.set()
    view.join(60)
    assert errors == [], errors[:3]
    assert len(written) == sessions * each
    assert {e.id: e.text for e in store.entries("class")} == written
    assert seen == sorted(written), "the live view skipped or repeated entries"
    assert len(store.tags()) == sessions * each
    assert len(store.notes()) == sessions


# ------------------------------------------------------------------ SQLite (make test)
def test_sqlite_a_killed_writer_loses_nothing_acknowledged(tmp_path):
    path = tmp_path / "store.db"
    try:
        assert kill_loop(f"sqlite:///{path}", tmp_path) >= ROUNDS * 9
    finally:
        db.close_all()
    with sqlite3.connect(path) as raw:
        assert raw.execute("pragma integrity_check").fetchall() == [("ok",)]
        assert raw.execute("pragma journal_mode").fetchall() == [("wal",)]


def test_sqlite_twenty_sessions_and_a_live_view_lose_nothing(tmp_path):
    try:
        sessions_with_a_live_view(f"sqlite:///{tmp_path / 'store.db'}")
    finally:
        db.close_all()


# ------------------------------------------------------------------ PostgreSQL (make distributed)
@pytest.mark.distributed
def test_postgres_a_killed_writer_loses_nothing_acknowledged(pg_url, tmp_path):
    assert kill_loop(pg_url, tmp_path) >= ROUNDS * 9


@pytest.mark.distributed
def test_postgres_twenty_sessions_and_a_live_view_lose_nothing(pg_url):
    sessions_with_a_live_view(pg_url)


def process_writer(url: str, n: int, count: int, barrier) -> None:
    """A spawned process: opens the fresh store when all the others do, writes ``count``."""
    barrier.wait()
    store = db.open_store(url)
    for i in range(count):
        store.add_entry("class", f"p{n}", f"process {n} entry {i}", (1, 5), "Other", "", "",
                        (3, 3), 3.0, False)


@pytest.mark.distributed
def test_postgres_four_processes_migrate_a_fresh_database_once(pg_url):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    workers = [context.Process(target=process_writer, args=(pg_url, n, 50, barrier))
               for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(180)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    store = db.open_store(pg_url)
    assert store.schema_version() == db.SCHEMA_HEAD
    entries = store.entries("class")
    assert len({e.id for e in entries}) == 200
    assert {e.text for e in entries} == {f"process {n} entry {i}" for n in range(4)
                                         for i in range(50)}


@pytest.mark.distributed
def test_postgres_keeps_hostile_texts_as_sqlite_does(pg_url):
    store = db.open_store(pg_url)
    stored = {}
    for hostile in CORPUS:
        expected = CONTROLS.sub("", hostile.text)      # NUL too: PostgreSQL cannot hold it
        if expected.strip() and len(expected) <= db.MAX_TEXT:
            new = store.add_entry("hostile", hostile.name[:80], hostile.text, (1, 5), "Other",
                                  "", "", (3, 3), 3.0, False)
            stored[new] = expected
    assert {e.id: e.text for e in store.entries("hostile")} == stored
    store.set_note("k", "before\x00after 'quoted' <b>")
    assert store.note("k") == "beforeafter 'quoted' <b>"


@pytest.mark.distributed
def test_postgres_refuses_a_newer_schema(pg_url):
    db.open_store(pg_url)
    db.close_all()
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"UPDATE {db.VERSION_TABLE} SET version_num = '0009'")
    engine.dispose()
    with pytest.raises(db.StoreError, match=r"newer ReviewBERT \(schema 0009\); this one knows "
                                            rf"up to {db.SCHEMA_HEAD}"):
        db.open_store(pg_url)
