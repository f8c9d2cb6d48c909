"""What the ``/api/v1`` modules share: strict input models, the error shape and its
handlers, the acting user, and a note as JSON.

Errors are ``{"error": code, "message": text}`` (plus ``field`` for bad input): 404
missing (or someone else's), 409 a clash with the current state (``busy`` with
``Retry-After`` when other work holds it), 422 bad input naming the field, 503 a service
that is not running (``Retry-After`` when waiting helps). Domain errors are mapped once,
here, by :data:`HTTP_ERRORS`.

Bodies are checked before their models: Python's JSON parser takes ``NaN``,
``1e999``, integers of any size and lone surrogates, which pydantic lets through to
places that cannot hold them (:mod:`noteloom.jsonvalues`); they get a 422 naming the
field. Answers always encode: a lone surrogate goes out as U+FFFD.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Path, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException

from noteloom.errors import (
    AuthError,
    Busy,
    ConfigError,
    Conflict,
    EmbedderUnavailable,
    EmbeddingError,
    Forbidden,
    ImportExportError,
    InvalidInput,
    Locked,
    NoteloomError,
    NotFound,
    QueryError,
    SectionError,
    StorageError,
    Unavailable,
    WorkspaceError,
    WrongPassphrase,
    mapped,
)
from noteloom.jsonvalues import MAX_SAFE_INTEGER, dumps, dumps_bytes, find_problem
from noteloom.providers.errors import ProviderError
from noteloom.tools import ToolArgumentError, ToolError, UnknownTool
from noteloom.workspace import Note, User

log = logging.getLogger("noteloom.web.api")

ID_PATTERN = r"^[0-9a-f]{32}$"
IdPath = Annotated[str, Path(pattern=ID_PATTERN, description="A 32-character lowercase hex id.")]
#: Bound of counts and offsets in queries: what every JSON client holds exactly, far below
#: SQLite's 2**63 (past which binding the value fails), with room for ``offset + limit``.
MAX_COUNT = MAX_SAFE_INTEGER
#: Text in queries holds no NUL: PostgreSQL refuses it, and no title or message has one.
NO_NUL = r"^[^\x00]*$"


class StrictModel(BaseModel):
    """Request bodies: unknown fields are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    error: str
    message: str
    field: str | None = None


class NoteOut(BaseModel):
    id: str
    notebook_id: str
    title: str
    body: str
    tags: list[str]
    updated_time: int


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "Missing, or someone else's."},
    409: {"model": ErrorOut, "description": "Clashes with the current state; `busy` (with `Retry-After`): try again later."},
    422: {"model": ErrorOut, "description": "Bad input; `field` names it."},
    503: {"model": ErrorOut, "description": "A service this needs is not running here (`Retry-After` when waiting helps)."},
}


@dataclass(frozen=True)
class HttpAnswer:
    """What the API answers for one class of error."""

    status: int
    error: str


#: The one mapping of noteloom's errors to HTTP, looked up along an error's MRO. Every
#: class of the tree has its entry (a test walks the tree); a plugin's own subclass answers
#: as its nearest ancestor. ``field`` (422) and ``Retry-After`` come from the error's
#: attributes, never from its message.
HTTP_ERRORS: dict[type[BaseException], HttpAnswer] = {
    NoteloomError: HttpAnswer(400, "bad_request"),
    ConfigError: HttpAnswer(503, "misconfigured"),
    StorageError: HttpAnswer(500, "storage_error"),
    Unavailable: HttpAnswer(503, "unavailable"),
    EmbedderUnavailable: HttpAnswer(503, "unavailable"),
    WorkspaceError: HttpAnswer(400, "bad_request"),
    NotFound: HttpAnswer(404, "not_found"),
    Forbidden: HttpAnswer(403, "forbidden"),
    Conflict: HttpAnswer(409, "conflict"),
    Busy: HttpAnswer(409, "busy"),
    InvalidInput: HttpAnswer(422, "invalid_input"),
    QueryError: HttpAnswer(400, "bad_query"),
    EmbeddingError: HttpAnswer(502, "embedder_failed"),
    SectionError: HttpAnswer(400, "bad_section"),
    ImportExportError: HttpAnswer(400, "import_export_failed"),
    AuthError: HttpAnswer(401, "unauthorized"),
    # The credential is fine; sealed content waits for the user's unlock window. Not 401,
    # which would send the browser to sign in again.
    Locked: HttpAnswer(423, "locked"),
    WrongPassphrase: HttpAnswer(403, "wrong_passphrase"),
    ToolError: HttpAnswer(400, "tool_error"),
    ToolArgumentError: HttpAnswer(400, "tool_error"),
    UnknownTool: HttpAnswer(404, "not_found"),
    ProviderError: HttpAnswer(502, "provider_error"),
}


class ApiJSONResponse(JSONResponse):
    """JSON that always encodes: a lone surrogate becomes U+FFFD, a non-finite number null
    (Starlette's own raises, and the client gets a 500 for data it may not even have sent)."""

    def render(self, content: Any) -> bytes:
        return dumps_bytes(content)


