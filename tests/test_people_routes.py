"""People over the JSON API and the web sign-in with a name and password.

`/api/v1/me`, `/api/v1/users` (the owner and admins only: 403 for anyone else; only the owner
changes an admin), a notebook's `/shares` (its owner or an admin; a notebook out of sight
is a 404 like a missing one), a person's own password change with the old one, and the
sign-in page's JSON: name and password or the token, with wrong passwords locked out per
name and per client (the clock is the test's, nothing waits). On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest
from fastapi import FastAPI

from noteloom.accounts import User
from noteloom.app import App, access_token
from noteloom.web.app import create_web_app
from noteloom.web.sessions import PER_CLIENT, PER_NAME, WINDOW_SECONDS, PasswordAttempts

pytestmark = pytest.mark.anyio

ANN_PASSWORD = "ann's long password"
ADA_PASSWORD = "ada's long password"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def web(app: App, clock: Clock | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the full web app with no credential of its own; ``clock`` drives the
    sign-in lockout."""
    asgi: Any = create_web_app(app)
    inner = asgi
    while not isinstance(inner, FastAPI):
        inner = inner.app
    if clock is not None:
        inner.state.password_attempts.clock = clock
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://testserver",
                                 timeout=120) as c:
        yield c


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class People:
    def __init__(self, app: App) -> None:
        ws = app.workspace
        self.owner = ws.ensure_owner()
        self.ada: User = ws.add_person("ada", role="admin", password=ADA_PASSWORD)
        self.ann: User = ws.add_person("ann", password=ANN_PASSWORD)
        self.bob: User = ws.add_person("bob")
        self.tokens = {"owner": access_token(app), **{u.name: ws.create_token(u.id) for u in (self.ada, self.ann, self.bob)}}

    def h(self, name: str) -> dict[str, str]:
        return as_(self.tokens[name])


async def test_me_says_who_is_asking(any_app: App) -> None:
    p = People(any_app)
    async with web(any_app) as c:
        for name, role, password in (("owner", "owner", False), ("ann", "member", True), ("bob", "member", False)):
            me = (await c.get("/api/v1/me", headers=p.h(name))).json()
            assert (me["name"], me["role"], me["has_password"]) == (name, role, password)
        assert (await c.get("/api/v1/me")).status_code == 401


async def test_only_the_owner_and_admins_manage_people(any_app: App) -> None:
    p = People(any_app)
    async with web(any_app) as c:
        listed = (await c.get("/api/v1/users", headers=p.h("ada"))).json()
        assert [(x["name"], x["role"], x["has_password"]) for x in listed] == [
            ("owner", "owner", False), ("ada", "admin", True), ("ann", "member", True), ("bob", "member", False)]
        # A member: 403 on every people route, whatever the body.
        for method, path, body in (("GET", "/api/v1/users", None), ("POST", "/api/v1/users", {"name": "cy"}),
                                   ("PATCH", "/api/v1/users/bob", {"role": "admin"}),
                                   ("DELETE", "/api/v1/users/bob?notebooks=delete", None),
                                   ("DELETE", "/api/v1/users/bob", None)):
            r = await c.request(method, path, json=body, headers=p.h("ann"))
            assert r.status_code == 403 and r.json()["error"] == "forbidden", (method, path, r.text)
        made = await c.post("/api/v1/users", json={"name": "cy", "password": "cy's long password"},
                            headers=p.h("ada"))
        assert made.status_code == 201 and made.json()["role"] == "member" and made.json()["has_password"]
        clash = await c.post("/api/v1/users", json={"name": "cy"}, headers=p.h("ada"))
        assert clash.status_code == 409
        short = await c.post("/api/v1/users", json={"name": "dee", "password": "short"}, headers=p.h("ada"))
        assert short.status_code == 422 and short.json()["field"] == "password"
        owner_role = await c.post("/api/v1/users", json={"name": "dee", "role": "owner"}, headers=p.h("owner"))
        assert owner_role.status_code == 422 and owner_role.json()["field"] == "role"
        # Roles: an admin changes members, only the owner changes an admin; the owner is fixed.
        r = await c.patch(f"/api/v1/users/{p.bob.id}", json={"role": "admin"}, headers=p.h("ada"))
        assert r.status_code == 200 and r.json()["role"] == "admin"
        r = await c.patch("/api/v1/users/bob", json={"role": "member"}, headers=p.h("ada"))
        assert r.status_code == 403 and "only the workspace owner" in r.json()["message"]
        assert (await c.patch("/api/v1/users/bob", json={"role": "member"}, headers=p.h("owner"))).status_code == 200
        assert (await c.patch("/api/v1/users/owner", json={"role": "member"}, headers=p.h("ada"))).status_code == 403
        assert (await c.patch("/api/v1/users/nobody", json={"role": "admin"}, headers=p.h("ada"))).status_code == 404
        empty = await c.patch("/api/v1/users/bob", json={}, headers=p.h("ada"))
        assert empty.status_code == 422 and "send role" in empty.json()["message"]
        # Passwords: set and cleared by an admin; one's own is never changed here.
        r = await c.patch("/api/v1/users/bob", json={"password": "bob's long password"}, headers=p.h("ada"))
        assert r.status_code == 200 and r.json()["has_password"]
        r = await c.patch("/api/v1/users/bob", json={"password": None}, headers=p.h("ada"))
        assert r.status_code == 200 and not r.json()["has_password"]
        own = await c.patch("/api/v1/users/ada", json={"password": "ada's new password"}, headers=p.h("ada"))
        assert own.status_code == 422 and "/api/v1/me/password" in own.json()["message"]


