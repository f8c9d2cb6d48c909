"""The pages: HTML shells that carry no private data, and the attachment route.

The notes app is one shell (``templates/app.html``) at every address it has: ``/`` (all
notes), ``/notebooks/{id}``, ``/notes/{id}`` and ``/search?q=…``; its script
(``static/app.js``) reads the address, signs in and fetches what the view shows from
``/api/v1`` with the session header, so reload, Back and bookmarks land on the same view.
Every page is the same static chrome whatever the workspace holds, so the shells need no
credential and a page from another server that loads one learns nothing. Attachments are
private: the pages fetch them with the header and show them as ``blob:`` URLs; an
attachment of a note the person asking may not see (``web/access.py``) is a 404 like a
missing one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from starlette.requests import Request

from noteloom.app import App
from noteloom.web.access import request_scope
from noteloom.web.api_base import IdPath

templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))


def router(app: App) -> APIRouter:
    r = APIRouter(include_in_schema=False)
    ws = app.workspace

    def shell(request: Request, name: str, page: str) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"page": page}, headers={"Cache-Control": "no-cache"})

    @r.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> HTMLResponse:
        return shell(request, "app.html", "home")

    @r.get("/notebooks/{notebook_id}", response_class=HTMLResponse)
    async def notebook(request: Request, notebook_id: str) -> HTMLResponse:
        return shell(request, "app.html", "notebook")

    @r.get("/notes/{note_id}", response_class=HTMLResponse)
    async def note(request: Request, note_id: str) -> HTMLResponse:
        return shell(request, "app.html", "note")

    @r.get("/search", response_class=HTMLResponse)
    async def search(request: Request) -> HTMLResponse:
        return shell(request, "app.html", "search")

    @r.get("/runs/{run_id}")
    async def run(run_id: IdPath) -> RedirectResponse:
        """A run's short address: its page lives with the recipes."""
        return RedirectResponse(f"/recipes/runs/{run_id}", status_code=308)

    @r.get("/api/docs", response_class=HTMLResponse)
    async def docs(request: Request) -> HTMLResponse:
        return shell(request, "docs.html", "docs")

    @r.get("/attachments/{attachment_id}")
    async def attachment(request: Request, attachment_id: str) -> FileResponse:
        scope = request_scope(request, ws)

        def find() -> Any:
            with ws.read() as c:
                return scope.attachment(attachment_id, c)

        try:
            a = await to_thread.run_sync(find)
            path = ws.attachment_path(a.id, a.filename)
        except Exception as exc:
            raise HTTPException(404, f"no attachment {attachment_id!r}") from exc
        if not path.exists():
            raise HTTPException(404, f"the file of attachment {attachment_id!r} is missing")
        return FileResponse(
            path, media_type=a.mime, filename=a.filename,
            headers={"Content-Security-Policy": "sandbox", "Cache-Control": "private, no-store"},
        )

    return r
