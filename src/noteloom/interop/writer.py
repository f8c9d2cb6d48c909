"""The bulk writer: a whole bundle in one write transaction, with ``executemany``.

Going through ``Workspace.create_note`` costs a dozen statements per note; an import
of 100,000 notes needs a few statements per thousand. Rows still go into the same
tables (so the keyword index triggers see every note) and every note gets its
``create`` row in the change feed. Notes are written in batches as they come: a streamed
bundle (a Markdown folder) is read a bounded number of notes ahead, in a child process (a
large folder: its parsing then runs beside SQLite) or in a thread, so the import holds a
few batches of notes, never the whole source. The readers copy attachment
files into the import's staging folder; the writer moves them into place inside the
transaction, after a journal of the moves and before the commit (see ``staging``): a
committed row always has its file, and the files of a transaction that never committed
are deleted, now (an error) or by the next clean-up (a killed process).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import new_id, now_ms
from noteloom.errors import ImportExportError
from noteloom.interop.bundle import (
    AttachmentItem,
    Bundle,
    Duplicates,
    ImportSummary,
    NoteItem,
    Notices,
    Progress,
)
from noteloom.interop.links import ID_LINK
from noteloom.interop.markdown import NoteStream, child_source
from noteloom.interop.readahead import ProcessReadAhead, ReadAhead
from noteloom.interop.staging import Staging, crash_point
from noteloom.workspace import Workspace, record_change

CHUNK = 500
CHUNK_BYTES = 8 << 20
_IN_CHUNK = 500
#: How far a streamed reader may run ahead of the writer: groups of notes in its queue
#: (at most ``READ_AHEAD * GROUP_BYTES`` of text, 32 MiB). Enough for the reader to go on
#: parsing while FTS5 indexes ``FTS_BYTES`` of notes in one statement.
READ_AHEAD = 16
GROUP_NOTES = 256
GROUP_BYTES = 2 << 20
#: From this many notes a folder is read in a child process (its Python then runs beside
#: the writer's, not under one GIL); below it, in a thread (starting a process costs more
#: than a small import's parsing).
PROCESS_AT = 5000


@dataclass
class _Plan:
    """What the writer decided so far: ids kept or replaced (``remap``), and the rows that
    wait for the end of the notes (attachments point at notes)."""

    remap: dict[str, str] = field(default_factory=dict)
    #: Title key -> tag id, of the workspace and of the tags written so far.
    tag_ids: dict[str, str] = field(default_factory=dict)
    books: int = 0
    notes: int = 0
    tags: int = 0
    root_book: str | None = None
    attachment_rows: list[dict[str, Any]] = field(default_factory=list)
    #: (attachment id, staged file, final path) for each attachment row.
    moves: list[tuple[str, Path, Path]] = field(default_factory=list)
    #: How many of ``bundle.attachments`` were planned (the list grows while notes stream in).
    attachments_seen: int = 0
    #: Written notes whose body links ``:/<id>``, with the size of ``remap`` then
    #: (``new-ids`` only): an id replaced later is mended in those bodies at the end.
    linking: list[tuple[str, int]] = field(default_factory=list)
    #: Notices of the writer, after the reader's: fixed fields, then what was planned.
    fitted: Notices = field(default_factory=Notices)
    planned: Notices = field(default_factory=Notices)


def write_bundle(
    ws: Workspace,
    bundle: Bundle,
    *,
    source: str,
    staging: Staging,
    target: str | None = None,
    duplicates: Duplicates = "skip",
    progress: Progress,
) -> ImportSummary:
    """Write ``bundle`` into ``ws``: all of it, or (on any error) nothing at all.

    ``target`` is the id of a notebook the import goes under; every attachment's file
    lies in ``staging``, on the same file system as the attachments (removed by the caller)."""
    crash_point("staged")
    plan = _Plan()
    moved: list[Path] = []
    made: list[Path] = []
    try:
        with ws.write() as conn, _notes_of(bundle) as notes:
            if target is not None:
                _check_target(conn, target)
            _fit_fixed(bundle, plan.fitted)
            _write_books(conn, bundle, plan, target, duplicates)
            _write_bundle_tags(conn, bundle, plan)
            total = bundle.expected_notes if bundle.stream is not None else len(bundle.notes)
            with _NoteInserter(conn) as inserter:
                done = 0
                for batch in _batches(notes, bundle):
                    _plan_attachments(conn, ws, bundle, plan, duplicates)
                    _write_notes(conn, inserter, batch, bundle, plan, target, duplicates)
                    done += len(batch)
                    progress("writing", done, max(total or 0, done))
                progress("writing", done, done)
            _plan_attachments(conn, ws, bundle, plan, duplicates)  # those read after the last note
            _mend_links(conn, plan)
            _write_attachments(conn, plan)
            # Files go into place before the commit makes their rows visible; the journal
            # lets a later clean-up delete them if this process dies before committing.
            if plan.moves:
                staging.journal([(aid, dest) for aid, _, dest in plan.moves])
            crash_point("rows")
            moves_total = len(plan.moves)
            for i, (_, src, dest) in enumerate(plan.moves):
                if not dest.parent.is_dir():
                    dest.parent.mkdir(parents=True)
                    made.append(dest.parent)
                os.replace(src, dest)  # a rename within one file system cannot half-happen
                moved.append(dest)
                if i % 500 == 0:
                    progress("files", i, moves_total)
            if moves_total:
                progress("files", moves_total, moves_total)
            crash_point("moved")
    except BaseException:
        for path in moved:
            with contextlib.suppress(OSError):
                path.unlink()
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    crash_point("committed")
    notices = Notices()
    for part in (bundle.notices, plan.fitted, plan.planned):
        notices.extend(part)
    return ImportSummary(
        source=source,
        format=bundle.format,
        notebooks=plan.books,
        notes=plan.notes,
        tags=plan.tags,
        attachments=len(plan.attachment_rows),
        skipped=notices.skipped,
        warnings=notices.count,
        messages=notices.messages(),
        skipped_items=[{"item": item, "reason": reason} for item, reason in notices.skips],
    )


@contextlib.contextmanager
def _notes_of(bundle: Bundle) -> Iterator[Iterator[NoteItem]]:
    """The notes of ``bundle``: its list, or its stream read ahead in a thread."""
    if bundle.stream is None:
        yield iter(bundle.notes)
        return
    stream = bundle.stream
    if isinstance(stream, NoteStream) and (bundle.expected_notes or 0) >= PROCESS_AT:
        child = ProcessReadAhead(
            child_source, stream.in_child(), take_back=stream.take_back,
            depth=READ_AHEAD, group=GROUP_NOTES, group_bytes=GROUP_BYTES, prepare=_index_ahead,
        )
        try:
            child.start()
        except (OSError, ValueError, pickle.PicklingError):  # no processes here: the thread reads
            pass
        else:
            with child as notes:
                yield notes
            return
    with ReadAhead(
        stream, depth=READ_AHEAD, group=GROUP_NOTES, group_bytes=GROUP_BYTES, prepare=_index_ahead
    ) as notes:
        yield notes


def _index_ahead(n: NoteItem) -> None:
    """In the reading thread: the body as the keyword index sees it (``_NoteInserter``)."""
    if not n.body.isascii():
        n.indexed = db.index_text(n.body)


def _batches(notes: Iterator[NoteItem], bundle: Bundle) -> Iterator[list[NoteItem]]:
    """Notes with their bodies, at most ``CHUNK`` notes and about ``CHUNK_BYTES`` of text at a time."""
    batch: list[NoteItem] = []
    size = 0
    for n in notes:
        if n.body_ref is not None:
            n.body = bundle.body_of(n)
            n.body_ref = None
        batch.append(n)
        size += len(n.body)
        if len(batch) >= CHUNK or size >= CHUNK_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


#: What the workspace allows a notebook or tag title (``workspace.model._clean_title``).
MAX_TITLE = 1000


class _Fit:
    """Short fields as the workspace's own rules want them: no NUL (PostgreSQL refuses it
    in text; the readers already took it out of bodies) and notebook and tag titles of at
    most ``MAX_TITLE`` characters. The bulk writer skips the domain's checks, so the
    import applies them, fixing the value and saying so rather than losing the item."""

    def __init__(self, notices: Notices) -> None:
        self.notices = notices

    def clean(self, value: str, where: str) -> str:
        if "\x00" in value:
            self.notices.warn("removed NUL characters from titles and other fields", where)
            value = value.replace("\x00", "")
        return value

    def title(self, value: str, where: str) -> str:
        value = self.clean(value, where)
        if len(value) > MAX_TITLE:
            self.notices.warn(f"shortened notebook and tag titles to {MAX_TITLE:,} characters", where)
            value = value[:MAX_TITLE].rstrip()
        return value

    def note(self, n: NoteItem) -> None:
        n.title = self.clean(n.title, n.id[:8])
        n.source_url = self.clean(n.source_url, n.id[:8])
        if any(len(tag) > MAX_TITLE or "\x00" in tag for tag in n.tags):
            n.tags = list(dict.fromkeys(t for t in (self.title(tag, n.id[:8]) for tag in n.tags) if t))

    def attachment(self, a: AttachmentItem) -> None:
        a.title = self.clean(a.title, a.id[:8])
        a.filename = self.clean(a.filename, a.id[:8]) or "file"
        a.mime = self.clean(a.mime, a.id[:8]) or "application/octet-stream"


def _fit_fixed(bundle: Bundle, notices: Notices) -> None:
    fit = _Fit(notices)
    for b in bundle.books:
        b.title = fit.title(b.title, b.id[:8]) or "Untitled"
    for t in bundle.tags:
        t.title = fit.title(t.title, t.id[:8]) or t.id[:8]


def _check_target(conn: Connection, target: str) -> None:
    row = conn.execute(sa.select(db.notebooks.c.deleted_time).where(db.notebooks.c.id == target)).first()
    if row is None or row.deleted_time is not None:
        raise ImportExportError(f"notebook {target!r} is gone; choose another with --notebook")


def _existing(conn: Connection, column: sa.Column[Any], ids: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(list(ids), _IN_CHUNK):
        found.update(conn.execute(sa.select(column).where(column.in_(chunk))).scalars())
    return found


def _write_books(conn: Connection, bundle: Bundle, plan: _Plan, target: str | None, duplicates: Duplicates) -> None:
    """Notebooks: an existing live one with the same id is reused (its notes merge in)."""
    nb = db.notebooks
    remap = plan.remap
    taken_books = {
        r.id: r.deleted_time
        for chunk in _chunks([b.id for b in bundle.books], _IN_CHUNK)
        for r in conn.execute(sa.select(nb.c.id, nb.c.deleted_time).where(nb.c.id.in_(chunk)))
    }
    reused: set[str] = set()
    for b in bundle.books:
        if b.id in taken_books:
            if duplicates == "skip" and taken_books[b.id] is None:
                reused.add(b.id)
                plan.planned.warn("added notes to notebooks that existed already", b.title)
                continue
            remap[b.id] = new_id()
    rows = [
        {
            "id": remap.get(b.id, b.id),
            "parent_id": remap.get(b.parent_id, b.parent_id) if b.parent_id else target,
            "title": b.title,
            "created_time": b.created_time,
            "updated_time": b.updated_time,
        }
        for b in bundle.books
        if b.id not in reused
    ]
    for chunk in _chunks(rows, CHUNK):
        conn.execute(nb.insert(), chunk)
    plan.books += len(rows)


def _write_bundle_tags(conn: Connection, bundle: Bundle, plan: _Plan) -> None:
    """Tags are matched by title, without case; the bundle's own keep their id when it is free."""
    plan.tag_ids = {r.title_key: r.id for r in conn.execute(sa.select(db.tags.c.id, db.tags.c.title_key))}
    taken_ids = _existing(conn, db.tags.c.id, [t.id for t in bundle.tags])
    rows = []
    for t in bundle.tags:
        key = t.title.lower()
        if key in plan.tag_ids:
            continue
        tid = t.id if t.id not in taken_ids else new_id()
        taken_ids.add(tid)
        plan.tag_ids[key] = tid
        rows.append({"id": tid, "title": t.title, "title_key": key,
                     "created_time": t.created_time, "updated_time": t.updated_time})
    for chunk in _chunks(rows, CHUNK):
        conn.execute(db.tags.insert(), chunk)
    plan.tags += len(rows)


