"""The recipes page at ``/recipes``: the list, the mode-aware form, run history, a run's trace.

One template and one script (``static/recipes.js``); everything the page shows comes from
``/api/v1/recipes`` (and the notifications, notebooks and tool lists the form offers).
``/recipes/{id}`` and ``/recipes/runs/{run_id}`` are the same shell: the script opens the
recipe or the run the address names.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

from noteloom.app import App
from noteloom.web.api_base import IdPath
from noteloom.web.pages import templates


def install(api: FastAPI, app: App) -> None:
    r = APIRouter(include_in_schema=False)

    def shell(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "recipes.html", {}, headers={"Cache-Control": "no-cache"})

    @r.get("/recipes", response_class=HTMLResponse)
    async def recipes_page(request: Request) -> HTMLResponse:
        return shell(request)

    @r.get("/recipes/runs/{run_id}", response_class=HTMLResponse)
    async def run_page(request: Request, run_id: IdPath) -> HTMLResponse:
        return shell(request)

    @r.get("/recipes/{recipe_id}", response_class=HTMLResponse)
    async def recipe_page(request: Request, recipe_id: IdPath) -> HTMLResponse:
        return shell(request)

    api.include_router(r)
