"""Browser sign-in and sign-out: the API token traded for a session token the page keeps
in ``sessionStorage`` and sends as ``X-Noteloom-Session`` (see ``web/auth.py`` for why a
header and not a cookie).

The page's own script reads the token from its address bar (``?token=`` or ``#token=``)
or from the sign-in form, and posts it here as JSON, then drops it from the URL and
history. The trade cannot be forged from another page: a JSON body needs a CORS
preflight this app never grants, a form post is not JSON (422), and a request whose
``Origin`` is not this server is refused (403) before the token is even looked at.
And what a forged trade would yield, the session token, only comes back in the response
body, which no other origin may read.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from noteloom.app import App
from noteloom.web.api_base import ApiError, StrictModel, install_error_handlers, user_of
from noteloom.web.auth import SESSION_HEADER

_NO_STORE = {"Cache-Control": "no-store"}


class SignIn(StrictModel):
    token: str = Field(min_length=1, max_length=200, description="The API token `noteloom token` prints.")


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
    r = APIRouter(prefix="/api/v1/auth", tags=["auth"])

    @r.post("/sign-in", response_model=SessionOut, status_code=201,
            responses={401: {"description": "The token is wrong or revoked."},
                       403: {"description": "Sent from another site."}})
    async def sign_in(request: Request, body: SignIn) -> JSONResponse:
        """Trade the API token for a browser session token (revoked by sign-out and by
        `noteloom token --new`)."""
        if not _same_origin(request):
            raise ApiError(403, "forbidden", "sign in from noteloom's own page: this request came from another site")
        session, found = await to_thread.run_sync(ws.start_session, body.token)
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
        guard: Any = getattr(request.app.state, "auth", None)
        if guard is not None:
            guard.forget("session", session)
        return Response(status_code=204, headers=_NO_STORE)

    api.include_router(r)
