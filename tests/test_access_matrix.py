"""Who sees and may change what, on SQLite and PostgreSQL: the owner, an admin, a member (ann)
and two limited tokens of hers (read-only; notebook pattern ``Ann``) against every tool of the
registry and every route of the web app.

Each tool and each route has a rule here (``TOOL_RULES``, ``ROUTE_RULES``); one the registry or
the route table has without a rule fails ``test_every_tool_has_a_rule`` /
``test_every_route_has_a_rule``, so a new one is decided, not forgotten. The workspace is
built once per database (``access_support.py``); cells that change something make their own
fresh note, memory or chat first, so cells do not depend on each other's order.

Rules, after issue 16: members see their own notebooks and those shared with them, change
their own and those shared to write (a read share answers a write with a Forbidden-style
error, not "missing"); something they may not see answers exactly like something missing;
chats, memories, recipes, notifications and webhooks are their person's alone (admins'
too); a read-only token only reads; a notebook-limited token sees its notebooks only.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from access_support import (
    ATTACHMENT_MARK,
    BOOKS,
    BY_NAME,
    CHAT_MARK,
    COMMON,
    HEADERS,
    MARK,
    MEMORY_MARK,
    MEMORY_WORD,
    NOTIFY_MARK,
    PEOPLE,
    PRINCIPALS,
    RECIPE_NAME,
    SHARED_MEMORY_MARK,
    TAG,
    TOML,
    TRASH_MARK,
    VISIBLE,
    WEB_MARK,
    WRITABLE,
    Outcome,
    Principal,
    World,
    _Page,
    access,
    build_notebooks,
    build_people,
    build_personal,
    build_running,
    build_tokens,
    call_tool,
    client,
    make_web,
    missing_id,
    note_row,
    same_as_missing,
)
from http_support import loopback_http
from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.memory import tables as memory_tables
from noteloom.recipes import tables as recipe_tables

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def matrix_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per module and kind (the matrix's cells share its workspace)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'noteloom.db'}"
        return
    server = request.getfixturevalue("pg_server")
    name = "m_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="module")
async def world(matrix_url: str, tmp_path_factory: pytest.TempPathFactory, anyio_backend: str) -> AsyncIterator[World]:
    home: Path = tmp_path_factory.mktemp("matrix-home")
    (home / "noteloom.toml").write_text(TOML, encoding="utf-8")
    app: App = open_app(load_settings({"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": matrix_url}),
                        load_entry_points=False)
    try:
        for tool in app.registry.all():
            app.registry.set_enabled(app.workspace, tool.name, True)
        people = build_people(app)
        books, notes, trashed, attachments = build_notebooks(app, people)
        w = World(app, make_web(app), people, build_tokens(app, people), books, notes, trashed, attachments)
        build_personal(w)
        from noteloom.semantic import SemanticIndex
        from semantic_support import local_model

        index = SemanticIndex(app.engine, local_model())
        app.services["semantic"] = index
        index.sync()
        with loopback_http(_Page) as port:
            w.web_url = f"http://127.0.0.1:{port}/article"
            async with AsyncExitStack() as stack:
                await build_running(w, stack)
                yield w
    finally:
        app.close()


# -- checks shared by the rules ----------------------------------------------------------------

Call = Callable[[World, Principal], Awaitable[None]]


async def missing_answer(w: World, p: Principal, name: str, args: dict[str, Any]) -> Outcome:
    """The answer to an id nothing has (an error, or a result saying nothing was found)."""
    out = await call_tool(w, p, name, args)
    assert not out.unavailable, f"{name} is not offered to {p.name}"
    return out


def assert_like_missing(name: str, p: Principal, what: str, foreign: str, got: Outcome, missing: str,
                        nothing: Outcome) -> None:
    assert got.ok == nothing.ok and same_as_missing(foreign, missing, got.shown, nothing.shown), (
        f"{name}: {p.name} on {what} must read exactly like a missing id:\n  got     {got.shown[:400]!r}\n"
        f"  missing {nothing.shown[:400]!r}")


def assert_forbidden(name: str, p: Principal, what: str, foreign: str, got: Outcome, missing: str,
                     nothing: Outcome) -> None:
    assert not got.ok, f"{name}: {p.name} changed {what}, which is shared with them read-only"
    assert not got.unavailable, f"{name}: not offered to {p.name}"
    assert nothing.ok or not same_as_missing(foreign, missing, got.text, nothing.text), (
        f"{name}: {p.name} sees {what} (read share), so a write must say it is not allowed, "
        f"not that it is missing: {got.text!r}")


def seen(text: str, marks: dict[str, str]) -> set[str]:
    return {k for k, m in marks.items() if m in text}


async def unavailable_for_read_only(w: World, p: Principal, name: str, args: dict[str, Any]) -> bool:
    """A read-only token is never offered a tool that writes; True when ``p`` is one (checked)."""
    if not p.read_only:
        return False
    out = await call_tool(w, p, name, args)
    assert out.unavailable, f"{name} writes, yet a read-only token could call it: {out.shown[:300]}"
    return True


async def note_write(w: World, p: Principal, name: str, args: Callable[[str], dict[str, Any]],
                     done: Callable[[Any, Any], bool], *, trashed: bool = False) -> None:
    """A tool that changes one note, on a fresh note in every notebook: done where ``p`` may
    write, refused (Forbidden-style) where ``p`` only reads, missing where ``p`` sees nothing;
    the note unchanged unless done."""
    if await unavailable_for_read_only(w, p, name, args(missing_id())):
        return
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, name, args(nothing_id))
    for book in BOOKS:
        note_id = w.fresh_note(book, trashed=trashed)
        before = note_row(w, note_id)
        got = await call_tool(w, p, name, args(note_id))
        after = note_row(w, note_id)
        what = f"a note in {book}"
        rule = access(p, book)
        if rule == "write":
            assert got.ok, f"{name}: {p.name} may change {what} but got {got.text!r}"
            assert done(before, after), f"{name}: {p.name} was told yes but {what} did not change"
            continue
        if rule == "read":
            assert_forbidden(name, p, what, note_id, got, nothing_id, nothing)
        else:
            assert_like_missing(name, p, what, note_id, got, nothing_id, nothing)
        assert tuple(after) == tuple(before), f"{name}: {p.name} was refused, yet {what} changed"


async def notebook_write(w: World, p: Principal, name: str, args: Callable[[str, str], dict[str, Any]],
                         made: Callable[[str], bool], books: tuple[str, ...] = BOOKS) -> None:
    """A tool that creates something in a named notebook (by id), in every notebook (or ``books``)."""
    if await unavailable_for_read_only(w, p, name, args(missing_id(), w.unique("x"))):
        return
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, name, args(nothing_id, w.unique(f"{name} nowhere")))
    for book in books:
        title = w.unique(f"made by {p.name}")
        got = await call_tool(w, p, name, args(w.books[book], title))
        what = f"notebook {book}"
        rule = access(p, book)
        if rule == "write":
            assert got.ok, f"{name}: {p.name} may write in {what} but got {got.text!r}"
            assert made(title), f"{name}: {p.name} was told yes but nothing was made in {what}"
            continue
        if rule == "read":
            assert_forbidden(name, p, what, w.books[book], got, nothing_id, nothing)
        else:
            assert_like_missing(name, p, what, w.books[book], got, nothing_id, nothing)
        assert not made(title), f"{name}: {p.name} was refused, yet something was made in {what}"


def note_titled(w: World, title: str) -> Any:
    with w.app.workspace.read() as c:
        return c.execute(sa.select(db.notes).where(db.notes.c.title == title)).first()


def notebook_titled(w: World, title: str) -> Any:
    with w.app.workspace.read() as c:
        return c.execute(sa.select(db.notebooks).where(db.notebooks.c.title == title)).first()


def owner_of_book(w: World, notebook_id: str) -> str | None:
    return w.app.workspace.notebook_owner(notebook_id)


# -- the tools' rules ------------------------------------------------------------------------


async def t_list_notebooks(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "list_notebooks", {})
    assert out.ok, out.text
    titles = {b["title"] for b in out.payload["notebooks"]}
    assert titles & set(BOOKS) == VISIBLE[p.name], f"{p.name} sees notebooks {sorted(titles & set(BOOKS))}"


async def t_list_tags(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "list_tags", {})
    assert out.ok, out.text
    assert seen(out.shown, TAG) == VISIBLE[p.name], f"{p.name} sees tags of {sorted(seen(out.shown, TAG))}"


async def t_list_trash(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "list_trash", {"limit": 1000})
    assert out.ok, out.text
    assert seen(out.shown, TRASH_MARK) == VISIBLE[p.name], (
        f"{p.name} sees the trash of {sorted(seen(out.shown, TRASH_MARK))}")


async def t_search_notes(w: World, p: Principal) -> None:
    for mode in ("keyword", "hybrid"):
        out = await call_tool(w, p, "search_notes", {"query": COMMON, "limit": 100, "mode": mode})
        assert out.ok, out.text
        assert seen(out.shown, MARK) == VISIBLE[p.name], f"{mode}: {p.name} finds {sorted(seen(out.shown, MARK))}"


async def t_semantic_search_notes(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "semantic_search_notes", {"query": f"{COMMON} note body", "limit": 50,
                                                          "relevance": "loose"})
    assert out.ok, out.text
    assert seen(out.shown, MARK) <= VISIBLE[p.name], f"{p.name} finds {sorted(seen(out.shown, MARK))}"
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, "semantic_search_notes", {"query": "note", "notebook_id": nothing_id})
    for book in BOOKS:
        got = await call_tool(w, p, "semantic_search_notes", {"query": "note", "notebook_id": w.books[book]})
        if book in VISIBLE[p.name]:
            assert got.ok, f"{p.name} may search within {book}: {got.text!r}"
            assert seen(got.shown, MARK) <= {"Work", "Team"} if book == "Work" else seen(got.shown, MARK) <= {book}
        else:
            assert_like_missing("semantic_search_notes", p, f"notebook {book}", w.books[book], got, nothing_id,
                                nothing)


async def t_read_note(w: World, p: Principal) -> None:
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, "read_note", {"id": nothing_id})
    for book in BOOKS:
        got = await call_tool(w, p, "read_note", {"id": w.notes[book]})
        if book in VISIBLE[p.name]:
            assert got.ok and MARK[book] in got.shown, f"{p.name} may read the note in {book}: {got.text!r}"
        else:
            assert_like_missing("read_note", p, f"the note in {book}", w.notes[book], got, nothing_id, nothing)


async def t_read_notes(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "read_notes", {"ids": [w.notes[b] for b in BOOKS]})
    assert out.ok, out.text
    assert seen(out.shown, MARK) == VISIBLE[p.name], f"{p.name} reads {sorted(seen(out.shown, MARK))}"
    nothing_id = missing_id()
    nothing = await call_tool(w, p, "read_notes", {"ids": [nothing_id]})
    for book in set(BOOKS) - VISIBLE[p.name]:
        got = await call_tool(w, p, "read_notes", {"ids": [w.notes[book]]})
        assert got.ok == nothing.ok and same_as_missing(w.notes[book], nothing_id, got.shown, nothing.shown), (
            f"read_notes: {p.name} on the note in {book} must read like a missing id:\n  got     {got.shown!r}\n"
            f"  missing {nothing.shown!r}")


async def t_read_attachment(w: World, p: Principal) -> None:
    nothing_note, nothing_att = missing_id(), missing_id()
    nothing = await missing_answer(w, p, "read_attachment", {"note_id": nothing_note, "attachment_id": nothing_att})
    for book in BOOKS:
        got = await call_tool(w, p, "read_attachment", {"note_id": w.notes[book], "attachment_id": w.attachments[book]})
        if book in VISIBLE[p.name]:
            assert got.ok and ATTACHMENT_MARK[book] in got.shown, f"{p.name} may read the file in {book}: {got.text!r}"
            continue
        assert not got.ok, f"read_attachment: {p.name} read the file of a note in {book}"
        text = got.text.replace(w.notes[book], "<NOTE>").replace(w.attachments[book], "<FILE>")
        expected = nothing.text.replace(nothing_note, "<NOTE>").replace(nothing_att, "<FILE>")
        assert text == expected, f"read_attachment: {p.name} on {book}'s file: {got.text!r} vs missing {nothing.text!r}"
        # Another's file through a note of one's own: missing as well.
        if "Ann" in VISIBLE[p.name]:
            via = await call_tool(w, p, "read_attachment", {"note_id": w.notes["Ann"],
                                                            "attachment_id": w.attachments[book]})
            assert not via.ok and ATTACHMENT_MARK[book] not in via.shown


async def t_create_note(w: World, p: Principal) -> None:
    await notebook_write(w, p, "create_note", lambda book, title: {"title": title, "notebook": book, "body": "new"},
                         lambda title: note_titled(w, title) is not None)
    if p.read_only:
        return
    # No notebook named: the person's own default notebook (created for them if they have none).
    title = w.unique(f"default of {p.name}")
    got = await call_tool(w, p, "create_note", {"title": title})
    assert got.ok, f"{p.name} may create a note without naming a notebook: {got.text!r}"
    row = note_titled(w, title)
    if p.name != "admin" and p.name != "owner":
        assert owner_of_book(w, row.notebook_id) == w.user(p).id, (
            f"{p.name}'s note without a notebook went to someone else's notebook")


async def t_clip_url(w: World, p: Principal) -> None:
    before: dict[str, tuple[str, int]] = {}

    def clips(book: str) -> int:
        n = db.notes
        with w.app.workspace.read() as c:
            return len(c.execute(sa.select(n.c.id).where(n.c.notebook_id == book, n.c.source_url.is_not(None),
                                                         n.c.deleted_time.is_(None))).all())

    def args(book: str, title: str) -> dict[str, Any]:
        before[title] = (book, clips(book))
        return {"url": w.web_url, "notebook": book}

    def clipped(title: str) -> bool:
        book, count = before[title]
        return clips(book) > count

    # One notebook of each kind for ann (her own, shared to read, not hers): each clip fetches the page.
    await notebook_write(w, p, "clip_url", args, clipped, books=("Ann", "Work", "Bob"))


async def t_create_notebook(w: World, p: Principal) -> None:
    await notebook_write(w, p, "create_notebook", lambda book, title: {"title": title, "parent": book},
                         lambda title: notebook_titled(w, title) is not None)
    if p.read_only:
        return
    title = w.unique(f"top of {p.name}")
    got = await call_tool(w, p, "create_notebook", {"title": title})
    if p.scope:
        # A top notebook outside the token's notebook patterns is more than the token may reach.
        assert not got.ok and notebook_titled(w, title) is None, (
            f"a token limited to {p.scope} made the top notebook {title!r}")
        return
    assert got.ok, f"{p.name} may make a top notebook: {got.text!r}"
    row = notebook_titled(w, title)
    if p.user == "ann":  # a member making a top notebook owns it
        assert owner_of_book(w, row.id) == w.user(p).id, f"{p.name}'s new top notebook is not theirs"


async def t_update_note(w: World, p: Principal) -> None:
    await note_write(w, p, "update_note", lambda i: {"id": i, "append": "\nedited"},
                     lambda before, after: after.body.endswith("edited"))
    if p.read_only:
        return
    # Moving a note of one's own into each notebook: a write in the target too.
    home = "Ann" if "Ann" in WRITABLE[p.name] and p.user == "ann" else "Work"
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, "update_note", {"id": w.fresh_note(home), "notebook": nothing_id})
    for book in BOOKS:
        note_id = w.fresh_note(home)
        got = await call_tool(w, p, "update_note", {"id": note_id, "notebook": w.books[book]})
        moved = note_row(w, note_id).notebook_id == w.books[book]
        rule = access(p, book)
        what = f"a move into {book}"
        if rule == "write":
            assert got.ok and moved, f"update_note: {p.name} may move a note into {book}: {got.text!r}"
            continue
        if rule == "read":
            assert_forbidden("update_note", p, what, w.books[book], got, nothing_id, nothing)
        else:
            assert_like_missing("update_note", p, what, w.books[book], got, nothing_id, nothing)
        assert not moved, f"update_note: {p.name} was refused, yet moved a note into {book}"


async def t_delete_note(w: World, p: Principal) -> None:
    await note_write(w, p, "delete_note", lambda i: {"id": i},
                     lambda before, after: before.deleted_time is None and after.deleted_time is not None)


async def t_restore_note(w: World, p: Principal) -> None:
    await note_write(w, p, "restore_note", lambda i: {"id": i},
                     lambda before, after: before.deleted_time is not None and after.deleted_time is None,
                     trashed=True)


def note_tags(w: World, note_id: str) -> set[str]:
    return set(w.app.workspace.get_note(note_id, include_deleted=True).tags)


async def t_manage_tags(w: World, p: Principal) -> None:
    tagged: dict[str, set[str]] = {}

    def args(note_id: str) -> dict[str, Any]:
        return {"id": note_id, "add": ["matrix-tagged"]}

    def done(before: Any, after: Any) -> bool:
        return "matrix-tagged" in note_tags(w, after.id)

    del tagged
    if await unavailable_for_read_only(w, p, "manage_tags", args(missing_id())):
        return
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, "manage_tags", args(nothing_id))
    for book in BOOKS:
        note_id = w.fresh_note(book)
        got = await call_tool(w, p, "manage_tags", args(note_id))
        rule = access(p, book)
        what = f"a note in {book}"
        if rule == "write":
            assert got.ok and done(None, note_row(w, note_id)), f"manage_tags: {p.name} on {what}: {got.text!r}"
            continue
        if rule == "read":
            assert_forbidden("manage_tags", p, what, note_id, got, nothing_id, nothing)
        else:
            assert_like_missing("manage_tags", p, what, note_id, got, nothing_id, nothing)
        assert "matrix-tagged" not in note_tags(w, note_id), f"manage_tags: refused, yet {what} was tagged"


# Personal things: memories, chats, recipes.


async def t_remember(w: World, p: Principal) -> None:
    content = w.unique(f"remembered by {p.name}")
    if await unavailable_for_read_only(w, p, "remember", {"content": content}):
        return
    got = await call_tool(w, p, "remember", {"content": content})
    assert got.ok, got.text
    m = memory_tables.memories
    with w.app.workspace.read() as c:
        row = c.execute(sa.select(m.c.user_id, m.c.scope).where(m.c.content == content)).first()
    assert row is not None and row.user_id == w.user(p).id and row.scope == "personal", (
        f"{p.name}'s memory is not theirs alone: {row}")


async def t_recall(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "recall", {"query": MEMORY_WORD, "limit": 20})
    assert out.ok, out.text
    assert seen(out.shown, MEMORY_MARK) == {p.user}, f"{p.name} recalls the memories of {seen(out.shown, MEMORY_MARK)}"
    assert SHARED_MEMORY_MARK in out.shown, f"{p.name} does not recall the shared memory"
    nothing_id = missing_id()
    nothing = await call_tool(w, p, "recall", {"ids": [nothing_id]})
    for other in set(PEOPLE) - {p.user}:
        got = await call_tool(w, p, "recall", {"ids": [w.memories[other]]})
        assert MEMORY_MARK[other] not in got.shown, f"{p.name} recalled {other}'s memory by its id"
        assert got.ok == nothing.ok and same_as_missing(w.memories[other], nothing_id, got.shown, nothing.shown), (
            f"recall: {other}'s memory id must read like a missing one for {p.name}: {got.shown!r} vs {nothing.shown!r}")


async def t_forget(w: World, p: Principal) -> None:
    mine = w.fresh_memory(p.user)
    if await unavailable_for_read_only(w, p, "forget", {"memory_id": mine}):
        return
    nothing_id = missing_id()
    nothing = await missing_answer(w, p, "forget", {"memory_id": nothing_id})
    got = await call_tool(w, p, "forget", {"memory_id": mine})
    assert got.ok and got.payload.get("forgotten") is True, f"{p.name} may forget their own memory: {got.shown!r}"
    m = memory_tables.memories
    for other in set(PEOPLE) - {p.user}:
        theirs = w.fresh_memory(other)
        got = await call_tool(w, p, "forget", {"memory_id": theirs})
        assert_like_missing("forget", p, f"{other}'s memory", theirs, got, nothing_id, nothing)
        with w.app.workspace.read() as c:
            assert c.execute(sa.select(m.c.id).where(m.c.id == theirs)).first() is not None, (
                f"{p.name} removed {other}'s memory")


async def t_search_conversations(w: World, p: Principal) -> None:
    out = await call_tool(w, p, "search_conversations", {"query": "qzchat", "limit": 50})
    assert out.ok, out.text
    assert seen(out.shown, CHAT_MARK) == {p.user}, f"{p.name} finds the chats of {seen(out.shown, CHAT_MARK)}"


async def t_create_recipe(w: World, p: Principal) -> None:
    name = w.unique(f"made by {p.name}")
    args = {"name": name, "prompt": "Report.", "schedule": "manual", "timezone": "UTC"}
    if await unavailable_for_read_only(w, p, "create_recipe", args):
        return
    got = await call_tool(w, p, "create_recipe", args)
    assert got.ok, got.text
    r = recipe_tables.recipes
    with w.app.workspace.read() as c:
        owner = c.execute(sa.select(r.c.user_id).where(r.c.name == name)).scalar()
    assert owner == w.user(p).id, f"{p.name}'s recipe belongs to {owner}"


async def t_run_recipe(w: World, p: Principal) -> None:
    if await unavailable_for_read_only(w, p, "run_recipe", {"name": RECIPE_NAME[p.user]}):
        return
    got = await call_tool(w, p, "run_recipe", {"name": RECIPE_NAME[p.user]})
    assert got.ok, f"{p.name} may run their own recipe: {got.text!r}"
    nothing = await missing_answer(w, p, "run_recipe", {"name": "recipe-nobody"})
    for other in set(PEOPLE) - {p.user}:
        got = await call_tool(w, p, "run_recipe", {"name": RECIPE_NAME[other]})
        assert_like_missing("run_recipe", p, f"{other}'s recipe", RECIPE_NAME[other], got, "recipe-nobody", nothing)


async def t_fetch_url(w: World, p: Principal) -> None:
    """Reads the web, not the workspace: the same for everyone."""
    out = await call_tool(w, p, "fetch_url", {"url": w.web_url})
    assert out.ok and WEB_MARK in out.shown, out.text


async def t_describe_data(w: World, p: Principal) -> None:
    """The sources are the workspace's configuration: the same list for everyone (their rows
    are scoped: query_data)."""
    out = await call_tool(w, p, "describe_data", {})
    assert out.ok, out.text
    assert {s["name"] for s in out.payload["sources"]} >= {"notes", "notebooks", "conversations", "recipes"}


async def t_query_data(w: World, p: Principal) -> None:
    """Notes, notebooks and tags as the person sees them; chats and recipes their own."""
    notes = await call_tool(w, p, "query_data", {"source": "notes", "filters": {"title_like": "qz"}, "limit": 100})
    assert notes.ok, notes.text
    assert seen(notes.shown, MARK) == VISIBLE[p.name], f"{p.name} queries the notes of {seen(notes.shown, MARK)}"
    tags = await call_tool(w, p, "query_data", {"source": "tags", "limit": 100})
    assert tags.ok and seen(tags.shown, TAG) == VISIBLE[p.name], f"{p.name} queries tags {seen(tags.shown, TAG)}"
    chats = await call_tool(w, p, "query_data", {"source": "conversations", "limit": 100})
    assert chats.ok, chats.text
    ids = {k for k, cid in w.conversations.items() if cid in chats.shown}
    assert ids == {p.user}, f"{p.name} queries the chats of {ids}"
    recipes = await call_tool(w, p, "query_data", {"source": "recipes", "limit": 100})
    assert recipes.ok and seen(recipes.shown, RECIPE_NAME) == {p.user}, (
        f"{p.name} queries the recipes of {seen(recipes.shown, RECIPE_NAME)}")


async def t_import_notes(w: World, p: Principal) -> None:
    """Files of the owner's machine ([mcp] file_roots; this world names none): the owner is
    told how to name them, anyone else is refused before a path is looked at."""
    await _file_tool(w, p, "import_notes", {"path": "inbox"})


async def t_export_notes(w: World, p: Principal) -> None:
    await _file_tool(w, p, "export_notes", {"path": "export"})


async def _file_tool(w: World, p: Principal, name: str, args: dict[str, Any]) -> None:
    out = await call_tool(w, p, name, args)
    if p.read_only:
        assert out.unavailable, f"{name} is offered to the read-only {p.name}: {out.text}"
    elif p.user == "owner":
        assert not out.ok and "[mcp] file_roots" in out.text, out.text
    else:
        assert not out.ok and "only the owner" in out.text, f"{p.name} reached {name}: {out.text}"


async def t_reindex(w: World, p: Principal) -> None:
    """Maintenance of the whole workspace's index: its owner and admins only."""
    out = await call_tool(w, p, "reindex", {})
    if p.read_only:
        assert out.unavailable, out.text
    elif p.user in ("owner", "admin"):
        assert out.ok and out.payload["rebuilt"] is False, out.text
    else:
        assert not out.ok and "owner and admins" in out.text, f"{p.name} rebuilt the index: {out.text}"


