"""Helpers for the sealed-chat tests: a vault and its keys for the owner, models private and
not, and where a marker string could be left in clear (every row, the raw database files,
the attachment store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa

from noteloom.app import App
from noteloom.chat import ChatService
from noteloom.chat.records import TurnEvent
from noteloom.providers.scripted import ScriptedProvider, Step
from noteloom.vault import Keys, Vault
from noteloom.workspace import User

PASS = "correct horse battery"
MARKER = "ZEBRAFINCH-7731"


def vault_keys(app: App, user_id: str) -> Keys:
    """``user_id``'s vault, made and unlocked in this process; its keys."""
    vault = Vault(app.engine)
    if not vault.exists(user_id):
        vault.create(user_id, PASS)
    vault.unlock(user_id, PASS)
    keys = vault.keys(user_id)
    assert keys is not None
    return keys


def models(app: App, own: list[Step], *, loop: bool = False) -> ScriptedProvider:
    """``own:script`` (private, playing ``own``) and ``cloud:script`` (not private)."""
    providers = app.services["providers"]
    providers.add(ScriptedProvider("cloud", [{"text": "From the cloud."}], loop=True, local=False))
    provider = ScriptedProvider("own", list(own), loop=loop)
    providers.add(provider)
    return provider


def rows_holding(app: App, needle: str) -> list[str]:
    """The tables with a row whose text holds ``needle`` (every table, every column)."""
    found = []
    with app.engine.connect() as c:
        for name in sa.inspect(c).get_table_names():
            try:
                rows = c.exec_driver_sql(f'SELECT * FROM "{name}"').all()
            except sa.exc.DBAPIError:
                c.rollback()
                continue
            if any(needle in repr(tuple(r)) for r in rows):
                found.append(name)
    return found


def files_holding(app: App, needle: str) -> list[str]:
    """The database files (SQLite: the file, its -wal and -shm) and attachment files whose
    bytes hold ``needle``, read as they are on disk."""
    paths: list[Path] = []
    if app.engine.dialect.name == "sqlite":
        db = Path(app.engine.url.database or "")
        paths += [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    store = app.workspace.attachments_dir / "chat"
    if store.is_dir():
        paths += [p for p in store.rglob("*") if p.is_file()]
    return [p.name for p in paths if needle.encode() in p.read_bytes()]


async def collect(chat: ChatService, user: User, message_id: str, keys: Keys | None, after: int = 0,
                  timeout: float = 60.0) -> list[TurnEvent]:
    """Every event of the turn after ``after`` until it settles, read with ``keys``."""
    out: list[TurnEvent] = []
    with anyio.fail_after(timeout):
        async for event in chat.events(user, message_id, after, keys):
            out.append(event)
    return out


async def settle(chat: ChatService, user: User, message_id: str, keys: Keys | None,
                 timeout: float = 60.0) -> dict[str, Any]:
    """Wait for the turn to settle; its message as the API shows it (read with ``keys``)."""
    await collect(chat, user, message_id, keys, timeout=timeout)
    return await chat.message(user, message_id, keys)
