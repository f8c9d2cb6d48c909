"""The chat page at ``/chat``: conversations, transcript and composer beside a notes pane.

The page is one template and one small script (``static/chat.js``); everything it shows
comes from ``/api/v1/chat`` and ``/api/v1/notes``.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

from noteloom.app import App
from noteloom.web.pages import templates


def install(api: FastAPI, app: App) -> None:
    r = APIRouter(include_in_schema=False)

    @r.get("/chat", response_class=HTMLResponse)
    async def chat_page(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "chat.html", {"current": None})

    api.include_router(r)
