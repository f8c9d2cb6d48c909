"""What the note pages show, over JSON: a note rendered to sanitised HTML with its details.

The page shells hold no data (``web/pages.py``); they fetch this with the session header.
It acts as the person asking (``web/access.py``): a note they may not see is a 404 like a
missing one.
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field

from noteloom.app import App
from noteloom.web.access import request_scope
from noteloom.web.api_base import ERRORS, IdPath, install_error_handlers
from noteloom.web.render import render_markdown, safe_link


class RenderedNote(BaseModel):
    id: str
    notebook_id: str
    title: str
    html: str = Field(description="The body as sanitised HTML; attachments as `/attachments/ID`.")
    tags: list[str]
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    source_url: str | None = Field(description="Where the note came from, when that is an http, https or "
                                               "mailto URL (anything else is withheld: it must not become a link).")
    created_time: int
    updated_time: int


def install(api: FastAPI, app: App) -> None:
    """Add ``GET /api/v1/notes/{note_id}/rendered``."""
    install_error_handlers(api)
    ws = app.workspace
    r = APIRouter(prefix="/api/v1", tags=["notes"], responses=ERRORS)

    @r.get("/notes/{note_id}/rendered", response_model=RenderedNote)
    async def rendered(request: Request, note_id: IdPath) -> dict[str, Any]:
        """A note as its page shows it."""
        scope = request_scope(request, ws)

        def read() -> Any:
            with ws.read() as c:
                return scope.note(note_id, c)

        n = await to_thread.run_sync(read)
        html = await to_thread.run_sync(render_markdown, n.body)
        return {"id": n.id, "notebook_id": n.notebook_id, "title": n.title, "html": html, "tags": list(n.tags),
                "is_todo": n.is_todo, "todo_due": n.todo_due, "todo_completed": n.todo_completed,
                "source_url": safe_link(n.source_url), "created_time": n.created_time,
                "updated_time": n.updated_time}

    api.include_router(r)
