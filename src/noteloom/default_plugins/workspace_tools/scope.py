"""The notebook scope as tools see it: what lies outside it does not exist, with the very
same message as a missing thing."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy.engine import Connection

from noteloom.errors import NotFound
from noteloom.tools import ToolContext, ToolError, note_missing, notebook_missing
from noteloom.workspace import Note, Notebook


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
