"""The chat's tables (SQLAlchemy Core); migration ``0004`` creates them.

A conversation belongs to one user. Each message is one row; an assistant row keeps
the canonical messages of its turn (model replies and tool results) so the turn
replays exactly. Pending actions and proposed edits hang off the assistant message and
go with it. Each assistant message is also a run of the run engine (``noteloom.runs``,
``kind = "chat_turn"``, the run's id is the message's): the run holds the turn's
heartbeat, runner, cancel flag, numbered events and call records; the message keeps
its status as the chat shows it (``complete``, ``awaiting_confirmation`` …), written in
the same transactions as the run's.
"""

from __future__ import annotations

import sqlalchemy as sa

from noteloom.db import MS, metadata

ID = sa.String(32)
#: A decimal amount of US dollars as text: exact on both engines (SQLite has no DECIMAL).
USD = sa.String(40)

conversations = sa.Table(
    "chat_conversations",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("title", sa.Text, nullable=False, default=""),
    sa.Column("pinned", sa.Boolean, nullable=False, default=False),
    # Controls; NULL means "the setting's default".
    sa.Column("model", sa.String(200)),
    sa.Column("temperature", sa.Float),
    sa.Column("top_p", sa.Float),
    sa.Column("max_tokens", sa.Integer),
    sa.Column("thinking_level", sa.String(16)),
    sa.Column("instructions", sa.Text),
    sa.Column("workspace_tools", sa.Boolean, nullable=False, default=True),
    sa.Column("workspace_writes", sa.Boolean, nullable=False, default=True),
    # The conversation's budgets per turn (NULL: [agent] in noteloom.toml, else the default).
    sa.Column("max_steps", sa.Integer),
    sa.Column("max_cost", USD),
    sa.Column("time_limit", sa.Float),
    sa.Column("tool_policies", sa.JSON),
    # Capabilities (NULL: the default; memory follows the workspace's, the others are off):
    # the memory tools and context, search over past chats, the web tools, generic reads.
    sa.Column("memory_access", sa.Boolean),
    sa.Column("history_access", sa.Boolean),
    sa.Column("web_access", sa.Boolean),
    sa.Column("data_access", sa.Boolean),
    # The data sources this chat may read (NULL: every source the workspace opted in).
    sa.Column("data_sources", sa.JSON),
    # How attachments reach the model: extract | on_demand | original (NULL: extract).
    sa.Column("attachment_mode", sa.String(16)),
    # standard (in clear) | private (content sealed at rest) | fortress (sealed, and its
    # turns run on a private model only); see noteloom.chat.sealing.
    sa.Column("security_level", sa.String(16), nullable=False, server_default="standard", default="standard"),
    # Running totals over the conversation's turns.
    sa.Column("input_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cost_usd", USD, nullable=False, default="0"),
    # Turns whose price nobody knew: the total above is then a lower bound.
    sa.Column("unpriced_turns", sa.Integer, nullable=False, default=0),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
    sa.Column("deleted_time", MS),
    # The last message of the path the conversation shows (and a new turn reads); see
    # noteloom.chat.branches. NULL: its last message by position.
    sa.Column("leaf_id", ID),
    sa.Index("ix_chat_conversations_user", "user_id", "updated_time"),
)

