"""Who is asking: a header credential on every route that holds data or changes anything.

A pure ASGI middleware (streaming responses and cancellation pass straight through).
Two credentials, both headers, never a cookie and never the query string:

- ``Authorization: Bearer nl_…``: the API token (scripts, MCP clients, the CLI);
- ``X-Noteloom-Session: nls_…``: a browser session (``web/sessions.py``), which the pages
  keep in ``sessionStorage`` — scoped to scheme, host *and port*. A cookie is scoped by host
  only: every other server on ``localhost`` would receive it, and a form that page posts
  here would carry it. A header is sent only by our own script, so no other page can forge
  a request that carries it, and a cross-origin page that tries to add it needs a CORS
  preflight this app never grants.

A token in a URL ends up in logs, history and ``Referer``, so ``?token=`` authenticates
nothing: only the page's script reads it from the address bar, to sign in (then drops it).

What needs no credential holds no private data: the health check, the static files (ours
and plugins', ``/plugins/NAME/static/…``), the HTML shells (the pages fetch what they show
from ``/api/v1``), and the sign-in route, which checks the token it is given.

A scoped token (``accounts.TokenScopes``), and a browser session started from one, is
held to its scopes here, failing closed (a 403 that says why):

- ``/mcp`` enforces every scope per tool (``mcp.py``);
- a tool allowlist is honoured by ``/mcp`` only: the API's routes are not tools, and no
  route answers for exactly one tool, so such a credential is refused everywhere else;
- a read-only credential may only read (``GET``/``HEAD`` and the note preview);
- a notebook scope is honoured by the routes that keep to it (:data:`NOTEBOOK_ROUTES`):
  the notes, notebooks and attachments filter by it (``web/access.py``: the person's access
  narrowed by the token's notebooks), and sign-out, who one is (``/api/v1/me``), the index
  status, tool policies and the person's memories hold nothing of a notebook. Every other
  route is refused to it, and so is a route added later until it is listed there: the
  chat's turns and the recipes' runs call tools over every notebook of the person,
  notifications carry what the runs read, and managing people, shares or one's password
  would reach past the token's notebooks.

Who is asking, and what they may see, is for the routes to apply: every route acts as the
person (``web/access.py``). An expired token is a 401 like an unknown one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from anyio import to_thread

from noteloom.accounts import SESSION_TOUCH_MS, TokenScopes
from noteloom.db import now_ms
from noteloom.errors import AuthError
from noteloom.workspace import User, Workspace

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = "x-noteloom-session"
#: Routes that answer without a credential. Each is either data-free (a shell, a static
#: file, the health check) or checks a credential of its own (sign-in takes the token in
#: its JSON body). Anything not listed here needs a credential, so a new route is private
#: until someone decides otherwise.
PUBLIC_PATHS = frozenset({"/health", "/", "/chat", "/recipes", "/memory", "/search", "/api/docs",
                          "/api/v1/auth/sign-in"})
# The shells of a note, a notebook, a chat, a recipe and a recipe's run (and /runs/ID, which redirects
# there): exactly an id, so no other route under them slips in.
# A plugin's static files (web/plugin_routes.py answers that prefix for every plugin with
# routes, before the plugin's own routes can).
_PUBLIC_PATTERN = re.compile(
    r"^/static/.+$|^/(?:notes|notebooks|chat|recipes|recipes/runs|runs)/[0-9a-f]{32}$|^/plugins/[A-Za-z0-9][A-Za-z0-9_-]{0,63}/static/.+$"
)
#: How long a credential found valid is trusted without asking the database again, where the
#: database cannot say cheaply whether anything changed (PostgreSQL). Checking costs a query
#: and a thread hop on every request (a third of a small MCP call); the price is that a
#: token revoked by another process keeps working here for up to this long. On SQLite a
#: credential is trusted only until anyone commits anything, so a revocation holds at once.
TOKEN_CACHE_SECONDS = 5.0


#: OAuth's endpoints and metadata (web/oauth.py; absent unless OAuth is on). Each checks what
#: it is given itself: a client's credentials, a code, a PKCE verifier.
OAUTH_PATHS = frozenset({
    "/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp", "/oauth/authorize", "/oauth/token", "/oauth/register",
    "/oauth/revoke", "/oauth/consent",
})


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path in OAUTH_PATHS or _PUBLIC_PATTERN.match(path) is not None


#: Where a scoped credential goes with its scopes enforced per tool.
MCP_PATH = "/mcp"
#: Routes any live credential may use whatever its scopes: ending one's own browser session.
ALWAYS_ALLOWED = frozenset({"/api/v1/auth/sign-out"})
READ_METHODS = frozenset({"GET", "HEAD"})
#: Routes that are POSTed but only read (rendering a preview changes nothing).
READ_POSTS = frozenset({"/api/v1/notes/preview", "/api/v1/links/resolve"})


_ID = r"[0-9a-f]{32}"
#: The routes a notebook-scoped credential may use: each keeps to the token's notebooks (or
#: holds nothing of any notebook). A route not listed is refused to it (fail closed).
NOTEBOOK_ROUTES = re.compile(
    rf"^/api/v1/(?:notes|notes/preview|notes/{_ID}|notes/{_ID}/rendered|notes/{_ID}/revisions"
    rf"|notes/{_ID}/backlinks|notes/{_ID}/tasks|links/resolve"
    rf"|browse/(?:tree|notes|titles|search)|notes/{_ID}/move"
    rf"|notes/{_ID}/revisions/{_ID}/restore|notes/{_ID}/revisions/{_ID}|notes/{_ID}/restore|notes/{_ID}/attachments"
    rf"|notebooks|index/status|tools/[^/]+/policy|memory(?:/[^/]+)?"
    rf"|me|openapi\.json)$|^/attachments/[^/]+$"
)


def scope_refusal(scopes: TokenScopes, method: str, path: str) -> str | None:
    """Why a credential with ``scopes`` may not make this request here, or ``None``."""
    if scopes.unrestricted or path == MCP_PATH or path in ALWAYS_ALLOWED:
        return None
    if scopes.tools is not None:
        return ("this token is limited to some tools, which only MCP (/mcp) can honour: the API's routes "
                "are not tools. Use it there, or make a token without --tools for the API and the web app")
    if scopes.read_only and method.upper() not in READ_METHODS and path not in READ_POSTS:
        return "this token is read-only: it cannot change anything (make one without --read-only to write)"
    if scopes.notebooks and NOTEBOOK_ROUTES.match(path) is None:
        return (f"this token is limited to some notebooks, and {path} does not keep to them (the chat, recipes "
                "and notifications reach every notebook of yours): use it for notes (/api/v1/notes) and MCP "
                "(/mcp), or make a token without --scope for the rest of the web app")
    return None


def credential_from_scope(scope: Scope) -> tuple[str, str | None]:
    """``("token" | "session", value)`` as presented; ``value`` is ``None`` when neither came."""
    session: str | None = None
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name == "authorization":
            text = value.decode("latin-1")
            if text.lower().startswith("bearer "):
                return "token", text[7:].strip()
        elif name == SESSION_HEADER:
            session = value.decode("latin-1").strip()
    return ("session", session) if session else ("token", None)


class TokenAuth:
    """Rejects requests without a valid credential with 401; puts the user in ``scope["state"]``."""

    def __init__(self, app: ASGIApp, workspace: Workspace,
                 challenge: Callable[[dict[str, str]], str | None] | None = None) -> None:
        self.app = app
        self.workspace = workspace
        #: With OAuth on: the ``WWW-Authenticate`` value a 401 of /mcp carries, pointing a client
        #: at the protected-resource metadata (from the request's headers).
        self.challenge = challenge
        # (kind, credential) -> (user, trusted until, data version when checked,
        #                        session: valid until and when checked, in ms,
        #                        the token's scopes and expiry)
        self._valid: dict[
            tuple[str, str],
            tuple[User, float, int | None, tuple[int, int] | None, tuple[TokenScopes, int | None]],
        ] = {}

    def forget(self, kind: str, credential: str) -> None:
        """Stop trusting a credential this process has cached (sign-out)."""
        self._valid.pop((kind, credential), None)

    def _cached(self, key: tuple[str, str]) -> tuple[User, TokenScopes] | None:
        hit = self._valid.get(key)
        if hit is None:
            return None
        user, until, version, session, (scopes, expires) = hit
        if expires is not None and now_ms() >= expires:
            return None  # an expired token is asked about again (and refused), commit or not
        if session is not None:
            now = now_ms()
            # A session is checked again now and then even when nothing changed, so the
            # database sees that it is in use and its idle deadline moves on.
            if now >= session[0] or now - session[1] >= SESSION_TOUCH_MS:
                return None
        current = self.workspace.data_version.current()
        fresh = version == current if current is not None else until > time.monotonic()
        return (user, scopes) if fresh else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        kind, credential = credential_from_scope(scope)
        key = (kind, credential or "")
        hit = self._cached(key) if credential else None
        if hit is None:
            version = self.workspace.data_version.current()
            expires: int | None
            try:
                if kind == "session":
                    found = await to_thread.run_sync(self.workspace.verify_session, credential)
                    user, scopes, expires = found.user, found.scopes, None
                    session: tuple[int, int] | None = (found.valid_until, now_ms())
                else:
                    grant = await to_thread.run_sync(self.workspace.check_token, credential)
                    user, scopes, expires, session = grant.user, grant.scopes, grant.expires_time, None
            except AuthError as exc:
                await _unauthorized(send, str(exc), self._challenge(scope))
                return
            if len(self._valid) > 256:  # only a few credentials are ever live; never let junk pile up
                self._valid.clear()
            self._valid[key] = (user, time.monotonic() + TOKEN_CACHE_SECONDS, version, session, (scopes, expires))
        else:
            user, scopes = hit
        refusal = scope_refusal(scopes, scope.get("method", "GET"), scope["path"])
        if refusal is not None:
            await _refused(send, refusal)
            return
        state = scope.setdefault("state", {})
        state["user"] = user
        state["token_scopes"] = scopes
        await self.app(scope, receive, send)


    def _challenge(self, scope: Scope) -> str | None:
        if self.challenge is None or scope["path"] != MCP_PATH:
            return None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        return self.challenge(headers)


async def _refused(send: Send, message: str) -> None:
    """403: the credential is good, its scopes do not reach this request."""
    body = json.dumps({"error": "forbidden", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _unauthorized(send: Send, message: str, challenge: str | None = None) -> None:
    body = json.dumps({"error": "unauthorized", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", (challenge or 'Bearer realm="noteloom"').encode("latin-1")),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
