"""The recipes' tables (SQLAlchemy Core); migration ``0013`` creates them.

A recipe is a saved piece of LLM work with a schedule; each time it runs is a run of the
run engine (``runs``, kind ``recipe``) with the recipe's own record of it beside
(``recipe_runs``: trigger, the recipe's status, output, what it was asked to spend). A
pipeline recipe keeps one processing-log row per item it handled (``recipe_items``); an
agent recipe keeps a scratch document it rewrites each run (``recipes.scratch``) and
reads the notes its user leaves it (``recipe_notes``). What a recipe's run tells its
owner is a notification (``notifications``), shown in the app and sent to webhooks.
What pipeline jobs write about notes is the workspace's (``noteloom.workspace.annotations``).
"""

from __future__ import annotations

import sqlalchemy as sa

from noteloom.db import ID, MS, metadata

USD = sa.String(40)  # decimal text, as the chat keeps money

recipes = sa.Table(
    "recipes",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),  # agent | pipeline
    sa.Column("prompt", sa.Text, nullable=False),
    # Agent mode: the tools offered (names; unknown ones are skipped and said in the trace).
    sa.Column("tools", sa.JSON, nullable=False),
    sa.Column("model", sa.String(200)),
    # temperature, top_p, thinking_level, max_tokens
    sa.Column("controls", sa.JSON, nullable=False),
    # A cron expression, "manual" or "interactive"; the cron is read in ``timezone``.
    sa.Column("schedule", sa.String(200), nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("missed", sa.String(16), nullable=False),  # skip | run_once | catch_up
    # max_input_tokens, max_output_tokens, max_cost, max_tool_calls, time_limit
    sa.Column("budgets", sa.JSON, nullable=False),
    sa.Column("job", sa.String(64)),
    sa.Column("job_config", sa.JSON, nullable=False),
    sa.Column("batch_size", sa.Integer, nullable=False),
    # on_success, on_flagged (the others always notify), webhook ids
    sa.Column("notify", sa.JSON, nullable=False),
    # Tools whose ``confirm`` policy this recipe was signed off for when it was saved.
    sa.Column("signed_off", sa.JSON, nullable=False),
    sa.Column("allow_tainted_writes", sa.Boolean, nullable=False),
    sa.Column("tainted_ack_user_id", ID),
    sa.Column("tainted_ack_time", MS),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("paused_reason", sa.Text),
    sa.Column("failures", sa.Integer, nullable=False),  # consecutive failed runs
    sa.Column("pause_after", sa.Integer, nullable=False),
    # The next time the schedule fires (UTC ms); NULL for manual and interactive recipes.
    sa.Column("next_fire_time", MS),
    sa.Column("scratch", sa.Text, nullable=False),  # agent mode's workspace document
    # The data sources its generic reads may use (NULL: none; see noteloom's data tools).
    sa.Column("data_sources", sa.JSON),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
    sa.UniqueConstraint("user_id", "name", name="uq_recipes_user_name"),
    sa.Index("ix_recipes_due", "enabled", "next_fire_time"),
)

recipe_runs = sa.Table(
    "recipe_runs",
    metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),  # schedule | manual | catch_up | chat
    # queued | running | succeeded | failed | cancelled | skipped_overlap | awaiting_approval
    # | budget_exceeded | timeout
    sa.Column("status", sa.String(24), nullable=False),
    # The fire time this run answers (scheduled runs), UTC ms.
    sa.Column("scheduled_time", MS),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("model", sa.String(200)),
    sa.Column("controls", sa.JSON, nullable=False),
    sa.Column("budgets", sa.JSON, nullable=False),
    sa.Column("output", sa.Text),
    sa.Column("error_code", sa.String(40)),
    sa.Column("error_message", sa.Text),
    # Agent mode: the transcript so far (a run parked for approval goes on from it).
    sa.Column("transcript", sa.JSON),
    # Pipeline mode: the tally of the run's items.
    sa.Column("items_done", sa.Integer, nullable=False),
    sa.Column("items_failed", sa.Integer, nullable=False),
    sa.Column("tool_calls", sa.Integer, nullable=False),
    sa.Column("dry_run", sa.Boolean, nullable=False),
    # The memories the run's prompt was given.
    sa.Column("memories", sa.JSON),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("finished_time", MS),
    sa.Index("ix_recipe_runs_recipe", "recipe_id", "created_time"),
    sa.Index("ix_recipe_runs_status", "status"),
)

recipe_items = sa.Table(
    "recipe_items",
    metadata,
    sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("item_key", sa.String(200), primary_key=True),
    sa.Column("label", sa.String(300), nullable=False),
    sa.Column("status", sa.String(8), nullable=False),  # done | error
    # No foreign key: the log outlives the run that wrote it (runs are purged with their chats).
    sa.Column("run_id", ID),
    sa.Column("verdict", sa.JSON),
    sa.Column("error", sa.Text),
    sa.Column("time", MS, nullable=False),
)

recipe_notes = sa.Table(
    "recipe_notes",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("recipe_id", ID, sa.ForeignKey("recipes.id", ondelete="CASCADE"), nullable=False),
    sa.Column("author", sa.String(8), nullable=False),  # user | recipe
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("run_id", ID),  # the run that wrote it (author "recipe")
    sa.Column("created_time", MS, nullable=False),
    sa.Index("ix_recipe_notes_recipe", "recipe_id", "created_time"),
)

notifications = sa.Table(
    "notifications",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # failure | approval | budget | success | flagged | paused
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("title", sa.String(300), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    # No foreign keys: a notification outlives the recipe or run it speaks of.
    sa.Column("recipe_id", ID),
    sa.Column("run_id", ID),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("read_time", MS),
    sa.Index("ix_notifications_user", "user_id", "read_time", "created_time"),
)

webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    # The HMAC-SHA256 key the receiver checks the body's signature with.
    sa.Column("secret", sa.String(128), nullable=False),
    sa.Column("kinds", sa.JSON, nullable=False),  # the notification kinds it receives
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("last_status", sa.String(200)),
    sa.Column("last_time", MS),
    sa.Column("created_time", MS, nullable=False),
)
