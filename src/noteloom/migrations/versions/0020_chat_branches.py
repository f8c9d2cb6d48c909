"""Chat branches: a message's parent, and the end of the path a conversation shows.

``chat_messages.parent_id`` is the message this one follows (NULL: the first of its
conversation). Messages with the same parent are branches of one another: regenerating an
answer adds an answer under the same question, editing a question adds a question under
the same parent. ``chat_conversations.leaf_id`` is the last message of the path the
conversation shows, and whose messages a new turn reads as its history.

Existing messages become one line: each one's parent is the message before it by
position, and each conversation's leaf is its last message. Ids only, never content: a
sealed chat's branches are as sealed as its messages. Columns are added in place (as in
``0019``): a batch rebuild on SQLite would drop the tables that point at these.

Revision ID: 0020_chat_branches
Revises: 0019_sealed_chats
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_chat_branches"
down_revision = "0019_sealed_chats"
branch_labels = None
depends_on = None

ID = sa.String(32)


def upgrade() -> None:
    op.add_column("chat_messages", sa.Column("parent_id", ID))
    op.add_column("chat_conversations", sa.Column("leaf_id", ID))
    op.create_index("ix_chat_messages_parent", "chat_messages", ["conversation_id", "parent_id"])
    op.execute(
        "UPDATE chat_messages SET parent_id = ("
        " SELECT p.id FROM chat_messages p WHERE p.conversation_id = chat_messages.conversation_id"
        " AND p.position < chat_messages.position ORDER BY p.position DESC LIMIT 1)"
    )
    op.execute(
        "UPDATE chat_conversations SET leaf_id = ("
        " SELECT m.id FROM chat_messages m WHERE m.conversation_id = chat_conversations.id"
        " ORDER BY m.position DESC LIMIT 1)"
    )


def downgrade() -> None:
    op.drop_index("ix_chat_messages_parent", table_name="chat_messages")
    op.drop_column("chat_conversations", "leaf_id")
    op.drop_column("chat_messages", "parent_id")
