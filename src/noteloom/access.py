"""Who may see and change which notebooks: people's roles and shared notebooks, as a scope.

A workspace has one ``owner``, any number of ``admin``s and ``member``s. The owner and admins
see and change every notebook. A member sees the notebooks that are theirs (a top notebook's
``owner_id``; a sub-notebook is its top notebook's, and ``NULL`` is the workspace owner's) and
the ones shared with them, with everything under those; they change what is theirs and what is
shared with them to ``write``.

That access is a :class:`~noteloom.tools.NotebookScope` (:class:`AccessScope`), so every tool,
search, count, trash listing and semantic result that already honours the notebook scope acts
as the requesting person without a second code path: ``App.tool_context(user)`` narrows the
workspace's scope by it. A notebook outside it reads exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from noteloom.people import ShareAccess, chain_access, sees_everything
from noteloom.tools import NotebookScope

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from noteloom.accounts import User
    from noteloom.workspace import Notebook, Workspace

class AccessScope(NotebookScope):
    """The notebooks one member may see and change. The shares are read on first use (from
    a worker thread, like every scope test) and kept for the scope's life, one tool call or
    one turn."""

    def __init__(self, workspace: Workspace, user_id: str, *,
                 shares: Mapping[str, ShareAccess] | None = None, owner_id: str | None = None) -> None:
        super().__init__(())
        self.workspace, self.user_id = workspace, user_id
        self._shares = dict(shares) if shares is not None else None
        self._owner_id = owner_id

    @property
    def unrestricted(self) -> bool:
        return False

    def _load(self) -> tuple[dict[str, ShareAccess], str | None]:
        if self._shares is None:
            with self.workspace.read() as c:
                self._shares = self.workspace.shares_of(self.user_id, conn=c)
                self._owner_id = self.workspace.owner_id(conn=c)
        return self._shares, self._owner_id

    def access(self, chain: Sequence[Notebook]) -> ShareAccess | None:
        shares, owner = self._load()
        return chain_access(chain, self.user_id, shares, owner)

    def allows_chain(self, chain: Sequence[Notebook]) -> bool:
        return self.access(chain) is not None

    def writable_chain(self, chain: Sequence[Notebook]) -> bool:
        return self.access(chain) == "write"

    def allowed_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        return {b.id for b, chain in _chains(notebooks) if self.allows_chain(chain)}

    def writable_ids(self, notebooks: list[Notebook]) -> set[str] | None:
        return {b.id for b, chain in _chains(notebooks) if self.writable_chain(chain)}


def access_scope(workspace: Workspace, user: User | None) -> AccessScope | None:
    """The scope ``user`` acts within (``None``: everything)."""
    if sees_everything(user):
        return None
    assert user is not None
    return AccessScope(workspace, user.id)


def sees_notebook(workspace: Workspace, user: User | None, notebook_id: str, *,
                  conn: Connection | None = None) -> bool:
    """Whether ``user`` may see ``notebook_id`` by their own access (the workspace's tool scope
    aside): what a note open beside their chat must pass before its text reaches a prompt."""
    scope = access_scope(workspace, user)
    if scope is None:
        return True
    return scope.allows_chain(workspace.notebook_path(notebook_id, conn=conn))


def _chains(notebooks: list[Notebook]) -> list[tuple[Notebook, list[Notebook]]]:
    by_id = {b.id: b for b in notebooks}
    out = []
    for b in notebooks:
        chain: list[Notebook] = []
        cur: Notebook | None = b
        while cur is not None and len(chain) < 64 and cur not in chain:
            chain.append(cur)
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
        chain.reverse()
        out.append((b, chain))
    return out
