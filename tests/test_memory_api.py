"""The memory API in-process (the full web app, token middleware included): list, search,
read, add, change and delete; another user's memories read as missing; bad input is a 4xx
naming the field, never a 5xx."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from api_support import client, second_user
from noteloom import db
from noteloom.app import App
from noteloom.memory import store
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio
BASE = "/api/v1/memory"


async def test_add_list_search_change_and_delete(any_app: App) -> None:
    async with client(any_app) as c:
        r = await c.post(BASE, json={"content": "Allergic to shellfish", "tags": ["health"]})
        assert r.status_code == 201, r.text
        mine = r.json()
        r = await c.post(BASE, json={"content": "Office closes at 6", "title": "Hours", "scope": "shared"})
        shared = r.json()
        assert (mine["scope"], mine["source"], mine["by_ai"], mine["title"]) == (
            "personal", "user", False, "Allergic to shellfish")
        assert {m["id"] for m in (await c.get(BASE)).json()} == {mine["id"], shared["id"]}
        assert [m["id"] for m in (await c.get(BASE, params={"scope": "shared"})).json()] == [shared["id"]]
        assert [m["id"] for m in (await c.get(BASE, params={"q": "SHELLFISH"})).json()] == [mine["id"]]
        assert [m["id"] for m in (await c.get(BASE, params={"q": "office", "scope": "personal"})).json()] == []

        r = await c.patch(f"{BASE}/{mine['id']}", json={"content": "Allergic to shellfish and peanuts"})
        assert r.status_code == 200 and r.json()["content"] == "Allergic to shellfish and peanuts"
        assert r.json()["tags"] == ["health"]
        assert (await c.get(f"{BASE}/{mine['id']}")).json()["content"] == "Allergic to shellfish and peanuts"

        assert (await c.delete(f"{BASE}/{shared['id']}")).status_code == 204
        r = await c.get(f"{BASE}/{shared['id']}")
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        assert (await c.delete(f"{BASE}/{shared['id']}")).status_code == 404


async def test_ai_written_memories_carry_their_badge_and_where_they_came_from(app: App) -> None:
    owner = app.workspace.ensure_owner()
    with db.write_tx(app.engine) as c:
        written = store.add(c, owner.id, "Likes short answers", source="ai", conversation_id="c" * 32,
                            message_id="m" * 32)
    async with client(app) as c:
        (row,) = (await c.get(BASE)).json()
    assert row["id"] == written.id and row["by_ai"] is True
    assert (row["conversation_id"], row["message_id"], row["run_id"]) == ("c" * 32, "m" * 32, None)


async def test_another_users_memories_are_missing_and_shared_ones_are_everyones(any_app: App) -> None:
    guest_id, guest_token = second_user(any_app)
    with db.write_tx(any_app.engine) as c:
        theirs = store.add(c, guest_id, "guest's private fact about salaries")
    async with client(any_app) as owner:
        shared = (await owner.post(BASE, json={"content": "shared salaries policy", "scope": "shared"})).json()
        mine = (await owner.post(BASE, json={"content": "owner's salaries note"})).json()
        assert {m["id"] for m in (await owner.get(BASE, params={"q": "salaries"})).json()} == {mine["id"], shared["id"]}
        for method, body in (("GET", None), ("PATCH", {"title": "mine now"}), ("DELETE", None)):
            foreign = await owner.request(method, f"{BASE}/{theirs.id}", json=body)
            unknown = await owner.request(method, f"{BASE}/{'0' * 32}", json=body)
            assert foreign.status_code == unknown.status_code == 404, method
            assert foreign.json()["message"].replace(theirs.id, "ID") == unknown.json()["message"].replace("0" * 32, "ID")
    async with client(any_app, guest_token) as guest:
        seen = {m["id"] for m in (await guest.get(BASE)).json()}
        assert seen == {theirs.id, shared["id"]}
        # Shared memories reach everyone's assistant: a member reads them, only the owner or an
        # admin changes them (a member's attempt is a 403 and changes nothing).
        for method, body in (("PATCH", {"title": "Salary policy"}), ("DELETE", None)):
            r = await guest.request(method, f"{BASE}/{shared['id']}", json=body)
            assert r.status_code == 403 and r.json()["error"] == "forbidden", method
        r = await guest.post(BASE, json={"content": "a shared fact of mine", "scope": "shared"})
        assert r.status_code == 403
    admin = any_app.workspace.add_person("ada", role="admin")
    async with client(any_app, any_app.workspace.create_token(admin.id)) as ada:
        r = await ada.patch(f"{BASE}/{shared['id']}", json={"title": "Salary policy"})
        assert r.status_code == 200 and r.json()["title"] == "Salary policy"
        assert (await ada.get(f"{BASE}/{theirs.id}")).status_code == 404  # personal ones stay personal
    with db.read_tx(any_app.engine) as c:
        assert store.get(c, guest_id, theirs.id) is not None  # untouched by the owner's attempts


@pytest.mark.parametrize(("method", "path", "body", "params", "field"), [
    ("POST", "", {"content": "   "}, None, "content"),
    ("POST", "", {"content": ""}, None, "content"),
    ("POST", "", {"content": "x" * (store.CONTENT_MAX + 1)}, None, "content"),
    ("POST", "", {"content": "ok", "title": "t" * 256}, None, "title"),
    ("POST", "", {"content": "ok", "scope": "everyone"}, None, "scope"),
    ("POST", "", {"content": "ok", "source": "ai"}, None, "source"),
    ("POST", "", {"content": "a\u0000b"}, None, "content"),
    ("POST", "", {"content": "ok", "tags": "one"}, None, "tags"),
    ("GET", "", None, {"q": "?!"}, "q"),
    ("GET", "", None, {"limit": "0"}, "limit"),
    ("GET", "", None, {"scope": "all"}, "scope"),
    ("GET", "/nothex", None, None, "memory_id"),
    ("PATCH", "/ID", {"content": "  \n"}, None, "content"),
    ("PATCH", "/ID", {"scope": "shared"}, None, "scope"),
])
async def test_bad_input_is_a_422_naming_the_field(
    app: App, method: str, path: str, body: Any, params: Any, field: str,
) -> None:
    owner = app.workspace.ensure_owner()
    with db.write_tx(app.engine) as c:
        existing = store.add(c, owner.id, "a fact")
    async with client(app) as c:
        r = await c.request(method, BASE + path.replace("ID", existing.id), json=body, params=params)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()


async def test_the_routes_are_in_the_openapi_document(app: App) -> None:
    async with client(app) as c:
        paths = (await c.get("/api/v1/openapi.json")).json()["paths"]
    assert {"get", "post"} <= set(paths[BASE]) and {"get", "patch", "delete"} <= set(paths[BASE + "/{memory_id}"])


async def test_without_a_token_nothing_is_read(app: App) -> None:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        r: Any = await c.get(BASE)
    assert r.status_code == 401
