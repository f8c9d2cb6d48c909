"""MCP prompts: ``prompts/list`` (paged) and ``prompts/get``, for noteloom's own prompts and
those plugins register (``register_mcp_prompts``; ``noteloom.promptdefs`` has the shapes).

A prompt runs as the asker: its ``get`` is given the request's ``ToolContext`` (the notebook
scope, narrowed by the token) and reads only what tools would. A prompt that names tools in
``uses_tools`` is listed and served only while each of them is enabled and allowed by the
token (a read-only token allows read tools; an allowlist only its tools; a notebook-scoped
token only tools that stay within notebooks), so nothing reaches a client through a prompt
that its tools would refuse; asked for anyway, it is an unknown prompt. When a switch (in
any process) shows or hides a prompt, every session is sent
``notifications/prompts/list_changed``.

Errors: an unknown (or hidden) prompt, a missing required argument, an argument the prompt
does not have or that is not a string, and a ``ToolError`` the prompt raises (a note that is
not there) are -32602 with a message saying which; a prompt that returns messages MCP cannot
carry is a bug, -32603.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import anyio
import mcp_types as mt
import pluggy
from anyio import to_thread
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from noteloom.errors import NoteloomError
from noteloom.promptdefs import McpPrompt
from noteloom.tools import UnknownTool

if TYPE_CHECKING:
    from noteloom.mcp import McpCall, McpServer, Preflight

log = logging.getLogger("noteloom.mcp.prompts")

#: Prompts per ``prompts/list`` page.
PAGE_SIZE = 50
_BOOKS: WeakKeyDictionary[McpServer, dict[str, McpPrompt]] = WeakKeyDictionary()


def collect(pm: pluggy.PluginManager) -> dict[str, McpPrompt]:
    """The prompts plugins register, by name, in the order the plugins were loaded (noteloom's
    own first). A second prompt of one name replaces the first in its place, with a warning:
    the plugin loaded later wins, as for pipeline jobs. Anything that is not an
    :class:`McpPrompt` is refused."""
    found: dict[str, McpPrompt] = {}

    def register(prompt: McpPrompt) -> None:
        if not isinstance(prompt, McpPrompt):
            raise TypeError(f"{prompt!r} is no MCP prompt: register an McpPrompt")
        if not prompt.name or not prompt.description:
            raise TypeError(f"MCP prompt {prompt.name!r} needs a name and a description")
        if prompt.name in found:
            log.warning("MCP prompt %r is registered twice; the plugin loaded later replaces the other", prompt.name)
        found[prompt.name] = prompt

    # Each implementation on its own, in registration order (calling the hook runs the
    # last-registered first, which would list a plugin's prompts before noteloom's).
    for impl in pm.hook.register_mcp_prompts.get_hookimpls():
        impl.function(**{name: register for name in impl.argnames})
    return found


def install(server: McpServer) -> None:
    """Answer ``prompts/list`` and ``prompts/get``, declare the ``prompts`` capability (with
    ``listChanged``), and watch the tool switches that show and hide prompts."""
    _BOOKS[server] = collect(server.app.plugins)
    server.add_method("prompts/list", _list)
    server.add_method("prompts/get", _get)
    server.declare(prompts=mt.PromptsCapability(list_changed=True))
    server.add_watcher(lambda: watch_toggles(server))


def prompts_of(server: McpServer) -> dict[str, McpPrompt]:
    """Every prompt the server knows, hidden or not (``available`` says which a call sees)."""
    return _BOOKS.get(server, {})


def available(call: McpCall, prompt: McpPrompt) -> bool:
    """Whether this request may see ``prompt``: every tool it uses is enabled and allowed."""
    return visible(call.server, call.pre, prompt)


def visible(server: McpServer, pre: Preflight, prompt: McpPrompt) -> bool:
    """Whether ``prompt`` is there for a request read with ``pre`` (toggles and token)."""
    registry, ws = server.app.registry, server.app.workspace
    for name in prompt.uses_tools:
        try:
            tool = registry.enabled_tool(ws, name, pre.tools)
        except UnknownTool:
            return False
        if not pre.allows(tool):
            return False
    return True


async def watch_toggles(server: McpServer) -> None:
    """Send ``notifications/prompts/list_changed`` to every session when a tool switch (set
    by any process: the switches live in the database) shows or hides a prompt. A token's
    scopes stay as they are for a session's life, so the switches are all that can change."""
    from noteloom.mcp import REREAD_INTERVAL, WATCH_INTERVAL

    ws = server.app.workspace
    seen: frozenset[str] | None = None
    checked: int | None = None
    last_read = 0.0
    while True:
        mark, now = ws.data_version.current(), anyio.current_time()
        if seen is None or mark != checked or (mark is None and now - last_read >= REREAD_INTERVAL):
            checked, last_read = mark, now
            pre = await to_thread.run_sync(server.preflight)
            names = frozenset(n for n, p in prompts_of(server).items() if visible(server, pre, p))
            if seen is not None and names != seen:
                await server.sessions.broadcast("notifications/prompts/list_changed")
            seen = names
        await anyio.sleep(WATCH_INTERVAL)


