"""Browser sign-in sessions: a page trades the API token for a session token it keeps in
origin-scoped storage and sends as a header (the API token used to sit in a cookie that
every server on the same host received).

Revision ID: 0006
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("token_id", ID, sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), nullable=False),
        sa.Column("session_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("last_used_time", MS, nullable=False),
        sa.Column("expires_time", MS, nullable=False),
        sa.Column("revoked_time", MS),
    )
    op.create_index("ix_web_sessions_token_id", "web_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_index("ix_web_sessions_token_id", table_name="web_sessions")
    op.drop_table("web_sessions")
