"""The notebook scope as tools see it: what lies outside it does not exist, with the very
same message as a missing thing; what lies inside it but may only be read (a notebook
shared with the person to read) is refused with ``Forbidden``, saying whom to ask."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy.engine import Connection

from noteloom.errors import Forbidden, NotFound
from noteloom.tools import ToolContext, ToolError, note_missing, notebook_missing
from noteloom.workspace import Note, Notebook


def read_only(title: str, *, note_id: str | None = None) -> str:
    """The one message for a change to a notebook the person may read but not change."""
    what = f"note {note_id!r} is in notebook {title!r}, which is" if note_id else f"notebook {title!r} is"
    return f"{what} shared with you to read only; ask its owner for write access"


class Books:
    """The notebooks a tool call may see, loaded once per call, with their title paths."""

    def __init__(self, ctx: ToolContext, conn: Connection, *, include_deleted: bool = False) -> None:
        self.all = ctx.workspace.list_notebooks(with_counts=False, include_deleted=include_deleted, conn=conn)
        self.by_id = {b.id: b for b in self.all}
        allowed = ctx.scope.allowed_ids(self.all)
        self.visible = [b for b in self.all if allowed is None or b.id in allowed]
        self.visible_ids = {b.id for b in self.visible}
        self.scope = ctx.scope

    def chain(self, notebook_id: str) -> list[Notebook]:
        """The notebooks from the root down to ``notebook_id`` (cycles and gaps cut short)."""
        out: list[Notebook] = []
        cur = self.by_id.get(notebook_id)
        while cur is not None and len(out) < 64 and cur not in out:
            out.append(cur)
            cur = self.by_id.get(cur.parent_id) if cur.parent_id else None
        return list(reversed(out))

    def path(self, notebook_id: str) -> str:
        """``Parent/Child`` titles down to ``notebook_id``, from its first ancestor in scope: a
        parent outside the scope does not exist for tools, not even as a name in a path."""
        chain = self.chain(notebook_id)
        start = len(chain) - 1  # the notebook itself: a caller only asks for ones it may show
        while start > 0 and chain[start - 1].id in self.visible_ids:
            start -= 1
        return "/".join(b.title for b in chain[start:]) if chain else ""

    def in_scope(self, notebook_id: str) -> bool:
        return notebook_id in self.visible_ids

    def in_scope_chain(self, notebook_id: str) -> bool:
        """Scope test that also works for trashed notebooks (they are not in ``visible``)."""
        chain = self.chain(notebook_id)
        return bool(chain) and self.scope.allows_chain(chain)

    def writable(self, notebook_id: str) -> bool:
        """Whether tools may change what is in ``notebook_id``: a live notebook they see that
        is the person's own or shared with them to write (the scope's ``writable_chain``)."""
        return notebook_id in self.visible_ids and self.scope.writable_chain(self.chain(notebook_id))

    def writable_chain(self, notebook_id: str) -> bool:
        """:meth:`writable` for trashed notebooks too (load with ``include_deleted``)."""
        chain = self.chain(notebook_id)
        return bool(chain) and self.scope.allows_chain(chain) and self.scope.writable_chain(chain)

    def check_writable(self, notebook_id: str, *, note_id: str | None = None, trashed: bool = False) -> None:
        """Refuse a change to ``notebook_id`` (or to note ``note_id`` in it): a notebook the
        call cannot see reads as missing (the note as a missing note), one it may only read
        is ``Forbidden``. ``trashed``: the chain test, for what is in the trash."""
        seen = self.in_scope_chain(notebook_id) if trashed else self.in_scope(notebook_id)
        if not seen:
            raise ToolError(note_missing(note_id) if note_id else notebook_missing(notebook_id))
        if not (self.writable_chain(notebook_id) if trashed else self.writable(notebook_id)):
            raise Forbidden(read_only(self.title(notebook_id), note_id=note_id))

    def add(self, book: Notebook) -> None:
        """Take in a notebook made during the call (its chain must be known to test it)."""
        self.by_id[book.id] = book
        if book not in self.all:
            self.all.append(book)
        if book.id not in self.visible_ids and self.scope.allows_chain(self.chain(book.id)):
            self.visible.append(book)
            self.visible_ids.add(book.id)

    def title(self, notebook_id: str) -> str:
        b = self.by_id.get(notebook_id)
        return b.title if b else ""

    def resolve(self, ref: str) -> Notebook:
        """A visible notebook by id, ``Parent/Child`` path or title (case-insensitive)."""
        wanted = ref.strip()
        if wanted in self.visible_ids:
            return self.by_id[wanted]
        key = wanted.strip("/").lower()
        matches = [b for b in self.visible if self.path(b.id).lower() == key]
        if not matches:
            matches = [b for b in self.visible if b.title.lower() == key]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise ToolError(notebook_missing(ref))
        paths = ", ".join(f"{self.path(b.id)!r} ({b.id})" for b in matches)
        raise ToolError(f"several notebooks are named {ref!r}: {paths}; give the path or the id")


def target_notebook(ctx: ToolContext, conn: Connection, books: Books, ref: str | None) -> Notebook:
    """Where a new note goes: the notebook ``ref`` names, or else the person's own default
    notebook (the owner's is the workspace's default, as ever; anyone else gets one of their
    own, made for them the first time). Either must be one the call may change."""
    if ref is not None:
        book = books.resolve(ref)
    else:
        user = ctx.user
        mine = None if user is None or user.role == "owner" else user.id
        book = ctx.workspace.default_notebook(owner_id=mine, conn=conn)
        books.add(book)
        if not books.in_scope(book.id):
            raise ToolError("no notebook was named and the default one is not available; name one (list_notebooks)")
    books.check_writable(book.id)
    return book


def writable_note(ctx: ToolContext, conn: Connection, note_id: str, books: Books | None = None) -> Note:
    """A live note the call may see (else as :func:`visible_note`) and change: one in a
    notebook shared with the person to read only is ``Forbidden``."""
    note = visible_note(ctx, conn, note_id)
    if not ctx.scope.unrestricted:
        (books or Books(ctx, conn)).check_writable(note.notebook_id, note_id=note.id)
    return note


def visible_note(ctx: ToolContext, conn: Connection, note_id: str) -> Note:
    """A live note the scope lets tools see; missing, trashed-out-of-scope and
    out-of-scope notes all read as missing."""
    try:
        note = ctx.workspace.get_note(note_id, include_deleted=True, conn=conn)
    except NotFound:
        raise ToolError(note_missing(note_id)) from None
    trashed = note.deleted_time is not None
    if not ctx.scope.unrestricted:
        books = Books(ctx, conn, include_deleted=trashed)
        if not (books.in_scope_chain(note.notebook_id) if trashed else books.in_scope(note.notebook_id)):
            raise ToolError(note_missing(note_id))
    if trashed:
        raise ToolError(
            f"note {note_id!r} is in the trash; restore_note brings it back (list_trash lists the trash)"
        )
    return note


def notebook_titles(ctx: ToolContext, conn: Connection, notebook_ids: Collection[str]) -> dict[str, str]:
    """Titles of a few notebooks, in one query (listing every notebook costs more)."""
    return {b.id: b.title for b in ctx.workspace.notebooks_by_id(set(notebook_ids), conn=conn).values()}