def _plan_attachments(conn: Connection, ws: Workspace, bundle: Bundle, plan: _Plan, duplicates: Duplicates) -> None:
    """Attachments the reader added since the last call, planned before the notes that link
    them (a changed attachment id changes those bodies); their rows wait for the notes."""
    new = bundle.attachments[plan.attachments_seen :]
    if not new:
        return
    plan.attachments_seen += len(new)
    fit = _Fit(plan.fitted)
    for a in new:
        if not a.staged:
            raise ValueError(f"attachment {a.id!r} is not in the staging folder")
        fit.attachment(a)
    taken = _existing(conn, db.attachments.c.id, [a.id for a in new])
    for a in new:
        if a.id in taken:
            if duplicates == "skip":
                plan.planned.skip("skipped attachments whose id exists already", a.id[:8])
                continue
            plan.remap[a.id] = new_id()
        aid = plan.remap.get(a.id, a.id)
        plan.attachment_rows.append(
            {
                "id": aid,
                "note_id": a.note_id,  # remapped and checked once the notes are in
                "title": a.title,
                "filename": a.filename,
                "mime": a.mime,
                "size": a.size,
                "created_time": a.created_time,
                "updated_time": a.updated_time,
            }
        )
        plan.moves.append((aid, a.source, ws.attachment_path(aid, a.filename)))


