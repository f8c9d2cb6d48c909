"""MCP ``completion/complete``: suggestions for a prompt's arguments and a resource
template's variables as the user types them.

A prompt argument is completed by its ``PromptArgument.complete`` (noteloom's prompts
suggest notebook paths, note titles and tags, through the full-text index and the notebook
list); a resource template's variable by ``noteloom.mcp.resources.complete`` (the resources
feature, which ranks its own: the values are ids, matched by the titles they stand for). Both run as the asker (``call.tool_context()``), so only
what they may see is ever suggested, and both are given ``context.arguments``, the other
arguments chosen so far (a tag within the chosen notebook, say).

The values are ranked here, case-insensitively: those that start with what was typed, then
those that contain it, then those holding each of its words, each group in alphabetical
order; others are dropped. At most
100 are sent, with ``total`` (how many matched) and ``hasMore``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as mt

from noteloom.errors import NoteloomError
from noteloom.mcp.prompts import find

if TYPE_CHECKING:
    from noteloom.mcp import McpCall, McpServer
    from noteloom.tools import ToolContext

log = logging.getLogger("noteloom.mcp.completion")

#: The most values one answer carries (the protocol's limit).
MAX_VALUES = 100


def install(server: McpServer) -> None:
    """Answer ``completion/complete`` and declare the ``completions`` capability."""
    server.add_method("completion/complete", _complete)
    server.declare(completions=mt.CompletionsCapability())


def rank(candidates: Iterable[str], typed: str) -> list[str]:
    """``candidates`` that fit ``typed``, best first (see the module's docstring), each once."""
    want = typed.strip().lower()
    words = want.split()
    tiers: tuple[list[str], list[str], list[str]] = ([], [], [])
    seen: set[str] = set()
    for value in candidates:
        if not isinstance(value, str) or not value or value in seen:
            continue
        seen.add(value)
        lower = value.lower()
        if lower.startswith(want):
            tiers[0].append(value)
        elif want in lower:
            tiers[1].append(value)
        elif words and all(w in lower for w in words):
            tiers[2].append(value)
    return [v for tier in tiers for v in sorted(tier, key=lambda v: (v.lower(), v))]


def _bad(message: str) -> Exception:
    from noteloom.mcp import INVALID_PARAMS, RpcError

    return RpcError(INVALID_PARAMS, f"Invalid params: {message}")


def _strings(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise _bad(f"{where} must be an object of strings")
    return dict(raw)


async def _complete(call: McpCall) -> dict[str, Any]:
    params = call.params
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(ref.get("type"), str):
        raise _bad("ref must be an object with a type (ref/prompt or ref/resource)")
    if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
        raise _bad("argument must be an object with a name and a value")
    name, value = argument["name"], argument.get("value", "")
    if not isinstance(value, str):
        raise _bad("argument.value must be a string")
    context = params.get("context")
    chosen = _strings(context.get("arguments") if isinstance(context, dict) else None, "context.arguments")
    ctx = call.tool_context()
    try:
        if ref["type"] == "ref/prompt":
            candidates = await _for_prompt(call, ctx, ref.get("name"), name, value, chosen)
        elif ref["type"] == "ref/resource":
            uri = ref.get("uri")
            if not isinstance(uri, str) or not uri:
                raise _bad("ref/resource needs the template's uri")
            # A template this request is not offered (its read tool is off or outside the
            # token) completes to nothing: its ids would tell what cannot be read.
            if not _offered(call, uri):
                return _answer([])
            # Ranked there: a template's values are ids, found by the titles they stand for.
            found = await _for_resource(ctx, uri, name, value, chosen)
            return _answer(list(found))
        else:
            raise _bad(f"ref.type {ref['type']!r} is neither ref/prompt nor ref/resource")
    except NoteloomError as exc:  # a notebook in the context that is not there, a query that is not one
        log.debug("completion found nothing: %s", exc)
        candidates = []
    return _answer(rank(candidates, value))


def _answer(matched: list[str]) -> dict[str, Any]:
    page = matched[:MAX_VALUES]
    completion = mt.Completion(values=page, total=len(matched), has_more=len(matched) > len(page))
    return {"completion": completion.model_dump(by_alias=True, exclude_none=True, mode="json")}


async def _for_prompt(
    call: McpCall, ctx: ToolContext, prompt_name: Any, name: str, value: str, chosen: Mapping[str, str]
) -> Sequence[str]:
    prompt = find(call, prompt_name)
    arg = prompt.argument(name)
    if arg is None:
        have = ", ".join(a.name for a in prompt.arguments) or "none"
        raise _bad(f"prompt {prompt.name!r} has no argument {name!r} (its arguments: {have})")
    if arg.complete is None:
        return []
    return await arg.complete(ctx, value, chosen)


def _offered(call: McpCall, uri: str) -> bool:
    from noteloom.mcp.resources import offers

    return offers(call, uri)


async def _for_resource(ctx: ToolContext, uri: str, name: str, value: str, chosen: Mapping[str, str]) -> Sequence[str]:
    from noteloom.mcp.resources import complete  # it imports this package: at the first call

    return await complete(ctx, uri, name, value, chosen)
