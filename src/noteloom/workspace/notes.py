"""Notes and to-dos, their tags, their revisions and their attachments."""

from __future__ import annotations

import mimetypes
import re
import shutil
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, NotFound
from noteloom.workspace import revisions
from noteloom.workspace.changes import record_change
from noteloom.workspace.model import (
    _UNSET,
    Attachment,
    Note,
    NoteSummary,
    Revision,
    Tag,
    _check_text,
    _check_time,
    _clean_title,
    _note_from_row,
    check_id,
)
from noteloom.workspace.notebooks import Notebooks
from noteloom.workspace.store import _chunks

_PLACES = (
    sa.select(db.notes.c.id, db.notebooks.c.title, db.notes.c.source_url != "")
    .select_from(db.notes.join(db.notebooks, db.notebooks.c.id == db.notes.c.notebook_id))
    .where(db.notes.c.id.in_(sa.bindparam("ids", expanding=True)))
)


class Notes(Notebooks):
    """Notes (each lives in a notebook), tags, revisions and attachments."""

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
        nid = check_id(id, "note id", "id") if id else new_id()
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
            created = _check_time(created_time, "created_time") or t
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
                "updated_time": _check_time(updated_time, "updated_time") or created,
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
        notebook_ids: Collection[str] | None = None,
        conn: Connection | None = None,
    ) -> list[NoteSummary]:
        """Live notes, newest change first (or ``order``): in ``notebook_id``, and only in
        ``notebook_ids`` when given (the notebooks a person may see; empty: none)."""
        n = db.notes
        q = sa.select(
            n.c.id, n.c.notebook_id, n.c.title, n.c.is_todo, n.c.todo_due, n.c.todo_completed,
            n.c.updated_time, n.c.created_time,
        ).where(n.c.deleted_time.is_(None))
        if notebook_id:
            q = q.where(n.c.notebook_id == notebook_id)
        if notebook_ids is not None:
            if not notebook_ids:
                return []
            q = q.where(n.c.notebook_id.in_(sorted(notebook_ids)))
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

    def places(self, note_ids: Collection[str], *, conn: Connection | None = None) -> dict[str, tuple[str, bool]]:
        """For each of ``note_ids``: its notebook's title, and whether it came from outside
        the user's own writing (has a source URL). One query, for a page of search hits."""
        if not note_ids:
            return {}
        with self._r(conn) as c:
            return {r[0]: (r[1], bool(r[2])) for r in c.execute(_PLACES, {"ids": list(note_ids)})}

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
            # Locked (PostgreSQL) until commit: a second writer of this note waits, then
            # reads this one's result, so each revision deltas against the version it replaced.
            row = self._live_note(c, note_id, lock=True)
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
                t = revisions.record(c, row, values.get("title", row.title), values.get("body", row.body), t)
            values["updated_time"] = t
            c.execute(db.notes.update().where(db.notes.c.id == note_id).values(**values))
            record_change(c, [note_id], "update")
            return self.get_note(note_id, conn=c)

    def _live_note(self, c: Connection, note_id: str, *, lock: bool = False) -> Any:
        q = sa.select(db.notes).where(db.notes.c.id == note_id)
        row = c.execute(q.with_for_update() if lock else q).first()
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
        with self._r(conn) as c:
            if notebook_ids is None:
                # Every tagging, less those of notes in the trash (few): both read indexes
                # only, where joining every tagging to its note read ~80,000 rows of notes
                # (120 ms at 100,000 notes).
                counts: dict[str, int] = dict(
                    c.execute(sa.select(nt.c.tag_id, sa.func.count()).group_by(nt.c.tag_id)).all()
                )
                # Trash times are "now" in epoch milliseconds, so ">= 0" is "in the trash";
                # as a range, SQLite (which keeps no statistics) reads it from the index on
                # deleted_time, where IS NOT NULL made it scan every tagging instead.
                in_trash = sa.select(n.c.id).where(n.c.deleted_time >= 0)
                gone = c.execute(
                    sa.select(nt.c.tag_id, sa.func.count())
                    .where(nt.c.note_id.in_(in_trash))
                    .group_by(nt.c.tag_id)
                )
                for tag_id, k in gone:
                    counts[tag_id] -= k
            else:
                counts = dict(
                    c.execute(
                        sa.select(nt.c.tag_id, sa.func.count())
                        .select_from(nt.join(n, n.c.id == nt.c.note_id))
                        .where(n.c.deleted_time.is_(None), n.c.notebook_id.in_(list(notebook_ids)))
                        .group_by(nt.c.tag_id)
                    ).all()
                )
            rows = c.execute(sa.select(t.c.id, t.c.title).order_by(t.c.title_key)).all()
        tags = [Tag(r.id, r.title, int(counts.get(r.id, 0))) for r in rows]
        return [x for x in tags if x.note_count > 0] if used_only else tags

    def ensure_tag(self, title: str, *, id: str | None = None, conn: Connection | None = None) -> Tag:
        title = _clean_title(title, "tag", "tag")
        key = title.lower()
        with self._w(conn) as c:
            row = c.execute(sa.select(db.tags).where(db.tags.c.title_key == key)).first()
            if row is not None:
                return Tag(row.id, row.title)
            t = now_ms()
            tid = check_id(id, "tag id", "id") if id else new_id()
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
                key = _clean_title(title, "tag", "tag").lower()
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
        """Earlier versions of a note, newest first. Their text is read only when asked for
        (``Revision.body``), so a listing costs the same whatever the notes' size."""
        with self._r(conn) as c:
            self.get_note(note_id, include_deleted=True, conn=c)
            return [
                Revision(rid, note_id, title, chars, version_time, created_time, self._revision_body(conn, rid))
                for rid, title, chars, version_time, created_time in revisions.listing(c, note_id)
            ]

    def revision_text(self, revision_id: str, *, conn: Connection | None = None) -> tuple[str, str]:
        """The full title and body of an earlier version."""
        with self._r(conn) as c:
            return revisions.text(c, revision_id)

    def revision_diff(self, revision_id: str, *, conn: Connection | None = None) -> str:
        """What changed from an earlier version to the next one (the next newer revision, or
        the current note): a unified diff of the bodies, after a line for a changed title."""
        with self._r(conn) as c:
            note_id = revisions.note_of(c, revision_id)
            ids = [r[0] for r in revisions.listing(c, note_id)]
            old = revisions.text(c, revision_id)
            at = ids.index(revision_id)
            if at == 0:
                note = self.get_note(note_id, include_deleted=True, conn=c)
                new, label = (note.title, note.body), "current version"
            else:
                new, label = revisions.text(c, ids[at - 1]), f"revision {ids[at - 1]}"
        return revisions.unified_diff(old, new, f"revision {revision_id}", label)

    def _revision_body(self, conn: Connection | None, revision_id: str) -> Callable[[], str]:
        def load() -> str:
            # Inside the caller's transaction while it lasts (it may hold uncommitted versions).
            live = conn if conn is not None and not conn.closed and conn.in_transaction() else None
            return self.revision_text(revision_id, conn=live)[1]

        return load

    def restore_revision(self, revision_id: str, *, conn: Connection | None = None) -> Note:
        """Make an earlier version current again (the current one becomes a revision too)."""
        with self._w(conn) as c:
            note_id = revisions.note_of(c, revision_id)
            # The lock first: the version is rebuilt from the note's current text.
            c.execute(sa.select(db.notes.c.id).where(db.notes.c.id == note_id).with_for_update())
            title, body = revisions.text(c, revision_id)
            return self.update_note(note_id, title=title, body=body, conn=c)

    # -- attachments --------------------------------------------------------------------

    def attachment_path(self, attachment_id: str, filename: str) -> Path:
        ext = Path(filename).suffix.lower()
        if not re.fullmatch(r"\.[a-z0-9]{1,10}", ext):
            ext = ""
        return self.attachments_dir / f"{check_id(attachment_id, 'attachment id', 'attachment_id')}{ext}"

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
        aid = check_id(id, "attachment id", "id") if id else new_id()
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
