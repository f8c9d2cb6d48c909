"""``GET /api/v1/index/status``: how far the semantic index is (model, dimensions, pending notes)."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from starlette.responses import JSONResponse

from noteloom.app import App


def install(api: FastAPI, app: App) -> None:
    @api.get("/api/v1/index/status", tags=["search"], summary="Semantic index status")
    async def index_status() -> JSONResponse:
        index = app.services.semantic
        if index is None:
            return JSONResponse({"enabled": False})
        status = await to_thread.run_sync(index.status)
        body: dict[str, Any] = {"enabled": True, **status.as_dict()}
        return JSONResponse(body)
