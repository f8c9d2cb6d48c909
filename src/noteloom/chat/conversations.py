"""Conversations: create, list (pinned first, then most recent), search, rename, pin,
change controls, delete (soft) and purge (for good, with everything that hangs off them).

Every method takes the acting user's id: a conversation of someone else reads as
missing. Blocking (database) calls; async callers run them in a worker thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.chat import search as search_text
from noteloom.chat import tables as t
from noteloom.chat.records import Controls, Conversation, check_controls
from noteloom.chat.sealing import (
    CONVERSATION_FIELDS,
    LOCKED_TITLE,
    ChatSeal,
    Level,
    check_level,
    is_protected,
    level_for_write,
    seal_values,
)
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, InvalidInput, NotFound
from noteloom.messages import Usage
from noteloom.runs import store as runs
from noteloom.vault import Keys, Vault

TITLE_MAX = 200


def title_from(text: str, limit: int = 60) -> str:
    """A conversation title from its first message: the first line, shortened at a word."""
    line = " ".join(text.strip().split("\n", 1)[0].split()) or "New chat"
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] or line[:limit]
    return cut.rstrip(",.;:") + "…"


def conversation_from_row(r: Any, keys: Keys | None = None) -> Conversation:
    """A conversation from its row; a protected one's title and instructions opened with
    ``keys`` (the owner's), or shown locked without them."""
    title, instructions, locked = r.title, r.instructions, False
    if is_protected(r.security_level):
        if keys is not None and keys.user_id == r.user_id:
            title = keys.open_text(r.id, "title", r.title)
            instructions = None if r.instructions is None else keys.open_text(r.id, "instructions", r.instructions)
        else:
            title, instructions, locked = LOCKED_TITLE, None, True
    controls = Controls(
        model=r.model,
        temperature=r.temperature,
        top_p=r.top_p,
        max_tokens=r.max_tokens,
        thinking_level=r.thinking_level,
        instructions=instructions,
        workspace_tools=bool(r.workspace_tools),
        workspace_writes=bool(r.workspace_writes),
        max_steps=r.max_steps,
        max_cost=r.max_cost,
        time_limit=r.time_limit,
        tool_policies=dict(r.tool_policies or {}),
        memory_access=_flag(r.memory_access),
        history_access=_flag(r.history_access),
        web_access=_flag(r.web_access),
        data_access=_flag(r.data_access),
        data_sources=[str(x) for x in r.data_sources] if isinstance(r.data_sources, list) else None,
        attachment_mode=r.attachment_mode,
    )
    return Conversation(
        id=r.id,
        user_id=r.user_id,
        title=title,
        pinned=bool(r.pinned),
        controls=controls,
        input_tokens=int(r.input_tokens),
        output_tokens=int(r.output_tokens),
        cost_usd=Decimal(r.cost_usd),
        unpriced_turns=int(r.unpriced_turns),
        created_time=r.created_time,
        updated_time=r.updated_time,
        deleted_time=r.deleted_time,
        security_level=r.security_level,
        locked=locked,
    )


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def missing(conversation_id: str) -> str:
    """The one message for a conversation that is missing, deleted or someone else's."""
    return f"conversation {conversation_id!r} does not exist; GET /api/v1/chat/conversations lists yours"


class Conversations:
    """The chat's conversations, owner-scoped."""

    def __init__(self, engine: Engine, seal: ChatSeal | None = None) -> None:
        self.engine = engine
        self.seal = seal or ChatSeal(Vault(engine))

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    def create(
        self, user_id: str, *, title: str = "", controls: Controls | None = None, level: Level = "standard",
        keys: Keys | None = None, conn: Connection | None = None,
    ) -> Conversation:
        """A new conversation; a protected ``level`` seals its title and instructions (to the
        owner's public key: ``keys`` only show them in the answer)."""
        c0 = check_controls(controls or Controls())
        level = check_level(level)
        tm = now_ms()
        row: dict[str, Any] = {
            "id": new_id(),
            "user_id": user_id,
            "title": _clean_title(title) if title.strip() else "New chat",
            "pinned": False,
            **asdict(c0),
            "security_level": level,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": "0",
            "unpriced_turns": 0,
            "created_time": tm,
            "updated_time": tm,
        }
        with self._w(conn) as c:
            if is_protected(level):
                self.seal.require_vault(user_id, conn=c)
                row = seal_values(self.seal.sealer(user_id, conn=c), row["id"], row, CONVERSATION_FIELDS)
            c.execute(t.conversations.insert(), row)
            return self.get(user_id, row["id"], keys=keys, conn=c)

    def get(
        self, user_id: str, conversation_id: str, *, include_deleted: bool = False, keys: Keys | None = None,
        conn: Connection | None = None,
    ) -> Conversation:
        with self._r(conn) as c:
            r = c.execute(
                sa.select(t.conversations).where(
                    t.conversations.c.id == conversation_id, t.conversations.c.user_id == user_id
                )
            ).first()
        if r is None or (r.deleted_time is not None and not include_deleted):
            raise NotFound(missing(conversation_id))
        return conversation_from_row(r, keys)

    def get_any(self, conversation_id: str, *, keys: Keys | None = None, conn: Connection | None = None) -> Conversation:
        """A conversation whoever owns it (for the turn runner, which acts for its owner)."""
        with self._r(conn) as c:
            r = c.execute(sa.select(t.conversations).where(t.conversations.c.id == conversation_id)).first()
        if r is None:
            raise NotFound(missing(conversation_id))
        return conversation_from_row(r, keys)

    def find(
        self,
        user_id: str,
        *,
        search: str | None = None,
        deleted: bool = False,
        limit: int = 100,
        offset: int = 0,
        keys: Keys | None = None,
        conn: Connection | None = None,
    ) -> list[Conversation]:
        """Pinned first, then most recently active. ``search`` matches the title or any
        message's text, literally (``%`` and ``_`` are plain characters), ignoring case, through
        :func:`noteloom.chat.search.matching` (so only conversations ``searchable()`` admits:
        standard ones; protected ones are matched by :mod:`noteloom.chat.search` with the keys)."""
        cv = t.conversations
        q = sa.select(cv).where(cv.c.user_id == user_id)
        q = q.where(cv.c.deleted_time.is_not(None) if deleted else cv.c.deleted_time.is_(None))
        term = (search or "").strip()
        q = q.order_by(cv.c.pinned.desc(), cv.c.updated_time.desc(), cv.c.id)
        with self._r(conn) as c:
            if not term:
                return [conversation_from_row(r, keys) for r in c.execute(q.limit(limit).offset(offset))]
            q = q.where(search_text.matching(term.lower(), c.dialect.name, roles=None))
            if keys is None:
                return [conversation_from_row(r, keys) for r in c.execute(q.limit(limit).offset(offset))]
            # Protected ones are matched by opening them; the two lists merged in the list's order.
            rows = [*c.execute(q.limit(limit + offset)).all(),
                    *(p.row for p in search_text.protected_matches(c, user_id, term.lower(), keys, roles=None,
                                                                   deleted=deleted))]
            rows.sort(key=lambda r: (not r.pinned, -r.updated_time, r.id))
            return [conversation_from_row(r, keys) for r in rows[offset:offset + limit]]

    def update(
        self,
        user_id: str,
        conversation_id: str,
        *,
        title: str | None = None,
        pinned: bool | None = None,
        controls: dict[str, Any] | None = None,
        keys: Keys | None = None,
        conn: Connection | None = None,
    ) -> Conversation:
        """Rename, pin or unpin, and change controls (only the keys given: a locked chat's
        instructions are never written back). A protected chat's new title and instructions
        are sealed (its owner's public key is enough)."""
        with self._w(conn) as c:
            current = self.get(user_id, conversation_id, conn=c)
            values: dict[str, Any] = {}
            if title is not None:
                values["title"] = _clean_title(title)
            if pinned is not None:
                values["pinned"] = bool(pinned)
            if controls:
                merged = asdict(current.controls.merged(controls))
                values.update({k: merged[k] for k in controls})
            if values:
                owner, level = level_for_write(c, conversation_id)
                if is_protected(level):
                    values = seal_values(self.seal.sealer(owner, conn=c), conversation_id, values, CONVERSATION_FIELDS)
                # Renaming or pinning is not activity: the list order stays put.
                c.execute(t.conversations.update().where(t.conversations.c.id == conversation_id).values(**values))
            return self.get(user_id, conversation_id, keys=keys, conn=c)

    def touch(self, conversation_id: str, *, conn: Connection) -> None:
        """Mark activity: the conversation moves to the top of the list."""
        conn.execute(
            t.conversations.update().where(t.conversations.c.id == conversation_id).values(updated_time=now_ms())
        )

    def add_usage(self, conversation_id: str, usage: Usage, cost: Decimal | None, *, conn: Connection) -> None:
        """Add one turn's tokens and cost to the running totals."""
        r = conn.execute(
            sa.select(t.conversations.c.cost_usd, t.conversations.c.unpriced_turns).where(
                t.conversations.c.id == conversation_id
            )
        ).first()
        if r is None:
            return
        total = Decimal(r.cost_usd) + (cost or Decimal(0))
        conn.execute(
            t.conversations.update()
            .where(t.conversations.c.id == conversation_id)
            .values(
                input_tokens=t.conversations.c.input_tokens + usage.input_tokens,
                output_tokens=t.conversations.c.output_tokens + usage.output_tokens,
                cost_usd=format_usd(total),
                unpriced_turns=r.unpriced_turns + (1 if cost is None else 0),
            )
        )

    def delete(self, user_id: str, conversation_id: str, *, conn: Connection | None = None) -> None:
        """Hide a conversation (it stays in the database until purged)."""
        with self._w(conn) as c:
            self.get(user_id, conversation_id, conn=c)
            c.execute(
                t.conversations.update().where(t.conversations.c.id == conversation_id).values(deleted_time=now_ms())
            )

    def restore(self, user_id: str, conversation_id: str, *, conn: Connection | None = None) -> Conversation:
        with self._w(conn) as c:
            self.get(user_id, conversation_id, include_deleted=True, conn=c)
            c.execute(t.conversations.update().where(t.conversations.c.id == conversation_id).values(deleted_time=None))
            return self.get(user_id, conversation_id, conn=c)

    def purge(self, user_id: str, conversation_id: str, *, conn: Connection | None = None) -> int:
        """Delete a conversation for good with its messages, events, pending actions and
        proposed edits; returns the number of messages removed. Works on live and deleted ones."""
        with self._w(conn) as c:
            self.get(user_id, conversation_id, include_deleted=True, conn=c)
            _refuse_running(c, [conversation_id])
            return purge_rows(c, [conversation_id])

    def purge_deleted(self, user_id: str, *, conn: Connection | None = None) -> int:
        """Purge every deleted conversation of ``user_id``; returns how many."""
        with self._w(conn) as c:
            ids = list(
                c.execute(
                    sa.select(t.conversations.c.id).where(
                        t.conversations.c.user_id == user_id, t.conversations.c.deleted_time.is_not(None)
                    )
                ).scalars()
            )
            _refuse_running(c, ids)
            purge_rows(c, ids)
            return len(ids)


def _refuse_running(c: Connection, conversation_ids: list[str]) -> None:
    """A turn still running would write into rows that are gone: it must end first."""
    if not conversation_ids:
        return
    busy = c.execute(
        sa.select(t.messages.c.conversation_id).where(
            t.messages.c.conversation_id.in_(conversation_ids), t.messages.c.status == "running"
        ).limit(1)
    ).scalar()
    if busy is not None:
        raise Conflict(f"conversation {busy!r} has a turn running; cancel it (or wait for it) before purging")


def purge_rows(c: Connection, conversation_ids: list[str]) -> int:
    """Delete conversations and what hangs off them, children first: the cascade is explicit
    so it does not depend on SQLite's foreign-key pragma being on for this connection."""
    if not conversation_ids:
        return 0
    msg_ids = list(
        c.execute(sa.select(t.messages.c.id).where(t.messages.c.conversation_id.in_(conversation_ids))).scalars()
    )
    for i in range(0, len(msg_ids), 500):
        chunk = msg_ids[i : i + 500]
        for child in (t.pending_actions, t.edits):
            c.execute(child.delete().where(child.c.message_id.in_(chunk)))
    runs.purge(c, msg_ids)  # each assistant message's run: its events and calls
    # Attachments' link rows (their bytes are the caller's to remove: ChatService does).
    c.execute(t.attachments.delete().where(t.attachments.c.conversation_id.in_(conversation_ids)))
    c.execute(t.messages.delete().where(t.messages.c.conversation_id.in_(conversation_ids)))
    c.execute(t.conversations.delete().where(t.conversations.c.id.in_(conversation_ids)))
    return len(msg_ids)


def format_usd(amount: Decimal) -> str:
    """A dollar amount as text without exponent notation (``1E-7`` would not sort or read well)."""
    text = format(amount.normalize(), "f")
    return text if text not in ("-0", "") else "0"


def _clean_title(title: str) -> str:
    if not isinstance(title, str):
        raise InvalidInput("title must be text", field="title")
    cleaned = " ".join(title.split())
    if not cleaned:
        raise InvalidInput("title must not be empty", field="title")
    if len(cleaned) > TITLE_MAX:
        raise InvalidInput(f"title is {len(cleaned)} characters long; keep it under {TITLE_MAX}", field="title")
    return cleaned

