"""``GET /api/v1/index/status``: how far the semantic index is (model, dimensions, pending notes).

The index is the workspace's, but its counts are of the notes the person asking may see
(``web/access.py``): how many notes other people keep is theirs to know.
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request
from starlette.responses import JSONResponse

from noteloom.app import App
from noteloom.web.access import request_scope


def install(api: FastAPI, app: App) -> None:
    @api.get("/api/v1/index/status", tags=["search"], summary="Semantic index status")
    async def index_status(request: Request) -> JSONResponse:
        scope = request_scope(request, app.workspace)
        index = app.services.semantic
        if index is None:
            return JSONResponse({"enabled": False})

        def status() -> Any:
            with app.workspace.read() as c:
                visible = scope.visible_ids(c)
            return index.status(visible)

        body: dict[str, Any] = {"enabled": True, **(await to_thread.run_sync(status)).as_dict()}
        return JSONResponse(body)
