"""The MCP server: a JSON-RPC 2.0 dispatcher over the tool registry, for HTTP and stdio.

Transport-neutral: ``web/mcp_http.py`` (``POST /mcp``) and :func:`serve_stdio`
(``noteloom mcp``) hand it raw messages and send back what it returns. It holds no
tool logic: ``tools/list`` lists the registry's enabled tools, ``tools/call`` calls
``registry.call``.

We own the dispatch instead of running the SDK's server because the SDK answers
batches with 400 (HTTP) or drops them (stdio), and maps errors differently:
here a ``ToolError`` (a bad argument, a domain error such as a missing note or an
embedder that is down: ``noteloom.tools.call_tool`` decides which) is a result with
``isError: true`` the model can read and recover from, worded as the chat's model reads
it; a call whose policy is ``deny`` (``noteloom.policy``) is such a result too; an
unknown or disabled tool is -32602, and a bug is -32603 with a generic message, the
traceback only in the log. A ``confirm`` call asks the user through ``elicitation/create``
when the client declared elicitation (with the line the chat's confirmation card shows:
``policy.describe_call``; a 2026-07-28 client gets an input-required result and calls
again with the answer); declined or cancelled, it is an ``isError`` result saying so.
A client that cannot be asked runs it, as before (write tools are off unless turned on).
The SDK's typed wire models (``mcp_types``) still shape what we send.

A scoped token (``accounts.TokenScopes``) narrows what a request sees, never widens it:
:meth:`Preflight.limited` keeps the workspace's toggles and intersects its notebook scope
with the token's; ``tools/list`` lists only the tools the token allows (read-only: only
tools whose effect is ``read``; an allowlist: only those), and a call of any other is
refused exactly like an unknown or disabled tool.

Both protocol eras are spoken: the ``initialize`` handshake (2024-11-05 … 2025-11-25)
and the 2026-07-28 revision's ``server/discover`` with per-request ``_meta`` envelopes.
A request may come with its connection's :class:`~noteloom.mcp.session.McpSession`
(stdio; HTTP after ``initialize``) and an ``emit`` for what it sends before its answer
(log messages, progress, server→client requests); without them it is served
statelessly. Watchers (:meth:`McpServer.add_watcher`) run while the server serves:
``tools/list_changed`` to every session when the enabled tools change, in any process;
2026-07-28 clients hear of changes through ``subscriptions/listen`` streams.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO
from urllib.parse import quote

import anyio
import mcp_types as mt
from anyio import to_thread
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types.methods import SERVER_RESULTS, serialize_server_result
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from noteloom import __version__
from noteloom.accounts import FULL_ACCESS, TokenScopes
from noteloom.app import App
from noteloom.jsonvalues import dumps, dumps_bytes, find_problem, surrogate_in
from noteloom.mcp.session import (
    LOG_LEVELS,
    SUBSCRIPTION_ID_META_KEY,
    ListenSession,
    McpSession,
    RequestChannel,
    Send,
    Sessions,
)
from noteloom.messages import BlockPart, ImagePart
from noteloom.policy import PolicySources, denied, describe_call, resolve
from noteloom.promptdefs import UNTRUSTED_META_KEY as UNTRUSTED_META_KEY
from noteloom.providers.base import file_data
from noteloom.tools import (
    ClientChannel,
    ClientRequestFailed,
    NotebookScope,
    ToolContext,
    ToolDef,
    ToolError,
    ToolFailure,
    ToolSettings,
    UnknownTool,
    narrowed,
    validate_args,
)
from noteloom.workspace import User, Workspace

log = logging.getLogger("noteloom.mcp")

#: Run-time setting: the master switch of the MCP server (HTTP and stdio).
ENABLED_KEY = "mcp.enabled"
#: On by default: every request needs the owner's token (or local file access, for
#: stdio), the server listens on loopback, and MCP is the point of an AI notes app.
ENABLED_DEFAULT = True
#: More messages than this in one batch is refused as a whole (a cheap denial-of-service guard).
MAX_BATCH = 100
#: The largest message (HTTP body or stdio line) read: a note body of a few MB fits, a runaway one does not.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    mt.PARSE_ERROR, mt.INVALID_REQUEST, mt.METHOD_NOT_FOUND, mt.INVALID_PARAMS, mt.INTERNAL_ERROR,
)
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
#: Answered by the dispatcher itself; every other method is in :attr:`McpServer.methods`.
CORE_METHODS = ("initialize", "server/discover")
INSTRUCTIONS = (
    "The user's notes (Markdown, in nested notebooks, with tags and to-dos). Find notes with "
    "search_notes, then read them with read_note or read_notes. For a long note, ask read_note "
    "for outline=true and read one section at a time. Write tools appear only when the user "
    "has turned them on."
)
#: Where a file a tool hands over whole says it came from: a stored attachment by its ref,
#: else a file by its name.
ATTACHMENT_URI = "noteloom://attachment/"
FILE_URI = "noteloom://file/"
#: The file's name beside an embedded document (``BlobResourceContents`` has no field for it).
TITLE_META_KEY = "noteloom/title"
DISABLED_MESSAGE = "MCP is turned off for this workspace; turn it on with `noteloom mcp enable`"
#: How often the tool watcher asks whether anyone committed (SQLite: a few microseconds),
#: and how often it re-reads the settings where that cannot be asked (PostgreSQL).
WATCH_INTERVAL = 0.2
REREAD_INTERVAL = 2.0
#: How often idle sessions are looked for.
EXPIRE_INTERVAL = 60.0


def mcp_enabled(workspace: Workspace) -> bool:
    """Whether the MCP server answers at all (blocking: reads a setting)."""
    return bool(workspace.get_setting(ENABLED_KEY, ENABLED_DEFAULT))


@dataclass(frozen=True)
class Preflight:
    """The run-time settings one request (or batch) runs with, read in one transaction."""

    enabled: bool
    tools: ToolSettings
    #: The scopes of the token the request came with (full access: stdio, unscoped tokens).
    grant: TokenScopes = field(default=FULL_ACCESS)

    def limited(self, scopes: TokenScopes | None) -> Preflight:
        """These settings as a credential with ``scopes`` sees them (never more than before)."""
        if scopes is None or scopes.unrestricted:
            return self
        scope = self.tools.scope
        if scopes.notebooks:
            scope = narrowed(scope, NotebookScope(scopes.notebooks))
        return replace(self, tools=ToolSettings(self.tools.toggles, scope), grant=scopes)

    def allows(self, tool: ToolDef) -> bool:
        """Whether the token lets this request see and call ``tool`` (its toggle aside)."""
        grant = self.grant
        if grant.read_only and tool.effect != "read":
            return False
        if grant.notebooks and not tool.within_notebooks:
            return False  # it would reach past the token's notebooks (chats, memories, recipes)
        return grant.tools is None or tool.name in grant.tools


class RpcError(Exception):
    """A JSON-RPC error answer to one request."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(frozen=True)
