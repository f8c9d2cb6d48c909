"""Friendly error pages: a person who opens an address in the browser and meets a 401, 403,
404, 405 or 500 gets a page in the app's look saying what happened and what to do, with the
same status code.

Only a browser's own navigation gets a page: ``Sec-Fetch-Mode: navigate``, or, from a client
that sends no fetch metadata, an ``Accept`` that prefers HTML to JSON. Everything else — API
clients, the CLI, the pages' own ``fetch`` calls (``Sec-Fetch-Mode: cors``), scripts and
styles — keeps the JSON errors exactly as they were; ``/mcp`` is never touched. An answer
that is already HTML passes as it is.

:class:`ErrorPages` is an ASGI middleware outside the credential check (which answers 401 and
403 itself) and inside the security headers (so a page carries the CSP). A navigation is sent
no session header (the pages keep it in ``sessionStorage`` for their script), so an unknown
address answers 401 before any route is looked up: when no route matches the path, the page
says 404 instead, which is what the person needs to hear. The 500 page is fixed text: it
never shows the error or a traceback (the server's log has them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.routing import BaseRoute, Match

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Advice:
    """What one status says to a person: a title, what happened, and what to do."""

    title: str
    explanation: str
    action: str
    #: The main way on: "sign-in" (the app's sign-in), "retry" (this address again) or "home".
    way: str


PAGES: dict[int, Advice] = {
    401: Advice("Sign in to open this",
                "This address needs you to be signed in. A browser sends your sign-in only from the app's own "
                "pages, so an address of the API opened directly is refused.",
                "Sign in, then open it from the app.", "sign-in"),
    403: Advice("You do not have access to this",
                "You are signed in, but your account or token may not open this.",
                "Ask the workspace's owner for access, or sign in as someone who has it.", "home"),
    404: Advice("Page not found",
                "Nothing is here: the address may be mistyped, or what it pointed to was moved or deleted.",
                "Check the address, or go to your notes and find it from there.", "home"),
    405: Advice("This address cannot be opened in a browser",
                "It takes a request from the app (a form or a script), not a visit.",
                "Check the address, or go to your notes.", "home"),
    500: Advice("Something went wrong on our side",
                "The server could not finish this request. Nothing you did caused it.",
                "Try again in a moment. If it keeps happening, the server's log says what failed.", "retry"),
}
#: Headers of the original answer the page keeps (how to authenticate, which methods, when to retry).
KEPT_HEADERS = frozenset({b"www-authenticate", b"allow", b"retry-after"})
MCP_PATH = "/mcp"

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=select_autoescape(default=True),
)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def _quality(accept: str) -> dict[str, float]:
    """The media ranges of an ``Accept`` header with their ``q`` (a malformed one counts as 0)."""
    ranges: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            ranges[media.lower()] = max(q, ranges.get(media.lower(), 0.0))
    return ranges


def wants_page(scope: Scope) -> bool:
    """Whether this request is a person's browser opening an address (not a script or a client)."""
    mode = _header(scope, b"sec-fetch-mode")
    if mode:
        return mode.lower() == "navigate"
    ranges = _quality(_header(scope, b"accept"))
    html = max(ranges.get("text/html", 0.0), ranges.get("application/xhtml+xml", 0.0))
    return html > 0 and html >= ranges.get("application/json", 0.0)


def same_origin_path(address: str) -> bool:
    """Whether ``address`` is a path of this server a browser may be sent on to: ``/`` and a
    path, never a scheme, a host (``//evil``, ``/\\evil``: browsers read a backslash as a
    slash) or a control character."""
    return (address.startswith("/") and not address.startswith("//") and "\\" not in address
            and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in address))


def sign_in_link(here: str) -> str:
    """The app's sign-in, sent back to ``here`` once signed in (``/?next=…``, which the page
    checks again). An address of the API is not one to go back to: a browser's navigation
    carries no sign-in, so it would be refused again."""
    path = here.split("?", 1)[0]
    if path in ("", "/") or path == "/api" or path.startswith("/api/") or not same_origin_path(here):
        return "/"
    return "/?" + urlencode({"next": here})


def error_page(status: int, path: str, query: str = "") -> bytes:
    """The page for ``status`` (one of :data:`PAGES`) at ``path``, as UTF-8 HTML."""
    advice = PAGES[status]
    here = path + ("?" + query if query else "")
    return _templates.get_template("error.html").render(
        status=status, advice=advice, here=here, sign_in=sign_in_link(here)).encode()


class ErrorPages:
    """Answers a browser's navigation that ends in an error of :data:`PAGES` with its page.

    ``routes`` gives the app's routes at request time (a path none of them matches is a 404).
    """

    def __init__(self, app: ASGIApp, routes: Callable[[], list[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes

    def _routed(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] is not Match.NONE for route in self.routes())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if (scope["type"] != "http" or path == MCP_PATH or path.startswith(MCP_PATH + "/")
                or not wants_page(scope)):
            await self.app(scope, receive, send)
            return
        started = False
        page_status: int | None = None  # set while the original answer is being swallowed

        async def send_page(status: int, headers: list[tuple[bytes, bytes]]) -> None:
            body = error_page(status, path, bytes(scope.get("query_string", b"")).decode("latin-1"))
            headers = [(k, v) for k, v in headers if k.lower() in KEPT_HEADERS] + [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})

        held: list[tuple[bytes, bytes]] = []

        async def send_or_replace(message: Message) -> None:
            nonlocal started, page_status, held
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if status in PAGES and not ctype.lower().startswith(b"text/html"):
                    page_status = 404 if status == 401 and not self._routed(scope) else status
                    held = headers
                    return
            elif page_status is not None:
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    status, page_status = page_status, None
                    await send_page(status, held)
                return
            await send(message)

        try:
            await self.app(scope, receive, send_or_replace)
        except Exception:
            if not started:
                await send_page(500, [])
            elif page_status is not None:
                await send_page(page_status, held)
            raise