async def checked_body(request: Request) -> None:
    """A router dependency: refuse, naming the field, JSON values no peer or database can hold.

    Runs after FastAPI has parsed the body (``request.json()`` is cached then), before the
    route's model sees it.
    """
    if not await request.body():
        return
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        return  # not JSON (or not a content type FastAPI parses): its own validation says so
    problem = find_problem(body, forbid_nul=True)
    if problem is not None:
        field = problem.path or "body"
        raise ApiError(422, "invalid_input", f"{field}: {problem.message}", field)


class ApiError(Exception):
    """An HTTP error with the API's error body (for what only HTTP knows: a header, a route)."""

    def __init__(self, status: int, error: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.error, self.message, self.field = status, error, message, field
        self.headers = headers or {}


def error_response(status: int, error: str, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": error, "message": message}
    if field is not None:
        body["field"] = field
    return ApiJSONResponse(body, status_code=status, headers=headers)


def from_domain(exc: NoteloomError) -> ApiError:
    """``exc`` as the API answers it (:data:`HTTP_ERRORS`)."""
    answer = mapped(HTTP_ERRORS, exc)
    if isinstance(exc, InvalidInput):
        # The body's message starts with the field it names, as FastAPI's own 422s do.
        return ApiError(answer.status, answer.error, exc.led_by_field(), exc.field)
    headers: dict[str, str] = {}
    if isinstance(exc, Unavailable | Busy) and exc.retry_after is not None and exc.retry_after > 0:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return ApiError(answer.status, answer.error, str(exc), headers=headers)


def user_of(request: Request) -> User:
    """The user whose token came with the request (the token middleware put it there)."""
    user = request.scope.get("state", {}).get("user")
    if not isinstance(user, User):
        raise ApiError(401, "unauthorized", "a token is required: send `Authorization: Bearer TOKEN`")
    return user


def note_out(note: Note) -> dict[str, Any]:
    return {"id": note.id, "notebook_id": note.notebook_id, "title": note.title, "body": note.body,
            "tags": list(note.tags), "updated_time": note.updated_time}


def _field_of(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 naming the first bad field; FastAPI's full ``detail`` list is kept as well."""
    assert isinstance(exc, RequestValidationError | ValidationError)
    errors: list[Any] = list(exc.errors())
    first: dict[str, Any] = dict(errors[0]) if errors else {"loc": (), "msg": "invalid request"}
    if first.get("type") == "json_invalid":  # its loc is ("body", character offset)
        field = "body"
        reason = (first.get("ctx") or {}).get("error", "")
        message = f"body: the request body is not valid JSON ({reason} at character {first['loc'][-1]})"
    else:
        field = _field_of(first.get("loc", ()))
        message = f"{field}: {first.get('msg', 'invalid')}"
    # The echoed inputs may hold NaN or a lone surrogate: dumps makes them plain JSON.
    detail = json.loads(dumps(errors, default=str))
    return ApiJSONResponse(
        {"error": "invalid_input", "message": message, "field": field, "detail": detail}, status_code=422
    )


_HTTP_ERRORS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type"}


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 4xx (no such route, wrong method, a body it could not read) in the
    API's error shape under /api/; elsewhere as FastAPI answers them."""
    assert isinstance(exc, HTTPException)
    if not request.url.path.startswith("/api/"):
        return await http_exception_handler(request, exc)
    field = "body" if exc.status_code == 400 and "body" in str(exc.detail) else None
    message = f"body: {exc.detail}; send one JSON object" if field else str(exc.detail)
    error = "invalid_input" if field else _HTTP_ERRORS.get(exc.status_code, "error")
    response = error_response(exc.status_code, error, message, field)
    response.headers.update(exc.headers or {})
    return response


async def _escaped_value_error(request: Request, exc: Exception) -> JSONResponse:
    """A value that got past the checks and failed below (an integer SQLite cannot bind,
    text no encoder takes): a bug of ours, logged with its stack, but bad input all the
    same, so the client hears 422 rather than a 500."""
    if not request.url.path.startswith("/api/"):
        raise exc  # pages: a plain 500, as for any other failure there
    log.error("a request value escaped validation on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        422, "invalid_input", "a value in the request is out of range or not valid Unicode; check numbers and text"
    )


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.error, exc.message, exc.field, exc.headers)


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, NoteloomError)
    answer = from_domain(exc)
    if answer.status == 500:  # the database failed: ours to look into, not the client's to fix
        log.warning("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return error_response(answer.status, answer.error, answer.message, answer.field, answer.headers)


def install_error_handlers(api: FastAPI) -> None:
    """Install the API's error handlers (once, whichever module asks first)."""
    if getattr(api.state, "api_errors_installed", False):
        return
    api.add_exception_handler(RequestValidationError, _validation_error)
    api.add_exception_handler(ValidationError, _validation_error)  # a model validated inside a route
    api.add_exception_handler(ApiError, _api_error)
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(NoteloomError, _domain_error)
    for escaped in (OverflowError, UnicodeError):
        api.add_exception_handler(escaped, _escaped_value_error)
    api.state.api_errors_installed = True
