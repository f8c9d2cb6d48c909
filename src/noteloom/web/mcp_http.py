"""MCP over Streamable HTTP: ``POST /mcp`` with one JSON-RPC message or a batch.

A scoped token (or a browser session started from one) gets only what its scopes allow:
the token middleware put them in the request's state, and :meth:`Preflight.limited`
narrows the request's settings with them.

Sessions (2025-03-26 … 2025-11-25 clients): ``initialize`` issues an ``Mcp-Session-Id``;
a request quoting it joins that session (:mod:`noteloom.mcp.session`), one quoting an id
unknown here gets 404 (the client starts a new session), and a request without one is
served statelessly as before. A POST whose handler sends anything before its answer
(progress, log messages, a server→client request such as ``elicitation/create``) is
answered as ``text/event-stream`` when its Accept allows, the answer as the last event;
one that sends nothing is still plain JSON (the choice is made when the first message
or the answer is ready). A POST holding the client's response to such a request is
handed to the request waiting for it (202). ``GET`` with a session id opens the
session's own event stream (notifications not tied to a request: tools/list_changed,
resources/updated), each event with an id; opened again with ``Last-Event-ID``, it first
sends again what followed that event (the last 256 kept), which the lost stream may not
have delivered. ``DELETE`` ends the session.

Sessions live in the process that made them. With ``serve --workers N`` each worker
listens on its own socket and the kernel spreads *connections* over them, so a client
whose later requests come on a new connection may reach another worker: it gets 404
saying that the session belongs to another server process (the id names the process),
and a client that follows the spec starts a new session there. Clients that keep one
connection (the official SDKs do) stay with their worker.

``Mcp-Method`` and ``Mcp-Name`` (2026-07-28; required there, as the SDK's inbound ladder
checks) are checked against the body whenever they are sent: a mismatch is 400.

The token middleware has already turned away requests
without a valid token (401); here a browser page from a foreign origin and a
workspace with MCP turned off get 403, and malformed HTTP gets the matching 4xx.

``POST /mcp`` is the busiest route by far, so :class:`McpFirst` hands it to its endpoint
ahead of FastAPI's stack of middlewares and routes (a fifth of a search call's time in
the server went through them); its failures are answered as that stack answers them.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import anyio
from fastapi import FastAPI
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    NAME_BEARING_METHODS,
    decode_header_value,
    find_duplicated_routing_header,
)
from mcp_types import HEADER_MISMATCH
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from noteloom.app import App
from noteloom.mcp import (
    DISABLED_MESSAGE,
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    SUPPORTED_VERSIONS,
    McpServer,
    Preflight,
    Reply,
    error_body,
    parse,
)
from noteloom.mcp.session import McpSession, SessionGone
from noteloom.workspace import User

#: Largest request body accepted (a note body of a few MB fits, a runaway upload does not).
MAX_BODY = MAX_MESSAGE_BYTES
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_ALLOW = {"allow": "POST"}
SESSION_HEADER = "mcp-session-id"
#: Seconds of quiet after which a session's stream sends a keep-alive comment.
PING_INTERVAL = 15.0
#: How often the server looks whether it is stopping (to end the sessions' streams).
EXIT_POLL = 0.5
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no")]
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
        session_id = request.headers.get(SESSION_HEADER)
        if request.method != "POST" and (session_id is None or request.method not in ("GET", "DELETE")):
            return _error(405, INVALID_REQUEST, "Method Not Allowed: send JSON-RPC with POST", headers=_ALLOW)
        pre = await server.current_preflight()
        if not pre.enabled:
            return _error(403, INVALID_REQUEST, DISABLED_MESSAGE)
        state = request.scope.get("state", {})
        user = state.get("user")
        session: McpSession | None = None
        if session_id is not None:
            try:
                session = server.sessions.get(session_id, user)
            except SessionGone as gone:
                return _session_gone(gone)
        if request.method == "DELETE":
            assert session is not None
            server.sessions.drop(session.id)
            return Response(status_code=204)
        if request.method == "GET":
            assert session is not None
            if not _accepts(request.headers.get("accept"), "text/event-stream"):
                return _error(406, INVALID_REQUEST, "Not Acceptable: the Accept header must allow text/event-stream")
            if session.streaming:
                return _error(409, INVALID_REQUEST, "Conflict: this session's event stream is already open")
            return SessionStream(session, _last_event_id(request.headers.get("last-event-id")))
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return _error(415, INVALID_REQUEST, "Unsupported Media Type: send Content-Type: application/json")
        accept = request.headers.get("accept")
        if not _accepts(accept, "application/json"):
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
        raw_headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.scope["headers"]]
        headers = dict(raw_headers)
        message, error = parse(body, "body")
        if error is not None:
            return Response(Reply(error).encode(), status_code=400, media_type="application/json")
        mismatch = _routing_mismatch(message, headers, raw_headers)
        if mismatch is not None:
            rid = message.get("id") if isinstance(message, dict) else None
            return Response(json.dumps(error_body(HEADER_MISMATCH, mismatch, rid)).encode(), status_code=400,
                            media_type="application/json")
        streams = _accepts(accept, "text/event-stream")
        if _is_listen(message) and not streams:
            return _error(406, INVALID_REQUEST, "Not Acceptable: subscriptions/listen answers with an event stream; "
                          "the Accept header must allow text/event-stream")
        new_session = session is None and _is_initialize(message)
        if new_session:
            session = server.sessions.create(user)
        # The token's scopes narrow the tools and the notebook scope of this request.
        return Answer(
            server, message, user, headers, pre.limited(state.get("token_scopes")), session,
            streams=streams, new_session=new_session,
        )

    api.add_route("/mcp", mcp_endpoint, methods=list(ROUTED), include_in_schema=False)
    api.state.mcp_endpoint = mcp_endpoint
    api.state.mcp_server = server  # the web app's lifespan runs its watchers (McpServer.running)

    async def end_streams_on_exit() -> None:
        """uvicorn waits up to its graceful timeout for open responses before it stops, and a
        session's stream never ends by itself: end them all once the server is stopping."""
        while not _server_exiting():
            await anyio.sleep(EXIT_POLL)
        server.sessions.close_all()

    server.add_watcher(end_streams_on_exit)


