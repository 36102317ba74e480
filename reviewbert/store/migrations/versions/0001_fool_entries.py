"""The store's first schema: Fool the model's entries, one row per review a student wrote.

Revision 0001, the first. Written out in full rather than from
``reviewbert.store.db.METADATA``, so that it keeps creating this first schema whatever
the tables later become.
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fool_entries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("room", sa.String(80), nullable=False),
        sa.Column("author", sa.String(80), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("min_stars", sa.SmallInteger, nullable=False),
        sa.Column("max_stars", sa.SmallInteger, nullable=False),
        sa.Column("capability", sa.String(80), nullable=False),
        sa.Column("checkpoint", sa.Text, nullable=False),
        sa.Column("pred_label", sa.String(80), nullable=False),
        sa.Column("pred_min", sa.SmallInteger, nullable=False),
        sa.Column("pred_max", sa.SmallInteger, nullable=False),
        sa.Column("e_stars", sa.Float, nullable=False),
        sa.Column("fooled", sa.Boolean, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        # AUTOINCREMENT on SQLite: a deleted last id is never handed out again, which a
        # view polling "entries after id N" relies on
        sqlite_autoincrement=True,
    )
    op.create_index("ix_fool_entries_room_id", "fool_entries", ["room", "id"])


def downgrade() -> None:
    op.drop_index("ix_fool_entries_room_id", table_name="fool_entries")
    op.drop_table("fool_entries")
