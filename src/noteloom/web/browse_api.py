"""What the notes app's panes read, over JSON: the notebook tree with counts, a keyset-paged
note list, titles for the quick switcher, search with sections, and moving a note.

Every route acts as the person asking (``web/access.py``): the tree, the lists and the counts
hold only the notebooks they may see, a note or notebook out of sight answers like a missing
one (404), and moving needs the right to change both the note and the target notebook.

The list is paged by a cursor (the last row's ``updated_time`` and id), never by an offset:
each page is one range read of the index of live notes by recency (``ix_notes_live_recent``,
migration 0002), so the thousandth page costs what the first does, and a note saved while
someone scrolls neither repeats nor hides a row of the pages still to come. A notebook's list
holds the notes of its sub-notebooks too, as its count in the tree does.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Sequence
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.app import App
from noteloom.errors import InvalidInput
from noteloom.web.access import RequestScope, request_scope
from noteloom.web.api_base import (
    ERRORS,
    ID_PATTERN,
    MAX_COUNT,
    NO_NUL,
    ApiJSONResponse,
    IdPath,
    StrictModel,
    checked_body,
    install_error_handlers,
)
from noteloom.workspace import Notebook

PAGE_MAX = 200
_CURSOR = re.compile(r"^(\d{1,16})\.([0-9a-f]{32})$")


class TreeNotebook(BaseModel):
    id: str
    parent_id: str | None = Field(description="Null at the top (also for a notebook whose parent you may not see).")
    title: str
    note_count: int = Field(description="Live notes in this notebook itself.")
    total_count: int = Field(description="Live notes in it and all its sub-notebooks.")


class Tree(BaseModel):
    notebooks: list[TreeNotebook] = Field(description="Sorted by title; build the tree from parent_id.")
    total: int = Field(description="Live notes in every notebook you may see.")


class ListedNote(BaseModel):
    id: str
    title: str
    notebook_id: str
    notebook: str = Field(description="The notebook's title.")
    updated_time: int
    tags: list[str]
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None


class NotePage(BaseModel):
    notes: list[ListedNote] = Field(description="Newest change first (ties by id, descending).")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class TitleHit(BaseModel):
    id: str
    title: str
    notebook: str


class TitleList(BaseModel):
    notes: list[TitleHit]


class SearchResult(BaseModel):
    id: str
    title: str
    notebook_id: str
    notebook: str
    updated_time: int
    snippet: str
    section: str | None = Field(None, description="The path of the section the hit is in (as read_note takes it).")
    section_heading: str | None = Field(None, description="That section's heading (empty before the first heading).")


class SearchPage(BaseModel):
    results: list[SearchResult]
    mode: str = Field(description="The mode used (hybrid falls back to keyword without a built index).")
    has_more: bool
    next_offset: int | None


class MoveIn(StrictModel):
    notebook_id: str = Field(pattern=ID_PATTERN, description="The notebook to move the note into.")


class Moved(BaseModel):
    id: str
    notebook_id: str
    updated_time: int


def encode_cursor(updated_time: int, note_id: str) -> str:
    return base64.urlsafe_b64encode(f"{updated_time}.{note_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The (updated_time, id) a cursor stands for; a cursor not made here is bad input."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    m = _CURSOR.match(raw)
    if m is None:
        raise InvalidInput("cursor: not a cursor this list gave out; start again without one", field="cursor")
    return int(m.group(1)), m.group(2)


def subtree_ids(books: Sequence[Notebook], root: str) -> set[str]:
    """``root`` and every notebook below it among ``books``."""
    children: dict[str | None, list[str]] = {}
    for b in books:
        children.setdefault(b.parent_id, []).append(b.id)
    out, todo = set(), [root]
    while todo:
        current = todo.pop()
        if current not in out:
            out.add(current)
            todo.extend(children.get(current, ()))
    return out


def totals(books: Sequence[Notebook]) -> dict[str, int]:
    """Each notebook's live notes including those of its sub-notebooks (a cycle counts once)."""
    ids = {b.id for b in books}
    own = {b.id: b.note_count for b in books}
    parent = {b.id: b.parent_id for b in books if b.parent_id in ids}
    total = dict(own)
    for b in books:
        seen = {b.id}
        up = parent.get(b.id)
        while up is not None and up not in seen:
            seen.add(up)
            total[up] += own[b.id]
            up = parent.get(up)
    return total


