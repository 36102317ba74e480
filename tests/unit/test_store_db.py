"""The shared store (reviewbert/store/db.py) on SQLite files in tmp_path.

Round trips of hostile texts, the limits and their one-line errors, the schema version and
migrations from the previous ones, the refusal of a newer schema, bad URLs (no password
shown), relabels and reviewed marks, and concurrent writers: 20 threads and 4 processes,
nothing lost. The relabel, mark and migration tests have PostgreSQL twins under the
``distributed`` marker (``make distributed``: a throwaway server from
tests/postgres_support.py, a fresh database per test).
"""
from __future__ import annotations

import multiprocessing
import re
import socket
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from reviewbert.store import db

from hostile_texts import CORPUS

ENTRY = dict(author="ann", stars=(1, 2), capability="Negation", checkpoint="checkpoints/demo",
             pred_label="4 stars", pred_stars=(4, 4), e_stars=3.8, fooled=True)
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@pytest.fixture(autouse=True)
def _fresh_engines():
    """Each test opens its own files; engines are closed after it (no file left open)."""
    yield
    db.close_all()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def add(store, text, room="r1", **kw) -> int:
    return store.add_entry(room, text=text, **{**ENTRY, **kw})


def one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(db.StoreError) as info:
        fn(*args, **kw)
    message = str(info.value)
    assert message and "\n" not in message, repr(message)
    return message


# ------------------------------------------------------------------ where and values
def test_database_url_is_the_variable_else_a_file_in_the_cache_base(monkeypatch, tmp_path):
    monkeypatch.delenv(db.DB_ENV, raising=False)
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "base"))
    assert db.database_url() == f"sqlite:///{tmp_path / 'base' / 'reviewbert.db'}"
    monkeypatch.delenv("REVIEWBERT_CACHE")
    assert db.database_url() == f"sqlite:///{Path.home() / '.cache' / 'reviewbert' / 'reviewbert.db'}"
    monkeypatch.setenv(db.DB_ENV, "postgresql://rb@db.example/reviewbert")
    assert db.database_url() == "postgresql://rb@db.example/reviewbert"


def test_open_store_without_a_url_makes_the_default_file_and_its_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(db.DB_ENV, raising=False)
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "new" / "base"))
    store = db.open_store()
    add(store, "Default place.")
    assert (tmp_path / "new" / "base" / "reviewbert.db").is_file()
    assert db.open_store() is store                       # one engine per URL


