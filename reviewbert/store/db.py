"""The shared store: Fool the model's entries and the reviews' tags and notes, in one database.

One database, reached through SQLAlchemy, holds what many sessions write at once:

- ``fool_entries``: each review a student wrote to fool the model, with the stars they
  meant and the model's answer (the class's MFT cases);
- ``review_tags`` and ``review_notes``: triage tags and a note on any review (the
  failing-cohorts issue), each with who and when;
- ``review_labels`` and ``review_marks``: the stars a reviewer corrected a review to
  (beside the stars the data had), and the reviews marked as reviewed, each with who and when.

Where: ``$REVIEWBERT_DB`` (``sqlite:///PATH`` or ``postgresql://USER@HOST/DB``), else the
SQLite file ``<base>/reviewbert.db`` with base = ``$REVIEWBERT_CACHE`` or
``~/.cache/reviewbert`` (the base of ``reviewbert.store.location``).

The schema is versioned by Alembic (reviewbert/store/migrations/); :func:`open_store`
migrates a database to the newest revision once per process and URL, and refuses one
written by a newer ReviewBERT. Its version table is ``reviewbert_alembic_version``, not
Alembic's default: Optuna keeps its own ``alembic_version``, and a team may point both the
search's storage and this store at one PostgreSQL database.

What a caller may rely on:

- every write is one transaction; :meth:`Store.add_entry` returns the new id only after the
  commit, and SQLite runs with ``synchronous=FULL`` in WAL mode, so an acknowledged entry
  survives the process being killed at any moment;
- writers wait for each other (SQLite's busy timeout, PostgreSQL's row locks) instead of
  failing, and ids within a room become visible in id order, so the teacher's view, which
  polls ``entries(room, after_id)``, never skips one;
- every failure is a :class:`StoreError` with a one-line message that never shows a
  password; texts are always bound parameters, stored and returned verbatim except for the
  control characters named in :func:`clean_text`.
"""
from __future__ import annotations

import functools
import hashlib
import math
import numbers
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event

from reviewbert.store.location import BASE_ENV

DB_ENV = "REVIEWBERT_DB"
SCHEMA_HEAD = "0003"
"""The newest schema revision this code knows (tests check it is the migrations' head)."""
VERSION_TABLE = "reviewbert_alembic_version"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"

MAX_TEXT = 5_000            # an entry's review text
MAX_NOTE = 5_000
MAX_NAME = 80               # author, room, capability, predicted label
MAX_TAG = 40
MAX_MARK = 40
MAX_KEY = 200               # a review key (the failing-cohorts issue's id of a review)
MAX_CHECKPOINT = 1_000      # a checkpoint's path
BUSY_TIMEOUT_MS = 60_000    # how long a SQLite writer waits for the others before failing
CHUNK = 500                 # keys per IN (...) list: SQLite and psycopg cap bound parameters
_WRITE = "reviewbert_write"
_MIGRATION_LOCK = 0x5245_5649_4557          # pg_advisory lock key of the migrations


class StoreError(RuntimeError):
    """The store cannot be opened, or a value cannot be stored; the message is one line."""


