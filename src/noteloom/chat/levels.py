"""Changing a conversation's security level, and moving sealed values to a new key.

Raising a chat (standard to private or fortress) seals its stored rows in place with its
owner's public key (no window needed): the title and instructions, every message's
content columns, the pending actions, the attachments' names, texts and files (rewritten
sealed; the old files are removed once the change is committed), and its turns' stored
events, tool calls and errors. Lowering (to standard) opens them back, which needs the
owner's keys. Between the two protected levels nothing is rewritten. A chat with a turn
running or waiting for a decision is not changed (the turn holds what it will write).
Proposed edits to notes are not sealed (``noteloom.chat.edits`` reads them as they are): a
protected chat's turns do not propose any, and raising a chat refuses while one waits for
a decision and forgets the texts of the decided ones.

What a rewrite leaves behind in the database's free space is the caller's to clear
(:mod:`noteloom.chat.scrub`); the files it replaced are handed back for it to remove.

Rotation (:func:`reseal_all`) moves every sealed value of a user's chats to the current
key generation, re-sealing only each value's data key (``Keys.reseal_key``): the content
parts, the files' included, are copied unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.attachments import BlobStore
from noteloom.chat import tables as t
from noteloom.chat.sealing import (
    ATTACHMENT_FIELDS,
    BYTES_FIELD,
    CONVERSATION_FIELDS,
    MESSAGE_FIELDS,
    PENDING_FIELDS,
    SEALED_KEY,
    Level,
    check_level,
    is_protected,
    is_sealed_event,
    level_for_write,
    locked_error,
    open_event_data,
    seal_event_data,
)
from noteloom.errors import Conflict
from noteloom.jsonvalues import dumps
from noteloom.runs import tables as rt
from noteloom.vault import Keys, Sealer, is_sealed


@dataclass
class Rewritten:
    """What a level change or a re-seal wrote besides rows: files to remove once it is
    committed (``old``), or if it is not (``new``)."""

    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    #: The tables whose rows were rewritten (their free space is then cleared).
    tables: set[str] = field(default_factory=set)
    #: Values rewritten.
    count: int = 0


class _Codec:
    """How each stored value is rewritten: sealed, opened, or re-sealed to the current key."""

    #: Whether the rows come out sealed.
    sealed = True

    def wants(self, sealed: bool) -> bool:
        """Whether a value stored ``sealed`` (or not) is rewritten."""
        raise NotImplementedError

    def text(self, item_id: str, name: str, value: str) -> str:
        raise NotImplementedError

    def file(self, item_id: str, stored: bytes) -> bytes:
        raise NotImplementedError

    def event(self, run_id: str, seq: int, data: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def arguments(self, run_id: str, name: str, args: Any) -> Any:
        raise NotImplementedError


class _Seal(_Codec):
    def __init__(self, sealer: Sealer) -> None:
        self.sealer = sealer

    def wants(self, sealed: bool) -> bool:
        return not sealed

    def text(self, item_id: str, name: str, value: str) -> str:
        return self.sealer.seal(item_id, name, value)

    def file(self, item_id: str, stored: bytes) -> bytes:
        return self.sealer.seal(item_id, BYTES_FIELD, stored).encode("ascii")

    def event(self, run_id: str, seq: int, data: dict[str, Any]) -> dict[str, Any]:
        return seal_event_data(self.sealer, run_id, seq, data)

    def arguments(self, run_id: str, name: str, args: Any) -> Any:
        return {SEALED_KEY: self.sealer.seal(run_id, name, dumps(args))}


class _Open(_Codec):
    sealed = False

    def __init__(self, keys: Keys) -> None:
        self.keys = keys

    def wants(self, sealed: bool) -> bool:
        return sealed

    def text(self, item_id: str, name: str, value: str) -> str:
        return self.keys.open_text(item_id, name, value)

    def file(self, item_id: str, stored: bytes) -> bytes:
        return self.keys.open(item_id, BYTES_FIELD, stored.decode("ascii"))

    def event(self, run_id: str, seq: int, data: dict[str, Any]) -> dict[str, Any]:
        return open_event_data(self.keys, run_id, seq, data)

    def arguments(self, run_id: str, name: str, args: Any) -> Any:
        return json.loads(self.keys.open_text(run_id, name, str(args[SEALED_KEY])))


class _Reseal(_Codec):
    def __init__(self, keys: Keys, conn: Connection) -> None:
        self.keys, self.conn = keys, conn

    def wants(self, sealed: bool) -> bool:
        return sealed

    def _moved(self, value: str) -> str:
        return self.keys.reseal_key(value, conn=self.conn)

    def text(self, item_id: str, name: str, value: str) -> str:
        return self._moved(value)

    def file(self, item_id: str, stored: bytes) -> bytes:
        return self._moved(stored.decode("ascii")).encode("ascii")

    def event(self, run_id: str, seq: int, data: dict[str, Any]) -> dict[str, Any]:
        return {SEALED_KEY: self._moved(str(data[SEALED_KEY]))}

    def arguments(self, run_id: str, name: str, args: Any) -> Any:
        return {SEALED_KEY: self._moved(str(args[SEALED_KEY]))}


def refuse_active_turn(c: Connection, conversation_id: str) -> None:
    busy = c.execute(
        sa.select(t.messages.c.id).where(
            t.messages.c.conversation_id == conversation_id,
            t.messages.c.status.in_(["running", "awaiting_confirmation"]),
        ).limit(1)
    ).scalar()
    if busy is not None:
        raise Conflict(f"conversation {conversation_id!r} has a turn running or waiting for a decision (message "
                       f"{busy!r}); let it settle, or cancel it, then change the level")


def change_level(
    c: Connection, conversation_id: str, level: str, *, sealer: Sealer | None, keys: Keys | None,
    blobs: BlobStore,
) -> Rewritten:
    """Set ``level`` on a conversation (its row locked), sealing or opening its stored rows
    in place. ``sealer``: the owner's, to raise; ``keys``: the owner's, to lower
    (``Locked`` without them)."""
    new_level: Level = check_level(level)
    owner, current = level_for_write(c, conversation_id)
    out = Rewritten()
    if new_level == current:
        return out
    refuse_active_turn(c, conversation_id)
    if not is_protected(current):
        assert sealer is not None and sealer.user_id == owner
        _forget_edit_texts(c, conversation_id)
        out = _rewrite(c, conversation_id, blobs, _Seal(sealer))
        out.tables.add(t.edits.name)
    elif not is_protected(new_level):
        if keys is None or keys.user_id != owner:
            raise locked_error()
        out = _rewrite(c, conversation_id, blobs, _Open(keys))
    c.execute(t.conversations.update().where(t.conversations.c.id == conversation_id)
              .values(security_level=new_level))
    out.tables.add(t.conversations.name)
    return out


def _forget_edit_texts(c: Connection, conversation_id: str) -> None:
    """Proposed edits keep their texts in clear (``chat_edits``, read as they are by
    ``noteloom.chat.edits``): raising a chat refuses while one waits for a decision, and
    forgets the texts of those decided (their status and, for an accepted one, the revision
    that undoes it stay; the note's own history holds what was applied)."""
    e, m = t.edits, t.messages
    ids = sa.select(m.c.id).where(m.c.conversation_id == conversation_id).scalar_subquery()
    waiting = c.execute(sa.select(e.c.id).where(e.c.message_id.in_(ids), e.c.status == "proposed").limit(1)).scalar()
    if waiting is not None:
        raise Conflict(f"conversation {conversation_id!r} has a proposed edit to a note waiting (edit {waiting!r}); "
                       "accept or reject it, then change the level")
    c.execute(e.update().where(e.c.message_id.in_(ids)).values(old_text="", new_text="", text="", anchor=None))


def reseal_all(c: Connection, user_id: str, keys: Keys, blobs: BlobStore) -> Rewritten:
    """Every sealed value of ``user_id``'s chats with its data key re-sealed to the current
    generation (the content unchanged; files rewritten, the old ones handed back)."""
    total = Rewritten()
    ids = c.execute(sa.select(t.conversations.c.id).where(
        t.conversations.c.user_id == user_id, t.conversations.c.security_level != "standard")).scalars().all()
    try:
        for cid in ids:
            level_for_write(c, cid)
            done = _rewrite(c, cid, blobs, _Reseal(keys, c), fail_clean=False)
            total.old += done.old
            total.new += done.new
            total.tables |= done.tables
            total.count += done.count
    except BaseException:
        for key in total.new:
            blobs.delete(key)
        raise
    return total


def _rewrite(c: Connection, conversation_id: str, blobs: BlobStore, codec: _Codec, *,
             fail_clean: bool = True) -> Rewritten:
    """Every stored value of the conversation through ``codec`` (its files too); the files
    written are removed again if this fails (``fail_clean``)."""
    out = Rewritten()
    try:
        _conversation(c, conversation_id, codec, out)
        ids = _messages(c, conversation_id, codec, out)
        for i in range(0, len(ids), 500):
            _runs(c, ids[i:i + 500], codec, out)
        _attachments(c, conversation_id, codec, out, blobs)
    except BaseException:
        if fail_clean:
            for key in out.new:
                blobs.delete(key)
        raise
    return out


def _conversation(c: Connection, conversation_id: str, codec: _Codec, out: Rewritten) -> None:
    cv = t.conversations
    conv = c.execute(sa.select(cv).where(cv.c.id == conversation_id)).one()
    values = {name: codec.text(conv.id, name, getattr(conv, name))
              for name in CONVERSATION_FIELDS if getattr(conv, name) is not None}
    if values:
        c.execute(cv.update().where(cv.c.id == conversation_id).values(**values))
        out.count += len(values)
        out.tables.add(cv.name)


def _messages(c: Connection, conversation_id: str, codec: _Codec, out: Rewritten) -> list[str]:
    """The messages and their pending actions; the ids of the messages (the turns' runs)."""
    m, p = t.messages, t.pending_actions
    rows = c.execute(sa.select(m).where(m.c.conversation_id == conversation_id)).all()
    for r in rows:
        if not codec.wants(bool(r.sealed)):
            continue
        values = {name: codec.text(r.id, name, getattr(r, name))
                  for name in MESSAGE_FIELDS if getattr(r, name) is not None}
        c.execute(m.update().where(m.c.id == r.id).values(sealed=codec.sealed, **values))
        out.count += len(values)
        out.tables.add(m.name)
    ids = [r.id for r in rows]
    for i in range(0, len(ids), 500):
        for r in c.execute(sa.select(p).where(p.c.message_id.in_(ids[i:i + 500]))).all():
            if not codec.wants(bool(r.sealed)):
                continue
            values = {name: codec.text(r.id, name, getattr(r, name)) for name in PENDING_FIELDS}
            c.execute(p.update().where(p.c.id == r.id).values(sealed=codec.sealed, **values))
            out.count += len(values)
            out.tables.add(p.name)
    return ids


def _attachments(c: Connection, conversation_id: str, codec: _Codec, out: Rewritten, blobs: BlobStore) -> None:
    """Names, texts and files; each file is written anew (the old one handed back in ``out.old``)."""
    a = t.attachments
    for r in c.execute(sa.select(a).where(a.c.conversation_id == conversation_id)).all():
        if not codec.wants(bool(r.sealed)):
            continue
        values: dict[str, Any] = {name: codec.text(r.id, name, getattr(r, name))
                                  for name in ATTACHMENT_FIELDS if getattr(r, name) is not None}
        if r.blob_key is not None and blobs.exists(r.blob_key):
            data = codec.file(r.id, blobs.read(r.blob_key))
            new = blobs.put(data)
            out.new.append(new)
            out.old.append(r.blob_key)
            values["blob_key"] = new
            if not codec.sealed:
                values["sha256"] = hashlib.sha256(data).hexdigest()
            elif isinstance(codec, _Seal):
                values["sha256"] = ""
        c.execute(a.update().where(a.c.id == r.id).values(sealed=codec.sealed, **values))
        out.count += len(values)
        out.tables.add(a.name)


def _sealed_args(args: Any) -> bool:
    return isinstance(args, dict) and len(args) == 1 and is_sealed(args.get(SEALED_KEY))


def _runs(c: Connection, run_ids: Sequence[str], codec: _Codec, out: Rewritten) -> None:
    """The stored events, tool calls and errors of some of the conversation's turns (runs
    have their assistant message's id; a user message has none)."""
    if not run_ids:
        return
    ev, calls, runs = rt.events, rt.calls, rt.runs
    ids = list(run_ids)
    for r in c.execute(sa.select(ev).where(ev.c.run_id.in_(ids))).all():
        data = r.data if isinstance(r.data, dict) else json.loads(r.data) if isinstance(r.data, str) else {}
        if not codec.wants(is_sealed_event(data)):
            continue
        c.execute(ev.update().where(ev.c.run_id == r.run_id, ev.c.seq == r.seq)
                  .values(data=codec.event(r.run_id, int(r.seq), data)))
        out.count += 1
        out.tables.add(ev.name)
    for r in c.execute(sa.select(calls).where(calls.c.run_id.in_(ids))).all():
        if not codec.wants(_sealed_args(r.arguments)):
            continue
        prefix = f"call:{r.call_id}"
        c.execute(calls.update().where(calls.c.run_id == r.run_id, calls.c.seq == r.seq).values(
            arguments=codec.arguments(r.run_id, f"{prefix}:arguments", r.arguments),
            error=None if r.error is None else codec.text(r.run_id, f"{prefix}:error", r.error),
            output=None if r.output is None else codec.text(r.run_id, f"{prefix}:output", r.output),
        ))
        out.count += 1
        out.tables.add(calls.name)
    for r in c.execute(sa.select(runs.c.id, runs.c.error_message)
                       .where(runs.c.id.in_(ids), runs.c.error_message.is_not(None))).all():
        if not codec.wants(is_sealed(r.error_message)):
            continue
        c.execute(runs.update().where(runs.c.id == r.id)
                  .values(error_message=codec.text(r.id, "run_error", r.error_message)))
        out.count += 1
        out.tables.add(runs.name)