async def test_removing_someone_says_what_becomes_of_their_notebooks(any_app: App) -> None:
    p = People(any_app)
    ws = any_app.workspace
    hers = ws.create_notebook("Ann's", owner_id=p.ann.id)
    ws.create_note("plan", "text", notebook_id=hers.id)
    bobs = ws.create_notebook("Bob's", owner_id=p.bob.id)
    ws.create_note("b", "text", notebook_id=bobs.id)
    async with web(any_app) as c:
        missing = await c.delete("/api/v1/users/ann", headers=p.h("ada"))
        assert missing.status_code == 422 and missing.json()["field"] == "notebooks"
        assert "transfer" in missing.json()["message"] and "delete" in missing.json()["message"]
        to_whom = await c.delete("/api/v1/users/ann?notebooks=transfer", headers=p.h("ada"))
        assert to_whom.status_code == 422 and to_whom.json()["field"] == "transfer_to"
        bad = await c.delete("/api/v1/users/ann?notebooks=keep", headers=p.h("ada"))
        assert bad.status_code == 422 and bad.json()["field"] == "notebooks"
        assert (await c.delete("/api/v1/users/owner?notebooks=delete", headers=p.h("owner"))).status_code == 403
        gone = await c.request("DELETE", f"/api/v1/users/{p.ann.id}", json={"notebooks": "transfer",
                               "transfer_to": "bob"}, headers=p.h("ada"))
        assert gone.status_code == 200, gone.text
        assert gone.json() == {"removed": "ann", "notebooks": 1, "notes_trashed": 0, "transferred_to": "bob"}
        assert ws.notebook_owner(hers.id) == p.bob.id
        assert (await c.get("/api/v1/me", headers=p.h("ann"))).status_code == 401  # her token went with her
        trashed = await c.delete("/api/v1/users/bob?notebooks=delete", headers=p.h("owner"))
        assert trashed.status_code == 200 and trashed.json()["notes_trashed"] == 2
        assert (await c.delete("/api/v1/users/bob?notebooks=delete", headers=p.h("owner"))).status_code == 404
    assert [x.name for x in ws.list_people()] == ["owner", "ada"]


