"""The notes workspace: notebooks, notes, to-dos, tags, trash, revisions, attachments.

``Workspace`` is the domain's one entry point. Every write runs in one database
transaction that also appends to the change feed (``note_changes``) and keeps the
keyword index current (triggers installed by the search migration), so a crash
mid-operation leaves the workspace as it was before the operation.
"""

from __future__ import annotations

import mimetypes
import re
import shutil
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.accounts import Accounts
from noteloom.accounts import User as User  # re-exported: part of the workspace API
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, InvalidInput, NotFound

ChangeKind = Literal["create", "update", "delete", "restore", "purge"]
_ID_RE = re.compile(r"^[0-9a-f]{32}$")
DEFAULT_NOTEBOOK_TITLE = "Notes"
_UNSET: Any = object()


@dataclass(frozen=True)
class Notebook:
    id: str
    parent_id: str | None
    title: str
    created_time: int
    updated_time: int
    deleted_time: int | None = None
    note_count: int = 0


@dataclass(frozen=True)
class Note:
    id: str
    notebook_id: str
    title: str
    body: str
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    source_url: str
    created_time: int
    updated_time: int
    deleted_time: int | None = None
    tags: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NoteSummary:
    id: str
    notebook_id: str
    title: str
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    updated_time: int
    created_time: int


@dataclass(frozen=True)
class Tag:
    id: str
    title: str
    note_count: int = 0


@dataclass(frozen=True)
class Revision:
    id: str
    note_id: str
    title: str
    body: str
    version_time: int
    created_time: int


@dataclass(frozen=True)
class Attachment:
    id: str
    note_id: str | None
    title: str
    filename: str
    mime: str
    size: int
    created_time: int
    updated_time: int


@dataclass(frozen=True)
class TrashItem:
    kind: Literal["note", "notebook"]
    id: str
    title: str
    parent_id: str | None
    deleted_time: int


def check_id(value: str, what: str = "id") -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise InvalidInput(f"{what} {value!r} is not a noteloom id (32 lowercase hex characters)")
    return value


def _note_from_row(row: Any, tags: Sequence[str] = ()) -> Note:
    return Note(
        id=row.id,
        notebook_id=row.notebook_id,
        title=row.title,
        body=row.body,
        is_todo=bool(row.is_todo),
        todo_due=row.todo_due,
        todo_completed=row.todo_completed,
        source_url=row.source_url,
        created_time=row.created_time,
        updated_time=row.updated_time,
        deleted_time=row.deleted_time,
        tags=tuple(tags),
    )


def record_change(conn: Connection, note_ids: Iterable[str], kind: ChangeKind) -> None:
    """Append to the change feed, in the caller's transaction."""
    t = now_ms()
    rows = [{"note_id": nid, "kind": kind, "time": t} for nid in note_ids]
    if rows:
        conn.execute(db.note_changes.insert(), rows)