def _write_notes(
    conn: Connection,
    inserter: _NoteInserter,
    batch: list[NoteItem],
    bundle: Bundle,
    plan: _Plan,
    target: str | None,
    duplicates: Duplicates,
) -> None:
    """One batch of notes, with the tags they name and their change feed rows."""
    fit = _Fit(plan.fitted)
    for n in batch:
        fit.note(n)
    remap = plan.remap
    taken = _existing(conn, db.notes.c.id, [n.id for n in batch])
    now = now_ms()
    rows: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    new_tags: list[dict[str, Any]] = []
    for n in batch:
        # The tags of a skipped note are made as well, as they always were.
        for title in n.tags:
            key = title.lower()
            if key not in plan.tag_ids:
                tid = new_id()
                plan.tag_ids[key] = tid
                new_tags.append({"id": tid, "title": title, "title_key": key, "created_time": now, "updated_time": now})
        if n.id in taken:
            if duplicates == "skip":
                plan.planned.skip(
                    "skipped notes whose id exists already; --duplicates new-ids imports them as copies",
                    n.id[:8],
                )
                continue
            remap[n.id] = new_id()
        if n.notebook_id is None:
            book = plan.root_book or target or _root_book(conn, bundle, plan, now)
        else:
            book = remap.get(n.notebook_id, n.notebook_id)
        nid = remap.get(n.id, n.id)
        body = n.body
        if ":/" in body:
            if remap:
                body = _remap_links(body, remap)
            if duplicates == "new-ids" and ID_LINK.search(body):
                plan.linking.append((nid, len(remap)))
        if n.indexed is not None and body is n.body:
            inserter.indexed[nid] = n.indexed
        n.indexed = None
        rows.append(
            {
                "id": nid,
                "notebook_id": book,
                "title": n.title,
                "body": body,
                "is_todo": n.is_todo,
                "todo_due": n.todo_due,
                "todo_completed": n.todo_completed,
                "source_url": n.source_url,
                "created_time": n.created_time,
                "updated_time": n.updated_time,
            }
        )
        for tid in dict.fromkeys(plan.tag_ids[title.lower()] for title in n.tags):
            links.append({"note_id": nid, "tag_id": tid, "created_time": now})
        n.body = ""  # in the row now: the note's own copy can go
    if new_tags:
        conn.execute(db.tags.insert(), new_tags)
        plan.tags += len(new_tags)
    if rows:
        inserter.insert(rows)
        record_change(conn, [r["id"] for r in rows], "create")
        plan.notes += len(rows)
    if links:
        conn.execute(db.note_tags.insert(), links)