async def test_a_notebook_is_shared_by_its_owner_or_an_admin(any_app: App) -> None:
    p = People(any_app)
    ws = any_app.workspace
    work = ws.create_notebook("Work")  # the owner's
    hers = ws.create_notebook("Ann's", owner_id=p.ann.id)
    async with web(any_app) as c:
        url = f"/api/v1/notebooks/{work.id}/shares"
        assert (await c.get(url, headers=p.h("owner"))).json() == []
        put = await c.put(f"{url}/ann", headers=p.h("owner"))
        assert put.status_code == 200 and (put.json()["user_name"], put.json()["access"]) == ("ann", "read")
        put = await c.put(f"{url}/{p.ann.id}", json={"access": "write"}, headers=p.h("ada"))
        assert put.status_code == 200 and put.json()["access"] == "write"
        assert [s["access"] for s in (await c.get(url, headers=p.h("ada"))).json()] == ["write"]
        # ann sees Work (shared with her) but does not own it: 403. bob cannot see it: a 404
        # that reads exactly like a notebook that does not exist.
        assert (await c.get(url, headers=p.h("ann"))).status_code == 403
        assert (await c.put(f"{url}/bob", headers=p.h("ann"))).status_code == 403
        hidden = await c.get(url, headers=p.h("bob"))
        nothing = await c.get(f"/api/v1/notebooks/{'f' * 32}/shares", headers=p.h("bob"))
        assert hidden.status_code == nothing.status_code == 404
        assert hidden.json()["message"].replace(work.id, "ID") == nothing.json()["message"].replace("f" * 32, "ID")
        # A member shares her own notebook.
        mine = await c.put(f"/api/v1/notebooks/{hers.id}/shares/bob", headers=p.h("ann"))
        assert mine.status_code == 200
        assert ws.shares_of(p.bob.id) == {hers.id: "read"}
        bad = await c.put(f"{url}/bob", json={"access": "admin"}, headers=p.h("owner"))
        assert bad.status_code == 422 and bad.json()["field"] == "access"
        assert (await c.put(f"{url}/nobody", headers=p.h("owner"))).status_code == 404
        assert (await c.put(f"{url}/owner", headers=p.h("owner"))).status_code == 422  # owns it already
        assert (await c.delete(f"{url}/ann", headers=p.h("owner"))).status_code == 204
        again = await c.delete(f"{url}/ann", headers=p.h("owner"))
        assert again.status_code == 404 and "not shared with" in again.json()["message"]
        assert (await c.get(url, headers=p.h("owner"))).json() == []


async def test_a_person_changes_their_own_password_with_the_old_one(any_app: App) -> None:
    p = People(any_app)
    async with web(any_app) as c:
        signed = await c.post("/api/v1/auth/sign-in", json={"name": "ann", "password": ANN_PASSWORD})
        assert signed.status_code == 201
        old_session = {"X-Noteloom-Session": signed.json()["session"]}
        assert (await c.get("/api/v1/me", headers=old_session)).json()["name"] == "ann"
        wrong = await c.patch("/api/v1/me/password", json={"old_password": "not my password",
                                                           "new_password": "ann's new password"}, headers=old_session)
        assert wrong.status_code == 403 and wrong.json()["field"] == "old_password"
        none = await c.patch("/api/v1/me/password", json={"new_password": "ann's new password"}, headers=old_session)
        assert none.status_code == 403
        changed = await c.patch("/api/v1/me/password", json={"old_password": ANN_PASSWORD,
                                                             "new_password": "ann's new password"}, headers=old_session)
        assert changed.status_code == 200, changed.text
        assert (await c.get("/api/v1/me", headers=old_session)).status_code == 401  # password sessions ended
        fresh = {"X-Noteloom-Session": changed.json()["session"]}
        assert (await c.get("/api/v1/me", headers=fresh)).json()["name"] == "ann"
        assert (await c.post("/api/v1/auth/sign-in", json={"name": "ann", "password": ANN_PASSWORD})).status_code == 401
        assert (await c.post("/api/v1/auth/sign-in", json={"name": "ann", "password": "ann's new password"})
                ).status_code == 201
        # Someone with no password yet sets a first one without an old one.
        first = await c.patch("/api/v1/me/password", json={"new_password": "bob's first password"}, headers=p.h("bob"))
        assert first.status_code == 200
        assert (await c.post("/api/v1/auth/sign-in", json={"name": "bob", "password": "bob's first password"})
                ).status_code == 201


# -- signing in -------------------------------------------------------------------------------


