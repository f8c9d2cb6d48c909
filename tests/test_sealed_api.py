"""The vault and sealed chats over the JSON API: set up (the recovery key once, the warning),
unlock, lock, status, passphrase, rotate; a window opened through one app instance reads in a
second one on the same database (as ``serve --workers`` does) until it is locked; locked
lists, 423 on opening and sending, and resuming after unlock; sign-out closes the window."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import sqlalchemy as sa

from api_support import client
from chat_support import running_chat
from noteloom.app import App, access_token, open_app
from noteloom.vault import vault_windows
from sealed_support import MARKER, PASS, models, rows_holding

pytestmark = pytest.mark.anyio


@pytest.fixture
def second(any_app: App) -> Iterator[App]:
    """Another app on the same database and data directory: another worker."""
    other = open_app(any_app.settings, load_entry_points=False)
    try:
        yield other
    finally:
        other.close()


async def settled(c: httpx.AsyncClient, message_id: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            r = await c.get(f"/api/v1/chat/messages/{message_id}")
            assert r.status_code == 200, r.text
            if r.json()["status"] != "running":
                return dict(r.json())
            await anyio.sleep(0.02)


async def test_setup_unlock_lock_and_status(app: App) -> None:
    async with client(app) as c:
        assert (await c.get("/api/v1/vault")).json() == {"exists": False, "unlocked": False, "expires_time": None,
                                                         "generation": None}
        r = await c.post("/api/v1/vault/unlock", json={"passphrase": PASS})
        assert r.status_code == 404 and "set a vault passphrase first" in r.json()["message"]
        r = await c.post("/api/v1/vault/setup", json={"passphrase": "short"})
        assert r.status_code == 422
        r = await c.post("/api/v1/vault/setup", json={"passphrase": PASS})
        assert r.status_code == 201, r.text
        made = r.json()
        assert len(made["recovery_key"].replace("-", "")) == 52 and made["unlocked"] and made["generation"] == 1
        assert "cannot be read by anyone" in made["warning"] and "shown only now" in made["warning"]
        assert (await c.post("/api/v1/vault/setup", json={"passphrase": PASS})).status_code == 409
        assert (await c.post("/api/v1/vault/lock")).status_code == 204
        assert (await c.get("/api/v1/vault")).json()["unlocked"] is False
        wrong = await c.post("/api/v1/vault/unlock", json={"passphrase": "not the passphrase"})
        assert wrong.status_code == 403 and wrong.json()["error"] == "wrong_passphrase"
        assert (await c.post("/api/v1/vault/unlock", json={"recovery_key": made["recovery_key"]})).status_code == 422
        r = await c.post("/api/v1/vault/unlock", json={"recovery_key": made["recovery_key"],
                                                       "new_passphrase": "a new passphrase"})
        assert r.status_code == 200 and r.json()["unlocked"] and r.json()["expires_time"] > 0
        r = await c.post("/api/v1/vault/passphrase", json={"old_passphrase": PASS, "new_passphrase": "another one"})
        assert r.status_code == 403
        r = await c.post("/api/v1/vault/passphrase",
                         json={"old_passphrase": "a new passphrase", "new_passphrase": "another one"})
        assert r.status_code == 204


async def test_a_window_opened_through_one_instance_reads_in_another_until_locked(
    any_app: App, second: App,
) -> None:
    token = access_token(any_app)
    for a in (any_app, second):
        models(a, [{"text": f"Sealed answer {MARKER}."}], loop=True)
    async with running_chat(any_app), running_chat(second), client(any_app, token) as one, \
            client(second, token) as two:
        assert (await one.post("/api/v1/vault/setup", json={"passphrase": PASS})).status_code == 201
        r = await one.post("/api/v1/chat/send", json={"message": f"My secret {MARKER}", "security_level": "private",
                                                      "controls": {"model": "own:script"}})
        assert r.status_code == 202, r.text
        sent = r.json()
        view = await settled(two, sent["message_id"])  # read through the other instance
        assert MARKER in view["content"]
        listed = (await two.get("/api/v1/chat/conversations")).json()["conversations"]
        assert listed[0]["title"] == f"My secret {MARKER}" and listed[0]["security_level"] == "private"
        assert listed[0]["locked"] is False and listed[0]["protected"] is True
        assert rows_holding(any_app, MARKER) == []
        # Lock through the second: the first is locked too.
        assert (await two.post("/api/v1/vault/lock")).status_code == 204
        listed = (await one.get("/api/v1/chat/conversations")).json()["conversations"]
        assert listed[0]["title"] == "Locked chat" and listed[0]["locked"] is True
        assert MARKER not in (await one.get("/api/v1/chat/conversations")).text
        cid = sent["conversation_id"]
        for method, path, body in (
            ("GET", f"/api/v1/chat/conversations/{cid}", None),
            ("GET", f"/api/v1/chat/messages/{sent['message_id']}", None),
            ("GET", f"/api/v1/chat/messages/{sent['message_id']}/events", None),
            ("GET", f"/api/v1/chat/conversations/{cid}/export", None),
            ("POST", "/api/v1/chat/send", {"message": "more", "conversation_id": cid}),
            ("PATCH", f"/api/v1/chat/conversations/{cid}", {"security_level": "standard"}),
            ("POST", "/api/v1/vault/rotate", None),
        ):
            r = await one.request(method, path, json=body)
            assert r.status_code == 423, (path, r.status_code, r.text)
            assert r.json()["error"] == "locked" and "unlock" in r.json()["message"]
        # Unlock (through the first), and the second resumes.
        assert (await one.post("/api/v1/vault/unlock", json={"passphrase": PASS})).status_code == 200
        r = await two.post("/api/v1/chat/send", json={"message": "more", "conversation_id": cid})
        assert r.status_code == 202, r.text
        more = await settled(one, r.json()["message_id"])
        assert more["status"] == "complete"
        export = await two.get(f"/api/v1/chat/conversations/{cid}/export")
        assert export.status_code == 200 and MARKER in export.text
        rotated = await one.post("/api/v1/vault/rotate")
        assert rotated.status_code == 200 and rotated.json()["generation"] == 2 and rotated.json()["resealed"] > 0
        assert MARKER in (await two.get(f"/api/v1/chat/conversations/{cid}")).text, "still opens after rotation"


async def test_sign_out_closes_the_sessions_window(app: App) -> None:
    token = access_token(app)
    async with client(app, token) as c:
        r = await c.post("/api/v1/auth/sign-in", json={"token": token})
        assert r.status_code == 201, r.text
        session = r.json()["session"]
        headers = {"X-Noteloom-Session": session, "Authorization": ""}
        assert (await c.post("/api/v1/vault/setup", json={"passphrase": PASS}, headers=headers)).status_code == 201
        assert (await c.get("/api/v1/vault", headers=headers)).json()["unlocked"] is True
        assert (await c.get("/api/v1/vault")).json()["unlocked"] is False, "the token has a window of its own"
        with app.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(vault_windows)).scalar() == 1
        assert (await c.post("/api/v1/auth/sign-out", headers=headers)).status_code == 204
        with app.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(vault_windows)).scalar() == 0


async def test_fortress_over_the_api_refuses_a_cloud_model(app: App) -> None:
    models(app, [{"text": "ok"}], loop=True)
    async with running_chat(app), client(app) as c:
        assert (await c.post("/api/v1/vault/setup", json={"passphrase": PASS})).status_code == 201
        r = await c.post("/api/v1/chat/send", json={"message": "hi", "security_level": "fortress",
                                                    "controls": {"model": "cloud:script"}})
        assert r.status_code == 422 and r.json()["field"] == "model" and "not a private model" in r.json()["message"]
        r = await c.post("/api/v1/chat/send", json={"message": "hi", "security_level": "fortress",
                                                    "controls": {"model": "own:script"}})
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])
        cid = r.json()["conversation_id"]
        r = await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"model": "cloud:script"}})
        assert r.status_code == 422 and "fortress" in r.json()["message"]
        models_out = (await c.get("/api/v1/chat/models")).json()["models"]
        assert {m["id"]: m["private"] for m in models_out}["cloud:script"] is False
