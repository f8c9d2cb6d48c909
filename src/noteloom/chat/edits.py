"""Proposed edits to the open note: stored when a session tool proposes them, applied
only when the user accepts — as one revision, so one undo step — and only while the
text they replace is still there — and only by someone who may change the note: accepting
or undoing is a change made as the person, so a note in a notebook shared with them to read
only is refused (``Forbidden``), and one they can no longer see reads as gone. Blocking calls.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.accounts import User
from noteloom.chat import tables as t
from noteloom.chat.anchors import EditStale, PlannedEdit, Span, append_separator, relocate, splice
from noteloom.chat.records import ProposedEdit
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, Forbidden, NotFound
from noteloom.people import chain_access, sees_everything
from noteloom.workspace import Note, Workspace


def _edit_from_row(r: Any) -> ProposedEdit:
    return ProposedEdit(
        id=r.id, message_id=r.message_id, note_id=r.note_id, tool=r.tool, anchor=r.anchor,
        span_start=r.span_start, span_end=r.span_end, old_text=r.old_text, new_text=r.new_text,
        text=r.text, status=r.status, created_time=r.created_time, revision_id=r.revision_id,
        applied_time=r.applied_time, decided_time=r.decided_time,
    )


def edit_missing(edit_id: str) -> str:
    return f"edit {edit_id!r} does not exist; the assistant message that proposed it lists its edits"


class Edits:
    """Proposed edits, owner-scoped through the conversation of the message that made them."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.engine = workspace.engine

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    def propose(
        self,
        message_id: str,
        note_id: str,
        tool: str,
        planned: PlannedEdit,
        *,
        text: str,
        anchor: str | None,
        conn: Connection | None = None,
    ) -> ProposedEdit:
        eid = new_id()
        with self._w(conn) as c:
            c.execute(
                t.edits.insert(),
                {
                    "id": eid, "message_id": message_id, "note_id": note_id, "tool": tool, "anchor": anchor,
                    "span_start": planned.span.start, "span_end": planned.span.end,
                    "old_text": planned.old_text, "new_text": planned.new_text, "text": text,
                    "status": "proposed", "created_time": now_ms(),
                },
            )
            return self._get_any(eid, c)

    def _get_any(self, edit_id: str, c: Connection) -> ProposedEdit:
        r = c.execute(sa.select(t.edits).where(t.edits.c.id == edit_id)).first()
        if r is None:
            raise NotFound(edit_missing(edit_id))
        return _edit_from_row(r)

    def get(self, user_id: str, edit_id: str, *, conn: Connection | None = None) -> ProposedEdit:
        e, m, cv = t.edits, t.messages, t.conversations
        with self._r(conn) as c:
            r = c.execute(
                sa.select(e)
                .select_from(e.join(m, m.c.id == e.c.message_id).join(cv, cv.c.id == m.c.conversation_id))
                .where(e.c.id == edit_id, cv.c.user_id == user_id, cv.c.deleted_time.is_(None))
            ).first()
        if r is None:
            raise NotFound(edit_missing(edit_id))
        return _edit_from_row(r)

    def of_message(self, message_id: str, *, conn: Connection | None = None) -> list[ProposedEdit]:
        with self._r(conn) as c:
            rows = c.execute(
                sa.select(t.edits).where(t.edits.c.message_id == message_id).order_by(t.edits.c.created_time, t.edits.c.id)
            ).all()
        return [_edit_from_row(r) for r in rows]

    def _decide(self, c: Connection, edit_id: str, **values: Any) -> None:
        c.execute(t.edits.update().where(t.edits.c.id == edit_id).values(decided_time=now_ms(), **values))

    def accept(self, user_id: str, edit_id: str) -> tuple[ProposedEdit, Note]:
        """Apply the edit as one new version of the note. ``Conflict`` when it was decided
        already, or when the text it replaces is no longer in the note (it is then left alone)."""
        with self._w(None) as c:
            edit = self.get(user_id, edit_id, conn=c)
            if edit.status != "proposed":
                raise Conflict(f"edit {edit_id!r} is {edit.status} already")
            note = self._note(edit, c, user_id)
            try:
                span = relocate(edit.tool, note.body, Span(edit.span_start, edit.span_end), edit.old_text, edit.anchor)
            except EditStale as exc:
                raise Conflict(f"edit {edit_id!r} was not applied: {exc}") from None
            new_text = append_separator(note.body) + edit.text if edit.tool == "append_to_note" else edit.new_text
            updated = self.workspace.update_note(edit.note_id, body=splice(note.body, span, new_text), conn=c)
            revisions = self.workspace.list_revisions(edit.note_id, conn=c)
            changed = updated.updated_time != note.updated_time
            self._decide(
                c, edit_id, status="accepted", applied_time=updated.updated_time,
                revision_id=revisions[0].id if changed and revisions else None,
            )
            return self._get_any(edit_id, c), updated

    def record_applied(self, user_id: str, edit_id: str) -> tuple[ProposedEdit, Note]:
        """Record as accepted an edit that an editor applied to the note and saved itself (as
        one undo step there and one revision here): the note is left as it is, so the edit is
        never applied twice. ``Conflict`` when it was decided already, or when the note does
        not hold the edit's new text."""
        with self._w(None) as c:
            edit = self.get(user_id, edit_id, conn=c)
            if edit.status != "proposed":
                raise Conflict(f"edit {edit_id!r} is {edit.status} already")
            note = self._note(edit, c, user_id)
            added = edit.text if edit.tool == "append_to_note" else edit.new_text
            if added.strip() and added not in note.body:
                raise Conflict(f"edit {edit_id!r} is not in note {edit.note_id!r}; save the note with the edit "
                               "first, or accept it without applied=true to have it applied here")
            revisions = self.workspace.list_revisions(edit.note_id, conn=c)
            self._decide(c, edit_id, status="accepted", applied_time=note.updated_time,
                         revision_id=revisions[0].id if revisions else None)
            return self._get_any(edit_id, c), note

    def reject(self, user_id: str, edit_id: str) -> ProposedEdit:
        with self._w(None) as c:
            edit = self.get(user_id, edit_id, conn=c)
            if edit.status != "proposed":
                raise Conflict(f"edit {edit_id!r} is {edit.status} already")
            self._decide(c, edit_id, status="rejected")
            return self._get_any(edit_id, c)

    def undo(self, user_id: str, edit_id: str) -> tuple[ProposedEdit, Note]:
        """Put the note back as it was before the edit — only if nothing changed it since."""
        with self._w(None) as c:
            edit = self.get(user_id, edit_id, conn=c)
            if edit.status != "accepted":
                raise Conflict(f"edit {edit_id!r} is {edit.status}; only an accepted edit can be undone")
            note = self._note(edit, c, user_id)
            if note.updated_time != edit.applied_time:
                raise Conflict(
                    f"note {edit.note_id!r} has changed since edit {edit_id!r} was accepted; "
                    "restore an earlier version from the note's history instead"
                )
            if edit.revision_id is not None:
                note = self.workspace.restore_revision(edit.revision_id, conn=c)
            self._decide(c, edit_id, status="undone")
            return self._get_any(edit_id, c), note

    def _note(self, edit: ProposedEdit, c: Connection, user_id: str) -> Note:
        """The edit's note, to be changed by ``user_id``: gone, trashed and no longer visible
        to them read alike; shared with them to read only is ``Forbidden``."""
        gone = Conflict(f"note {edit.note_id!r} of edit {edit.id!r} is gone or in the trash; restore it first")
        try:
            note = self.workspace.get_note(edit.note_id, conn=c)
        except NotFound:
            raise gone from None
        row = c.execute(sa.select(db.users).where(db.users.c.id == user_id)).first()
        user = User.of(row) if row is not None else User(user_id, "", False)
        if sees_everything(user):
            return note
        ws = self.workspace
        chain = ws.notebook_path(note.notebook_id, conn=c)
        access = chain_access(chain, user_id, ws.shares_of(user_id, conn=c), ws.owner_id(conn=c))
        if access is None:
            raise gone
        if access != "write":
            title = chain[-1].title if chain else ""
            raise Forbidden(f"note {edit.note_id!r} is in notebook {title!r}, which is shared with you to read only; "
                            "ask its owner for write access")
        return note