class Workspace(Accounts):
    """Notes, notebooks, tags, trash, revisions, attachments, users and run-time settings."""

    def __init__(self, engine: Engine, data_dir: Path) -> None:
        self.engine = engine
        self.data_dir = data_dir
        self.attachments_dir = data_dir / "attachments"

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One atomic write; compose several operations by passing ``conn=`` through."""
        with db.write_tx(self.engine) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with db.read_tx(self.engine) as conn:
            yield conn

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    # -- notebooks ----------------------------------------------------------------------

    def create_notebook(
        self,
        title: str,
        parent_id: str | None = None,
        *,
        id: str | None = None,
        created_time: int | None = None,
        updated_time: int | None = None,
        conn: Connection | None = None,
    ) -> Notebook:
        title = _clean_title(title, "notebook title")
        nid = check_id(id, "notebook id") if id else new_id()
        t = now_ms()
        with self._w(conn) as c:
            if parent_id is not None:
                self._live_notebook(c, parent_id)
            if c.execute(sa.select(db.notebooks.c.id).where(db.notebooks.c.id == nid)).first():
                raise Conflict(f"a notebook with id {nid!r} exists already")
            created, updated = created_time or t, updated_time or created_time or t
            c.execute(
                db.notebooks.insert(),
                {"id": nid, "parent_id": parent_id, "title": title, "created_time": created, "updated_time": updated},
            )
        return Notebook(nid, parent_id, title, created, updated)

    def get_notebook(self, notebook_id: str, *, conn: Connection | None = None) -> Notebook:
        with self._r(conn) as c:
            return self._notebook_from_row(self._live_notebook(c, notebook_id))

    def list_notebooks(
        self, *, with_counts: bool = True, include_deleted: bool = False, conn: Connection | None = None
    ) -> list[Notebook]:
        """Every notebook not in the trash, with its count of live notes, sorted by title.

        ``with_counts=False`` skips counting notes (``note_count`` is 0), which is what makes
        this cheap enough to run per tool call; ``include_deleted`` adds trashed notebooks.
        """
        nb = db.notebooks
        if not with_counts:
            plain = sa.select(nb).order_by(sa.func.lower(nb.c.title), nb.c.id)
            if not include_deleted:
                plain = plain.where(nb.c.deleted_time.is_(None))
            with self._r(conn) as c:
                return [self._notebook_from_row(r) for r in c.execute(plain)]
        n = db.notes
        counts = (
            sa.select(n.c.notebook_id, sa.func.count().label("cnt"))
            .where(n.c.deleted_time.is_(None))
            .group_by(n.c.notebook_id)
            .subquery()
        )
        q = (
            sa.select(nb, sa.func.coalesce(counts.c.cnt, 0).label("note_count"))
            .select_from(nb.outerjoin(counts, counts.c.notebook_id == nb.c.id))
            .order_by(sa.func.lower(nb.c.title), nb.c.id)
        )
        if not include_deleted:
            q = q.where(nb.c.deleted_time.is_(None))
        with self._r(conn) as c:
            return [self._notebook_from_row(r, r.note_count) for r in c.execute(q)]

    def notebooks_by_id(self, notebook_ids: Collection[str], *, conn: Connection | None = None) -> dict[str, Notebook]:
        """The notebooks among ``notebook_ids`` (trashed ones too; counts are 0), by id."""
        if not notebook_ids:
            return {}
        nb = db.notebooks
        with self._r(conn) as c:
            rows = c.execute(sa.select(nb).where(nb.c.id.in_(list(notebook_ids)))).all()
        return {r.id: self._notebook_from_row(r) for r in rows}

    def notebook_path(self, notebook_id: str, *, conn: Connection | None = None) -> list[Notebook]:
        """The chain of notebooks from the root down to ``notebook_id``."""
        with self._r(conn) as c:
            chain: list[Notebook] = []
            seen: set[str] = set()
            current: str | None = notebook_id
            while current and current not in seen:
                seen.add(current)
                row = c.execute(sa.select(db.notebooks).where(db.notebooks.c.id == current)).first()
                if row is None:
                    break
                chain.append(self._notebook_from_row(row))
                current = row.parent_id
            return list(reversed(chain))

    def find_notebook(self, ref: str, *, conn: Connection | None = None) -> Notebook:
        """A live notebook by id, by title, or by a ``Parent/Child`` title path."""
        with self._r(conn) as c:
            if _ID_RE.match(ref):
                row = c.execute(
                    sa.select(db.notebooks).where(
                        db.notebooks.c.id == ref, db.notebooks.c.deleted_time.is_(None)
                    )
                ).first()
                if row is not None:
                    return self._notebook_from_row(row)
            books = self.list_notebooks(conn=c)
            by_id = {b.id: b for b in books}

            def path_of(b: Notebook) -> str:
                parts = [b.title]
                p = b.parent_id
                while p and p in by_id and len(parts) < 64:
                    parts.append(by_id[p].title)
                    p = by_id[p].parent_id
                return "/".join(reversed(parts))

            wanted = ref.strip().strip("/").lower()
            matches = [b for b in books if path_of(b).lower() == wanted]
            if not matches:
                matches = [b for b in books if b.title.lower() == wanted]
            if len(matches) == 1:
                return matches[0]
            if not matches:
                raise NotFound(f"no notebook named {ref!r}; `noteloom notebooks list` shows them")
            paths = ", ".join(repr(path_of(b)) for b in matches)
            raise Conflict(f"several notebooks are named {ref!r} ({paths}); give the full path or the id")

    def default_notebook(self, *, conn: Connection | None = None) -> Notebook:
        """The notebook new notes go to when none is named: the first top-level one, created if missing."""
        with self._w(conn) as c:
            row = c.execute(
                sa.select(db.notebooks)
                .where(db.notebooks.c.deleted_time.is_(None), db.notebooks.c.parent_id.is_(None))
                .order_by(db.notebooks.c.created_time, db.notebooks.c.id)
                .limit(1)
            ).first()
            if row is not None:
                return self._notebook_from_row(row)
            return self.create_notebook(DEFAULT_NOTEBOOK_TITLE, conn=c)

    def update_notebook(
        self,
        notebook_id: str,
        *,
        title: str | None = None,
        parent_id: str | None = _UNSET,
        conn: Connection | None = None,
    ) -> Notebook:
        with self._w(conn) as c:
            self._live_notebook(c, notebook_id)
            values: dict[str, Any] = {"updated_time": now_ms()}
            if title is not None:
                values["title"] = _clean_title(title, "notebook title")
            if parent_id is not _UNSET:
                if parent_id is not None:
                    self._live_notebook(c, parent_id)
                    if notebook_id in {b.id for b in self.notebook_path(parent_id, conn=c)}:
                        raise InvalidInput("a notebook cannot be moved inside itself or its own sub-notebook")
                values["parent_id"] = parent_id
            c.execute(db.notebooks.update().where(db.notebooks.c.id == notebook_id).values(**values))
            return self.get_notebook(notebook_id, conn=c)

    def delete_notebook(self, notebook_id: str, *, conn: Connection | None = None) -> int:
        """Move a notebook, its sub-notebooks and all their notes to the trash; returns the note count."""
        with self._w(conn) as c:
            self._live_notebook(c, notebook_id)
            ids = self._subtree(c, notebook_id)
            batch, t = new_id(), now_ms()
            nb, n = db.notebooks, db.notes
            c.execute(
                nb.update()
                .where(nb.c.id.in_(ids), nb.c.deleted_time.is_(None))
                .values(deleted_time=t, trash_batch=batch)
            )
            note_ids = list(
                c.execute(
                    sa.select(n.c.id).where(n.c.notebook_id.in_(ids), n.c.deleted_time.is_(None))
                ).scalars()
            )
            if note_ids:
                c.execute(
                    n.update().where(n.c.id.in_(note_ids)).values(deleted_time=t, trash_batch=batch)
                )
                record_change(c, note_ids, "delete")
            return len(note_ids)

    def _subtree(self, c: Connection, root: str) -> list[str]:
        rows = c.execute(sa.select(db.notebooks.c.id, db.notebooks.c.parent_id)).all()
        children: dict[str | None, list[str]] = {}
        for r in rows:
            children.setdefault(r.parent_id, []).append(r.id)
        out, stack = [], [root]
        while stack:
            cur = stack.pop()
            if cur in out:
                continue
            out.append(cur)
            stack.extend(children.get(cur, []))
        return out

    def _live_notebook(self, c: Connection, notebook_id: str) -> Any:
        row = c.execute(sa.select(db.notebooks).where(db.notebooks.c.id == notebook_id)).first()
        if row is None or row.deleted_time is not None:
            state = "is in the trash" if row is not None else "does not exist"
            raise NotFound(f"notebook {notebook_id!r} {state}; `list_notebooks` shows the notebooks there are")
        return row

    @staticmethod
    def _notebook_from_row(r: Any, note_count: int = 0) -> Notebook:
        return Notebook(
            r.id, r.parent_id, r.title, r.created_time, r.updated_time, r.deleted_time, note_count
        )

    # -- notes --------------------------------------------------------------------------

    def create_note(
        self,
        title: str,
        body: str = "",
        notebook_id: str | None = None,
        *,
        is_todo: bool = False,
        todo_due: int | None = None,
        todo_completed: int | None = None,
        source_url: str = "",
        tags: Sequence[str] = (),
        id: str | None = None,
        created_time: int | None = None,
        updated_time: int | None = None,
        conn: Connection | None = None,
    ) -> Note:
        nid = check_id(id, "note id") if id else new_id()
        _check_text(title, "title")
        _check_text(body, "body")
        t = now_ms()
        with self._w(conn) as c:
            book = (
                self._live_notebook(c, notebook_id).id
                if notebook_id
                else self.default_notebook(conn=c).id
            )
            if c.execute(sa.select(db.notes.c.id).where(db.notes.c.id == nid)).first():
                raise Conflict(f"a note with id {nid!r} exists already")
            created = created_time or t
            row = {
                "id": nid,
                "notebook_id": book,
                "title": title.strip(),
                "body": body,
                "is_todo": bool(is_todo),
                "todo_due": _check_time(todo_due, "todo_due"),
                "todo_completed": _check_time(todo_completed, "todo_completed"),
                "source_url": source_url or "",
                "created_time": created,
                "updated_time": updated_time or created,
            }
            c.execute(db.notes.insert(), row)
            record_change(c, [nid], "create")
            if tags:
                self.add_tags(nid, tags, conn=c, _touch=False)
            return self.get_note(nid, conn=c)

    def get_note(
        self, note_id: str, *, include_deleted: bool = False, conn: Connection | None = None
    ) -> Note:
        with self._r(conn) as c:
            row = c.execute(sa.select(db.notes).where(db.notes.c.id == note_id)).first()
            if row is None or (row.deleted_time is not None and not include_deleted):
                state = "is in the trash" if row is not None else "does not exist"
                raise NotFound(f"note {note_id!r} {state}; search for it to find its id")
            return _note_from_row(row, self.tags_of([note_id], conn=c).get(note_id, []))

    def get_notes(self, note_ids: Sequence[str], *, conn: Connection | None = None) -> dict[str, Note]:
        """The live notes among ``note_ids``, by id (missing ones are simply absent)."""
        if not note_ids:
            return {}
        with self._r(conn) as c:
            rows = c.execute(
                sa.select(db.notes).where(
                    db.notes.c.id.in_(list(note_ids)), db.notes.c.deleted_time.is_(None)
                )
            ).all()
            tags = self.tags_of([r.id for r in rows], conn=c)
            return {r.id: _note_from_row(r, tags.get(r.id, [])) for r in rows}

    def list_notes(
        self,
        notebook_id: str | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        order: Literal["updated", "created", "title"] = "updated",
        conn: Connection | None = None,
    ) -> list[NoteSummary]:
        n = db.notes
        q = sa.select(
            n.c.id, n.c.notebook_id, n.c.title, n.c.is_todo, n.c.todo_due, n.c.todo_completed,
            n.c.updated_time, n.c.created_time,
        ).where(n.c.deleted_time.is_(None))
        if notebook_id:
            q = q.where(n.c.notebook_id == notebook_id)
        order_col = {
            "updated": n.c.updated_time.desc(),
            "created": n.c.created_time.desc(),
            "title": sa.func.lower(n.c.title),
        }[order]
        q = q.order_by(order_col, n.c.id).limit(limit).offset(offset)
        with self._r(conn) as c:
            return [
                NoteSummary(
                    r.id, r.notebook_id, r.title, bool(r.is_todo), r.todo_due, r.todo_completed,
                    r.updated_time, r.created_time,
                )
                for r in c.execute(q)
            ]

    def clipped_ids(self, note_ids: Sequence[str], *, conn: Connection | None = None) -> set[str]:
        """Which of ``note_ids`` came from outside the user's own writing (have a source URL)."""
        if not note_ids:
            return set()
        n = db.notes
        with self._r(conn) as c:
            return set(
                c.execute(sa.select(n.c.id).where(n.c.id.in_(list(note_ids)), n.c.source_url != "")).scalars()
            )

    def count_notes(self, *, conn: Connection | None = None) -> int:
        with self._r(conn) as c:
            return int(
                c.execute(
                    sa.select(sa.func.count()).select_from(db.notes).where(db.notes.c.deleted_time.is_(None))
                ).scalar_one()
            )

    def update_note(
        self,
        note_id: str,
        *,
        title: str | None = None,
        body: str | None = None,
        notebook_id: str | None = None,
        is_todo: bool | None = None,
        todo_due: int | None = _UNSET,
        todo_completed: int | None = _UNSET,
        source_url: str | None = None,
        conn: Connection | None = None,
    ) -> Note:
        """Change a note; a change of title or body keeps the previous version as a revision."""
        with self._w(conn) as c:
            row = self._live_note(c, note_id)
            values: dict[str, Any] = {}
            if title is not None:
                _check_text(title, "title")
                if title.strip() != row.title:
                    values["title"] = title.strip()
            if body is not None:
                _check_text(body, "body")
                if body != row.body:
                    values["body"] = body
            if notebook_id is not None and notebook_id != row.notebook_id:
                values["notebook_id"] = self._live_notebook(c, notebook_id).id
            if is_todo is not None and bool(is_todo) != bool(row.is_todo):
                values["is_todo"] = bool(is_todo)
            if todo_due is not _UNSET and todo_due != row.todo_due:
                values["todo_due"] = _check_time(todo_due, "todo_due")
            if todo_completed is not _UNSET and todo_completed != row.todo_completed:
                values["todo_completed"] = _check_time(todo_completed, "todo_completed")
            if source_url is not None and source_url != row.source_url:
                values["source_url"] = source_url
            if not values:
                return self.get_note(note_id, conn=c)
            t = max(now_ms(), row.updated_time + 1)
            if "title" in values or "body" in values:
                c.execute(
                    db.revisions.insert(),
                    {
                        "id": new_id(),
                        "note_id": note_id,
                        "title": row.title,
                        "body": row.body,
                        "version_time": row.updated_time,
                        "created_time": t,
                    },
                )
            values["updated_time"] = t
            c.execute(db.notes.update().where(db.notes.c.id == note_id).values(**values))
            record_change(c, [note_id], "update")
            return self.get_note(note_id, conn=c)

    def _live_note(self, c: Connection, note_id: str) -> Any:
        row = c.execute(sa.select(db.notes).where(db.notes.c.id == note_id)).first()
        if row is None or row.deleted_time is not None:
            state = "is in the trash" if row is not None else "does not exist"
            raise NotFound(f"note {note_id!r} {state}; search for it to find its id")
        return row

    def delete_note(self, note_id: str, *, conn: Connection | None = None) -> Note:
        """Move a note to the trash; it keeps its notebook for a restore."""
        with self._w(conn) as c:
            self._live_note(c, note_id)
            c.execute(
                db.notes.update()
                .where(db.notes.c.id == note_id)
                .values(deleted_time=now_ms(), trash_batch=new_id())
            )
            record_change(c, [note_id], "delete")
            return self.get_note(note_id, include_deleted=True, conn=c)

    # -- trash --------------------------------------------------------------------------

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

    # -- tags ---------------------------------------------------------------------------

    def list_tags(
        self,
        *,
        used_only: bool = False,
        notebook_ids: Collection[str] | None = None,
        conn: Connection | None = None,
    ) -> list[Tag]:
        """Tags with the number of live notes carrying them, sorted by title.

        With ``notebook_ids``, only notes in those notebooks count.
        """
        t, nt, n = db.tags, db.note_tags, db.notes
        where = [n.c.deleted_time.is_(None)]
        if notebook_ids is not None:
            where.append(n.c.notebook_id.in_(list(notebook_ids)))
        counts = (
            sa.select(nt.c.tag_id, sa.func.count().label("cnt"))
            .select_from(nt.join(n, n.c.id == nt.c.note_id))
            .where(*where)
            .group_by(nt.c.tag_id)
            .subquery()
        )
        q = (
            sa.select(t.c.id, t.c.title, sa.func.coalesce(counts.c.cnt, 0).label("cnt"))
            .select_from(t.outerjoin(counts, counts.c.tag_id == t.c.id))
            .order_by(t.c.title_key)
        )
        with self._r(conn) as c:
            tags = [Tag(r.id, r.title, int(r.cnt)) for r in c.execute(q)]
        return [x for x in tags if x.note_count > 0] if used_only else tags

    def ensure_tag(self, title: str, *, id: str | None = None, conn: Connection | None = None) -> Tag:
        title = _clean_title(title, "tag")
        key = title.lower()
        with self._w(conn) as c:
            row = c.execute(sa.select(db.tags).where(db.tags.c.title_key == key)).first()
            if row is not None:
                return Tag(row.id, row.title)
            t = now_ms()
            tid = check_id(id, "tag id") if id else new_id()
            c.execute(
                db.tags.insert(),
                {"id": tid, "title": title, "title_key": key, "created_time": t, "updated_time": t},
            )
            return Tag(tid, title)

    def add_tags(
        self,
        note_id: str,
        titles: Iterable[str],
        *,
        create_missing: bool = True,
        conn: Connection | None = None,
        _touch: bool = True,
    ) -> list[str]:
        """Attach tags by title; returns the titles newly attached."""
        added: list[str] = []
        with self._w(conn) as c:
            self._live_note(c, note_id)
            for title in titles:
                key = _clean_title(title, "tag").lower()
                row = c.execute(sa.select(db.tags).where(db.tags.c.title_key == key)).first()
                if row is None:
                    if not create_missing:
                        raise NotFound(f"no tag named {title!r}; `list_tags` shows the tags there are")
                    tag = self.ensure_tag(title, conn=c)
                else:
                    tag = Tag(row.id, row.title)
                exists = c.execute(
                    sa.select(db.note_tags.c.note_id).where(
                        db.note_tags.c.note_id == note_id, db.note_tags.c.tag_id == tag.id
                    )
                ).first()
                if not exists:
                    c.execute(
                        db.note_tags.insert(),
                        {"note_id": note_id, "tag_id": tag.id, "created_time": now_ms()},
                    )
                    added.append(tag.title)
            if added and _touch:
                record_change(c, [note_id], "update")
        return added

    def remove_tags(self, note_id: str, titles: Iterable[str], *, conn: Connection | None = None) -> list[str]:
        """Detach tags by title; returns the titles that were attached and now are not."""
        removed: list[str] = []
        with self._w(conn) as c:
            self._live_note(c, note_id)
            for title in titles:
                row = c.execute(
                    sa.select(db.tags).where(db.tags.c.title_key == title.strip().lower())
                ).first()
                if row is None:
                    continue
                res = c.execute(
                    db.note_tags.delete().where(
                        db.note_tags.c.note_id == note_id, db.note_tags.c.tag_id == row.id
                    )
                )
                if res.rowcount:
                    removed.append(row.title)
            if removed:
                record_change(c, [note_id], "update")
        return removed

    def delete_tag(self, title: str, *, conn: Connection | None = None) -> None:
        with self._w(conn) as c:
            row = c.execute(sa.select(db.tags).where(db.tags.c.title_key == title.strip().lower())).first()
            if row is None:
                raise NotFound(f"no tag named {title!r}")
            note_ids = list(
                c.execute(sa.select(db.note_tags.c.note_id).where(db.note_tags.c.tag_id == row.id)).scalars()
            )
            c.execute(db.note_tags.delete().where(db.note_tags.c.tag_id == row.id))
            c.execute(db.tags.delete().where(db.tags.c.id == row.id))
            record_change(c, note_ids, "update")

    def tags_of(self, note_ids: Sequence[str], *, conn: Connection | None = None) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if not note_ids:
            return out
        with self._r(conn) as c:
            for chunk in _chunks(list(note_ids), 500):
                q = (
                    sa.select(db.note_tags.c.note_id, db.tags.c.title)
                    .select_from(db.note_tags.join(db.tags, db.tags.c.id == db.note_tags.c.tag_id))
                    .where(db.note_tags.c.note_id.in_(chunk))
                    .order_by(db.tags.c.title_key)
                )
                for r in c.execute(q):
                    out.setdefault(r.note_id, []).append(r.title)
        return out

    # -- revisions ----------------------------------------------------------------------

    def list_revisions(self, note_id: str, *, conn: Connection | None = None) -> list[Revision]:
        """Earlier versions of a note, newest first."""
        with self._r(conn) as c:
            self.get_note(note_id, include_deleted=True, conn=c)
            rows = c.execute(
                sa.select(db.revisions)
                .where(db.revisions.c.note_id == note_id)
                .order_by(db.revisions.c.created_time.desc(), db.revisions.c.id)
            ).all()
            return [Revision(r.id, r.note_id, r.title, r.body, r.version_time, r.created_time) for r in rows]

    def restore_revision(self, revision_id: str, *, conn: Connection | None = None) -> Note:
        """Make an earlier version current again (the current one becomes a revision too)."""
        with self._w(conn) as c:
            r = c.execute(sa.select(db.revisions).where(db.revisions.c.id == revision_id)).first()
            if r is None:
                raise NotFound(f"no revision {revision_id!r}; `noteloom notes history NOTE` lists them")
            return self.update_note(r.note_id, title=r.title, body=r.body, conn=c)

    # -- attachments --------------------------------------------------------------------

    def attachment_path(self, attachment_id: str, filename: str) -> Path:
        ext = Path(filename).suffix.lower()
        if not re.fullmatch(r"\.[a-z0-9]{1,10}", ext):
            ext = ""
        return self.attachments_dir / f"{check_id(attachment_id, 'attachment id')}{ext}"

    def add_attachment(
        self,
        note_id: str | None,
        source: Path | bytes,
        filename: str,
        *,
        title: str = "",
        mime: str | None = None,
        id: str | None = None,
        created_time: int | None = None,
        updated_time: int | None = None,
        conn: Connection | None = None,
    ) -> Attachment:
        """Store a file under the data directory and link it to a note."""
        aid = check_id(id, "attachment id") if id else new_id()
        safe_name = Path(filename.replace("\\", "/")).name or "file"
        mime = mime or mimetypes.guess_type(safe_name)[0] or "application/octet-stream"
        dest = self.attachment_path(aid, safe_name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        if isinstance(source, bytes):
            tmp.write_bytes(source)
        else:
            shutil.copyfile(source, tmp)
        size = tmp.stat().st_size
        t = now_ms()
        try:
            with self._w(conn) as c:
                if note_id is not None:
                    self._live_note(c, note_id)
                c.execute(
                    db.attachments.insert(),
                    {
                        "id": aid,
                        "note_id": note_id,
                        "title": title or safe_name,
                        "filename": safe_name,
                        "mime": mime,
                        "size": size,
                        "created_time": created_time or t,
                        "updated_time": updated_time or created_time or t,
                    },
                )
            tmp.replace(dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return Attachment(aid, note_id, title or safe_name, safe_name, mime, size, created_time or t, updated_time or created_time or t)

    def list_attachments(self, note_id: str | None = None, *, conn: Connection | None = None) -> list[Attachment]:
        q = sa.select(db.attachments).order_by(db.attachments.c.created_time, db.attachments.c.id)
        if note_id is not None:
            q = q.where(db.attachments.c.note_id == note_id)
        with self._r(conn) as c:
            return [
                Attachment(r.id, r.note_id, r.title, r.filename, r.mime, r.size, r.created_time, r.updated_time)
                for r in c.execute(q)
            ]

    def get_attachment(self, attachment_id: str, *, conn: Connection | None = None) -> Attachment:
        with self._r(conn) as c:
            r = c.execute(sa.select(db.attachments).where(db.attachments.c.id == attachment_id)).first()
            if r is None:
                raise NotFound(f"no attachment {attachment_id!r}")
            return Attachment(r.id, r.note_id, r.title, r.filename, r.mime, r.size, r.created_time, r.updated_time)


def _clean_title(title: str, what: str) -> str:
    if not isinstance(title, str):
        raise InvalidInput(f"{what} must be text")
    if "\x00" in title:
        raise InvalidInput(f"{what} contains a NUL character")
    cleaned = " ".join(title.split())
    if not cleaned:
        raise InvalidInput(f"{what} must not be empty")
    if len(cleaned) > 1000:
        raise InvalidInput(f"{what} is {len(cleaned)} characters long; keep it under 1000")
    return cleaned


def _check_text(value: str, what: str) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")


def _check_time(value: int | None, what: str) -> int | None:
    if value is None or value == 0:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(f"{what} must be a time in milliseconds since 1970, not {value!r}")
    return value


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
