"""Memory and per-chat capabilities: the memories table; a conversation's memory, history,
web and data-access toggles and its data-source allowlist; the memories a chat turn or a
recipe run was given; a recipe's data-source allowlist.

``memories`` holds one fact a row, personal (``user_id``) or shared (``user_id`` NULL), with
its provenance (``source`` ai | user, the conversation, run and message an AI-written one
came from) and a soft delete. The capability columns are NULL for "the default": memory
follows the workspace's default (on), history, web and data access are off.

Revision ID: 0014_memory
Revises: 0013_recipes
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_memory"
down_revision = "0013_recipes"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", ID, primary_key=True),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("conversation_id", ID),
        sa.Column("run_id", ID),
        sa.Column("message_id", ID),
        sa.Column("created_by", ID),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
        sa.Column("deleted_time", MS),
    )
    op.create_index("ix_memories_owner", "memories", ["scope", "user_id", "deleted_time"])
    with op.batch_alter_table("chat_conversations") as batch:
        batch.add_column(sa.Column("memory_access", sa.Boolean))
        batch.add_column(sa.Column("history_access", sa.Boolean))
        batch.add_column(sa.Column("web_access", sa.Boolean))
        batch.add_column(sa.Column("data_access", sa.Boolean))
        batch.add_column(sa.Column("data_sources", sa.JSON))
    with op.batch_alter_table("chat_messages") as batch:
        batch.add_column(sa.Column("memories", sa.JSON))
    with op.batch_alter_table("recipes") as batch:
        batch.add_column(sa.Column("data_sources", sa.JSON))
    with op.batch_alter_table("recipe_runs") as batch:
        batch.add_column(sa.Column("memories", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("recipe_runs") as batch:
        batch.drop_column("memories")
    with op.batch_alter_table("recipes") as batch:
        batch.drop_column("data_sources")
    with op.batch_alter_table("chat_messages") as batch:
        batch.drop_column("memories")
    with op.batch_alter_table("chat_conversations") as batch:
        for column in ("data_sources", "data_access", "web_access", "history_access", "memory_access"):
            batch.drop_column(column)
    op.drop_index("ix_memories_owner", "memories")
    op.drop_table("memories")
