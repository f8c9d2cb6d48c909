"""``import_notes``, ``export_notes`` and ``reindex``: the long jobs of ``noteloom import``,
``noteloom export`` and ``noteloom index``, as tools (and, over MCP, as tasks a client polls:
:mod:`noteloom.mcp.tasks`).

Import and export reach files only inside the folders named in ``noteloom.toml``::

    [mcp]
    file_roots = ["~/Notes/inbox", "~/Backups/notes"]

A path is taken as given when absolute, else under the first root; it must lie inside a root
after every symbolic link is followed (an export's destination: its folder). With no roots
the tools say how to name them. The roots are folders of the machine the owner runs noteloom
on, so only calls acting for the owner reach them (as ``read_file`` does).

All three are off by default (they write). They honour the notebook scope: an import into a
limited scope must name a notebook the asker may write, and an export writes only the
notebooks the asker may read. Each reports progress to an MCP client that asked for it and
stops at its next step when its call is cancelled (an import rolls back whole: nothing of it
stays; an export leaves no partial folder or file; a reindex keeps the batches it finished).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anyio import from_thread, to_thread

from noteloom.default_plugins.workspace_tools.common import progress_reporter
from noteloom.default_plugins.workspace_tools.schemas import input_schema_of, output_schema_of
from noteloom.hooks import hookimpl
from noteloom.tools import ToolContext, ToolDef, ToolError

if TYPE_CHECKING:  # the interop code loads when a call needs it, not with every app
    from noteloom.interop import ExportFormat
    from noteloom.interop.bundle import ExportSummary, Progress

#: What the phases of an import or export are called in a progress message.
PHASES = {"reading": "reading", "writing": "writing notes", "files": "copying files", "exporting": "writing files"}
HOW_TO_CONFIGURE = (
    'name the folders import and export may use in noteloom.toml: [mcp] file_roots = ["~/Notes/inbox"]'
)

_COUNT = {"type": "integer", "minimum": 0}
_MESSAGES = {"type": "array", "items": {"type": "string"}}

IMPORT_IN = input_schema_of({
    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
             "description": "A Markdown folder, a Joplin RAW export folder or a .jex file, inside a file root "
                            "([mcp] file_roots); relative paths are under the first root."},
    "notebook": {"type": "string", "maxLength": 1000,
                 "description": "Import under this notebook (title, Parent/Child path or id); default: a new "
                                "notebook named after the folder."},
    "inline_tags": {"type": "boolean", "description": "Also read #tags written in Markdown text."},
    "duplicates": {"enum": ["skip", "new-ids"],
                   "description": "When an id exists already: skip that item (default) or give it a new id."},
}, ["path"])
IMPORT_OUT = output_schema_of({
    "source": {"type": "string"}, "format": {"type": "string"}, "notebooks": _COUNT, "notes": _COUNT,
    "tags": _COUNT, "attachments": _COUNT, "skipped": _COUNT, "warnings": _COUNT, "messages": _MESSAGES,
    "skipped_items": {"type": "array", "items": {"type": "object"}},
}, ["source", "format", "notebooks", "notes", "tags", "attachments", "skipped", "warnings", "messages"])

EXPORT_IN = input_schema_of({
    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
             "description": "Where to write, inside a file root: a new folder (md) or a new .jex file."},
    "format": {"enum": ["md", "jex"], "description": "md (a Markdown folder) or jex (a Joplin archive); "
                                                     "default from the path's suffix."},
}, ["path"])
EXPORT_OUT = output_schema_of({
    "destination": {"type": "string"}, "format": {"type": "string"}, "notebooks": _COUNT, "notes": _COUNT,
    "tags": _COUNT, "attachments": _COUNT, "warnings": _COUNT, "messages": _MESSAGES,
}, ["destination", "format", "notebooks", "notes", "tags", "attachments", "warnings", "messages"])

REINDEX_IN = input_schema_of({
    "rebuild": {"type": "boolean", "description": "Forget every vector and embed all notes again "
                                                  "(default: only notes changed since the last run)."},
})
REINDEX_OUT = output_schema_of({
    "indexed": {**_COUNT, "description": "Notes embedded by this call."},
    "rebuilt": {"type": "boolean"}, "notes": _COUNT, "chunks": _COUNT, "model": {"type": "string"},
}, ["indexed", "rebuilt", "notes", "chunks", "model"])


def file_roots(ctx: ToolContext) -> list[Path]:
    """The folders of ``[mcp] file_roots``, resolved; :class:`ToolError` saying how to name
    them when there are none, or when the asker is not the owner."""
    if ctx.user is not None and ctx.user.role != "owner":
        raise ToolError("import and export reach the owner's files, so only the owner may use them")
    section = ctx.settings.get("mcp", {})
    raw = section.get("file_roots") if isinstance(section, Mapping) else None
    if isinstance(raw, str):
        raw = [raw]
    if not raw:
        raise ToolError(f"no folder is open to import and export; {HOW_TO_CONFIGURE}")
    if not isinstance(raw, list) or not all(isinstance(r, str) and r for r in raw):
        raise ToolError(f"[mcp] file_roots must be a list of folders; {HOW_TO_CONFIGURE}")
    base = ctx.workspace.data_dir
    return [(base / Path(r).expanduser()).resolve() for r in raw]


def inside_roots(ctx: ToolContext, given: str, *, new: bool = False) -> Path:
    """``given`` as a path inside a file root (symbolic links followed; for a ``new`` path,
    those of its folder), else :class:`ToolError` naming the roots."""
    roots = file_roots(ctx)
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = roots[0] / path
    real = path.parent.resolve() / path.name if new else path.resolve()
    if not any(real == root or real.is_relative_to(root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise ToolError(f"{given!r} is outside the folders import and export may use ({shown}); "
                        "give a path inside one of them, or add its folder to [mcp] file_roots")
    return real


def _reporter(ctx: ToolContext) -> Progress:
    """A progress callback for the interop code's worker thread: reports to the MCP client
    and, first, stops the call when it has been cancelled (by raising the cancellation
    into the thread, which an import's transaction rolls back on). A final report (nothing
    left to do) does not stop it: a .jex export sends it once its file is in place."""
    report = progress_reporter(ctx)

    def progress(phase: str, done: int, total: int) -> None:
        if done < total:
            from_thread.check_cancelled()
        if report is not None:
            report(done, total or None, f"{PHASES.get(phase, phase)} {done}/{total}")

    return progress


async def _import(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from noteloom.interop import ImportLimits, import_path

    path = inside_roots(ctx, args["path"])
    notebook = args.get("notebook") or None
    progress = _reporter(ctx)

    def run() -> dict[str, Any]:
        if notebook is not None:
            book = ctx.workspace.find_notebook(notebook)
            writable = ctx.scope.writable_ids(ctx.workspace.list_notebooks(with_counts=False))
            if writable is not None and book.id not in writable:
                raise ToolError(f"no notebook {notebook!r} you may write to; list_notebooks shows them")
            target: str | None = book.id
        else:
            if not ctx.scope.unrestricted:
                raise ToolError("name the notebook to import into (notebook): your access reaches only some "
                                "notebooks, and an import without one makes a new top-level notebook")
            target = None
        limits = ImportLimits.from_section(ctx.settings.get("import", {}))
        summary = import_path(ctx.workspace, path, notebook=target, inline_tags=bool(args.get("inline_tags")),
                              duplicates=args.get("duplicates", "skip"), progress=progress, limits=limits)
        return asdict(summary)

    result: dict[str, Any] = await to_thread.run_sync(run)
    return result


async def _export(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    dest = inside_roots(ctx, args["path"], new=True)
    fmt: ExportFormat = args.get("format") or ("jex" if dest.suffix.lower() == ".jex" else "md")
    progress = _reporter(ctx)
    result: dict[str, Any] = await to_thread.run_sync(lambda: asdict(export_readable(ctx, dest, fmt, progress)))
    return result


def export_readable(ctx: ToolContext, dest: Path, fmt: ExportFormat, progress: Progress) -> ExportSummary:
    """``export_workspace`` narrowed to the notebooks ``ctx`` may read: their notes, the
    attachments of those notes and the tags they carry (blocking)."""
    from noteloom.interop import _check_destination, joplin, markdown
    from noteloom.interop.snapshot import take

    _check_destination(dest, fmt)
    snapshot = take(ctx.workspace)
    allowed = ctx.allowed_notebooks()
    if allowed is not None:
        snapshot.books = [b for b in snapshot.books if b.id in allowed]
        for book in snapshot.books:
            if book.parent_id is not None and book.parent_id not in allowed:
                book.parent_id = None
        snapshot.notes = [n for n in snapshot.notes if n.notebook_id in allowed]
        kept = {n.id for n in snapshot.notes}
        snapshot.attachments = [a for a in snapshot.attachments if a.note_id in kept]
        used = {t.lower() for n in snapshot.notes for t in n.tags}
        snapshot.tags = [t for t in snapshot.tags if t.title.lower() in used]
    try:
        if fmt == "md":
            return markdown.write_folder(snapshot, dest, progress)
        return joplin.write_jex(snapshot, dest, progress)
    except OSError as exc:
        raise ToolError(f"cannot write the export to {str(dest)!r} ({exc.strerror or exc}); "
                        "choose a folder you can write to") from exc


async def _reindex(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    if ctx.user is not None and ctx.user.role not in ("owner", "admin"):
        raise ToolError("rebuilding the index is for the workspace's owner and admins")
    index = ctx.services.semantic
    if index is None:
        raise ToolError("semantic search is off, so there is no index to build; set up [embeddings] in noteloom.toml")
    report = progress_reporter(ctx)
    rebuild = bool(args.get("rebuild"))

    def progress(done: int, total: int) -> None:
        from_thread.check_cancelled()
        if report is not None:
            report(done, total or None, f"indexed {done}/{total} notes")

    def run() -> dict[str, Any]:
        if rebuild:
            index.rebuild()
        index.load_model()
        from_thread.check_cancelled()
        done = index.sync(progress)
        status = index.status()
        return {"indexed": done, "rebuilt": rebuild, "notes": status.indexed_notes, "chunks": status.chunks,
                "model": status.model}

    result: dict[str, Any] = await to_thread.run_sync(run)
    return result


def _describe_import(args: Mapping[str, Any], _name: Callable[[str], str]) -> str:
    where = f" into notebook {args['notebook']!r}" if args.get("notebook") else ""
    return f"Import notes from {args.get('path')!r}{where}."


def _describe_export(args: Mapping[str, Any], _name: Callable[[str], str]) -> str:
    return f"Export the notes you may read to {args.get('path')!r}."


def _describe_reindex(args: Mapping[str, Any], _name: Callable[[str], str]) -> str:
    return "Rebuild the semantic index from scratch." if args.get("rebuild") else "Bring the semantic index up to date."


IMPORT_NOTES = ToolDef(
    name="import_notes",
    title="Import notes",
    description=(
        "Import a Markdown folder, a Joplin RAW export folder or a .jex file from a folder named in "
        "[mcp] file_roots: its notebooks, notes, tags and attachments, all of them or nothing. Ids are "
        "kept; existing ones are skipped (or given new ids). Long: run it as a task where the client can."
    ),
    input_schema=IMPORT_IN,
    output_schema=IMPORT_OUT,
    handler=_import,
    effect="write",
    describe=_describe_import,
    within_notebooks=True,
)

EXPORT_NOTES = ToolDef(
    name="export_notes",
    title="Export notes",
    description=(
        "Export the notebooks, notes, tags and attachments you may read (not the trash) to a new Markdown "
        "folder or .jex file inside a folder named in [mcp] file_roots. Long: run it as a task where the "
        "client can."
    ),
    input_schema=EXPORT_IN,
    output_schema=EXPORT_OUT,
    handler=_export,
    effect="write",
    describe=_describe_export,
    within_notebooks=True,
)

REINDEX = ToolDef(
    name="reindex",
    title="Rebuild the search index",
    description=(
        "Bring the semantic search index up to date (rebuild=true: forget every vector and embed all notes "
        "again), as `noteloom index` does. Long: run it as a task where the client can."
    ),
    input_schema=REINDEX_IN,
    output_schema=REINDEX_OUT,
    handler=_reindex,
    effect="write",
    idempotent=True,
    describe=_describe_reindex,
    requires=("semantic",),
)

#: The tools :mod:`noteloom.mcp.tasks` lets a client run as tasks.
TASK_TOOLS = frozenset({IMPORT_NOTES.name, EXPORT_NOTES.name, REINDEX.name})


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``import_notes``, ``export_notes`` and ``reindex``."""
    register(IMPORT_NOTES)
    register(EXPORT_NOTES)
    register(REINDEX)