#: Every tool of the registry: (what it is scoped by, the cell).
TOOL_RULES: dict[str, tuple[str, Call]] = {
    "list_notebooks": ("notebooks", t_list_notebooks),
    "list_tags": ("notebooks", t_list_tags),
    "list_trash": ("notebooks", t_list_trash),
    "search_notes": ("notebooks", t_search_notes),
    "semantic_search_notes": ("notebooks", t_semantic_search_notes),
    "read_note": ("notebooks", t_read_note),
    "read_notes": ("notebooks", t_read_notes),
    "read_attachment": ("notebooks", t_read_attachment),
    "create_note": ("notebooks (write)", t_create_note),
    "clip_url": ("notebooks (write)", t_clip_url),
    "create_notebook": ("notebooks (write)", t_create_notebook),
    "update_note": ("notebooks (write)", t_update_note),
    "delete_note": ("notebooks (write)", t_delete_note),
    "restore_note": ("notebooks (write)", t_restore_note),
    "manage_tags": ("notebooks (write)", t_manage_tags),
    "remember": ("person", t_remember),
    "recall": ("person (and shared memories)", t_recall),
    "forget": ("person", t_forget),
    "search_conversations": ("person", t_search_conversations),
    "create_recipe": ("person", t_create_recipe),
    "run_recipe": ("person", t_run_recipe),
    "fetch_url": ("nothing of the workspace", t_fetch_url),
    "describe_data": ("configuration", t_describe_data),
    "query_data": ("notebooks and person", t_query_data),
    "import_notes": ("notebooks (write)", t_import_notes),
    "export_notes": ("notebooks", t_export_notes),
    "reindex": ("workspace (owner and admins)", t_reindex),
}