def page_of_notes(
    conn: Connection, notebook_ids: Collection[str] | None, after: tuple[int, str] | None, limit: int
) -> list[Any]:
    """One page of live notes, newest change first, after the cursor's row, in ``notebook_ids``
    (``None``: all). The row comparison lets SQLite and PostgreSQL seek into the recency index."""
    n = db.notes
    q = sa.select(
        n.c.id, n.c.notebook_id, n.c.title, n.c.is_todo, n.c.todo_due, n.c.todo_completed, n.c.updated_time,
    ).where(n.c.deleted_time.is_(None))
    if notebook_ids is not None:
        if not notebook_ids:
            return []
        q = q.where(n.c.notebook_id.in_(sorted(notebook_ids)))
    if after is not None:
        q = q.where(sa.tuple_(n.c.updated_time, n.c.id) < sa.tuple_(sa.literal(after[0]), sa.literal(after[1])))
    q = q.order_by(n.c.updated_time.desc(), n.c.id.desc()).limit(limit)
    return list(conn.execute(q))


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


#: The trigram index finds substrings of at least this many characters.
_TRIGRAM = 3
#: Past this many titles holding the text, the trigram candidates cost more than a scan.
_FEW_CANDIDATES = 2000
#: How many of the newest notes are first looked through for titles starting with the text.
_RECENT_WINDOW = 1000


def _fts_trigram_phrase(text: str) -> str:
    """``text`` as one FTS5 phrase (a quote inside doubled), for the trigram table."""
    return '"' + text.replace('"', '""') + '"'


def _trigram_rowids(text: str, cap: int | None = None) -> Any:
    limit = f" LIMIT {int(cap)}" if cap is not None else ""
    return sa.text(f"SELECT rowid FROM notes_titles WHERE notes_titles MATCH :title_match{limit}").bindparams(
        title_match=_fts_trigram_phrase(text)).columns(sa.column("rowid", sa.Integer))


def _few_trigram_candidates(conn: Connection, text: str) -> bool:
    probe = sa.select(sa.func.count()).select_from(_trigram_rowids(text, _FEW_CANDIDATES).subquery())
    return int(conn.execute(probe).scalar_one()) < _FEW_CANDIDATES


def title_queries(text: str, notebook_ids: Collection[str] | None, limit: int) -> tuple[Any, Any]:
    """Two forms of the title match (``text`` not empty): the whole answer ranked in one query
    (``ranked``; on SQLite the trigram candidates may be added to it), and the titles starting
    with ``text`` among the newest notes only, newest first (``recent_prefix``)."""
    n = db.notes
    low = sa.func.lower(n.c.title)
    needle = _like_escaped(text.lower())
    starts = low.like(needle + "%", escape="\\")
    q = sa.select(n.c.id, n.c.title, n.c.notebook_id).where(n.c.deleted_time.is_(None))
    if notebook_ids is not None:
        q = q.where(n.c.notebook_id.in_(sorted(notebook_ids)))
    recent = (n.c.updated_time.desc(), n.c.id.desc())
    ranked = (q.where(low.like("%" + needle + "%", escape="\\"))
              .order_by(sa.case((starts, 0), else_=1), *recent).limit(limit))
    window = q.add_columns(n.c.updated_time, starts.label("starts")).order_by(*recent).limit(_RECENT_WINDOW).subquery()
    recent_prefix = (sa.select(window.c.id, window.c.title, window.c.notebook_id).where(window.c.starts)
                     .order_by(window.c.updated_time.desc(), window.c.id.desc()).limit(limit))
    return ranked, recent_prefix