def _server_exiting() -> bool:
    """Whether the uvicorn server of this process has been told to stop (found as the owner
    of the SIGTERM handler it installs, as sse-starlette finds it; never in a thread's server)."""
    owner = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(owner, "should_exit", False))


def _is_listen(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "subscriptions/listen"


def _is_initialize(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message


def _session_gone(gone: SessionGone) -> Response:
    if gone.elsewhere:
        why = ("it belongs to another server process (with serve --workers, a session lives in the process "
               "that made it); initialize again to start a new session")
    else:
        why = "it has ended or expired, or never existed; initialize again to start a new session"
    return _error(404, INVALID_REQUEST, f"Not Found: no MCP session {str(gone)!r} here: {why}")


#: The tasks extension's methods, named in ``Mcp-Name`` by their task (SEP-2663: so a proxy can
#: route every request of a task to the process holding it).
TASK_METHODS_NAMED_BY = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


def _routing_mismatch(message: Any, headers: dict[str, str], raw: list[tuple[str, str]]) -> str | None:
    """Why the ``Mcp-Method``/``Mcp-Name`` headers disagree with the body, if they do
    (checked whenever they are sent; a modern request's absent headers are the
    dispatcher's to refuse, by the SDK's ladder)."""
    if MCP_METHOD_HEADER not in headers and MCP_NAME_HEADER not in headers:
        return None
    duplicated = find_duplicated_routing_header(raw)
    if duplicated is not None:
        return f"Bad Request: the {duplicated} header appears more than once"
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return "Bad Request: Mcp-Method and Mcp-Name go with a single request, not a batch or a response"
    method = message["method"]
    sent = headers.get(MCP_METHOD_HEADER)
    if sent is not None and sent != method:
        return f"Bad Request: the Mcp-Method header says {sent!r} but the body's method is {method!r}"
    key = NAME_BEARING_METHODS.get(method) or TASK_METHODS_NAMED_BY.get(method)
    params = message.get("params")
    if key is not None and MCP_NAME_HEADER in headers and isinstance(params, dict) and params.get(key) is not None:
        named = decode_header_value(headers.get(MCP_NAME_HEADER))
        if named != params[key]:
            return (f"Bad Request: the Mcp-Name header says {named!r} but the body's params.{key} is "
                    f"{params[key]!r}")
    return None


def _sse(message: Any, event_id: int | None = None) -> bytes:
    head = b"" if event_id is None else b"id: %d\r\n" % event_id
    return head + b"event: message\r\ndata: " + Reply(message).encode() + b"\r\n\r\n"


class Answer(Response):
    """The answer to one POST, decided lazily: plain JSON unless its handler sends a
    message first (then an event stream, the answer as its last event)."""

    def __init__(
        self,
        server: McpServer,
        message: Any,
        user: User | None,
        headers: dict[str, str],
        pre: Preflight,
        session: McpSession | None,
        *,
        streams: bool,
        new_session: bool,
    ) -> None:
        super().__init__()
        self.server, self.message, self.user, self.headers_in, self.pre = server, message, user, headers, pre
        self.session, self.streams, self.new_session = session, streams, new_session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        gone = False
        lock: anyio.Lock | None = None  # made by the first message sent before the answer
        session = self.session
        extra = [(SESSION_HEADER.encode(), session.id.encode())] if session is not None and self.new_session else []

        running = anyio.CancelScope()

        async def emit(message: dict[str, Any]) -> None:
            nonlocal started, gone, lock
            if lock is None:
                lock = anyio.Lock()
            async with lock:
                if gone:
                    return
                try:
                    if not started:
                        await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *extra]})
                        started = True
                    await send({"type": "http.response.body", "body": _sse(message), "more_body": True})
                except OSError:
                    gone = True  # the client left: nobody will read the answer
                    running.cancel()

        async def answer() -> Reply:
            return await self.server.handle(
                self.message, self.user, headers=self.headers_in, preflight=self.pre, session=session,
                emit=emit if self.streams else None,
            )

        replies: list[Reply] = []
        with running:
            if _is_listen(self.message):
                # A listen stream only ever ends by the client leaving: watch for that.
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_until_disconnect, receive, running)
                    replies.append(await answer())
                    tg.cancel_scope.cancel()
            else:
                replies.append(await answer())
        if not replies:
            return  # cancelled: the client has gone
        reply = replies[0]
        if self.new_session and session is not None and not _succeeded(reply):
            self.server.sessions.drop(session.id)
            extra = []
        # The handler has returned, so nothing emits any more: no lock needed from here on.
        was_gone, gone = gone, True  # a stray late emit is dropped, not sent after the answer
        if started:
            if not was_gone:
                last = _sse(reply.body) if reply.body is not None else b""
                await send({"type": "http.response.body", "body": last, "more_body": False})
            return
        if reply.body is None:
            response = Response(status_code=202)
        else:
            response = Response(reply.encode(), status_code=_status(reply), media_type="application/json")
        response.raw_headers.extend(extra)
        await response(scope, receive, send)


