"""MCP over Streamable HTTP: ``POST /mcp`` with one JSON-RPC message or a batch.

A scoped token (or a browser session started from one) gets only what its scopes allow:
the token middleware put them in the request's state, and :meth:`Preflight.limited`
narrows the request's settings with them.

Stateless: no sessions and no server-sent stream, so ``GET`` is 405 and every
answer is plain JSON. The token middleware has already turned away requests
without a valid token (401); here a browser page from a foreign origin and a
workspace with MCP turned off get 403, and malformed HTTP gets the matching 4xx.

``POST /mcp`` is the busiest route by far, so :class:`McpFirst` hands it to its endpoint
ahead of FastAPI's stack of middlewares and routes (a fifth of a search call's time in
the server went through them); its failures are answered as that stack answers them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from noteloom.app import App
from noteloom.mcp import (
    DISABLED_MESSAGE,
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    SUPPORTED_VERSIONS,
    McpServer,
    error_body,
)

#: Largest request body accepted (a note body of a few MB fits, a runaway upload does not).
MAX_BODY = MAX_MESSAGE_BYTES
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_ALLOW = {"allow": "POST"}
#: The methods the endpoint answers itself (the route adds HEAD to GET); Starlette answers the rest.
ROUTED = ("GET", "POST", "DELETE", "PUT", "PATCH")
_FIRST = frozenset({*ROUTED, "HEAD"})


def install(api: FastAPI, app: App) -> None:
    """Add ``/mcp`` to the web app."""
    server = McpServer(app)
    allowed = _allowed_origins(app)

    async def mcp_endpoint(request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and not _origin_ok(origin, allowed):
            return _error(403, INVALID_REQUEST, f"Forbidden: requests from origin {origin!r} are not allowed")
        if request.method != "POST":
            return _error(405, INVALID_REQUEST, "Method Not Allowed: send JSON-RPC with POST", headers=_ALLOW)
        pre = await server.current_preflight()
        if not pre.enabled:
            return _error(403, INVALID_REQUEST, DISABLED_MESSAGE)
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return _error(415, INVALID_REQUEST, "Unsupported Media Type: send Content-Type: application/json")
        if not _accepts_json(request.headers.get("accept")):
            return _error(406, INVALID_REQUEST, "Not Acceptable: the Accept header must allow application/json")
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_VERSIONS:
            return _error(
                400, INVALID_REQUEST,
                f"Bad Request: unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(SUPPORTED_VERSIONS)}",
            )
        body = await _read_body(request)
        if body is None:
            return _error(413, INVALID_REQUEST, f"Payload Too Large: at most {MAX_BODY} bytes")
        state = request.scope.get("state", {})
        user = state.get("user")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.scope["headers"]}
        # The token's scopes narrow the tools and the notebook scope of this request.
        reply = await server.handle_bytes(body, user, headers=headers, preflight=pre.limited(state.get("token_scopes")))
        if reply.body is None:
            return Response(status_code=202)
        return Response(reply.encode(), status_code=400 if reply.rejected else 200, media_type="application/json")

    api.add_route("/mcp", mcp_endpoint, methods=list(ROUTED), include_in_schema=False)
    api.state.mcp_endpoint = mcp_endpoint



Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Endpoint = Callable[[Request], Awaitable[Response]]


class McpFirst:
    """``/mcp`` straight to its endpoint, every other request to ``api``.

    What the stack skipped would have done for it is done here: an exception the app
    has a handler for is answered by that handler, any other one with a plain 500 and
    raised again (for the server's log).
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app  # named as the other middlewares name what they wrap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: Endpoint | None = getattr(self.app.state, "mcp_endpoint", None)
        if (
            endpoint is None or scope["type"] != "http" or scope["path"] != "/mcp" or scope.get("root_path")
            or scope["method"] not in _FIRST
        ):
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        request = Request(scope, receive)
        try:
            response = await endpoint(request)
            await response(scope, receive, sending)
        except Exception as exc:
            handler = _handler_for(self.app, exc)
            if handler is not None and not started:
                await (await handler(request, exc))(scope, receive, sending)
                return
            if not started:
                await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise


def _handler_for(api: FastAPI, exc: Exception) -> Callable[[Request, Exception], Awaitable[Response]] | None:
    """The app's handler for ``exc``, looked up by class as Starlette does (500 is not one)."""
    for cls in type(exc).__mro__:
        if cls is not Exception and cls in api.exception_handlers:
            handler: Any = api.exception_handlers[cls]
            return handler  # type: ignore[no-any-return]
    return None


def _error(status: int, code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(error_body(code, message)).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _allowed_origins(app: App) -> frozenset[str]:
    """Extra browser origins from ``[mcp] allowed_origins`` in noteloom.toml."""
    extra = app.settings.section("mcp").get("allowed_origins", [])
    return frozenset(str(o).rstrip("/").lower() for o in extra if isinstance(o, str))


def _origin_ok(origin: str, allowed: frozenset[str]) -> bool:
    """Pages served from this machine (any port) and configured origins; nothing else,
    not even the Host we were reached by (DNS rebinding makes that one a lie)."""
    if origin.rstrip("/").lower() in allowed:
        return True
    try:
        parts = urlsplit(origin)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host is not None and host.lower() in LOOPBACK


def _accepts_json(accept: str | None) -> bool:
    if accept is None:
        return True  # no Accept header means anything goes
    for item in accept.split(","):
        media, _, rest = item.partition(";")
        media = media.strip().lower()
        if media in ("application/json", "application/*", "*/*") and not _q_zero(rest):
            return True
    return False


def _q_zero(params: str) -> bool:
    for p in params.split(";"):
        key, _, value = p.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value) == 0
            except ValueError:
                return False
    return False


async def _read_body(request: Request) -> bytes | None:
    """The body, or ``None`` when it is larger than MAX_BODY (stops reading early)."""
    declared = request.headers.get("content-length", "")
    # isdecimal, not isdigit: int() refuses "²"; a 20-digit length is past the limit anyway.
    if declared.isdecimal() and (len(declared) > 18 or int(declared) > MAX_BODY):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)