async def test_the_sign_in_takes_a_name_and_password_or_the_token(any_app: App) -> None:
    p = People(any_app)
    async with web(any_app) as c:
        r = await c.post("/api/v1/auth/sign-in", json={"name": "ann", "password": ANN_PASSWORD})
        assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
        session = {"X-Noteloom-Session": r.json()["session"]}
        assert (await c.get("/api/v1/me", headers=session)).json()["role"] == "member"
        assert (await c.get("/api/v1/users", headers=session)).status_code == 403  # a member's session
        for body in ({"name": "ann", "password": "wrong password"}, {"name": "nobody", "password": ANN_PASSWORD},
                     {"name": "bob", "password": "no password set"}):
            wrong = await c.post("/api/v1/auth/sign-in", json=body)
            assert wrong.status_code == 401 and wrong.json()["message"] == "the name or the password is wrong"
        for body in ({"name": "ann"}, {"password": ANN_PASSWORD}, {},
                     {"name": "ann", "password": ANN_PASSWORD, "token": p.tokens["owner"]}, {"name": "", "password": "x"}):
            bad = await c.post("/api/v1/auth/sign-in", json=body)
            assert bad.status_code == 422 and bad.json()["message"].startswith(bad.json()["field"]), body
        form = await c.post("/api/v1/auth/sign-in", data={"name": "ann", "password": ANN_PASSWORD})
        assert form.status_code == 422  # what an HTML form can send is not JSON
        foreign = await c.post("/api/v1/auth/sign-in", json={"name": "ann", "password": ANN_PASSWORD},
                               headers={"Origin": "http://testserver:9999"})
        assert foreign.status_code == 403
        token = await c.post("/api/v1/auth/sign-in", json={"token": p.tokens["owner"]})
        assert token.status_code == 201  # the owner's first sign-in link works as before


async def test_wrong_passwords_lock_the_name_and_then_the_client_out_for_a_while(app: App) -> None:
    People(app)
    for i in range(PER_CLIENT):
        app.workspace.add_person(f"p{i}", password=f"password number {i}")
    clock = Clock()
    async with web(app, clock) as c:
        async def sign_in(name: str, password: str) -> httpx.Response:
            return await c.post("/api/v1/auth/sign-in", json={"name": name, "password": password})

        for _ in range(PER_NAME):
            assert (await sign_in("ann", "a wrong password")).status_code == 401
        locked = await sign_in("ann", ANN_PASSWORD)  # even the right one: nothing is checked while locked
        assert locked.status_code == 429 and locked.json()["error"] == "too_many_attempts"
        assert int(locked.headers["retry-after"]) == WINDOW_SECONDS and "15 minutes" in locked.json()["message"]
        assert (await sign_in("ANN ", ANN_PASSWORD)).status_code == 429  # the same name, spelled otherwise
        assert (await sign_in("ada", ADA_PASSWORD)).status_code == 201  # another name is not locked
        clock.now += WINDOW_SECONDS / 2
        assert int((await sign_in("ann", ANN_PASSWORD)).headers["retry-after"]) == WINDOW_SECONDS / 2
        clock.now += WINDOW_SECONDS / 2
        assert (await sign_in("ann", ANN_PASSWORD)).status_code == 201
        # From one client, wrong passwords for many names (one each) lock the client out.
        for i in range(PER_CLIENT):
            assert (await sign_in(f"p{i}", "a wrong password")).status_code == 401
        assert (await sign_in(f"p{PER_CLIENT - 1}", f"password number {PER_CLIENT - 1}")).status_code == 429
        clock.now += WINDOW_SECONDS
        assert (await sign_in(f"p{PER_CLIENT - 1}", f"password number {PER_CLIENT - 1}")).status_code == 201


def test_the_attempt_counter_forgets_old_failures_and_a_success_clears_only_the_name() -> None:
    clock = Clock()
    attempts = PasswordAttempts(per_name=2, per_client=3, window=60, clock=clock)
    attempts.failed("ann", "10.0.0.1")
    clock.now += 30
    attempts.failed("ann", "10.0.0.1")
    assert attempts.wait("ann", "10.0.0.2") == 30  # the name, from anywhere
    assert attempts.wait("bob", "10.0.0.1") is None
    clock.now += 30
    assert attempts.wait("ann", "10.0.0.1") is None  # the first failure is a window old
    attempts.failed("bob", "10.0.0.1")
    assert attempts.wait("cy", "10.0.0.1") is None  # 2 of the client's 3 are still in the window
    attempts.failed("cy", "10.0.0.1")
    assert attempts.wait("dee", "10.0.0.1") == 30
    attempts.succeeded("ann")
    assert attempts.wait("ann", "10.0.0.9") is None and attempts.wait("dee", "10.0.0.1") == 30