def test_every_tool_has_a_rule(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), load_entry_points=False)
    try:
        names = {t.name for t in app.registry.all()}
    finally:
        app.close()
    missing = sorted(names - set(TOOL_RULES))
    assert not missing, (f"tools without an access rule: {missing}; add each to TOOL_RULES in "
                         f"{os.path.basename(__file__)} saying what it is scoped by and checking it")
    stale = sorted(set(TOOL_RULES) - names)
    assert not stale, f"TOOL_RULES names tools the registry no longer has: {stale}"


@pytest.mark.parametrize("principal", [p.name for p in PRINCIPALS])
@pytest.mark.parametrize("tool", sorted(TOOL_RULES))
async def test_tool(world: World, tool: str, principal: str) -> None:
    p = BY_NAME[principal]
    within = world.app.registry.get(tool).within_notebooks
    stays = TOOL_RULES[tool][0] in ("notebooks", "notebooks (write)", "nothing of the workspace")
    assert within == stays, f"{tool}: its rule says it is scoped by {TOOL_RULES[tool][0]}, its within_notebooks is {within}"
    if p.scope and not within:
        # It would reach past the token's notebooks (the person's chats, memories, recipes):
        # a notebook-limited token is not offered it, and calling it anyway reads as no such tool.
        got = await call_tool(world, p, tool, {})
        assert got.unavailable, f"{tool} is offered to {p.name}, whose token keeps to some notebooks: {got.text}"
        async with client(world, p) as c:
            r = await c.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert tool not in {t["name"] for t in r.json()["result"]["tools"]}
        return
    await TOOL_RULES[tool][1](world, p)


@pytest.mark.parametrize("principal", [p.name for p in PRINCIPALS])
async def test_mcp_resources(world: World, principal: str) -> None:
    """Resources over MCP follow the read tools' rule: a principal lists and reads the notes,
    notebooks and attachments of the notebooks it sees, and one it does not see reads
    exactly like a missing one."""
    p = BY_NAME[principal]

    async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        async with client(world, p) as c:
            r = await c.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        answer: dict[str, Any] = r.json()
        return answer

    listed: set[str] = set()
    params: dict[str, Any] = {}
    while True:
        page = (await rpc("resources/list", params))["result"]
        listed |= {r["uri"] for r in page["resources"]}
        if "nextCursor" not in page:
            break
        params = {"cursor": page["nextCursor"]}
    for key in BOOKS:
        seen = key in VISIBLE[p.name]
        for uri in (f"note://{world.notes[key]}", f"notebook://{world.books[key]}",
                    f"noteloom://attachment/{world.attachments[key]}"):
            if not uri.startswith("noteloom:"):
                assert (uri in listed) == seen, f"{p.name} lists {uri} ({key}): {uri in listed}"
            got = await rpc("resources/read", {"uri": uri})
            if seen:
                assert "result" in got, f"{p.name} cannot read {uri} ({key}): {got}"
                continue
            missing = uri[:-32] + missing_id()  # each URI ends in its id
            nothing = await rpc("resources/read", {"uri": missing})
            assert got["error"]["code"] == nothing["error"]["code"] == -32002, f"{p.name} reads {uri}: {got}"
            assert same_as_missing(uri, missing, got["error"]["message"], nothing["error"]["message"])
        if seen:
            text = (await rpc("resources/read", {"uri": f"note://{world.notes[key]}"}))["result"]["contents"][0]["text"]
            assert MARK[key] in text


# -- the routes' rules ------------------------------------------------------------------------



async def http(w: World, p: Principal | None, method: str, path: str, **kw: Any) -> httpx.Response:
    async with client(w, p) as c:
        return await c.request(method, path, **kw)


def refusal(p: Principal, *, write: bool, scoped_ok: bool) -> bool:
    """Whether the token's own limits refuse the request before anything is looked at (403):
    a read-only token any write; a notebook-limited token a route that cannot keep to its
    notebooks (the chat, recipes, notifications, people)."""
    return (p.read_only and write) or (bool(p.scope) and not scoped_ok)


def assert_refused(r: httpx.Response, p: Principal, what: str) -> None:
    assert r.status_code == 403, f"{what}: {p.name}'s token must be refused (403), got {r.status_code} {r.text[:300]}"


def like_missing(r: httpx.Response, foreign: str, nothing: httpx.Response, missing: str, p: Principal,
                 what: str) -> None:
    assert r.status_code == nothing.status_code and r.text.replace(foreign, "<ID>") == nothing.text.replace(
        missing, "<ID>"), (f"{what}: for {p.name} it must answer exactly like a missing id:\n"
                           f"  got     {r.status_code} {r.text[:300]}\n  missing {nothing.status_code} {nothing.text[:300]}")


RouteCell = Callable[[World, Principal], Awaitable[None]]


def shell(path: str) -> RouteCell:
    """An HTML shell: no credential needed, no data in it, the same for everyone."""

    async def cell(w: World, p: Principal) -> None:
        url = path.replace("{id}", w.notes["Bob"])
        bare = await http(w, None, "GET", url)
        got = await http(w, p, "GET", url)
        assert bare.status_code == got.status_code == 200, (bare.status_code, got.status_code)
        for m in [*MARK.values(), *CHAT_MARK.values()]:
            assert m not in got.text
    return cell


