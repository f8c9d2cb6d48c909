"""The trash: list, restore, and purge for good (rows first, then attachment files)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import now_ms
from noteloom.errors import Conflict, NotFound
from noteloom.workspace.changes import record_change
from noteloom.workspace.model import DEFAULT_NOTEBOOK_TITLE, TrashItem
from noteloom.workspace.notes import Notes
from noteloom.workspace.store import _chunks


class Trash(Notes):
    """Trashed notes and notebooks: restore them where they were, or purge them for good."""

    def list_trash(self, *, conn: Connection | None = None) -> list[TrashItem]:
        """Trashed notebooks (top of each deleted subtree) and notes not inside one, newest first."""
        nb, n = db.notebooks, db.notes
        with self._r(conn) as c:
            books = c.execute(sa.select(nb).where(nb.c.deleted_time.is_not(None))).all()
            trashed_books = {b.id: b for b in books}
            items: list[TrashItem] = []
            for b in books:
                parent = trashed_books.get(b.parent_id) if b.parent_id else None
                if parent is not None and parent.trash_batch == b.trash_batch:
                    continue  # shown through its parent
                items.append(TrashItem("notebook", b.id, b.title, b.parent_id, b.deleted_time))
            for r in c.execute(
                sa.select(n.c.id, n.c.title, n.c.notebook_id, n.c.deleted_time, n.c.trash_batch).where(
                    n.c.deleted_time.is_not(None)
                )
            ):
                book = trashed_books.get(r.notebook_id)
                if book is not None and book.trash_batch == r.trash_batch:
                    continue
                items.append(TrashItem("note", r.id, r.title, r.notebook_id, r.deleted_time))
            items.sort(key=lambda i: (-i.deleted_time, i.title))
            return items

    def restore(self, item_id: str, *, conn: Connection | None = None) -> TrashItem:
        """Bring a trashed note or notebook back to where it was (or to the default notebook
        / the top level when its old place is gone)."""
        nb, n = db.notebooks, db.notes
        with self._w(conn) as c:
            note = c.execute(sa.select(n).where(n.c.id == item_id)).first()
            if note is not None:
                if note.deleted_time is None:
                    raise Conflict(f"note {item_id!r} is not in the trash")
                book = c.execute(sa.select(nb).where(nb.c.id == note.notebook_id)).first()
                target = note.notebook_id
                if book is None or book.deleted_time is not None:
                    target = self.default_notebook(conn=c).id
                c.execute(
                    n.update()
                    .where(n.c.id == item_id)
                    .values(deleted_time=None, trash_batch=None, notebook_id=target)
                )
                record_change(c, [item_id], "restore")
                return TrashItem("note", item_id, note.title, target, note.deleted_time)
            book = c.execute(sa.select(nb).where(nb.c.id == item_id)).first()
            if book is None:
                raise NotFound(f"nothing with id {item_id!r} is in the trash; `list_trash` shows what is")
            if book.deleted_time is None:
                raise Conflict(f"notebook {item_id!r} is not in the trash")
            batch = book.trash_batch
            parent_ok = book.parent_id is None or bool(
                c.execute(
                    sa.select(nb.c.id).where(nb.c.id == book.parent_id, nb.c.deleted_time.is_(None))
                ).first()
            )
            subtree = self._subtree(c, item_id)
            c.execute(
                nb.update()
                .where(nb.c.id.in_(subtree), nb.c.trash_batch == batch)
                .values(deleted_time=None, trash_batch=None)
            )
            if not parent_ok:
                c.execute(nb.update().where(nb.c.id == item_id).values(parent_id=None))
            note_ids = list(
                c.execute(
                    sa.select(n.c.id).where(n.c.notebook_id.in_(subtree), n.c.trash_batch == batch)
                ).scalars()
            )
            if note_ids:
                c.execute(n.update().where(n.c.id.in_(note_ids)).values(deleted_time=None, trash_batch=None))
                record_change(c, note_ids, "restore")
            return TrashItem(
                "notebook", item_id, book.title, book.parent_id if parent_ok else None, book.deleted_time
            )

    def purge(self, item_id: str, *, conn: Connection | None = None) -> int:
        """Delete a trashed note or notebook for good, with revisions, tag links and attachments.
        Returns the number of notes purged."""
        nb, n = db.notebooks, db.notes
        with self._w(conn) as c:
            note = c.execute(sa.select(n.c.id, n.c.deleted_time).where(n.c.id == item_id)).first()
            if note is not None:
                if note.deleted_time is None:
                    raise Conflict(f"note {item_id!r} is not in the trash; delete it first")
                self._purge_notes(c, [item_id])
                return 1
            book = c.execute(sa.select(nb).where(nb.c.id == item_id)).first()
            if book is None:
                raise NotFound(f"nothing with id {item_id!r} is in the trash; `list_trash` shows what is")
            if book.deleted_time is None:
                raise Conflict(f"notebook {item_id!r} is not in the trash; delete it first")
            subtree = self._subtree(c, item_id)
            batch = book.trash_batch
            rows = c.execute(
                sa.select(n.c.id, n.c.trash_batch).where(n.c.notebook_id.in_(subtree))
            ).all()
            purge_ids = [r.id for r in rows if r.trash_batch == batch]
            # Notes live again, or trashed on their own: they outlive the notebook, in the
            # default notebook (a trashed one is restored there later).
            keep = [r.id for r in rows if r.trash_batch != batch]
            if keep:
                c.execute(n.update().where(n.c.id.in_(keep)).values(notebook_id=self._fallback_book(c, subtree)))
            self._purge_notes(c, purge_ids)
            live_books = c.execute(
                sa.select(nb.c.id).where(nb.c.id.in_(subtree), nb.c.deleted_time.is_(None))
            ).scalars().all()
            for bid in live_books:
                c.execute(nb.update().where(nb.c.id == bid).values(parent_id=None))
            c.execute(nb.delete().where(nb.c.id.in_([s for s in subtree if s not in set(live_books)])))
            return len(purge_ids)

    def _fallback_book(self, c: Connection, excluded: list[str]) -> str:
        row = c.execute(
            sa.select(db.notebooks.c.id)
            .where(db.notebooks.c.deleted_time.is_(None), db.notebooks.c.id.not_in(excluded))
            .order_by(db.notebooks.c.created_time)
            .limit(1)
        ).first()
        return row.id if row else self.create_notebook(DEFAULT_NOTEBOOK_TITLE, conn=c).id

    def _purge_notes(self, c: Connection, note_ids: list[str]) -> None:
        if not note_ids:
            return
        files: list[Path] = []
        for chunk in _chunks(note_ids, 500):
            for a in c.execute(sa.select(db.attachments).where(db.attachments.c.note_id.in_(chunk))):
                files.append(self.attachment_path(a.id, a.filename))
            c.execute(db.attachments.delete().where(db.attachments.c.note_id.in_(chunk)))
            # A note's whole history at once: each revision may be an edit script that needs
            # the versions after it (workspace/revisions.py), so none is ever left behind alone.
            c.execute(db.revisions.delete().where(db.revisions.c.note_id.in_(chunk)))
            c.execute(db.note_tags.delete().where(db.note_tags.c.note_id.in_(chunk)))
            c.execute(db.notes.delete().where(db.notes.c.id.in_(chunk)))
        record_change(c, note_ids, "purge")
        # Files go only once the rows are gone; a crash before this leaves orphan files, never
        # rows that point at missing files. The caller's commit follows right after.
        for f in files:
            f.unlink(missing_ok=True)

    def empty_trash(self, *, conn: Connection | None = None) -> int:
        total = 0
        with self._w(conn) as c:
            for item in self.list_trash(conn=c):
                total += self.purge(item.id, conn=c)
        return total

    def purge_expired(self, retention_days: int, *, conn: Connection | None = None) -> int:
        """Purge trashed items deleted more than ``retention_days`` ago."""
        cutoff = now_ms() - retention_days * 86_400_000
        total = 0
        with self._w(conn) as c:
            for item in self.list_trash(conn=c):
                if item.deleted_time < cutoff:
                    total += self.purge(item.id, conn=c)
        return total
