"""``read_file`` and ``list_dir``: the folders the user shares under ``[files]`` in ``noteloom.toml``.

Both are reads (no sign-off) and exist only while a folder is shared: they require the
"folders" service, which the composition root makes from ``[files] roots`` (absent, the
tools are left out everywhere: chat, recipes, MCP). What they may reach, and how, is
:mod:`noteloom.folders`: one chokepoint confines every path to its root, and results are
capped at 12 KiB. A file's text is outside content: the agent fences it (``untrusted_output``).

The folders are the owner's (the files of the machine the owner runs noteloom on, named in
``noteloom.toml``): only calls acting for the owner reach them; for anyone else no folder is
shared, in the very words of an app without any.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import to_thread

from noteloom.default_plugins.workspace_tools.schemas import TEXT_OUT
from noteloom.folders import MAX_PATH_CHARS, MAX_RESULT_BYTES, Folders
from noteloom.hooks import hookimpl
from noteloom.tools import ToolContext, ToolDef, ToolError

_ADDRESSING = (
    "With one shared folder a path is relative to it ('src/main.py'); with several it starts with "
    "the folder's name ('projects/src/main.py'), and list_dir with no path lists the folders. Paths "
    "never start with / and never contain '..'."
)

_READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS,
                 "description": "The file's path, as list_dir shows it."},
    },
    "required": ["path"],
    "additionalProperties": False,
}

_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "maxLength": MAX_PATH_CHARS,
                 "description": "The folder's path; leave it out for the shared folder itself."},
    },
    "additionalProperties": False,
}


def _folders(ctx: ToolContext) -> Folders:
    folders = ctx.services.get("folders")
    if not isinstance(folders, Folders) or (ctx.user is not None and ctx.user.role != "owner"):
        raise ToolError("no folder is shared in this app; the user lists them under [files] roots in noteloom.toml")
    return folders


async def _read(ctx: ToolContext, args: dict[str, Any]) -> str:
    folders = _folders(ctx)
    text: str = await to_thread.run_sync(folders.read_file, args["path"])
    return text


async def _list(ctx: ToolContext, args: dict[str, Any]) -> str:
    folders = _folders(ctx)
    text: str = await to_thread.run_sync(folders.list_dir, args.get("path"))
    return text


READ_FILE = ToolDef(
    name="read_file",
    title="Read a file from a shared folder",
    description=(
        "Read a text file from the folders the user shared. Returns its text, cut at "
        f"{MAX_RESULT_BYTES // 1024} KiB with a [truncated N bytes] marker; images, PDFs, archives and other "
        f"binary files are refused, naming their kind. {_ADDRESSING} Read-only."
    ),
    input_schema=_READ_SCHEMA,
    output_schema=TEXT_OUT,
    handler=_read,
    effect="read",
    requires=("folders",),
    untrusted_output=True,
)

LIST_DIR = ToolDef(
    name="list_dir",
    title="List a shared folder",
    description=(
        "List a folder the user shared, one entry a line: 'd name' for a folder, 'f name' for a file, "
        "'l name' for a link that leads outside the shared folder (not followed); folders first, hidden "
        f"files included, '(empty)' for an empty folder, cut at {MAX_RESULT_BYTES // 1024} KiB. {_ADDRESSING} "
        "Read-only."
    ),
    input_schema=_LIST_SCHEMA,
    output_schema=TEXT_OUT,
    handler=_list,
    effect="read",
    requires=("folders",),
    untrusted_output=True,
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``read_file`` and ``list_dir``."""
    register(READ_FILE)
    register(LIST_DIR)
