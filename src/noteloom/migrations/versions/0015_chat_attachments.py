"""Chat attachments: the files attached to a user's message, and a conversation's
attachment mode.

``chat_attachments`` holds one link row per (message, file): its stable ref (the id), the
owner, the sanitised name, the kind and type decided from the bytes at ingress, size and
SHA-256, the key of its bytes in the attachment store, and the text extracted once at
ingress with its status. ``chat_conversations.attachment_mode`` is how attachments reach
the model (extract | on_demand | original; NULL: extract).

Revision ID: 0015_chat_attachments
Revises: 0014_memory
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_chat_attachments"
down_revision = "0014_memory"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "chat_attachments",
        sa.Column("id", ID, primary_key=True),
        sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False),
        sa.Column("conversation_id", ID, sa.ForeignKey("chat_conversations.id", ondelete="CASCADE"), nullable=False),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("mime", sa.String(100), nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("blob_key", sa.String(64)),
        sa.Column("extracted_text", sa.Text),
        sa.Column("extract_status", sa.String(16), nullable=False),
        sa.Column("extract_detail", sa.Text),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("removed_time", MS),
    )
    op.create_index("ix_chat_attachments_message_id", "chat_attachments", ["message_id"])
    op.create_index("ix_chat_attachments_conversation_id", "chat_attachments", ["conversation_id"])
    with op.batch_alter_table("chat_conversations") as batch:
        batch.add_column(sa.Column("attachment_mode", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("chat_conversations") as batch:
        batch.drop_column("attachment_mode")
    op.drop_index("ix_chat_attachments_conversation_id", "chat_attachments")
    op.drop_index("ix_chat_attachments_message_id", "chat_attachments")
    op.drop_table("chat_attachments")