def find(call: McpCall, name: Any) -> McpPrompt:
    """The prompt ``name`` this request may use, or -32602 naming it."""
    from noteloom.mcp import INVALID_PARAMS, RpcError

    if not isinstance(name, str) or not name:
        raise RpcError(INVALID_PARAMS, "Invalid params: the prompt's name is missing (params.name)")
    prompt = prompts_of(call.server).get(name)
    if prompt is None or not available(call, prompt):
        raise RpcError(INVALID_PARAMS, f"Unknown prompt: {name!r}; prompts/list shows the prompts there are")
    return prompt


def prompt_wire(prompt: McpPrompt) -> dict[str, Any]:
    wire = mt.Prompt(
        name=prompt.name,
        title=prompt.title,
        description=prompt.description,
        arguments=[mt.PromptArgument(name=a.name, description=a.description or None, required=a.required)
                   for a in prompt.arguments],
    )
    return wire.model_dump(by_alias=True, exclude_none=True, mode="json")


def _cursor(params: Mapping[str, Any]) -> int:
    from noteloom.mcp import INVALID_PARAMS, RpcError

    cursor = params.get("cursor")
    if cursor is None:
        return 0
    try:
        start = int(base64.urlsafe_b64decode(str(cursor).encode("ascii")).decode("ascii"))
    except (ValueError, binascii.Error, UnicodeError):
        start = -1
    if start < 0:
        raise RpcError(INVALID_PARAMS, f"Invalid params: cursor {cursor!r} is not one prompts/list gave")
    return start


def _next_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(str(offset).encode("ascii")).decode("ascii")


async def _list(call: McpCall) -> dict[str, Any]:
    start = _cursor(call.params)
    shown = [p for p in prompts_of(call.server).values() if available(call, p)]
    page = shown[start:start + PAGE_SIZE]
    out: dict[str, Any] = {"prompts": [prompt_wire(p) for p in page]}
    if start + PAGE_SIZE < len(shown):
        out["nextCursor"] = _next_cursor(start + PAGE_SIZE)
    if call.version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28's cache hints: the list follows the tool switches (which change at any
        # moment) and the asker's token, so it is cached by no one.
        out.update(ttlMs=0, cacheScope="private")
    return out


def check_arguments(prompt: McpPrompt, raw: Any) -> dict[str, str]:
    """The arguments as ``get`` receives them, or -32602 saying what is wrong with them."""
    from noteloom.mcp import INVALID_PARAMS, RpcError

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: params.arguments must be an object of strings")
    known = {a.name for a in prompt.arguments}
    unknown = sorted(set(raw) - known)
    if unknown:
        have = ", ".join(sorted(known)) or "none"
        raise RpcError(INVALID_PARAMS, f"Invalid params: prompt {prompt.name!r} has no argument {unknown[0]!r} "
                                       f"(its arguments: {have})")
    for key, value in raw.items():
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, f"Invalid params: argument {key!r} must be a string")
    missing = [a.name for a in prompt.arguments if a.required and not str(raw.get(a.name, "")).strip()]
    if missing:
        raise RpcError(INVALID_PARAMS, f"Invalid params: prompt {prompt.name!r} needs the argument {missing[0]!r}")
    return dict(raw)


async def _get(call: McpCall) -> dict[str, Any]:
    from noteloom.mcp import INTERNAL_ERROR, INVALID_PARAMS, RpcError

    prompt = find(call, call.params.get("name"))
    arguments = check_arguments(prompt, call.params.get("arguments"))
    try:
        messages = await prompt.get(call.tool_context(), arguments)
    except NoteloomError as exc:  # a ToolError (a note that is not there), a bad query, an embedder down
        raise RpcError(INVALID_PARAMS, f"Prompt {prompt.name!r}: {exc}") from None
    try:
        wire = [mt.PromptMessage.model_validate(m).model_dump(by_alias=True, exclude_none=True, mode="json")
                for m in messages]
    except (ValidationError, TypeError):
        log.exception("MCP prompt %r returned messages MCP cannot carry", prompt.name)
        raise RpcError(INTERNAL_ERROR, "Internal error: the prompt failed on the server; its log has the details") from None
    out: dict[str, Any] = {"description": prompt.description, "messages": wire}
    return out
