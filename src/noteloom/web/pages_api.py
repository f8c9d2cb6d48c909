"""What the note pages show, over JSON: a note rendered to sanitised HTML with its details and
backlinks, links resolved for the page's own renderer, and a task item toggled from a click.

The page shells hold no data (``web/pages.py``); they fetch this with the session header.
Every route acts as the person asking (``web/access.py``): a note they may not see is a 404
like a missing one, and a link to it renders unresolved like a link to nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field, StrictBool

from noteloom.app import App
from noteloom.errors import Conflict, InvalidInput
from noteloom.web.access import request_scope
from noteloom.web.api_base import (
    ERRORS,
    ID_PATTERN,
    MAX_COUNT,
    IdPath,
    NoteOut,
    StrictModel,
    install_error_handlers,
    note_out,
)
from noteloom.web.links import Backlink, backlinks, resolve_links, resolver
from noteloom.web.render import LinkRefs, render_markdown, safe_link, toggle_task


class BacklinkOut(BaseModel):
    id: str
    title: str
    notebook_id: str
    updated_time: int


class RenderedNote(BaseModel):
    id: str
    notebook_id: str
    title: str
    html: str = Field(description="The body as sanitised HTML, links resolved for you: notes as `/notes/ID`, "
                                  "attachments as `/attachments/ID`, anything else with class `link-unresolved`.")
    tags: list[str]
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    source_url: str | None = Field(description="Where the note came from, when that is an http, https or "
                                               "mailto URL (anything else is withheld: it must not become a link).")
    created_time: int
    updated_time: int
    backlinks: list[BacklinkOut] = Field(description="The notes you may see that link to this one, newest first.")


class TaskToggle(StrictModel):
    line: int = Field(ge=0, le=10_000_000, description="The task item's 0-based line (its `data-line`).")
    done: StrictBool
    base_updated_time: int | None = Field(
        None, ge=0, le=MAX_COUNT, description="The updated_time the page rendered; 409 if the note has changed since.")


Id = Annotated[str, Field(pattern=ID_PATTERN)]


class LinksIn(StrictModel):
    ids: list[Id] = Field([], max_length=1000, description="Joplin ids, as in `:/ID`.")
    titles: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        [], max_length=1000, description="Wiki-link titles, as in `[[Title]]`.")


class LinksOut(BaseModel):
    notes: list[str] = Field(description="The ids that are notes you may see (`/notes/ID`).")
    attachments: list[str] = Field(description="The ids that are attachments you may see (`/attachments/ID`).")
    titles: dict[str, str] = Field(description="Title → the id of the note you may see with exactly that title.")


def _backlink(b: Backlink) -> dict[str, Any]:
    return {"id": b.id, "title": b.title, "notebook_id": b.notebook_id, "updated_time": b.updated_time}


def install(api: FastAPI, app: App) -> None:
    """Add the rendered note, its backlinks, link resolution and the task toggle."""
    install_error_handlers(api)
    ws = app.workspace
    r = APIRouter(prefix="/api/v1", tags=["notes"], responses=ERRORS)

    @r.get("/notes/{note_id}/rendered", response_model=RenderedNote)
    async def rendered(request: Request, note_id: IdPath) -> dict[str, Any]:
        """A note as its page shows it, with its backlinks."""
        scope = request_scope(request, ws)

        def read() -> dict[str, Any]:
            with ws.read() as c:
                n = scope.note(note_id, c)
                html = render_markdown(n.body, resolver(scope, c))
                links = backlinks(scope, note_id, c)
            return {"id": n.id, "notebook_id": n.notebook_id, "title": n.title, "html": html, "tags": list(n.tags),
                    "is_todo": n.is_todo, "todo_due": n.todo_due, "todo_completed": n.todo_completed,
                    "source_url": safe_link(n.source_url), "created_time": n.created_time,
                    "updated_time": n.updated_time, "backlinks": [_backlink(b) for b in links]}

        return await to_thread.run_sync(read)

    @r.get("/notes/{note_id}/backlinks", response_model=list[BacklinkOut])
    async def note_backlinks(request: Request, note_id: IdPath) -> list[dict[str, Any]]:
        """The notes you may see that link to this one by `:/ID` or `[[Title]]`, newest first
        (at most 200)."""
        scope = request_scope(request, ws)

        def read() -> list[Backlink]:
            with ws.read() as c:
                return backlinks(scope, note_id, c)

        return [_backlink(b) for b in await to_thread.run_sync(read)]

    @r.post("/links/resolve", response_model=LinksOut)
    async def links_resolve(request: Request, body: LinksIn) -> dict[str, Any]:
        """Where `:/ID` and `[[Title]]` links lead for you; what is missing from the answer is
        unresolved (missing, or not yours to see: the two are not told apart)."""
        scope = request_scope(request, ws)
        refs = LinkRefs(frozenset(body.ids), frozenset(body.titles))

        def read() -> dict[str, Any]:
            with ws.read() as c:
                found = resolve_links(scope, refs, c)
            return {"notes": sorted(found.notes), "attachments": sorted(found.attachments), "titles": found.titles}

        return await to_thread.run_sync(read)

    @r.post("/notes/{note_id}/tasks", response_model=NoteOut)
    async def toggle(request: Request, note_id: IdPath, body: TaskToggle) -> dict[str, Any]:
        """Check (`done`) or clear the task item on `line` of the note's body."""
        scope = request_scope(request, ws)

        def save() -> Any:
            with ws.write() as c:
                current = scope.note(note_id, c, write=True)
                if body.base_updated_time is not None and body.base_updated_time != current.updated_time:
                    raise Conflict(f"note {note_id!r} has changed since you opened it; reload it, then tick again")
                changed = toggle_task(current.body, body.line, body.done)
                if changed is None:
                    raise InvalidInput(f"line {body.line} of note {note_id!r} is not a task item (`- [ ] ...`)",
                                       field="line")
                return ws.update_note(note_id, body=changed, conn=c)

        return note_out(await to_thread.run_sync(save))

    api.include_router(r)