def _succeeded(reply: Reply) -> bool:
    return isinstance(reply.body, dict) and "result" in reply.body


def _status(reply: Reply) -> int:
    if reply.rejected:
        return 400
    body = reply.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("code") == HEADER_MISMATCH:
        return 400
    return 200


class SessionStream(Response):
    """A session's own event stream (``GET /mcp``): its notifications until the client
    leaves or the session ends."""

    def __init__(self, session: McpSession, last_event_id: int | None = None) -> None:
        super().__init__()
        self.session = session
        self.last_event_id = last_event_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = self.session
        session.streaming = True
        if self.last_event_id is not None:  # a stream opened again: what may have been lost comes first
            session.outbox.resume_after(self.last_event_id)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            await send({"type": "http.response.body", "body": b": stream open\r\n\r\n", "more_body": True})
            async with anyio.create_task_group() as tg:
                tg.start_soon(_until_disconnect, receive, tg.cancel_scope)
                while True:
                    with anyio.move_on_after(PING_INTERVAL):
                        item = await session.outbox.get()
                        if item is None:
                            break  # the session ended
                        await send({"type": "http.response.body", "body": _sse(item[1], item[0]), "more_body": True})
                        continue
                    # Quiet for a while: a comment keeps proxies from timing the stream out.
                    await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                    session.touch()
                tg.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client left
        finally:
            session.streaming = False
            session.touch()


def _last_event_id(value: str | None) -> int | None:
    """The event id a client quotes to resume its session's stream (ours are whole numbers;
    anything else resumes nothing)."""
    if value is None or not value.strip().isdigit() or len(value.strip()) > 18:
        return None
    return int(value.strip())


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()



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


def _accepts(accept: str | None, wanted: str) -> bool:
    """Whether an Accept header allows the media type ``wanted``."""
    if accept is None:
        return True  # no Accept header means anything goes
    family = wanted.split("/", 1)[0] + "/*"
    for item in accept.split(","):
        media, _, rest = item.partition(";")
        media = media.strip().lower()
        if media in (wanted, family, "*/*") and not _q_zero(rest):
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

