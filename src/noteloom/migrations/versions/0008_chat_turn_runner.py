"""Each running chat turn names the runner that runs it.

A runner is one chat turn runner in one server process; it holds a workspace lock named
after its id while it lives. A turn whose runner's lock nobody holds belongs to no live
process, so a server starting after a crash settles it at once instead of waiting for
its heartbeat to go stale.

Revision ID: 0008_chat_turn_runner
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_chat_turn_runner"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_messages") as batch:
        batch.add_column(sa.Column("runner_id", sa.String(32)))


def downgrade() -> None:
    with op.batch_alter_table("chat_messages") as batch:
        batch.drop_column("runner_id")
