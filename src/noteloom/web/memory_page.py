"""The memory page at ``/memory``: a person's memories and the workspace's shared ones, to
list, search, add, correct and delete (AI-written ones badged, with where they came from).

One template and one script (``static/memory.js``); everything the page shows comes from
``/api/v1/memory``. The shell carries no data, so it is public like ``/recipes``.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

from noteloom.app import App
from noteloom.web.pages import templates


def install(api: FastAPI, app: App) -> None:
    r = APIRouter(include_in_schema=False)

    @r.get("/memory", response_class=HTMLResponse)
    async def memory_page(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "memory.html", {}, headers={"Cache-Control": "no-cache"})

    api.include_router(r)