def test_hostile_texts_come_back_verbatim_or_are_refused_in_one_line(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    stored = {}
    for hostile in CORPUS:
        expected = CONTROLS.sub("", hostile.text)      # the one documented change
        if expected.strip() and len(expected) <= db.MAX_TEXT:
            stored[add(store, hostile.text, author=hostile.name[:80])] = (expected, hostile.name)
        else:
            message = one_line_error(add, store, hostile.text)
            assert "empty" in message or "5,000" in message, (hostile.name, message)
    got = {e.id: (e.text, e.author) for e in store.entries("r1")}
    assert got == stored
    assert len(stored) >= len(CORPUS) - 4             # only empty and over-long ones refused
    nul = next(e for e in store.entries("r1") if e.author == "control characters and NUL")
    assert nul.text == "beforeNUL [31mPWN[0m  after"


def test_names_keep_quotes_and_emoji_and_an_entry_keeps_every_field(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    room = "Robert'); DROP TABLE fool_entries;-- 😀"
    new = store.add_entry(room, "O'Brien \"the\" <b>", "5/5 would buy", (4, 5), "Explicit",
                          "/ckpt/x", "5 stars", (5, 5), 4.75, False)
    (entry,) = store.entries(room)
    assert (entry.id, entry.room, entry.author, entry.text) == (new, room, "O'Brien \"the\" <b>",
                                                                "5/5 would buy")
    assert (entry.stars, entry.pred_stars, entry.e_stars, entry.fooled) == ((4, 5), (5, 5), 4.75,
                                                                            False)
    assert (entry.capability, entry.checkpoint, entry.pred_label) == ("Explicit", "/ckpt/x",
                                                                      "5 stars")
    assert entry.created.tzinfo is not None
    with pytest.raises(AttributeError):
        entry.text = "changed"                            # frozen
    assert store.rooms() == [room] and store.entry(new) == entry


@pytest.mark.parametrize("change, words", [
    (dict(text="x" * 5_001), "5,000"),
    (dict(text=" \n\t "), "text is empty"),
    (dict(text="\x00\x01"), "text is empty"),
    (dict(text="lone \ud800 surrogate"), "Unicode"),
    (dict(author="a" * 81), "author"),
    (dict(room="r" * 81), "room"),
    (dict(room=""), "room is empty"),
    (dict(room="a\x00b"), "control"),
    (dict(capability="c" * 81), "capability"),
    (dict(stars=(4, 2)), "min <= max"),
    (dict(stars=(0, 5)), "stars 1-5"),
    (dict(stars=(1.5, 2)), "whole stars"),
    (dict(pred_stars="5"), "pred_stars"),
    (dict(e_stars=float("nan")), "e_stars"),
    (dict(e_stars=5.1), "e_stars"),
    (dict(fooled="yes"), "fooled"),
])
def test_bad_values_are_refused_in_one_line_and_nothing_is_stored(tmp_path, change, words):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    args = {**ENTRY, "room": "r1", "text": "fine", **change}
    assert words in one_line_error(store.add_entry, **args)
    assert store.rooms() == []


def test_the_limits_themselves_are_allowed(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    new = store.add_entry("r" * 80, "a" * 80, "x" * 5_000, (1, 5), "c" * 80, "", "", (1, 1), 1.0,
                          False)
    assert store.entry(new).text == "x" * 5_000
    sure = store.add_entry("r", "a", "t", (5, 5), "c", "", "", (5, 5), 5.0000005, False)
    assert store.entry(sure).e_stars == 5.0            # float32 rounding is not an error
    assert store.tag("k" * 200, "t" * 40) and store.tags() == {"k" * 200: ["t" * 40]}
    store.set_note("k", "n" * 5_000)
    assert store.note("k") == "n" * 5_000
    assert "tag" in one_line_error(store.tag, "k", "t" * 41)
    assert "note" in one_line_error(store.set_note, "k", "n" * 5_001)
    assert "review key" in one_line_error(store.tag, "k" * 201, "t")


# ------------------------------------------------------------------ entries, tags, notes
def test_entries_after_an_id_are_in_id_order_per_room_and_ids_are_never_reused(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    ids = [add(store, f"entry {i}", room="a" if i % 2 else "b") for i in range(10)]
    a = [e.id for e in store.entries("a")]
    assert a == sorted(a) == ids[1::2]
    assert [e.id for e in store.entries("a", after_id=a[2])] == a[3:]
    assert [e.id for e in store.entries("a", limit=2)] == a[:2]
    assert store.rooms() == ["a", "b"] and store.entries("nobody") == []
    assert store.delete_entry(ids[-1]) and not store.delete_entry(ids[-1])
    # a view that had polled past the deleted last id still sees the next entry
    assert add(store, "after the delete") > ids[-1]
    assert "after_id" in one_line_error(store.entries, "a", after_id="3; DROP TABLE x")
    assert "entry id" in one_line_error(store.delete_entry, -1)


def test_tags_and_notes(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    assert store.tag("r1", "sarcasm", author="ann") is True
    assert store.tag("r1", "sarcasm", author="bob") is False        # once per review
    keys = [f"review-{i}" for i in range(1_200)]                     # more than one IN list
    assert store.tag_many(keys + ["r1"], "label noise", author="bob") == 1_201
    assert store.tag_many(keys[:10], "label noise") == 0
    tags = store.tags()
    assert tags["r1"] == ["label noise", "sarcasm"] and len(tags) == 1_201
    assert store.tags(["r1", "review-7", "untagged"]) == {"r1": ["label noise", "sarcasm"],
                                                         "review-7": ["label noise"]}
    (first,) = [t for t in store.tag_records(["r1"]) if t.tag == "sarcasm"]
    assert first.author == "ann" and first.created.tzinfo is not None
    assert store.untag("r1", "sarcasm") and not store.untag("r1", "sarcasm")
    assert store.note("r1") is None
    store.set_note("r1", "Refers to the seller <b>'; --\x00", author="ann")
    store.set_note("r1", "Refers to the seller, not the phone.", author="bob")
    assert store.note("r1") == "Refers to the seller, not the phone."
    assert store.notes()["r1"].author == "bob"
    store.set_note("r1", "   ")                                       # blank removes it
    assert store.note("r1") is None and store.notes() == {}
    assert "note must be text" in one_line_error(store.set_note, "r1", 5)
    assert "not one text" in one_line_error(store.tag_many, "review-1", "sarcasm")


def relabels_and_marks_round_trip(store) -> None:
    """Relabels and reviewed marks, written and read back, on any backend."""
    assert store.relabels() == {} and store.reviewed() == {}
    assert store.relabel("r1", 1, previous=4, author="ann") is True
    (first,) = store.relabels().values()
    assert (first.key, first.stars, first.previous, first.author) == ("r1", 1, 4, "ann")
    assert first.updated.tzinfo is not None
    # a second reviewer changes it: the data's stars stay those of the first relabel
    assert store.relabel("r1", 2, previous=1, author="bob") is True
    again = store.relabels(["r1", "never"])["r1"]
    assert (again.stars, again.previous, again.author) == (2, 4, "bob")
    assert again.updated >= first.updated
    assert store.relabel("r1", 4, previous=2) is False        # back to the data's: removed
    assert store.relabels() == {}
    assert store.relabel("r2", 3, previous=3) is False and store.relabels() == {}
    assert store.relabel("r2", np.int64(5), np.int16(1), author="ann")   # numpy's integers
    assert store.relabels()["r2"].stars == 5
    assert store.unrelabel("r2") and not store.unrelabel("r2")
    # the database itself refuses a "relabel" to the same stars or out of range
    for stars, previous in ((3, 3), (0, 2), (6, 2)):
        with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as connection:
            connection.execute(db.REVIEW_LABELS.insert().values(
                review_key="raw", stars=stars, previous=previous, author="", updated=db._now()))

    keys = [f"review-{i}" for i in range(1_200)]                     # more than one IN list
    assert store.mark_reviewed(keys + ["r1"], author="ann") == 1_201
    assert store.mark_reviewed(["r1", "new", "new"], author="bob") == 1
    marked = store.reviewed(["r1", "new", "unmarked"])
    assert {k: who for k, (who, _) in marked.items()} == {"r1": "ann", "new": "bob"}
    assert marked["r1"][1].tzinfo is not None and len(store.reviewed()) == 1_202
    assert store.unmark_reviewed("r1") and not store.unmark_reviewed("r1")
    store.tag("r1", "reviewed")                       # a tag of that name is not the mark
    assert "r1" not in store.reviewed() and store.tags(["r1"]) == {"r1": ["reviewed"]}
    store.tag("r9", "sarcasm")
    assert store.tag_names() == ["reviewed", "sarcasm"]


def test_relabels_and_reviewed_marks(tmp_path):
    relabels_and_marks_round_trip(db.open_store(sqlite_url(tmp_path / "s.db")))


BAD_TRIAGE = {
    "stars 0": (lambda s: s.relabel("k", 0, 3), "stars must be whole stars 1-5, got 0"),
    "stars 6": (lambda s: s.relabel("k", 6, 3), "stars must be whole stars 1-5"),
    "fractional stars": (lambda s: s.relabel("k", 2.0, 3), "whole stars"),
    "stars as text": (lambda s: s.relabel("k", "2", 3), "whole stars"),
    "stars as a bool": (lambda s: s.relabel("k", True, 3), "whole stars"),
    "no previous": (lambda s: s.relabel("k", 2, None), "previous stars"),
    "previous 9": (lambda s: s.relabel("k", 2, 9), "previous stars"),
    "empty key": (lambda s: s.relabel(" ", 2, 3), "review key is empty"),
    "NUL in the key": (lambda s: s.relabel("k\x00", 2, 3), "control characters"),
    "long key": (lambda s: s.relabel("k" * 201, 2, 3), "the most is 200"),
    "long author": (lambda s: s.relabel("k", 2, 3, author="a" * 81), "author"),
    "surrogate key": (lambda s: s.relabel("lone \ud800", 2, 3), "Unicode"),
    "one bad key of many": (lambda s: s.mark_reviewed(["ok", "bad\nkey"]), "control characters"),
    "one text, not keys": (lambda s: s.mark_reviewed("one-key"), "not one text"),
    "a number as key": (lambda s: s.mark_reviewed(["ok", 5]), "review key must be text"),
    "surrogate author": (lambda s: s.mark_reviewed(["ok"], author="\ud800"), "Unicode"),
    "unmark a long key": (lambda s: s.unmark_reviewed("k" * 201), "the most is 200"),
    "unrelabel no key": (lambda s: s.unrelabel(None), "review key must be text"),
}


def bad_triage_values_are_refused(store) -> None:
    store.relabel("kept", 2, 5, author="ann")
    for name, (call, words) in BAD_TRIAGE.items():
        message = one_line_error(call, store)
        assert words in message, (name, message)
    assert list(store.relabels()) == ["kept"] and store.reviewed() == {}


def test_bad_relabels_and_marks_are_refused_in_one_line_and_nothing_is_stored(tmp_path):
    bad_triage_values_are_refused(db.open_store(sqlite_url(tmp_path / "s.db")))


# ------------------------------------------------------------------ schema and migrations
def test_the_schema_is_at_the_head_and_matches_the_code(tmp_path):
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    assert store.schema_version() == "0003" == db.SCHEMA_HEAD
    assert db.known_revisions() == ("0001", "0002", "0003")
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": db.VERSION_TABLE})
        diff = compare_metadata(context, db.METADATA)
    assert diff == []                       # the migrations build what the code queries


def alembic_config(connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def test_a_database_at_the_previous_version_is_upgraded_with_its_entries(tmp_path):
    path = tmp_path / "old.db"
    engine = sa.create_engine(sqlite_url(path))
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0001")
    raw = sqlite3.connect(path)
    assert {r[0] for r in raw.execute("select name from sqlite_master where type='table'")} >= \
        {"fool_entries", db.VERSION_TABLE}
    assert not raw.execute("select name from sqlite_master where name='review_tags'").fetchall()
    for text in ["old one", "old <b>two</b> 'quoted'"]:
        raw.execute("insert into fool_entries (room, author, text, min_stars, max_stars, "
                    "capability, checkpoint, pred_label, pred_min, pred_max, e_stars, fooled, "
                    "created) values ('class', 'ann', ?, 1, 2, 'Negation', 'ck', '5 stars', 5, 5,"
                    " 4.9, 1, '2025-01-02 03:04:05.000000')", (text,))
    raw.commit()
    raw.close()
    engine.dispose()

    store = db.open_store(sqlite_url(path))
    assert store.schema_version() == db.SCHEMA_HEAD
    old = store.entries("class")
    assert [(e.id, e.text, e.fooled, e.stars) for e in old] == [
        (1, "old one", True, (1, 2)), (2, "old <b>two</b> 'quoted'", True, (1, 2))]
    assert old[0].created.year == 2025
    assert store.tag("review-1", "sarcasm") and store.tags() == {"review-1": ["sarcasm"]}
    store.set_note("review-1", "new table works")
    assert store.note("review-1") == "new table works"
    assert add(store, "new one", room="class") == 3


def upgrade_from_0002_keeps_tags_and_notes(url: str) -> None:
    """A database written by the previous version (tags and a note) opened by this one."""
    engine = sa.create_engine(url)
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0002")
        assert not sa.inspect(connection).has_table("review_labels")
        connection.execute(db.REVIEW_TAGS.insert(), [
            dict(review_key=k, tag=t, author="ann", created=when)
            for k, t in (("t1:a", "sarcasm"), ("t1:a", "label-noise"), ("t1:b", "other 'x'"))])
        connection.execute(db.REVIEW_NOTES.insert().values(
            review_key="t1:a", note="old note <b>", author="bob", updated=when))
    engine.dispose()

    store = db.open_store(url)
    assert store.schema_version() == "0003"
    assert store.tags() == {"t1:a": ["label-noise", "sarcasm"], "t1:b": ["other 'x'"]}
    assert {t.created for t in store.tag_records()} == {when}
    assert store.notes()["t1:a"] == db.Note("t1:a", "old note <b>", "bob", when)
    assert store.relabel("t1:a", 1, 5, author="ann") and store.mark_reviewed(["t1:a"]) == 1
    assert store.relabels()["t1:a"].stars == 1 and list(store.reviewed()) == ["t1:a"]


def test_a_database_at_0002_is_upgraded_to_0003_keeping_its_tags_and_notes(tmp_path):
    upgrade_from_0002_keeps_tags_and_notes(sqlite_url(tmp_path / "at-0002.db"))


def test_a_newer_schema_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "s.db"
    add(db.open_store(sqlite_url(path)), "kept")
    db.close_all()
    raw = sqlite3.connect(path)
    raw.execute(f"update {db.VERSION_TABLE} set version_num = '0007'")
    raw.commit()
    raw.close()
    message = one_line_error(db.open_store, sqlite_url(path))
    assert "was written by a newer ReviewBERT (schema 0007); this one knows up to 0003" in message
    raw = sqlite3.connect(path)
    assert raw.execute(f"select version_num from {db.VERSION_TABLE}").fetchall() == [("0007",)]
    assert raw.execute("select text from fool_entries").fetchall() == [("kept",)]
    raw.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bad_urls(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (url, words its message must hold)."""
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "garbage.db").write_bytes(b"this is not a database " * 200)
    (tmp_path / "folder.db").mkdir()
    return {
        "not a URL": ("not a url at all", "not a database URL"),
        "another database": ("mysql://rb:s3cret-pw@db.example/x", "not 'mysql'"),
        "in memory": ("sqlite://", "in-memory"),
        "in memory by name": ("sqlite:///:memory:", "in-memory"),
        "unreachable server": (f"postgresql://rb:s3cret-pw@127.0.0.1:{closed_port()}/x",
                               "cannot open the store at postgresql://rb:***@127.0.0.1"),
        "folder under a file": (sqlite_url(tmp_path / "a-file" / "sub" / "s.db"),
                                "cannot make the folder"),
        "not a database": (sqlite_url(tmp_path / "garbage.db"), "file is not a database"),
        "a folder": (sqlite_url(tmp_path / "folder.db"), "unable to open database file"),
    }


@pytest.mark.parametrize("name", ["not a URL", "another database", "in memory",
                                  "in memory by name", "unreachable server",
                                  "folder under a file", "not a database", "a folder"])
def test_bad_urls_give_one_line_without_the_password(tmp_path, name):
    url, words = bad_urls(tmp_path)[name]
    message = one_line_error(db.open_store, url)
    assert words in message and "s3cret" not in message, message
    assert "Traceback" not in message and "[SQL:" not in message


def test_mask_hides_passwords_even_in_urls_that_do_not_parse():
    assert db.mask("postgresql://rb:pw@h:5432/d") == "postgresql://rb:***@h:5432/d"
    assert "pw" not in db.mask("postgresql://rb:pw@h:notaport/d")


# ------------------------------------------------------------------ concurrency
def test_twenty_threads_opening_and_writing_at_once_lose_nothing(tmp_path):
    url = sqlite_url(tmp_path / "s.db")
    barrier = threading.Barrier(20)
    ids: dict[int, str] = {}
    errors: list[BaseException] = []
    stores = set()

    def session(n: int) -> None:
        try:
            barrier.wait()
            store = db.open_store(url)           # 20 sessions open a fresh database at once
            stores.add(id(store))
            for i in range(25):
                text = f"session {n} entry {i} 'é' 😡"
                ids[add(store, text, room="class", author=f"s{n}")] = text
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and len(stores) == 1
    assert len(ids) == 500                      # 500 distinct ids
    got = {e.id: e.text for e in db.open_store(url).entries("class")}
    assert got == ids


def threads_tag_relabel_and_mark(url: str, sessions: int = 20, per: int = 8) -> None:
    """``sessions`` threads open the store at once; each tags, relabels and marks its own
    reviews and all fight over one shared review; nothing is lost."""
    barrier = threading.Barrier(sessions)
    errors: list[BaseException] = []

    def session(n: int) -> None:
        try:
            barrier.wait()
            store = db.open_store(url)
            keys = [f"s{n}-r{i}" for i in range(per)]
            store.tag_many(keys + ["shared"], "label-noise", author=f"s{n}")
            for i, key in enumerate(keys):
                store.tag(key, f"t{n}", author=f"s{n}")
                store.relabel(key, 1 + (n + i) % 4, previous=5, author=f"s{n}")
                store.relabel("shared", 1 + n % 4, previous=5, author=f"s{n}")
            store.mark_reviewed(keys + ["shared"], author=f"s{n}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert errors == []
    store = db.open_store(url)
    tags = store.tags()
    assert tags.pop("shared") == ["label-noise"]
    assert tags == {f"s{n}-r{i}": sorted(["label-noise", f"t{n}"])
                    for n in range(sessions) for i in range(per)}
    relabels = store.relabels()
    shared = relabels.pop("shared")
    assert shared.previous == 5 and 1 <= shared.stars <= 4 and shared.author.startswith("s")
    assert {k: (r.stars, r.previous, r.author) for k, r in relabels.items()} == {
        f"s{n}-r{i}": (1 + (n + i) % 4, 5, f"s{n}") for n in range(sessions) for i in range(per)}
    assert len(store.reviewed()) == sessions * per + 1


def test_twenty_threads_tagging_relabelling_and_marking_at_once_lose_nothing(tmp_path):
    threads_tag_relabel_and_mark(sqlite_url(tmp_path / "s.db"))


def process_writer(url: str, n: int, count: int, barrier) -> None:
    """A spawned process: opens the (fresh) store when all the others do, writes ``count``."""
    barrier.wait()
    store = db.open_store(url)
    for i in range(count):
        add(store, f"process {n} entry {i}", room="class", author=f"p{n}")


def test_four_processes_opening_a_fresh_database_and_writing_lose_nothing(tmp_path):
    url = sqlite_url(tmp_path / "fresh" / "s.db")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    workers = [context.Process(target=process_writer, args=(url, n, 50, barrier))
               for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    store = db.open_store(url)
    entries = store.entries("class")
    assert len(entries) == 200 and len({e.id for e in entries}) == 200
    assert {e.text for e in entries} == {f"process {n} entry {i}" for n in range(4)
                                         for i in range(50)}
    assert store.schema_version() == db.SCHEMA_HEAD


def test_every_sqlite_connection_waits_for_writers_and_syncs_each_commit(tmp_path):
    """What the durability rests on: WAL, a sync at every commit (FULL, so an acknowledged
    entry survives a power cut, which a kill test cannot show), and a busy timeout."""
    store = db.open_store(sqlite_url(tmp_path / "s.db"))
    with store.engine.connect() as connection:
        pragma = {name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                  for name in ("journal_mode", "synchronous", "busy_timeout")}
    assert pragma == {"journal_mode": "wal", "synchronous": 2, "busy_timeout": db.BUSY_TIMEOUT_MS}


# ------------------------------------------------------------------ PostgreSQL (make distributed)
@pytest.mark.distributed
def test_postgres_schema_is_at_the_head_and_matches_the_code(pg_url):
    store = db.open_store(pg_url)
    assert store.schema_version() == db.SCHEMA_HEAD
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": db.VERSION_TABLE})
        assert compare_metadata(context, db.METADATA) == []


@pytest.mark.distributed
def test_postgres_a_database_at_0002_is_upgraded_to_0003_keeping_its_tags_and_notes(pg_url):
    upgrade_from_0002_keeps_tags_and_notes(pg_url)


@pytest.mark.distributed
def test_postgres_relabels_and_reviewed_marks(pg_url):
    relabels_and_marks_round_trip(db.open_store(pg_url))


@pytest.mark.distributed
def test_postgres_refuses_bad_relabels_and_marks_in_one_line_storing_nothing(pg_url):
    bad_triage_values_are_refused(db.open_store(pg_url))


@pytest.mark.distributed
def test_postgres_twenty_threads_tagging_relabelling_and_marking_lose_nothing(pg_url):
    threads_tag_relabel_and_mark(pg_url)
