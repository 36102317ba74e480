"""The second schema: tags and a note on any review, for the failing-cohorts triage.

Revision 0002, after 0001. Each tag and note records who (``author``) and when; a review
holds a tag once (``uq_review_tags_key_tag``) and one note.
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_tags",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("review_key", sa.String(200), nullable=False),
        sa.Column("tag", sa.String(40), nullable=False),
        sa.Column("author", sa.String(80), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("review_key", "tag", name="uq_review_tags_key_tag"),
    )
    op.create_index("ix_review_tags_tag", "review_tags", ["tag"])
    op.create_table(
        "review_notes",
        sa.Column("review_key", sa.String(200), primary_key=True),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("author", sa.String(80), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("review_notes")
    op.drop_index("ix_review_tags_tag", table_name="review_tags")
    op.drop_table("review_tags")
