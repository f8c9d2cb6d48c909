"""``noteloom memory …``: the facts the assistant keeps, from the terminal.

Every command acts as the workspace's owner and calls :mod:`noteloom.memory.store`: their
personal memories and the workspace's shared ones (``--shared`` adds or lists those).
AI-written memories are badged ``[AI]`` with where they came from, so they can be
corrected (``edit``) or removed (``rm``). Edits apply from the next chat turn or run.
With ``--json`` each command prints the memory or memories as JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from sqlalchemy.engine import Connection

from noteloom.chat.wiring import MEMORY_DEFAULT_KEY, memory_default
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json
from noteloom.cli.dates import show_date
from noteloom.errors import NotFound
from noteloom.memory import store
from noteloom.memory.store import Memory, MemoryScope
from noteloom.workspace import User

memory_app = typer.Typer(
    help="Memory: facts the assistant keeps across chats and recipes (yours and the workspace's shared ones).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")


SHARED_OPTION = typer.Option(False, "--shared", help="The workspace's shared memories (people write these).")
MINE_OPTION = typer.Option(False, "--mine", help="Only your personal memories.")
TAG_OPTION = typer.Option(None, "--tag", help="A tag (repeat for several).")


@contextmanager
def _writing(home: Path | None) -> Iterator[tuple[Connection, User]]:
    with opened(home) as app:
        owner = app.workspace.ensure_owner()
        with app.workspace.write() as c:
            yield c, owner


@contextmanager
def _reading(home: Path | None) -> Iterator[tuple[Connection, User]]:
    with opened(home) as app:
        owner = app.workspace.ensure_owner()
        with app.workspace.read() as c:
            yield c, owner


def _scope(shared: bool, mine: bool) -> MemoryScope | None:
    if shared and mine:
        fail("--shared and --mine exclude each other; give one or neither (both kinds)", 2)
    return "shared" if shared else "personal" if mine else None


def _text(value: str) -> str:
    """A value typed on the command line, or stdin for ``-``."""
    return sys.stdin.read() if value == "-" else value


def badge(memory: Memory) -> str:
    """``[AI from chat …]`` for an AI-written memory (where it came from), else nothing."""
    if not memory.by_ai:
        return ""
    where = (f" from chat {memory.conversation_id}" if memory.conversation_id
             else f" from run {memory.run_id}" if memory.run_id else "")
    return f"[AI{where}] "


def _line(memory: Memory) -> str:
    tags = f"  #{' #'.join(memory.tags)}" if memory.tags else ""
    return (f"{memory.id}  {memory.scope:<8}  {show_date(memory.updated_time)}  {badge(memory)}"
            f"{memory.title}{tags}")


def _show(rows: list[Memory], as_json: bool, empty: str) -> None:
    if as_json:
        print_json([m.as_dict() for m in rows])
        return
    if not rows:
        typer.echo(empty)
        return
    for m in rows:
        typer.echo(_line(m))


@memory_app.command("list")
def list_(shared: bool = SHARED_OPTION, mine: bool = MINE_OPTION, as_json: bool = JSON_OPTION,
          home: Path | None = HOME_OPTION) -> None:
    """Your memories and the shared ones, newest change first; AI-written ones badged [AI]."""
    scope = _scope(shared, mine)
    with _reading(home) as (c, owner):
        rows = store.scoped(c, owner.id, scope=scope)
    _show(rows, as_json, "No memories yet; `noteloom memory add TEXT` keeps one.")


@memory_app.command("show")
def show(memory_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JSON_OPTION,
         home: Path | None = HOME_OPTION) -> None:
    """One memory in full, with where it came from."""
    with _reading(home) as (c, owner):
        memory = store.get(c, owner.id, memory_id)
        if memory is None:
            raise NotFound(store.missing(memory_id))
    if as_json:
        print_json(memory.as_dict())
        return
    typer.echo(_line(memory))
    typer.echo("")
    typer.echo(memory.content)


@memory_app.command("add")
def add(content: str = typer.Argument(..., help="The fact to keep (- reads it from stdin)."),
        title: str = typer.Option("", "--title", help="A short title (the first line of the text if left out)."),
        tags: list[str] | None = TAG_OPTION, shared: bool = SHARED_OPTION, as_json: bool = JSON_OPTION,
        home: Path | None = HOME_OPTION) -> None:
    """Keep a fact: yours, or with --shared the workspace's (the assistant recalls it for everyone)."""
    with _writing(home) as (c, owner):
        memory = store.add(c, owner.id, _text(content), title=title, tags=tags or (),
                           scope="shared" if shared else "personal", source="user")
    if as_json:
        print_json(memory.as_dict())
    else:
        typer.echo(f"Remembered {memory.id} ({memory.scope}): {memory.title}")


@memory_app.command("edit")
def edit(memory_id: str = typer.Argument(..., metavar="ID"),
         content: str | None = typer.Option(None, "--content", help="New text (- reads it from stdin)."),
         title: str | None = typer.Option(None, "--title", help="New title."),
         tags: list[str] | None = TAG_OPTION,
         no_tags: bool = typer.Option(False, "--no-tags", help="Remove every tag."),
         as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Correct a memory: yours, or a shared one. Fields not given stay."""
    if no_tags and tags:
        fail("--tag and --no-tags exclude each other", 2)
    new_tags = [] if no_tags else tags or None
    with _writing(home) as (c, owner):
        memory = store.edit(c, owner.id, memory_id, title=title,
                            content=_text(content) if content is not None else None, tags=new_tags)
    if as_json:
        print_json(memory.as_dict())
    else:
        typer.echo(f"Changed {memory.id}: {memory.title}")


@memory_app.command("rm")
def rm(memory_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JSON_OPTION,
       home: Path | None = HOME_OPTION) -> None:
    """Delete a memory: yours, or a shared one."""
    with _writing(home) as (c, owner):
        if not store.delete(c, owner.id, memory_id):
            raise NotFound(store.missing(memory_id))
    if as_json:
        print_json({"id": memory_id, "deleted": True})
    else:
        typer.echo(f"Deleted {memory_id}.")


@memory_app.command("search")
def search(query: str = typer.Argument(..., help="Words to look for (all must match, any case)."),
           shared: bool = SHARED_OPTION, mine: bool = MINE_OPTION,
           limit: int = typer.Option(20, "--limit", min=1, max=store.LIMIT_MAX),
           as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Memories holding every word of QUERY in their title, text or tags."""
    scope = _scope(shared, mine)
    with _reading(home) as (c, owner):
        rows = store.search(c, owner.id, query, scope=scope, limit=limit)
    _show(rows, as_json, f"No memory matches {query!r}.")


@memory_app.command("default")
def default_(state: str | None = typer.Argument(None, metavar="[on|off]",
                                                help="Turn memory on or off for new chats; leave out to print it."),
             as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Whether new chats have memory (chat.memory_default; on unless set off). A chat that set
    its own memory toggle keeps it."""
    if state is not None and state.lower() not in ("on", "off"):
        fail(f"memory default takes on or off, not {state!r}", 2)
    with opened(home) as app:
        if state is not None:
            app.workspace.set_setting(MEMORY_DEFAULT_KEY, state.lower() == "on")
        on = memory_default(app.workspace.get_setting(MEMORY_DEFAULT_KEY))
    if as_json:
        print_json({"memory_default": on})
    else:
        typer.echo(f"Memory in new chats: {'on' if on else 'off'}.")
