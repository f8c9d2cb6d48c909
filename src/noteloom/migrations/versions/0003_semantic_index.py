"""The semantic index: its state (model, dimensions, feed cursor) and the chunks of notes.

The vector table itself is created when the index is built, because its shape
depends on the embedding model (see ``noteloom.vectors``).

Revision ID: 0003
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
# A branch of its own off the workspace schema: it needs nothing of the keyword index.
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "semantic_index",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("chunker", sa.Text, nullable=False),
        sa.Column("feed_cursor", sa.BigInteger, nullable=False),
        sa.Column("backfill_seq", sa.BigInteger),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
    )
    op.create_table(
        "semantic_chunks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("section_path", sa.Text, nullable=False),
        sa.Column("heading", sa.Text, nullable=False),
        sa.Column("heading_path", sa.Text, nullable=False),
        sa.Column("start_char", sa.Integer, nullable=False),
        sa.Column("end_char", sa.Integer, nullable=False),
        sa.Column("content_hash", sa.String(32), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS semantic_vectors")
    op.drop_table("semantic_chunks")
    op.drop_table("semantic_index")
