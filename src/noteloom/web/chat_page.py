"""The chat page at ``/chat`` (a new chat and the list) and ``/chat/{id}`` (one conversation).

The page is one template and one small script (``static/chat.js``); everything it shows
comes from ``/api/v1/chat`` and ``/api/v1/notes``. Both addresses serve the same shell,
which holds nothing of anyone: the script reads the id from the address and asks the API,
which answers a foreign or missing id alike.
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

    @r.get("/chat/{conversation_id}", response_class=HTMLResponse)
    async def chat_conversation_page(request: Request, conversation_id: str) -> HTMLResponse:
        del conversation_id  # read by the page's script from its address
        return templates.TemplateResponse(request, "chat.html", {"current": None})

    api.include_router(r)
