"""A conversation's own budgets: model calls, cost and a wall-clock limit per turn.

The output-token budget per turn is the existing ``max_tokens`` control. ``NULL`` leaves
each budget to ``[agent]`` in noteloom.toml, then to the defaults.

Revision ID: 0009_conversation_budgets
Revises: 0008_chat_turn_runner
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_conversation_budgets"
down_revision = "0008_chat_turn_runner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_conversations") as batch:
        batch.add_column(sa.Column("max_steps", sa.Integer))
        batch.add_column(sa.Column("max_cost", sa.String(40)))
        batch.add_column(sa.Column("time_limit", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("chat_conversations") as batch:
        batch.drop_column("time_limit")
        batch.drop_column("max_cost")
        batch.drop_column("max_steps")