class Reply:
    """What to send back: a JSON value (``None`` = nothing, e.g. only notifications)
    and whether the input as a whole was rejected (HTTP answers that with 400)."""

    body: Any
    rejected: bool = False

    def encode(self) -> bytes:
        # Always sendable: a lone surrogate that reached an answer (an echo, an odd stored
        # row) goes out as U+FFFD, NaN as null, rather than failing the whole batch.
        return dumps_bytes(self.body)


def error_body(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def parse(data: bytes | str, what: str) -> tuple[Any, dict[str, Any] | None]:
    """The message in ``data``, or ``None`` and the -32700 answer that says why there is none."""
    try:
        return json.loads(data), None
    except RecursionError:
        reason = "it nests too deeply"
    except ValueError as exc:  # bad JSON, bad UTF-8, an integer past Python's 4300 digits
        reason = "an integer has too many digits" if "integer string conversion" in str(exc) else str(exc)
    return None, error_body(PARSE_ERROR, f"Parse error: the {what} is not valid JSON ({reason})")


def _valid_id(value: Any) -> bool:
    # An id with a lone surrogate could not be echoed faithfully, so the client could not match it.
    if isinstance(value, str):
        return surrogate_in(value) is None
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class McpCall:
    """One request as a method handler sees it: its params (an object, ``{}`` if none), who
    asks, the settings read for this request (already narrowed by the token's scopes) and the
    protocol version its answer is shaped for (``None``: a bare handshake-era request)."""

    server: McpServer
    method: str
    params: dict[str, Any]
    user: User | None
    pre: Preflight
    version: str | None
    #: The client connection this request came on (``None``: a stateless HTTP request).
    session: McpSession | None = None
    #: Where messages tied to this request go before its answer (HTTP: the POST's event
    #: stream; stdio: stdout); ``None``: nowhere (the client takes only plain JSON).
    emit: Send | None = None
    #: The request's JSON-RPC id.
    request_id: str | int | None = None

    @property
    def client(self) -> RequestChannel:
        """This request's way to its client (progress with the request's progress token)."""
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return RequestChannel(self.session, self.emit, token if _valid_id(token) else None)

    def tool_context(self) -> ToolContext:
        """The context tools run in for this request: the asker, the notebook scope
        this request read (the token's scope already applied) and its client channel."""
        return self.server.app.tool_context(self.user, scope=self.pre.tools.scope, client=self.client)


#: A method's handler: the result object (raise :class:`RpcError` for a JSON-RPC error).
Handler = Callable[[McpCall], Awaitable[dict[str, Any]]]


class McpServer:
    """Answers MCP messages for one app; one instance serves every connection.

    Methods live in :attr:`methods`, filled by the tools (here) and by the feature
    modules of this package (:mod:`noteloom.mcp.features`), each of which also declares
    its capability with :meth:`declare`.
    """

    def __init__(self, app: App) -> None:
        self.app = app
        self.server_info = mt.Implementation(name="noteloom", title="noteloom", version=__version__)
        self.capabilities = mt.ServerCapabilities(
            tools=mt.ToolsCapability(list_changed=True), logging=mt.LoggingCapability()
        )
        self._tool_wire: dict[str, dict[str, Any]] = {}
        self._kept: tuple[int, Preflight] | None = None  # (data version, what was read then)
        self.methods: dict[str, Handler] = {}
        #: The client connections of this process (:mod:`noteloom.mcp.session`).
        self.sessions = Sessions()
        self._watchers: list[Callable[[], Awaitable[None]]] = []
        #: The tool watcher's last look: (data version, tool count), when, the enabled tools.
        self._tools_seen: tuple[tuple[int | None, int], float, frozenset[str]] | None = None
        self.add_method("ping", _ping)
        self.add_method("tools/list", self._list_tools)
        self.add_method("tools/call", self._tools_call)
        self.add_method("logging/setLevel", _set_level)
        self.add_method("subscriptions/listen", self._listen)
        self.add_watcher(self._watch_tools)
        self.add_watcher(self._expire_sessions)
        from noteloom.mcp.features import install_features  # they import this module

        install_features(self)

    def add_method(self, name: str, handler: Handler) -> None:
        """Answer ``name`` with ``handler`` (a second registration of a name is a bug)."""
        if name in self.methods or name in CORE_METHODS:
            raise ValueError(f"MCP method {name!r} is already answered")
        self.methods[name] = handler

    def declare(self, **capabilities: Any) -> None:
        """Add server capabilities (``resources=mt.ResourcesCapability(...)``, ``prompts=…``,
        ``logging=…``, ``completions=…``) to what ``initialize`` and ``server/discover`` say."""
        self.capabilities = self.capabilities.model_copy(update=capabilities)

    def add_watcher(self, watcher: Callable[[], Awaitable[None]]) -> None:
        """Run ``watcher`` (a coroutine function that loops until cancelled, e.g. following
        the change feed and notifying :attr:`sessions`) for as long as the server serves:
        :meth:`running` starts it (the web app's lifespan, the stdio loop)."""
        self._watchers.append(watcher)

    async def _watch_tools(self) -> None:
        """Send ``notifications/tools/list_changed`` to every session when the enabled
        tools change: a toggle set by any process (the settings live in the database, so
        a commit anywhere moves the data version) or a tool registered here."""
        while True:
            await anyio.sleep(WATCH_INTERVAL)
            if await self._tools_changed():
                await self.sessions.broadcast("notifications/tools/list_changed")

    async def _tools_changed(self) -> bool:
        """Whether the enabled tools differ from the last look (the first look: no)."""
        app = self.app
        mark = (app.workspace.data_version.current(), len(app.registry.all()))
        now = anyio.current_time()
        seen = self._tools_seen
        if seen is not None and mark == seen[0] and (mark[0] is not None or now - seen[1] < REREAD_INTERVAL):
            return False
        pre = await to_thread.run_sync(self.preflight)
        names = frozenset(t.name for t in app.registry.enabled(app.workspace, pre.tools))
        self._tools_seen = (mark, now, names)
        return seen is not None and names != seen[2]

    async def _expire_sessions(self) -> None:
        """Forget idle sessions now and then (``Sessions.expire``), not only when one is made."""
        while True:
            await anyio.sleep(EXPIRE_INTERVAL)
            self.sessions.expire()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The server's watchers, running for the block; a watcher that fails is logged
        and started again after a pause, so one bug does not end the others."""
        await self._tools_changed()  # the baseline, before anything can change unseen
        async with anyio.create_task_group() as tg:
            for watcher in self._watchers:
                tg.start_soon(_keep_running, watcher)
            try:
                yield
            finally:
                for session in self.sessions.all():
                    if isinstance(session, ListenSession):
                        session.outbox.close()  # its listen request answers, ending the stream
                tg.cancel_scope.cancel()

    # -- entry points ---------------------------------------------------------------------

    async def current_preflight(self) -> Preflight:
        """:meth:`preflight`, kept while nobody has committed since it was read (SQLite
        says so for a few microseconds on the event loop; elsewhere it is read each time)."""
        version = self.app.workspace.data_version.current()
        kept = self._kept
        if version is not None and kept is not None and kept[0] == version:
            return kept[1]
        pre = await to_thread.run_sync(self.preflight)
        if version is not None:  # taken before the read: a commit in between only costs a re-read
            self._kept = (version, pre)
        return pre

    def preflight(self) -> Preflight:
        """Read what a request needs to know up front (blocking: call it in a worker thread)."""
        raw = self.app.workspace.settings_with_prefix(ENABLED_KEY, "tool")  # one query, every request
        return Preflight(bool(raw.get(ENABLED_KEY, ENABLED_DEFAULT)), self.app.registry.settings_from(raw))

    async def handle_bytes(
        self,
        data: bytes | str,
        user: User | None,
        *,
        headers: Mapping[str, str] | None = None,
        preflight: Preflight | None = None,
        session: McpSession | None = None,
        emit: Send | None = None,
    ) -> Reply:
        """One HTTP body or stdio line: a message or a batch, as JSON text."""
        message, error = parse(data, "body")
        if error is not None:
            return Reply(error, rejected=True)
        return await self.handle(message, user, headers=headers, preflight=preflight, session=session, emit=emit)

    async def handle(
        self,
        message: Any,
        user: User | None,
        *,
        headers: Mapping[str, str] | None = None,
        preflight: Preflight | None = None,
        session: McpSession | None = None,
        emit: Send | None = None,
    ) -> Reply:
        """A decoded message or batch. Settings come from ``preflight`` (read now if not given).

        ``session``: the connection it came on (responses from the client are handed to it,
        ``notifications/cancelled`` cancels one of its requests); ``emit``: where messages a
        request sends before its answer go (progress, log messages, server→client requests).
        """
        pre = preflight if preflight is not None else await to_thread.run_sync(self.preflight)
        link = (session, emit)
        if isinstance(message, list):
            if not message:
                return Reply(error_body(INVALID_REQUEST, "Invalid Request: an empty batch"), rejected=True)
            if len(message) > MAX_BATCH:
                return Reply(
                    error_body(INVALID_REQUEST, f"Invalid Request: a batch holds at most {MAX_BATCH} messages"),
                    rejected=True,
                )
            # In order, one after another: a batch that creates then edits a note must see its own writes.
            answers = [a for m in message if (a := await self.handle_one(m, user, pre, headers, link)) is not None]
            return Reply(answers or None)
        answer = await self.handle_one(message, user, pre, headers, link)
        rejected = answer is not None and "error" in answer and answer["error"]["code"] == INVALID_REQUEST
        return Reply(answer, rejected=rejected)

    async def handle_one(
        self,
        msg: Any,
        user: User | None,
        pre: Preflight,
        headers: Mapping[str, str] | None = None,
        link: tuple[McpSession | None, Send | None] = (None, None),
    ) -> dict[str, Any] | None:
        """One envelope: the answer, or ``None`` for a notification (or a response sent to us)."""
        if not isinstance(msg, dict):
            return error_body(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
        session = link[0]
        if "method" not in msg and ("result" in msg or "error" in msg):
            # A response: to a request of ours it goes to the one waiting; anything else is
            # dropped unanswered (answering it would invite the peer to answer back).
            if session is not None:
                session.deliver(msg)
            return None
        has_id = "id" in msg
        rid = msg.get("id")
        if has_id and not _valid_id(rid):
            return error_body(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        if "method" not in msg:
            return error_body(INVALID_REQUEST, "Invalid Request: method is missing", rid)
        method, params = msg["method"], msg.get("params")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return error_body(INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0" and method a string', rid)
        if params is not None and not isinstance(params, dict | list):
            return error_body(INVALID_REQUEST, "Invalid Request: params must be an object", rid)
        if not has_id:
            if method == "notifications/cancelled" and session is not None and isinstance(params, dict):
                session.cancel(params.get("requestId"))
            return None  # the others (initialized, roots/list_changed …) need nothing from us
        # Python's parser lets through what no peer or database can carry (NaN, 1e999, huge
        # integers, lone surrogates): refused here, naming where, before any method sees it.
        problem = find_problem(params, "params")
        if problem is not None:
            return error_body(INVALID_PARAMS, f"Invalid params: {problem}", rid)
        try:
            if session is None or not _valid_id(rid):
                result = await self._dispatch(method, params, user, pre, msg, headers, link)
            else:
                with anyio.CancelScope() as scope:
                    session.running[rid] = scope
                    try:
                        result = await self._dispatch(method, params, user, pre, msg, headers, link)
                    finally:
                        if session.running.get(rid) is scope:
                            del session.running[rid]
                if scope.cancelled_caught:
                    return None  # cancelled by the client: it expects no answer
        except RpcError as exc:
            return error_body(exc.code, exc.message, rid, exc.data)
        except Exception:
            log.exception("MCP %s failed (request id %r)", method, rid)
            return error_body(INTERNAL_ERROR, "Internal error: the request failed on the server; its log has the details", rid)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    # -- methods --------------------------------------------------------------------------

    async def _dispatch(
        self,
        method: str,
        params: Any,
        user: User | None,
        pre: Preflight,
        msg: dict[str, Any],
        headers: Mapping[str, str] | None,
        link: tuple[McpSession | None, Send | None] = (None, None),
    ) -> dict[str, Any]:
        handler = self.methods.get(method)
        if handler is None and method not in CORE_METHODS:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"Method not found: {method!r}; this server answers {', '.join((*CORE_METHODS, *self.methods))}",
            )
        if params is not None and not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object, not an array")
        params = params or {}
        modern = self._modern_version(msg, params, headers)
        if modern and method in ("initialize", "ping"):
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method!r} does not exist in protocol {modern}")
        # The version whose wire shape the answer takes: stated per request, or for
        # initialize the one we settle on; unknown (a bare legacy request) = as built.
        version = modern or (headers or {}).get("mcp-protocol-version")
        if method == "initialize":
            result = self._initialize(params)
            version = result["protocolVersion"]
            if link[0] is not None:
                link[0].initialized(version, params)
        elif method == "server/discover":
            result = self._discover()
        else:
            assert handler is not None
            session = link[0]
            if session is not None:
                if modern and session.version is None:
                    session.version = modern  # stdio: the connection's era, known from its first request
                if version is None and not session.modern:
                    version = session.version  # the handshake's version (a modern one shapes only modern requests)
            result = await handler(McpCall(self, method, params, user, pre, version, *link, request_id=msg.get("id")))
        if modern:
            result.setdefault("resultType", "complete")
            if method.endswith("/list") or method == "server/discover":
                result.setdefault("ttlMs", 0)
                result.setdefault("cacheScope", "private")
            result["_meta"] = {**result.get("_meta", {}), mt.SERVER_INFO_META_KEY: self._server_info_wire()}
        handle = "task" in result or result.get("resultType") == "task"
        if version in SUPPORTED_VERSIONS and (method, version) in SERVER_RESULTS and not handle:
            # (handle: a tools/call answered with a task, a CreateTaskResult of 2025-11-25 or of
            # the 2026-07-28 tasks extension: mcp.tasks)
            # Checked against (and trimmed to) that version's schema by the SDK's own tables.
            result = serialize_server_result(method, version, result)
        return result

    def _modern_version(
        self, msg: dict[str, Any], params: dict[str, Any], headers: Mapping[str, str] | None
    ) -> str | None:
        """The 2026-07-28-era version this request speaks (its envelope checked the SDK's
        way), or ``None`` for a handshake-era request."""
        meta = params.get("_meta")
        header = (headers or {}).get("mcp-protocol-version")
        if (
            not (isinstance(meta, dict) and mt.PROTOCOL_VERSION_META_KEY in meta)
            and msg["method"] != "server/discover"
            and header not in MODERN_PROTOCOL_VERSIONS
        ):
            return None
        # A modern version in the header alone is a modern request without its envelope:
        # the ladder answers that with -32602 naming the missing _meta keys.
        route = classify_inbound_request(msg, headers=headers, supported_modern_versions=MODERN_PROTOCOL_VERSIONS)
        if isinstance(route, InboundLadderRejection):
            raise RpcError(route.code, route.message, route.data)
        return route.protocol_version

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            req = mt.InitializeRequestParams.model_validate(params)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params for initialize: {_first_error(exc)}") from None
        # Answer with the client's version when we speak it, else our newest handshake one.
        version = req.protocol_version if req.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        result = mt.InitializeResult(
            protocol_version=version,
            capabilities=self.capabilities,
            server_info=self.server_info,
            instructions=INSTRUCTIONS,
        )
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    def _discover(self) -> dict[str, Any]:
        result = mt.DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS), capabilities=self.capabilities, instructions=INSTRUCTIONS
        )
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    def _server_info_wire(self) -> dict[str, Any]:
        return self.server_info.model_dump(by_alias=True, exclude_none=True, mode="json")

    async def _list_tools(self, call: McpCall) -> dict[str, Any]:
        pre = call.pre
        return {"tools": [self._tool_json(t) for t in self.app.registry.enabled(self.app.workspace, pre.tools)
                          if pre.allows(t)]}

    async def _listen(self, call: McpCall) -> dict[str, Any]:
        """``subscriptions/listen`` (2026-07-28): acknowledge the filter, then send the change
        notifications it asks for on this request's stream until the client leaves (the
        transport cancels the request) or the server stops (then the result ends it)."""
        if call.emit is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: subscriptions/listen answers with an event stream; "
                                            "send Accept: text/event-stream")
        if call.request_id is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: subscriptions/listen needs a request id")
        try:
            req = mt.SubscriptionsListenRequestParams.model_validate(call.params)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params for subscriptions/listen: {_first_error(exc)}") from None
        wanted = req.notifications
        honored = mt.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed else None,
            prompts_list_changed=True if wanted.prompts_list_changed else None,
            resources_list_changed=True if wanted.resources_list_changed else None,
            resource_subscriptions=list(wanted.resource_subscriptions) if wanted.resource_subscriptions else None,
        ).model_dump(by_alias=True, exclude_none=True, mode="json")
        stream = ListenSession(call.user, call.request_id, honored)
        meta = {SUBSCRIPTION_ID_META_KEY: call.request_id}
        self.sessions.attach(stream)  # from here on, changes reach its outbox
        try:
            await call.emit({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                             "params": {"notifications": honored, "_meta": meta}})
            while (item := await stream.outbox.get()) is not None:
                await call.emit(item[1])
        finally:
            self.sessions.detach(stream)
            stream.close()
        return {"_meta": meta}

    async def _tools_call(self, call: McpCall) -> dict[str, Any]:
        return await self._call_tool(call.params, call.user, call.pre, call)

    def _tool_json(self, tool: ToolDef) -> dict[str, Any]:
        """A tool as MCP lists it (built once: definitions do not change while running)."""
        cached = self._tool_wire.get(tool.name)
        if cached is None:
            ann = tool.annotations
            wire = mt.Tool(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
                annotations=mt.ToolAnnotations(
                    title=ann.get("title"),
                    read_only_hint=ann["readOnlyHint"],
                    destructive_hint=ann["destructiveHint"],
                    idempotent_hint=ann["idempotentHint"],
                    open_world_hint=ann["openWorldHint"],
                ),
            )
            cached = self._tool_wire[tool.name] = wire.model_dump(by_alias=True, exclude_none=True, mode="json")
        return cached

    async def _call_tool(
        self, params: dict[str, Any], user: User | None, pre: Preflight, call: McpCall | None = None
    ) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs params.name, the tool's name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params.arguments must be an object")
        app, registry = self.app, self.app.registry
        try:
            tool = registry.enabled_tool(app.workspace, name, pre.tools)
            if not pre.allows(tool):  # outside the token's scopes: as good as missing
                raise UnknownTool(f"no tool named {name!r} is available")
        except UnknownTool:
            raise RpcError(
                INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list shows the tools that are available"
            ) from None
        # With the scope this request already read.
        ctx = app.tool_context(user, scope=pre.tools.scope, client=call.client if call is not None else None)
        policy = resolve(tool, arguments, PolicySources.read(pre.tools.toggles, app.settings.file))
        if policy == "deny":
            return {"content": [{"type": "text", "text": denied(tool.name)}], "isError": True}
        modern = call is not None and call.version in MODERN_PROTOCOL_VERSIONS
        asks = (_declares_elicitation(params) if modern
                else ctx.client is not None and ctx.client.supports("elicitation"))
        if policy == "confirm" and asks:
            try:
                validate_args(tool, arguments)  # asking about a call that cannot run would waste the user's time
            except ToolError as exc:
                return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
            if modern:
                # 2026-07-28: no server-to-client requests; the answer asks for input, and
                # the client calls again with the user's answer.
                answer = _confirmation_answer(params, tool.name, arguments)
                if answer is None:
                    return await _ask_for_confirmation(tool, arguments, app.workspace, user)
                refused = await _judge(answer, tool, arguments, app.workspace, user)
            else:
                assert ctx.client is not None
                refused = await _confirm(ctx.client, tool, arguments, app.workspace, user)
            if refused is not None:
                return {"content": [{"type": "text", "text": refused}], "isError": True}
        try:
            result = await registry.call(ctx, name, arguments, tool=tool)
        except ToolError as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        except ToolFailure:  # logged with its stack where it happened
            raise RpcError(INTERNAL_ERROR, "Internal error: the request failed on the server; its log has the details") from None
        payload = result.payload
        out: dict[str, Any] = {
            # Text a tool returns (a file's lines, a page's Markdown) goes as it is; anything
            # else as its JSON.
            "content": [{"type": "text", "text": payload if isinstance(payload, str) else dumps(payload)},
                        *(file_content(b) for b in result.blocks)],
            "isError": False,
        }
        # Any object result is also structured content (MCP 2025-06-18), beside the same JSON
        # as text for clients that read only that; with an output schema it conforms to it.
        if isinstance(payload, dict):
            out["structuredContent"] = payload
        elif isinstance(payload, str) and tool.output_schema is not None:
            out["structuredContent"] = {"text": payload}  # a text tool's object form (its schema says so)
        if result.untrusted:
            out["_meta"] = {UNTRUSTED_META_KEY: True}
        return out


async def _ping(call: McpCall) -> dict[str, Any]:
    return {}


async def _set_level(call: McpCall) -> dict[str, Any]:
    """``logging/setLevel``: the least severe level this session is sent from now on
    (a request without a session has nowhere to keep it, and logs at the default level)."""
    level = call.params.get("level")
    if level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
    if call.session is not None:
        call.session.log_level = level
    return {}


#: The key of the one input request a confirmation asks for (2026-07-28).
CONFIRM_KEY = "confirm"
_CONFIRM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


async def _confirm(
    client: ClientChannel, tool: ToolDef, arguments: dict[str, Any], workspace: Workspace, user: User | None
) -> str | None:
    """Ask the user to sign off one call; ``None`` when they accept, else why it did not run."""
    line = await to_thread.run_sync(describe_call, tool, arguments, workspace, user)
    try:
        answer = await client.elicit(f"Allow this? {line}", _CONFIRM_SCHEMA)
    except ClientRequestFailed as exc:
        return f"{tool.name} did not run: the user could not be asked to confirm it ({exc})"
    return _refusal(answer.get("action"), tool, line)


def _refusal(action: Any, tool: ToolDef, line: str) -> str | None:
    if action == "accept":
        return None
    how = "declined" if action == "decline" else "dismissed"
    return (f"{tool.name} did not run: the user {how} it when asked to confirm ({line}); "
            "do not try it again unless they ask for it")


def _declares_elicitation(params: dict[str, Any]) -> bool:
    """Whether a 2026-07-28 request's envelope says its client can elicit."""
    meta = params.get("_meta")
    caps = meta.get(mt.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    return isinstance(caps, dict) and isinstance(caps.get("elicitation"), dict)


def _call_state(name: str, arguments: dict[str, Any]) -> str:
    """The ``requestState`` of a confirmation: which call it was asked for (an answer sent
    back with another call's arguments asks again instead of running it)."""
    digest = hashlib.sha256(dumps_bytes({"name": name, "arguments": arguments})).hexdigest()
    return f"confirm:{digest}"


async def settled_before_running(server: McpServer, call: McpCall, tool: ToolDef) -> bool:
    """Whether a 2026-07-28 call of ``tool`` may start without answering first: its policy
    neither refuses it nor waits for a confirmation this request does not carry (accepted).
    The tasks extension asks before it makes a task, as the spec says it should."""
    arguments = call.params.get("arguments") or {}
    if not isinstance(arguments, dict):
        return False
    app = server.app
    policy = resolve(tool, arguments, PolicySources.read(call.pre.tools.toggles, app.settings.file))
    if policy == "deny":
        return False
    if policy != "confirm" or not _declares_elicitation(call.params):
        return True
    answer = _confirmation_answer(call.params, tool.name, arguments)
    return answer is not None and answer.get("action") == "accept"


def _confirmation_answer(params: dict[str, Any], name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The user's answer a retried 2026-07-28 call carries for this very call, if it does."""
    responses = params.get("inputResponses")
    if params.get("requestState") != _call_state(name, arguments) or not isinstance(responses, dict):
        return None
    answer = responses.get(CONFIRM_KEY)
    return answer if isinstance(answer, dict) else None


async def _ask_for_confirmation(
    tool: ToolDef, arguments: dict[str, Any], workspace: Workspace, user: User | None
) -> dict[str, Any]:
    line = await to_thread.run_sync(describe_call, tool, arguments, workspace, user)
    result = mt.InputRequiredResult(
        input_requests={CONFIRM_KEY: mt.ElicitRequest(
            params=mt.ElicitRequestFormParams(message=f"Allow this? {line}", requested_schema=_CONFIRM_SCHEMA))},
        request_state=_call_state(tool.name, arguments),
    )
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


async def _judge(
    answer: dict[str, Any], tool: ToolDef, arguments: dict[str, Any], workspace: Workspace, user: User | None
) -> str | None:
    if answer.get("action") == "accept":
        return None
    line = await to_thread.run_sync(describe_call, tool, arguments, workspace, user)
    return _refusal(answer.get("action"), tool, line)


async def _keep_running(watcher: Callable[[], Awaitable[None]]) -> None:
    while True:
        try:
            await watcher()
            return
        except Exception:
            log.exception("MCP watcher %s failed; starting it again", getattr(watcher, "__qualname__", watcher))
        await anyio.sleep(5)


def file_content(block: BlockPart) -> dict[str, Any]:
    """A file a tool hands over whole, as MCP content: an image as ``ImageContent`` (a
    linked one as a ``ResourceLink``), a PDF as an ``EmbeddedResource`` holding its bytes
    (``BlobResourceContents``) under ``noteloom://attachment/<ref>``, a sound (a document
    part of an ``audio/*`` type) as ``AudioContent``. MCP clients get the
    file as it is: what their model can read is theirs to decide."""
    content: mt.ImageContent | mt.AudioContent | mt.ResourceLink | mt.EmbeddedResource
    if isinstance(block, ImagePart):
        if block.url and not block.data:
            content = mt.ResourceLink(uri=block.url, name="image", mime_type=block.media_type)
        else:
            content = mt.ImageContent(data=file_data(block), mime_type=block.media_type)
    elif block.media_type.lower().startswith("audio/"):
        content = mt.AudioContent(data=file_data(block), mime_type=block.media_type)
    else:
        uri = (f"{ATTACHMENT_URI}{quote(block.ref, safe='')}" if block.ref
               else f"{FILE_URI}{quote(block.title or 'document', safe='')}")
        content = mt.EmbeddedResource(
            resource=mt.BlobResourceContents(uri=uri, mime_type=block.media_type, blob=file_data(block)),
        )
        if block.title:
            return {**content.model_dump(by_alias=True, exclude_none=True, mode="json"),
                    "_meta": {TITLE_META_KEY: block.title}}
    return content.model_dump(by_alias=True, exclude_none=True, mode="json")


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid"))
    return str(exc)


# -- stdio --------------------------------------------------------------------------------


async def serve_stdio(server: McpServer, user: User | None, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Newline-delimited JSON-RPC on ``stdin``/``stdout`` until end of input.

    Requests run concurrently (a slow search does not hold up a ping) and
    ``notifications/cancelled`` cancels the named one; only protocol messages
    ever reach ``stdout``. No line ends the loop: bad JSON gets -32700, a line over
    :data:`MAX_MESSAGE_BYTES` -32600 (the rest of it is skipped unread), a failing
    request -32603 for itself alone; only the end of input (or of stdout) stops it.

    The connection is one :class:`McpSession`: notifications (a request's progress and log
    messages, tools/list_changed from the server's watchers) are written between answers,
    and a server→client request (elicitation) is answered by a response line that the loop
    hands to the request waiting for it while it goes on reading.
    """
    write_lock = anyio.Lock()
    running: dict[Any, anyio.CancelScope] = {}

    async def send(reply: Reply) -> None:
        if reply.body is None:
            return
        async with write_lock:
            await to_thread.run_sync(_write_line, stdout, reply.encode())

    async def emit(message: dict[str, Any]) -> None:
        await send(Reply(message))

    session = McpSession(user, emit, session_id="stdio")
    server.sessions.attach(session)

    async def answer(message: Any) -> None:
        rid = message.get("id") if isinstance(message, dict) else None
        wants_answer = (isinstance(message, dict) and "id" in message and "method" in message) or (
            isinstance(message, list) and any(isinstance(m, dict) and "id" in m for m in message)
        )
        with anyio.CancelScope() as scope:
            if _valid_id(rid):
                running[rid] = scope
            try:
                pre = await to_thread.run_sync(server.preflight)
                if not pre.enabled:
                    if wants_answer:
                        await send(Reply(error_body(INVALID_REQUEST, DISABLED_MESSAGE, rid if _valid_id(rid) else None)))
                    return
                reply = await server.handle(message, user, preflight=pre, session=session, emit=emit)
            except Exception:
                # handle() answers a failing request itself; this is the settings read or worse.
                log.exception("MCP stdio message failed (%s)", _describe(message))
                if not wants_answer:
                    return
                reply = Reply(error_body(INTERNAL_ERROR, "Internal error: the request failed on the server; "
                                         "its log (stderr) has the details", rid if _valid_id(rid) else None))
            finally:
                if _valid_id(rid) and running.get(rid) is scope:
                    del running[rid]
            await send(reply)

    async with server.running():
        try:
            async with anyio.create_task_group() as tg:  # its end waits for the answers still running
                await _stdio_loop(stdin, send, session, running, answer, tg)
        finally:
            server.sessions.detach(session)
            session.close()


async def _stdio_loop(
    stdin: BinaryIO,
    send: Callable[[Reply], Awaitable[None]],
    session: McpSession,
    running: dict[Any, anyio.CancelScope],
    answer: Callable[[Any], Coroutine[Any, Any, None]],
    tg: anyio.abc.TaskGroup,
) -> None:
    """Read lines until the end of input, starting a task for each request."""
    while True:
        read = await to_thread.run_sync(_read_line, stdin, MAX_MESSAGE_BYTES)
        if read is None:
            break
        raw, too_long = read
        if too_long:
            await send(Reply(error_body(
                INVALID_REQUEST, f"Invalid Request: the line is longer than {MAX_MESSAGE_BYTES} bytes"
            )))
            continue
        line = raw.strip()
        if not line:
            continue
        message, error = parse(line, "line")
        if error is not None:
            await send(Reply(error))
            continue
        log.debug("stdio in: %s", _describe(message))
        if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
            session.deliver(message)  # the client's answer to a request of ours
            continue
        # With an id it is a request for a method we lack, answered (-32601) like any other.
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled" and "id" not in message:
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            if _valid_id(target) and target in running:
                running[target].cancel()
            continue
        tg.start_soon(answer, message)


def _read_line(stdin: BinaryIO, limit: int) -> tuple[bytes, bool] | None:
    """The next line and whether it was longer than ``limit`` (then its bytes are skipped,
    not kept), or ``None`` at the end of input."""
    line = stdin.readline(limit + 1)
    if not line:
        return None
    if len(line) <= limit or line.endswith(b"\n"):
        return line, False
    while True:
        rest = stdin.readline(1 << 16)
        if not rest or rest.endswith(b"\n"):
            return b"", True


def _describe(message: Any) -> str:
    """A short log line for a message: its methods and ids, never its arguments."""
    items = message if isinstance(message, list) else [message]
    parts = [f"{m.get('method', 'answer')}#{m.get('id', '-')}" if isinstance(m, dict) else "?" for m in items[:10]]
    return ("batch " if isinstance(message, list) else "") + " ".join(parts)


def _write_line(stdout: BinaryIO, data: bytes) -> None:
    stdout.write(data + b"\n")
    stdout.flush()


def configure_stderr_logging(level: int = logging.INFO) -> None:
    """Logs go to stderr: on stdio, stdout carries the protocol and nothing else."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
