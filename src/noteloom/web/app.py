"""The ASGI application: pages, /api/v1, /mcp — every route with data behind a header credential
(``web/auth.py``), every response with the security headers (``web/headers.py``)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import JSONResponse

from noteloom import __version__
from noteloom.app import App
from noteloom.postings import serving
from noteloom.web import pages
from noteloom.web.auth import TokenAuth
from noteloom.web.headers import SecurityHeaders
from noteloom.web.limits import BodyLimit

#: Async context managers run for the server's lifetime (background workers of later layers).
Lifespan = Callable[[App], Any]


def create_web_app(app: App, *, lifespans: list[Lifespan] | None = None) -> Any:
    """The full ASGI app (wrapped in the credential and security-header middlewares)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.enter_context(serving())
            for factory in lifespans or []:
                await stack.enter_async_context(factory(app))
            yield

    api = FastAPI(
        title="noteloom",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,  # our own page (pages.py): vendored Swagger UI under the CSP
        openapi_url="/api/v1/openapi.json",
        redoc_url=None,
    )
    api.state.noteloom = app

    @api.get("/health", include_in_schema=False)
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "version": __version__})

    api.mount("/static", StaticFiles(directory=str(Path(__file__).with_name("static"))), name="static")
    api.include_router(pages.router(app))
    for name in ROUTE_MODULES:
        importlib.import_module(name).install(api, app)
    from noteloom.web.mcp_http import McpFirst  # a route module: imported with the others

    guard = TokenAuth(McpFirst(api), app.workspace)
    api.state.auth = guard  # sign-out tells it to forget the session at once
    return SecurityHeaders(BodyLimit(guard, app.settings.limits.max_body_bytes))


#: Modules of later layers that add routes (MCP, the chat API …); each has ``install(api, app)``.
ROUTE_MODULES: list[str] = [
    "noteloom.web.mcp_http",
    "noteloom.web.index_status",
    "noteloom.web.chat_api",
    "noteloom.web.notes_api",
    "noteloom.web.pages_api",
    "noteloom.web.sessions",
    "noteloom.web.chat_page",
    "noteloom.web.tool_policies",
    "noteloom.web.plugin_routes",
]


def served_app() -> Any:
    """The app ``noteloom serve --workers N`` runs in each process: the workspace the
    environment names, with the index worker and the chat's turn runner."""
    from noteloom.app import open_app
    from noteloom.chat import chat_lifespan
    from noteloom.semantic import index_worker

    app = open_app()

    @asynccontextmanager
    async def closing(_: App) -> AsyncIterator[None]:
        try:
            yield
        finally:
            app.close()

    return create_web_app(app, lifespans=[closing, index_worker, chat_lifespan])
