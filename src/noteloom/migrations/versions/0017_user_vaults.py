"""User vaults: each user's keypair for sealed content (``noteloom.vault``).

``user_vaults`` holds one row a user: the X25519 public key of the current
``key_generation`` in clear (anything may seal to it), its secret key and older
generations' secret keys (``retired_keys``, JSON) encrypted under the user's vault key, and
the vault key wrapped twice: under an Argon2id key from the passphrase
(``passphrase_wrapped``/``passphrase_salt``) and from the recovery key
(``recovery_wrapped``/``recovery_salt``), with the Argon2id limits used. Nothing in it opens
without the passphrase or the recovery key.

Revision ID: 0017_user_vaults
Revises: 0016_token_scopes
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_user_vaults"
down_revision = "0016_token_scopes"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "user_vaults",
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("key_generation", sa.Integer, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("secret_key", sa.Text, nullable=False),
        sa.Column("retired_keys", sa.JSON, nullable=False),
        sa.Column("passphrase_wrapped", sa.Text, nullable=False),
        sa.Column("passphrase_salt", sa.Text, nullable=False),
        sa.Column("recovery_wrapped", sa.Text, nullable=False),
        sa.Column("recovery_salt", sa.Text, nullable=False),
        sa.Column("kdf_opslimit", sa.Integer, nullable=False),
        sa.Column("kdf_memlimit", sa.BigInteger, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("user_vaults")
