"""``noteloom notes``, ``notebooks`` and ``tags``: the workspace from the terminal."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand

from noteloom.app import App
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json, to_jsonable
from noteloom.cli.dates import parse_date, show_date
from noteloom.workspace import Notebook

if TYPE_CHECKING:
    from noteloom.search import SearchHit
    from noteloom.semantic import NoteHit

notes_app = typer.Typer(help="List, show, add, edit, delete, restore and search notes.", no_args_is_help=True)
notebooks_app = typer.Typer(help="List, add and delete notebooks.", no_args_is_help=True)
tags_app = typer.Typer(help="List tags; add or remove them on a note.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(notes_app, name="notes")
    app.add_typer(notebooks_app, name="notebooks")
    app.add_typer(tags_app, name="tags")


def _read_body(body: str | None, file: Path | None) -> str | None:
    if body is not None and file is not None:
        fail("give the body either with --body or with --file, not both")
    if file is not None:
        if str(file) == "-":
            return sys.stdin.read()
        if not file.is_file():
            fail(f"no file {str(file)!r} to read the body from")
        return file.read_text(encoding="utf-8")
    return body


def _book_id(a: App, ref: str | None) -> str | None:
    return a.workspace.find_notebook(ref).id if ref else None


# -- notes --------------------------------------------------------------------------------


@notes_app.command("list")
def notes_list(
    notebook: str | None = typer.Option(None, "--notebook", "-n", help="Notebook title, path or id."),
    limit: int = typer.Option(50, min=1, max=10000),
    trash: bool = typer.Option(False, "--trash", help="List what is in the trash instead."),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """List notes, most recently updated first."""
    with opened(home) as a:
        if trash:
            items = a.workspace.list_trash()
            if as_json:
                print_json(items)
                return
            for t in items:
                typer.echo(f"{t.id}  {t.kind:8}  {show_date(t.deleted_time)}  {t.title}")
            return
        notes = a.workspace.list_notes(_book_id(a, notebook), limit=limit)
        if as_json:
            print_json(notes)
            return
        for n in notes:
            todo = (" [x]" if n.todo_completed else " [ ]") if n.is_todo else ""
            typer.echo(f"{n.id}  {show_date(n.updated_time)}{todo}  {n.title}")


@notes_app.command("show")
def notes_show(note_id: str, as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Print a note."""
    with opened(home) as a:
        note = a.workspace.get_note(note_id)
        if as_json:
            print_json(note)
            return
        typer.echo(f"# {note.title}\n")
        meta = [f"id: {note.id}", f"updated: {show_date(note.updated_time)}"]
        if note.tags:
            meta.append("tags: " + ", ".join(note.tags))
        if note.is_todo:
            meta.append("done" if note.todo_completed else "to-do" + (f", due {show_date(note.todo_due)}" if note.todo_due else ""))
        typer.echo("  ".join(meta) + "\n")
        typer.echo(note.body)


