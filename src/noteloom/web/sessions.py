"""Browser sign-in and sign-out: a person's name and password, or the API token, traded for a
session token the page keeps in ``sessionStorage`` and sends as ``X-Noteloom-Session`` (see
``web/auth.py`` for why a header and not a cookie).

People sign in with their name and password (``noteloom users password`` sets one). The
owner's first sign-in is the link ``noteloom serve`` prints: the page's own script reads
the token from its address bar (``?token=`` or ``#token=``) or from the sign-in form, and
posts it here as JSON, then drops it from the URL and history. The trade cannot be forged
from another page: a JSON body needs a CORS preflight this app never grants, a form post
is not JSON (422), and a request whose ``Origin`` is not this server is refused (403)
before the credential is even looked at. And what a forged trade would yield, the session
token, only comes back in the response body, which no other origin may read.

Password guessing is slowed here: after :data:`PER_NAME` failed attempts for one name, or
:data:`PER_CLIENT` from one client address, within :data:`WINDOW_SECONDS`, that name (or
client) gets ``429`` with ``Retry-After`` until the oldest of those failures is that old;
the password is not even checked meanwhile. The count lives in this process (each
``serve --workers`` process keeps its own), and the Argon2id checks run at most
:data:`HASHING_AT_ONCE` at a time, as each takes tens of megabytes of memory.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, model_validator

from noteloom.app import App
from noteloom.errors import AuthError
from noteloom.people import NAME_MAX, PASSWORD_MAX
from noteloom.vault import Vault
from noteloom.web.api_base import ApiError, StrictModel, install_error_handlers, user_of
from noteloom.web.auth import SESSION_HEADER

_NO_STORE = {"Cache-Control": "no-store"}

#: Failed password attempts allowed for one name, and from one client address, per window.
PER_NAME = 5
PER_CLIENT = 20
WINDOW_SECONDS = 15 * 60.0
#: Names and clients remembered at most; past it the oldest are forgotten (the per-client
#: count still holds someone who sprays names to push a name's count out).
MAX_KEYS = 10_000
#: Password hashes checked at once (libsodium's interactive Argon2id takes 64 MiB each).
HASHING_AT_ONCE = 2


class PasswordAttempts:
    """Failed password attempts per name and per client, in this process, with a lockout
    window; ``clock`` (seconds, monotonic) is injectable so tests never wait."""

    def __init__(self, *, per_name: int = PER_NAME, per_client: int = PER_CLIENT,
                 window: float = WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_name, self.per_client, self.window, self.clock = per_name, per_client, window, clock
        self._failures: dict[tuple[str, str], deque[float]] = {}

    @staticmethod
    def _keys(name: str, client: str) -> tuple[tuple[str, str], tuple[str, str]]:
        return ("name", name.strip().casefold()), ("client", client)

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def wait(self, name: str, client: str) -> float | None:
        """Seconds until ``name`` from ``client`` may try again, or ``None``: it may now."""
        now = self.clock()
        waits = [
            times[0] + self.window - now
            for key, limit in zip(self._keys(name, client), (self.per_name, self.per_client), strict=True)
            if len(times := self._recent(key, now)) >= limit
        ]
        return max(waits) if waits else None

    def failed(self, name: str, client: str) -> None:
        now = self.clock()
        for key in self._keys(name, client):
            self._recent(key, now)
            self._failures.setdefault(key, deque()).append(now)
            self._failures[key] = self._failures.pop(key)  # most recent last, for the cap below
        while len(self._failures) > MAX_KEYS:
            del self._failures[next(iter(self._failures))]

    def succeeded(self, name: str) -> None:
        """A right password clears the name's count (not the client's: one's own account
        must not reset a guesser's count)."""
        self._failures.pop(self._keys(name, "")[0], None)


def password_attempts(api: FastAPI) -> PasswordAttempts:
    """The one counter of this web app (sign-in and password changes share it)."""
    attempts = getattr(api.state, "password_attempts", None)
    if not isinstance(attempts, PasswordAttempts):
        attempts = api.state.password_attempts = PasswordAttempts()
    return attempts


