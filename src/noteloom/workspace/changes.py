"""The change feed (``note_changes``): every note write appends to it in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import now_ms

ChangeKind = Literal["create", "update", "delete", "restore", "purge"]


def record_change(conn: Connection, note_ids: Iterable[str], kind: ChangeKind) -> None:
    """Append to the change feed, in the caller's transaction."""
    t = now_ms()
    rows = [{"note_id": nid, "kind": kind, "time": t} for nid in note_ids]
    if rows:
        conn.execute(db.note_changes.insert(), rows)
