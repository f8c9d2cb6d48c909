"""A conversation's own tool policies (tool name -> auto | confirm | deny), the per-conversation
layer of noteloom.policy. ``NULL`` = none of its own.

Revision ID: 0010_conversation_tool_policies
Revises: 0009_conversation_budgets
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_conversation_tool_policies"
down_revision = "0009_conversation_budgets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_conversations") as batch:
        batch.add_column(sa.Column("tool_policies", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("chat_conversations") as batch:
        batch.drop_column("tool_policies")
