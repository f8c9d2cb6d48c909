"""Web credentials: a header, never a cookie or a URL; browser sessions that end; data-free
public routes; the security headers; links only to http, https and mailto."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from noteloom import db
from noteloom.accounts import SESSION_IDLE_MS, SESSION_MAX_MS
from noteloom.app import App, access_token
from noteloom.db import now_ms
from noteloom.web.app import create_web_app
from noteloom.web.auth import is_public
from noteloom.web.headers import CONTENT_SECURITY_POLICY
from noteloom.web.render import render_markdown, safe_link

pytestmark = pytest.mark.anyio
SECRET = "Zebra-Secret-4711"
HEX = "0123456789abcdef" * 2


@asynccontextmanager
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


async def sign_in(c: httpx.AsyncClient, token: str) -> dict[str, str]:
    r = await c.post("/api/v1/auth/sign-in", json={"token": token})
    assert r.status_code == 201, r.text
    assert r.headers["cache-control"] == "no-store"
    return {"X-Noteloom-Session": r.json()["session"]}


def fastapi_of(web: Any) -> FastAPI:
    """The FastAPI app inside the middlewares."""
    while not isinstance(web, FastAPI):
        web = web.app
    return web


def concrete(path: str) -> str:
    """A route's path with a well-formed id for every parameter."""
    return re.sub(r"\{[^}]+\}", HEX, path)


def every_request(app: App) -> list[tuple[str, str]]:
    """(method, path) for every route and method of the app's route table."""
    out: list[tuple[str, str]] = []
    for route in iter_route_contexts(fastapi_of(create_web_app(app)).routes):
        if isinstance(route.original_route, Mount):
            out.append(("GET", route.path + "/noteloom.css"))
            out.append(("GET", route.path + "/vendor/swagger-ui/swagger-ui.css"))
        else:
            assert route.path, route
            for method in sorted(route.methods or {"GET"}):
                if method != "HEAD":
                    out.append((method, concrete(route.path)))
    return out


def _seed(app: App) -> str:
    ws = app.workspace
    book = ws.create_notebook(f"{SECRET} notebook")
    note = ws.create_note(f"{SECRET} title", f"{SECRET} body", book.id, tags=["zebra-tag"])
    return note.id


async def test_every_route_with_data_answers_401_without_a_header_credential(app: App) -> None:
    """Route by route: no credential, the real token as the old cookie, the token in the
    query string (logs and history keep URLs), a wrong token: 401 unless public; the
    public routes hold no private data and set no cookie."""
    _seed(app)
    token = access_token(app)
    requests = every_request(app)
    assert len(requests) > 30  # the table really was read
    public = [(m, p) for m, p in requests if is_public(p)]
    assert {p for _, p in public} >= {"/health", "/", "/chat", "/api/docs", f"/notes/{HEX}", f"/notebooks/{HEX}",
                                      "/static/noteloom.css", "/api/v1/auth/sign-in"}
    async with client(app) as c:
        session = await sign_in(c, token)
        ways: list[dict[str, Any]] = [
            {},
            {"headers": {"Cookie": f"noteloom_token={token}"}},
            {"headers": {"Cookie": f"noteloom_session={session['X-Noteloom-Session']}"}},
            {"params": {"token": token}},
            {"headers": {"Authorization": "Bearer nl_wrong"}},
            {"headers": {"X-Noteloom-Session": "nls_wrong"}},
        ]
        for method, path in requests:
            for way in ways:
                r = await c.request(method, path, json={} if method != "GET" else None, **way)
                assert r.status_code < 500, (method, path, r.text)
                assert SECRET not in r.text and token not in r.text, (method, path)
                assert "noteloom_token=" + token not in r.headers.get("set-cookie", "")
                if not is_public(path):
                    assert r.status_code == 401, (method, path, way, r.status_code)
                    assert "token" in r.json()["message"] or "sign in" in r.json()["message"]


async def test_the_api_token_and_a_session_header_both_reach_the_data(app: App) -> None:
    note_id = _seed(app)
    token = access_token(app)
    async with client(app) as c:
        session = await sign_in(c, token)
        for auth in ({"Authorization": f"Bearer {token}"}, session):
            r = await c.get(f"/api/v1/notes/{note_id}/rendered", headers=auth)
            assert r.status_code == 200 and r.json()["title"] == f"{SECRET} title"
            assert "set-cookie" not in r.headers


