"""What ReviewBERT keeps: caches beside a checkpoint, and the shared database.

- ``location``     where: the one policy of every cache beside a checkpoint (beside it, else
                   a per-user fallback), the first writable folder, finding an entry in any
- ``run_records``  long runs' results (faithfulness, brittleness) keyed by what decides
                   their numbers, resumable from a partial file: the base ``RunRecord``
- ``db``           the shared store, a real database through SQLAlchemy (an SQLite file by
                   default, PostgreSQL by URL in ``REVIEWBERT_DB``): "Fool the model"'s
                   entries, review tags and notes; its schema versioned by the Alembic
                   migrations in ``migrations/``
"""