def hashing(api: FastAPI) -> anyio.CapacityLimiter:
    """The threads password hashes are checked on (made on first use, inside the event loop)."""
    limiter = getattr(api.state, "password_hashing", None)
    if not isinstance(limiter, anyio.CapacityLimiter):
        limiter = api.state.password_hashing = anyio.CapacityLimiter(HASHING_AT_ONCE)
    return limiter


def client_of(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def too_many(wait: float) -> ApiError:
    minutes = max(1, math.ceil(wait / 60))
    return ApiError(429, "too_many_attempts",
                    f"too many wrong passwords for this name or from this address: try again in {minutes} "
                    f"minute{'' if minutes == 1 else 's'}", headers={"Retry-After": str(max(1, math.ceil(wait)))})


class SignIn(StrictModel):
    """Either ``name`` and ``password``, or ``token``."""

    name: str | None = Field(None, min_length=1, max_length=NAME_MAX, description="Your name in this workspace.")
    password: str | None = Field(None, min_length=1, max_length=PASSWORD_MAX,
                                 description="Your password (`noteloom users password NAME` sets it).")
    token: str | None = Field(None, min_length=1, max_length=200, description="The API token `noteloom token` prints.")

    @model_validator(mode="after")
    def _one_way(self) -> SignIn:
        by_password = self.name is not None or self.password is not None
        if self.token is not None and by_password:
            raise ValueError("send either a token, or a name and a password, not both")
        if self.token is None and (self.name is None or self.password is None):
            raise ValueError("send a name and a password (or the token `noteloom token` prints)")
        return self


class SessionOut(BaseModel):
    session: str = Field(description=f"Send it as `{SESSION_HEADER}` on every request.")
    valid_until: int = Field(description="When it ends unless used again (ms since the epoch); "
                                         "it is good for 12 hours after its last use, 7 days at most.")


def _same_origin(request: Request) -> bool:
    """No ``Origin`` (not a browser, or a same-origin GET) or one naming this very server."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.netloc.lower() == request.headers.get("host", "").lower()


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/auth/sign-in`` and ``/api/v1/auth/sign-out``."""
    install_error_handlers(api)
    ws = app.workspace
    attempts = password_attempts(api)
    r = APIRouter(prefix="/api/v1/auth", tags=["auth"])

    @r.post("/sign-in", response_model=SessionOut, status_code=201,
            responses={401: {"description": "The name or password, or the token, is wrong (or revoked)."},
                       403: {"description": "Sent from another site."},
                       429: {"description": "Too many wrong passwords for the name or from the address: "
                                            "wait `Retry-After` seconds."}})
    async def sign_in(request: Request, body: SignIn) -> JSONResponse:
        """Sign in with a name and password, or trade the API token, for a browser session
        token (ended by sign-out, a new password, or, for a token's, `noteloom token --new`)."""
        if not _same_origin(request):
            raise ApiError(403, "forbidden", "sign in from noteloom's own page: this request came from another site")
        if body.token is not None:
            session, found = await to_thread.run_sync(ws.start_session, body.token)
        else:
            assert body.name is not None and body.password is not None
            name, password, client = body.name, body.password, client_of(request)
            wait = attempts.wait(name, client)
            if wait is not None:
                raise too_many(wait)
            try:
                session, found = await to_thread.run_sync(ws.start_password_session, name, password,
                                                          limiter=hashing(api))
            except AuthError:
                attempts.failed(name, client)
                raise
            attempts.succeeded(name)
        return JSONResponse({"session": session, "valid_until": found.valid_until}, status_code=201,
                            headers=_NO_STORE)

    @r.post("/sign-out", status_code=204, response_class=Response)
    async def sign_out(request: Request) -> Response:
        """End the browser session this request carries."""
        user_of(request)
        session = request.headers.get(SESSION_HEADER, "").strip()
        if not session:
            raise ApiError(422, "invalid_input", f"sign-out ends a browser session: send it as `{SESSION_HEADER}`",
                           SESSION_HEADER)
        await to_thread.run_sync(ws.end_session, session)
        # The vault's window this session opened closes with it (noteloom.vault).
        await to_thread.run_sync(Vault(app.engine).close_window, session)
        guard: Any = getattr(request.app.state, "auth", None)
        if guard is not None:
            guard.forget("session", session)
        return Response(status_code=204, headers=_NO_STORE)

    api.include_router(r)