def same_for_all(method: str, path: str, status: set[int], *, public: bool = False, scoped_ok: bool = True,
                 write: bool = False, **kw: Any) -> RouteCell:
    """A route that holds nothing of any person: the same answer for everyone allowed it."""

    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, method, path, **kw)
        if refusal(p, write=write, scoped_ok=scoped_ok):
            assert_refused(r, p, f"{method} {path}")
            return
        assert r.status_code in status, f"{method} {path} for {p.name}: {r.status_code} {r.text[:300]}"
        for m in [*MARK.values(), *CHAT_MARK.values(), *MEMORY_MARK.values()]:
            assert m not in r.text, f"{method} {path} shows {m}"
        if not public:
            assert (await http(w, None, method, path, **kw)).status_code == 401
    return cell


def workspace_setting(method: str, path: str, status: int, body: dict[str, Any]) -> RouteCell:
    """A workspace setting: the owner and admins change it (members: 403)."""

    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, method, path, json=body)
        if p.name in ("owner", "admin"):
            assert r.status_code == status, f"{method} {path} for the owner: {r.status_code} {r.text[:300]}"
        else:
            assert_refused(r, p, f"{method} {path}")
    return cell


def admin_only(method: str, path: str, status: int, body: Callable[[World], Any] | None = None,
               target: Callable[[World], Awaitable[str]] | None = None) -> RouteCell:
    """Managing people: the owner and admins; members 403."""

    async def cell(w: World, p: Principal) -> None:
        url = path.replace("{user}", await target(w)) if target else path
        r = await http(w, p, method, url, json=body(w) if body else None)
        if p.user in ("owner", "admin"):
            assert r.status_code == status, f"{method} {path} for {p.name}: {r.status_code} {r.text[:300]}"
        else:
            assert_refused(r, p, f"{method} {path}")
    return cell


def personal(method: str, path: str, kind: str, ok: set[int], *, write: bool = False, scoped_ok: bool = False,
             body: Any = None, fresh: Callable[[World, str], Awaitable[str]] | None = None,
             mark: dict[str, str] | None = None) -> RouteCell:
    """A route on one thing of one person (a chat, memory, recipe, run, webhook): theirs
    answers, anyone else's (an admin's or the owner's asking included) exactly like a missing id."""

    async def ids(w: World, person: str) -> str:
        if fresh is not None:
            return await fresh(w, person)
        return str(getattr(w, kind)[person])

    async def cell(w: World, p: Principal) -> None:
        own = await ids(w, p.user)
        r = await http(w, p, method, path.replace("{id}", own), json=body)
        if refusal(p, write=write, scoped_ok=scoped_ok):
            assert_refused(r, p, f"{method} {path}")
            return
        assert r.status_code in ok, f"{method} {path} on {p.name}'s own: {r.status_code} {r.text[:300]}"
        if mark is not None and r.status_code == 200:
            assert mark[p.user] in r.text, f"{method} {path}: {p.name}'s own does not show {mark[p.user]}"
        nothing_id = missing_id()
        nothing = await http(w, p, method, path.replace("{id}", nothing_id), json=body)
        assert nothing.status_code == 404, f"{method} {path} with a missing id: {nothing.status_code}"
        for other in set(PEOPLE) - {p.user}:
            theirs = await ids(w, other)
            got = await http(w, p, method, path.replace("{id}", theirs), json=body)
            like_missing(got, theirs, nothing, nothing_id, p, f"{method} {path} on {other}'s")
    return cell


def no_fixture(method: str, path: str, *, write: bool, body: Any = None) -> RouteCell:
    """Things the fixture cannot make without a model's help (a proposed edit, a chat
    attachment): an unknown id is 404 for everyone the token lets through."""

    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, method, path.replace("{id}", missing_id()), json=body)
        if refusal(p, write=write, scoped_ok=False):
            assert_refused(r, p, f"{method} {path}")
            return
        assert r.status_code == 404, f"{method} {path} for {p.name}: {r.status_code} {r.text[:300]}"
    return cell


def person_list(path: str, marks: dict[str, str], *, scoped_ok: bool = False, also: str | None = None) -> RouteCell:
    """A list of the person's own things: their markers only (``also``: one everyone sees)."""

    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, "GET", path)
        if refusal(p, write=False, scoped_ok=scoped_ok):
            assert_refused(r, p, f"GET {path}")
            return
        assert r.status_code == 200, f"GET {path} for {p.name}: {r.status_code} {r.text[:300]}"
        assert seen(r.text, marks) == {p.user}, f"GET {path}: {p.name} sees the things of {seen(r.text, marks)}"
        if also is not None:
            assert also in r.text
    return cell


# Notes and notebooks: the person's access, within the token's notebooks.


async def r_notes_list(w: World, p: Principal) -> None:
    for params in ({"limit": 500}, {"q": COMMON, "limit": 500}):
        r = await http(w, p, "GET", "/api/v1/notes", params=params)
        assert r.status_code == 200, r.text
        assert seen(r.text, MARK) == VISIBLE[p.name], f"GET /api/v1/notes {params}: {p.name} sees {seen(r.text, MARK)}"
    nothing_id = missing_id()
    nothing = await http(w, p, "GET", "/api/v1/notes", params={"notebook_id": nothing_id})
    for book in BOOKS:
        r = await http(w, p, "GET", "/api/v1/notes", params={"notebook_id": w.books[book]})
        if book in VISIBLE[p.name]:
            assert r.status_code == 200 and MARK[book] in r.text, f"{p.name} lists {book}: {r.text[:300]}"
        else:
            like_missing(r, w.books[book], nothing, nothing_id, p, f"GET /api/v1/notes?notebook_id= {book}")


async def r_notes_create(w: World, p: Principal) -> None:
    nothing_id = missing_id()
    nothing = await http(w, p, "POST", "/api/v1/notes", json={"title": "x", "notebook_id": nothing_id})
    for book in BOOKS:
        title = w.unique(f"api note by {p.name}")
        r = await http(w, p, "POST", "/api/v1/notes", json={"title": title, "notebook_id": w.books[book]})
        made = note_titled(w, title) is not None
        if p.read_only:
            assert_refused(r, p, "POST /api/v1/notes")
        elif access(p, book) == "write":
            assert r.status_code == 201 and made, f"{p.name} may create a note in {book}: {r.status_code} {r.text}"
            continue
        elif access(p, book) == "read":
            assert r.status_code == 403, f"{p.name} sees {book} read-only: a create is 403, got {r.status_code} {r.text}"
        else:
            like_missing(r, w.books[book], nothing, nothing_id, p, f"POST /api/v1/notes in {book}")
        assert not made, f"{p.name} was refused, yet a note was made in {book}"
    if not p.read_only:
        title = w.unique(f"api default of {p.name}")
        r = await http(w, p, "POST", "/api/v1/notes", json={"title": title})
        assert r.status_code == 201, f"{p.name} creates a note without a notebook: {r.status_code} {r.text}"
        book = r.json()["notebook_id"]
        if p.user == "ann":
            assert owner_of_book(w, book) == w.user(p).id, f"{p.name}'s note went to someone else's notebook"


def note_read(path: str) -> RouteCell:
    async def cell(w: World, p: Principal) -> None:
        nothing_id = missing_id()
        nothing = await http(w, p, "GET", path.replace("{id}", nothing_id))
        assert nothing.status_code == 404
        for book in BOOKS:
            r = await http(w, p, "GET", path.replace("{id}", w.notes[book]))
            if book in VISIBLE[p.name]:
                assert r.status_code == 200, f"GET {path} for {p.name} in {book}: {r.status_code} {r.text[:300]}"
                if "revisions" not in path:
                    assert MARK[book] in r.text
            else:
                like_missing(r, w.notes[book], nothing, nothing_id, p, f"GET {path} in {book}")
    return cell


async def r_note_patch(w: World, p: Principal) -> None:
    nothing_id = missing_id()
    nothing = await http(w, p, "PATCH", f"/api/v1/notes/{nothing_id}", json={"body": "patched"})
    for book in BOOKS:
        note_id = w.fresh_note(book)
        r = await http(w, p, "PATCH", f"/api/v1/notes/{note_id}", json={"body": "patched"})
        changed = note_row(w, note_id).body == "patched"
        rule = access(p, book)
        if p.read_only:
            assert_refused(r, p, "PATCH /api/v1/notes/{id}")
        elif rule == "write":
            assert r.status_code == 200 and changed, f"{p.name} may save a note in {book}: {r.status_code} {r.text}"
            continue
        elif rule == "read":
            assert r.status_code == 403, f"{p.name} saves a note in read-only {book}: {r.status_code} {r.text}"
        else:
            like_missing(r, note_id, nothing, nothing_id, p, f"PATCH a note in {book}")
        assert not changed, f"{p.name} was refused, yet the note in {book} changed"


async def r_revision_restore(w: World, p: Principal) -> None:
    ws = w.app.workspace
    nothing_note, nothing_rev = missing_id(), missing_id()
    nothing = await http(w, p, "POST", f"/api/v1/notes/{nothing_note}/revisions/{nothing_rev}/restore")
    for book in BOOKS:
        note_id = w.fresh_note(book)
        ws.update_note(note_id, body="second")
        rev = ws.list_revisions(note_id)[0].id
        r = await http(w, p, "POST", f"/api/v1/notes/{note_id}/revisions/{rev}/restore")
        restored = note_row(w, note_id).body != "second"
        rule = access(p, book)
        if p.read_only:
            assert_refused(r, p, "restore a revision")
        elif rule == "write":
            assert r.status_code == 200 and restored, f"{p.name} restores in {book}: {r.status_code} {r.text}"
            continue
        elif rule == "read":
            assert r.status_code == 403, f"{p.name} restores in read-only {book}: {r.status_code} {r.text}"
        else:
            assert r.status_code == nothing.status_code and r.text.replace(note_id, "<N>").replace(rev, "<R>") == \
                nothing.text.replace(nothing_note, "<N>").replace(nothing_rev, "<R>"), (
                f"restore in {book} for {p.name} must read like missing: {r.text} vs {nothing.text}")
        assert not restored, f"{p.name} was refused, yet a revision was restored in {book}"


