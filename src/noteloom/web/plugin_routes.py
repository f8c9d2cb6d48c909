"""Plugins' web routes and static files: ``/plugins/{name}/…`` and ``/plugins/{name}/static/…``.

A plugin's routes (``register_web_routes``) are mounted inside our own app, so they pass
through the same middlewares as every route of ours: the credential check (``web/auth.py``:
a header credential, never a cookie — which is also why no other site can forge a request
that carries it, the CSRF rule), the body limit and the security headers with the
Content-Security-Policy (``web/headers.py``). They live under ``/plugins/{name}/`` only, so
no plugin can shadow a route of ours or another plugin's. A plugin's route answers the person
asking (``request.state.user``): one that shows notes should go through
``noteloom.web.access.request_scope`` as ours do. A credential limited to some notebooks or
tools never reaches a plugin's routes, which cannot be known to keep to them (``web/auth.py``).

A plugin's static files (``register_static``) are public, as ``/static`` is: they must hold
no user data. They are served from the directory the plugin names, never from outside it
(no ``..``, no symbolic link out of it, no hidden file). Every plugin with routes also gets
its ``/plugins/{name}/static/`` answered here, empty if it has no files, so that the public
prefix never reaches a plugin's own routes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import PlainTextResponse

from noteloom.renderspec import PLUGIN_NAME

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from noteloom.app import App

#: Where a plugin's static files are served, below its prefix; its routes may not use it.
STATIC = "/static"


class PluginStatic(StaticFiles):
    """A plugin's folder of static files; hidden files and links out of it are not found."""

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if any(part.startswith(".") for part in Path(path).parts):
            return "", None
        return super().lookup_path(path)


async def _no_files(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)


def _checked_name(name: Any, hook: str) -> str:
    if not isinstance(name, str) or not PLUGIN_NAME.fullmatch(name):
        raise ValueError(f"{hook}: {name!r} is not a plugin name (1 to 64 letters, digits, _ and -)")
    return name


def plugin_routes(app: App) -> tuple[list[tuple[str, APIRouter]], dict[str, Path]]:
    """The routers and static folders the app's plugins register; ``ValueError``/``TypeError``
    for a registration that breaks a rule (a plugin author's mistake, raised at start-up)."""
    routers: list[tuple[str, APIRouter]] = []
    statics: dict[str, Path] = {}

    def register_router(name: str, router: APIRouter) -> None:
        _checked_name(name, "register_web_routes")
        if not isinstance(router, APIRouter):
            raise TypeError(f"register_web_routes: {name!r} must come with a fastapi.APIRouter, not {router!r}")
        for route in router.routes:
            path = str(getattr(route, "path", ""))
            if path == STATIC or path.startswith(STATIC + "/"):
                raise ValueError(
                    f"register_web_routes: {name!r} route {path!r} is under {STATIC}, where the plugin's "
                    "public static files are served; put it elsewhere"
                )
        routers.append((name, router))

    def register_static(name: str, directory: Path) -> None:
        _checked_name(name, "register_static")
        folder = Path(directory)
        if not folder.is_dir():
            raise ValueError(f"register_static: {name!r} names {str(folder)!r}, which is not a folder")
        if name in statics:
            raise ValueError(f"register_static: {name!r} is registered twice")
        statics[name] = folder.resolve()

    app.plugins.hook.register_static(register=register_static)
    app.plugins.hook.register_web_routes(register=register_router)
    return routers, statics


def install(api: FastAPI, app: App) -> None:
    routers, statics = plugin_routes(app)
    # The static folders first: routing tries routes in order, so no plugin route can answer
    # under the public static prefix.
    for name in sorted({*statics, *(n for n, _ in routers)}):
        folder = statics.get(name)
        target: Any = PluginStatic(directory=str(folder)) if folder is not None else _no_files
        api.mount(f"/plugins/{name}{STATIC}", target, name=f"plugin-static-{name}")
    for name, router in routers:
        api.include_router(router, prefix=f"/plugins/{name}")
