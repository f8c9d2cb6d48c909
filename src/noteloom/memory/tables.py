"""The memories table (SQLAlchemy Core); migration ``0014`` creates it.

One fact a row. ``scope`` is ``personal`` (``user_id`` is its owner) or ``shared`` (the
workspace's: ``user_id`` is NULL, ``created_by`` is the person who wrote it). ``source`` is
``ai`` (written by a tool call: ``conversation_id``/``run_id`` and ``message_id`` say where)
or ``user``. A forgotten memory keeps its row with ``deleted_time`` set.
"""

from __future__ import annotations

import sqlalchemy as sa

from noteloom.db import ID, MS, metadata

memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("scope", sa.String(16), nullable=False),  # personal | shared
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
    sa.Column("title", sa.String(255), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("source", sa.String(8), nullable=False),  # ai | user
    # Where an AI-written memory came from. No foreign keys: a memory outlives its chat.
    sa.Column("conversation_id", ID),
    sa.Column("run_id", ID),
    sa.Column("message_id", ID),
    sa.Column("created_by", ID),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
    sa.Column("deleted_time", MS),
    sa.Index("ix_memories_owner", "scope", "user_id", "deleted_time"),
)
