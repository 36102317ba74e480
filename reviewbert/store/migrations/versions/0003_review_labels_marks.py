"""The third schema: relabels and reviewed marks of reviews, for the triage queue's fix loop.

Revision 0003, after 0002. ``review_labels`` holds one relabel per review: the stars a
reviewer gave it and the stars the data had (``previous``), never equal, both 1-5.
``review_marks`` holds marks such as ``reviewed``, once per review and mark. Each row
records who (``author``) and when.
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_labels",
        sa.Column("review_key", sa.String(200), primary_key=True),
        sa.Column("stars", sa.SmallInteger, nullable=False),
        sa.Column("previous", sa.SmallInteger, nullable=False),
        sa.Column("author", sa.String(80), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("stars BETWEEN 1 AND 5 AND previous BETWEEN 1 AND 5 "
                           "AND stars <> previous", name="ck_review_labels_stars"),
    )
    op.create_table(
        "review_marks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("review_key", sa.String(200), nullable=False),
        sa.Column("mark", sa.String(40), nullable=False),
        sa.Column("author", sa.String(80), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("review_key", "mark", name="uq_review_marks_key_mark"),
    )
    op.create_index("ix_review_marks_mark", "review_marks", ["mark"])


def downgrade() -> None:
    op.drop_index("ix_review_marks_mark", table_name="review_marks")
    op.drop_table("review_marks")
    op.drop_table("review_labels")