messages = sa.Table(
    "chat_messages",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column(
        "conversation_id", ID, sa.ForeignKey("chat_conversations.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("position", sa.Integer, nullable=False),
    # The message this one follows (NULL: the first). Siblings are branches of each other.
    sa.Column("parent_id", ID),
    sa.Column("role", sa.String(16), nullable=False),  # user | assistant | note
    # Note rows: the slash command that wrote them (``clear`` starts a fresh context).
    sa.Column("command", sa.String(32)),
    sa.Column("content", sa.Text, nullable=False, default=""),
    # Assistant rows: the turn's canonical messages as a JSON list (see noteloom.messages).
    sa.Column("transcript", sa.Text),
    sa.Column("status", sa.String(24), nullable=False),
    sa.Column("error_code", sa.String(40)),
    sa.Column("error_message", sa.Text),
    sa.Column("activity", sa.Text),
    sa.Column("model", sa.String(200)),
    sa.Column("stop_reason", sa.String(32)),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("reasoning_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cost_usd", USD),  # NULL: unknown
    # The note the user had open when sending, and the selected text then.
    sa.Column("note_id", ID),
    sa.Column("selection_start", sa.Integer),
    sa.Column("selection_end", sa.Integer),
    sa.Column("selection_text", sa.Text),
    # Assistant rows: the memories the turn's prompt was given (ids, titles, which layer).
    sa.Column("memories", sa.JSON),
    # The content columns (content, transcript, error_message, selection_text) hold sealed values.
    sa.Column("sealed", sa.Boolean, nullable=False, server_default=sa.false(), default=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("started_time", MS),
    sa.Column("finished_time", MS),
    sa.Column("updated_time", MS, nullable=False),
    sa.UniqueConstraint("conversation_id", "position", name="uq_chat_messages_position"),
    sa.Index("ix_chat_messages_status", "status"),
    sa.Index("ix_chat_messages_parent", "conversation_id", "parent_id"),
)

pending_actions = sa.Table(
    "chat_pending_actions",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("call_id", sa.String(200), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),  # JSON
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # pending | approved | declined
    sa.Column("created_time", MS, nullable=False),
    sa.Column("decided_time", MS),
    # arguments and description hold sealed values.
    sa.Column("sealed", sa.Boolean, nullable=False, server_default=sa.false(), default=False),
)

edits = sa.Table(
    "chat_edits",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False, index=True),
    # No foreign key: an edit outlives a purged note (and then can no longer be accepted).
    sa.Column("note_id", ID, nullable=False),
    sa.Column("tool", sa.String(64), nullable=False),
    # How to find the place again: an anchor text, a fenced block's tag, or a selection.
    sa.Column("anchor", sa.Text),
    sa.Column("span_start", sa.Integer, nullable=False),
    sa.Column("span_end", sa.Integer, nullable=False),
    sa.Column("old_text", sa.Text, nullable=False),
    sa.Column("new_text", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),  # what the model wrote
    sa.Column("status", sa.String(16), nullable=False),  # proposed | accepted | rejected | undone
    # On accept: the revision that holds the version before the edit, and the note's time after.
    sa.Column("revision_id", ID),
    sa.Column("applied_time", MS),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("decided_time", MS),
)

#: Files attached to a user's message: one link row per (message, file). The bytes live in
#: the workspace's attachment store (``attachments/chat``, ``blob_key``); the text extracted
#: at ingress is kept here once. Deleting the conversation removes the bytes and the text
#: (``blob_key``, ``extracted_text`` NULL, ``removed_time`` set); purging removes the rows.
attachments = sa.Table(
    "chat_attachments",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("message_id", ID, sa.ForeignKey("chat_messages.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column(
        "conversation_id", ID, sa.ForeignKey("chat_conversations.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    # The owner; checked against the conversation's owner again before a turn reads the file.
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("name", sa.Text, nullable=False),  # at most 255 characters, or a sealed value
    sa.Column("kind", sa.String(8), nullable=False),  # image | pdf | text | html
    sa.Column("mime", sa.String(100), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("blob_key", sa.String(64)),
    sa.Column("extracted_text", sa.Text),
    sa.Column("extract_status", sa.String(16), nullable=False),  # ok | verbatim | no_text | failed | not_needed
    sa.Column("extract_detail", sa.Text),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("removed_time", MS),
    # name, extracted_text and the stored bytes are sealed (sha256 is then empty: a hash of
    # a known file would confirm it).
    sa.Column("sealed", sa.Boolean, nullable=False, server_default=sa.false(), default=False),
)
