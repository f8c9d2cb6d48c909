"""The run engine's tables: runs, their numbered events and their tool-call records; the
chat's turns move onto them.

Durable background work (a chat turn today, a recipe run next) is a row in ``runs`` with
a status, a runner, a heartbeat, a cancel flag and what its model calls cost; its events are numbered per run in
``run_events``; each tool call it makes is audited in ``run_calls``, written when the
call starts, so a run that hung names the call it was in.

Every assistant message becomes a run of kind ``chat_turn`` with the message's id (its
status mapped: complete → succeeded, awaiting_confirmation → waiting, the others kept),
with its runner, heartbeat, cancel flag, model, tokens, cost and times; its ``chat_events`` become the run's
``run_events`` with the same numbers. ``chat_events`` and the three columns the run now
holds (``chat_messages.heartbeat_time``, ``runner_id``, ``cancel_requested``) go; the
message keeps its status as the chat shows it. The downgrade puts them back from the runs.

Revision ID: 0012_run_engine
Revises: 0011_one_head
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_run_engine"
down_revision = "0011_one_head"
branch_labels = None
depends_on = None

ID = sa.String(32)
MS = sa.BigInteger

_RUN_STATUS = (
    "CASE m.status WHEN 'complete' THEN 'succeeded' WHEN 'awaiting_confirmation' THEN 'waiting' "
    "WHEN 'running' THEN 'running' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END"
)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
        sa.Column("subject_id", ID),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(40)),
        sa.Column("error_message", sa.Text),
        sa.Column("runner_id", ID),
        sa.Column("heartbeat_time", MS),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", sa.String(40)),
        sa.Column("created_time", MS, nullable=False),
        sa.Column("started_time", MS),
        sa.Column("finished_time", MS),
        sa.Column("updated_time", MS, nullable=False),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_subject", "runs", ["kind", "subject_id"])
    op.create_table(
        "run_events",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("time", MS, nullable=False),
    )
    op.create_table(
        "run_calls",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments", sa.JSON, nullable=False),
        sa.Column("started_time", MS, nullable=False),
        sa.Column("finished_time", MS),
        sa.Column("outcome", sa.String(16)),
        sa.Column("error", sa.Text),
    )

    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute(
        "INSERT INTO runs (id, kind, user_id, subject_id, status, error_code, error_message, runner_id, "
        "heartbeat_time, cancel_requested, model, input_tokens, output_tokens, cost_usd, created_time, "
        "started_time, finished_time, updated_time) "
        f"SELECT m.id, 'chat_turn', c.user_id, m.id, {_RUN_STATUS}, m.error_code, m.error_message, m.runner_id, "
        "m.heartbeat_time, m.cancel_requested, m.model, m.input_tokens, m.output_tokens, m.cost_usd, "
        "m.created_time, m.started_time, m.finished_time, m.updated_time "
        "FROM chat_messages m JOIN chat_conversations c ON c.id = m.conversation_id WHERE m.role = 'assistant'"
    )
    data = "CAST(e.data AS JSON)" if postgres else "e.data"
    op.execute(
        "INSERT INTO run_events (run_id, seq, kind, data, time) "
        f"SELECT e.message_id, e.seq, e.kind, {data}, e.time FROM chat_events e "
        "WHERE e.message_id IN (SELECT id FROM runs)"
    )
    op.drop_table("chat_events")
    with op.batch_alter_table("chat_messages") as batch:
        batch.drop_column("cancel_requested")
        batch.drop_column("heartbeat_time")
        batch.drop_column("runner_id")


def downgrade() -> None:
    with op.batch_alter_table("chat_messages") as batch:
        batch.add_column(sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("heartbeat_time", MS))
        batch.add_column(sa.Column("runner_id", ID))
    op.execute(
        "UPDATE chat_messages SET "
        "heartbeat_time = (SELECT r.heartbeat_time FROM runs r WHERE r.id = chat_messages.id), "
        "runner_id = (SELECT r.runner_id FROM runs r WHERE r.id = chat_messages.id), "
        "cancel_requested = COALESCE((SELECT r.cancel_requested FROM runs r WHERE r.id = chat_messages.id), "
        "cancel_requested)"
    )
    with op.batch_alter_table("chat_messages") as batch:
        batch.alter_column("cancel_requested", server_default=None, existing_type=sa.Boolean, existing_nullable=False)
    op.create_table(
        "chat_events",
        sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("time", MS, nullable=False),
    )
    op.execute(
        "INSERT INTO chat_events (message_id, seq, kind, data, time) "
        "SELECT e.run_id, e.seq, e.kind, CAST(e.data AS TEXT), e.time FROM run_events e "
        "JOIN runs r ON r.id = e.run_id WHERE r.kind = 'chat_turn' AND e.run_id IN (SELECT id FROM chat_messages)"
    )
    op.drop_table("run_calls")
    op.drop_table("run_events")
    op.drop_index("ix_runs_subject", table_name="runs")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_table("runs")