@notes_app.command("add")
def notes_add(
    title: str,
    body: str | None = typer.Option(None, "--body", "-b", help="The Markdown body."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Read the body from a file (- for stdin)."),
    notebook: str | None = typer.Option(None, "--notebook", "-n", help="Notebook title, path or id."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="A tag (repeat for more)."),
    todo: bool = typer.Option(False, "--todo", help="Make it a to-do."),
    due: str | None = typer.Option(None, "--due", help="Due date of the to-do (YYYY-MM-DD[THH:MM])."),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Add a note."""
    text = _read_body(body, file) or ""
    with opened(home) as a:
        due_ms = parse_date(due, "--due") if due else None
        note = a.workspace.create_note(
            title, text, _book_id(a, notebook), is_todo=todo or due_ms is not None, todo_due=due_ms, tags=tag
        )
        if as_json:
            print_json(note)
        else:
            typer.echo(note.id)


@notes_app.command("edit")
def notes_edit(
    note_id: str,
    title: str | None = typer.Option(None, "--title"),
    body: str | None = typer.Option(None, "--body", "-b", help="Replace the body."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Replace the body from a file (- for stdin)."),
    append: str | None = typer.Option(None, "--append", help="Add text at the end of the body."),
    notebook: str | None = typer.Option(None, "--notebook", "-n", help="Move to this notebook."),
    due: str | None = typer.Option(None, "--due", help="Set the due date (YYYY-MM-DD[THH:MM]; 'none' clears it)."),
    done: bool | None = typer.Option(None, "--done/--undone", help="Mark the to-do done or not done."),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Change a note; the previous version is kept in its history."""
    from noteloom.db import now_ms

    text = _read_body(body, file)
    with opened(home) as a:
        ws = a.workspace
        current = ws.get_note(note_id)
        if append is not None:
            text = (text if text is not None else current.body).rstrip("\n") + "\n\n" + append
        kwargs: dict[str, object] = {}
        if due is not None:
            kwargs["todo_due"] = None if due.lower() == "none" else parse_date(due, "--due")
            if kwargs["todo_due"] is not None:
                kwargs["is_todo"] = True
        if done is not None:
            kwargs["todo_completed"] = now_ms() if done else None
            kwargs["is_todo"] = True
        note = ws.update_note(
            note_id, title=title, body=text, notebook_id=_book_id(a, notebook), **kwargs  # type: ignore[arg-type]
        )
        if as_json:
            print_json(note)
        else:
            typer.echo(f"updated {note.id}")


@notes_app.command("rm")
def notes_rm(note_id: str, home: Path | None = HOME_OPTION) -> None:
    """Move a note to the trash."""
    with opened(home) as a:
        a.workspace.delete_note(note_id)
        typer.echo(f"moved {note_id} to the trash (`noteloom notes restore {note_id}` brings it back)")


@notes_app.command("restore")
def notes_restore(item_id: str, home: Path | None = HOME_OPTION) -> None:
    """Bring a note or notebook back from the trash."""
    with opened(home) as a:
        item = a.workspace.restore(item_id)
        typer.echo(f"restored {item.kind} {item.id} ({item.title})")


@notes_app.command("purge")
def notes_purge(
    item_id: str | None = typer.Argument(None, help="A trashed note or notebook id."),
    all_items: bool = typer.Option(False, "--all", help="Empty the whole trash."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Delete trashed items for good (with their history, tag links and attachments)."""
    if bool(item_id) == all_items:
        fail("give one trashed item id, or --all to empty the trash")
    with opened(home) as a:
        count = a.workspace.empty_trash() if all_items else a.workspace.purge(item_id or "")
        typer.echo(f"purged {count} note(s)")


class _QueryCommand(TyperCommand):
    """A command whose words are all the query, wherever they stand: a word starting with
    ``-`` (``-tag:*``, ``-stove``) is part of the query unless it is one of the command's
    own options, and everything after ``--`` is the query whatever it looks like."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # By duck type: typer may bring its own copy of click, whose classes are not click's.
        options: dict[str, Any] = {}
        for p in self.get_params(ctx):
            if p.param_type_name == "option":
                options.update(dict.fromkeys([*p.opts, *p.secondary_opts], p))
        own: list[str] = []
        words: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                words += args[i + 1 :]
                break
            opt = options.get(arg.split("=", 1)[0])
            if opt is None:
                words.append(arg)
            else:
                own.append(arg)
                takes_value = not getattr(opt, "is_flag", False) and not getattr(opt, "count", False)
                if takes_value and "=" not in arg and i + 1 < len(args):
                    i += 1
                    own.append(args[i])
            i += 1
        return super().parse_args(ctx, [*own, "--", *words] if words else own)


@notes_app.command("search", cls=_QueryCommand)
def notes_search(
    query: list[str] = typer.Argument(..., help="The query; several words are joined by spaces.", show_default=False),
    limit: int = typer.Option(20, min=1, max=1000),
    mode: str = typer.Option(
        "keyword", "--mode", help="keyword (exact words), semantic (by meaning) or hybrid (both fused).",
    ),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Search notes (words, "phrases", prefix*, -negation, title: tag: notebook: due: …).

    A query may start with "-" (noteloom notes search -tag:*); after -- anything is query text.
    """
    from noteloom.search import search_notes
    from noteloom.semantic import hybrid_search

    if mode not in ("keyword", "semantic", "hybrid"):
        fail(f"--mode takes keyword, semantic or hybrid, not {mode!r}")
    with opened(home) as a:
        index = a.services.semantic
        if mode != "keyword" and index is None:
            fail(
                "semantic search is off in this workspace (see [embeddings] in noteloom.toml); "
                "search with --mode keyword"
            )
        text = " ".join(query)
        hits: Sequence[SearchHit | NoteHit]
        if mode == "keyword":
            hits = search_notes(a.workspace, text, limit=limit)
        else:
            hits = hybrid_search(a.workspace, index, text, mode="semantic" if mode == "semantic" else "hybrid", limit=limit).hits
        if as_json:
            print_json(list(hits))
            return
        if not hits:
            typer.echo("no notes match", err=True)
        for h in hits:
            where = f" §{h.section} {h.section_heading}" if h.section else ""
            typer.echo(f"{h.id}  {h.title}{where}")
            if h.snippet:
                typer.echo(f"    {h.snippet}")


@notes_app.command("history")
def notes_history(
    note_id: str,
    restore: str | None = typer.Option(None, "--restore", help="Make this revision current again."),
    diff: str | None = typer.Option(
        None, "--diff", help="Show what changed from this revision to the next version (a unified diff)."
    ),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """List a note's earlier versions, show what one changed, or restore one."""
    if restore and diff:
        fail("give either --restore or --diff, not both")
    with opened(home) as a:
        if diff:
            a.workspace.get_note(note_id, include_deleted=True)
            if diff not in {r.id for r in a.workspace.list_revisions(note_id)}:
                fail(f"note {note_id!r} has no revision {diff!r}; `noteloom notes history {note_id}` lists them")
            sys.stdout.write(a.workspace.revision_diff(diff))
            return
        if restore:
            a.workspace.get_note(note_id)
            revs = {r.id for r in a.workspace.list_revisions(note_id)}
            if restore not in revs:
                fail(f"note {note_id!r} has no revision {restore!r}; `noteloom notes history {note_id}` lists them")
            a.workspace.restore_revision(restore)
            typer.echo(f"restored revision {restore}")
            return
        revisions = a.workspace.list_revisions(note_id)
        if as_json:
            # The JSON form carries each version's text: it is rebuilt here, one by one.
            print_json([{**to_jsonable(r), "body": r.body} for r in revisions])
            return
        for r in revisions:
            typer.echo(f"{r.id}  {show_date(r.version_time)}  {r.title}  ({r.chars} chars)")


# -- notebooks ----------------------------------------------------------------------------


@notebooks_app.command("list")
def notebooks_list(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """List notebooks as a tree, with their note counts."""
    with opened(home) as a:
        books = a.workspace.list_notebooks()
        if as_json:
            print_json(books)
            return
        ids = {b.id for b in books}
        children: dict[str | None, list[Notebook]] = {}
        for b in books:
            children.setdefault(b.parent_id if b.parent_id in ids else None, []).append(b)

        def walk(parent: str | None, depth: int) -> None:
            for b in children.get(parent, []):
                typer.echo(f"{b.id}  {'  ' * depth}{b.title} ({b.note_count})")
                walk(b.id, depth + 1)

        walk(None, 0)


@notebooks_app.command("add")
def notebooks_add(
    title: str,
    parent: str | None = typer.Option(None, "--parent", "-p", help="Parent notebook title, path or id."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Add a notebook."""
    with opened(home) as a:
        book = a.workspace.create_notebook(title, _book_id(a, parent))
        typer.echo(book.id)


@notebooks_app.command("rm")
def notebooks_rm(notebook: str, home: Path | None = HOME_OPTION) -> None:
    """Move a notebook, its sub-notebooks and their notes to the trash."""
    with opened(home) as a:
        book = a.workspace.find_notebook(notebook)
        count = a.workspace.delete_notebook(book.id)
        typer.echo(f"moved notebook {book.title!r} and {count} note(s) to the trash")


# -- tags ---------------------------------------------------------------------------------


@tags_app.command("list")
def tags_list(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """List tags with the number of notes carrying each."""
    with opened(home) as a:
        tags = a.workspace.list_tags()
        if as_json:
            print_json(tags)
            return
        for t in tags:
            typer.echo(f"{t.title} ({t.note_count})")


@tags_app.command("add")
def tags_add(note_id: str, tags: list[str], home: Path | None = HOME_OPTION) -> None:
    """Tag a note (missing tags are created)."""
    with opened(home) as a:
        added = a.workspace.add_tags(note_id, tags)
        typer.echo("added: " + (", ".join(added) or "nothing new"))


@tags_app.command("rm")
def tags_rm(note_id: str, tags: list[str], home: Path | None = HOME_OPTION) -> None:
    """Remove tags from a note."""
    with opened(home) as a:
        removed = a.workspace.remove_tags(note_id, tags)
        typer.echo("removed: " + (", ".join(removed) or "nothing"))