async def test_a_session_ends_with_sign_out_with_token_new_and_when_it_expires(app: App) -> None:
    token = access_token(app)
    ws = app.workspace
    async with client(app) as c:
        # sign-out
        session = await sign_in(c, token)
        assert (await c.get("/api/v1/notes", headers=session)).status_code == 200
        assert (await c.post("/api/v1/auth/sign-out", headers=session)).status_code == 204
        gone = await c.get("/api/v1/notes", headers=session)
        assert gone.status_code == 401 and "sign in again" in gone.json()["message"]

        # `noteloom token --new` revokes the token the session was made with
        session = await sign_in(c, token)
        assert (await c.get("/api/v1/notes", headers=session)).status_code == 200
        new_token = access_token(app, rotate=True)
        assert (await c.get("/api/v1/notes", headers=session)).status_code == 401
        assert (await c.post("/api/v1/auth/sign-in", json={"token": token})).status_code == 401

        # idle for 12 hours, then 7 days after sign-in however busy
        for column, age in (("last_used_time", SESSION_IDLE_MS), ("created_time", SESSION_MAX_MS)):
            session = await sign_in(c, new_token)
            assert (await c.get("/api/v1/notes", headers=session)).status_code == 200
            with ws.write() as conn:
                values: dict[str, int] = {"last_used_time": now_ms() - (age if column == "last_used_time" else 1000)}
                if column == "created_time":
                    values["expires_time"] = now_ms() - 1
                conn.execute(db.web_sessions.update().values(**values))
            assert (await c.get("/api/v1/notes", headers=session)).status_code == 401, column


async def test_only_hashes_of_sessions_are_stored_and_old_rows_are_cleared(app: App) -> None:
    token = access_token(app)
    async with client(app) as c:
        first = (await sign_in(c, token))["X-Noteloom-Session"]
        await c.post("/api/v1/auth/sign-out", headers={"X-Noteloom-Session": first})
        second = (await sign_in(c, token))["X-Noteloom-Session"]
    with app.workspace.read() as conn:
        rows = conn.execute(sa.select(db.web_sessions)).all()
    assert len(rows) == 1  # the signed-out one went when the next was made
    assert all(first not in str(tuple(r)) and second not in str(tuple(r)) for r in rows)


async def test_sign_in_cannot_be_forged_from_another_page(app: App) -> None:
    token = access_token(app)
    async with client(app) as c:
        # another server on the same host (a different port) is another origin
        r = await c.post("/api/v1/auth/sign-in", json={"token": token}, headers={"Origin": "http://testserver:9999"})
        assert r.status_code == 403 and "another site" in r.json()["message"]
        # what an HTML form can send is not JSON
        form = await c.post("/api/v1/auth/sign-in", data={"token": token})
        assert form.status_code == 422
        text = await c.post("/api/v1/auth/sign-in", content=f'{{"token": "{token}"}}',
                            headers={"Content-Type": "text/plain"})
        assert text.status_code == 422
        wrong = await c.post("/api/v1/auth/sign-in", json={"token": "nl_wrong"})
        assert wrong.status_code == 401 and "noteloom token" in wrong.json()["message"]
        ok = await c.post("/api/v1/auth/sign-in", json={"token": token}, headers={"Origin": "http://testserver"})
        assert ok.status_code == 201 and ok.json()["session"].startswith("nls_")


async def test_html_gets_the_csp_and_every_response_no_referrer_and_nosniff(app: App) -> None:
    async with client(app) as c:
        for path in ["/", "/chat", "/api/docs", f"/notes/{HEX}", f"/notebooks/{HEX}"]:
            r = await c.get(path)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert "<script>" not in r.text and " on" + "click=" not in r.text and "style=" not in r.text
            assert "cdn" not in r.text.lower() and "http" + "s://" not in r.text
        for path in ["/health", "/static/session.js", "/api/v1/notes"]:
            r = await c.get(path)
            assert "content-security-policy" not in r.headers
        for path in ["/", "/health", "/static/session.js", "/api/v1/notes"]:
            r = await c.get(path)
            assert r.headers["referrer-policy"] == "no-referrer"
            assert r.headers["x-content-type-options"] == "nosniff"
    for directive in ("default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'",
                      "frame-ancestors 'none'"):
        assert directive in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY.split("script-src", 1)[1].split(";", 1)[0]