def note_change(method: str, suffix: str, done: Callable[[World, str], bool], *, trashed: bool = False,
                **kw: Any) -> RouteCell:
    """A write on one note (the editor's routes), on a fresh note in every notebook: done where
    ``p`` may write, 403 where ``p`` only reads, like a missing id where ``p`` sees nothing."""

    async def cell(w: World, p: Principal) -> None:
        nothing_id = missing_id()
        nothing = await http(w, p, method, f"/api/v1/notes/{nothing_id}{suffix}", **kw)
        for book in BOOKS:
            note_id = w.fresh_note(book, trashed=trashed)
            r = await http(w, p, method, f"/api/v1/notes/{note_id}{suffix}", **kw)
            rule = access(p, book)
            what = f"{method} /api/v1/notes/{{id}}{suffix} in {book}"
            if p.read_only:
                assert_refused(r, p, what)
            elif rule == "write":
                assert r.status_code < 300 and done(w, note_id), f"{p.name} may: {what}: {r.status_code} {r.text}"
                continue
            elif rule == "read":
                assert r.status_code == 403, f"{p.name} sees {book} read-only: {what}: {r.status_code} {r.text}"
            else:
                like_missing(r, note_id, nothing, nothing_id, p, what)
            assert not done(w, note_id), f"{p.name} was refused, yet {what} happened"
    return cell


def _attachments_of(w: World, note_id: str) -> bool:
    return bool(w.app.workspace.list_attachments(note_id))


async def r_revision_read(w: World, p: Principal) -> None:
    ws = w.app.workspace
    nothing_note, nothing_rev = missing_id(), missing_id()
    nothing = await http(w, p, "GET", f"/api/v1/notes/{nothing_note}/revisions/{nothing_rev}")
    assert nothing.status_code == 404
    for book in BOOKS:
        note_id = w.fresh_note(book)
        ws.update_note(note_id, body="second")
        rev = ws.list_revisions(note_id)[0].id
        r = await http(w, p, "GET", f"/api/v1/notes/{note_id}/revisions/{rev}")
        if book in VISIBLE[p.name]:
            assert r.status_code == 200 and COMMON in r.text, f"{p.name} in {book}: {r.status_code} {r.text}"
        else:
            assert r.status_code == nothing.status_code and r.text.replace(note_id, "<N>").replace(rev, "<R>") == \
                nothing.text.replace(nothing_note, "<N>").replace(nothing_rev, "<R>"), (
                f"a revision in {book} for {p.name} must read like missing: {r.text} vs {nothing.text}")


async def r_browse_tree(w: World, p: Principal) -> None:
    r = await http(w, p, "GET", "/api/v1/browse/tree")
    assert r.status_code == 200, r.text
    titles = {b["title"] for b in r.json()["notebooks"]}
    assert titles & set(BOOKS) == VISIBLE[p.name], f"{p.name}'s tree holds {sorted(titles & set(BOOKS))}"


async def _browse_all(w: World, p: Principal, params: dict[str, Any]) -> tuple[httpx.Response, str]:
    """Every page of the app's note list; the first answer and the text of all pages."""
    first, text, cursor = None, "", None
    while True:
        r = await http(w, p, "GET", "/api/v1/browse/notes",
                       params={**params, "limit": 200, **({"cursor": cursor} if cursor else {})})
        first = first or r
        if r.status_code != 200:
            return first, text
        text += r.text
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return first, text


async def r_browse_notes(w: World, p: Principal) -> None:
    r, text = await _browse_all(w, p, {})
    assert r.status_code == 200 and seen(text, MARK) == VISIBLE[p.name], f"{p.name} lists {seen(text, MARK)}"
    nothing_id = missing_id()
    nothing = await http(w, p, "GET", "/api/v1/browse/notes", params={"notebook_id": nothing_id})
    for book in BOOKS:
        r, text = await _browse_all(w, p, {"notebook_id": w.books[book]})
        if book in VISIBLE[p.name]:
            assert r.status_code == 200 and MARK[book] in text, f"{p.name} lists {book}: {r.text[:300]}"
        else:
            like_missing(r, w.books[book], nothing, nothing_id, p, f"GET /api/v1/browse/notes?notebook_id= {book}")


def browse_find(path: str, key: str) -> RouteCell:
    """Titles or search: each notebook's word finds its note only for those who see it."""

    async def cell(w: World, p: Principal) -> None:
        for book in BOOKS:
            r = await http(w, p, "GET", path, params={"q": MARK[book]})
            assert r.status_code == 200, r.text
            assert (MARK[book] in r.text) == (book in VISIBLE[p.name]), f"{path} {book} for {p.name}: {r.text[:300]}"
            if book not in VISIBLE[p.name]:
                assert r.json()[key] == []
    return cell


async def r_note_move(w: World, p: Principal) -> None:
    """Moving needs the right to change the note (from each notebook into Ann, which everyone
    not read-only may change) and the target (a note of Ann's into each notebook)."""

    async def move(note_id: str, book_id: str) -> httpx.Response:
        return await http(w, p, "POST", f"/api/v1/notes/{note_id}/move", json={"notebook_id": book_id})

    def where(note_id: str) -> str:
        return str(note_row(w, note_id).notebook_id)

    nothing_id = missing_id()
    nothing = await move(nothing_id, w.books["Ann"])
    for book in BOOKS:
        if book == "Ann":
            continue
        note_id = w.fresh_note(book)
        r = await move(note_id, w.books["Ann"])
        what = f"POST /api/v1/notes/{{id}}/move from {book}"
        if p.read_only:
            assert_refused(r, p, what)
        elif access(p, book) == "write":
            assert r.status_code == 200 and where(note_id) == w.books["Ann"], f"{p.name}: {what}: {r.text}"
            continue
        elif access(p, book) == "read":
            assert r.status_code == 403, f"{p.name} sees {book} read-only: {what}: {r.status_code} {r.text}"
        else:
            like_missing(r, note_id, nothing, nothing_id, p, what)
        assert where(note_id) == w.books[book], f"{p.name} was refused, yet {what} happened"
    probe = w.fresh_note("Ann")
    nothing = await move(probe, nothing_id)
    for book in BOOKS:
        note_id = w.fresh_note("Ann")
        r = await move(note_id, w.books[book])
        what = f"POST /api/v1/notes/{{id}}/move into {book}"
        if p.read_only:
            assert_refused(r, p, what)
        elif access(p, book) == "write":
            assert r.status_code == 200 and where(note_id) == w.books[book], f"{p.name}: {what}: {r.text}"
            continue
        elif access(p, book) == "read":
            assert r.status_code == 403, f"{p.name} sees {book} read-only: {what}: {r.status_code} {r.text}"
        else:
            like_missing(r, w.books[book], nothing, nothing_id, p, what)
        assert where(note_id) == w.books["Ann"], f"{p.name} was refused, yet {what} happened"


async def r_notebooks(w: World, p: Principal) -> None:
    r = await http(w, p, "GET", "/api/v1/notebooks")
    assert r.status_code == 200, r.text
    titles = {b["title"] for b in r.json()}
    assert titles & set(BOOKS) == VISIBLE[p.name], f"{p.name} lists notebooks {sorted(titles & set(BOOKS))}"


async def r_attachment(w: World, p: Principal) -> None:
    nothing_id = missing_id()
    nothing = await http(w, p, "GET", f"/attachments/{nothing_id}")
    assert (await http(w, None, "GET", f"/attachments/{w.attachments['Ann']}")).status_code == 401
    for book in BOOKS:
        r = await http(w, p, "GET", f"/attachments/{w.attachments[book]}")
        if book in VISIBLE[p.name]:
            assert r.status_code == 200 and ATTACHMENT_MARK[book] in r.text, f"{p.name} gets {book}'s file: {r.status_code}"
        else:
            like_missing(r, w.attachments[book], nothing, nothing_id, p, f"GET {book}'s attachment")


async def r_backlinks(w: World, p: Principal) -> None:
    """Rendering (issue 17): a note's backlinks as the reader sees them, from notes they may see."""
    nothing_id = missing_id()
    nothing = await http(w, p, "GET", f"/api/v1/notes/{nothing_id}/backlinks")
    assert nothing.status_code == 404
    for book in BOOKS:
        r = await http(w, p, "GET", f"/api/v1/notes/{w.notes[book]}/backlinks")
        if book in VISIBLE[p.name]:
            assert r.status_code == 200, f"backlinks in {book} for {p.name}: {r.status_code} {r.text[:300]}"
        else:
            like_missing(r, w.notes[book], nothing, nothing_id, p, f"GET backlinks in {book}")
    target = w.fresh_note("Ann")
    linkers = {}
    for book in BOOKS:
        linkers[book] = w.fresh_note(book)
        w.app.workspace.update_note(linkers[book], body=f"see [it](:/{target})")
    r = await http(w, p, "GET", f"/api/v1/notes/{target}/backlinks")
    listed = {b["id"] for b in r.json()}
    assert {book for book, nid in linkers.items() if nid in listed} == VISIBLE[p.name], (
        f"{p.name} is shown backlinks from {sorted(b for b, nid in linkers.items() if nid in listed)}")


async def r_task_toggle(w: World, p: Principal) -> None:
    nothing_id = missing_id()
    nothing = await http(w, p, "POST", f"/api/v1/notes/{nothing_id}/tasks", json={"line": 0, "done": True})
    for book in BOOKS:
        note_id = w.fresh_note(book)
        w.app.workspace.update_note(note_id, body="- [ ] a task")
        r = await http(w, p, "POST", f"/api/v1/notes/{note_id}/tasks", json={"line": 0, "done": True})
        changed = note_row(w, note_id).body == "- [x] a task"
        rule = access(p, book)
        if p.read_only:
            assert_refused(r, p, "POST /api/v1/notes/{id}/tasks")
        elif rule == "write":
            assert r.status_code == 200 and changed, f"{p.name} ticks a task in {book}: {r.status_code} {r.text}"
            continue
        elif rule == "read":
            assert r.status_code == 403, f"{p.name} ticks a task in read-only {book}: {r.status_code} {r.text}"
        else:
            like_missing(r, note_id, nothing, nothing_id, p, f"tick a task in {book}")
        assert not changed, f"{p.name} was refused, yet the task in {book} changed"


async def r_links_resolve(w: World, p: Principal) -> None:
    """Links resolve to the notes and attachments the reader may see; the rest reads as missing."""
    ids = [*w.notes.values(), *w.attachments.values(), missing_id()]
    r = await http(w, p, "POST", "/api/v1/links/resolve", json={"ids": ids, "titles": [f"{MARK[b]} note" for b in BOOKS]})
    assert r.status_code == 200, f"links/resolve for {p.name}: {r.status_code} {r.text[:300]}"
    got = r.json()
    assert {b for b in BOOKS if w.notes[b] in got["notes"]} == VISIBLE[p.name]
    assert {b for b in BOOKS if w.attachments[b] in got["attachments"]} == VISIBLE[p.name]
    assert {b for b in BOOKS if f"{MARK[b]} note" in got["titles"]} == VISIBLE[p.name]
    assert (await http(w, None, "POST", "/api/v1/links/resolve", json={"ids": []})).status_code == 401


async def r_index_status(w: World, p: Principal) -> None:
    r = await http(w, p, "GET", "/api/v1/index/status")
    assert r.status_code == 200, r.text
    owner = (await http(w, BY_NAME["owner"], "GET", "/api/v1/index/status")).json()
    if VISIBLE[p.name] != VISIBLE["owner"]:
        assert r.json() != owner or not owner.get("enabled"), f"{p.name} reads the whole workspace's index counts"




