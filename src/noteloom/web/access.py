"""What one request may see and change: the person asking, within their token's notebooks.

A request's scope is the person's access (:func:`noteloom.access.access_scope`: everything
for the owner and admins, their own and shared notebooks for a member) narrowed by the
notebook patterns of the token it came with (``TokenScopes.notebooks``; a browser session
carries its token's). The workspace's tool scope (``noteloom tools scope``) limits tools
only, so it plays no part here.

Every route of the JSON API and the pages that reads or writes notes asks
:func:`request_scope` and goes through the :class:`RequestScope` it returns:

- something outside the scope reads exactly like a missing thing (the same 404 and
  message the workspace gives for an id that does not exist);
- a write to a notebook the person sees but may not change (shared to read) is
  :class:`~noteloom.errors.Forbidden` (403);
- lists, searches and counts take :meth:`RequestScope.visible_ids` as their filter.

With no limit at all (the owner or an admin with a full token) nothing is checked and the
routes run exactly as they did before people existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.engine import Connection

from noteloom.access import access_scope
from noteloom.accounts import FULL_ACCESS, TokenScopes
from noteloom.errors import Forbidden, InvalidInput, NotFound
from noteloom.tools import NotebookScope, narrowed, note_missing
from noteloom.web.api_base import user_of
from noteloom.workspace import Attachment, Note, Notebook, User, Workspace


def notebook_missing(notebook_id: str) -> str:
    """What the workspace says of a notebook id that does not exist (a foreign one must read alike)."""
    return f"notebook {notebook_id!r} does not exist; `list_notebooks` shows the notebooks there are"


def attachment_missing(attachment_id: str) -> str:
    return f"no attachment {attachment_id!r}"


def token_scopes_of(request: Request) -> TokenScopes:
    """The scopes of the credential the request came with (the token middleware put them there)."""
    scopes = request.scope.get("state", {}).get("token_scopes")
    return scopes if isinstance(scopes, TokenScopes) else FULL_ACCESS


def request_scope(request: Request, workspace: Workspace) -> RequestScope:
    """What the person behind ``request`` may see and change, within their token's notebooks."""
    user = user_of(request)
    tokens = token_scopes_of(request)
    scope = access_scope(workspace, user) or NotebookScope()
    if tokens.notebooks:
        scope = narrowed(scope, NotebookScope(tokens.notebooks))
    return RequestScope(workspace, user, scope, tokens)


@dataclass(frozen=True)
class RequestScope:
    """One request's view of the workspace. Its methods block (they query the database):
    call them from a worker thread, inside the route's transaction (``conn``)."""

    workspace: Workspace
    user: User
    scope: NotebookScope
    tokens: TokenScopes = FULL_ACCESS

    @property
    def unrestricted(self) -> bool:
        return self.scope.unrestricted

    def visible_ids(self, conn: Connection) -> set[str] | None:
        """The live notebooks the request may see (``None``: every one)."""
        if self.unrestricted:
            return None
        return self.scope.allowed_ids(self.workspace.list_notebooks(with_counts=False, conn=conn))

    def visible_notebooks(self, conn: Connection) -> list[Notebook]:
        """The live notebooks the request may see, with their note counts, sorted by title. A
        notebook whose parent is out of sight shows as a top notebook: the parent does not
        exist for this request, not even as an id."""
        books = self.workspace.list_notebooks(conn=conn)
        if self.unrestricted:
            return books
        allowed = self.scope.allowed_ids(books)
        assert allowed is not None
        return [b if b.parent_id is None or b.parent_id in allowed else _top(b) for b in books if b.id in allowed]

    def _chain(self, notebook_id: str, conn: Connection) -> list[Notebook]:
        return self.workspace.notebook_path(notebook_id, conn=conn)

    def _sees(self, chain: Sequence[Notebook]) -> bool:
        return bool(chain) and self.scope.allows_chain(chain)

    def _check_writable(self, chain: Sequence[Notebook]) -> None:
        if not self.scope.writable_chain(chain):
            raise Forbidden(f"notebook {chain[-1].title!r} is shared with you to read only: ask its owner "
                            "or an admin to share it to write")

    def note(self, note_id: str, conn: Connection, *, write: bool = False, trashed: bool = False) -> Note:
        """A note the request may see (``trashed``: one in the trash too); ``write``: and change.

        Missing, and out of sight whether live or trashed, read alike (404); a note in the
        trash answers as the workspace does for it (404 saying so) unless ``trashed``.
        """
        if self.unrestricted:
            return self.workspace.get_note(note_id, include_deleted=trashed, conn=conn)
        try:
            note = self.workspace.get_note(note_id, include_deleted=True, conn=conn)
        except NotFound:
            raise NotFound(note_missing(note_id)) from None
        chain = self._chain(note.notebook_id, conn)
        if not self._sees(chain):
            raise NotFound(note_missing(note_id))
        if note.deleted_time is not None and not trashed:
            return self.workspace.get_note(note_id, conn=conn)  # raises: "is in the trash"
        if write:
            self._check_writable(chain)
        return note

    def notebook(self, notebook_id: str, conn: Connection, *, write: bool = False) -> Notebook:
        """A live notebook the request may see; ``write``: and add to or change."""
        if self.unrestricted:
            return self.workspace.get_notebook(notebook_id, conn=conn)
        chain = self._chain(notebook_id, conn)
        if not self._sees(chain):
            raise NotFound(notebook_missing(notebook_id))
        book = self.workspace.get_notebook(notebook_id, conn=conn)  # raises for one in the trash
        if write:
            self._check_writable(chain)
        return book

    def attachment(self, attachment_id: str, conn: Connection) -> Attachment:
        """A note's attachment the request may see (its note's notebook, trashed or not); one
        linked to no note is seen only by those who see everything."""
        found = self.workspace.get_attachment(attachment_id, conn=conn)
        if self.unrestricted:
            return found
        if found.note_id is None:
            raise NotFound(attachment_missing(attachment_id))
        try:
            self.note(found.note_id, conn, trashed=True)
        except NotFound:
            raise NotFound(attachment_missing(attachment_id)) from None
        return found

    def new_note_notebook(self, notebook_id: str | None, conn: Connection) -> str:
        """Where a new note goes: ``notebook_id`` if the request may add to it, else the
        person's own default notebook (made for them if they have none). Inside the caller's
        write transaction: when the token does not reach that default, the refusal takes back
        a notebook just made."""
        if notebook_id is not None:
            return self.notebook(notebook_id, conn, write=True).id
        book = self.workspace.default_notebook(owner_id=self.user.id, conn=conn)
        if not self.scope.writable_chain([book]):
            raise self._outside_token(book.title)
        return book.id

    def _outside_token(self, title: str) -> InvalidInput:
        return InvalidInput(
            f"this token reaches only some notebooks ({', '.join(self.tokens.notebooks)}), and your default notebook "
            f"{title!r} is not one of them: send notebook_id", field="notebook_id")


def _top(book: Notebook) -> Notebook:
    return Notebook(book.id, None, book.title, book.created_time, book.updated_time, book.deleted_time,
                    book.note_count, book.owner_id)