# ---------------------------------------------------------------------------- the schema
METADATA = sa.MetaData()
FOOL_ENTRIES = sa.Table(
    "fool_entries", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("room", sa.String(MAX_NAME), nullable=False),
    sa.Column("author", sa.String(MAX_NAME), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("min_stars", sa.SmallInteger, nullable=False),
    sa.Column("max_stars", sa.SmallInteger, nullable=False),
    sa.Column("capability", sa.String(MAX_NAME), nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=False),
    sa.Column("pred_label", sa.String(MAX_NAME), nullable=False),
    sa.Column("pred_min", sa.SmallInteger, nullable=False),
    sa.Column("pred_max", sa.SmallInteger, nullable=False),
    sa.Column("e_stars", sa.Float, nullable=False),
    sa.Column("fooled", sa.Boolean, nullable=False),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_fool_entries_room_id", "room", "id"),
    # AUTOINCREMENT: SQLite would otherwise give a deleted last id to the next entry, and
    # a teacher's view that had polled past it would never show the new one
    sqlite_autoincrement=True,
)
REVIEW_TAGS = sa.Table(
    "review_tags", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("review_key", sa.String(MAX_KEY), nullable=False),
    sa.Column("tag", sa.String(MAX_TAG), nullable=False),
    sa.Column("author", sa.String(MAX_NAME), nullable=False),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("review_key", "tag", name="uq_review_tags_key_tag"),
    sa.Index("ix_review_tags_tag", "tag"),
)
REVIEW_NOTES = sa.Table(
    "review_notes", METADATA,
    sa.Column("review_key", sa.String(MAX_KEY), primary_key=True),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("author", sa.String(MAX_NAME), nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
)
REVIEW_LABELS = sa.Table(
    "review_labels", METADATA,
    sa.Column("review_key", sa.String(MAX_KEY), primary_key=True),
    sa.Column("stars", sa.SmallInteger, nullable=False),
    sa.Column("previous", sa.SmallInteger, nullable=False),
    sa.Column("author", sa.String(MAX_NAME), nullable=False),
    sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    # the database refuses impossible stars too, should anything but this module write
    sa.CheckConstraint("stars BETWEEN 1 AND 5 AND previous BETWEEN 1 AND 5 "
                       "AND stars <> previous", name="ck_review_labels_stars"),
)
REVIEW_MARKS = sa.Table(
    "review_marks", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("review_key", sa.String(MAX_KEY), nullable=False),
    sa.Column("mark", sa.String(MAX_MARK), nullable=False),
    sa.Column("author", sa.String(MAX_NAME), nullable=False),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("review_key", "mark", name="uq_review_marks_key_mark"),
    sa.Index("ix_review_marks_mark", "mark"),
)
REVIEWED = "reviewed"
"""The one mark so far: a person has looked at the review in the triage queue."""


@dataclass(frozen=True)
class Entry:
    """One Fool-the-model entry, as stored."""

    id: int
    room: str
    author: str
    text: str
    min_stars: int
    max_stars: int
    capability: str
    checkpoint: str
    pred_label: str
    pred_min: int
    pred_max: int
    e_stars: float
    fooled: bool
    created: datetime                   # UTC

    @property
    def stars(self) -> tuple[int, int]:
        return (self.min_stars, self.max_stars)

    @property
    def pred_stars(self) -> tuple[int, int]:
        return (self.pred_min, self.pred_max)


@dataclass(frozen=True)
class Tag:
    """One tag on one review: who put it there and when."""

    review_key: str
    tag: str
    author: str
    created: datetime


@dataclass(frozen=True)
class Note:
    """The note on one review: who wrote it last and when."""

    review_key: str
    note: str
    author: str
    updated: datetime


@dataclass(frozen=True)
class Relabel:
    """The stars a reviewer gave one review instead of the data's (``previous``)."""

    key: str
    stars: int
    previous: int
    author: str
    updated: datetime


# ---------------------------------------------------------------------------- values
# C0 and C1 control characters and DEL, except tab, newline and carriage return (line
# breaks as pasted from Windows or old Macs stay as typed)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(value, field: str, limit: int) -> str:
    """A review text or note as it will be stored: control characters are STRIPPED (pasted
    reviews carry stray ones from PDFs and terminals, and PostgreSQL cannot store NUL at
    all, so both backends keep the same text); everything else verbatim. StoreError when
    nothing readable is left, when it is longer than ``limit`` or not valid Unicode."""
    if not isinstance(value, str):
        raise StoreError(f"{field} must be text, got {type(value).__name__}")
    if _SURROGATE.search(value):
        raise StoreError(f"{field} is not valid Unicode (it holds a lone surrogate)")
    value = _CONTROL.sub("", value)
    if not value.strip():
        raise StoreError(f"{field} is empty")
    if len(value) > limit:
        raise StoreError(f"{field} is {len(value):,} characters long; the most is {limit:,}")
    return value


def clean_name(value, field: str, limit: int = MAX_NAME, empty_ok: bool = False) -> str:
    """A short one-line name (room, author, capability, tag, review key), stripped of
    surrounding blanks. Control characters are REJECTED here, not stripped: these are keys
    and labels typed into one-line boxes, and stripping would silently make two different
    names one."""
    if not isinstance(value, str):
        raise StoreError(f"{field} must be text, got {type(value).__name__}")
    value = value.strip()
    if _CONTROL.search(value) or "\n" in value or "\t" in value or "\r" in value:
        raise StoreError(f"{field} {value[:40]!r} holds control characters")
    if _SURROGATE.search(value):
        raise StoreError(f"{field} is not valid Unicode (it holds a lone surrogate)")
    if not value and not empty_ok:
        raise StoreError(f"{field} is empty")
    if len(value) > limit:
        raise StoreError(f"{field} is {len(value):,} characters long; the most is {limit:,}")
    return value


def _stars(value, field: str) -> tuple[int, int]:
    try:
        low, high = value
    except (TypeError, ValueError):
        raise StoreError(f"{field} must be a pair (min, max) of stars 1-5, got {value!r}"[:200]) \
            from None
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in (low, high)):
        raise StoreError(f"{field} must be whole stars 1-5, got {value!r}"[:200])
    low, high = int(low), int(high)
    if not (1 <= low <= high <= 5):
        raise StoreError(f"{field} must be stars 1-5 with min <= max, got ({low}, {high})")
    return low, high


def _e_stars(value) -> float:
    try:
        e = float(value)
    except (TypeError, ValueError):
        raise StoreError(f"e_stars must be a number, got {value!r}"[:200]) from None
    # float32 probabilities sum to 1 only within rounding: a sure 5 may come out 5.0000005
    if not (math.isfinite(e) and 1.0 - 1e-3 <= e <= 5.0 + 1e-3):
        raise StoreError(f"e_stars must be an expected rating 1-5, got {e}")
    return min(max(e, 1.0), 5.0)


def _entry_row(room, author, text, stars, capability, checkpoint, pred_label, pred_stars,
               e_stars, fooled) -> dict:
    if not (isinstance(fooled, bool) or type(fooled).__name__ == "bool_"):   # numpy's too
        raise StoreError(f"fooled must be true or false, got {fooled!r}"[:200])
    (low, high), (p_low, p_high) = _stars(stars, "stars"), _stars(pred_stars, "pred_stars")
    return dict(room=clean_name(room, "room"), author=clean_name(author, "author", empty_ok=True),
                text=clean_text(text, "text", MAX_TEXT), min_stars=low, max_stars=high,
                capability=clean_name(capability, "capability"),
                checkpoint=clean_name(checkpoint, "checkpoint", MAX_CHECKPOINT, empty_ok=True),
                pred_label=clean_name(pred_label, "pred_label", empty_ok=True),
                pred_min=p_low, pred_max=p_high, e_stars=_e_stars(e_stars), fooled=bool(fooled),
                created=_now())


def _star(value, field: str) -> int:
    """One whole star 1-5 (numpy's integers too, never a bool or a float)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not 1 <= value <= 5:
        raise StoreError(f"{field} must be whole stars 1-5, got {value!r}"[:200])
    return int(value)


def _whole(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise StoreError(f"{field} must be a whole number >= 0, got {value!r}"[:200])
    return int(value)


def _keys(review_keys) -> list[str]:
    """Review keys, checked, each once, in the order given."""
    if isinstance(review_keys, str):
        raise StoreError("review keys must be a list of keys, not one text")
    return list(dict.fromkeys(clean_name(k, "review key", MAX_KEY) for k in review_keys))


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _utc(value: datetime) -> datetime:
    """SQLite gives back naive datetimes: every one written here was UTC."""
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# ---------------------------------------------------------------------------- where
def database_url() -> str:
    """``$REVIEWBERT_DB``, else the SQLite file ``<base>/reviewbert.db``."""
    url = os.environ.get(DB_ENV, "").strip()
    if url:
        return url
    base = Path(os.environ.get(BASE_ENV) or Path.home() / ".cache" / "reviewbert")
    return f"sqlite:///{base.expanduser().absolute() / 'reviewbert.db'}"


def mask(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, also when it does not parse."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:           # any text at all: it is only being shown
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(url))


def _parse(url: str) -> sa.URL:
    """The URL SQLAlchemy will open, or StoreError naming what is wrong with it."""
    if not isinstance(url, str) or not url.strip():
        raise StoreError("no database URL: use sqlite:///PATH or postgresql://USER@HOST/DB")
    url = url.strip()
    if url.startswith("postgres://"):       # the Heroku-style alias SQLAlchemy dropped
        url = "postgresql://" + url[len("postgres://"):]
    try:
        parsed = sa.make_url(url)
    except Exception:
        raise StoreError(f"{mask(url)!r} is not a database URL: use sqlite:///PATH or "
                         "postgresql://USER@HOST/DB") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:") or "mode=memory" in url:
            raise StoreError(f"{mask(url)}: an in-memory SQLite store would be lost with the "
                             "process; give a file: sqlite:///PATH")
    elif backend != "postgresql":
        raise StoreError(f"{mask(url)}: ReviewBERT's store runs on SQLite (sqlite:///PATH) or "
                         f"PostgreSQL (postgresql://USER@HOST/DB), not {backend!r}")
    return parsed


def _one_line(exc: BaseException, secret: str | None = None) -> str:
    """The reason of a driver's error, on one line, without SQLAlchemy's SQL and links."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).split("\n[SQL:")[0].split("(Background on this error")[0]
    text = " ".join(text.split()) or type(inner).__name__
    if secret:
        text = text.replace(secret, "***")
    return text[:300]


@contextmanager
def _guard(where: str, secret: str | None = None, doing: str = "the store"):
    """Any failure of the database, its driver or the file system inside becomes one
    StoreError line naming the (masked) URL."""
    try:
        yield
    except StoreError:
        raise
    except (sa.exc.SQLAlchemyError, sqlite3.Error, OSError, ImportError, UnicodeError) as e:
        raise StoreError(f"{doing} at {where}: {_one_line(e, secret)}") from e


# ---------------------------------------------------------------------------- engines
def _sqlite_connect(dbapi_connection, _record) -> None:
    """Every SQLite connection: wait for other writers, WAL, a sync on every commit."""
    # The driver's own implicit BEGIN skips DDL and SELECTs; _sqlite_begin emits ours,
    # so a migration and a write are each one real transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # WAL: readers (the teacher's view) never block writers, nor writers readers;
        # FULL: the WAL is synced at every commit, so an acknowledged entry survives a
        # kill and a power cut (NORMAL would only survive a kill)
        _set_wal(cursor)
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _set_wal(cursor) -> None:
    """Switch a fresh file to WAL, retrying while another connection does the same.

    Changing the journal mode needs the file to itself, and SQLite may answer "database
    is locked" at once instead of calling the busy handler (two processes opening a new
    store together), so the busy timeout alone does not cover it. WAL is kept in the file:
    once it is on, reading the mode takes no lock worth waiting for.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


def _sqlite_begin(connection) -> None:
    # IMMEDIATE takes the write lock at the start (waiting up to the busy timeout): a
    # deferred transaction that reads and then writes may fail at once instead of waiting
    write = connection.get_execution_options().get(_WRITE)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _make_engine(parsed: sa.URL, where: str) -> sa.Engine:
    options = dict(pool_size=5, max_overflow=25, pool_timeout=120)
    if parsed.get_backend_name() == "sqlite":
        folder = Path(parsed.database).expanduser().absolute().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot make the folder of the store at {where}: "
                             f"{e.strerror or e}") from None
        engine = sa.create_engine(parsed, **options)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # pre_ping: a server restarted between two clicks leaves dead pooled connections
    return sa.create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10},
                            **options)


# ---------------------------------------------------------------------------- migrations
def _alembic_config(connection=None):
    from alembic.config import Config
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    cfg.attributes["connection"] = connection
    return cfg


@functools.lru_cache(maxsize=1)
def known_revisions() -> tuple[str, ...]:
    """The schema revisions this code's migrations know, oldest first."""
    from alembic.script import ScriptDirectory
    script = ScriptDirectory.from_config(_alembic_config())
    return tuple(reversed([s.revision for s in script.walk_revisions()]))


def _revision_at(connection) -> str | None:
    from alembic.runtime.migration import MigrationContext
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _refuse_newer(revision: str | None, where: str) -> None:
    if revision is not None and revision not in known_revisions():
        raise StoreError(f"the store at {where} was written by a newer ReviewBERT (schema "
                         f"{revision}); this one knows up to {SCHEMA_HEAD}")


def migrate(engine: sa.Engine, where: str, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` in one transaction that other processes wait
    for: BEGIN IMMEDIATE on SQLite, a transaction-scoped advisory lock on PostgreSQL. The
    second of two processes opening a fresh database finds it migrated and does nothing."""
    from alembic import command
    with engine.execution_options(**{_WRITE: True}).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
        current = _revision_at(connection)
        _refuse_newer(current, where)
        if current != (SCHEMA_HEAD if revision == "head" else revision):
            command.upgrade(_alembic_config(connection), revision)


# ---------------------------------------------------------------------------- opening
_LOCK = threading.Lock()
_URL_LOCKS: dict[str, threading.Lock] = {}
_STORES: dict[str, Store] = {}


def open_store(url: str | None = None) -> Store:
    """The store at ``url`` (default :func:`database_url`), migrated to the newest schema.
    One engine per URL and process, shared by every thread (Streamlit's sessions); the
    first call migrates, under a lock the others wait on. StoreError, one line, when it
    cannot be opened."""
    url = url or database_url()
    with _LOCK:
        store = _STORES.get(url)
        if store is not None:
            return store
        url_lock = _URL_LOCKS.setdefault(url, threading.Lock())
    # one lock per URL: a PostgreSQL server that takes its time to answer holds up the
    # sessions of that URL only
    with url_lock:
        store = _STORES.get(url)
        if store is None:
            store = _open(url)
            with _LOCK:
                _STORES[url] = store
    return store


def _open(url: str) -> Store:
    parsed = _parse(url)
    where, secret = mask(url), parsed.password
    with _guard(where, secret, "cannot open the store"):
        engine = _make_engine(parsed, where)
        try:
            migrate(engine, where)
        except BaseException:
            engine.dispose()
            raise
    return Store(engine, where, secret)


def close_all() -> None:
    """Close every engine this process opened; the next :func:`open_store` starts afresh."""
    with _LOCK:
        stores = list(_STORES.values())
        _STORES.clear()
    for store in stores:
        store.engine.dispose()


def _forget_after_fork() -> None:
    # a forked child must not share the parent's pooled connections (nor a held lock)
    global _LOCK
    _LOCK = threading.Lock()
    for store in _STORES.values():
        store.engine.dispose(close=False)
    _STORES.clear()
    _URL_LOCKS.clear()


if hasattr(os, "register_at_fork"):         # POSIX only
    os.register_at_fork(after_in_child=_forget_after_fork)


def _lock_key(scope: bytes, name: str) -> int:
    """A signed 64-bit pg_advisory lock key for one name (a room, a review key) in a scope."""
    digest = hashlib.sha256(scope + b"\0" + name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _room_lock_key(room: str) -> int:
    """A signed 64-bit pg_advisory lock key for one room."""
    return _lock_key(b"reviewbert.fool_entries", room)


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(keys), CHUNK):
        yield keys[i:i + CHUNK]


def _insert(connection, table):
    """INSERT with the dialect's ON CONFLICT clauses."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


class Store:
    """One database's entries, tags, notes, relabels and reviewed marks; thread-safe (every
    call its own connection and transaction). Get one with :func:`open_store`."""

    def __init__(self, engine: sa.Engine, where: str, secret: str | None = None):
        self.engine = engine
        self.where = where                  # the URL, password masked: for messages
        self._secret = secret
        self._writer = engine.execution_options(**{_WRITE: True})

    def __repr__(self) -> str:
        return f"Store({self.where})"

    @contextmanager
    def _tx(self, write: bool = True):
        with _guard(self.where, self._secret), \
                (self._writer if write else self.engine).begin() as connection:
            yield connection

    def schema_version(self) -> str | None:
        """The Alembic revision the database is at ("0003")."""
        with self._tx(write=False) as connection:
            return _revision_at(connection)

    # ---- Fool the model
    def add_entry(self, room: str, author: str, text: str, stars: tuple[int, int],
                  capability: str, checkpoint: str, pred_label: str,
                  pred_stars: tuple[int, int], e_stars: float, fooled: bool) -> int:
        """Store one entry; its id, returned once the transaction has committed."""
        row = _entry_row(room, author, text, stars, capability, checkpoint, pred_label,
                         pred_stars, e_stars, fooled)
        with self._tx() as connection:
            if connection.dialect.name == "postgresql":
                # Ids come from a sequence before commit, so two transactions may commit
                # out of id order; a view polling after_id would skip the smaller. One
                # writer per room at a time makes a room's ids visible in order.
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(
                    _room_lock_key(row["room"]))))
            result = connection.execute(FOOL_ENTRIES.insert().values(**row))
            new_id = result.inserted_primary_key[0]
        return int(new_id)

    def entries(self, room: str, after_id: int = 0, limit: int | None = None) -> list[Entry]:
        """The room's entries with id > ``after_id``, in id order (at most ``limit``)."""
        room = clean_name(room, "room")
        query = (sa.select(FOOL_ENTRIES).where(FOOL_ENTRIES.c.room == room,
                                               FOOL_ENTRIES.c.id > _whole(after_id, "after_id"))
                 .order_by(FOOL_ENTRIES.c.id))
        if limit is not None:
            query = query.limit(_whole(limit, "limit"))
        with self._tx(write=False) as connection:
            rows = connection.execute(query).mappings().all()
        return [_entry(row) for row in rows]

    def entry(self, entry_id: int) -> Entry | None:
        with self._tx(write=False) as connection:
            row = connection.execute(sa.select(FOOL_ENTRIES).where(
                FOOL_ENTRIES.c.id == _whole(entry_id, "entry id"))).mappings().first()
        return None if row is None else _entry(row)

    def rooms(self) -> list[str]:
        """Every room with at least one entry, sorted."""
        with self._tx(write=False) as connection:
            return list(connection.execute(sa.select(FOOL_ENTRIES.c.room).distinct()
                                           .order_by(FOOL_ENTRIES.c.room)).scalars())

    def delete_entry(self, entry_id: int) -> bool:
        """Remove one entry; whether there was one."""
        with self._tx() as connection:
            result = connection.execute(FOOL_ENTRIES.delete().where(
                FOOL_ENTRIES.c.id == _whole(entry_id, "entry id")))
        return result.rowcount > 0

    # ---- tags and notes
    def tag(self, review_key: str, tag: str, author: str = "") -> bool:
        """Tag one review; False when it already had that tag."""
        return self.tag_many([review_key], tag, author) == 1

    def tag_many(self, review_keys: Iterable[str], tag: str, author: str = "") -> int:
        """Tag a whole cohort in one transaction; how many reviews gained the tag (two
        sessions tagging the same review at the same moment may both count it)."""
        tag = clean_name(tag, "tag", MAX_TAG)
        return self._add_missing(REVIEW_TAGS, "tag", tag, review_keys, author)

    def _add_missing(self, table: sa.Table, column: str, value: str, review_keys,
                     author: str) -> int:
        """One row (review key, ``column`` = ``value``, author, created) for each review
        that has none yet, in one transaction; how many were added."""
        author = clean_name(author, "author", empty_ok=True)
        keys = _keys(review_keys)
        added, now = 0, _now()
        with self._tx() as connection:
            for chunk in _chunks(keys):
                had = set(connection.execute(sa.select(table.c.review_key).where(
                    table.c[column] == value, table.c.review_key.in_(chunk))).scalars())
                rows = [{"review_key": k, column: value, "author": author, "created": now}
                        for k in chunk if k not in had]
                if rows:
                    connection.execute(_insert(connection, table).on_conflict_do_nothing(
                        index_elements=["review_key", column]), rows)
                added += len(rows)
        return added

    def untag(self, review_key: str, tag: str) -> bool:
        """Remove a tag from a review; whether it had it."""
        review_key = clean_name(review_key, "review key", MAX_KEY)
        tag = clean_name(tag, "tag", MAX_TAG)
        with self._tx() as connection:
            result = connection.execute(REVIEW_TAGS.delete().where(
                REVIEW_TAGS.c.review_key == review_key, REVIEW_TAGS.c.tag == tag))
        return result.rowcount > 0

    def tag_records(self, review_keys: Iterable[str] | None = None) -> list[Tag]:
        """Every tag (of these reviews), with who and when, by review then tag."""
        out: list[Tag] = []
        for rows in self._by_keys(REVIEW_TAGS, review_keys, REVIEW_TAGS.c.tag):
            out += [Tag(r["review_key"], r["tag"], r["author"], _utc(r["created"])) for r in rows]
        return sorted(out, key=lambda t: (t.review_key, t.tag))

    def tags(self, review_keys: Iterable[str] | None = None) -> dict[str, list[str]]:
        """{review key: its tags, sorted} for every tagged review (of these)."""
        out: dict[str, list[str]] = {}
        for record in self.tag_records(review_keys):
            out.setdefault(record.review_key, []).append(record.tag)
        return out

    def tag_names(self) -> list[str]:
        """Every tag some review holds, sorted (by Python, not the server's collation)."""
        with self._tx(write=False) as connection:
            return sorted(connection.execute(sa.select(REVIEW_TAGS.c.tag).distinct()).scalars())

    def set_note(self, review_key: str, note: str, author: str = "") -> None:
        """Write (replace) the note on a review; a blank note (or None) removes it."""
        review_key = clean_name(review_key, "review key", MAX_KEY)
        author = clean_name(author, "author", empty_ok=True)
        if note is None or isinstance(note, str) and not _CONTROL.sub("", note).strip():
            with self._tx() as connection:
                connection.execute(REVIEW_NOTES.delete().where(
                    REVIEW_NOTES.c.review_key == review_key))
            return
        row = dict(review_key=review_key, note=clean_text(note, "note", MAX_NOTE),
                   author=author, updated=_now())
        with self._tx() as connection:
            statement = _insert(connection, REVIEW_NOTES).values(**row)
            connection.execute(statement.on_conflict_do_update(
                index_elements=["review_key"],
                set_=dict(note=row["note"], author=author, updated=row["updated"])))

    def note(self, review_key: str) -> str | None:
        """The note on a review, or None."""
        found = self.notes([review_key]).get(clean_name(review_key, "review key", MAX_KEY))
        return None if found is None else found.note

    def notes(self, review_keys: Iterable[str] | None = None) -> dict[str, Note]:
        """{review key: its note} for every review with one (of these)."""
        out: dict[str, Note] = {}
        for rows in self._by_keys(REVIEW_NOTES, review_keys):
            out.update({r["review_key"]: Note(r["review_key"], r["note"], r["author"],
                                              _utc(r["updated"])) for r in rows})
        return out

    # ---- relabels
    def relabel(self, review_key: str, stars: int, previous: int, author: str = "") -> bool:
        """Give a review ``stars`` instead of the data's ``previous``; True when a relabel is
        now stored, False when it went back to the data's stars (the row is removed). The
        data's stars are those of the first relabel: a later call's ``previous`` is only
        used when the review had none."""
        review_key = clean_name(review_key, "review key", MAX_KEY)
        stars, previous = _star(stars, "stars"), _star(previous, "previous stars")
        author = clean_name(author, "author", empty_ok=True)
        with self._tx() as connection:
            if connection.dialect.name == "postgresql":
                # read, then write: two sessions relabelling one review take turns (SQLite's
                # BEGIN IMMEDIATE already makes every writer take its turn)
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(
                    _lock_key(b"reviewbert.review_labels", review_key))))
            had = connection.execute(sa.select(REVIEW_LABELS.c.previous).where(
                REVIEW_LABELS.c.review_key == review_key)).scalar()
            previous = previous if had is None else had
            if stars == previous:
                connection.execute(REVIEW_LABELS.delete().where(
                    REVIEW_LABELS.c.review_key == review_key))
                return False
            row = dict(review_key=review_key, stars=stars, previous=previous, author=author,
                       updated=_now())
            connection.execute(_insert(connection, REVIEW_LABELS).values(**row).on_conflict_do_update(
                index_elements=["review_key"],
                set_=dict(stars=stars, author=author, updated=row["updated"])))
        return True

    def unrelabel(self, review_key: str) -> bool:
        """Drop a review's relabel (back to the data's stars); whether it had one."""
        review_key = clean_name(review_key, "review key", MAX_KEY)
        with self._tx() as connection:
            result = connection.execute(REVIEW_LABELS.delete().where(
                REVIEW_LABELS.c.review_key == review_key))
        return result.rowcount > 0

    def relabels(self, review_keys: Iterable[str] | None = None) -> dict[str, Relabel]:
        """{review key: its relabel} for every relabelled review (of these)."""
        out: dict[str, Relabel] = {}
        for rows in self._by_keys(REVIEW_LABELS, review_keys):
            out.update({r["review_key"]: Relabel(r["review_key"], int(r["stars"]),
                                                 int(r["previous"]), r["author"],
                                                 _utc(r["updated"])) for r in rows})
        return out

    # ---- reviewed marks
    def mark_reviewed(self, review_keys: Iterable[str], author: str = "") -> int:
        """Mark reviews as reviewed, all in one transaction; how many were not marked yet
        (the first mark keeps its author and time)."""
        return self._add_missing(REVIEW_MARKS, "mark", REVIEWED, review_keys, author)

    def unmark_reviewed(self, review_key: str) -> bool:
        """Take the reviewed mark off a review; whether it had one."""
        review_key = clean_name(review_key, "review key", MAX_KEY)
        with self._tx() as connection:
            result = connection.execute(REVIEW_MARKS.delete().where(
                REVIEW_MARKS.c.review_key == review_key, REVIEW_MARKS.c.mark == REVIEWED))
        return result.rowcount > 0

    def reviewed(self, review_keys: Iterable[str] | None = None) -> dict[str, tuple[str, datetime]]:
        """{review key: (who marked it, when)} for every reviewed review (of these)."""
        out: dict[str, tuple[str, datetime]] = {}
        for rows in self._by_keys(REVIEW_MARKS, review_keys, where=REVIEW_MARKS.c.mark == REVIEWED):
            out.update({r["review_key"]: (r["author"], _utc(r["created"])) for r in rows})
        return out

    def _by_keys(self, table: sa.Table, review_keys, *order, where=None) -> Iterator[list]:
        """The table's rows, all of them or of these review keys (a few hundred a query)."""
        query = sa.select(table).order_by(table.c.review_key, *order)
        if where is not None:
            query = query.where(where)
        with self._tx(write=False) as connection:
            if review_keys is None:
                yield connection.execute(query).mappings().all()
                return
            for chunk in _chunks(_keys(review_keys)):
                yield connection.execute(query.where(table.c.review_key.in_(chunk))) \
                    .mappings().all()


def _entry(row) -> Entry:
    values = dict(row)
    values["created"] = _utc(values["created"])
    values["fooled"] = bool(values["fooled"])
    return Entry(**values)