# People and shares.


async def r_me(w: World, p: Principal) -> None:
    r = await http(w, p, "GET", "/api/v1/me")
    # Who one is holds no notebook data: a notebook-scoped token may ask (a read-only one too).
    if refusal(p, write=False, scoped_ok=True):
        assert_refused(r, p, "GET /api/v1/me")
        return
    assert r.status_code == 200 and r.json()["name"] == w.user(p).name, r.text


FIRST_PASSWORDS = {"owner": None, "admin": None, "ann": "ann's long password", "bob": "bob's long password"}
#: Each database's people's passwords as the cells change them: (the world's app, person) -> password.
PASSWORDS: dict[tuple[int, str], str | None] = {}


async def r_me_password(w: World, p: Principal) -> None:
    new = w.unique(f"{p.name} new long password")
    key = (id(w.app), p.user)
    old = PASSWORDS.get(key, FIRST_PASSWORDS[p.user])
    r = await http(w, p, "PATCH", "/api/v1/me/password", json={"old_password": old, "new_password": new})
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "PATCH /api/v1/me/password")
        return
    assert r.status_code == 200, f"{p.name} changes their password: {r.status_code} {r.text}"
    PASSWORDS[key] = new


async def new_person(w: World) -> str:
    return w.app.workspace.add_person(w.unique("temp")).id


def share_route(method: str) -> RouteCell:
    """A notebook's shares: its owner or an admin; a member who only sees it (even to write)
    403; one who does not see it, like a missing notebook. Shared with a new person each time."""

    async def cell(w: World, p: Principal) -> None:
        body = {"access": "read"} if method == "PUT" else None
        target = await new_person(w)
        suffix = "" if method == "GET" else f"/{target}"
        nothing_id = missing_id()
        nothing = await http(w, p, method, f"/api/v1/notebooks/{nothing_id}/shares{suffix}", json=body)
        for book in ("Work", "Team", "Ann", "Shared", "Bob"):
            if method == "DELETE":  # something to unshare
                w.app.workspace.share_notebook(w.books[book], target, "read")
            r = await http(w, p, method, f"/api/v1/notebooks/{w.books[book]}/shares{suffix}", json=body)
            if refusal(p, write=method != "GET", scoped_ok=False):
                assert_refused(r, p, f"{method} shares")
                continue
            owns = p.user in ("owner", "admin") or (p.user == "ann" and book == "Ann")
            if owns:
                assert r.status_code in (200, 204), f"{method} shares of {book} for {p.name}: {r.status_code} {r.text}"
            elif book in VISIBLE[p.name]:
                assert r.status_code == 403, f"{method} shares of {book} for {p.name}: {r.status_code} {r.text}"
            else:
                like_missing(r, w.books[book], nothing, nothing_id, p, f"{method} shares of {book}")
    return cell


# Sign-in and sign-out.


async def r_sign_in(w: World, p: Principal) -> None:
    r = await http(w, None, "POST", "/api/v1/auth/sign-in", json={"token": w.tokens[p.token]})
    assert r.status_code == 201, r.text
    session = r.json()["session"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=w.web), base_url="http://testserver",
                                 headers={"X-Noteloom-Session": session}) as c:
        notes = await c.get("/api/v1/notes", params={"limit": 500})
    assert notes.status_code == 200 and seen(notes.text, MARK) == VISIBLE[p.name], (
        f"a session from {p.name}'s token sees {seen(notes.text, MARK)}")
    if p.name == "ann":
        r = await http(w, None, "POST", "/api/v1/auth/sign-in",
                       json={"name": "bob", "password": PASSWORDS.get((id(w.app), "bob"), FIRST_PASSWORDS["bob"])})
        assert r.status_code == 201, r.text
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=w.web), base_url="http://testserver",
                                     headers={"X-Noteloom-Session": r.json()["session"]}) as c:
            notes = await c.get("/api/v1/notes", params={"limit": 500})
        assert seen(notes.text, MARK) == {"Shared", "Bob"}, f"bob's password session sees {seen(notes.text, MARK)}"
        wrong = await http(w, None, "POST", "/api/v1/auth/sign-in", json={"name": "bob", "password": "wrong password!"})
        assert wrong.status_code == 401


async def r_sign_out(w: World, p: Principal) -> None:
    """Any live credential ends its own browser session (a limited token's too)."""
    r = await http(w, None, "POST", "/api/v1/auth/sign-in", json={"token": w.tokens[p.token]})
    assert r.status_code == 201, r.text
    session = {"X-Noteloom-Session": r.json()["session"]}
    out = await http(w, None, "POST", "/api/v1/auth/sign-out", headers=session)
    assert out.status_code in (200, 204), out.text
    assert (await http(w, None, "GET", "/api/v1/notebooks", headers=session)).status_code == 401


# MCP over HTTP: every method; the tools offered per token.


async def r_mcp(w: World, p: Principal) -> None:
    r = await http(w, p, "POST", "/mcp", headers={"Accept": "application/json, text/event-stream"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 200, r.text
    names = {t["name"] for t in r.json()["result"]["tools"]}
    tools = w.app.registry.all()
    expected = {t.name for t in tools if (t.effect == "read" or not p.read_only)
                and (t.within_notebooks or not p.scope)}
    assert names == expected, f"{p.name} is offered {sorted(names ^ expected)} wrongly"
    assert (await http(w, None, "POST", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            ).status_code == 401


def mcp_other(method: str) -> RouteCell:
    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, method, "/mcp")
        owner = await http(w, BY_NAME["owner"], method, "/mcp")
        assert r.status_code == owner.status_code, f"{method} /mcp: {p.name} {r.status_code}, owner {owner.status_code}"
        assert (await http(w, None, method, "/mcp")).status_code == 401
    return cell


# Chats.


async def fresh_conversation(w: World, person: str) -> str:
    chat = w.app.services.chat
    assert chat is not None
    user = w.people[person]
    sent = await chat.send(user, w.unique(f"{CHAT_MARK[person]} again"), controls={"model": "matrix:script"})
    async for _ in chat.events(user, sent.message_id, 0):
        pass
    return str(sent.conversation_id)


async def fresh_turn(w: World, person: str, *, question: bool = False) -> str:
    """A settled turn of ``person``'s, made for one cell: its answer's id (or its question's)."""
    chat = w.app.services.chat
    assert chat is not None
    user = w.people[person]
    sent = await chat.send(user, w.unique(f"{CHAT_MARK[person]} turn"), controls={"model": "matrix:script"})
    async for _ in chat.events(user, sent.message_id, 0):
        pass
    return str(sent.user_message_id if question else sent.message_id)


async def fresh_question(w: World, person: str) -> str:
    return await fresh_turn(w, person, question=True)


async def r_chat_trash(w: World, p: Principal) -> None:
    """Each person's own chat trash: the dry run lists their deleted chats only, and emptying
    it purges theirs only."""
    chat = w.app.services.chat
    assert chat is not None
    for person in PEOPLE:
        await chat.delete_conversation(w.people[person], await fresh_conversation(w, person))
    r = await http(w, p, "DELETE", "/api/v1/chat/trash?dry_run=true")
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "DELETE /api/v1/chat/trash")
        return
    assert r.status_code == 200, f"DELETE /api/v1/chat/trash for {p.name}: {r.status_code} {r.text[:300]}"
    assert seen(r.text, CHAT_MARK) == {p.user}, f"{p.name}'s trash shows the chats of {seen(r.text, CHAT_MARK)}"
    r = await http(w, p, "DELETE", "/api/v1/chat/trash")
    assert r.status_code == 200 and seen(r.text, CHAT_MARK) == {p.user}
    for other in set(PEOPLE) - {p.user}:
        left = await chat.empty_trash(w.people[other], dry_run=True)
        assert left["totals"]["conversations"] >= 1, f"{p.name} emptied {other}'s trash"


async def r_chat_send(w: World, p: Principal) -> None:
    body = {"message": w.unique("hello"), "controls": {"model": "matrix:script"}}
    r = await http(w, p, "POST", "/api/v1/chat/send", json=body)
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "POST /api/v1/chat/send")
        return
    assert r.status_code == 202, r.text
    nothing_id = missing_id()
    nothing = await http(w, p, "POST", "/api/v1/chat/send", json={**body, "conversation_id": nothing_id})
    for other in set(PEOPLE) - {p.user}:
        theirs = w.conversations[other]
        got = await http(w, p, "POST", "/api/v1/chat/send", json={**body, "conversation_id": theirs})
        like_missing(got, theirs, nothing, nothing_id, p, f"sending into {other}'s chat")


async def r_conversations(w: World, p: Principal) -> None:
    r = await http(w, p, "GET", "/api/v1/chat/conversations", params={"limit": 100})
    if refusal(p, write=False, scoped_ok=False):
        assert_refused(r, p, "GET /api/v1/chat/conversations")
        return
    assert r.status_code == 200, r.text
    ids = {k for k, cid in w.conversations.items() if cid in r.text}
    assert ids == {p.user}, f"{p.name} lists the chats of {ids}"
    found = await http(w, p, "GET", "/api/v1/chat/conversations", params={"search": "qzchat"})
    assert {k for k, cid in w.conversations.items() if cid in found.text} == {p.user}


# Recipes, notifications, webhooks.


async def fresh_recipe(w: World, person: str) -> str:
    recipes = w.app.services.recipes
    assert recipes is not None
    return str(recipes.add(w.people[person], {"name": w.unique(f"temp recipe of {person}"), "prompt": "Report.",
                                               "model": "matrix:script"})["id"])


async def fresh_webhook(w: World, person: str) -> str:
    from noteloom.notifications import Notifications

    return Notifications(w.app.engine).add_webhook(w.people[person].id, f"https://hooks.example/{w.unique('x')}",
                                                   ["failure"])[0]


async def fresh_memory(w: World, person: str) -> str:
    return w.fresh_memory(person)


async def r_recipes_post(w: World, p: Principal) -> None:
    name = w.unique(f"api recipe of {p.name}")
    r = await http(w, p, "POST", "/api/v1/recipes", json={"name": name, "prompt": "Report.", "model": "matrix:script"})
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "POST /api/v1/recipes")
        return
    assert r.status_code == 201, r.text
    rt = recipe_tables.recipes
    with w.app.workspace.read() as c:
        assert c.execute(sa.select(rt.c.user_id).where(rt.c.name == name)).scalar() == w.user(p).id


