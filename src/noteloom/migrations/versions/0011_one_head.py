"""One head: the branches that grew off 0001 meet here, and every migration from now on
follows the single head (see docs/schema.md).

Nothing changes in the schema. A database at every head of before (or at any mix of them)
upgrades to this revision; its version table then holds this one row.

Revision ID: 0011_one_head
Revises: 0002_keyword_index, 0003, 0005, 0006, 0007, 0010_conversation_tool_policies
"""

revision = "0011_one_head"
down_revision = ("0002_keyword_index", "0003", "0005", "0006", "0007", "0010_conversation_tool_policies")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
