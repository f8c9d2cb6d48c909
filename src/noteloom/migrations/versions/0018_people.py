"""People: roles and passwords for users, an owner for every notebook, shared notebooks.

``users.role`` is ``owner``, ``admin`` or ``member`` (the user that was ``is_owner`` becomes
``owner``; everyone else ``member``); ``users.password_hash`` is an Argon2id hash for the web
sign-in (NULL: that person signs in with a token only). ``notebooks.owner_id`` is the person
a notebook belongs to; NULL reads as the workspace owner, so a workspace from before this
revision needs no rewrite and behaves exactly as before for its owner. A sub-notebook belongs
to the owner of its top notebook (the column is kept equal to it). ``notebook_shares`` gives
a person read or read-write access to a notebook and everything under it.
``web_sessions.token_id`` becomes nullable: a password sign-in starts a session without a token.

Revision ID: 0018_people
Revises: 0017_user_vaults
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_people"
down_revision = "0017_user_vaults"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("role", sa.String(16), nullable=False, server_default="member"))
        batch.add_column(sa.Column("password_hash", sa.Text))
    op.execute("UPDATE users SET role = 'owner' WHERE is_owner")
    op.create_index("ix_users_name", "users", ["name"])
    if op.get_bind().dialect.name == "sqlite":
        # In place: a batch rebuild of ``notebooks`` would drop a table the notes point at.
        op.execute("ALTER TABLE notebooks ADD COLUMN owner_id VARCHAR(32) "
                   "CONSTRAINT fk_notebooks_owner REFERENCES users (id)")
    else:
        op.add_column("notebooks", sa.Column("owner_id", ID))
        op.create_foreign_key("fk_notebooks_owner", "notebooks", "users", ["owner_id"], ["id"])
    op.create_index("ix_notebooks_owner", "notebooks", ["owner_id"])
    op.create_table(
        "notebook_shares",
        sa.Column("notebook_id", ID, sa.ForeignKey("notebooks.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("access", sa.String(8), nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("created_by", ID),
    )
    op.create_index("ix_notebook_shares_user", "notebook_shares", ["user_id"])
    with op.batch_alter_table("web_sessions") as batch:
        batch.alter_column("token_id", existing_type=ID, nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM web_sessions WHERE token_id IS NULL")
    with op.batch_alter_table("web_sessions") as batch:
        batch.alter_column("token_id", existing_type=ID, nullable=False)
    op.drop_index("ix_notebook_shares_user", table_name="notebook_shares")
    op.drop_table("notebook_shares")
    op.drop_index("ix_notebooks_owner", table_name="notebooks")
    op.drop_constraint("fk_notebooks_owner", "notebooks", type_="foreignkey") \
        if op.get_bind().dialect.name != "sqlite" else None
    op.drop_column("notebooks", "owner_id")
    op.drop_index("ix_users_name", table_name="users")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("password_hash")
        batch.drop_column("role")
