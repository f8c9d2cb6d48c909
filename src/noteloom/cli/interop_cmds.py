"""``noteloom import`` and ``noteloom export``: Markdown folders and Joplin exports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from noteloom.cli.common import HOME_OPTION, JSON_OPTION, opened, print_json
from noteloom.cli.terminal import raw

if TYPE_CHECKING:  # imported where used: a command that imports nothing must not pay for them
    from rich.progress import TaskID

    from noteloom.interop import Duplicates, ExportFormat, ExportSummary, ImportSummary, Progress

_PHASES = {
    "reading": "reading",
    "writing": "writing notes",
    "files": "copying files",
    "exporting": "writing files",
}


class DuplicateChoice(StrEnum):
    skip = "skip"
    new_ids = "new-ids"


class FormatChoice(StrEnum):
    md = "md"
    jex = "jex"


_DUPLICATES: dict[DuplicateChoice, Duplicates] = {DuplicateChoice.skip: "skip", DuplicateChoice.new_ids: "new-ids"}
_FORMATS: dict[FormatChoice, ExportFormat] = {FormatChoice.md: "md", FormatChoice.jex: "jex"}


def register(app: typer.Typer) -> None:
    app.command("import")(import_cmd)
    app.command("export")(export_cmd)


PROGRESS_OPTION = typer.Option(
    None, "--progress/--no-progress", help="Show a progress bar on stderr (default: when stderr is a terminal)."
)


@contextmanager
def progress_bar(show: bool | None) -> Iterator[Progress]:
    """A progress callback drawing one bar per phase on stderr, or doing nothing."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        yield lambda _phase, _done, _total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    # Forced: the user asked for a bar, or stderr is a terminal already.
    console = Console(file=raw(sys.stderr), force_terminal=True)
    bar = Bar(
        TextColumn("{task.description:>14}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )
    tasks: dict[str, TaskID] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(_PHASES.get(phase, phase), total=total)
        bar.update(tasks[phase], completed=done, total=total)

    with bar:
        yield update


def import_cmd(
    path: Path = typer.Argument(..., help="A Markdown folder, a Joplin RAW export folder or a .jex file."),
    notebook: str | None = typer.Option(
        None, "--notebook", "-n", help="Import under this notebook (title, Parent/Child path or id)."
    ),
    inline_tags: bool = typer.Option(False, "--inline-tags", help="Also read #tags written in Markdown text."),
    duplicates: DuplicateChoice = typer.Option(
        DuplicateChoice.skip, "--duplicates",
        help="When an id exists already: skip that item, or import it under a new id.",
    ),
    show_progress: bool | None = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Import notes, notebooks, tags and attachments: all of them, or nothing."""
    from noteloom.interop import ImportLimits, import_path

    with opened(home) as a, progress_bar(show_progress) as progress:
        limits = ImportLimits.from_section(a.settings.section("import"))
        summary = import_path(
            a.workspace, path, notebook=notebook, inline_tags=inline_tags,
            duplicates=_DUPLICATES[duplicates], progress=progress, limits=limits,
        )
    _report(summary, as_json)


def export_cmd(
    path: Path = typer.Argument(..., help="Where to write: a new folder (md) or a new .jex file."),
    fmt: FormatChoice | None = typer.Option(
        None, "--format", "-f", help="md (a Markdown folder) or jex (a Joplin archive); default from the path."
    ),
    show_progress: bool | None = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Export every notebook, note, tag and attachment (the trash stays out)."""
    from noteloom.interop import export_workspace

    chosen = _FORMATS[fmt or (FormatChoice.jex if path.suffix.lower() == ".jex" else FormatChoice.md)]
    with opened(home) as a, progress_bar(show_progress) as progress:
        summary = export_workspace(a.workspace, path, chosen, progress=progress)
    _report(summary, as_json)


def _report(summary: ImportSummary | ExportSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary)
        return
    for message in summary.messages:
        typer.echo(f"warning: {message}", err=True)
    counts = (
        f"{summary.notes} notes, {summary.notebooks} notebooks, {summary.tags} tags, "
        f"{summary.attachments} attachments"
    )
    from noteloom.interop import ImportSummary

    if isinstance(summary, ImportSummary):
        skipped = f" ({summary.skipped} skipped)" if summary.skipped else ""
        typer.echo(f"imported {counts} from {summary.source} ({summary.format}){skipped}")
    else:
        typer.echo(f"exported {counts} to {summary.destination} ({summary.format})")
