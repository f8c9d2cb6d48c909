"""OAuth 2.1 for remote MCP clients: the clients and the grants of the authorization flow.

``oauth_clients`` holds the clients that registered themselves (dynamic client registration)
and those known by the URL of their client ID metadata document (fetched, then kept here).
``oauth_grants`` holds what the flow hands out before an access token: an authorization
request waiting for the person's consent, an authorization code, a refresh token; each by
the SHA-256 of its secret, with its expiry. Access tokens are API tokens (``api_tokens``).

Revision ID: 0023_oauth
Revises: 0022_title_and_link_indexes
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_oauth"
down_revision = "0022_title_and_link_indexes"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("client_id", sa.String(512), primary_key=True),
        sa.Column("info", sa.JSON, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("fetched_time", MS),
    )
    op.create_table(
        "oauth_grants",
        sa.Column("id", ID, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("client_id", sa.String(512), nullable=False),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("expires_time", MS, nullable=False),
    )
    op.create_index("ix_oauth_grants_expires", "oauth_grants", ["expires_time"])


def downgrade() -> None:
    op.drop_index("ix_oauth_grants_expires", table_name="oauth_grants")
    op.drop_table("oauth_grants")
    op.drop_table("oauth_clients")