def _root_book(conn: Connection, bundle: Bundle, plan: _Plan, now: int) -> str:
    """The notebook, named after the source, of the notes that name none."""
    plan.root_book = new_id()
    conn.execute(
        db.notebooks.insert(),
        [{"id": plan.root_book, "parent_id": None, "title": bundle.root_title, "created_time": now,
          "updated_time": now}],
    )
    plan.books += 1
    return plan.root_book


def _mend_links(conn: Connection, plan: _Plan) -> None:
    """Bodies written before an id they link was replaced (``new-ids``) get the new id."""
    final = len(plan.remap)
    late = [nid for nid, known in plan.linking if known < final]
    n = db.notes
    for chunk in _chunks(late, _IN_CHUNK):
        for row in conn.execute(sa.select(n.c.id, n.c.body).where(n.c.id.in_(chunk))).all():
            body = _remap_links(row.body, plan.remap)
            if body != row.body:
                conn.execute(sa.update(n).where(n.c.id == row.id).values(body=body))


def _write_attachments(conn: Connection, plan: _Plan) -> None:
    """Attachment rows, once their notes are in: an owner neither written nor in the
    workspace (a note left out) leaves the attachment without one."""
    rows = plan.attachment_rows
    for r in rows:
        if r["note_id"] is not None:
            r["note_id"] = plan.remap.get(r["note_id"], r["note_id"])
    present = _existing(conn, db.notes.c.id, {r["note_id"] for r in rows if r["note_id"] is not None})
    for r in rows:
        if r["note_id"] not in present:
            r["note_id"] = None
    for chunk in _chunks(rows, CHUNK):
        conn.execute(db.attachments.insert(), chunk)


