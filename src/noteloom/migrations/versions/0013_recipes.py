"""Recipes: saved LLM work with a schedule, its runs, its processing log, its notes; the
notifications it sends; what pipeline jobs write about notes; a tool call's output.

``recipes`` holds each recipe (mode, prompt, tools, model and controls, schedule and time
zone, missed-run policy, budgets, pipeline job and its settings, notification rules, the
taint acknowledgment, paused or not, the next fire time). Each run of a recipe is a run
of the run engine with a ``recipe_runs`` row beside it (trigger, the recipe's status,
output, the budgets and controls it ran with). ``recipe_items`` is pipeline mode's
processing log, one row per (recipe, item); ``recipe_notes`` the notes between a recipe
and its owner. ``notifications`` and ``webhooks`` carry what runs tell their owners.
``note_annotations`` keeps what pipeline jobs found about a note (its one-line summary, a
clip's danger score); ``job_outputs`` the notes a job made from a source note, so a
re-run updates them. ``run_calls.output`` keeps what a call returned, for the trace.

Revision ID: 0013_recipes
Revises: 0012_run_engine
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_recipes"
down_revision = "0012_run_engine"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger


def upgrade() -> None:
    op.create_table(
        "recipes",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("tools", sa.JSON, nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("controls", sa.JSON, nullable=False),
        sa.Column("schedule", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("missed", sa.String(16), nullable=False),
        sa.Column("budgets", sa.JSON, nullable=False),
        sa.Column("job", sa.String(64)),
        sa.Column("job_config", sa.JSON, nullable=False),
        sa.Column("batch_size", sa.Integer, nullable=False),
        sa.Column("notify", sa.JSON, nullable=False),
        sa.Column("signed_off", sa.JSON, nullable=False),
        sa.Column("allow_tainted_writes", sa.Boolean, nullable=False),
        sa.Column("tainted_ack_user_id", ID),
        sa.Column("tainted_ack_time", MS),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("paused_reason", sa.Text),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("pause_after", sa.Integer, nullable=False),
        sa.Column("next_fire_time", MS),
        sa.Column("scratch", sa.Text, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
        sa.UniqueConstraint("user_id", "name", name="uq_recipes_user_name"),
    )
    op.create_index("ix_recipes_due", "recipes", ["enabled", "next_fire_time"])
    op.create_table(
        "recipe_runs",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("scheduled_time", MS),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("controls", sa.JSON, nullable=False),
        sa.Column("budgets", sa.JSON, nullable=False),
        sa.Column("output", sa.Text),
        sa.Column("error_code", sa.String(40)),
        sa.Column("error_message", sa.Text),
        sa.Column("transcript", sa.JSON),
        sa.Column("items_done", sa.Integer, nullable=False),
        sa.Column("items_failed", sa.Integer, nullable=False),
        sa.Column("tool_calls", sa.Integer, nullable=False),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("finished_time", MS),
    )
    op.create_index("ix_recipe_runs_recipe", "recipe_runs", ["recipe_id", "created_time"])
    op.create_index("ix_recipe_runs_status", "recipe_runs", ["status"])
    op.create_table(
        "recipe_items",
        sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("item_key", sa.String(200), primary_key=True),
        sa.Column("label", sa.String(300), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("run_id", ID),
        sa.Column("verdict", sa.JSON),
        sa.Column("error", sa.Text),
        sa.Column("time", MS, nullable=False),
    )
    op.create_table(
        "recipe_notes",
        sa.Column("id", ID, primary_key=True),
        sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("author", sa.String(8), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("run_id", ID),
        sa.Column("created_time", MS, nullable=False),
    )
    op.create_index("ix_recipe_notes_recipe", "recipe_notes", ["recipe_id", "created_time"])
    op.create_table(
        "notifications",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("recipe_id", ID),
        sa.Column("run_id", ID),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("read_time", MS),
    )
    op.create_index("ix_notifications_user", "notifications", ["user_id", "read_time", "created_time"])
    op.create_table(
        "webhooks",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("kinds", sa.JSON, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("last_status", sa.String(200)),
        sa.Column("last_time", MS),
        sa.Column("created_time", MS, nullable=False),
    )
    op.create_table(
        "note_annotations",
        sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("summary", sa.Text),
        sa.Column("summary_model", sa.String(200)),
        sa.Column("summary_time", MS),
        sa.Column("danger_score", sa.Integer),
        sa.Column("danger_verdict", sa.String(16)),
        sa.Column("red_flags", sa.JSON),
        sa.Column("scan_model", sa.String(200)),
        sa.Column("scan_time", MS),
    )
    op.create_table(
        "job_outputs",
        sa.Column("job", sa.String(64), primary_key=True),
        sa.Column("source_id", ID, primary_key=True),
        sa.Column("slot", sa.String(200), primary_key=True),
        sa.Column("note_id", ID, nullable=False),
        sa.Column("updated_time", MS, nullable=False),
    )
    with op.batch_alter_table("run_calls") as batch:
        batch.add_column(sa.Column("output", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("run_calls") as batch:
        batch.drop_column("output")
    for table in ("job_outputs", "note_annotations", "webhooks", "notifications", "recipe_notes", "recipe_items"):
        op.drop_table(table)
    op.drop_index("ix_recipe_runs_status", "recipe_runs")
    op.drop_index("ix_recipe_runs_recipe", "recipe_runs")
    op.drop_table("recipe_runs")
    op.drop_index("ix_recipes_due", "recipes")
    op.drop_table("recipes")
