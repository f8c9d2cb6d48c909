"""The notifications API: a user's own notifications listed, counted and marked read; webhooks
added (the secret told once), listed and removed; another user's never reached; bad input a
4xx naming the field, never a 5xx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2 as httpx
import pytest

from api_support import second_user
from noteloom.app import App, access_token
from noteloom.db import new_id, write_tx
from noteloom.notifications import KINDS, Notifications
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def notify(app: App, user_id: str, title: str, kind: str = "failure") -> str:
    store = Notifications(app.engine)
    with write_tx(app.engine) as conn:
        return store.notify(conn, user_id, kind, title, f"{title}: details", run_id=new_id())


async def test_notifications_are_listed_newest_first_counted_and_marked_read(app: App) -> None:
    token = access_token(app)
    owner = app.workspace.owner()
    assert owner is not None
    first = notify(app, owner.id, "Digest failed")
    second = notify(app, owner.id, "Approve a deletion", kind="approval")
    third = notify(app, owner.id, "Budget reached", kind="budget")
    async with client(app) as c:
        listed = (await c.get("/api/v1/notifications", headers=bearer(token))).json()
        assert [n["id"] for n in listed["notifications"]] == [third, second, first]
        assert listed["unread"] == 3
        assert listed["notifications"][1]["kind"] == "approval"
        assert listed["notifications"][1]["body"] == "Approve a deletion: details"
        assert listed["notifications"][1]["read_time"] is None
        assert (await c.get("/api/v1/notifications/count", headers=bearer(token))).json() == {"unread": 3}

        r = await c.post("/api/v1/notifications/read", json={"ids": [second]}, headers=bearer(token))
        assert r.status_code == 200 and r.json() == {"marked": 1, "unread": 2}
        unread = (await c.get("/api/v1/notifications?unread=1", headers=bearer(token))).json()
        assert [n["id"] for n in unread["notifications"]] == [third, first]
        everything = (await c.get("/api/v1/notifications", headers=bearer(token))).json()["notifications"]
        assert next(n for n in everything if n["id"] == second)["read_time"] is not None

        r = await c.post("/api/v1/notifications/read", json={"all": True}, headers=bearer(token))
        assert r.json() == {"marked": 2, "unread": 0}
        assert (await c.get("/api/v1/notifications/count", headers=bearer(token))).json() == {"unread": 0}
        assert (await c.get("/api/v1/notifications?unread=1", headers=bearer(token))).json()["notifications"] == []
        limited = (await c.get("/api/v1/notifications?limit=1", headers=bearer(token))).json()
        assert [n["id"] for n in limited["notifications"]] == [third]


async def test_a_user_never_sees_or_marks_another_users_notifications_or_webhooks(app: App) -> None:
    token = access_token(app)
    owner = app.workspace.owner()
    assert owner is not None
    mine = notify(app, owner.id, "Mine")
    other_id, other_token = second_user(app, "guest")
    theirs = notify(app, other_id, "Theirs")
    async with client(app) as c:
        listed = (await c.get("/api/v1/notifications", headers=bearer(token))).json()
        assert [n["id"] for n in listed["notifications"]] == [mine]
        # Marking their notification by id changes nothing of theirs.
        r = await c.post("/api/v1/notifications/read", json={"ids": [theirs]}, headers=bearer(token))
        assert r.json()["marked"] == 0
        assert (await c.get("/api/v1/notifications/count", headers=bearer(other_token))).json() == {"unread": 1}
        await c.post("/api/v1/notifications/read", json={"all": True}, headers=bearer(token))
        assert (await c.get("/api/v1/notifications/count", headers=bearer(other_token))).json() == {"unread": 1}

        added = await c.post("/api/v1/webhooks", json={"url": "https://hooks.example.com/in"},
                             headers=bearer(other_token))
        assert added.status_code == 201, added.text
        assert (await c.get("/api/v1/webhooks", headers=bearer(token))).json() == []
        gone = await c.delete(f"/api/v1/webhooks/{added.json()['id']}", headers=bearer(token))
        assert gone.status_code == 404
        assert [w["id"] for w in (await c.get("/api/v1/webhooks", headers=bearer(other_token))).json()] == [
            added.json()["id"]]


async def test_a_webhook_is_added_with_its_secret_once_listed_without_it_and_removed(app: App) -> None:
    token = access_token(app)
    async with client(app) as c:
        r = await c.post("/api/v1/webhooks", json={"url": "https://hooks.example.com/noteloom",
                                                    "kinds": ["approval", "failure"]}, headers=bearer(token))
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["secret"] and made["url"] == "https://hooks.example.com/noteloom"
        assert made["kinds"] == [k for k in KINDS if k in ("approval", "failure")]  # canonical order
        assert made["enabled"] is True and made["last_status"] is None

        default = (await c.post("/api/v1/webhooks", json={"url": "https://other.example.com/"},
                                headers=bearer(token))).json()
        assert default["kinds"] == list(KINDS)

        listed = (await c.get("/api/v1/webhooks", headers=bearer(token))).json()
        assert [w["id"] for w in listed] == [made["id"], default["id"]]
        assert all("secret" not in w for w in listed)
        assert made["secret"] not in (await c.get("/api/v1/webhooks", headers=bearer(token))).text

        assert (await c.delete(f"/api/v1/webhooks/{made['id']}", headers=bearer(token))).status_code == 204
        assert [w["id"] for w in (await c.get("/api/v1/webhooks", headers=bearer(token))).json()] == [default["id"]]
        again = await c.delete(f"/api/v1/webhooks/{made['id']}", headers=bearer(token))
        assert again.status_code == 404 and again.json()["error"] == "not_found"


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/api/v1/webhooks", {"url": "ftp://hooks.example.com/x"}, "url"),
    ("POST", "/api/v1/webhooks", {"url": "https://user:pw@hooks.example.com/x"}, "url"),
    ("POST", "/api/v1/webhooks", {"url": "not a url at all"}, "url"),
    ("POST", "/api/v1/webhooks", {"url": "http://127.0.0.1:9/private"}, "url"),
    ("POST", "/api/v1/webhooks", {"url": "https://hooks.example.com/x", "kinds": ["gossip"]}, "kinds"),
    ("POST", "/api/v1/webhooks", {"url": "https://hooks.example.com/x", "kinds": []}, "kinds"),
    ("POST", "/api/v1/webhooks", {"url": ""}, "url"),
    ("POST", "/api/v1/webhooks", {"url": "https://hooks.example.com/x", "secret": "mine"}, "secret"),
    ("POST", "/api/v1/notifications/read", {}, "body"),
    ("POST", "/api/v1/notifications/read", {"ids": ["a" * 32], "all": True}, "body"),
    ("POST", "/api/v1/notifications/read", {"all": False}, "body"),
    ("POST", "/api/v1/notifications/read", {"ids": ["not-an-id"]}, "ids.0"),
    ("GET", "/api/v1/notifications?limit=0", None, "limit"),
    ("GET", "/api/v1/notifications?limit=100000", None, "limit"),
    ("GET", "/api/v1/notifications?unread=maybe", None, "unread"),
])
async def test_bad_input_is_a_4xx_naming_the_field(app: App, method: str, path: str, body: object,
                                                   field: str) -> None:
    token = access_token(app)
    async with client(app) as c:
        r = await c.request(method, path, json=body, headers=bearer(token))
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.json()["field"] == field, r.json()


async def test_a_webhook_id_that_is_not_an_id_is_a_4xx_and_every_route_needs_a_credential(app: App) -> None:
    token = access_token(app)
    async with client(app) as c:
        r = await c.delete("/api/v1/webhooks/nonsense", headers=bearer(token))
        assert 400 <= r.status_code < 500
        for method, path in [("GET", "/api/v1/notifications"), ("GET", "/api/v1/notifications/count"),
                             ("POST", "/api/v1/notifications/read"), ("GET", "/api/v1/webhooks"),
                             ("POST", "/api/v1/webhooks"), ("DELETE", f"/api/v1/webhooks/{new_id()}")]:
            assert (await c.request(method, path)).status_code == 401, (method, path)
