"""The people-and-privacy matrix's workspace (tests/test_access_matrix.py): four people, five
notebooks shared in every way, notes, trash, attachments, memories, chats, recipes and
notifications with a marker word each, and a token per principal; plus the ways a principal
calls a tool (as the surfaces do) and an API route.

Principals: the owner ``olga``, the admin ``ada``, the member ``ann`` (her full token), and two
tokens of ann's: read-only (``ann_ro``) and limited to the notebook pattern ``Ann``
(``ann_scoped``). ``bob`` is another member whose private things nobody but the owner and
admins may see (and whose chats, memories and recipes nobody else at all).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx2 as httpx
import sqlalchemy as sa

from noteloom import db
from noteloom.accounts import TokenScopes, User
from noteloom.app import App
from noteloom.db import new_id
from noteloom.memory import store as memories
from noteloom.notifications import Notifications
from noteloom.providers.scripted import ScriptedProvider
from noteloom.tools import ToolError, ToolFailure
from noteloom.web.app import create_web_app

#: Notebook keys: the owner's Work and its Team, ann's own, bob's shared with ann to write, bob's own.
BOOKS = ("Work", "Team", "Ann", "Shared", "Bob")
#: The word only that notebook's note holds (none is part of another).
MARK = {"Work": "qzwork", "Team": "qzteam", "Ann": "qzann", "Shared": "qzshared", "Bob": "qzbob"}
#: A word every fixture note holds, so one search finds every note the caller may see.
COMMON = "qzcommon"
TAG = {k: f"tag-{k.lower()}" for k in BOOKS}
TRASH_MARK = {k: f"qztrash{k.lower()}" for k in BOOKS}
ATTACHMENT_MARK = {k: f"qzfile{k.lower()}" for k in BOOKS}
#: People with personal things (memories, chats, recipes, notifications, webhooks).
PEOPLE = ("owner", "admin", "ann", "bob")
NAMES = {"owner": "olga", "admin": "ada", "ann": "ann", "bob": "bob"}
MEMORY_MARK = {k: f"qzmem{k}" for k in PEOPLE}
SHARED_MEMORY_MARK = "qzmemshared"
#: A word every fixture memory holds (recall needs words or ids).
MEMORY_WORD = "qzmemory"
CHAT_MARK = {k: f"qzchat{k}" for k in PEOPLE}
RECIPE_NAME = {k: f"recipe-{k}" for k in PEOPLE}
NOTIFY_MARK = {k: f"qznotify{k}" for k in PEOPLE}
WEB_MARK = "qzwebpage"
MODEL = "matrix:script"


@dataclass(frozen=True)
class Principal:
    """Who asks: a person (``user``), with which token (``token`` key in ``World.tokens``)."""

    name: str
    user: str
    token: str
    read_only: bool = False
    #: The token's notebook patterns (``()``: none).
    scope: tuple[str, ...] = ()

    @property
    def via_mcp(self) -> bool:
        """Tools of a limited token are called the way its clients call them: MCP over HTTP."""
        return self.read_only or bool(self.scope)


PRINCIPALS = (
    Principal("owner", "owner", "owner"),
    Principal("admin", "admin", "admin"),
    Principal("ann", "ann", "ann"),
    Principal("ann_ro", "ann", "ann_ro", read_only=True),
    Principal("ann_scoped", "ann", "ann_scoped", scope=("Ann",)),
)
BY_NAME = {p.name: p for p in PRINCIPALS}

#: What each principal sees and may change, by notebook key.
VISIBLE: dict[str, frozenset[str]] = {
    "owner": frozenset(BOOKS), "admin": frozenset(BOOKS),
    "ann": frozenset({"Work", "Team", "Ann", "Shared"}), "ann_ro": frozenset({"Work", "Team", "Ann", "Shared"}),
    "ann_scoped": frozenset({"Ann"}),
}
WRITABLE: dict[str, frozenset[str]] = {
    "owner": frozenset(BOOKS), "admin": frozenset(BOOKS), "ann": frozenset({"Ann", "Shared"}),
    "ann_ro": frozenset(), "ann_scoped": frozenset({"Ann"}),
}


def access(p: Principal, book: str) -> str:
    """``write``, ``read`` (sees it, may not change it) or ``none`` (it does not exist for them)."""
    if book in WRITABLE[p.name]:
        return "write"
    return "read" if book in VISIBLE[p.name] else "none"


@dataclass
class World:
    app: App
    web: Any
    people: dict[str, User]
    tokens: dict[str, str]
    books: dict[str, str]  # key -> notebook id
    notes: dict[str, str]  # key -> the marker note's id
    trashed: dict[str, str]  # key -> a trashed note's id
    attachments: dict[str, str]  # key -> attachment id on the marker note
    memories: dict[str, str] = field(default_factory=dict)  # person -> personal memory id; "shared"
    conversations: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    recipes: dict[str, str] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)
    notifications: dict[str, str] = field(default_factory=dict)
    webhooks: dict[str, str] = field(default_factory=dict)
    web_url: str = ""
    counter: int = 0

    def user(self, p: Principal) -> User:
        return self.people[p.user]

    def unique(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def fresh_note(self, book: str, *, trashed: bool = False) -> str:
        """A new note in ``book`` for a cell that changes or removes one (the owner's CLI writes it)."""
        ws = self.app.workspace
        note = ws.create_note(self.unique(f"fresh {book.lower()}"), f"{COMMON} fresh", self.books[book])
        if trashed:
            ws.delete_note(note.id)
        return note.id

    def fresh_memory(self, person: str) -> str:
        with self.app.workspace.write() as c:
            return memories.add(c, self.people[person].id, self.unique(f"fresh memory of {person}")).id


def missing_id() -> str:
    """An id nothing has."""
    return new_id()


def same_as_missing(foreign: str, missing: str, text_foreign: str, text_missing: str) -> bool:
    """Whether two answers are the same once each names its own id."""
    return text_foreign.replace(foreign, "<ID>") == text_missing.replace(missing, "<ID>")


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = (f"<html><head><title>Matrix page</title></head><body><article><h1>Matrix page</h1>"
                f"<p>The page says {WEB_MARK} in a paragraph long enough to be the article's text, "
                f"which the reader view keeps.</p></article></body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


TOML = """
[outbound]
allow = ["127.0.0.1"]
[data]
workspace = ["notes", "todos", "tags", "notebooks", "recipes", "recipe_runs", "conversations"]
"""


def build_people(app: App) -> dict[str, User]:
    ws = app.workspace
    return {
        "owner": ws.ensure_owner(NAMES["owner"]),
        "admin": ws.add_person(NAMES["admin"], role="admin"),
        "ann": ws.add_person(NAMES["ann"], password="ann's long password"),
        "bob": ws.add_person(NAMES["bob"], password="bob's long password"),
    }


def build_notebooks(app: App, people: Mapping[str, User]) -> tuple[dict[str, str], dict[str, str], dict[str, str],
                                                                    dict[str, str]]:
    ws = app.workspace
    owner, ann, bob = people["owner"], people["ann"], people["bob"]
    work = ws.create_notebook("Work")  # the owner's (no owner_id, as in a workspace from before people)
    books = {
        "Work": work.id,
        "Team": ws.create_notebook("Team", parent_id=work.id).id,
        "Ann": ws.create_notebook("Ann", owner_id=ann.id).id,
        "Shared": ws.create_notebook("Shared", owner_id=bob.id).id,
        "Bob": ws.create_notebook("Bob", owner_id=bob.id).id,
    }
    ws.share_notebook(books["Work"], "ann", "read", actor=owner)
    ws.share_notebook(books["Shared"], "ann", "write", actor=bob)
    notes, trashed, attachments = {}, {}, {}
    for key in BOOKS:
        note = ws.create_note(f"{MARK[key]} note", f"{COMMON} {MARK[key]} first version", books[key],
                              tags=[TAG[key]])
        att = ws.add_attachment(note.id, f"{ATTACHMENT_MARK[key]} file text\n".encode(), f"{key.lower()}.txt",
                                mime="text/plain")
        # A second version, so the note has a revision.
        ws.update_note(note.id, body=f"{COMMON} {MARK[key]} body\n\n[file](:/{att.id})\n")
        notes[key], attachments[key] = note.id, att.id
        gone = ws.create_note(f"{TRASH_MARK[key]} trashed", f"{COMMON} trashed", books[key])
        ws.delete_note(gone.id)
        trashed[key] = gone.id
    return books, notes, trashed, attachments


def build_tokens(app: App, people: Mapping[str, User]) -> dict[str, str]:
    ws = app.workspace
    tokens = {k: ws.create_token(people[k].id, name="matrix") for k in PEOPLE}
    tokens["ann_ro"] = ws.create_token(people["ann"].id, name="matrix-ro", scopes=TokenScopes(read_only=True))
    tokens["ann_scoped"] = ws.create_token(people["ann"].id, name="matrix-scoped",
                                           scopes=TokenScopes(notebooks=("Ann",)))
    return tokens


def build_personal(w: World) -> None:
    """Memories, notifications and webhooks for every person (chats and recipes need the
    services running: ``build_running``)."""
    app = w.app
    with app.workspace.write() as c:
        for k in PEOPLE:
            w.memories[k] = memories.add(c, w.people[k].id, f"{MEMORY_WORD} {MEMORY_MARK[k]} is what {k} keeps").id
        w.memories["shared"] = memories.add(c, w.people["owner"].id, f"{MEMORY_WORD} {SHARED_MEMORY_MARK} for everyone",
                                            scope="shared").id
    store = Notifications(app.engine)
    for k in PEOPLE:
        with app.workspace.write() as c:
            w.notifications[k] = store.notify(c, w.people[k].id, "failure", f"{NOTIFY_MARK[k]} title",
                                              f"{NOTIFY_MARK[k]} body")
        w.webhooks[k] = store.add_webhook(w.people[k].id, f"https://hooks.example/{k}", ["failure"])[0]


async def build_running(w: World, stack: AsyncExitStack) -> None:
    """Start the chat and the recipes, and give every person a chat and a recipe with a run."""
    from noteloom.chat import chat_lifespan

    app = w.app
    provider = ScriptedProvider("matrix", [{"chunks": ["fine"]}], loop=True)
    app.services["providers"].add(provider)
    chat = await stack.enter_async_context(chat_lifespan(app))
    recipes = app.services.recipes
    assert recipes is not None
    await stack.enter_async_context(recipes.running(retry_delay=lambda attempt, rate_limited: 0.0))
    for k in PEOPLE:
        user = w.people[k]
        sent = await chat.send(user, f"{CHAT_MARK[k]} hello", controls={"model": MODEL})
        async for _ in chat.events(user, sent.message_id, 0):
            pass
        w.conversations[k], w.messages[k] = sent.conversation_id, sent.message_id
        recipe = recipes.add(user, {"name": RECIPE_NAME[k], "prompt": "Report.", "model": MODEL,
                                    "tools": ["search_notes"]})
        w.recipes[k] = recipe["id"]
        ran = await recipes.run_now(user, RECIPE_NAME[k])
        w.runs[k] = ran["run_id"]


# -- calling a tool as a surface does ---------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A tool call's answer: ``ok`` with its payload, an error the model reads (``text``), or
    ``unavailable`` (the token does not offer the tool)."""

    ok: bool
    payload: Any = None
    text: str = ""
    unavailable: bool = False

    @property
    def shown(self) -> str:
        """Everything the caller reads, as one text (for marker checks)."""
        return self.text if not self.ok else json.dumps(self.payload, default=str)


HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def call_tool(w: World, p: Principal, name: str, args: dict[str, Any]) -> Outcome:
    """Call a tool as ``p``: a person's own full token through the registry with their
    context (what the chat, the CLI and recipes do), a limited token through MCP over HTTP."""
    if not p.via_mcp:
        try:
            result = await w.app.registry.call(w.app.tool_context(w.user(p)), name, args)
        except ToolError as exc:
            return Outcome(False, text=str(exc))
        except ToolFailure as exc:  # a bug: the cell fails saying so
            raise AssertionError(f"{name} failed inside for {p.name}: {exc}") from exc
        return Outcome(True, result.payload)
    async with client(w, p) as c:
        r = await c.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                        "params": {"name": name, "arguments": args}})
    assert r.status_code == 200, (name, p.name, r.status_code, r.text)
    answer = r.json()
    if "error" in answer:
        message = answer["error"]["message"]
        if message.startswith("Unknown tool"):
            return Outcome(False, text=message, unavailable=True)
        raise AssertionError(f"{name} over MCP for {p.name}: {message}")
    result = answer["result"]
    text = "".join(part.get("text", "") for part in result["content"])
    if result.get("isError"):
        return Outcome(False, text=text)
    payload = result.get("structuredContent")
    if payload is None:
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
    return Outcome(True, payload)


@asynccontextmanager
async def client(w: World, p: Principal | None) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the web app with ``p``'s token (``None``: no credential)."""
    headers = {"Authorization": f"Bearer {w.tokens[p.token]}"} if p is not None else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=w.web), base_url="http://testserver",
                                 timeout=120, headers=headers) as c:
        yield c


def make_web(app: App) -> Any:
    return create_web_app(app)


def note_row(w: World, note_id: str) -> Any:
    with w.app.workspace.read() as c:
        return c.execute(sa.select(db.notes).where(db.notes.c.id == note_id)).first()


def ids_in(text: str) -> set[str]:
    return set(re.findall(r"[0-9a-f]{32}", text))
