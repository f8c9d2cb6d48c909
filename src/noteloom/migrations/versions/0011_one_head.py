"""One head: the branches that grew off 0001 meet here, and every migration from now on
follows the single head (see docs/schema.md).

Nothing changes in the schema. A database at every head of before (or at any mix of them)
upgrades to this revision; its version table then holds this one row.

0005 relies on 0002's index of live notes without naming it: both ran in the one upgrade
to every head, and from here on every migration runs after both. ``depends_on`` is not
added to 0005 after the fact: Alembic would then expect another version table than the
one existing databases hold, and refuse to upgrade them ("0005 overlaps with
0002_keyword_index").

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
