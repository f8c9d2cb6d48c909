"""Import and export: Markdown folders and Joplin exports (``.jex`` archives and RAW folders).

``import_path`` detects what ``path`` is, reads it into a ``Bundle`` and writes the bundle
in ONE write transaction through the bulk writer: the import completes, or the
workspace (attachment files included) stays exactly as it was.

Decisions a user can rely on:

- Bodies reference attachments as ``:/<attachment id>`` (the form Joplin uses), so
  Joplin bodies import unchanged; a Markdown import rewrites relative links to the
  files it attaches, and a Markdown export rewrites them back to relative paths.
- Ids are kept. When an id exists already in the workspace, ``duplicates="skip"``
  (the default) leaves that note or attachment out with a counted warning (a live
  notebook with that id is reused, so re-importing an export adds only what is new);
  ``duplicates="new-ids"`` imports it under a fresh id and rewrites the ``:/id``
  links of the imported bodies to match.
- Tags are matched by title regardless of case.
- Notes that name no notebook go into ``notebook`` when given, else into a new
  notebook named after the folder or archive.
- Exports leave out the trash.
- Only regular files inside the folder (or archive) are read: links, devices and FIFOs
  are skipped and reported (``files``); bytes are counted against the caps of
  ``[import]`` as they stream in (``limits``).
- Exports refuse a destination that is a symbolic link: an export writes where it is
  told, not where a link points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from noteloom.errors import ImportExportError
from noteloom.interop import joplin, markdown
from noteloom.interop.bundle import (
    BodySpool,
    Bundle,
    Duplicates,
    ExportSummary,
    ImportSummary,
    Progress,
    SourceFormat,
    no_progress,
)
from noteloom.interop.limits import Budget, ImportLimits
from noteloom.interop.snapshot import take
from noteloom.interop.staging import Staging, clean_stale
from noteloom.interop.writer import write_bundle
from noteloom.workspace import Workspace

__all__ = [
    "Duplicates",
    "ExportFormat",
    "ExportSummary",
    "ImportLimits",
    "ImportSummary",
    "Progress",
    "SourceFormat",
    "clean_stale",
    "detect_format",
    "export_workspace",
    "import_path",
]

ExportFormat = Literal["md", "jex"]


def detect_format(path: Path) -> SourceFormat:
    """What ``path`` holds: ``"jex"``, ``"raw"`` or ``"markdown"``; ``ImportExportError`` otherwise."""
    shown = repr(str(path))
    if not path.exists():
        raise ImportExportError(
            f"{shown} does not exist; give a Markdown folder, a Joplin RAW export folder or a .jex file"
        )
    if path.is_file():
        try:
            is_tar = joplin.is_archive(path)
        except OSError as exc:
            raise ImportExportError(f"{shown} cannot be read: {exc.strerror or exc}") from exc
        if not is_tar:
            raise ImportExportError(
                f"{shown} is not a .jex archive (not a tar file); to import Markdown, give its folder"
            )
        return "jex"
    if path.is_dir():
        if joplin.is_raw_folder(path):
            return "raw"
        if markdown.is_markdown_folder(path):
            return "markdown"
        raise ImportExportError(
            f"{shown} holds neither Markdown notes (.md files) nor a Joplin RAW export (<id>.md items)"
        )
    raise ImportExportError(f"{shown} is neither a file nor a folder")


def import_path(
    ws: Workspace,
    path: Path,
    *,
    notebook: str | None = None,
    inline_tags: bool = False,
    duplicates: Duplicates = "skip",
    progress: Progress = no_progress,
    limits: ImportLimits | None = None,
) -> ImportSummary:
    """Import a Markdown folder, a Joplin RAW folder or a ``.jex`` archive into ``ws``.

    ``notebook`` (an id, title or ``Parent/Child`` path) is where the imported tree goes;
    ``inline_tags`` also reads ``#tags`` from Markdown text; ``limits`` caps what is read
    (``ImportExportError`` past a cap). All or nothing."""
    target = ws.find_notebook(notebook).id if notebook else None
    fmt = detect_format(path)
    budget = Budget(limits or ImportLimits())
    clean_stale(ws)
    # Staging lives next to the attachments, so moving files into place is a rename.
    try:
        with Staging(ws.data_dir) as staging, BodySpool(staging.path / "bodies") as spool:
            bundle: Bundle
            if fmt == "jex":
                bundle = joplin.read_jex(path, staging.path, budget, progress, spool)
            elif fmt == "raw":
                bundle = joplin.read_raw(path, staging.path, budget, progress, spool)
            else:
                bundle = markdown.read_folder(path, staging.path, budget, inline_tags=inline_tags)
            return write_bundle(
                ws, bundle, source=str(path), staging=staging, target=target, duplicates=duplicates,
                progress=progress,
            )
    except OSError as exc:
        # The readers name the file they could not read; this is what is left (a full disk …).
        where = f" ({exc.filename})" if exc.filename else ""
        raise ImportExportError(
            f"importing {str(path)!r} failed: {exc.strerror or exc}{where}; nothing was imported"
        ) from exc


def export_workspace(
    ws: Workspace, dest: Path, fmt: ExportFormat, *, progress: Progress = no_progress
) -> ExportSummary:
    """Write every notebook, note, tag and attachment outside the trash to ``dest``:
    a Markdown folder (``"md"``) or a ``.jex`` archive Joplin imports (``"jex"``)."""
    _check_destination(dest, fmt)
    snapshot = take(ws)
    try:
        if fmt == "md":
            return markdown.write_folder(snapshot, dest, progress)
        return joplin.write_jex(snapshot, dest, progress)
    except OSError as exc:
        raise ImportExportError(
            f"cannot write the export to {str(dest)!r} ({exc.strerror or exc}); "
            "choose a folder you can write to"
        ) from exc


def _check_destination(dest: Path, fmt: ExportFormat) -> None:
    """A new path (or, for Markdown, an empty folder) in a folder that exists; never a link."""
    shown = repr(str(dest))
    if dest.is_symlink():
        raise ImportExportError(
            f"{shown} is a symbolic link; noteloom does not export through links, give the real path"
        )
    parent = dest.parent
    if parent.exists() and not parent.is_dir():
        raise ImportExportError(f"{str(parent)!r} is a file, not a folder; export to a path inside a folder")
    if not parent.is_dir():
        raise ImportExportError(f"folder {str(parent)!r} does not exist; create it first")
    if fmt == "md":
        markdown.check_destination(dest)
    elif dest.exists():
        raise ImportExportError(f"{shown} exists already; choose a new file name")
