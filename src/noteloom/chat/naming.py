"""Names for the notes and notebooks a pending action's arguments point at, as the person
deciding it may see them.

A confirmation card reads "Delete 'Packing list' in Travel/Packing", not a 32-character id.
The names are looked up when the card is shown, by the person asking (never by the turn that
proposed the call): a note or notebook they cannot see is named as such, never by its title.
Blocking (database reads).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import Connection

from noteloom.access import sees_notebook
from noteloom.errors import NotFound
from noteloom.workspace import User, Workspace

_ID = re.compile(r"[0-9a-f]{32}")
#: How many ids of one card are named (a bulk call's list is shown as ids past that).
NAMED_MAX = 50
HIDDEN = "a note you cannot see"


def _ids(value: Any) -> Iterator[str]:
    if isinstance(value, str) and _ID.fullmatch(value):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _ids(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _ids(v)


def named_ids(workspace: Workspace, user: User | None, arguments: dict[str, Any], *,
              conn: Connection) -> list[dict[str, Any]]:
    """``{id, kind, title, notebook}`` for each note or notebook id in ``arguments`` (kind
    ``note``, ``notebook`` or ``hidden``; title and notebook ``None`` when hidden). Ids of
    anything else are left out."""
    out: list[dict[str, Any]] = []
    for oid in list(dict.fromkeys(_ids(arguments)))[:NAMED_MAX]:
        try:
            note = workspace.get_note(oid, include_deleted=True, conn=conn)
        except NotFound:
            note = None
        if note is not None:
            if not sees_notebook(workspace, user, note.notebook_id, conn=conn):
                out.append({"id": oid, "kind": "hidden", "title": None, "notebook": None})
                continue
            path = "/".join(b.title for b in workspace.notebook_path(note.notebook_id, conn=conn))
            out.append({"id": oid, "kind": "note", "title": note.title, "notebook": path or None})
            continue
        try:
            workspace.get_notebook(oid, conn=conn)
        except NotFound:
            continue
        if not sees_notebook(workspace, user, oid, conn=conn):
            out.append({"id": oid, "kind": "hidden", "title": None, "notebook": None})
            continue
        path = "/".join(b.title for b in workspace.notebook_path(oid, conn=conn))
        out.append({"id": oid, "kind": "notebook", "title": path, "notebook": None})
    return out