async def r_recipes_import(w: World, p: Principal) -> None:
    name = w.unique(f"imported by {p.name}")
    text = f"recipes:\n- name: {name}\n  prompt: Report.\n"
    r = await http(w, p, "POST", "/api/v1/recipes/import", content=text.encode(),
                   headers={"Content-Type": "application/yaml"})
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "POST /api/v1/recipes/import")
        return
    assert r.status_code == 201, r.text
    rt = recipe_tables.recipes
    with w.app.workspace.read() as c:
        assert c.execute(sa.select(rt.c.user_id).where(rt.c.name == name)).scalar() == w.user(p).id


def recipes_view(path: str) -> RouteCell:
    """A view over the person's recipes (options, jobs, schedule, pending, spend, export): no
    one else's recipe in it."""

    async def cell(w: World, p: Principal) -> None:
        r = await http(w, p, "GET", path)
        if refusal(p, write=False, scoped_ok=False):
            assert_refused(r, p, f"GET {path}")
            return
        assert r.status_code == 200, f"GET {path} for {p.name}: {r.status_code} {r.text[:300]}"
        others = seen(r.text, RECIPE_NAME) - {p.user}
        assert not others, f"GET {path}: {p.name} sees the recipes of {others}"
        others_ids = {k for k, rid in w.recipes.items() if rid in r.text} - {p.user}
        assert not others_ids, f"GET {path}: {p.name} sees the recipes of {others_ids}"
    return cell


async def r_notifications_read(w: World, p: Principal) -> None:
    from noteloom.notifications import Notifications

    store = Notifications(w.app.engine)
    before = {k: store.unread_count(w.people[k].id) for k in PEOPLE}
    r = await http(w, p, "POST", "/api/v1/notifications/read",
                   json={"ids": [w.notifications[k] for k in PEOPLE if k != p.user]})
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "POST /api/v1/notifications/read")
        return
    assert r.status_code == 200, r.text
    after = {k: store.unread_count(w.people[k].id) for k in PEOPLE}
    assert {k: after[k] for k in PEOPLE if k != p.user} == {k: before[k] for k in PEOPLE if k != p.user}, (
        f"{p.name} marked other people's notifications read")


async def r_webhooks_post(w: World, p: Principal) -> None:
    url = f"https://hooks.example/{w.unique(p.name)}"
    r = await http(w, p, "POST", "/api/v1/webhooks", json={"url": url})
    if refusal(p, write=True, scoped_ok=False):
        assert_refused(r, p, "POST /api/v1/webhooks")
        return
    assert r.status_code == 201, r.text
    from noteloom.notifications import Notifications

    assert url in {h.url for h in Notifications(w.app.engine).list_webhooks(w.user(p).id)}


async def r_memory_post(w: World, p: Principal) -> None:
    content = w.unique(f"api memory of {p.name}")
    r = await http(w, p, "POST", "/api/v1/memory", json={"content": content})
    if refusal(p, write=True, scoped_ok=True):
        assert_refused(r, p, "POST /api/v1/memory")
        return
    assert r.status_code == 201, r.text
    m = memory_tables.memories
    with w.app.workspace.read() as c:
        assert c.execute(sa.select(m.c.user_id).where(m.c.content == content)).scalar() == w.user(p).id


async def r_memory_list(w: World, p: Principal) -> None:
    await person_list("/api/v1/memory?limit=500", MEMORY_MARK, scoped_ok=True, also=SHARED_MEMORY_MARK)(w, p)


# The vault: each person's own, reached by no id (nobody can name another's); limited tokens
# may not use it, read-only ones only read its status.
VAULT_PASS = "matrix vault passphrase"


def own_vault(w: World, p: Principal) -> None:
    from noteloom.vault import Vault

    vault = Vault(w.app.engine)
    if not vault.exists(w.user(p).id):
        vault.create(w.user(p).id, VAULT_PASS)


def vault_route(method: str, path: str, ok: set[int], *, body: dict[str, Any] | None = None,
                unlock_first: bool = False) -> RouteCell:
    async def cell(w: World, p: Principal) -> None:
        write = method != "GET"
        if path != "/api/v1/vault/setup":
            own_vault(w, p)
        if unlock_first and not refusal(p, write=True, scoped_ok=False):
            opened = await http(w, p, "POST", "/api/v1/vault/unlock", json={"passphrase": VAULT_PASS})
            assert opened.status_code == 200, opened.text
        r = await http(w, p, method, path, **({"json": body} if body is not None else {}))
        if refusal(p, write=write, scoped_ok=False):
            assert_refused(r, p, f"{method} {path}")
            return
        assert r.status_code in ok, f"{method} {path} for {p.name}: {r.status_code} {r.text[:300]}"
        assert (await http(w, None, method, path)).status_code == 401
    return cell


