"""Notebooks (nested): create, find, move, and move to the trash with everything inside."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, InvalidInput, NotFound
from noteloom.workspace.changes import record_change
from noteloom.workspace.model import (
    _ID_RE,
    _UNSET,
    DEFAULT_NOTEBOOK_TITLE,
    Notebook,
    _clean_title,
    check_id,
)
from noteloom.workspace.store import Store


class Notebooks(Store):
    """Notebooks; the notes, tags and trash mixins build on these."""

    def create_notebook(
        self,
        title: str,
        parent_id: str | None = None,
        *,
        id: str | None = None,
        created_time: int | None = None,
        updated_time: int | None = None,
        owner_id: str | None = None,
        conn: Connection | None = None,
    ) -> Notebook:
        """A new notebook. Under ``parent_id`` it belongs to the parent's owner (``owner_id`` is
        then ignored); at the top to ``owner_id`` (``None``: the workspace owner)."""
        title = _clean_title(title, "notebook title")
        nid = check_id(id, "notebook id", "id") if id else new_id()
        t = now_ms()
        with self._w(conn) as c:
            if parent_id is not None:
                owner_id = self._live_notebook(c, parent_id).owner_id
            if c.execute(sa.select(db.notebooks.c.id).where(db.notebooks.c.id == nid)).first():
                raise Conflict(f"a notebook with id {nid!r} exists already")
            if created_time is None:
                t = _after_latest(c, t)
            created, updated = created_time or t, updated_time or created_time or t
            c.execute(
                db.notebooks.insert(),
                {"id": nid, "parent_id": parent_id, "title": title, "created_time": created, "updated_time": updated,
                 "owner_id": owner_id},
            )
        return Notebook(nid, parent_id, title, created, updated, owner_id=owner_id)

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

    def default_notebook(self, *, owner_id: str | None = None, conn: Connection | None = None) -> Notebook:
        """The notebook new notes go to when none is named: the first top-level notebook of
        its person, created (titled as usual) if they have none.

        ``owner_id`` names the person (``None``, or the owner's own id: the workspace owner,
        whose notebooks are those without an ``owner_id``); a workspace of one person has
        only the owner's, so this is its first top-level notebook, as it always was."""
        nb, u = db.notebooks, db.users
        with self._w(conn) as c:
            owner = c.execute(sa.select(u.c.id).where(u.c.role == "owner").limit(1)).scalar()
            if owner_id is not None and owner_id == owner:
                owner_id = None
            whose = nb.c.owner_id == owner_id if owner_id is not None else sa.or_(
                nb.c.owner_id.is_(None), *([nb.c.owner_id == owner] if owner is not None else []))
            row = c.execute(
                sa.select(nb)
                .where(nb.c.deleted_time.is_(None), nb.c.parent_id.is_(None), whose)
                .order_by(nb.c.created_time, nb.c.id)
                .limit(1)
            ).first()
            if row is not None:
                return self._notebook_from_row(row)
            return self.create_notebook(DEFAULT_NOTEBOOK_TITLE, owner_id=owner_id, conn=c)

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
                        raise InvalidInput("a notebook cannot be moved inside itself or its own sub-notebook", field="parent_id")
                values["parent_id"] = parent_id
            c.execute(db.notebooks.update().where(db.notebooks.c.id == notebook_id).values(**values))
            if parent_id is not _UNSET and parent_id is not None:
                # Moved under another notebook: it and everything under it belong to that one's owner.
                self.set_notebook_owner(notebook_id, self._live_notebook(c, parent_id).owner_id, conn=c)
            return self.get_notebook(notebook_id, conn=c)

    def set_notebook_owner(self, notebook_id: str, owner_id: str | None, *, conn: Connection | None = None) -> int:
        """Give a notebook and everything under it (trashed parts too) to ``owner_id``
        (``None``: the workspace owner); returns how many notebooks that touched."""
        with self._w(conn) as c:
            ids = self._subtree(c, notebook_id)
            c.execute(db.notebooks.update().where(db.notebooks.c.id.in_(ids)).values(owner_id=owner_id))
            return len(ids)

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
            r.id, r.parent_id, r.title, r.created_time, r.updated_time, r.deleted_time, note_count, r.owner_id
        )


def _after_latest(c: Connection, t: int) -> int:
    """``t``, or a millisecond after the newest notebook when that was made in the same
    millisecond or just before a clock step back: notebooks made in one go keep the order they
    were made in (the first top-level notebook is a person's default, and two made within one
    millisecond used to tie, leaving which one came first to their random ids). A newest
    notebook more than a second ahead (an import's own times) is left alone."""
    latest = c.execute(sa.select(sa.func.max(db.notebooks.c.created_time))).scalar()
    if latest is not None and t <= latest < t + 1000:
        return int(latest) + 1
    return t
