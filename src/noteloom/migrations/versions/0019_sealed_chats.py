"""Sealed chats: a security level per conversation, sealed-row markers, shared unlock windows.

``chat_conversations.security_level`` is ``standard`` (stored in clear, as before),
``private`` (its content sealed at rest) or ``fortress`` (sealed, and its turns run on a
private model only). ``chat_messages.sealed``, ``chat_pending_actions.sealed`` and
``chat_attachments.sealed`` mark a row whose content columns hold sealed values
(``noteloom.vault``); an attachment's name may then be longer than 255 characters, so it
becomes TEXT. ``vault_windows`` holds the unlock windows every server process can use: the
vault key wrapped under a key derived from the credential that opened the window (only a
hash of that credential is stored), with an expiry.

Columns are added in place on SQLite: a batch rebuild of ``chat_messages`` or
``chat_conversations`` would drop tables other tables point at. ``chat_attachments`` is
pointed at by nothing, so its name's type is changed by a rebuild there.

Revision ID: 0019_sealed_chats
Revises: 0018_people
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_sealed_chats"
down_revision = "0018_people"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.add_column(
        "chat_conversations",
        sa.Column("security_level", sa.String(16), nullable=False, server_default="standard"),
    )
    for table in ("chat_messages", "chat_pending_actions", "chat_attachments"):
        op.add_column(table, sa.Column("sealed", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("chat_attachments") as batch:
        batch.alter_column("name", existing_type=sa.String(255), type_=sa.Text, existing_nullable=False)
    op.create_table(
        "vault_windows",
        sa.Column("credential_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("salt", sa.Text, nullable=False),
        sa.Column("wrapped_key", sa.Text, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("expires_time", MS, nullable=False),
    )
    op.create_index("ix_vault_windows_user", "vault_windows", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_vault_windows_user", table_name="vault_windows")
    op.drop_table("vault_windows")
    with op.batch_alter_table("chat_attachments") as batch:
        batch.alter_column("name", existing_type=sa.Text, type_=sa.String(255), existing_nullable=False)
        batch.drop_column("sealed")
    for table in ("chat_messages", "chat_pending_actions"):
        op.drop_column(table, "sealed")
    op.drop_column("chat_conversations", "security_level")
