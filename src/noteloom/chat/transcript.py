"""The messages of conversations, one row each, and the pending actions of parked turns.

A turn is a user row plus one assistant row whose status moves from ``running`` to
``complete``, ``failed``, ``cancelled`` or ``awaiting_confirmation``; a confirmation
sets it ``running`` again and the same row continues. ``note`` rows hold what slash
commands print; they are shown, never sent to a model. Blocking calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any, Literal, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.chat import tables as t
from noteloom.chat.branches import Node, deepest, path_to
from noteloom.chat.conversations import Conversations, format_usd
from noteloom.chat.records import (
    SETTLED,
    TURN_RUN,
    ChatMessage,
    MessageStatus,
    NoteContext,
    PendingAction,
    Selection,
)
from noteloom.chat.sealing import (
    MESSAGE_FIELDS,
    PENDING_FIELDS,
    is_protected,
    level_for_write,
    level_of_message,
    seal_values,
)
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, NotFound
from noteloom.messages import Message, Usage, messages_from_list, messages_to_list
from noteloom.runs import store as runs
from noteloom.vault import Keys

#: What a turn's error says when the server stopped under it.
INTERRUPTED = "The server stopped while this turn was running. Send the message again to retry."


def path_leaf(rows: Sequence[Node], leaf_id: str | None) -> str | None:
    """The id of the last message of the shown path (what a new message follows)."""
    path = path_to(rows, leaf_id)
    return path[-1].id if path else None


def message_missing(message_id: str) -> str:
    return f"message {message_id!r} does not exist; open the conversation to see its messages"


def _opened_row(r: Any, keys: Keys | None) -> tuple[dict[str, Any], bool]:
    """The content columns of a message row as text, and whether they could not be opened
    (a sealed row read without its owner's keys: they are empty then)."""
    values = {name: getattr(r, name) for name in MESSAGE_FIELDS}
    if not r.sealed:
        return values, False
    if keys is None:
        return {"content": "", "transcript": None, "error_message": None, "selection_text": None}, True
    return {name: None if v is None else keys.open_text(r.id, name, v) for name, v in values.items()}, False


def _message_from_row(r: Any, keys: Keys | None = None) -> ChatMessage:
    values, locked = _opened_row(r, keys)
    context = None
    if r.note_id:
        selection = None
        if r.selection_start is not None and r.selection_end is not None:
            selection = Selection(r.selection_start, r.selection_end, values["selection_text"] or "")
        context = NoteContext(r.note_id, selection)
    text = values["transcript"]
    return ChatMessage(
        id=r.id,
        conversation_id=r.conversation_id,
        position=r.position,
        role=r.role,
        content=values["content"],
        status=r.status,
        created_time=r.created_time,
        updated_time=r.updated_time,
        transcript=tuple(messages_from_list(json.loads(text))) if text else (),
        error_code=r.error_code,
        error_message=values["error_message"],
        activity=r.activity,
        model=r.model,
        stop_reason=r.stop_reason,
        usage=Usage(
            int(r.input_tokens), int(r.output_tokens), int(r.cache_read_tokens),
            int(r.cache_write_tokens), int(r.reasoning_tokens),
        ),
        cost_usd=Decimal(r.cost_usd) if r.cost_usd is not None else None,
        note_context=context,
        command=r.command,
        started_time=r.started_time,
        finished_time=r.finished_time,
        memories=tuple(x for x in r.memories if isinstance(x, dict)) if isinstance(r.memories, list) else None,
        sealed=bool(r.sealed),
        locked=locked,
        parent_id=r.parent_id,
    )


def _pending_from_row(r: Any, keys: Keys | None = None) -> PendingAction:
    arguments, description, locked = r.arguments, r.description, False
    if r.sealed:
        if keys is None:
            arguments, description, locked = "{}", "", True
        else:
            arguments = keys.open_text(r.id, "arguments", r.arguments)
            description = keys.open_text(r.id, "description", r.description)
    return PendingAction(
        r.id, r.message_id, r.call_id, r.tool, json.loads(arguments), description, r.status,
        r.created_time, r.decided_time, locked,
    )


class Transcript:
    """Messages and pending actions, owner-scoped through their conversation."""

    def __init__(self, engine: Engine, conversations: Conversations) -> None:
        self.engine = engine
        self.conversations = conversations

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    # -- reading ----------------------------------------------------------------------

    def get(self, user_id: str, message_id: str, *, keys: Keys | None = None,
            conn: Connection | None = None) -> ChatMessage:
        """A message of one of ``user_id``'s live conversations (a sealed one opened with
        ``keys``, or ``locked`` without them)."""
        m, cv = t.messages, t.conversations
        with self._r(conn) as c:
            r = c.execute(
                sa.select(m)
                .select_from(m.join(cv, cv.c.id == m.c.conversation_id))
                .where(m.c.id == message_id, cv.c.user_id == user_id, cv.c.deleted_time.is_(None))
            ).first()
        if r is None:
            raise NotFound(message_missing(message_id))
        return _message_from_row(r, keys)

    def get_any(self, message_id: str, *, keys: Keys | None = None, conn: Connection | None = None) -> ChatMessage:
        with self._r(conn) as c:
            r = c.execute(sa.select(t.messages).where(t.messages.c.id == message_id)).first()
        if r is None:
            raise NotFound(message_missing(message_id))
        return _message_from_row(r, keys)

    def of_conversation(self, user_id: str, conversation_id: str, *, keys: Keys | None = None,
                        conn: Connection | None = None) -> list[ChatMessage]:
        """The path the conversation shows: its messages down to its current leaf."""
        with self._r(conn) as c:
            self.conversations.get(user_id, conversation_id, conn=c)
            return path_to(self.all_of(conversation_id, keys=keys, conn=c), self.leaf_of(conversation_id, conn=c))

    def leaf_of(self, conversation_id: str, *, conn: Connection) -> str | None:
        """The last message of the conversation's shown path (``None``: its last by position)."""
        return conn.execute(
            sa.select(t.conversations.c.leaf_id).where(t.conversations.c.id == conversation_id)
        ).scalar()

    def nodes(self, conversation_id: str, *, conn: Connection) -> list[Node]:
        """The conversation's message tree: ids, parents and positions only (no content read)."""
        m = t.messages
        return [Node(r.id, r.parent_id, r.position) for r in conn.execute(
            sa.select(m.c.id, m.c.parent_id, m.c.position).where(m.c.conversation_id == conversation_id))]

    def all_of(self, conversation_id: str, *, keys: Keys | None = None, conn: Connection | None = None) -> list[ChatMessage]:
        with self._r(conn) as c:
            rows = c.execute(
                sa.select(t.messages).where(t.messages.c.conversation_id == conversation_id).order_by(t.messages.c.position)
            ).all()
        return [_message_from_row(r, keys) for r in rows]

    def active_turn(self, conversation_id: str, *, conn: Connection) -> ChatMessage | None:
        """The conversation's turn that is running or waits for a confirmation, if any."""
        r = conn.execute(
            sa.select(t.messages)
            .where(
                t.messages.c.conversation_id == conversation_id,
                t.messages.c.status.in_(["running", "awaiting_confirmation"]),
            )
            .limit(1)
        ).first()
        return _message_from_row(r) if r is not None else None

    # -- writing ----------------------------------------------------------------------

    def _next_position(self, conversation_id: str, conn: Connection) -> int:
        top = conn.execute(
            sa.select(sa.func.max(t.messages.c.position)).where(t.messages.c.conversation_id == conversation_id)
        ).scalar()
        return int(top or 0) + 1

    def _lock_conversation(self, conversation_id: str, conn: Connection) -> None:
        """Serialise sends to one conversation (SQLite's write lock does this already)."""
        conn.execute(
            sa.select(t.conversations.c.id).where(t.conversations.c.id == conversation_id).with_for_update()
        ).first()

    def start_exchange(
        self,
        conversation_id: str,
        text: str,
        *,
        note_context: NoteContext | None,
        model: str | None,
        runner_id: str | None = None,
        edit_of: ChatMessage | None = None,
        conn: Connection,
    ) -> tuple[ChatMessage, ChatMessage]:
        """Store the user's message and a ``running`` assistant message after it, and the
        turn's run (the message's id), run by ``runner_id`` (see ``noteloom.runs``). The
        question follows the conversation's current leaf, or with ``edit_of`` (a question
        of the conversation) the message that one follows: a branch beside it. The new
        answer is the conversation's leaf.

        ``Conflict`` when the conversation already has a turn running or parked.
        """
        self._lock_conversation(conversation_id, conn)
        self._refuse_active(conversation_id, conn)
        if edit_of is not None:
            parent = edit_of.parent_id
        else:
            parent = path_leaf(self.nodes(conversation_id, conn=conn), self.leaf_of(conversation_id, conn=conn))
        pos = self._next_position(conversation_id, conn)
        tm = now_ms()
        sel = note_context.selection if note_context else None
        common = {
            "conversation_id": conversation_id,
            "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
            "reasoning_tokens": 0, "created_time": tm, "updated_time": tm,
            "note_id": note_context.note_id if note_context else None,
            "selection_start": sel.start if sel else None,
            "selection_end": sel.end if sel else None,
            "selection_text": sel.text if sel else None,
            # The assistant row's own columns, NULL on the user's: one multi-row INSERT takes
            # its columns from the first row and silently drops keys only later rows have.
            "model": None, "started_time": None, "transcript": None,
        }
        user_id, asst_id = new_id(), new_id()
        rows = [
            {**common, "id": user_id, "position": pos, "role": "user", "content": text, "status": "complete",
             "parent_id": parent},
            {
                **common, "id": asst_id, "position": pos + 1, "role": "assistant", "content": "",
                "status": "running", "model": model, "started_time": tm, "transcript": "[]",
                "selection_text": None, "parent_id": user_id,
            },
        ]
        owner, level = level_for_write(conn, conversation_id)
        conn.execute(t.messages.insert(), self._sealed_rows(owner, level, rows, conn))
        runs.create(conn, asst_id, kind=TURN_RUN, user_id=owner, subject_id=asst_id, runner_id=runner_id)
        self.set_leaf(conversation_id, asst_id, conn=conn)
        self.conversations.touch(conversation_id, conn=conn)
        return self.get_any(user_id, conn=conn), self.get_any(asst_id, conn=conn)

    def _refuse_active(self, conversation_id: str, conn: Connection) -> None:
        active = self.active_turn(conversation_id, conn=conn)
        if active is None:
            return
        if active.status == "running":
            raise Conflict(
                f"conversation {conversation_id!r} has a turn running (message {active.id!r}); "
                "wait for it or cancel it first"
            )
        raise Conflict(
            f"conversation {conversation_id!r} has a tool call waiting for approval (message "
            f"{active.id!r}); approve or decline it first"
        )

    def start_answer(self, question: ChatMessage, *, model: str | None, runner_id: str | None = None,
                     conn: Connection) -> ChatMessage:
        """A new ``running`` answer to ``question`` (a user message), beside the answers it
        has: a branch the conversation then shows. ``Conflict`` as :meth:`start_exchange`."""
        self._lock_conversation(question.conversation_id, conn)
        self._refuse_active(question.conversation_id, conn)
        tm = now_ms()
        asst_id = new_id()
        row = {
            "id": asst_id, "conversation_id": question.conversation_id,
            "position": self._next_position(question.conversation_id, conn), "parent_id": question.id,
            "role": "assistant", "content": "", "status": "running", "model": model, "started_time": tm,
            "transcript": "[]", "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "reasoning_tokens": 0, "created_time": tm, "updated_time": tm,
        }
        owner, level = level_for_write(conn, question.conversation_id)
        conn.execute(t.messages.insert(), self._sealed_rows(owner, level, [row], conn))
        runs.create(conn, asst_id, kind=TURN_RUN, user_id=owner, subject_id=asst_id, runner_id=runner_id)
        self.set_leaf(question.conversation_id, asst_id, conn=conn)
        self.conversations.touch(question.conversation_id, conn=conn)
        return self.get_any(asst_id, conn=conn)

    def set_leaf(self, conversation_id: str, leaf_id: str | None, *, conn: Connection) -> None:
        conn.execute(t.conversations.update().where(t.conversations.c.id == conversation_id).values(leaf_id=leaf_id))

    def show_branch(self, user_id: str, message_id: str, *, conn: Connection) -> str:
        """Show the path through ``message_id`` (down to its newest descendants); its conversation's id."""
        msg = self.get(user_id, message_id, conn=conn)
        self.set_leaf(msg.conversation_id, deepest(self.nodes(msg.conversation_id, conn=conn), msg.id), conn=conn)
        return msg.conversation_id

    def remove(self, message_ids: Sequence[str], *, conn: Connection) -> None:
        """Delete messages and what hangs off them (pending actions, edits, runs, attachment
        rows: the attachments' bytes are the caller's to remove). Each one's children then
        follow its parent, and the leaf moves up out of them. Nothing may be running."""
        if not message_ids:
            return
        m = t.messages
        gone = set(message_ids)
        rows = conn.execute(sa.select(m.c.id, m.c.parent_id, m.c.conversation_id).where(m.c.id.in_(gone))).all()
        parent = {r.id: r.parent_id for r in rows}

        def surviving(pid: str | None) -> str | None:
            while pid is not None and pid in gone:
                pid = parent.get(pid)
            return pid

        for r in rows:
            conn.execute(m.update().where(m.c.parent_id == r.id).values(parent_id=surviving(r.parent_id)))
        for child in (t.pending_actions, t.edits, t.attachments):
            conn.execute(child.delete().where(child.c.message_id.in_(gone)))
        runs.purge(conn, list(gone))
        conn.execute(m.delete().where(m.c.id.in_(gone)))
        for conversation_id in {r.conversation_id for r in rows}:
            leaf = self.leaf_of(conversation_id, conn=conn)
            if leaf in gone:
                up = surviving(parent.get(leaf))
                rest = self.nodes(conversation_id, conn=conn)
                if up is None and rest:
                    roots = [x for x in rest if x.parent_id is None]
                    up = max(roots or rest, key=lambda x: x.position).id
                self.set_leaf(conversation_id, None if up is None else deepest(rest, up), conn=conn)

    def _sealed_rows(self, owner: str, level: str, rows: list[dict[str, Any]], conn: Connection) -> list[dict[str, Any]]:
        """Message rows as stored: in a protected conversation, their content columns sealed."""
        if not is_protected(level):
            return [{**r, "sealed": False} for r in rows]
        sealer = self.conversations.seal.sealer(owner, conn=conn)
        return [{**seal_values(sealer, r["id"], r, MESSAGE_FIELDS), "sealed": True} for r in rows]

    def add_note(self, conversation_id: str, content: str, *, command: str, keys: Keys | None = None,
                 conn: Connection) -> ChatMessage:
        """A ``note`` row: output of a slash command, shown but never sent to a model."""
        self._lock_conversation(conversation_id, conn)
        owner, level = level_for_write(conn, conversation_id)
        tm = now_ms()
        mid = new_id()
        parent = path_leaf(self.nodes(conversation_id, conn=conn), self.leaf_of(conversation_id, conn=conn))
        row = {
            "id": mid, "conversation_id": conversation_id, "position": self._next_position(conversation_id, conn),
            "parent_id": parent, "role": "note", "command": command, "content": content, "status": "complete", "input_tokens": 0, "output_tokens": 0,
            "cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0,
            "created_time": tm, "updated_time": tm,
        }
        conn.execute(t.messages.insert(), self._sealed_rows(owner, level, [row], conn))
        self.set_leaf(conversation_id, mid, conn=conn)
        self.conversations.touch(conversation_id, conn=conn)
        return self.get_any(mid, keys=keys, conn=conn)

    def save_progress(
        self,
        message_id: str,
        *,
        content: str,
        activity: str | None,
        transcript: Sequence[Message] | None = None,
        conn: Connection,
    ) -> None:
        """The partial answer and the stage label of a running turn. In a protected
        conversation only the stage label: the partial answer stays in memory until the turn
        settles, and is sealed then."""
        tm = now_ms()
        values: dict[str, Any] = {"content": content, "activity": activity, "updated_time": tm}
        if transcript is not None:
            values["transcript"] = json.dumps(messages_to_list(transcript))
        if is_protected(level_of_message(conn, message_id)[2]):
            values = {"activity": activity, "updated_time": tm}
        conn.execute(
            t.messages.update().where(t.messages.c.id == message_id, t.messages.c.status == "running").values(**values)
        )

    def resume(self, message_id: str, *, runner_id: str | None = None, conn: Connection) -> None:
        """A parked turn runs again (after its pending action was decided), run by ``runner_id``."""
        tm = now_ms()
        conn.execute(
            t.messages.update()
            .where(t.messages.c.id == message_id)
            .values(status="running", updated_time=tm, activity=None)
        )
        runs.resume(conn, message_id, runner_id=runner_id)

    def finish(
        self,
        message_id: str,
        *,
        status: MessageStatus,
        content: str | None,
        transcript: Sequence[Message] | None,
        usage: Usage,
        cost: Decimal | None,
        model: str | None,
        stop_reason: str | None,
        error_code: str | None = None,
        error_message: str | None = None,
        memories: Sequence[dict[str, Any]] | None = None,
        conn: Connection,
    ) -> None:
        """Settle a run of a turn; its tokens and cost are added to the message's and the
        conversation's totals (a resumed turn adds each run's share once). ``memories``: what
        the run's prompt was given (``None`` keeps what an earlier run recorded); ``content``
        and ``transcript`` ``None`` keep what is stored (a turn settled by someone who could
        not read it). In a protected conversation the text columns are sealed."""
        if conn.execute(sa.select(t.messages.c.id).where(t.messages.c.id == message_id)).first() is None:
            return
        _, owner, level = level_of_message(conn, message_id)
        row = conn.execute(sa.select(t.messages).where(t.messages.c.id == message_id)).one()
        total_cost = cost
        if row.finished_time is not None:  # an earlier run of this turn (before a confirmation)
            prior = Decimal(row.cost_usd) if row.cost_usd is not None else None
            total_cost = prior + cost if (prior is not None and cost is not None) else None
        tm = now_ms()
        text: dict[str, Any] = {"error_message": error_message}
        if content is not None:
            text["content"] = content
        if transcript is not None:
            text["transcript"] = json.dumps(messages_to_list(transcript))
        if is_protected(level):
            text = seal_values(self.conversations.seal.sealer(owner, conn=conn), message_id, text, MESSAGE_FIELDS)
        conn.execute(
            t.messages.update()
            .where(t.messages.c.id == message_id)
            .values(
                status=status,
                **text,
                input_tokens=row.input_tokens + usage.input_tokens,
                output_tokens=row.output_tokens + usage.output_tokens,
                cache_read_tokens=row.cache_read_tokens + usage.cache_read_tokens,
                cache_write_tokens=row.cache_write_tokens + usage.cache_write_tokens,
                reasoning_tokens=row.reasoning_tokens + usage.reasoning_tokens,
                cost_usd=format_usd(total_cost) if total_cost is not None else None,
                model=model or row.model,
                stop_reason=stop_reason,
                error_code=error_code,
                activity=None,
                finished_time=tm,
                updated_time=tm,
                **({} if memories is None else {"memories": list(memories)}),
            )
        )
        self.conversations.add_usage(row.conversation_id, usage, cost, conn=conn)
        self.conversations.touch(row.conversation_id, conn=conn)

    def request_cancel(self, user_id: str, message_id: str) -> bool:
        """Ask a running turn to stop; ``True`` when it had settled already (nothing to do)."""
        with self._w(None) as c:
            msg = self.get(user_id, message_id, conn=c)
            if msg.role != "assistant":
                raise Conflict(f"message {message_id!r} is the user's; cancel the assistant message after it")
            if msg.status != "running":
                return True
            runs.request_cancel(c, message_id)
            return False

    # -- pending actions ---------------------------------------------------------------

    def add_pending(
        self, message_id: str, *, call_id: str, tool: str, arguments: dict[str, Any], description: str,
        conn: Connection,
    ) -> None:
        """Hold a call for the user's decision (its arguments and card sealed in a protected chat)."""
        pid = new_id()
        _, owner, level = level_of_message(conn, message_id)
        row: dict[str, Any] = {
            "id": pid, "message_id": message_id, "call_id": call_id, "tool": tool,
            "arguments": json.dumps(arguments), "description": description, "status": "pending",
            "created_time": now_ms(), "sealed": is_protected(level),
        }
        if is_protected(level):
            row = seal_values(self.conversations.seal.sealer(owner, conn=conn), pid, row, PENDING_FIELDS)
        conn.execute(t.pending_actions.insert(), row)

    def pending_of(self, message_id: str, *, keys: Keys | None = None,
                   conn: Connection | None = None) -> PendingAction | None:
        """The latest pending action of a message (decided or not)."""
        with self._r(conn) as c:
            r = c.execute(
                sa.select(t.pending_actions)
                .where(t.pending_actions.c.message_id == message_id)
                .order_by(t.pending_actions.c.created_time.desc(), t.pending_actions.c.id.desc())
                .limit(1)
            ).first()
        return _pending_from_row(r, keys) if r is not None else None

    def pending_for_user(self, user_id: str, *, keys: Keys | None = None,
                         conn: Connection | None = None) -> list[tuple[ChatMessage, PendingAction]]:
        """Every action waiting for ``user_id``'s decision, oldest first."""
        m, cv, p = t.messages, t.conversations, t.pending_actions
        with self._r(conn) as c:
            rows = c.execute(
                sa.select(p.c.message_id)
                .select_from(p.join(m, m.c.id == p.c.message_id).join(cv, cv.c.id == m.c.conversation_id))
                .where(
                    p.c.status == "pending", m.c.status == "awaiting_confirmation",
                    cv.c.user_id == user_id, cv.c.deleted_time.is_(None),
                )
                .order_by(p.c.created_time)
            ).scalars().all()
            out = []
            for mid in rows:
                action = self.pending_of(mid, keys=keys, conn=c)
                if action is not None:
                    out.append((self.get_any(mid, keys=keys, conn=c), action))
            return out

    def decide(
        self, user_id: str, message_id: str, decision: Literal["approve", "decline"], *,
        runner_id: str | None = None, conn: Connection,
    ) -> PendingAction:
        """Record the user's decision on a parked turn's pending action; the turn is
        ``running`` again, by ``runner_id``, when this returns. ``Conflict`` if nothing waits."""
        msg = self.get(user_id, message_id, conn=conn)
        action = self.pending_of(message_id, conn=conn)
        if msg.status != "awaiting_confirmation" or action is None or action.status != "pending":
            state = "has settled" if msg.status in SETTLED else f"is {msg.status}"
            raise Conflict(f"message {message_id!r} has no action waiting for a decision (the turn {state})")
        status = "approved" if decision == "approve" else "declined"
        res = conn.execute(
            t.pending_actions.update()
            .where(t.pending_actions.c.id == action.id, t.pending_actions.c.status == "pending")
            .values(status=status, decided_time=now_ms())
        )
        if not res.rowcount:
            raise Conflict(f"the action of message {message_id!r} was decided already")
        self.resume(message_id, runner_id=runner_id, conn=conn)
        decided = self.pending_of(message_id, conn=conn)
        return cast(PendingAction, decided)

