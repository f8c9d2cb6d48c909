"""The run engine's tables (SQLAlchemy Core); migration ``0012`` creates them.

A run is one durable piece of background work (a chat turn, a recipe run). Its events
are numbered per run from 1; its tool calls are audited one row each, written when the
call starts, so a run that hung names the call it hung in.
"""

from __future__ import annotations

import sqlalchemy as sa

from noteloom.db import ID, MS, metadata

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),  # chat_turn | recipe | …
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
    # No foreign key: the subject (a chat message, a recipe) lives in its owner's tables.
    sa.Column("subject_id", ID),
    # queued | running | waiting | succeeded | failed | cancelled
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error_code", sa.String(40)),
    sa.Column("error_message", sa.Text),
    # The runner (one per process) that runs it; see noteloom.runs.liveness.
    sa.Column("runner_id", ID),
    # A running run refreshes this; one that stops doing so was left behind by a crash.
    sa.Column("heartbeat_time", MS),
    # The cross-process cancel signal: the running run re-reads it.
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    # What the run's model calls cost, over every part of the run (a waiting run goes on).
    sa.Column("model", sa.String(200)),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cost_usd", sa.String(40)),  # decimal text; NULL: unknown (never a made-up zero)
    sa.Column("created_time", MS, nullable=False),
    sa.Column("started_time", MS),
    sa.Column("finished_time", MS),
    sa.Column("updated_time", MS, nullable=False),
    sa.Index("ix_runs_status", "status"),
    sa.Index("ix_runs_subject", "kind", "subject_id"),
)

events = sa.Table(
    "run_events",
    metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("time", MS, nullable=False),
)

calls = sa.Table(
    "run_calls",
    metadata,
    sa.Column("run_id", ID, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("call_id", sa.String(200), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("arguments", sa.JSON, nullable=False),  # bounded: see noteloom.runs.store.ARGUMENTS_MAX
    sa.Column("started_time", MS, nullable=False),
    sa.Column("finished_time", MS),
    # NULL while the call runs; ok | error | denied | held | interrupted once it ended.
    sa.Column("outcome", sa.String(16)),
    sa.Column("error", sa.Text),
    # What the call returned, as the model read it (bounded: noteloom.runs.store.OUTPUT_MAX).
    sa.Column("output", sa.Text),
)
