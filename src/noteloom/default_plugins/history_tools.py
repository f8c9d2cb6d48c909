"""``search_conversations``: the acting user's own past chats, found by keyword.

A read tool that is off by default: the chat's "history" capability offers it, apart
from workspace access, since everything a user ever discussed is broader and more
private than their notes. Past text may quote clipped pages or tool output, so its
results are fenced as untrusted. The matching itself lives in :mod:`noteloom.chat.search`:
protected (private, fortress) chats are searched only when the chat turn lent the owner's
keys, which it does on a private model's turn only; otherwise the result says, in a fixed
sentence, that they were left out (never whether they matched).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import to_thread

from noteloom.default_plugins.workspace_tools.schemas import TIME_SCHEMA, output_schema_of
from noteloom.hooks import hookimpl
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolResult
from noteloom.workspace.model import iso_time

DEFAULT_LIMIT = 10

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200,
                  "description": "Words to find, matched literally (no operators or wildcards), ignoring case."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": DEFAULT_LIMIT,
                  "description": "How many conversations at most."},
    },
    "required": ["query"],
    "additionalProperties": False,
}


_OUTPUT = output_schema_of(
    {
        "conversations": {"type": "array", "items": output_schema_of(
            {"conversation_id": {"type": "string"}, "title": {"type": "string"}, "date": TIME_SCHEMA,
             "started": TIME_SCHEMA, "matched": {"type": "string"}, "snippet": {"type": "string"}},
            ["conversation_id", "title", "date", "started", "matched", "snippet"],
        )},
        "has_more": {"type": "boolean"},
        "message": {"type": "string"},
        "protected": {"type": "string", "description": "Why protected conversations were not searched."},
    },
    ["conversations", "has_more"],
)


def _search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    # The chat loads only when used.
    from noteloom.chat.search import (
        PROTECTED_SKIPPED,
        SEALED_READER,
        has_protected,
        search_conversations,
    )
    from noteloom.vault import Keys

    if ctx.user is None:
        raise ToolError("past conversations belong to a user; this call has none (sign in, or use a token)")
    query = str(args["query"])
    if not query.strip():
        raise ToolError("argument 'query': give some words to look for")
    here = ctx.origin.conversation_id if ctx.origin is not None else None
    lent = ctx.settings.get(SEALED_READER)
    keys = lent if isinstance(lent, Keys) and lent.user_id == ctx.user.id else None
    with ctx.workspace.read() as conn:
        hits, more = search_conversations(
            conn, ctx.user.id, query, limit=int(args.get("limit", DEFAULT_LIMIT)), exclude=here, keys=keys
        )
        skipped = keys is None and has_protected(conn, ctx.user.id)
    found = [
        {
            "conversation_id": h.conversation_id,
            "title": h.title,
            "date": iso_time(h.updated_time),
            "started": iso_time(h.created_time),
            "matched": h.matched,
            "snippet": h.snippet,
        }
        for h in hits
    ]
    payload: dict[str, Any] = {"conversations": found, "has_more": more}
    if not found:
        payload["message"] = "No past conversation of yours mentions that; try other words."
    if skipped:
        payload["protected"] = PROTECTED_SKIPPED
    return ToolResult(payload, untrusted=bool(found))


async def _handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return await to_thread.run_sync(_search, ctx, args)


SEARCH_CONVERSATIONS = ToolDef(
    name="search_conversations",
    title="Search past conversations",
    description=(
        "Find the user's own earlier chats by keyword, in their titles and messages (this chat is left "
        "out). Returns each conversation's id, title, date of last activity and a snippet around the "
        "match, most recent first. Use it when the user refers to something discussed before."
    ),
    input_schema=_SCHEMA,
    output_schema=_OUTPUT,
    handler=_handler,
    effect="read",
    default_enabled=False,
    untrusted_output=True,
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``search_conversations``."""
    register(SEARCH_CONVERSATIONS)
