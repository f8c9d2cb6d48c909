"""Revisions as reverse deltas with full snapshots (see workspace/revisions.py).

Appending 61 KB to a note in small pieces stored 36 MB of revisions, a full copy per
version. A row now holds either a full version (``body``) or an edit script that
rebuilds it from the next newer version (``delta``); a title may be NULL (the same as the
next newer version's). Every existing row is a full version and stays valid as it is:
nothing is rewritten. ``chars`` (a version's length, for listings that read no text) and
the chain counters are NULL on old rows, which the code reads as ``length(body)`` and 0.

The index on ``note_id`` becomes one on ``(note_id, created_time)``: every write reads a
note's newest revision, and a rebuild reads a range of its history in order.

Revision ID: 0007
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Batch mode: SQLite cannot drop NOT NULL in place, so the table is copied once.
    with op.batch_alter_table("revisions") as batch:
        batch.alter_column("title", existing_type=sa.Text, nullable=True)
        batch.alter_column("body", existing_type=sa.Text, nullable=True)
        batch.add_column(sa.Column("delta", sa.Text))
        batch.add_column(sa.Column("chars", sa.Integer))
        batch.add_column(sa.Column("chain_len", sa.Integer))
        batch.add_column(sa.Column("chain_chars", sa.Integer))
        batch.drop_index("ix_revisions_note_id")
        batch.create_index("ix_revisions_note_time", ["note_id", "created_time"])


def downgrade() -> None:
    raise NotImplementedError(
        "revisions stored as deltas have no full text to go back to; restore a backup instead"
    )