#: A temporary table of the import's connection, for ``_NoteInserter``.
_BATCH = "noteloom_import_notes"
#: Index text worked out in Python (CJK), for the notes whose text the index sees changed.
_INDEX = "noteloom_import_index"
#: The keyword index trigger of migration 0002 (whitespace folded): the bulk path below
#: does its work itself while it is the one the database has.
_FTS_TRIGGER = "notes_fts_insert"
_FTS_TRIGGER_SQL = (
    "CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes WHEN new.deleted_time IS NULL BEGIN "
    f"INSERT INTO notes_fts(rowid, title, body) VALUES (new.seq, {db.INDEX_TEXT_SQL}(new.title), "
    f"{db.INDEX_TEXT_SQL}(new.body)); END"
)
#: Text (characters of bodies) written to ``notes`` before FTS5 indexes it in one statement.
FTS_BYTES = 16 << 20
#: FTS5's ``hashsize`` while the import lasts (its default is 1 MiB): the terms it holds in
#: memory before writing a segment.
FTS_HASHSIZE = 16 << 20
_FTS_DEFAULT_HASHSIZE = 1 << 20


class _NoteInserter:
    """Inserts note rows, and on SQLite feeds FTS5 in bulk.

    FTS5 writes the terms it holds at the end of every statement (a statement savepoint),
    so one statement over many notes makes a few large segments where one per note (a
    trigger firing for each row of an ``executemany``) made thousands to merge. While the
    keyword index trigger is migration 0002's own, the import drops it in its transaction,
    inserts the notes with ``executemany`` and, every ``FTS_BYTES`` of text, indexes the
    notes written since with one ``INSERT … SELECT`` from ``notes``, with a larger
    ``hashsize``; the index text of the notes it changes (CJK runs, worked out by the
    reading thread: ``indexed``) comes from a temporary table. That statement calls no
    Python, so SQLite tokenises without the GIL while the reading thread parses the next
    notes. Before the transaction ends the last notes are indexed and the trigger and
    ``hashsize`` are put back; a failed or killed import rolls all of it back.

    With any other trigger (a later schema), rows go through a temporary table and one
    ``INSERT … SELECT`` per batch into ``notes``, so the trigger still fills FTS5 in
    bulk; the connection's ``noteloom_index_text`` then first looks the text up among the
    bodies worked out ahead."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.bulk = conn.dialect.name == "sqlite"
        self.names = ""
        #: Note id -> its body as the keyword index sees it, for the batch being inserted.
        self.indexed: dict[str, str] = {}
        self._ready: dict[str, str] = {}
        self._raw: Any = None
        self._trigger: str | None = None
        self._hashsize: Any = None
        self._next_seq = 0
        self._indexed_to = 0
        self._pending = 0
        if not self.bulk:
            return
        sql = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (_FTS_TRIGGER,)
        ).scalar()
        if isinstance(sql, str) and " ".join(sql.split()) == _FTS_TRIGGER_SQL:
            self._start_direct(sql)
        else:
            self._raw = conn.connection.dbapi_connection
            self._raw.create_function(db.INDEX_TEXT_SQL, 1, self._index_text, deterministic=True)

    def _start_direct(self, trigger: str) -> None:
        c = self.conn
        self._hashsize = c.exec_driver_sql("SELECT v FROM notes_fts_config WHERE k = 'hashsize'").scalar()
        c.exec_driver_sql(f"DROP TRIGGER {_FTS_TRIGGER}")
        self._trigger = trigger
        c.exec_driver_sql("INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,))
        last = c.exec_driver_sql("SELECT max(seq) FROM notes").scalar()
        self._next_seq = self._indexed_to = int(last or 0) + 1
        c.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{_INDEX}")
        c.exec_driver_sql(f"CREATE TEMP TABLE {_INDEX} (seq INTEGER PRIMARY KEY, title TEXT, body TEXT)")

    def _index_text(self, text: Any) -> Any:
        if isinstance(text, str) and not text.isascii():
            done = self._ready.get(text)
            if done is not None:
                return done
        return db.index_text(text)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        try:
            if not self.bulk:
                self.conn.execute(db.notes.insert(), rows)
            elif self._trigger is not None:
                self._insert_direct(rows)
            else:
                self._insert_through_trigger(rows)
        finally:
            self.indexed.clear()
            self._ready.clear()

    def _insert_direct(self, rows: list[dict[str, Any]]) -> None:
        changed: list[tuple[int, str | None, str | None]] = []
        size = 0
        for r in rows:
            seq = self._next_seq
            self._next_seq += 1
            r["seq"] = seq
            title, body = r["title"], r["body"]
            size += len(body)
            it = title if title.isascii() else db.index_text(title)
            ib = body if body.isascii() else self.indexed.get(r["id"]) or db.index_text(body)
            if it != title or ib != body:
                changed.append((seq, it if it != title else None, ib if ib != body else None))
        cols = list(rows[0])
        self.conn.exec_driver_sql(
            f"INSERT INTO notes ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})", rows
        )
        if changed:
            self.conn.exec_driver_sql(f"INSERT INTO temp.{_INDEX} (seq, title, body) VALUES (?, ?, ?)", changed)
        self._pending += size
        if self._pending >= FTS_BYTES:
            self._index_written()

    def _index_written(self) -> None:
        """Index the notes written since the last call, in one statement."""
        if self._next_seq > self._indexed_to:
            self.conn.exec_driver_sql(
                f"INSERT INTO notes_fts(rowid, title, body) "
                f"SELECT n.seq, coalesce(i.title, n.title), coalesce(i.body, n.body) "
                f"FROM notes AS n LEFT JOIN temp.{_INDEX} AS i ON i.seq = n.seq "
                f"WHERE n.seq >= ? AND n.seq < ? AND n.deleted_time IS NULL",
                (self._indexed_to, self._next_seq),
            )
            self.conn.exec_driver_sql(f"DELETE FROM temp.{_INDEX}")
        self._indexed_to = self._next_seq
        self._pending = 0

    def _insert_through_trigger(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            done = self.indexed.get(r["id"])
            if done is not None:
                self._ready[r["body"]] = done
        cols = list(rows[0])
        names = ", ".join(cols)
        if names != self.names:
            self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{_BATCH}")
            self.conn.exec_driver_sql(f"CREATE TEMP TABLE {_BATCH} AS SELECT {names} FROM notes WHERE 0")
            self.names = names
        self.conn.exec_driver_sql(
            f"INSERT INTO temp.{_BATCH} ({names}) VALUES ({', '.join(':' + c for c in cols)})", rows
        )
        self.conn.exec_driver_sql(f"INSERT INTO notes ({names}) SELECT {names} FROM temp.{_BATCH}")
        self.conn.exec_driver_sql(f"DELETE FROM temp.{_BATCH}")

    def finish(self) -> None:
        """Index the last notes and put the trigger and ``hashsize`` back (direct path);
        drop the temporary tables."""
        c = self.conn
        if self._trigger is not None:
            self._index_written()
            hashsize = self._hashsize if self._hashsize is not None else _FTS_DEFAULT_HASHSIZE
            c.exec_driver_sql("INSERT INTO notes_fts(notes_fts, rank) VALUES ('hashsize', ?)", (hashsize,))
            if self._hashsize is None:  # as it was: no setting, FTS5's default
                c.exec_driver_sql("DELETE FROM notes_fts_config WHERE k = 'hashsize'")
            c.exec_driver_sql(self._trigger)
            self._trigger = None
            c.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{_INDEX}")
        if self.names:
            c.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{_BATCH}")
            self.names = ""

    def __enter__(self) -> _NoteInserter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_rest: object) -> None:
        """After a success, finish; whatever happened, give the connection its own index
        function back (after a failure the transaction rolls back, trigger and all)."""
        try:
            if exc_type is None:
                self.finish()
        finally:
            self.names = ""
            self._trigger = None
            raw, self._raw = self._raw, None
            if raw is not None:
                try:
                    raw.create_function(db.INDEX_TEXT_SQL, 1, db.index_text, deterministic=True)
                except Exception:
                    # SQLite refuses while a statement of the failed write is unfinished:
                    # then the connection is not given back to the pool at all.
                    self.conn.invalidate()
                    if exc_type is None:
                        raise


def _remap_links(body: str, remap: dict[str, str]) -> str:
    return ID_LINK.sub(lambda m: f":/{remap.get(m.group(1), m.group(1))}", body)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
