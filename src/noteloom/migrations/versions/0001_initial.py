"""The workspace: users, tokens, notebooks, notes, tags, revisions, attachments, settings.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", ID, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("is_owner", sa.Boolean, nullable=False),
        sa.Column("created_time", MS, nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("revoked_time", MS),
        sa.Column("last_used_time", MS),
    )
    op.create_table(
        "notebooks",
        sa.Column("id", ID, primary_key=True),
        sa.Column("parent_id", ID, index=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
        sa.Column("deleted_time", MS),
        sa.Column("trash_batch", ID),
    )
    op.create_table(
        "notes",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", ID, nullable=False, unique=True),
        sa.Column("notebook_id", ID, sa.ForeignKey("notebooks.id"), nullable=False, index=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("is_todo", sa.Boolean, nullable=False),
        sa.Column("todo_due", MS),
        sa.Column("todo_completed", MS),
        sa.Column("source_url", sa.Text, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False, index=True),
        sa.Column("deleted_time", MS, index=True),
        sa.Column("trash_batch", ID),
    )
    op.create_table(
        "tags",
        sa.Column("id", ID, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("title_key", sa.Text, nullable=False, unique=True),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
    )
    op.create_table(
        "note_tags",
        sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("tag_id", ID, sa.ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True, index=True),
        sa.Column("created_time", MS, nullable=False),
    )
    op.create_table(
        "revisions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("version_time", MS, nullable=False),
        sa.Column("created_time", MS, nullable=False),
    )
    op.create_table(
        "attachments",
        sa.Column("id", ID, primary_key=True),
        sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), index=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("filename", sa.Text, nullable=False),
        sa.Column("mime", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "note_changes",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("note_id", ID, nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("time", MS, nullable=False),
    )