OK_READ = {200}
ROUTE_RULES: dict[tuple[str, str], RouteCell] = {
    # Public: shells and the health check hold nothing; sign-in checks its own credential.
    ("GET", "/health"): same_for_all("GET", "/health", {200}, public=True),
    ("GET", "/static"): same_for_all("GET", "/static/noteloom.css", {200}, public=True),
    ("GET", "/"): shell("/"),
    ("GET", "/notebooks/{notebook_id}"): shell("/notebooks/{id}"),
    ("GET", "/notes/{note_id}"): shell("/notes/{id}"),
    ("GET", "/api/docs"): shell("/api/docs"),
    ("GET", "/chat"): shell("/chat"),
    ("GET", "/chat/{conversation_id}"): shell("/chat/{id}"),
    ("GET", "/recipes"): shell("/recipes"),
    ("GET", "/recipes/runs/{run_id}"): shell("/recipes/runs/{id}"),
    ("GET", "/recipes/{recipe_id}"): shell("/recipes/{id}"),
    ("GET", "/memory"): shell("/memory"),
    ("POST", "/api/v1/auth/sign-in"): r_sign_in,
    ("POST", "/api/v1/auth/sign-out"): r_sign_out,
    ("GET", "/api/v1/openapi.json"): same_for_all("GET", "/api/v1/openapi.json", {200}),
    ("HEAD", "/api/v1/openapi.json"): same_for_all("HEAD", "/api/v1/openapi.json", {200}),
    # MCP
    ("POST", "/mcp"): r_mcp,
    **{(m, "/mcp"): mcp_other(m) for m in ("GET", "HEAD", "PUT", "PATCH", "DELETE")},
    # Notes and notebooks: the person's access within the token's notebooks.
    ("GET", "/api/v1/notes"): r_notes_list,
    ("POST", "/api/v1/notes"): r_notes_create,
    ("GET", "/api/v1/notes/{note_id}"): note_read("/api/v1/notes/{id}"),
    ("GET", "/api/v1/notes/{note_id}/rendered"): note_read("/api/v1/notes/{id}/rendered"),
    ("GET", "/api/v1/notes/{note_id}/revisions"): note_read("/api/v1/notes/{id}/revisions"),
    ("PATCH", "/api/v1/notes/{note_id}"): r_note_patch,
    ("POST", "/api/v1/notes/{note_id}/revisions/{revision_id}/restore"): r_revision_restore,
    ("DELETE", "/api/v1/notes/{note_id}"): note_change(
        "DELETE", "", lambda w, n: note_row(w, n).deleted_time is not None),
    ("POST", "/api/v1/notes/{note_id}/restore"): note_change(
        "POST", "/restore", lambda w, n: note_row(w, n).deleted_time is None, trashed=True),
    ("POST", "/api/v1/notes/{note_id}/attachments"): note_change(
        "POST", "/attachments", _attachments_of, files={"file": ("a.txt", b"attached", "text/plain")}),
    ("GET", "/api/v1/notes/{note_id}/revisions/{revision_id}"): r_revision_read,
    ("POST", "/api/v1/notes/preview"): same_for_all("POST", "/api/v1/notes/preview", {200}, json={"markdown": "*x*"}),
    ("GET", "/api/v1/notes/{note_id}/backlinks"): r_backlinks,
    ("POST", "/api/v1/notes/{note_id}/tasks"): r_task_toggle,
    ("POST", "/api/v1/links/resolve"): r_links_resolve,
    ("GET", "/api/v1/notebooks"): r_notebooks,
    ("GET", "/api/v1/browse/tree"): r_browse_tree,
    ("GET", "/api/v1/browse/notes"): r_browse_notes,
    ("GET", "/api/v1/browse/titles"): browse_find("/api/v1/browse/titles", "notes"),
    ("GET", "/api/v1/browse/search"): browse_find("/api/v1/browse/search", "results"),
    ("POST", "/api/v1/notes/{note_id}/move"): r_note_move,
    ("GET", "/search"): shell("/search"),
    ("GET", "/runs/{run_id}"): same_for_all("GET", "/runs/" + "0" * 32, {308}, public=True),
    ("GET", "/attachments/{attachment_id}"): r_attachment,
    ("GET", "/api/v1/index/status"): r_index_status,
    # Tool policies and workspace settings: read by all, changed by the owner.
    ("GET", "/api/v1/tools/{name}/policy"): same_for_all("GET", "/api/v1/tools/read_note/policy", {200}),
    ("PUT", "/api/v1/tools/{name}/policy"): workspace_setting("PUT", "/api/v1/tools/read_note/policy", 200,
                                                       {"policy": None}),
    ("GET", "/api/v1/memory/default"): same_for_all("GET", "/api/v1/memory/default", {200}),
    ("PUT", "/api/v1/memory/default"): workspace_setting("PUT", "/api/v1/memory/default", 200, {"memory_default": True}),
    ("GET", "/api/v1/recipes/cap"): same_for_all("GET", "/api/v1/recipes/cap", {200}, scoped_ok=False),
    ("PUT", "/api/v1/recipes/cap"): workspace_setting("PUT", "/api/v1/recipes/cap", 200, {}),
    # Memories: the person's own and the shared ones.
    ("GET", "/api/v1/memory"): r_memory_list,
    ("POST", "/api/v1/memory"): r_memory_post,
    ("GET", "/api/v1/memory/{memory_id}"): personal("GET", "/api/v1/memory/{id}", "memories", OK_READ,
                                                   scoped_ok=True, mark=MEMORY_MARK),
    ("PATCH", "/api/v1/memory/{memory_id}"): personal("PATCH", "/api/v1/memory/{id}", "memories", {200}, write=True,
                                                     scoped_ok=True, body={"title": "patched"}, fresh=fresh_memory),
    ("DELETE", "/api/v1/memory/{memory_id}"): personal("DELETE", "/api/v1/memory/{id}", "memories", {204},
                                                      write=True, scoped_ok=True, fresh=fresh_memory),
    # Chats: the person's alone.
    ("GET", "/api/v1/vault"): vault_route("GET", "/api/v1/vault", {200}),
    ("POST", "/api/v1/vault/setup"): vault_route("POST", "/api/v1/vault/setup", {201, 409},
                                                 body={"passphrase": VAULT_PASS}),
    ("POST", "/api/v1/vault/unlock"): vault_route("POST", "/api/v1/vault/unlock", {200},
                                                  body={"passphrase": VAULT_PASS}),
    ("POST", "/api/v1/vault/lock"): vault_route("POST", "/api/v1/vault/lock", {204}),
    ("POST", "/api/v1/vault/passphrase"): vault_route(
        "POST", "/api/v1/vault/passphrase", {204}, body={"old_passphrase": VAULT_PASS, "new_passphrase": VAULT_PASS}),
    ("POST", "/api/v1/vault/rotate"): vault_route("POST", "/api/v1/vault/rotate", {200}, unlock_first=True),
    ("POST", "/api/v1/chat/send"): r_chat_send,
    ("GET", "/api/v1/chat/conversations"): r_conversations,
    ("GET", "/api/v1/chat/conversations/{conversation_id}"): personal(
        "GET", "/api/v1/chat/conversations/{id}", "conversations", OK_READ, mark=CHAT_MARK),
    ("PATCH", "/api/v1/chat/conversations/{conversation_id}"): personal(
        "PATCH", "/api/v1/chat/conversations/{id}", "conversations", {200}, write=True, body={"pinned": True}),
    ("DELETE", "/api/v1/chat/conversations/{conversation_id}"): personal(
        "DELETE", "/api/v1/chat/conversations/{id}", "conversations", {204}, write=True, fresh=fresh_conversation),
    ("GET", "/api/v1/chat/conversations/{conversation_id}/export"): personal(
        "GET", "/api/v1/chat/conversations/{id}/export", "conversations", OK_READ, mark=CHAT_MARK),
    ("GET", "/api/v1/chat/messages/{message_id}"): personal("GET", "/api/v1/chat/messages/{id}", "messages", OK_READ),
    ("GET", "/api/v1/chat/messages/{message_id}/events"): personal(
        "GET", "/api/v1/chat/messages/{id}/events", "messages", OK_READ),
    ("DELETE", "/api/v1/chat/trash"): r_chat_trash,
    ("POST", "/api/v1/chat/messages/{message_id}/regenerate"): personal(
        "POST", "/api/v1/chat/messages/{id}/regenerate", "messages", {202}, write=True, fresh=fresh_turn),
    ("POST", "/api/v1/chat/messages/{message_id}/edit"): personal(
        "POST", "/api/v1/chat/messages/{id}/edit", "messages", {202}, write=True, body={"message": "edited"},
        fresh=fresh_question),
    ("POST", "/api/v1/chat/messages/{message_id}/show"): personal(
        "POST", "/api/v1/chat/messages/{id}/show", "messages", {200}, write=True, fresh=fresh_turn),
    ("DELETE", "/api/v1/chat/messages/{message_id}"): personal(
        "DELETE", "/api/v1/chat/messages/{id}", "messages", {204}, write=True, fresh=fresh_turn),
    ("POST", "/api/v1/chat/messages/{message_id}/cancel"): personal(
        "POST", "/api/v1/chat/messages/{id}/cancel", "messages", {200}, write=True),
    ("POST", "/api/v1/chat/messages/{message_id}/confirm"): personal(
        "POST", "/api/v1/chat/messages/{id}/confirm", "messages", {409}, write=True, body={"decision": "decline"}),
    ("GET", "/api/v1/chat/attachments/{attachment_id}"): no_fixture("GET", "/api/v1/chat/attachments/{id}",
                                                                    write=False),
    ("POST", "/api/v1/chat/edits/{edit_id}/accept"): no_fixture("POST", "/api/v1/chat/edits/{id}/accept", write=True),
    ("POST", "/api/v1/chat/edits/{edit_id}/reject"): no_fixture("POST", "/api/v1/chat/edits/{id}/reject", write=True),
    ("POST", "/api/v1/chat/edits/{edit_id}/undo"): no_fixture("POST", "/api/v1/chat/edits/{id}/undo", write=True),
    ("GET", "/api/v1/chat/models"): same_for_all("GET", "/api/v1/chat/models", {200}, scoped_ok=False),
    ("GET", "/api/v1/chat/pending"): same_for_all(
        "GET", "/api/v1/chat/pending", {200}, scoped_ok=False),
    # Recipes: the person's alone.
    ("GET", "/api/v1/recipes"): person_list("/api/v1/recipes", RECIPE_NAME),
    ("POST", "/api/v1/recipes"): r_recipes_post,
    ("POST", "/api/v1/recipes/import"): r_recipes_import,
    **{("GET", f"/api/v1/recipes/{v}"): recipes_view(f"/api/v1/recipes/{v}")
       for v in ("options", "jobs", "pending", "spend", "export")},
    ("GET", "/api/v1/recipes/schedule"): recipes_view("/api/v1/recipes/schedule?schedule=manual"),
    ("GET", "/api/v1/recipes/{ref}"): personal("GET", "/api/v1/recipes/{id}", "recipes", OK_READ, mark=RECIPE_NAME),
    ("PATCH", "/api/v1/recipes/{ref}"): personal("PATCH", "/api/v1/recipes/{id}", "recipes", {200}, write=True,
                                                 body={"prompt": "Report again."}),
    ("DELETE", "/api/v1/recipes/{ref}"): personal("DELETE", "/api/v1/recipes/{id}", "recipes", {204}, write=True,
                                                  fresh=fresh_recipe),
    ("POST", "/api/v1/recipes/{ref}/pause"): personal("POST", "/api/v1/recipes/{id}/pause", "recipes", {200},
                                                      write=True, fresh=fresh_recipe),
    ("POST", "/api/v1/recipes/{ref}/resume"): personal("POST", "/api/v1/recipes/{id}/resume", "recipes", {200},
                                                       write=True, fresh=fresh_recipe),
    ("POST", "/api/v1/recipes/{ref}/runs"): personal("POST", "/api/v1/recipes/{id}/runs", "recipes", {202},
                                                     write=True, fresh=fresh_recipe),
    ("GET", "/api/v1/recipes/{ref}/runs"): personal("GET", "/api/v1/recipes/{id}/runs", "recipes", OK_READ),
    ("POST", "/api/v1/recipes/{ref}/notes"): personal("POST", "/api/v1/recipes/{id}/notes", "recipes", {201},
                                                      write=True, body={"body": "note to the recipe"}),
    ("GET", "/api/v1/recipes/{ref}/items"): personal("GET", "/api/v1/recipes/{id}/items", "recipes", OK_READ),
    ("DELETE", "/api/v1/recipes/{ref}/items"): personal("DELETE", "/api/v1/recipes/{id}/items", "recipes", {200},
                                                        write=True),
    ("GET", "/api/v1/recipes/{ref}/spend"): personal("GET", "/api/v1/recipes/{id}/spend", "recipes", OK_READ),
    ("GET", "/api/v1/recipes/runs/{run_id}"): personal("GET", "/api/v1/recipes/runs/{id}", "runs", OK_READ),
    ("GET", "/api/v1/recipes/runs/{run_id}/events"): personal("GET", "/api/v1/recipes/runs/{id}/events", "runs",
                                                             OK_READ),
    ("POST", "/api/v1/recipes/runs/{run_id}/stop"): personal("POST", "/api/v1/recipes/runs/{id}/stop", "runs",
                                                            {200, 409}, write=True),
    ("POST", "/api/v1/recipes/runs/{run_id}/decision"): personal(
        "POST", "/api/v1/recipes/runs/{id}/decision", "runs", {409, 422}, write=True, body={"decision": "decline"}),
    # Notifications and webhooks: the person's alone.
    ("GET", "/api/v1/notifications"): person_list("/api/v1/notifications", NOTIFY_MARK),
    ("GET", "/api/v1/notifications/count"): same_for_all("GET", "/api/v1/notifications/count", {200},
                                                         scoped_ok=False),
    ("POST", "/api/v1/notifications/read"): r_notifications_read,
    ("GET", "/api/v1/webhooks"): person_list("/api/v1/webhooks", {k: f"hooks.example/{k}\"" for k in PEOPLE}),
    ("POST", "/api/v1/webhooks"): r_webhooks_post,
    ("DELETE", "/api/v1/webhooks/{webhook_id}"): personal("DELETE", "/api/v1/webhooks/{id}", "webhooks", {204},
                                                          write=True, fresh=fresh_webhook),
    # People: who you are; managing people is for the owner and admins; shares for a notebook's owner or an admin.
    ("GET", "/api/v1/me"): r_me,
    ("PATCH", "/api/v1/me/password"): r_me_password,
    ("GET", "/api/v1/users"): admin_only("GET", "/api/v1/users", 200),
    ("POST", "/api/v1/users"): admin_only("POST", "/api/v1/users", 201,
                                          body=lambda w: {"name": w.unique("added"), "role": "member"}),
    ("PATCH", "/api/v1/users/{user}"): admin_only("PATCH", "/api/v1/users/{user}", 200, body=lambda w: {"role": "member"},
                                                  target=new_person),
    ("DELETE", "/api/v1/users/{user}"): admin_only("DELETE", "/api/v1/users/{user}?notebooks=delete", 200,
                                                   target=new_person),
    ("GET", "/api/v1/notebooks/{notebook_id}/shares"): share_route("GET"),
    ("PUT", "/api/v1/notebooks/{notebook_id}/shares/{user}"): share_route("PUT"),
    ("DELETE", "/api/v1/notebooks/{notebook_id}/shares/{user}"): share_route("DELETE"),
}


def fastapi_of(web: Any) -> FastAPI:
    while not isinstance(web, FastAPI):
        web = web.app
    return web


def route_table(web: Any) -> set[tuple[str, str]]:
    """(method, path template) of every route of the web app (a mount: GET)."""
    out: set[tuple[str, str]] = set()
    for route in iter_route_contexts(fastapi_of(web).routes):
        if isinstance(route.original_route, Mount):
            out.add(("GET", str(route.path)))
            continue
        for method in route.methods or {"GET"}:
            out.add((method, str(route.path)))
    return out


def test_every_route_has_a_rule(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), load_entry_points=False)
    try:
        table = route_table(make_web(app))
    finally:
        app.close()
    assert len(table) > 60, "the route table really was read"
    missing = sorted(table - set(ROUTE_RULES))
    assert not missing, (f"routes without an access rule: {missing}; add each to ROUTE_RULES in "
                         f"{os.path.basename(__file__)} saying who may use it and what each sees")
    stale = sorted(set(ROUTE_RULES) - table)
    assert not stale, f"ROUTE_RULES names routes the web app no longer has: {stale}"


@pytest.mark.parametrize("principal", [p.name for p in PRINCIPALS])
@pytest.mark.parametrize("route", sorted(ROUTE_RULES), ids=lambda r: f"{r[0]} {r[1]}")
async def test_route(world: World, route: tuple[str, str], principal: str) -> None:
    await ROUTE_RULES[route](world, BY_NAME[principal])
