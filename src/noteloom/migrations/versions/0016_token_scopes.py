"""Scoped tokens: a token gets a name, scopes and an optional expiry.

``api_tokens.name`` names a token for ``noteloom token list|revoke`` (tokens made before
are named ``default``); ``api_tokens.scopes`` holds what the token is limited to as JSON
(``{"read_only", "tools", "notebooks"}``; NULL: the user's full access, as every token
had before); ``api_tokens.expires_time`` is when it stops working (NULL: never). The
columns are nullable so they are added in place on SQLite (no table rebuild, which would
touch the browser sessions that hang off the tokens).

Revision ID: 0016_token_scopes
Revises: 0015_chat_attachments
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_token_scopes"
down_revision = "0015_chat_attachments"
branch_labels = None
depends_on = None

MS = sa.BigInteger


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("name", sa.String(100)))
        batch.add_column(sa.Column("scopes", sa.JSON))
        batch.add_column(sa.Column("expires_time", MS))
    op.execute("UPDATE api_tokens SET name = 'default' WHERE name IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_time")
        batch.drop_column("scopes")
        batch.drop_column("name")
