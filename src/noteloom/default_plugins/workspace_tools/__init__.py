"""The built-in workspace tools: search, read and list notes (on by default), write them (off).

Every tool registers through the same ``register_tools`` hook a third-party plugin
uses. Handlers do their blocking work in one worker thread each and honour the
notebook scope: whatever lies outside it does not exist for a tool, with the very
same message as a missing thing. Dates travel as ISO 8601 strings (UTC out), since
models read and write those far better than epoch milliseconds.

``common`` holds the handler and answer plumbing, ``scope`` the notebook scope,
``schemas`` the JSON schemas, ``read`` and ``write`` the tools themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from noteloom.default_plugins.workspace_tools.common import (
    iso,
    note_meta,
    parse_time,
    threaded,
    untrusted_if,
)
from noteloom.default_plugins.workspace_tools.read import (
    LIST_NOTEBOOKS,
    LIST_TAGS,
    LIST_TRASH,
    READ_BUDGET,
    READ_NOTE,
    READ_NOTES,
    READ_NOTES_MAX,
    READ_TOOLS,
    SEARCH_MAX,
    SEARCH_NOTES,
    share_budget,
    text_page,
)
from noteloom.default_plugins.workspace_tools.schemas import (
    HIT_PROPS,
    TIME_SCHEMA,
    input_schema_of,
    output_schema_of,
)
from noteloom.default_plugins.workspace_tools.scope import (
    Books,
    notebook_titles,
    read_only,
    target_notebook,
    visible_note,
    writable_note,
)
from noteloom.default_plugins.workspace_tools.write import (
    CREATE_NOTE,
    CREATE_NOTEBOOK,
    DELETE_NOTE,
    MANAGE_TAGS,
    RESTORE_NOTE,
    UPDATE_NOTE,
    WRITE_TOOLS,
)
from noteloom.hooks import hookimpl
from noteloom.tools import ToolDef

__all__ = [
    "CREATE_NOTE",
    "CREATE_NOTEBOOK",
    "DELETE_NOTE",
    "HIT_PROPS",
    "LIST_NOTEBOOKS",
    "LIST_TAGS",
    "LIST_TRASH",
    "MANAGE_TAGS",
    "READ_BUDGET",
    "READ_NOTE",
    "READ_NOTES",
    "READ_NOTES_MAX",
    "READ_TOOLS",
    "RESTORE_NOTE",
    "SEARCH_MAX",
    "SEARCH_NOTES",
    "TIME_SCHEMA",
    "UPDATE_NOTE",
    "WRITE_TOOLS",
    "Books",
    "input_schema_of",
    "iso",
    "note_meta",
    "notebook_titles",
    "output_schema_of",
    "parse_time",
    "read_only",
    "register_tools",
    "share_budget",
    "target_notebook",
    "text_page",
    "threaded",
    "untrusted_if",
    "visible_note",
    "writable_note",
]


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register every built-in workspace tool."""
    for tool in (*READ_TOOLS, *WRITE_TOOLS):
        register(tool)
