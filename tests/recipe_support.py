"""Helpers for the recipe tests: a running recipe runner, scripted models, waiting for a run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from noteloom.app import App
from noteloom.providers.scripted import ScriptedProvider, Step
from noteloom.recipes.runner import RecipeRunner
from noteloom.recipes.service import RecipeService
from noteloom.workspace import User


def scripted(app: App, steps: Sequence[Step], name: str = "play", *, loop: bool = False,
             prices: dict[str, dict[str, float]] | None = None) -> ScriptedProvider:
    """A scripted model reachable as ``NAME`` in this app."""
    provider = ScriptedProvider(name, list(steps), loop=loop, prices=prices)
    app.services.providers.add(provider)
    return provider


def service(app: App) -> RecipeService:
    assert app.services.recipes is not None
    return app.services.recipes


@asynccontextmanager
async def running(app: App, **options: Any) -> AsyncIterator[RecipeRunner]:
    """The recipes' runner of this process, retrying transient failures without waiting."""
    options.setdefault("retry_delay", lambda attempt, rate_limited: 0.0)
    async with service(app).running(**options) as runner:
        yield runner


async def settled(app: App, user: User, run_id: str, *, timeout: float = 60.0,
                  until: Sequence[str] = ()) -> dict[str, Any]:
    """The run's detail once it is no longer running (or has one of ``until``'s statuses).

    ``timeout`` only bounds a hung run: nothing here waits for a time to pass."""
    with anyio.fail_after(timeout):
        while True:
            view = await anyio.to_thread.run_sync(service(app).run, user, run_id)
            if view["status"] in until or (not until and view["status"] not in ("running", "queued")):
                return view
            await anyio.sleep(0.02)


async def until_event(app: App, user: User, run_id: str, kind: str, *, timeout: float = 60.0,
                      where: Callable[[dict[str, Any]], bool] = lambda data: True) -> dict[str, Any]:
    """The first event of ``kind`` (whose data passes ``where``) the run has stored (or,
    while it runs here, published)."""
    runner = service(app).runner
    with anyio.fail_after(timeout):
        while True:
            handle = runner.engine.live.get(run_id) if runner is not None else None
            events = handle.events if handle is not None else []
            for e in events:
                if e.kind == kind and where(e.data):
                    return e.data
            view = await anyio.to_thread.run_sync(service(app).run, user, run_id)
            for e in view["events"]:
                if e["kind"] == kind and where(e["data"]):
                    return dict(e["data"])
            await anyio.sleep(0.02)