async def test_a_browser_holding_the_old_cookie_is_told_to_drop_it(app: App) -> None:
    async with client(app) as c:
        r = await c.get("/", headers={"Cookie": "noteloom_token=nl_old"})
        assert "noteloom_token=; Max-Age=0" in r.headers["set-cookie"]
        assert "set-cookie" not in (await c.get("/")).headers


UNSAFE_URLS = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "  javascript:alert(1)", "\x01javascript:alert(1)",
               "java\tscript:alert(1)", "java\nscript:alert(1)", "data:text/html,<script>alert(1)</script>",
               "vbscript:msgbox(1)", "VBScript:msgbox(1)", "/api/v1/notes", "//evil.example/x", "https:", ""]


async def test_a_source_url_becomes_a_link_only_when_http_https_or_mailto(app: App) -> None:
    ws = app.workspace
    token = access_token(app)
    async with client(app) as c:
        auth = {"Authorization": f"Bearer {token}"}
        for url in UNSAFE_URLS:
            note = ws.create_note("clipped", "x", source_url=url)
            r = await c.get(f"/api/v1/notes/{note.id}/rendered", headers=auth)
            assert r.status_code == 200 and r.json()["source_url"] is None, url
        for url in ["https://example.com/a?b=1", "HTTP://example.com/", "mailto:me@example.com"]:
            note = ws.create_note("clipped", "x", source_url=url)
            assert (await c.get(f"/api/v1/notes/{note.id}/rendered", headers=auth)).json()["source_url"] == url


def _has_scheme(href: str) -> bool:
    """Whether a browser reads ``href`` as absolute (else it stays on this server)."""
    cleaned = re.sub(r"[\t\n\r]", "", href).strip("".join(chr(c) for c in range(0x21)))
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", cleaned) is not None


def test_the_markdown_renderer_links_only_http_https_and_mailto() -> None:
    for url in UNSAFE_URLS[:9]:
        md_url = url.replace("\n", "%0A")
        html = render_markdown(f'[a]({md_url}) <a href="{url}">b</a> <img src="{url}">')
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
        assert all(safe_link(h) or not _has_scheme(h) for h in hrefs), (url, html)
    assert safe_link("javascript:alert(1)") is None and safe_link(" https://ok.example ") == "https://ok.example"


async def test_dates_stored_out_of_range_do_not_break_the_json_the_pages_read(app: App) -> None:
    ws = app.workspace
    token = access_token(app)
    note = ws.create_note("far future", "x", is_todo=True)
    with ws.write() as conn:
        conn.execute(db.notes.update().where(db.notes.c.id == note.id)
                     .values(updated_time=253402300800000, todo_due=-10**15))
    async with client(app) as c:
        auth = {"Authorization": f"Bearer {token}"}
        listed = await c.get("/api/v1/notes", headers=auth)
        assert listed.status_code == 200
        assert {"id": note.id, "updated_time": 253402300800000}.items() <= listed.json()["notes"][0].items()
        page = await c.get(f"/api/v1/notes/{note.id}/rendered", headers=auth)
        assert page.status_code == 200 and page.json()["todo_due"] == -10**15


async def test_sessions_live_in_the_database_on_sqlite_and_postgresql(any_app: App) -> None:
    """Rows, not process memory: every `serve --workers` process honours a sign-in and a
    sign-out made in another, on either engine."""
    from noteloom.errors import AuthError

    ws = any_app.workspace
    token = access_token(any_app)
    session, made = ws.start_session(token)
    assert ws.verify_session(session).user == made.user
    ws.end_session(session)
    with pytest.raises(AuthError, match="sign in again"):
        ws.verify_session(session)
    other, _ = ws.start_session(token)
    owner = ws.owner()
    assert owner is not None
    ws.create_token(owner.id, revoke_others=True)  # what `noteloom token --new` does
    with pytest.raises(AuthError, match="sign in again"):
        ws.verify_session(other)
    with pytest.raises(AuthError, match="wrong or revoked"):
        ws.start_session(token)
