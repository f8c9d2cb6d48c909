"""JSON schemas the workspace tools (and semantic_search_notes) declare for their input and output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from noteloom.tooldefs import TEXT_OUTPUT_SCHEMA

NOTE_ID = {"type": "string", "description": "The note's id (32 hex characters), as search_notes returns it."}


def nullable(*types: str, **extra: Any) -> dict[str, Any]:
    """``anyOf`` single types rather than a type array: clients that map schemas onto a
    one-type dialect (function declarations of some model providers) understand it."""
    return {"anyOf": [{"type": t} for t in (*types, "null")], **extra}


TIME_SCHEMA = {"type": "string", "description": "ISO 8601 UTC date-time."}
_MAYBE_TIME = nullable("string", description="ISO 8601 UTC date-time, or null.")
NOTE_META_PROPS: dict[str, Any] = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "notebook_id": {"type": "string"},
    "notebook": {"type": "string", "description": "The notebook's title."},
    "tags": {"type": "array", "items": {"type": "string"}},
    "created_time": TIME_SCHEMA,
    "updated_time": TIME_SCHEMA,
    "is_todo": {"type": "boolean"},
    "todo_due": _MAYBE_TIME,
    "todo_completed": _MAYBE_TIME,
    "source_url": {"type": "string", "description": "Where the note was clipped from, if it was."},
}
NOTE_META_REQUIRED = ["id", "title", "notebook_id", "notebook", "tags", "created_time", "updated_time", "is_todo"]
PAGE_PROPS: dict[str, Any] = {
    "body": {"type": "string"},
    "body_length": {"type": "integer", "description": "Characters in the whole text being paged."},
    "body_offset": {"type": "integer"},
    "body_returned_chars": {"type": "integer"},
    "has_more": {"type": "boolean"},
    "is_outline": {"type": "boolean"},
    "message": {"type": "string"},
}


def input_schema_of(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An input schema: closed, so a misspelt argument is an error rather than ignored."""
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def output_schema_of(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An output schema: open to fields added later."""
    return {"type": "object", "properties": props, "required": list(required)}


#: What every search hit carries (search_notes, semantic_search_notes).
HIT_PROPS: dict[str, Any] = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "notebook_id": {"type": "string"},
    "notebook": {"type": "string"},
    "updated_time": TIME_SCHEMA,
    "snippet": {"type": "string"},
    "section": {"type": "string"},
    "section_heading": {"type": "string"},
}
NOTE_OUT = output_schema_of({**NOTE_META_PROPS, "body_length": {"type": "integer"}}, [*NOTE_META_REQUIRED, "body_length"])
NOTEBOOK_OUT = output_schema_of(
    {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "parent_id": nullable("string"),
        "path": {"type": "string", "description": "Titles from the top, joined by '/'."},
        "note_count": {"type": "integer"},
    },
    ["id", "title", "parent_id", "path"],
)
#: The output schema of a tool whose result is text (a file, a folder listing): MCP's
#: ``structuredContent`` is ``{"text": <the text>}`` beside the same text as content, while
#: the chat and recipes read the text itself.
TEXT_OUT = TEXT_OUTPUT_SCHEMA
