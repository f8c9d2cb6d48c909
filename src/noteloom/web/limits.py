"""A cap on request bodies, for every route: ``413 Payload Too Large`` before reading.

A pure ASGI middleware, outermost, so no route (nor FastAPI's body parsing, which reads
a body whole before validating it: 100 MB cost 500 MB of memory to get a 422) sees more
than ``max_bytes``. A declared ``Content-Length`` over the cap is answered at once,
without reading a byte of the body; a chunked body is counted as the app reads it and
cut off when it passes the cap. Either way the connection is closed after the 413, as
the rest of the body will not be read.

A route that takes file uploads may allow a larger ``multipart/form-data`` body
(``uploads``: path -> bytes; the chat's send route allows its files at their caps, a
note's attachment route its ``[attachments] max_mb``); a path may hold ``{id}`` for an
id segment. A body of any other type to that path keeps the common cap.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)


def allow_uploads(api: Any, path: str, max_bytes: int) -> None:
    """Let multipart bodies to ``path`` (``{id}`` for an id segment) be up to ``max_bytes``:
    the app's body limit reads ``api.state.upload_limits`` when it is made."""
    allowed: dict[str, int] = getattr(api.state, "upload_limits", None) or {}
    allowed[path] = max_bytes
    api.state.upload_limits = allowed


def _too_large_body(max_bytes: int, upload: bool = False) -> bytes:
    setting = "its files' caps ([attachments] in noteloom.toml)" if upload else "[server] max_body_bytes in noteloom.toml"
    message = (
        f"the request body is larger than {max_bytes} bytes, this server's limit ({setting}); send a smaller body"
    )
    return json.dumps({"error": "payload_too_large", "message": message}).encode()


class BodyLimit:
    """Answers 413 to a request whose body is larger than ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int, uploads: Mapping[str, int] | None = None) -> None:
        self.app, self.max_bytes = app, max_bytes
        self.uploads = {path: cap for path, cap in (uploads or {}).items() if "{id}" not in path}
        self.patterns = [(re.compile(re.escape(path).replace(r"\{id\}", "[0-9a-f]{32}") + "$"), cap)
                         for path, cap in (uploads or {}).items() if "{id}" in path]
        self._body = _too_large_body(max_bytes)

    def upload_cap(self, path: str) -> int | None:
        """The larger multipart body ``path`` allows, if it takes uploads."""
        found = self.uploads.get(path)
        if found is None:
            found = next((cap for pattern, cap in self.patterns if pattern.match(path)), None)
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, body = self.max_bytes, self._body
        allowed = self.upload_cap(scope.get("path", ""))
        if allowed is not None and _is_multipart(scope):
            limit, body = max(allowed, self.max_bytes), _too_large_body(max(allowed, self.max_bytes), True)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(send, body)
            return

        received = 0
        cut = False  # the body passed the cap: the app hears a disconnect, its answer is dropped
        started = False

        async def capped_receive() -> Message:
            nonlocal received, cut
            if cut:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    if not started:
                        await self._refuse(send, body)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if cut:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, capped_receive, guarded_send)
        except Exception:
            if not cut:
                raise
            # The app failed on the body we cut short (a ClientDisconnect, most often):
            # a consequence of the 413 it was not allowed to answer, not a bug.
            log.debug("a request cut off at %d bytes ended the app with an error", limit, exc_info=True)

    async def _refuse(self, send: Send, body: bytes) -> None:
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        })
        await send({"type": "http.response.body", "body": body})


def _is_multipart(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-type":
            return bool(value.lower().startswith(b"multipart/form-data"))
    return False


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            # The HTTP layer (h11) has checked it is one whole number.
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None
