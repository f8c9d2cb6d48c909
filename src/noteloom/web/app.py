"""The ASGI application: pages, /api/v1, /mcp — every route with data behind a header credential
(``web/auth.py``), every response with the security headers (``web/headers.py``)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import JSONResponse

from noteloom import __version__
from noteloom.app import App
from noteloom.config import Settings
from noteloom.postings import serving
from noteloom.web import pages
from noteloom.web.auth import TokenAuth
from noteloom.web.error_pages import ErrorPages
from noteloom.web.headers import SecurityHeaders
from noteloom.web.limits import BodyLimit

if TYPE_CHECKING:
    from noteloom.web.workers import Worker


def create_web_app(
    app: App, *, background: bool | Collection[str] = False, claims_scheduled: bool = False, close: bool = False,
) -> Any:
    """The full ASGI app (wrapped in the credential and security-header middlewares).

    Its lifespan runs ``app``'s background services (``App.background``): all of them with
    ``background=True`` (what ``noteloom serve`` runs), the ones named, or none (the
    default: a test's app, served or not, runs only what the test starts). ``claims_scheduled``:
    this process runs the scheduled work of the server. ``close``: the app is closed when
    the server stops (a worker's own app).
    """
    names: tuple[str, ...] = () if isinstance(background, bool) else tuple(background)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if close:
                stack.callback(app.close)
            stack.enter_context(serving())
            if background is True or names:
                await stack.enter_async_context(app.background(*names, claims_scheduled=claims_scheduled))
            mcp = getattr(api.state, "mcp_server", None)  # its watchers: change notifications to MCP sessions
            if mcp is not None:
                await stack.enter_async_context(mcp.running())
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

    guard = TokenAuth(McpFirst(api), app.workspace, challenge=getattr(api.state, "oauth_challenge", None))
    api.state.auth = guard  # sign-out tells it to forget the session at once
    # Routes that take files allow larger multipart bodies (they said so when installed).
    uploads = getattr(api.state, "upload_limits", None)
    # A browser's navigation that ends in an error gets a page (error_pages.py); clients keep the JSON.
    return SecurityHeaders(ErrorPages(BodyLimit(guard, app.settings.limits.max_body_bytes, uploads), lambda: api.router.routes))


#: Modules of later layers that add routes (MCP, the chat API …); each has ``install(api, app)``.
ROUTE_MODULES: list[str] = [
    "noteloom.web.mcp_http",
    "noteloom.web.index_status",
    "noteloom.web.chat_api",
    "noteloom.web.recipes_api",
    "noteloom.web.notes_api",
    "noteloom.web.pages_api",
    "noteloom.web.browse_api",
    "noteloom.web.sessions",
    "noteloom.web.people_api",
    "noteloom.web.vault_api",
    "noteloom.web.chat_page",
    "noteloom.web.recipes_page",
    "noteloom.web.memory_api",
    "noteloom.web.memory_page",
    "noteloom.web.notifications_api",
    "noteloom.web.tool_policies",
    "noteloom.web.plugin_routes",
    "noteloom.web.oauth",
]


def served_app(settings: Settings, worker: Worker) -> Any:
    """The app each process of ``noteloom serve --workers N`` runs: the workspace of
    ``settings``, embedding through the server's shared embedding service, with all the
    app's background services (scheduled work only in the worker that claims it)."""
    from noteloom.app import open_app

    app = open_app(settings, embed_service=worker.embed_service)
    return create_web_app(app, background=True, claims_scheduled=worker.claims_scheduled, close=True)
