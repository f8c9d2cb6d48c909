"""The JSON API and the pages act as the person asking, within their token's scopes (on SQLite
and PostgreSQL): what the owner, an admin, a member, a member's notebook-scoped token and a
member's read-only token list, search, read and may change; a foreign id answers exactly like
a missing one; a notebook shared to read only refuses writes with 403; a note made without a
notebook goes to the person's own default; workspace-wide settings take an admin; and every
route of the app either keeps to a token's notebooks or refuses that token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2 as httpx
import pytest

from noteloom.accounts import TokenScopes
from noteloom.app import App, access_token
from noteloom.semantic.index import SemanticIndex
from noteloom.web.app import create_web_app
from noteloom.web.auth import ALWAYS_ALLOWED, NOTEBOOK_ROUTES, is_public, scope_refusal
from test_embed_index import FakeEmbedder

pytestmark = pytest.mark.anyio


MISSING = "f" * 32


@dataclass
class World:
    """olga (owner), ada (admin), ann and bob (members), carl (a member with nothing yet).

    Notebooks: olga's Work with its Team, ann's Ann, bob's Bob, and bob's Lent (shared with ann
    to read) and Desk (shared with ann to write). One note in each, every one holding ``apples``."""

    app: App
    books: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    attachments: dict[str, str] = field(default_factory=dict)


def world(app: App) -> World:
    ws = app.workspace
    w = World(app)
    owner = ws.ensure_owner("olga")
    w.tokens["owner"] = access_token(app)
    ada = ws.add_person("ada", role="admin")
    ann = ws.add_person("ann")
    bob = ws.add_person("bob")
    carl = ws.add_person("carl")
    work = ws.create_notebook("Work")
    w.books = {
        "Work": work.id,
        "Team": ws.create_notebook("Team", parent_id=work.id).id,
        "Ann": ws.create_notebook("Ann", owner_id=ann.id).id,
        "Bob": ws.create_notebook("Bob", owner_id=bob.id).id,
        "Lent": ws.create_notebook("Lent", owner_id=bob.id).id,
        "Desk": ws.create_notebook("Desk", owner_id=bob.id).id,
    }
    ws.share_notebook(w.books["Lent"], "ann", "read", actor=owner)
    ws.share_notebook(w.books["Desk"], "ann", "write", actor=owner)
    for key, book in w.books.items():
        note = ws.create_note(f"{key} apples", f"apples in {key}", book)
        ws.update_note(note.id, body=f"apples in {key}, edited")  # a revision to list and restore
        w.notes[key] = note.id
        w.attachments[key] = ws.add_attachment(note.id, f"file of {key}".encode(), f"{key}.txt").id
    w.tokens.update(
        admin=ws.create_token(ada.id, name="ada"),
        ann=ws.create_token(ann.id, name="ann"),
        bob=ws.create_token(bob.id, name="bob"),
        carl=ws.create_token(carl.id, name="carl"),
        ann_scoped=ws.create_token(ann.id, name="ann-scoped", scopes=TokenScopes(notebooks=("Ann", "Lent"))),
        ann_ro=ws.create_token(ann.id, name="ann-ro", scopes=TokenScopes(read_only=True)),
    )
    return w


#: Who sees which notebooks (and so which notes).
SEES = {
    "owner": {"Work", "Team", "Ann", "Bob", "Lent", "Desk"},
    "admin": {"Work", "Team", "Ann", "Bob", "Lent", "Desk"},
    "ann": {"Ann", "Lent", "Desk"},
    "ann_scoped": {"Ann", "Lent"},
    "ann_ro": {"Ann", "Lent", "Desk"},
    "bob": {"Bob", "Lent", "Desk"},
    "carl": set(),
}


@asynccontextmanager
async def http(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=120) as c:
        yield c


def as_(w: World, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {w.tokens[who]}"}


def keys_of(w: World, ids: list[str], table: dict[str, str]) -> set[str]:
    back = {v: k for k, v in table.items()}
    return {back.get(i, i) for i in ids}


async def test_each_person_lists_searches_and_counts_only_what_they_may_see(any_app: App) -> None:
    w = world(any_app)
    async with http(any_app) as c:
        for who, books in SEES.items():
            listed = await c.get("/api/v1/notebooks", headers=as_(w, who))
            assert listed.status_code == 200, (who, listed.text)
            assert keys_of(w, [b["id"] for b in listed.json()], w.books) == books, who
            assert all(b["note_count"] == 1 for b in listed.json()), who
            notes = (await c.get("/api/v1/notes", headers=as_(w, who))).json()["notes"]
            assert keys_of(w, [n["id"] for n in notes], w.notes) == books, who
            found = (await c.get("/api/v1/notes", params={"q": "apples"}, headers=as_(w, who))).json()["notes"]
            assert keys_of(w, [n["id"] for n in found], w.notes) == books, who
            # The query language's notebook filter finds no notebook the person cannot see.
            named = await c.get("/api/v1/notes", params={"q": "apples notebook:Bob"}, headers=as_(w, who))
            assert keys_of(w, [n["id"] for n in named.json()["notes"]], w.notes) == books & {"Bob"}, who
            # A notebook out of sight lists like one that does not exist: nothing.
            for key in ("Bob", "Work"):
                inside = await c.get("/api/v1/notes", params={"notebook_id": w.books[key]}, headers=as_(w, who))
                searched = await c.get("/api/v1/notes", params={"notebook_id": w.books[key], "q": "apples"},
                                       headers=as_(w, who))
                expected = {key} & books
                assert keys_of(w, [n["id"] for n in inside.json()["notes"]], w.notes) == expected, (who, key)
                assert keys_of(w, [n["id"] for n in searched.json()["notes"]], w.notes) == expected, (who, key)


async def test_a_shared_sub_notebook_shows_at_the_top_for_someone_who_cannot_see_its_parent(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    ws.share_notebook(w.books["Team"], "bob", "read")
    async with http(any_app) as c:
        books = {b["id"]: b for b in (await c.get("/api/v1/notebooks", headers=as_(w, "bob"))).json()}
        owner_view = {b["id"]: b for b in (await c.get("/api/v1/notebooks", headers=as_(w, "owner"))).json()}
    assert books[w.books["Team"]]["parent_id"] is None  # Work does not exist for bob, not even as an id
    assert owner_view[w.books["Team"]]["parent_id"] == w.books["Work"]


def _same(foreign: httpx.Response, missing: httpx.Response, foreign_id: str) -> None:
    assert foreign.status_code == missing.status_code, (foreign.text, missing.text)
    assert foreign.text.replace(foreign_id, MISSING) == missing.text, (foreign.text, missing.text)


async def test_a_foreign_id_answers_exactly_like_a_missing_one(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    trashed = ws.create_note("Old apples", "gone", w.books["Bob"])
    ws.delete_note(trashed.id)
    ann = as_(w, "ann")
    fake_rev = "e" * 32
    async with http(any_app) as c:
        for foreign in (w.notes["Bob"], w.notes["Work"], trashed.id):
            for method, path, body in (
                ("GET", "/api/v1/notes/{id}", None),
                ("GET", "/api/v1/notes/{id}/rendered", None),
                ("GET", "/api/v1/notes/{id}/revisions", None),
                ("PATCH", "/api/v1/notes/{id}", {"title": "mine now"}),
                ("POST", "/api/v1/notes/{id}/revisions/" + fake_rev + "/restore", None),
            ):
                seen = await c.request(method, path.format(id=foreign), json=body, headers=ann)
                missing = await c.request(method, path.format(id=MISSING), json=body, headers=ann)
                assert missing.status_code == 404 and missing.json()["error"] == "not_found"
                _same(seen, missing, foreign)
        for foreign in (w.books["Bob"], w.books["Team"]):
            made = await c.post("/api/v1/notes", json={"title": "x", "notebook_id": foreign}, headers=ann)
            missing = await c.post("/api/v1/notes", json={"title": "x", "notebook_id": MISSING}, headers=ann)
            assert missing.status_code == 404
            _same(made, missing, foreign)
        theirs = await c.get(f"/attachments/{w.attachments['Bob']}", headers=ann)
        nothing = await c.get(f"/attachments/{MISSING}", headers=ann)
        assert nothing.status_code == 404
        _same(theirs, nothing, w.attachments["Bob"])
        # What the person may see answers as before: their note, their attachment, the trash.
        assert (await c.get(f"/api/v1/notes/{w.notes['Lent']}", headers=ann)).status_code == 200
        assert (await c.get(f"/attachments/{w.attachments['Ann']}", headers=ann)).content == b"file of Ann"
        revs = await c.get(f"/api/v1/notes/{w.notes['Ann']}/revisions", headers=ann)
        assert revs.status_code == 200 and len(revs.json()["revisions"]) == 1
        own_trashed = ws.create_note("Ann's old", "gone", w.books["Ann"])
        ws.delete_note(own_trashed.id)
        in_trash = await c.get(f"/api/v1/notes/{own_trashed.id}", headers=ann)
        assert in_trash.status_code == 404 and "in the trash" in in_trash.json()["message"]
        assert (await c.get(f"/api/v1/notes/{trashed.id}", headers=as_(w, "admin"))).json()["message"] == (
            in_trash.json()["message"].replace(own_trashed.id, trashed.id))
    assert ws.get_note(w.notes["Bob"]).title == "Bob apples"  # nothing of bob's changed


async def test_a_notebook_shared_to_read_refuses_writes_with_403_and_one_shared_to_write_takes_them(
    any_app: App,
) -> None:
    w = world(any_app)
    ws = any_app.workspace
    ann = as_(w, "ann")
    lent, desk = w.notes["Lent"], w.notes["Desk"]
    async with http(any_app) as c:
        rev = (await c.get(f"/api/v1/notes/{lent}/revisions", headers=ann)).json()["revisions"][0]["id"]
        for method, path, body in (
            ("PATCH", f"/api/v1/notes/{lent}", {"body": "ann was here"}),
            ("POST", f"/api/v1/notes/{lent}/revisions/{rev}/restore", None),
            ("POST", "/api/v1/notes", {"title": "ann's", "notebook_id": w.books["Lent"]}),
        ):
            refused = await c.request(method, path, json=body, headers=ann)
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"] == "forbidden" and "'Lent'" in refused.json()["message"]
        assert ws.get_note(lent).body == "apples in Lent, edited"
        saved = await c.patch(f"/api/v1/notes/{desk}", json={"body": "ann was here"}, headers=ann)
        assert saved.status_code == 200 and saved.json()["body"] == "ann was here"
        made = await c.post("/api/v1/notes", json={"title": "ann's", "notebook_id": w.books["Desk"]}, headers=ann)
        assert made.status_code == 201 and made.json()["notebook_id"] == w.books["Desk"]
        # Bob owns Lent: he writes there.
        mine = await c.patch(f"/api/v1/notes/{lent}", json={"body": "bob's"}, headers=as_(w, "bob"))
        assert mine.status_code == 200


async def test_a_note_made_without_a_notebook_goes_to_the_persons_own_default(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    async with http(any_app) as c:
        async def made(who: str) -> httpx.Response:
            return await c.post("/api/v1/notes", json={"title": f"{who}'s quick note"}, headers=as_(w, who))

        assert (await made("owner")).json()["notebook_id"] == w.books["Work"]
        assert (await made("ann")).json()["notebook_id"] == w.books["Ann"]
        assert (await made("ann_scoped")).json()["notebook_id"] == w.books["Ann"]
        carls = await made("carl")  # has no notebook yet: gets one of his own
        assert carls.status_code == 201
        book = ws.get_notebook(carls.json()["notebook_id"])
        assert book.title == "Notes" and book.owner_id == ws.find_person("carl").id
        assert (await made("carl")).json()["notebook_id"] == book.id  # and keeps it
        listed = (await c.get("/api/v1/notebooks", headers=as_(w, "carl"))).json()
        assert [b["title"] for b in listed] == ["Notes"]
        ada = await made("admin")
        assert ws.get_notebook(ada.json()["notebook_id"]).owner_id == ws.find_person("ada").id
        # A token kept to notebooks that hold no default of the person's says what to send.
        desk_only = ws.create_token(ws.find_person("ann").id, name="desk", scopes=TokenScopes(notebooks=("Desk",)))
        refused = await c.post("/api/v1/notes", json={"title": "x"}, headers={"Authorization": f"Bearer {desk_only}"})
        assert refused.status_code == 422 and refused.json()["field"] == "notebook_id"
        assert "'Ann'" in refused.json()["message"]


async def test_a_notebook_scoped_token_reads_and_writes_only_inside_its_notebooks(any_app: App) -> None:
    w = world(any_app)
    scoped = as_(w, "ann_scoped")
    async with http(any_app) as c:
        outside = await c.get(f"/api/v1/notes/{w.notes['Desk']}", headers=scoped)
        missing = await c.get(f"/api/v1/notes/{MISSING}", headers=scoped)
        _same(outside, missing, w.notes["Desk"])
        patched = await c.patch(f"/api/v1/notes/{w.notes['Desk']}", json={"body": "x"}, headers=scoped)
        assert patched.status_code == 404  # her own access would allow it; the token does not reach it
        assert (await c.patch(f"/api/v1/notes/{w.notes['Ann']}", json={"body": "x"}, headers=scoped)).status_code == 200
        assert (await c.get(f"/attachments/{w.attachments['Desk']}", headers=scoped)).status_code == 404
        # A browser session started from the token keeps to the same notebooks.
        signed = await c.post("/api/v1/auth/sign-in", json={"token": w.tokens["ann_scoped"]})
        session = {"X-Noteloom-Session": signed.json()["session"]}
        books = (await c.get("/api/v1/notebooks", headers=session)).json()
        assert keys_of(w, [b["id"] for b in books], w.books) == {"Ann", "Lent"}
        # Routes whose work reaches every notebook of hers refuse the token, saying why.
        for method, path in (("GET", "/api/v1/chat/conversations"), ("GET", "/api/v1/recipes"),
                             ("GET", "/api/v1/notifications")):
            refused = await c.request(method, path, headers=scoped)
            assert refused.status_code == 403 and "--scope" in refused.json()["message"], path


async def test_a_read_only_token_reads_what_its_person_sees_and_changes_nothing(any_app: App) -> None:
    w = world(any_app)
    ro = as_(w, "ann_ro")
    async with http(any_app) as c:
        assert (await c.get(f"/api/v1/notes/{w.notes['Desk']}", headers=ro)).status_code == 200
        assert (await c.get(f"/api/v1/notes/{w.notes['Bob']}", headers=ro)).status_code == 404
        for method, path, body in (("PATCH", f"/api/v1/notes/{w.notes['Desk']}", {"body": "x"}),
                                   ("POST", "/api/v1/notes", {"title": "x"})):
            refused = await c.request(method, path, json=body, headers=ro)
            assert refused.status_code == 403 and "read-only" in refused.json()["message"]


async def test_workspace_settings_are_changed_by_the_owner_or_an_admin_and_read_by_anyone(any_app: App) -> None:
    w = world(any_app)
    changes = (
        ("/api/v1/tools/delete_note/policy", {"policy": "deny"}),
        ("/api/v1/memory/default", {"memory_default": False}),
        ("/api/v1/recipes/cap", {"tokens": 1000}),
    )
    async with http(any_app) as c:
        for path, body in changes:
            refused = await c.put(path, json=body, headers=as_(w, "ann"))
            assert refused.status_code == 403 and refused.json()["error"] == "forbidden", path
            assert "admin" in refused.json()["message"]
            assert (await c.get(path, headers=as_(w, "ann"))).status_code == 200, path
            for who in ("admin", "owner"):
                assert (await c.put(path, json=body, headers=as_(w, who))).status_code == 200, (who, path)


async def test_the_index_status_counts_the_notes_the_person_may_see(any_app: App) -> None:
    w = world(any_app)
    index = SemanticIndex(any_app.engine, FakeEmbedder())
    index.sync()
    any_app.services.semantic = index
    async with http(any_app) as c:
        for who in ("owner", "ann", "ann_scoped", "carl"):
            status = (await c.get("/api/v1/index/status", headers=as_(w, who))).json()
            assert status["enabled"] is True and status["state"] == "idle", status
            assert status["indexed_notes"] == len(SEES[who]) and status["pending_notes"] == 0, (who, status)
        any_app.workspace.create_note("more apples", "waiting", w.books["Bob"])
        owner = (await c.get("/api/v1/index/status", headers=as_(w, "owner"))).json()
        ann = (await c.get("/api/v1/index/status", headers=as_(w, "ann"))).json()
    assert owner["pending_notes"] == 1 and ann["pending_notes"] == 0


# -- every route: a notebook-scoped token either keeps to its notebooks or is refused ----------


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", MISSING, path)


async def test_every_route_keeps_to_a_tokens_notebooks_or_refuses_the_token(any_app: App) -> None:
    """Generated from the route table: a route a notebook-scoped credential reaches is one
    listed in NOTEBOOK_ROUTES (each filters, or holds nothing of a notebook); every other route
    answers it 403 naming --scope. A new route is refused until someone lists it."""
    w = world(any_app)
    async with http(any_app) as c:
        paths = (await c.get("/api/v1/openapi.json", headers=as_(w, "owner"))).json()["paths"]
    # Every route of the API (the OpenAPI document lists them), and the pages' one data route.
    routes = [(m.upper(), p) for p, ops in paths.items() for m in ops] + [("GET", "/attachments/{attachment_id}")]
    assert ("GET", "/api/v1/notes/{note_id}") in routes and len(routes) > 50
    listed, refused = set(), set()
    async with http(any_app) as c:
        for method, path in routes:
            concrete = _concrete(path)
            if is_public(concrete) or concrete == "/mcp":
                continue
            answer = await c.request(method, concrete, headers=as_(w, "ann_scoped"))
            scope_refused = answer.status_code == 403 and "--scope" in answer.text
            if NOTEBOOK_ROUTES.match(concrete) or concrete in ALWAYS_ALLOWED:
                assert not scope_refused, (method, path)
                listed.add(path)
            else:
                assert scope_refused, (method, path, answer.status_code, answer.text[:200])
                refused.add(path)
    assert {"/api/v1/notes", "/api/v1/notebooks", "/attachments/{attachment_id}"} <= listed
    assert {"/api/v1/chat/send", "/api/v1/recipes", "/api/v1/users", "/api/v1/me/password"} <= refused


def test_a_limited_credential_never_reaches_a_plugins_routes() -> None:
    """A plugin's route cannot be known to keep to a token's notebooks or tools."""
    for scopes in (TokenScopes(notebooks=("Work",)), TokenScopes(tools=frozenset({"read_note"}))):
        assert scope_refusal(scopes, "GET", "/plugins/demo/notes") is not None
    assert scope_refusal(TokenScopes(read_only=True), "GET", "/plugins/demo/notes") is None
    assert scope_refusal(TokenScopes(notebooks=("Work",)), "GET", "/api/v1/notes") is None
