"""Alembic's entry point for the store's migrations: it runs them on the connection it is given.

ReviewBERT migrates its own database: ``reviewbert.store.db.migrate`` opens a transaction
(holding the lock that makes a second process wait), passes its connection in
``config.attributes["connection"]`` and calls ``alembic.command.upgrade``; there is no
alembic.ini. The migrations run inside that transaction, so a failed one leaves the
database as it was. Versions are numbered ``0001``, ``0002``, ...: a new one sets
``down_revision`` to the previous number, and ``reviewbert.store.db.SCHEMA_HEAD`` moves to it.
"""
from alembic import context

from reviewbert.store.db import METADATA, VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the store's migrations run through reviewbert.store.db.migrate, "
                       "on the connection it opens")
# version_table: Optuna's storage keeps its own alembic_version, possibly in the same database
context.configure(connection=connection, target_metadata=METADATA, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
