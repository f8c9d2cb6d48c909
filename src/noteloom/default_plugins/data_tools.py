"""``describe_data`` and ``query_data``: generic, read-only reads over the opted-in data sources.

Both are reads that are off by default: a chat's "data" capability offers them, a recipe
lists them in its tools. What a call may read is the catalog's (:mod:`noteloom.data`):
opted in under ``[data]`` in ``noteloom.toml``, narrowed by the call's allowlist
(``ToolContext.data_sources``), owner-scoped where the rows have an owner, credential-like
columns never shown. A result holding a column declared untrusted (or a clipped note's
title) is fenced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import to_thread

from noteloom.data import DataCatalog
from noteloom.data.query import DEFAULT_LIMIT, MAX_LIMIT
from noteloom.default_plugins.workspace_tools.schemas import output_schema_of
from noteloom.hooks import hookimpl
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolResult

# One ``type`` per alternative: a list of types is legal JSON Schema but some clients map tool
# schemas onto a single-type dialect (Gemini's OpenAPI subset) and drop or refuse it.
_SCALARS: list[dict[str, Any]] = [{"type": t} for t in ("string", "number", "boolean", "null")]

_DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "names": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 200},
                  "description": "Sources to describe (their fields); leave out to list the sources."},
    },
    "additionalProperties": False,
}

_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source": {"type": "string", "minLength": 1, "maxLength": 200, "description": "A source describe_data lists."},
        "filters": {
            "type": "object", "maxProperties": 20,
            "additionalProperties": {"anyOf": [*_SCALARS,
                                               {"type": "array", "maxItems": 100, "items": {"anyOf": _SCALARS}}]},
            "description": ("FIELD: equals (a list: any of; null: empty); FIELD_like: contains the text, ignoring "
                            "case; FIELD_min / FIELD_after: >=; FIELD_max / FIELD_before: <=. Times in ISO 8601."),
        },
        "sort": {"anyOf": [{"type": "string", "maxLength": 200},
                           {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}}],
                 "description": "A field, optionally followed by asc or desc ('due desc'); or a list of them."},
        "limit": {"type": "integer", "minimum": 1,
                  "description": f"How many rows at most (default {DEFAULT_LIMIT}, capped at {MAX_LIMIT})."},
        "fields": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 200},
                   "description": "The fields to return (default: all)."},
    },
    "required": ["source"],
    "additionalProperties": False,
}


_FIELD_OUT = output_schema_of(
    {"name": {"type": "string"}, "type": {"type": "string"}, "untrusted": {"type": "boolean"}}, ["name", "type"]
)
_DESCRIBE_OUT = output_schema_of(
    {
        "sources": {"type": "array", "items": output_schema_of(
            {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "fields": {"type": "array", "items": _FIELD_OUT, "description": "Present when sources are named."},
                "owner": {"type": "string"},
            },
            ["name", "description"],
        )},
        "filters": {"type": "string", "description": "How query_data filters are written."},
        "limit": {"type": "string"},
        "not_found": {"type": "array", "items": {"type": "string"}},
        "message": {"type": "string"},
    },
    ["sources"],
)
_QUERY_OUT = output_schema_of(
    {
        "source": {"type": "string"},
        "rows": {"type": "array", "items": {"type": "object"}, "description": "One object per row, by field name."},
        "count": {"type": "integer"},
        "has_more": {"type": "boolean"},
        "limit": {"type": "integer"},
        "note": {"type": "string"},
        "values_cut": {"type": "string"},
    },
    ["source", "rows", "count", "has_more"],
)


def _catalog(ctx: ToolContext) -> DataCatalog:
    catalog = ctx.services.get("data")
    if not isinstance(catalog, DataCatalog):
        raise ToolError("generic reads are not available in this app")
    return catalog


async def _describe(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    catalog = _catalog(ctx)
    result: dict[str, Any] = await to_thread.run_sync(catalog.describe, ctx, args.get("names"))
    return result


async def _query(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    catalog = _catalog(ctx)
    payload, untrusted = await to_thread.run_sync(catalog.query, ctx, args)
    return ToolResult(payload, untrusted=untrusted)


DESCRIBE_DATA = ToolDef(
    name="describe_data",
    title="Describe data sources",
    description=(
        "List the structured data sources you may read (no names), or give the fields and types of the "
        "sources named. Call it before query_data."
    ),
    input_schema=_DESCRIBE_SCHEMA,
    output_schema=_DESCRIBE_OUT,
    handler=_describe,
    effect="read",
    default_enabled=False,
    requires=("data",),
)

QUERY_DATA = ToolDef(
    name="query_data",
    title="Query a data source",
    description=(
        "Read rows of one data source (describe_data lists them and their fields): filter by field "
        "(FIELD, FIELD_like, FIELD_min/FIELD_after, FIELD_max/FIELD_before), sort, choose fields, limit. Read-only."
    ),
    input_schema=_QUERY_SCHEMA,
    output_schema=_QUERY_OUT,
    handler=_query,
    effect="read",
    default_enabled=False,
    requires=("data",),
    untrusted_output=True,
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``describe_data`` and ``query_data``."""
    register(DESCRIBE_DATA)
    register(QUERY_DATA)