def titles_matching(conn: Connection, text: str, notebook_ids: Collection[str] | None, limit: int) -> list[Any]:
    """Live notes whose title holds ``text`` (any case): titles starting with it first, then
    the most recently changed.

    Indexed (migration 0022). Text that few titles hold (three characters or more, on
    SQLite): the trigram table ``notes_titles`` gives the candidates (a superset: it folds case
    beyond ASCII) and the ``LIKE`` keeps the matches. Otherwise the newest notes are looked
    through first: when ``limit`` of them start with the text, those are the answer (any older
    one ranks below them), found in a few rows when the text is common. Failing that, one
    query ranks every title holding it: on PostgreSQL through the pg_trgm index on
    ``lower(title)`` when the planner finds it cheaper, on SQLite by reading every title."""
    n = db.notes
    if notebook_ids is not None and not notebook_ids:
        return []
    if not text:  # the newest: one range of the recency index
        q = sa.select(n.c.id, n.c.title, n.c.notebook_id).where(n.c.deleted_time.is_(None))
        if notebook_ids is not None:
            q = q.where(n.c.notebook_id.in_(sorted(notebook_ids)))
        return list(conn.execute(q.order_by(n.c.updated_time.desc(), n.c.id.desc()).limit(limit)))
    ranked, recent_prefix = title_queries(text, notebook_ids, limit)
    if conn.dialect.name == "sqlite" and len(text) >= _TRIGRAM and _few_trigram_candidates(conn, text):
        return list(conn.execute(ranked.where(n.c.seq.in_(_trigram_rowids(text)))))
    first = list(conn.execute(recent_prefix))
    if len(first) >= limit:
        return first
    return list(conn.execute(ranked))


