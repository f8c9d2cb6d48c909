"""Token authentication for every route but the health check.

A pure ASGI middleware (streaming responses and cancellation pass straight through).
The token comes as ``Authorization: Bearer``, as ``?token=`` (which also sets a
same-site cookie so a browser can follow links), or from that cookie.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from anyio import to_thread

from noteloom.errors import AuthError
from noteloom.workspace import User, Workspace

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "noteloom_token"
PUBLIC_PATHS = frozenset({"/health"})
#: How long a token found valid is trusted without asking the database again, where the
#: database cannot say cheaply whether anything changed (PostgreSQL). Checking costs a query
#: and a thread hop on every request (a third of a small MCP call); the price is that a
#: token revoked by another process keeps working here for up to this long. On SQLite a
#: token is trusted only until anyone commits anything, so a revocation holds at once.
TOKEN_CACHE_SECONDS = 5.0


def token_from_scope(scope: Scope) -> tuple[str | None, bool]:
    """The presented token, and whether it came in the query string."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0], True
    if "cookie" in headers:
        cookie: SimpleCookie = SimpleCookie()
        try:
            cookie.load(headers["cookie"])
        except Exception:
            return None, False
        if COOKIE in cookie:
            return cookie[COOKIE].value, False
    return None, False


class TokenAuth:
    """Rejects requests without a valid token with 401; puts the user in ``scope["state"]``."""

    def __init__(self, app: ASGIApp, workspace: Workspace) -> None:
        self.app = app
        self.workspace = workspace
        # token -> (user, trusted until, data version when checked)
        self._valid: dict[str, tuple[User, float, int | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        token, from_query = token_from_scope(scope)
        cached = self._valid.get(token) if token else None
        version = self.workspace.data_version.current() if cached is not None else None
        if cached is not None and (cached[2] == version if version is not None else cached[1] > time.monotonic()):
            user = cached[0]
        else:
            version = self.workspace.data_version.current()
            try:
                user = await to_thread.run_sync(self.workspace.verify_token, token)
            except AuthError as exc:
                await _unauthorized(send, str(exc))
                return
            if len(self._valid) > 256:  # only a few tokens are ever live; never let junk pile up
                self._valid.clear()
            self._valid[token or ""] = (user, time.monotonic() + TOKEN_CACHE_SECONDS, version)
        scope.setdefault("state", {})["user"] = user
        if not from_query or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append(
                    (b"set-cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict".encode("latin-1"))
                )
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_cookie)


async def _unauthorized(send: Send, message: str) -> None:
    body = json.dumps({"error": "unauthorized", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="noteloom"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
