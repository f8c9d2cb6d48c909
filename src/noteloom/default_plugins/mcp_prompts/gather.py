"""What the built-in MCP prompts read from the workspace, always as the asker sees it.

Every function here takes the request's :class:`ToolContext` and reads only the notebooks
its scope lets tools see (the workspace's scope, the person's own and shared notebooks, the
token's notebooks): a note or notebook outside it reads exactly like a missing one, with the
tools' own messages. All of it is blocking (the database is sync): callers run it in a
worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.default_plugins.workspace_tools.scope import Books, visible_note
from noteloom.errors import QueryError
from noteloom.tools import ToolContext, ToolError
from noteloom.workspace import Note, Notebook
from noteloom.workspace.model import iso_time

#: A note id as stored (what ``note://`` URIs and tools use).
NOTE_ID = re.compile(r"[0-9a-f]{32}")
#: Words as the query language and the full-text index see them.
WORD = re.compile(r"[^\W_]+")
#: How many candidates a completer hands on (the protocol sends at most 100 of them).
CANDIDATES = 500
#: How many notes holding a title's words are looked through for the one of that exact title.
TITLE_MATCHES = 1000
#: The longest note body a prompt embeds; the rest is cut with a marker saying so.
BODY_CAP = 12_000


@dataclass(frozen=True)
class Found:
    """Notes a prompt gathered, with the notebook paths to show beside them."""

    notes: list[Note]
    paths: dict[str, str]


def books(ctx: ToolContext, conn: Connection) -> Books:
    return Books(ctx, conn)


def subtree(b: Books, root: Notebook) -> set[str]:
    """``root`` and every notebook below it that the scope lets the call see."""
    children: dict[str, list[str]] = {}
    for nb in b.visible:
        if nb.parent_id:
            children.setdefault(nb.parent_id, []).append(nb.id)
    out, stack = set(), [root.id]
    while stack:
        cur = stack.pop()
        if cur in out:
            continue
        out.add(cur)
        stack.extend(children.get(cur, []))
    return out & b.visible_ids


def notebook_ids_for(ctx: ToolContext, conn: Connection, ref: str | None) -> tuple[Books, set[str] | None]:
    """The notebooks a search may cover: ``ref``'s subtree, else all the call may see
    (``None``: every notebook, for an unrestricted call)."""
    b = books(ctx, conn)
    if ref:
        return b, subtree(b, b.resolve(ref))
    return b, None if ctx.scope.unrestricted else set(b.visible_ids)


def find_note(ctx: ToolContext, conn: Connection, ref: str) -> Note:
    """The note ``ref`` names: its id, or its exact title (case-insensitive). A note the call
    cannot see is as missing as one that does not exist; several of one title are refused
    with their ids, so the user can pick."""
    wanted = ref.strip()
    if NOTE_ID.fullmatch(wanted):
        return visible_note(ctx, conn, wanted)
    b = books(ctx, conn)
    scoped = None if ctx.scope.unrestricted else b.visible_ids
    candidates = _title_candidates(ctx, conn, wanted, scoped, TITLE_MATCHES)
    same = [h for h in candidates if h[1].lower() == wanted.lower()]
    if not same and len(candidates) == TITLE_MATCHES:  # so common a title's words: compare every title
        n = db.notes
        q = sa.select(n.c.id, n.c.title, n.c.notebook_id).where(
            n.c.deleted_time.is_(None), sa.func.lower(n.c.title) == wanted.lower())
        if scoped is not None:
            q = q.where(n.c.notebook_id.in_(sorted(scoped)))
        same = [(r.id, r.title, r.notebook_id) for r in conn.execute(q.limit(50))]
    if not same:
        raise ToolError(f"no note is titled {ref!r}; give a note's exact title or its id (search_notes finds it)")
    if len(same) > 1:
        listed = ", ".join(f"{nid} (in {b.path(nb)!r})" for nid, _, nb in same[:10])
        raise ToolError(f"several notes are titled {ref!r}: {listed}; give the id of the one you mean")
    return visible_note(ctx, conn, same[0][0])


def _title_candidates(
    ctx: ToolContext, conn: Connection, text: str, notebook_ids: Collection[str] | None, limit: int,
    *, prefix: bool = False,
) -> list[tuple[str, str, str]]:
    """(id, title, notebook id) of notes whose title holds the words of ``text`` (the last
    one as a prefix when ``prefix``), found through the full-text index. Text without a
    word falls back to the most recently changed notes."""
    words = WORD.findall(text)
    if notebook_ids is not None and not notebook_ids:
        return []
    if not words:
        n = db.notes
        q = sa.select(n.c.id, n.c.title, n.c.notebook_id).where(n.c.deleted_time.is_(None))
        if notebook_ids is not None:
            q = q.where(n.c.notebook_id.in_(sorted(notebook_ids)))
        rows = conn.execute(q.order_by(n.c.updated_time.desc()).limit(limit)).all()
        return [(r.id, r.title, r.notebook_id) for r in rows]
    terms = [f"title:{w}" for w in words[:20]]
    if prefix:
        terms[-1] += "*"
    from noteloom.search import search_notes

    try:
        hits = search_notes(ctx.workspace, " ".join(terms), limit=limit, notebook_ids=notebook_ids, conn=conn)
    except QueryError:
        return []
    return [(h.id, h.title, h.notebook_id) for h in hits]


def note_titles(ctx: ToolContext, value: str, context: Mapping[str, str]) -> list[str]:
    """Titles of notes the asker can see that match ``value`` as typed so far (within the
    notebook already chosen, when the prompt has one)."""
    with ctx.workspace.read() as c:
        _, scoped = _context_notebooks(ctx, c, context)
        rows = _title_candidates(ctx, c, value, scoped, CANDIDATES, prefix=True)
    return _unique(r[1] for r in rows)


def notebook_paths(ctx: ToolContext, value: str, context: Mapping[str, str]) -> list[str]:
    """Paths (``Parent/Child``) of the notebooks the asker can see."""
    with ctx.workspace.read() as c:
        b = books(ctx, c)
        return sorted((b.path(nb.id) for nb in b.visible), key=str.lower)


def tag_names(ctx: ToolContext, value: str, context: Mapping[str, str]) -> list[str]:
    """Tags on notes the asker can see (within the notebook already chosen, if any)."""
    with ctx.workspace.read() as c:
        _, scoped = _context_notebooks(ctx, c, context)
        return [t.title for t in ctx.workspace.list_tags(used_only=True, notebook_ids=scoped, conn=c)]


def query_terms(ctx: ToolContext, value: str, context: Mapping[str, str]) -> list[str]:
    """What a search query could be: ``tag:`` and ``notebook:`` filters as they are typed,
    else note titles (as a quoted phrase, which finds that note)."""
    lower = value.lower()
    if lower.startswith("tag:"):
        return [f'tag:"{t}"' if " " in t else f"tag:{t}" for t in tag_names(ctx, value[4:], context)]
    if lower.startswith("notebook:"):
        with ctx.workspace.read() as c:
            b = books(ctx, c)
            titles = _unique(nb.title for nb in b.visible)
        return [f'notebook:"{t}"' if " " in t else f"notebook:{t}" for t in titles]
    return note_titles(ctx, value, context)


def _context_notebooks(ctx: ToolContext, conn: Connection, context: Mapping[str, str]) -> tuple[Books, set[str] | None]:
    """The notebooks completion covers: the ``notebook`` argument's subtree when the client
    says which it chose (an unknown one narrows to nothing), else all the asker sees."""
    ref = context.get("notebook")
    try:
        return notebook_ids_for(ctx, conn, ref or None)
    except ToolError:
        return books(ctx, conn), set()


def _unique(values: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        if v and v not in seen:
            seen[v] = None
    return list(seen)


def notes_by_id(ctx: ToolContext, conn: Connection, ids: Iterable[str]) -> list[Note]:
    """Live notes by id, in the order given (any that vanished meanwhile are skipped)."""
    wanted = list(dict.fromkeys(ids))
    found = ctx.workspace.get_notes(wanted, conn=conn)
    return [found[i] for i in wanted if i in found]


def note_markdown(note: Note, notebook_path: str) -> str:
    """A note as a prompt embeds it: its title, where it lives, its tags and times, then its
    body (cut at :data:`BODY_CAP` characters, saying so)."""
    facts = [f"Notebook: {notebook_path}"]
    if note.tags:
        facts.append("Tags: " + ", ".join(note.tags))
    facts.append(f"Created: {iso_time(note.created_time)}")
    facts.append(f"Updated: {iso_time(note.updated_time)}")
    if note.is_todo:
        state = f"done {iso_time(note.todo_completed)}" if note.todo_completed else "open"
        if note.todo_due and not note.todo_completed:
            state += f", due {iso_time(note.todo_due)}"
        facts.append(f"To-do: {state}")
    if note.source_url:
        facts.append(f"Clipped from: {note.source_url}")
    body = note.body
    if len(body) > BODY_CAP:
        body = body[:BODY_CAP] + f"\n\n[cut: the note is {len(note.body)} characters long; read_note reads the rest]"
    return f"# {note.title}\n\n" + "\n".join(f"- {f}" for f in facts) + f"\n\n{body}"
