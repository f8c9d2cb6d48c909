"""The workspace read for an export: every live notebook, note, tag and attachment, in a
handful of bulk queries inside one read transaction (one consistent view)."""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from noteloom import db
from noteloom.interop.bundle import AttachmentItem, BookItem, NoteItem, Notices, TagItem
from noteloom.workspace import Workspace


@dataclass
class Snapshot:
    books: list[BookItem] = field(default_factory=list)
    notes: list[NoteItem] = field(default_factory=list)
    tags: list[TagItem] = field(default_factory=list)
    attachments: list[AttachmentItem] = field(default_factory=list)
    notices: Notices = field(default_factory=Notices)


def take(ws: Workspace) -> Snapshot:
    """Everything an export writes; items in the trash stay out."""
    snap = Snapshot()
    nb, n, t, nt, a = db.notebooks, db.notes, db.tags, db.note_tags, db.attachments
    with ws.read() as c:
        for r in c.execute(sa.select(nb).where(nb.c.deleted_time.is_(None)).order_by(nb.c.created_time, nb.c.id)):
            snap.books.append(BookItem(r.id, r.title, r.parent_id, r.created_time, r.updated_time))
        live_books = {b.id for b in snap.books}
        for b in snap.books:
            if b.parent_id is not None and b.parent_id not in live_books:
                b.parent_id = None
        titles = {r.id: r.title for r in c.execute(sa.select(t.c.id, t.c.title))}
        for r in c.execute(sa.select(t).order_by(t.c.title_key)):
            snap.tags.append(TagItem(r.id, r.title, r.created_time, r.updated_time))
        tags_of: dict[str, list[str]] = {}
        for r in c.execute(sa.select(nt.c.note_id, nt.c.tag_id)):
            tags_of.setdefault(r.note_id, []).append(titles[r.tag_id])
        for r in c.execute(sa.select(n).where(n.c.deleted_time.is_(None)).order_by(n.c.seq)):
            if r.notebook_id not in live_books:
                snap.notices.skip("skipped notes whose notebook is missing", r.id[:8])
                continue
            snap.notes.append(
                NoteItem(
                    id=r.id, notebook_id=r.notebook_id, title=r.title, body=r.body,
                    created_time=r.created_time, updated_time=r.updated_time, is_todo=bool(r.is_todo),
                    todo_due=r.todo_due, todo_completed=r.todo_completed, source_url=r.source_url,
                    tags=sorted(tags_of.get(r.id, []), key=str.lower),
                )
            )
        live_notes = {x.id for x in snap.notes}
        for r in c.execute(sa.select(a).order_by(a.c.created_time, a.c.id)):
            if r.note_id is not None and r.note_id not in live_notes:
                continue  # belongs to a trashed note: it leaves with it
            path = ws.attachment_path(r.id, r.filename)
            if not path.is_file():
                snap.notices.skip("skipped attachments whose file is missing from the data folder", r.id[:8])
                continue
            snap.attachments.append(
                AttachmentItem(
                    id=r.id, note_id=r.note_id, title=r.title, filename=r.filename, mime=r.mime,
                    size=r.size, created_time=r.created_time, updated_time=r.updated_time, source=path,
                )
            )
    return snap
