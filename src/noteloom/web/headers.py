"""Headers every response carries: a strict Content-Security-Policy on HTML, no referrer,
no content sniffing.

The policy allows only this origin's own files: no inline script (every page's script is
a static file), no remote origin, no plugins, no framing, no ``<base>``. Two allowances:

- ``style-src 'unsafe-inline'``: the editor (CodeMirror inserts ``<style>`` elements at run
  time) and Swagger UI style themselves inline. Styles cannot run script, and note HTML
  cannot carry styles at all (the sanitiser keeps no ``style`` attribute or element).
- ``img-src blob: data:``: attachments are fetched with the page's credential and shown
  as ``blob:`` URLs (an ``<img src>`` cannot send a header); Swagger UI draws its icons
  from ``data:`` URLs. Images from other sites stay blocked: a note cannot phone home.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
ALWAYS = [(b"referrer-policy", b"no-referrer"), (b"x-content-type-options", b"nosniff")]
#: Earlier versions kept the API token in this cookie, which every server on the same host
#: received. A browser that still holds it is told to drop it.
OLD_COOKIE = "noteloom_token"
_EXPIRE_OLD_COOKIE = (b"set-cookie", f"{OLD_COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict".encode())


class SecurityHeaders:
    """Adds the headers above to every HTTP response (the CSP to HTML ones)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        old_cookie = any(
            k.lower() == b"cookie" and OLD_COOKIE.encode() in v for k, v in scope.get("headers", [])
        )

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(ALWAYS)]
                headers += ALWAYS
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if ctype.lower().startswith(b"text/html"):
                    headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
                if old_cookie:
                    headers.append(_EXPIRE_OLD_COOKIE)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