def _visible(scope: RequestScope, conn: Connection) -> tuple[list[Notebook], set[str] | None]:
    """The notebooks the request sees, without their counts (counting 100,000 notes takes a
    tenth of a second; a page of the list needs none), and the id filter lists need
    (``None``: all)."""
    books = scope.workspace.list_notebooks(with_counts=False, conn=conn)
    allowed = scope.visible_ids(conn)
    return (books, None) if allowed is None else ([b for b in books if b.id in allowed], allowed)


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/browse/…`` and ``POST /api/v1/notes/{note_id}/move``."""
    install_error_handlers(api)
    ws = app.workspace
    r = APIRouter(prefix="/api/v1", tags=["browse"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    @r.get("/browse/tree", response_model=Tree)
    async def tree(request: Request) -> dict[str, Any]:
        """The notebooks you may see, each with its own count and its count with sub-notebooks."""
        scope = request_scope(request, ws)

        def read() -> list[Notebook]:
            with ws.read() as c:
                return scope.visible_notebooks(c)

        books = await to_thread.run_sync(read)
        total = totals(books)
        return {"notebooks": [{"id": b.id, "parent_id": b.parent_id, "title": b.title, "note_count": b.note_count,
                               "total_count": total[b.id]} for b in books],
                "total": sum(b.note_count for b in books)}

    @r.get("/browse/notes", response_model=NotePage)
    async def notes(
        request: Request,
        notebook_id: Annotated[str | None, Query(pattern=ID_PATTERN, description="Its notes and its sub-notebooks'.")] = None,
        cursor: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
        limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    ) -> dict[str, Any]:
        """A page of the notes you may see, newest change first; follow `next_cursor` for more."""
        scope = request_scope(request, ws)
        after = decode_cursor(cursor) if cursor else None

        def read() -> tuple[list[Any], dict[str, str], dict[str, list[str]]]:
            with ws.read() as c:
                books, allowed = _visible(scope, c)
                if notebook_id is not None:
                    scope.notebook(notebook_id, c)  # 404 when missing or out of sight
                    allowed = subtree_ids(books, notebook_id)
                rows = page_of_notes(c, allowed, after, limit + 1)
                tags = ws.tags_of([row.id for row in rows[:limit]], conn=c)
                return rows, {b.id: b.title for b in books}, tags

        rows, titles, tags = await to_thread.run_sync(read)
        page = rows[:limit]
        more = len(rows) > limit
        return {
            "notes": [{"id": n.id, "title": n.title, "notebook_id": n.notebook_id, "notebook": titles.get(n.notebook_id, ""),
                       "updated_time": n.updated_time, "tags": tags.get(n.id, []), "is_todo": bool(n.is_todo),
                       "todo_due": n.todo_due, "todo_completed": n.todo_completed} for n in page],
            "next_cursor": encode_cursor(page[-1].updated_time, page[-1].id) if more else None,
        }

    @r.get("/browse/titles", response_model=TitleList)
    async def titles(
        request: Request,
        q: Annotated[str, Query(max_length=200, pattern=NO_NUL, description="Part of a title; empty: the newest notes.")] = "",
        limit: Annotated[int, Query(ge=1, le=50)] = 12,
    ) -> dict[str, Any]:
        """Notes whose title holds `q`, titles starting with it first (the quick switcher)."""
        scope = request_scope(request, ws)

        def read() -> tuple[list[Any], dict[str, str]]:
            with ws.read() as c:
                books, allowed = _visible(scope, c)
                return titles_matching(c, q.strip(), allowed, limit), {b.id: b.title for b in books}

        rows, names = await to_thread.run_sync(read)
        return {"notes": [{"id": n.id, "title": n.title, "notebook": names.get(n.notebook_id, "")} for n in rows]}

    @r.get("/browse/search", response_model=SearchPage)
    async def search(
        request: Request,
        q: Annotated[str, Query(min_length=1, max_length=1000, pattern=NO_NUL,
                                description="The query language of `search_notes`.")],
        mode: Annotated[Literal["keyword", "semantic", "hybrid"] | None, Query(
            description="Default: hybrid when the semantic index is built, else keyword.")] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        offset: Annotated[int, Query(ge=0, le=MAX_COUNT)] = 0,
    ) -> dict[str, Any]:
        """Search as the `search_notes` tool does (same query language, modes and ranking),
        each result with its snippet and the section the hit is in."""
        if not q.strip():
            raise InvalidInput("q: say what to look for", field="q")
        scope = request_scope(request, ws)
        from noteloom.semantic.hybrid import hybrid_search

        def run() -> tuple[Any, dict[str, tuple[str, bool]]]:
            with ws.read() as c:
                found = hybrid_search(ws, app.services.semantic, q, mode=mode, limit=limit, offset=offset,
                                      notebook_ids=scope.visible_ids(c), conn=c)
                return found, ws.places([h.id for h in found.hits], conn=c)

        found, places = await to_thread.run_sync(run)
        return {
            "results": [{"id": h.id, "title": h.title, "notebook_id": h.notebook_id,
                         "notebook": h.notebook if h.notebook is not None else places.get(h.id, ("", False))[0],
                         "updated_time": h.updated_time, "snippet": h.snippet, "section": h.section,
                         "section_heading": h.section_heading} for h in found.hits],
            "mode": found.mode, "has_more": found.has_more,
            "next_offset": offset + limit if found.has_more else None,
        }

    @r.post("/notes/{note_id}/move", response_model=Moved)
    async def move(request: Request, note_id: IdPath, body: MoveIn) -> dict[str, Any]:
        """Move a note into another notebook; you need to be able to change both."""
        scope = request_scope(request, ws)

        def run() -> Any:
            with ws.write() as c:
                scope.note(note_id, c, write=True)
                target = scope.notebook(body.notebook_id, c, write=True)
                return ws.update_note(note_id, notebook_id=target.id, conn=c)

        note = await to_thread.run_sync(run)
        return {"id": note.id, "notebook_id": note.notebook_id, "updated_time": note.updated_time}

    api.include_router(r)
