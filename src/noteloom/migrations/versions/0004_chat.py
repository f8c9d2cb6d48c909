"""The chat: conversations, messages, turn events, pending actions, proposed edits.

Revision ID: 0004
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger
USD = sa.String(40)


def upgrade() -> None:
    op.create_table(
        "chat_conversations",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("pinned", sa.Boolean, nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("temperature", sa.Float),
        sa.Column("top_p", sa.Float),
        sa.Column("max_tokens", sa.Integer),
        sa.Column("thinking_level", sa.String(16)),
        sa.Column("instructions", sa.Text),
        sa.Column("workspace_tools", sa.Boolean, nullable=False),
        sa.Column("workspace_writes", sa.Boolean, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", USD, nullable=False),
        sa.Column("unpriced_turns", sa.Integer, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
        sa.Column("deleted_time", MS),
    )
    op.create_index("ix_chat_conversations_user", "chat_conversations", ["user_id", "updated_time"])
    op.create_table(
        "chat_messages",
        sa.Column("id", ID, primary_key=True),
        sa.Column(
            "conversation_id", ID, sa.ForeignKey("chat_conversations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("command", sa.String(32)),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("transcript", sa.Text),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("error_code", sa.String(40)),
        sa.Column("error_message", sa.Text),
        sa.Column("activity", sa.Text),
        sa.Column("model", sa.String(200)),
        sa.Column("stop_reason", sa.String(32)),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger, nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", USD),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("note_id", ID),
        sa.Column("selection_start", sa.Integer),
        sa.Column("selection_end", sa.Integer),
        sa.Column("selection_text", sa.Text),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("started_time", MS),
        sa.Column("finished_time", MS),
        sa.Column("heartbeat_time", MS),
        sa.Column("updated_time", MS, nullable=False),
        sa.UniqueConstraint("conversation_id", "position", name="uq_chat_messages_position"),
    )
    op.create_index("ix_chat_messages_status", "chat_messages", ["status"])
    op.create_table(
        "chat_events",
        sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("time", MS, nullable=False),
    )
    op.create_table(
        "chat_pending_actions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("decided_time", MS),
    )
    op.create_index("ix_chat_pending_actions_message_id", "chat_pending_actions", ["message_id"])
    op.create_table(
        "chat_edits",
        sa.Column("id", ID, primary_key=True),
        sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False),
        sa.Column("note_id", ID, nullable=False),
        sa.Column("tool", sa.String(64), nullable=False),
        sa.Column("anchor", sa.Text),
        sa.Column("span_start", sa.Integer, nullable=False),
        sa.Column("span_end", sa.Integer, nullable=False),
        sa.Column("old_text", sa.Text, nullable=False),
        sa.Column("new_text", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("revision_id", ID),
        sa.Column("applied_time", MS),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("decided_time", MS),
    )
    op.create_index("ix_chat_edits_message_id", "chat_edits", ["message_id"])


def downgrade() -> None:
    for table in ("chat_edits", "chat_pending_actions", "chat_events", "chat_messages", "chat_conversations"):
        op.drop_table(table)
