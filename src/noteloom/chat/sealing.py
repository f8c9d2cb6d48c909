"""Sealed chats: a conversation's security level, what of it is sealed, and the helpers the
chat's stores seal and open with (``noteloom.vault`` does the cryptography).

Levels: ``standard`` (stored in clear, as before), ``private`` (its content sealed at rest)
and ``fortress`` (sealed, and every turn runs on a private model: ``TurnRunner.provider_for``
is the one place that refuses a model that is not). ``private`` and ``fortress`` are
*protected*.

Sealed, per item with its own data key (``vault.Sealer``): a conversation's title and
instructions; a message's content, transcript (tool calls and results), error and the
selected note text it carried; a pending action's arguments and card text; an
attachment's name, extracted text and stored bytes; a turn's stored events and its tool
calls' arguments, outputs and errors. In clear, so lists render while locked: roles,
statuses, token counts and cost, the owner, model, pinned, times, controls other than the
instructions, the level, a stage label (never a content fragment), sizes and kinds of files.

Sealing needs only the owner's public key, so it works while the vault is locked (a turn
settling, a level raised). Opening needs :class:`noteloom.vault.Keys`, which a request gets
from the owner's unlock window; without them a protected chat's title reads as
:data:`LOCKED_TITLE` and its content is not shown (:class:`noteloom.errors.Locked`).

Every writer of a sealed column reads the level in its own transaction with the
conversation's row locked (:func:`level_for_write`): a level change takes the same lock, so
a row is written sealed exactly when its conversation is protected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.chat import tables as t
from noteloom.errors import InvalidInput, Locked, NotFound
from noteloom.jsonvalues import dumps
from noteloom.vault import Keys, Sealer, Vault, is_sealed

Level = Literal["standard", "private", "fortress"]
LEVELS: tuple[Level, ...] = get_args(Level)
PROTECTED: frozenset[str] = frozenset({"private", "fortress"})
#: The title a protected chat shows while its owner's vault is locked.
LOCKED_TITLE = "Locked chat"

CONVERSATION_FIELDS = ("title", "instructions")
MESSAGE_FIELDS = ("content", "transcript", "error_message", "selection_text")
PENDING_FIELDS = ("arguments", "description")
ATTACHMENT_FIELDS = ("name", "extracted_text")
#: The field a stored attachment's bytes are sealed as.
BYTES_FIELD = "bytes"
#: An event's data, stored sealed: ``{"sealed": value}``.
SEALED_KEY = "sealed"


def is_protected(level: str | None) -> bool:
    return level in PROTECTED


def check_level(value: Any) -> Level:
    if value not in LEVELS:
        raise InvalidInput(f"security_level {value!r} is unknown; use one of {', '.join(LEVELS)}",
                           field="security_level")
    return value  # type: ignore[no-any-return]


def locked_error(what: str = "this chat") -> Locked:
    """The one answer for protected content asked for while the vault is locked."""
    return Locked(f"{what} is protected and your vault is locked: unlock it with your vault passphrase "
                  "(POST /api/v1/vault/unlock), then try again")


def level_for_write(conn: Connection, conversation_id: str) -> tuple[str, str]:
    """``(owner id, level)`` of a conversation, its row locked for the rest of the
    transaction (``FOR UPDATE`` on PostgreSQL; SQLite's write transaction serialises)."""
    cv = t.conversations
    r = conn.execute(
        sa.select(cv.c.user_id, cv.c.security_level).where(cv.c.id == conversation_id).with_for_update()
    ).first()
    if r is None:
        raise NotFound(f"conversation {conversation_id!r} does not exist")
    return str(r.user_id), str(r.security_level)


def level_of_message(conn: Connection, message_id: str) -> tuple[str, str, str]:
    """``(conversation id, owner id, level)`` of a message's conversation, locked as above."""
    cid = conn.execute(sa.select(t.messages.c.conversation_id).where(t.messages.c.id == message_id)).scalar()
    if cid is None:
        raise NotFound(f"message {message_id!r} does not exist")
    owner, level = level_for_write(conn, str(cid))
    return str(cid), owner, level


class ChatSeal:
    """The chat's way to the vault: sealers for owners (public key only)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault

    def sealer(self, user_id: str, *, conn: Connection | None = None) -> Sealer:
        return self.vault.sealer(user_id, conn=conn)

    def require_vault(self, user_id: str, *, conn: Connection | None = None) -> None:
        """A chat can be protected only once its owner has a vault to seal to."""
        if not self.vault.exists(user_id, conn=conn):
            raise InvalidInput("set up your vault first (POST /api/v1/vault/setup with a passphrase): a protected "
                               "chat is sealed to it", field="security_level")


def seal_values(sealer: Sealer, item_id: str, values: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """``values`` with each of ``fields`` that holds text sealed (``None`` stays ``None``)."""
    out = dict(values)
    for name in fields:
        value = out.get(name)
        if isinstance(value, str):
            out[name] = sealer.seal(item_id, name, value)
    return out


def opened(keys: Keys | None, item_id: str, field: str, value: str | None) -> str | None:
    """The text of a sealed ``value`` (``None`` stays ``None``); ``Locked`` without keys."""
    if value is None:
        return None
    if keys is None:
        raise locked_error()
    return keys.open_text(item_id, field, value)


def seal_event_data(sealer: Sealer, run_id: str, seq: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """An event's data as stored for a protected turn."""
    return {SEALED_KEY: sealer.seal(run_id, f"event:{seq}", dumps(dict(data)))}


def is_sealed_event(data: Mapping[str, Any]) -> bool:
    return len(data) == 1 and is_sealed(data.get(SEALED_KEY))


def open_event_data(keys: Keys | None, run_id: str, seq: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """An event's data as shown: opened when it was stored sealed (``Locked`` without keys)."""
    if not is_sealed_event(data):
        return dict(data)
    if keys is None:
        raise locked_error()
    value = json.loads(keys.open_text(run_id, f"event:{seq}", str(data[SEALED_KEY])))
    return value if isinstance(value, dict) else {"value": value}
