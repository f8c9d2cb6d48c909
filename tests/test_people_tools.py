"""Every tool acts as the person asking, for writes as for reads, and recipes act as their
owner (on SQLite and PostgreSQL).

The world: the owner (olga), an admin (ada) and two members. Ann has a notebook of her own,
one of the owner's shared with her to read ("Team"), one shared to write ("Shared"), and
cannot see the owner's "Private"; Bob has nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from chat_support import running_chat, settle
from chat_support import scripted as chat_scripted
from noteloom import db
from noteloom.app import App
from noteloom.data import DataCatalog
from noteloom.default_plugins.folder_tools import LIST_DIR, READ_FILE
from noteloom.default_plugins.pipeline_jobs import (
    ClipSafety,
    EventExtraction,
    NoteTriage,
    note_id_of,
)
from noteloom.errors import Conflict, Forbidden, InvalidInput
from noteloom.folders import Folders
from noteloom.memory import store as memories
from noteloom.messages import ToolResultPart
from noteloom.pipeline import PipelineRun
from noteloom.semantic import SemanticIndex
from noteloom.tools import ToolContext, ToolError
from noteloom.webtools import Page, WebFetcher
from noteloom.workspace import Note, Notebook, User
from recipe_support import running, scripted, service
from semantic_support import local_model

pytestmark = pytest.mark.anyio

KINDS = ("mine", "read", "write", "foreign")
WRITE_TOOLS = ("create_note", "update_note", "delete_note", "manage_tags", "create_notebook", "restore_note")


@dataclass
class World:
    app: App
    owner: User
    admin: User
    ann: User
    bob: User
    books: dict[str, Notebook]
    notes: dict[str, Note]


def world(app: App) -> World:
    ws = app.workspace
    owner = ws.ensure_owner("olga")
    admin = ws.add_person("ada", role="admin")
    ann = ws.add_person("ann")
    bob = ws.add_person("bob")
    # Ann's notebook is the oldest: the owner's default must still be the owner's own.
    books = {
        "mine": ws.create_notebook("Ann's", owner_id=ann.id, created_time=1_000),
        "read": ws.create_notebook("Team", created_time=2_000),
        "write": ws.create_notebook("Shared", created_time=3_000),
        "foreign": ws.create_notebook("Private", created_time=4_000),
    }
    ws.share_notebook(books["read"].id, "ann", "read")
    ws.share_notebook(books["write"].id, "ann", "write")
    notes = {k: ws.create_note(f"{k} plan", f"The {k} plan: water the basil every morning.",
                               notebook_id=books[k].id, tags=[f"tag-{k}", "common"]) for k in KINDS}
    for name in (*WRITE_TOOLS, "read_note", "read_notes", "search_notes", "list_notebooks", "list_tags", "list_trash",
                 "semantic_search_notes", "describe_data", "query_data", "search_conversations", "recall"):
        app.registry.set_enabled(ws, name, True)
    return World(app, owner, admin, ann, bob, books, notes)


async def call(app: App, user: User | None, name: str, args: dict[str, Any]) -> Any:
    return (await app.registry.call(app.tool_context(user), name, args)).payload


async def error(app: App, user: User | None, name: str, args: dict[str, Any]) -> ToolError:
    with pytest.raises(ToolError) as info:
        await app.registry.call(app.tool_context(user), name, args)
    return info.value


async def same_as_missing(app: App, user: User, name: str, make: Any, real: str) -> None:
    """The error for ``real`` (something the person may not see) reads exactly like the one
    for an id nothing has."""
    nothing = db.new_id()
    foreign = str(await error(app, user, name, make(real))).replace(real, "ID")
    missing = str(await error(app, user, name, make(nothing))).replace(nothing, "ID")
    assert foreign == missing, (name, foreign, missing)


async def chats(app: App, *made: tuple[User, str]) -> None:
    """Conversations of these people, with these titles (through the app's own chat stores)."""
    async with running_chat(app) as chat:
        for user, title in made:
            chat.stores.conversations.create(user.id, title=title)


def read_only_refusal(exc: ToolError) -> None:
    assert isinstance(exc.__cause__, Forbidden), exc
    assert "shared with you to read only; ask its owner for write access" in str(exc)


# -- writes ---------------------------------------------------------------------------------------


async def test_write_tools_change_the_persons_own_notebooks_and_those_shared_to_write(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    for kind in ("mine", "write"):
        book, note = w.books[kind], w.notes[kind]
        made = await call(any_app, w.ann, "create_note", {"title": f"new in {kind}", "notebook": book.id})
        assert made["notebook_id"] == book.id
        changed = await call(any_app, w.ann, "update_note", {"id": note.id, "append": "And the mint."})
        assert changed["changed"] == ["body"]
        assert (await call(any_app, w.ann, "manage_tags", {"id": note.id, "add": ["herbs"]}))["added"] == ["herbs"]
        sub = await call(any_app, w.ann, "create_notebook", {"title": f"Sub of {kind}", "parent": book.id})
        assert sub["parent_id"] == book.id
        await call(any_app, w.ann, "delete_note", {"id": note.id})
        await call(any_app, w.ann, "restore_note", {"id": note.id})
        assert ws.get_note(note.id).body.endswith("And the mint.")
    # A move between two notebooks she may write to.
    moved = await call(any_app, w.ann, "update_note", {"id": w.notes["mine"].id, "notebook": w.books["write"].id})
    assert moved["notebook_id"] == w.books["write"].id


async def test_a_notebook_shared_to_read_is_refused_to_every_write_saying_whom_to_ask(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    read, mine = w.books["read"], w.books["mine"]
    ro, own = w.notes["read"], w.notes["mine"]
    cases: list[tuple[str, dict[str, Any]]] = [
        ("create_note", {"title": "sneaky", "notebook": read.id}),
        ("update_note", {"id": ro.id, "append": "sneaky"}),
        ("update_note", {"id": ro.id, "notebook": mine.id}),  # moving out changes the source
        ("update_note", {"id": own.id, "notebook": read.id}),  # moving in changes the destination
        ("delete_note", {"id": ro.id}),
        ("manage_tags", {"id": ro.id, "add": ["sneaky"]}),
        ("create_notebook", {"title": "Sneaky", "parent": read.id}),
    ]
    for name, args in cases:
        read_only_refusal(await error(any_app, w.ann, name, args))
    assert ws.get_note(ro.id) == ro and ws.get_note(own.id).notebook_id == mine.id
    assert "sneaky" not in {n.title for n in ws.list_notes(notebook_id=read.id)}
    assert "Sneaky" not in {b.title for b in ws.list_notebooks()}
    # Reading it is what the share is for.
    assert (await call(any_app, w.ann, "read_note", {"id": ro.id}))["body"] == ro.body
    # The owner and the admin change anything.
    for who in (w.owner, w.admin):
        await call(any_app, who, "update_note", {"id": w.notes["foreign"].id, "append": "ok"})


async def test_a_foreign_note_or_notebook_answers_every_write_exactly_like_a_missing_one(any_app: App) -> None:
    w = world(any_app)
    foreign_book, foreign_note = w.books["foreign"].id, w.notes["foreign"].id
    own = w.notes["mine"].id
    for user in (w.ann, w.bob):
        for name, make in [
            ("create_note", lambda i: {"title": "x", "notebook": i}),
            ("create_notebook", lambda i: {"title": "x", "parent": i}),
            ("update_note", lambda i: {"id": i, "append": "x"}),
            ("delete_note", lambda i: {"id": i}),
            ("manage_tags", lambda i: {"id": i, "add": ["x"]}),
            ("read_note", lambda i: {"id": i}),
        ]:
            real = foreign_book if name.endswith("notebook") or name == "create_note" else foreign_note
            await same_as_missing(any_app, user, name, make, real)
    await same_as_missing(any_app, w.ann, "update_note", lambda i: {"id": own, "notebook": i}, foreign_book)
    any_app.workspace.delete_note(foreign_note)
    await same_as_missing(any_app, w.ann, "restore_note", lambda i: {"id": i}, foreign_note)
    assert any_app.workspace.get_note(foreign_note, include_deleted=True).deleted_time is not None


class StubPages(WebFetcher):
    """Every address is the same short page (clip_url's writing is what is tested here)."""

    async def fetch(self, url: str, mode: Any = "reader") -> Page:
        return Page(url, "Tides", "reader", "article", "High tide at six.")


async def test_clip_url_saves_only_where_the_person_may_write(any_app: App) -> None:
    w = world(any_app)
    any_app.services["web"] = StubPages()
    any_app.registry.set_enabled(any_app.workspace, "clip_url", True)
    url = "https://tides.example/today"
    saved = await call(any_app, w.ann, "clip_url", {"url": url, "notebook": w.books["write"].id})
    assert saved["notebook_id"] == w.books["write"].id
    read_only_refusal(await error(any_app, w.ann, "clip_url", {"url": url, "notebook": w.books["read"].id}))
    await same_as_missing(any_app, w.ann, "clip_url", lambda i: {"url": url, "notebook": i}, w.books["foreign"].id)
    bobs = await call(any_app, w.bob, "clip_url", {"url": url})
    assert any_app.workspace.get_notebook(bobs["notebook_id"]).owner_id == w.bob.id


# -- what a person creates is theirs ----------------------------------------------------------------


async def test_a_top_notebook_belongs_to_whoever_makes_it_and_a_sub_notebook_to_its_parents_owner(
        any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    made = {who.name: await call(any_app, who, "create_notebook", {"title": f"{who.name}'s own"})
            for who in (w.owner, w.admin, w.ann)}
    assert ws.get_notebook(made["olga"]["id"]).owner_id is None  # the owner's stay as they always were
    assert ws.get_notebook(made["ada"]["id"]).owner_id == w.admin.id
    assert ws.get_notebook(made["ann"]["id"]).owner_id == w.ann.id
    sub = await call(any_app, w.ann, "create_notebook", {"title": "Inside", "parent": w.books["write"].id})
    assert ws.get_notebook(sub["id"]).owner_id is None  # the shared notebook's owner's
    bobs = {b["title"] for b in (await call(any_app, w.bob, "list_notebooks", {}))["notebooks"]}
    assert bobs == set()
    anns = {b["title"] for b in (await call(any_app, w.ann, "list_notebooks", {}))["notebooks"]}
    assert anns == {"Ann's", "Team", "Shared", "Inside", "ann's own"}


async def test_a_note_without_a_notebook_goes_to_the_persons_own_default_made_for_them_once(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    first = await call(any_app, w.bob, "create_note", {"title": "bob's first"})
    second = await call(any_app, w.bob, "create_note", {"title": "bob's second"})
    assert first["notebook_id"] == second["notebook_id"] and first["notebook"] == "Notes"
    assert ws.get_notebook(first["notebook_id"]).owner_id == w.bob.id
    assert ws.default_notebook(owner_id=w.bob.id).id == first["notebook_id"]
    # Ann has a notebook: hers is the default; the owner's is the owner's oldest, not Ann's older one.
    assert (await call(any_app, w.ann, "create_note", {"title": "a"}))["notebook_id"] == w.books["mine"].id
    assert (await call(any_app, w.owner, "create_note", {"title": "o"}))["notebook_id"] == w.books["read"].id
    assert (await call(any_app, None, "create_note", {"title": "cli"}))["notebook_id"] == w.books["read"].id
    assert ws.default_notebook().id == ws.default_notebook(owner_id=w.owner.id).id == w.books["read"].id
    admins = await call(any_app, w.admin, "create_note", {"title": "ada's"})
    assert ws.get_notebook(admins["notebook_id"]).owner_id == w.admin.id


def test_the_owner_of_a_workspace_of_one_keeps_the_first_top_notebook_as_default(any_ws: Any) -> None:
    assert any_ws.default_notebook().title == "Notes"  # made when there is none
    later = any_ws.create_notebook("Later")
    assert any_ws.default_notebook().id != later.id
    # Made in one go, most within one millisecond: they still keep the order they were made in.
    made = [any_ws.create_notebook(f"Batch {i}") for i in range(40)]
    assert any_ws.default_notebook().title == "Notes"
    assert [n.created_time for n in made] == sorted({n.created_time for n in made})


# -- trash, tags, search --------------------------------------------------------------------------------


async def test_the_trash_lists_what_the_person_sees_and_restores_only_what_they_may_write(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    for kind in KINDS:
        ws.delete_note(w.notes[kind].id)
    listed = {i["id"] for i in (await call(any_app, w.ann, "list_trash", {}))["items"]}
    assert listed == {w.notes[k].id for k in ("mine", "read", "write")}
    assert (await call(any_app, w.bob, "list_trash", {}))["items"] == []
    read_only_refusal(await error(any_app, w.ann, "restore_note", {"id": w.notes["read"].id}))
    await same_as_missing(any_app, w.ann, "restore_note", lambda i: {"id": i}, w.notes["foreign"].id)
    for kind in ("mine", "write"):
        await call(any_app, w.ann, "restore_note", {"id": w.notes[kind].id})
    assert {k for k in KINDS if ws.get_note(w.notes[k].id, include_deleted=True).deleted_time is None} == {
        "mine", "write"}
    # A note whose notebook went to the trash after it comes back in the owner's default
    # notebook, which Ann may only read: refused, and it stays in the trash.
    ws.delete_note(w.notes["write"].id)
    ws.delete_notebook(w.books["write"].id)
    refused = await error(any_app, w.ann, "restore_note", {"id": w.notes["write"].id})
    assert isinstance(refused.__cause__, Forbidden) and "'Team', which you may only read" in str(refused)
    assert ws.get_note(w.notes["write"].id, include_deleted=True).deleted_time is not None
    # A trashed notebook shared to read stays the owner's to restore.
    ws.delete_notebook(w.books["read"].id)
    read_only_refusal(await error(any_app, w.ann, "restore_note", {"id": w.books["read"].id}))


async def test_tag_counts_count_only_the_notes_the_person_sees(any_app: App) -> None:
    w = world(any_app)

    async def tags(user: User) -> dict[str, int]:
        return {t["title"]: t["note_count"] for t in (await call(any_app, user, "list_tags", {}))["tags"]}

    assert await tags(w.ann) == {"common": 3, "tag-mine": 1, "tag-read": 1, "tag-write": 1}
    assert await tags(w.bob) == {}
    assert (await tags(w.owner))["common"] == 4 and (await tags(w.admin))["tag-foreign"] == 1


async def test_search_and_read_notes_find_only_what_the_person_sees(any_app: App) -> None:
    w = world(any_app)
    ids = {k: n.id for k, n in w.notes.items()}
    found = {r["id"] for r in (await call(any_app, w.ann, "search_notes", {"query": "basil"}))["results"]}
    assert found == {ids["mine"], ids["read"], ids["write"]}
    assert (await call(any_app, w.bob, "search_notes", {"query": "basil"}))["results"] == []
    assert len((await call(any_app, w.admin, "search_notes", {"query": "basil"}))["results"]) == 4
    got = await call(any_app, w.ann, "read_notes", {"ids": list(ids.values())})
    assert {n["id"] for n in got["notes"]} == found and got["not_found"] == [ids["foreign"]]


async def test_semantic_results_follow_the_person(any_app: App) -> None:
    w = world(any_app)
    index = SemanticIndex(any_app.engine, local_model())
    any_app.services["semantic"] = index
    index.sync()
    ids = {k: n.id for k, n in w.notes.items()}
    query = {"query": "looking after herbs", "relevance": "loose", "limit": 50}
    mine = {r["id"] for r in (await call(any_app, w.ann, "semantic_search_notes", query))["results"]}
    assert mine == {ids["mine"], ids["read"], ids["write"]}
    assert (await call(any_app, w.bob, "semantic_search_notes", query))["results"] == []
    everyone = {r["id"] for r in (await call(any_app, w.owner, "semantic_search_notes", query))["results"]}
    assert everyone == set(ids.values())
    hybrid = {r["id"] for r in (await call(any_app, w.ann, "search_notes", {"query": "herb care",
                                                                            "mode": "semantic"}))["results"]}
    assert ids["foreign"] not in hybrid and hybrid
    await same_as_missing(any_app, w.ann, "semantic_search_notes",
                          lambda i: {"query": "herbs", "notebook_id": i}, w.books["foreign"].id)


async def test_data_tools_read_the_persons_rows_and_attached_databases_are_the_owners(
        any_app: App, tmp_path: Any) -> None:
    import sqlite3

    w = world(any_app)
    crm = tmp_path / "crm.db"
    with sqlite3.connect(crm) as c:
        c.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO customers VALUES (1, 'Ada')")
    any_app.services["data"] = DataCatalog({"data": {
        "workspace": ["notes", "notebooks", "tags", "conversations"],
        "sources": {"crm": {"url": f"sqlite:///{crm}", "tables": {"customers": {"description": "Customers"}}}},
    }})
    sub = any_app.workspace.create_notebook("Team sub", parent_id=w.books["foreign"].id)
    any_app.workspace.share_notebook(sub.id, "ann", "read")

    async def rows(user: User | None, source: str) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = (await call(any_app, user, "query_data", {"source": source, "limit": 100}))["rows"]
        return got

    assert {r["title"] for r in await rows(w.ann, "notes")} == {"mine plan", "read plan", "write plan"}
    books = {r["title"]: r for r in await rows(w.ann, "notebooks")}
    assert set(books) == {"Ann's", "Team", "Shared", "Team sub"}
    assert books["Team sub"]["parent_id"] is None  # its parent is not hers to see, not even its id
    assert {r["title"]: r["note_count"] for r in await rows(w.ann, "tags")}["common"] == 3
    assert await rows(w.bob, "notes") == []
    assert len(await rows(w.admin, "notes")) == 4
    # The attached database is the owner's: for anyone else it does not exist.
    assert [r["name"] for r in await rows(w.owner, "crm.customers")] == ["Ada"]
    for user in (w.ann, w.admin):
        described = {s["name"] for s in (await call(any_app, user, "describe_data", {}))["sources"]}
        assert described == {"notes", "notebooks", "tags", "conversations"}
        nothing = db.new_id()
        assert str(await error(any_app, user, "query_data", {"source": "crm.customers"})).replace(
            "crm.customers", "X") == str(await error(any_app, user, "query_data", {"source": nothing})).replace(
            nothing, "X")
    # Conversations are each person's own, admins' included.
    await chats(any_app, (w.ann, "ann's chat"), (w.bob, "bob's chat"))
    assert [r["title"] for r in await rows(w.ann, "conversations")] == ["ann's chat"]
    assert await rows(w.admin, "conversations") == []


async def test_shared_folders_are_the_owners_and_for_anyone_else_there_are_none(any_app: App, tmp_path: Any) -> None:
    w = world(any_app)
    root = tmp_path / "docs"
    root.mkdir()
    (root / "plan.txt").write_text("the owner's plan")
    registry, ws = any_app.registry, any_app.workspace
    for tool in (READ_FILE, LIST_DIR):  # registered by the app only where [files] names folders
        registry.register(tool)
        registry.set_enabled(ws, tool.name, True)
    none_shared = str(await error(any_app, w.owner, "read_file", {"path": "plan.txt"}))
    any_app.services["folders"] = Folders.from_settings({"roots": [str(root)]}, base=tmp_path)
    assert await call(any_app, w.owner, "read_file", {"path": "plan.txt"}) == "the owner's plan"
    for user in (w.admin, w.ann):
        assert str(await error(any_app, user, "read_file", {"path": "plan.txt"})) == none_shared
        assert str(await error(any_app, user, "list_dir", {})) == none_shared


async def test_past_conversations_and_memories_are_each_persons_own(any_app: App) -> None:
    w = world(any_app)
    await chats(any_app, (w.ann, "Basil plans with ann"), (w.bob, "Basil plans with bob"))
    with db.write_tx(any_app.engine) as c:
        memories.add(c, w.ann.id, "Ann waters the basil at six.", title="basil")
        memories.add(c, w.bob.id, "Bob waters the basil at noon.", title="basil")
    for user, name in ((w.ann, "ann"), (w.bob, "bob")):
        found = await call(any_app, user, "search_conversations", {"query": "basil"})
        assert [h["title"] for h in found["conversations"]] == [f"Basil plans with {name}"]
        recalled = await call(any_app, user, "recall", {"query": "basil"})
        assert [m["content"].split()[0] for m in recalled["memories"]] == [name.title()]
    assert (await call(any_app, w.admin, "search_conversations", {"query": "basil"}))["conversations"] == []


# -- recipes and pipeline jobs act as their owner ---------------------------------------------------------


def offered(job: Any, context: ToolContext, config: dict[str, Any]) -> set[str]:
    """The notes a pipeline job offers in one run for ``context``'s person."""
    seen: set[str] = set()
    run = PipelineRun(context, "recipe", db.new_id(), config, lambda keys: seen & set(keys))
    job.validate_config(config, context)
    out = set()
    while (item := job.next_item(run)) is not None:
        seen.add(item.key)
        out.add(note_id_of(item))
    return out


async def test_pipeline_jobs_read_what_the_owner_sees_and_write_only_where_they_may(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    ann = any_app.tool_context(w.ann)
    clips = {k: ws.create_note(f"clip {k}", "a page", notebook_id=w.books[k].id, source_url=f"https://{k}.example/")
             for k in KINDS}
    # clip_safety writes its scan on the note: only notes Ann may change.
    assert offered(ClipSafety(), ann, {}) == {clips["mine"].id, clips["write"].id}
    assert offered(ClipSafety(), any_app.tool_context(w.owner), {}) == {c.id for c in clips.values()}
    # event_extraction reads what she sees and writes its to-dos only where she may write.
    events = EventExtraction()
    assert offered(events, ann, {"target_notebook_id": w.books["mine"].id}) == {
        w.notes[k].id for k in ("read", "write")}
    with pytest.raises(InvalidInput, match="read only"):
        events.validate_config({"target_notebook_id": w.books["read"].id}, ann)
    with pytest.raises(InvalidInput, match="does not exist"):
        events.validate_config({"target_notebook_id": w.books["foreign"].id}, ann)
    # note_triage tags and summarises its inbox: hers to change, and only tags she sees are offered.
    triage = NoteTriage()
    with pytest.raises(InvalidInput, match="read only"):
        triage.validate_config({"notebook_id": w.books["read"].id}, ann)
    assert offered(triage, ann, {"notebook_id": w.books["mine"].id}) == {w.notes["mine"].id, clips["mine"].id}
    run = PipelineRun(ann, "recipe", db.new_id(), {"notebook_id": w.books["mine"].id}, lambda keys: set())
    tags = set(triage.verdict_schema_for(run)["properties"]["tag"]["enum"])
    assert tags == {"common", "tag-mine", "tag-read", "tag-write", "none"}
    owners = PipelineRun(any_app.tool_context(None), "recipe", db.new_id(), {"notebook_id": w.books["read"].id},
                         lambda keys: set())
    assert "tag-foreign" in triage.verdict_schema_for(owners)["properties"]["tag"]["enum"]


async def test_a_members_recipe_is_checked_and_runs_as_that_member(any_app: App) -> None:
    w = world(any_app)
    recipes = service(any_app)
    provider = scripted(any_app, [
        {"tool_calls": [{"name": "list_notebooks", "arguments": {}}]},
        {"text": "Done."},
        {"text": json.dumps({"tag": "tag-mine", "summary": "A plan."})},
    ])
    triage: dict[str, Any] = {"name": "triage", "mode": "pipeline", "job": "note_triage", "model": "play",
                              "allow_tainted_writes": True}
    with pytest.raises(InvalidInput, match="does not exist"):
        recipes.add(w.ann, {**triage, "job_config": {"notebook_id": w.books["foreign"].id}})
    with pytest.raises(InvalidInput, match="read only"):
        recipes.add(w.ann, {**triage, "job_config": {"notebook_id": w.books["read"].id}})
    recipes.add(w.ann, {**triage, "job_config": {"notebook_id": w.books["mine"].id}})
    recipes.add(w.ann, {"name": "look", "prompt": "List my notebooks.", "model": "play", "tools": ["list_notebooks"]})
    async with running(any_app):
        look = await recipes.run_now(w.ann, "look")
        judged = await recipes.run_now(w.ann, "triage")
    assert look["status"] == "succeeded", look
    [listed] = look["trace"]
    assert all(t in listed["output"] for t in ("Ann's", "Team", "Shared")) and "Private" not in listed["output"]
    assert judged["status"] == "succeeded" and judged["items_done"] == 1, judged
    system = " ".join(b.text for b in provider.requests[-1].system)
    assert "tag-mine" in system and "tag-foreign" not in system
    assert any_app.workspace.get_note(w.notes["mine"].id).tags == ("common", "tag-mine")


# -- the chat's session tools and edits ------------------------------------------------------------------


NOTE_BODY = "# Trip\n\nWe leave on Friday.\nBring the tent.\n"


async def test_session_tools_and_accepting_an_edit_need_write_on_the_open_note(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    shared = ws.create_note("Trip", NOTE_BODY, notebook_id=w.books["write"].id)
    read = ws.create_note("Team trip", NOTE_BODY, notebook_id=w.books["read"].id)
    rewrite = {"tool_calls": [{"name": "rewrite_paragraph",
                               "arguments": {"anchor": "Bring the tent", "text": "Bring the tarp."}}]}
    provider = chat_scripted(any_app, [rewrite, {"text": "Proposed."}, rewrite, {"text": "Could not."}])
    async with running_chat(any_app) as chat:
        sent = await chat.send(w.ann, "tarp please", note_id=shared.id, controls={"model": "play:script"})
        [edit] = (await settle(chat, w.ann, sent.message_id))["edits"]
        # The share turned read-only before she accepted: refused, and the note left alone.
        ws.share_notebook(w.books["write"].id, "ann", "read")
        with pytest.raises(Forbidden, match="read only"):
            await chat.accept_edit(w.ann, edit["id"])
        ws.unshare_notebook(w.books["write"].id, "ann")
        with pytest.raises(Conflict, match="is gone or in the trash"):
            await chat.accept_edit(w.ann, edit["id"])
        assert ws.get_note(shared.id).body == NOTE_BODY
        ws.share_notebook(w.books["write"].id, "ann", "write")
        accepted, updated = await chat.accept_edit(w.ann, edit["id"])
        assert accepted["status"] == "accepted" and "tarp" in updated.body
        # On a note she may only read, the session tool proposes nothing.
        sent = await chat.send(w.ann, "tarp here too", note_id=read.id, controls={"model": "play:script"})
        view = await settle(chat, w.ann, sent.message_id)
    assert view["edits"] == []
    results = [p for m in provider.requests[-1].messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert results[-1].is_error and "shared with you to read only" in results[-1].content
    assert ws.get_note(read.id).body == NOTE_BODY
