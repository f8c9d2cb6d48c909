"""MCP sessions: what the server knows about one client connection, and how it talks back.

One :class:`McpSession` per connection: stdio's one connection, an HTTP client's
``Mcp-Session-Id`` (issued at ``initialize``), a 2026-07-28 ``subscriptions/listen``
stream. It holds what the client negotiated (version, capabilities), its log level and
the resource URIs it subscribed to, and carries messages the server starts:
:meth:`McpSession.notify` (a notification on the session's own stream: HTTP's ``GET``
stream, stdio's stdout) and :meth:`McpSession.request` (a server→client request such as
``elicitation/create``, answered by a JSON-RPC response the transport hands to
:meth:`McpSession.deliver`).

A request in progress talks to its client through a :class:`RequestChannel`: the
``ctx.client`` of the tools it runs (:class:`ClientChannel`), whose messages travel with
that request (HTTP: on the POST's event stream; stdio: on stdout) and carry its
progress token. Outside MCP ``ctx.client`` is ``None``.

Sessions live in the process that made them (:class:`Sessions`); nothing about them is
stored. Each person has at most :data:`MAX_SESSIONS_PER_USER` (the least recently used
one goes first), and one idle for :data:`IDLE_SECONDS` is dropped.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from noteloom.tools import ClientRequestFailed, ClientUnavailable
from noteloom.workspace import User

#: The levels of ``logging/setLevel`` and ``notifications/message``, least severe first (RFC 5424).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: What a session is sent before the client sets a level.
DEFAULT_LOG_LEVEL = "info"
MAX_SESSIONS_PER_USER = 32
#: A session nobody has used for this long (and with no stream open) is forgotten.
IDLE_SECONDS = 60 * 60
#: How long a server→client request waits for its answer (a person may be answering it).
REQUEST_TIMEOUT = 10 * 60
#: Notifications kept for a session whose stream is not open (the oldest go first).
OUTBOX_SIZE = 256
#: JSON-RPC's "request cancelled" (MCP uses it for a server→client request the session dropped).
REQUEST_CANCELLED = -32800

#: Sends one JSON-RPC message to the client.
Send = Callable[[dict[str, Any]], Awaitable[None]]


def level_allows(threshold: str, level: str) -> bool:
    """Whether a message at ``level`` passes a session set to ``threshold``."""
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)


class Outbox:
    """Messages waiting for a session's stream (HTTP ``GET``), at most :data:`OUTBOX_SIZE`.

    Each message gets the next event id of the session (``id:`` on the stream). The last
    :data:`OUTBOX_SIZE` messages handed to a stream are kept, so that a client that lost its
    stream and opens it again with ``Last-Event-ID`` gets again what it may not have received
    (:meth:`resume_after`)."""

    def __init__(self) -> None:
        self._items: deque[tuple[int, dict[str, Any]]] = deque(maxlen=OUTBOX_SIZE)
        self._sent: deque[tuple[int, dict[str, Any]]] = deque(maxlen=OUTBOX_SIZE)
        self._ids = itertools.count(1)
        self._ready = anyio.Event()
        self.closed = False

    async def put(self, message: dict[str, Any]) -> None:
        self._items.append((next(self._ids), message))
        self._ready.set()

    async def get(self) -> tuple[int, dict[str, Any]] | None:
        """The next message and its event id, waiting for one; ``None`` once the outbox is closed."""
        while not self._items:
            if self.closed:
                return None
            await self._ready.wait()
            self._ready = anyio.Event()
        item = self._items.popleft()
        self._sent.append(item)
        return item

    def resume_after(self, last_id: int) -> None:
        """Queue again, ahead of the rest, the messages sent after event ``last_id`` (of those
        still kept: the stream was lost, and they may have been lost with it)."""
        again = [item for item in self._sent if item[0] > last_id]
        self._sent = deque((item for item in self._sent if item[0] <= last_id), maxlen=OUTBOX_SIZE)
        self._items = deque([*again, *self._items], maxlen=OUTBOX_SIZE)
        if again:
            self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()


@dataclass
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | None = None


_counter = itertools.count(1)


class McpSession:
    """One client connection's state and its way back to the client (see the module's doc)."""

    def __init__(self, user: User | None, send: Send | None = None, *, session_id: str | None = None) -> None:
        #: The id the client quotes (HTTP's ``Mcp-Session-Id``); it names this process (see
        #: :meth:`Sessions.owner_pid`) so a request that reaches another worker can say so.
        self.id = session_id or f"{os.getpid():x}.{secrets.token_urlsafe(24)}"
        self.user = user
        self.version: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] = {}
        self.log_level = DEFAULT_LOG_LEVEL
        self.subscriptions: set[str] = set()
        #: Requests of this session running now, by id (``notifications/cancelled`` ends one).
        self.running: dict[Any, anyio.CancelScope] = {}
        self.last_used = time.monotonic()
        self.closed = False
        self.outbox = Outbox()
        #: Where notifications not tied to a request go: ``send`` (stdio) or the outbox
        #: that an HTTP ``GET`` stream drains.
        self._send = send
        self._pending: dict[str, _Pending] = {}
        #: Whether an HTTP ``GET`` stream is open now (one at a time).
        self.streaming = False

    # -- what the client negotiated ---------------------------------------------------------

    def initialized(self, version: str, params: dict[str, Any]) -> None:
        """Record what ``initialize`` said (its ``capabilities`` and ``clientInfo``)."""
        self.version = version
        caps = params.get("capabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}

    def supports(self, capability: str) -> bool:
        return isinstance(self.client_capabilities.get(capability), dict)

    @property
    def modern(self) -> bool:
        """Whether the client speaks 2026-07-28, whose change notifications ride only
        ``subscriptions/listen`` streams (:class:`ListenSession`), never the connection."""
        return self.version in MODERN_PROTOCOL_VERSIONS

    def touch(self) -> None:
        self.last_used = time.monotonic()

    # -- subscriptions (resources/subscribe) ------------------------------------------------

    def subscribe(self, uri: str) -> None:
        self.subscriptions.add(uri)

    def unsubscribe(self, uri: str) -> None:
        self.subscriptions.discard(uri)

    # -- messages to the client -------------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any] | None = None, *, via: Send | None = None) -> None:
        """Send a notification: on ``via`` (a request's own stream) or the session's stream."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message, via=via)

    async def send(self, message: dict[str, Any], *, via: Send | None = None) -> None:
        if self.closed:
            return
        if via is not None:
            await via(message)
        elif self._send is not None:
            await self._send(message)
        else:
            await self.outbox.put(message)

    async def log(self, level: str, data: Any, logger: str | None = None, *, via: Send | None = None) -> None:
        """A ``notifications/message`` when ``level`` passes this session's level."""
        if level not in LOG_LEVELS or not level_allows(self.log_level, level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify("notifications/message", params, via=via)

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, via: Send | None = None,
        timeout: float = REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        """Send a request to the client and wait for its result (:class:`ClientRequestFailed`
        for an error answer, no answer within ``timeout`` or a session that ends first)."""
        rid = f"noteloom-{next(_counter)}"
        pending = self._pending[rid] = _Pending()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send(message, via=via)
            with anyio.move_on_after(timeout):
                await pending.done.wait()
        finally:
            del self._pending[rid]
        answer = pending.answer
        if answer is None:
            raise ClientRequestFailed(f"the client did not answer {method} within {timeout:g} seconds")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            code = error.get("code")
            raise ClientRequestFailed(
                f"the client refused {method}: {error.get('message', 'no reason given')}",
                code if isinstance(code, int) else None,
            )
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def deliver(self, message: dict[str, Any]) -> bool:
        """Hand a response from the client to the request waiting for it; whether one was."""
        rid = message.get("id")
        pending = self._pending.get(rid) if isinstance(rid, str) else None
        if pending is None or pending.done.is_set():
            return False
        pending.answer = message
        pending.done.set()
        return True

    def cancel(self, request_id: Any) -> bool:
        """Cancel a running request of this session (``notifications/cancelled``)."""
        scope = self.running.get(request_id) if isinstance(request_id, str | int) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    def close(self) -> None:
        """End the session: waiting server→client requests fail, running requests stop."""
        self.closed = True
        for pending in self._pending.values():
            pending.answer = {"error": {"code": REQUEST_CANCELLED, "message": "the session ended"}}
            pending.done.set()
        for scope in self.running.values():
            scope.cancel()
        self.outbox.close()


#: The notifications a 2026-07-28 listen stream carries (nothing else rides it).
LISTEN_METHODS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
    "notifications/resources/updated": "resourceSubscriptions",
}
#: Where every frame of a listen stream names its subscription (the listen request's id).
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"


class ListenSession(McpSession):
    """A 2026-07-28 ``subscriptions/listen`` stream as a session: it carries only the kinds
    of change its filter asked for (``honored``: the filter's wire form), each stamped with
    the subscription id, in its outbox for the listen request to send. Its subscribed URIs
    are the filter's ``resourceSubscriptions``."""

    def __init__(self, user: User | None, subscription_id: str | int, honored: dict[str, Any]) -> None:
        super().__init__(user, session_id=f"listen:{subscription_id}")
        self.subscription_id = subscription_id
        self.honored = honored
        uris = honored.get("resourceSubscriptions")
        self.subscriptions = {u for u in uris if isinstance(u, str)} if isinstance(uris, list) else set()

    async def send(self, message: dict[str, Any], *, via: Send | None = None) -> None:
        key = LISTEN_METHODS.get(str(message.get("method")))
        if key is None or not self.honored.get(key) or "id" in message:
            return
        if key == "resourceSubscriptions":
            params = message.get("params")
            if not isinstance(params, dict) or params.get("uri") not in self.subscriptions:
                return
        params = dict(message.get("params") or {})
        params["_meta"] = {**params.get("_meta", {}), SUBSCRIPTION_ID_META_KEY: self.subscription_id}
        await super().send({**message, "params": params})


class RequestChannel:
    """The :class:`ClientChannel` of one request: its session (if any), the stream its
    messages travel on (``emit``; ``None``: nowhere, e.g. an HTTP client that does not
    take an event stream) and its progress token."""

    def __init__(self, session: McpSession | None, emit: Send | None, progress_token: str | int | None) -> None:
        self.session = session
        self.emit = emit
        self.progress_token = progress_token

    def supports(self, capability: str) -> bool:
        return self.session is not None and self.emit is not None and self.session.supports(capability)

    async def _send(self, method: str, params: dict[str, Any]) -> None:
        if self.emit is None:
            return
        if self.session is not None:
            await self.session.notify(method, params, via=self.emit)
        else:
            await self.emit({"jsonrpc": "2.0", "method": method, "params": params})

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        if self.session is not None:
            if self.emit is not None:
                await self.session.log(level, data, logger, via=self.emit)
            return
        if level in LOG_LEVELS and level_allows(DEFAULT_LOG_LEVEL, level):
            params: dict[str, Any] = {"level": level, "data": data}
            if logger is not None:
                params["logger"] = logger
            await self._send("notifications/message", params)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._send("notifications/progress", params)

    async def _request(self, capability: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.session is None or self.emit is None:
            raise ClientUnavailable(f"this client cannot be asked ({method} needs an MCP session and an event stream)")
        if not self.session.supports(capability):
            raise ClientUnavailable(f"this client did not declare {capability}, so it cannot be asked ({method})")
        return await self.session.request(method, params, via=self.emit)

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> dict[str, Any]:
        return await self._request(
            "elicitation", "elicitation/create", {"message": message, "requestedSchema": requested_schema}
        )

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        return await self._request("sampling", "sampling/createMessage", params)


class SessionGone(Exception):
    """A session id that names no session here; ``elsewhere``: it was made by another process."""

    def __init__(self, session_id: str, elsewhere: bool) -> None:
        super().__init__(session_id)
        self.elsewhere = elsewhere


class Sessions:
    """The sessions of this process, by id (see the module's doc for the limits)."""

    def __init__(self) -> None:
        self._by_id: dict[str, McpSession] = {}
        #: Sessions that are not in ``_by_id`` (stdio's one; listen streams), also notified.
        self._attached: set[McpSession] = set()

    def create(self, user: User | None) -> McpSession:
        """A new HTTP session for ``user`` (the least recently used of theirs goes when
        they have too many)."""
        self.expire()
        key = user.id if user is not None else None
        mine = [s for s in self._by_id.values() if (s.user.id if s.user is not None else None) == key]
        if len(mine) >= MAX_SESSIONS_PER_USER:
            idle = [s for s in mine if not s.streaming] or mine
            self.drop(min(idle, key=lambda s: s.last_used).id)
        session = McpSession(user)
        self._by_id[session.id] = session
        return session

    def get(self, session_id: str, user: User | None) -> McpSession:
        """The session ``session_id`` of ``user`` (:class:`SessionGone` if there is none:
        another person's session id is as unknown as a made-up one)."""
        session = self._by_id.get(session_id)
        if session is None or (session.user.id if session.user else None) != (user.id if user else None):
            raise SessionGone(session_id, self.owner_pid(session_id) not in (None, os.getpid()))
        session.touch()
        return session

    def drop(self, session_id: str) -> McpSession | None:
        session = self._by_id.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def attach(self, session: McpSession) -> None:
        """Count a session made elsewhere (stdio's, a listen stream) among those notified."""
        self._attached.add(session)

    def detach(self, session: McpSession) -> None:
        self._attached.discard(session)

    def expire(self) -> None:
        """Forget sessions idle for longer than :data:`IDLE_SECONDS` (not those streaming)."""
        limit = time.monotonic() - IDLE_SECONDS
        for session in [s for s in self._by_id.values() if s.last_used < limit and not s.streaming]:
            self.drop(session.id)

    def close_all(self) -> None:
        """End every session made here and every listen stream (the server is stopping:
        their open streams end now instead of holding the shutdown up)."""
        for session_id in list(self._by_id):
            self.drop(session_id)
        for session in list(self._attached):
            if isinstance(session, ListenSession):
                session.close()

    def all(self) -> list[McpSession]:
        return [*self._by_id.values(), *self._attached]

    def subscribed(self, uri: str) -> list[McpSession]:
        """The sessions subscribed to ``uri``."""
        return [s for s in self.all() if uri in s.subscriptions]

    async def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a change notification to every session that takes it on its own stream
        (a listen stream filters what it asked for; a 2026-07-28 connection takes none)."""
        for session in self.all():
            if isinstance(session, ListenSession) or not session.modern:
                await session.notify(method, params)

    @staticmethod
    def owner_pid(session_id: str) -> int | None:
        """The process that made ``session_id`` (it is the id's first part), if it says."""
        head, sep, _ = session_id.partition(".")
        try:
            return int(head, 16) if sep else None
        except ValueError:
            return None
