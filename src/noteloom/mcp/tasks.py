"""MCP tasks (protocol 2025-11-25): a long tool call that a client polls or cancels.

A ``tools/call`` whose params carry ``task`` (``{"ttl": ms}``) for a tool listed with
``execution.taskSupport: "optional"`` (the tools of
:data:`noteloom.default_plugins.interop_tools.TASK_TOOLS`: import, export, reindex) answers at
once with a ``CreateTaskResult``; the call runs in the background of the server, in a task
group that lives as long as :meth:`McpServer.running` (one of its watchers owns it). The
client follows it with ``tasks/get`` (status ``working``, ``input_required`` while the server
waits for the client's answer to a confirmation, then ``completed``, ``failed`` or
``cancelled``, with the last progress message as ``statusMessage``), fetches the tool's result
with ``tasks/result`` (which waits for the end), lists its tasks with ``tasks/list`` and stops
one with ``tasks/cancel`` (the call stops at its next step; the cancel answers once it has).
On a session (HTTP ``Mcp-Session-Id``, stdio) the task's progress notifications (with the
request's own progress token) and ``notifications/tasks/status`` go to the session's stream.

A task belongs to the person and credential scopes that made it: anyone else (another
person, a token with other scopes) gets "not found" for its id, exactly as for a made-up
one. Each keeps at most :data:`MAX_TASKS` (the oldest finished one goes first; with that many
running a new one is refused), and a task is forgotten :attr:`Task.ttl` ms after it was made
(a running one is cancelled then).

Limits, said plainly:

- A task lives in the memory of the process that made it. With several server processes
  (``serve --workers``) a poll that reaches another process answers "not found", saying that
  the id was made elsewhere; and a restart forgets every task (an import that was running rolls
  back whole). Run one worker to use tasks over HTTP, or keep a session (its requests reach
  the same process only if the proxy in front pins them).

The 2026-07-28 revision moved tasks out of the protocol into the ``io.modelcontextprotocol/tasks``
extension (SEP-2663), with another lifecycle, served here from the same registry of tasks:
``server/discover`` lists the extension; a ``tools/call`` of a task tool from a client whose
request declares the extension in its capabilities is answered with a ``CreateTaskResult``
(``resultType: "task"``) — the server decides, the request carries no ``task`` param, and a
client that does not declare it gets the ordinary result, the call run to its end. A
confirmation the policy asks for is settled first, synchronously, through the input-required
result, so such a task never waits for input. ``tasks/get`` answers the task's whole state (its
tool result once ``completed``, the JSON-RPC error once ``failed``; a tool result with
``isError`` is ``completed``), ``tasks/update`` acknowledges (nothing is ever outstanding),
``tasks/cancel`` acknowledges at once (the call stops at its next step); there is no
``tasks/list`` or ``tasks/result`` in the extension, and no progress on a task's stream.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from noteloom.accounts import TokenScopes
from noteloom.default_plugins.interop_tools import TASK_TOOLS
from noteloom.tools import UnknownTool

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from noteloom.mcp import McpCall, McpServer
    from noteloom.mcp.session import McpSession

log = logging.getLogger("noteloom.mcp.tasks")

#: The tasks extension of 2026-07-28 (SEP-2663), as a client's request and ``server/discover`` name it.
EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a message about a task names it (2025-11-25: ``_meta["io.modelcontextprotocol/related-task"]``).
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
#: Kept this long when the client asks for no ``ttl``; never longer than :data:`MAX_TTL_MS`.
DEFAULT_TTL_MS = 60 * 60 * 1000
MAX_TTL_MS = 24 * 60 * 60 * 1000
MIN_TTL_MS = 1000
#: The tasks one person-and-scopes keeps at once.
MAX_TASKS = 16
#: How often a client is told to poll, and how often expired tasks are dropped.
POLL_INTERVAL_MS = 500
SWEEP_SECONDS = 30.0
PAGE_SIZE = 50
TERMINAL = frozenset({"completed", "failed", "cancelled"})

#: Who a task belongs to: the person's id (``None``: stdio's local user) and the scopes of
#: the credential that made it.
Owner = tuple[str | None, TokenScopes]
#: The ``tools/call`` handler a task runs.
Inner = Callable[["McpCall"], Awaitable[dict[str, Any]]]


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    """One task: its state as ``tasks/get`` shows it, and what ``tasks/result`` answers."""

    id: str
    owner: Owner
    tool: str
    ttl: int
    session: McpSession | None
    status: str = "working"
    status_message: str | None = None
    created: datetime = field(default_factory=_now)
    updated: datetime = field(default_factory=_now)
    #: The tool call's result, or the JSON-RPC error it ended with.
    result: dict[str, Any] | None = None
    error: tuple[int, str] | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def expired(self) -> bool:
        return (_now() - self.created).total_seconds() * 1000 > self.ttl

    def wire(self) -> dict[str, Any]:
        task = mt.Task(
            task_id=self.id, status=self.status,  # type: ignore[arg-type]  # one of TaskStatus
            status_message=self.status_message, created_at=_iso(self.created), last_updated_at=_iso(self.updated),
            ttl=self.ttl, poll_interval=POLL_INTERVAL_MS,
        )
        return task.model_dump(by_alias=True, exclude_none=True, mode="json")

    def related(self) -> dict[str, Any]:
        return {RELATED_TASK_META_KEY: {"taskId": self.id}}

    def detailed(self) -> dict[str, Any]:
        """The task as the 2026-07-28 extension shows it (``DetailedTask``): its tool result
        once completed (a result with ``isError`` included), its JSON-RPC error once failed."""
        status = self.status
        if status == "failed" and self.error is None:
            status = "completed"  # the tool answered, with isError: a result, not a failure
        out: dict[str, Any] = {
            "taskId": self.id, "status": status, "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated), "ttlMs": self.ttl, "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status_message:
            out["statusMessage"] = self.status_message
        if status == "completed" and self.result is not None:
            out["result"] = self.result
        elif status == "failed" and self.error is not None:
            out["error"] = {"code": self.error[0], "message": self.error[1]}
        return out


class TaskNotFound(Exception):
    """No task of this owner has the id (it never existed, expired, or is someone else's)."""


class Tasks:
    """The tasks of this process (see the module's doc)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Task] = {}
        self._group: TaskGroup | None = None

    async def keep(self) -> None:
        """The server's watcher: owns the task group tasks run in, and drops expired tasks."""
        async with anyio.create_task_group() as tg:
            self._group = tg
            try:
                while True:
                    self.sweep()
                    await anyio.sleep(SWEEP_SECONDS)
            finally:
                self._group = None
                tg.cancel_scope.cancel()

    def sweep(self) -> None:
        for task in [t for t in self._by_id.values() if t.expired]:
            task.scope.cancel()
            del self._by_id[task.id]

    def mine(self, owner: Owner) -> list[Task]:
        self.sweep()
        return [t for t in self._by_id.values() if t.owner == owner]

    def get(self, task_id: Any, owner: Owner) -> Task:
        self.sweep()
        task = self._by_id.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.owner != owner:
            raise TaskNotFound(task_id)
        return task

    def start(self, owner: Owner, tool: str, ttl: int, session: McpSession | None,
              run: Callable[[Task], Coroutine[Any, Any, None]]) -> Task:
        """Make a task and start ``run(task)`` in the background; ``RuntimeError`` when the
        server is not running or the owner already runs :data:`MAX_TASKS`."""
        if self._group is None:
            raise RuntimeError("tasks run only while the server runs")
        mine = self.mine(owner)
        if len(mine) >= MAX_TASKS:
            finished = [t for t in mine if t.finished]
            if not finished:
                raise OverflowError(f"{MAX_TASKS} tasks of yours are running; wait for one to end or cancel one")
            del self._by_id[min(finished, key=lambda t: t.updated).id]
        task = Task(f"{os.getpid():x}.{secrets.token_urlsafe(18)}", owner, tool, ttl, session)
        self._by_id[task.id] = task
        self._group.start_soon(run, task)
        return task

    @staticmethod
    def made_elsewhere(task_id: Any) -> bool:
        """Whether ``task_id`` names another process as its maker (its first part)."""
        head, sep, _ = str(task_id).partition(".")
        try:
            return bool(sep) and int(head, 16) != os.getpid()
        except ValueError:
            return False


def install(server: McpServer) -> None:
    """Serve tasks on ``server``: ``tasks/*``, the ``tasks`` capability, ``taskSupport`` in
    ``tools/list`` and task-augmented ``tools/call`` (wrapping the handlers already there)."""
    from noteloom.mcp import INVALID_PARAMS, RpcError

    tasks = Tasks()
    server.add_watcher(tasks.keep)
    server.declare(
        tasks=mt.ServerTasksCapability(
            list=mt.TasksListCapability(), cancel=mt.TasksCancelCapability(),
            requests=mt.ServerTasksRequestsCapability(tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())),
        ),
        extensions={**(server.capabilities.extensions or {}), EXTENSION: {}},
    )
    inner_call: Inner = server.methods["tools/call"]
    inner_list: Inner = server.methods["tools/list"]

    def owner_of(call: McpCall) -> Owner:
        return (call.user.id if call.user is not None else None, call.pre.grant)

    def found(call: McpCall, task_id: Any) -> Task:
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(INVALID_PARAMS, "Invalid params: taskId must be a task's id (a string)")
        try:
            return tasks.get(task_id, owner_of(call))
        except TaskNotFound:
            hint = (" It was made by another server process, and a task lives only in the process that made "
                    "it: serve with one worker to use tasks over HTTP."
                    if Tasks.made_elsewhere(task_id) else
                    " Tasks are forgotten when their ttl has passed or the server restarts.")
            raise RpcError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}.{hint}") from None

    async def list_tools(call: McpCall) -> dict[str, Any]:
        result = await inner_list(call)
        result["tools"] = [{**t, "execution": {"taskSupport": "optional"}} if t.get("name") in TASK_TOOLS else t
                           for t in result.get("tools", [])]
        return result

    async def call_tool(call: McpCall) -> dict[str, Any]:
        if call.version in MODERN_PROTOCOL_VERSIONS:
            return await modern_call(call)
        wanted = call.params.get("task")
        if wanted is None:
            return await inner_call(call)
        if not isinstance(wanted, dict):
            raise RpcError(INVALID_PARAMS, 'Invalid params: task must be an object such as {"ttl": 60000}')
        ttl = wanted.get("ttl", DEFAULT_TTL_MS)
        if ttl is None:
            ttl = MAX_TTL_MS
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            raise RpcError(INVALID_PARAMS, "Invalid params: task.ttl must be a number of milliseconds")
        name = call.params.get("name")
        app = server.app
        try:
            tool = app.registry.enabled_tool(app.workspace, str(name), call.pre.tools)
            if not call.pre.allows(tool):
                raise UnknownTool(str(name))
        except UnknownTool:
            return await inner_call(call)  # it answers exactly as for any call of a missing tool
        if tool.name not in TASK_TOOLS:
            raise RpcError(mt.METHOD_NOT_FOUND, f"Method not found: {tool.name!r} does not run as a task "
                                                "(tools/list says which do: execution.taskSupport)")
        try:
            task = tasks.start(owner_of(call), tool.name, min(max(ttl, MIN_TTL_MS), MAX_TTL_MS), call.session,
                               lambda t: _run(t, call, inner_call))
        except OverflowError as exc:
            raise RpcError(mt.INVALID_REQUEST, f"Invalid Request: {exc}") from None
        except RuntimeError as exc:
            raise RpcError(mt.INTERNAL_ERROR, f"Internal error: {exc}") from None
        return {"task": task.wire(), "_meta": task.related()}

    async def modern_call(call: McpCall) -> dict[str, Any]:
        """2026-07-28: a task when the client declared the extension on this request and the
        tool runs as one, after any confirmation; else the ordinary call."""
        from noteloom.mcp import settled_before_running

        app = server.app
        name = call.params.get("name")
        if not _declares_extension(call.params) or name not in TASK_TOOLS:
            return await inner_call(call)
        try:
            tool = app.registry.enabled_tool(app.workspace, str(name), call.pre.tools)
            if not call.pre.allows(tool):
                raise UnknownTool(str(name))
        except UnknownTool:
            return await inner_call(call)
        if not await settled_before_running(server, call, tool):
            return await inner_call(call)  # the input-required result (or the refusal) it answers with
        try:
            task = tasks.start(owner_of(call), tool.name, DEFAULT_TTL_MS, None, lambda t: _run(t, call, inner_call))
        except OverflowError as exc:
            raise RpcError(mt.INVALID_REQUEST, f"Invalid Request: {exc}") from None
        except RuntimeError as exc:
            raise RpcError(mt.INTERNAL_ERROR, f"Internal error: {exc}") from None
        return {**task.detailed(), "resultType": "task"}

    async def get_task(call: McpCall) -> dict[str, Any]:
        task = found(call, call.params.get("taskId"))
        return task.detailed() if call.version in MODERN_PROTOCOL_VERSIONS else task.wire()

    async def update_task(call: McpCall) -> dict[str, Any]:
        if call.version not in MODERN_PROTOCOL_VERSIONS:
            raise RpcError(mt.METHOD_NOT_FOUND, "Method not found: tasks/update is the 2026-07-28 tasks extension's")
        found(call, call.params.get("taskId"))
        if not isinstance(call.params.get("inputResponses", {}), dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
        return {}  # nothing is outstanding: a task's confirmation was settled before it started

    def handshake_only(call: McpCall) -> None:
        if call.version in MODERN_PROTOCOL_VERSIONS:
            raise RpcError(mt.METHOD_NOT_FOUND, f"Method not found: {call.method} is not part of the 2026-07-28 "
                                                "tasks extension; tasks/get carries the result")

    async def task_result(call: McpCall) -> dict[str, Any]:
        handshake_only(call)
        task = found(call, call.params.get("taskId"))
        await task.done.wait()
        if task.error is not None:
            raise RpcError(*task.error, data={"_meta": task.related()})
        if task.status == "cancelled":
            raise RpcError(INVALID_PARAMS, f"Invalid params: task {task.id!r} was cancelled "
                                           f"({task.status_message}), so it has no result",
                           data={"_meta": task.related()})
        result = dict(task.result or {})
        result["_meta"] = {**result.get("_meta", {}), **task.related()}
        return result

    async def list_tasks(call: McpCall) -> dict[str, Any]:
        handshake_only(call)
        cursor = call.params.get("cursor")
        start = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isdigit():
                raise RpcError(INVALID_PARAMS, "Invalid params: cursor must be one a tasks/list answer gave")
            start = int(cursor)
        mine = tasks.mine(owner_of(call))
        page = mine[start:start + PAGE_SIZE]
        out: dict[str, Any] = {"tasks": [t.wire() for t in page]}
        if start + PAGE_SIZE < len(mine):
            out["nextCursor"] = str(start + PAGE_SIZE)
        return out

    async def cancel_task(call: McpCall) -> dict[str, Any]:
        task = found(call, call.params.get("taskId"))
        if call.version in MODERN_PROTOCOL_VERSIONS:
            task.scope.cancel()  # acknowledged at once; the call stops at its next step
            return {}
        if task.finished:
            raise RpcError(INVALID_PARAMS, f"Invalid params: task {task.id!r} has ended ({task.status}); "
                                           "only a working task can be cancelled")
        task.scope.cancel()
        with anyio.CancelScope(shield=True):
            await task.done.wait()  # the call stops at its next step (an import rolls back first)
        return task.wire()

    server.methods["tools/call"] = call_tool  # wraps the core handler (add_method refuses a second one)
    server.methods["tools/list"] = list_tools
    server.add_method("tasks/get", get_task)
    server.add_method("tasks/result", task_result)
    server.add_method("tasks/list", list_tasks)
    server.add_method("tasks/cancel", cancel_task)
    server.add_method("tasks/update", update_task)


def _declares_extension(params: dict[str, Any]) -> bool:
    """Whether a 2026-07-28 request's own capabilities declare the tasks extension."""
    meta = params.get("_meta")
    caps = meta.get(mt.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


async def _run(task: Task, call: McpCall, inner: Inner) -> None:
    """Run the tool call of ``task`` to its end, keeping its state and telling its session."""
    from noteloom.mcp import RpcError

    session = call.session
    meta = call.params.get("_meta")
    client_token = meta.get("progressToken") if isinstance(meta, dict) else None
    params = {k: v for k, v in call.params.items() if k != "task"}
    # Progress always reaches the task (its statusMessage); the client hears it when it asked.
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), "progressToken": client_token or f"task:{task.id}"}

    async def emit(message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "notifications/progress":
            note = message.get("params", {})
            text = note.get("message")
            task.status_message = text if isinstance(text, str) else f"{note.get('progress')} of {note.get('total')}"
            task.status, task.updated = "working", _now()  # past any confirmation it waited for
            if client_token is None:
                return
        elif "id" in message and method is not None:
            await _set(task, "input_required", "waiting for the client's answer")
        if session is None or session.closed:
            return
        out = dict(message)
        if "params" in out:
            out["params"] = {**out["params"], "_meta": {**out["params"].get("_meta", {}), **task.related()}}
        await session.send(out)

    background = replace(call, params=params, emit=emit)
    try:
        with task.scope:
            try:
                result = await inner(background)
            except RpcError as exc:
                task.error = (exc.code, exc.message)
                await _set(task, "failed", exc.message)
            except Exception:
                log.exception("MCP task %s (%s) failed", task.id, task.tool)
                task.error = (mt.INTERNAL_ERROR, "Internal error: the task failed on the server; its log has the details")
                await _set(task, "failed", "the task failed on the server")
            else:
                task.result = result
                if result.get("isError"):
                    content = result.get("content") or [{}]
                    await _set(task, "failed", str(content[0].get("text", "the tool reported an error")))
                else:
                    await _set(task, "completed", None)
        if not task.finished:
            await _set(task, "cancelled", "cancelled before it finished")
    finally:
        if not task.finished:
            task.status, task.status_message, task.updated = "cancelled", "the server stopped", _now()
        task.done.set()


async def _set(task: Task, status: str, message: str | None) -> None:
    """Move ``task`` to ``status`` and tell its session (``notifications/tasks/status``)."""
    task.status, task.status_message, task.updated = status, message, _now()
    session = task.session
    if session is not None and not session.closed:
        with anyio.CancelScope(shield=True):
            await session.notify("notifications/tasks/status", task.wire())
