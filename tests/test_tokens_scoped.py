"""Scoped tokens: a name, read-only or a tool allowlist, a notebook scope, an expiry.

The command line round trip (new, list, revoke); expired and revoked tokens refused alike;
MCP over HTTP with the official client under a read-only token, a tool allowlist and a
notebook scope (intersected with the workspace's, never widening it); the JSON API and a
browser session under scoped tokens (tests/test_people_api.py has the API's notebook
filter); and an old database's token keeping full access after the migration. Storage is exercised on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from livesrv import LiveServer, live_server
from noteloom import db
from noteloom.accounts import FULL_ACCESS, TokenScopes, _hash_token
from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.db import now_ms
from noteloom.errors import AuthError, InvalidInput, NotFound
from noteloom.tools import SCOPE_KEY
from noteloom.web.app import create_web_app
from noteloom.workspace import Workspace

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def expire(ws: Workspace, token: str) -> None:
    """Move a token's expiry into the past (no test waits for a clock)."""
    with ws.engine.begin() as c:
        c.execute(db.api_tokens.update().where(db.api_tokens.c.token_hash == _hash_token(token))
                  .values(expires_time=now_ms() - 1))


# -- storage, on SQLite and PostgreSQL ---------------------------------------------------------


def test_a_scoped_token_carries_its_scopes_and_expired_or_revoked_ones_are_refused(any_ws: Workspace) -> None:
    owner = any_ws.ensure_owner()
    limits = TokenScopes(read_only=True, notebooks=("Work/*",))
    token = any_ws.create_token(owner.id, name="claude-desktop", scopes=limits, expires_time=now_ms() + 86_400_000)
    grant = any_ws.check_token(token)
    assert grant.user == owner and grant.scopes == limits and grant.expires_time is not None
    full = any_ws.create_token(owner.id, name="scripts")
    assert any_ws.check_token(full).scopes == FULL_ACCESS
    names = [i.name for i in any_ws.list_tokens()]
    assert names == ["claude-desktop", "scripts"]
    with pytest.raises(InvalidInput, match="already named 'scripts'"):
        any_ws.create_token(owner.id, name="scripts")
    with pytest.raises(InvalidInput, match="in the past"):
        any_ws.create_token(owner.id, name="old", expires_time=now_ms() - 1000)

    expire(any_ws, token)
    with pytest.raises(AuthError, match="expired"):
        any_ws.check_token(token)
    with pytest.raises(AuthError):
        any_ws.start_session(token)
    assert [i.name for i in any_ws.list_tokens()] == ["scripts"]

    revoked = any_ws.revoke_token("scripts")
    assert revoked.name == "scripts"
    with pytest.raises(AuthError):
        any_ws.verify_token(full)
    with pytest.raises(NotFound, match="no live token is named 'scripts'"):
        any_ws.revoke_token("scripts")


def test_a_browser_session_carries_its_tokens_scopes_and_ends_when_the_token_expires(any_ws: Workspace) -> None:
    owner = any_ws.ensure_owner()
    limits = TokenScopes(read_only=True)
    token = any_ws.create_token(owner.id, name="reader", scopes=limits, expires_time=now_ms() + 3_600_000)
    session, started = any_ws.start_session(token)
    assert started.scopes == limits and started.valid_until <= now_ms() + 3_600_000
    assert any_ws.verify_session(session).scopes == limits
    expire(any_ws, token)
    with pytest.raises(AuthError):
        any_ws.verify_session(session)


def _alembic(engine: sa.Engine, target: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, target)


def test_a_token_from_before_scopes_keeps_full_access_after_the_migration(tmp_path: Path, database_url: str) -> None:
    engine = db.create_db_engine(database_url)
    try:
        _alembic(engine, "0015_chat_attachments")
        with engine.begin() as c:
            c.execute(sa.text("INSERT INTO users (id, name, is_owner, created_time) VALUES ('u1', 'owner', :t, 1)"),
                      {"t": True})
            c.execute(sa.text("INSERT INTO api_tokens (id, user_id, token_hash, created_time) "
                              "VALUES ('t1', 'u1', :h, 1)"), {"h": _hash_token("nl_old")})
    finally:
        engine.dispose()
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h"), "NOTELOOM_DATABASE_URL": database_url}),
                 load_entry_points=False)
    try:
        grant = a.workspace.check_token("nl_old")
        assert grant.user.id == "u1" and grant.scopes == FULL_ACCESS and grant.expires_time is None
        [info] = a.workspace.list_tokens()
        assert (info.id, info.name, info.scopes) == ("t1", "default", FULL_ACCESS)
    finally:
        a.close()


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "cli-home"))
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(cli, list(args))
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert (result.exit_code == 0) == ok, output
        return output

    invoke("init")
    yield invoke


def test_the_cli_makes_lists_and_revokes_scoped_tokens(run: Any, tmp_path: Path) -> None:
    default = run("token").strip()
    made = run("token", "--new", "--name", "claude-desktop", "--read-only", "--scope", "Work/*",
               "--expires", "30d")
    token = next(line for line in made.splitlines() if line.startswith("nl_"))
    assert "shown once" in made and token != default
    listed = run("token", "list")
    line = next(x for x in listed.splitlines() if x.startswith("claude-desktop"))
    assert "read-only" in line and "Work/*" in line and "expires never" not in line
    assert token not in listed and default not in listed
    as_json = json.loads(run("token", "list", "--json"))
    mine = next(i for i in as_json if i["name"] == "claude-desktop")
    assert mine["scopes"] == {"read_only": True, "tools": None, "notebooks": ["Work/*"]}
    run("token", "--new", "--name", "search-only", "--tools", "search_notes,read_note", "--expires", "2099-01-01")

    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "cli-home")}), load_entry_points=False)
    try:
        assert a.workspace.check_token(token).scopes.notebooks == ("Work/*",)
    finally:
        a.close()
    elsewhere = tmp_path / "elsewhere"
    run("init", "--home", str(elsewhere))
    assert "claude-desktop" not in run("token", "--home", str(elsewhere), "list")
    assert "revoked claude-desktop" in run("token", "revoke", "claude-desktop")
    assert "claude-desktop" not in run("token", "list")
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "cli-home")}), load_entry_points=False)
    try:
        with pytest.raises(AuthError):
            a.workspace.check_token(token)
        assert a.workspace.verify_token(default).name == "owner"  # the file's token is untouched
    finally:
        a.close()
    # Plain `token` still prints the same full-access token.
    assert run("token").strip() == default


def test_the_cli_refuses_bad_token_options(run: Any) -> None:
    assert "add --new" in run("token", "--read-only", ok=False)
    assert "--tools" in run("token", "--new", "--tools", "no_such_tool", ok=False)
    assert "--expires" in run("token", "--new", "--name", "x", "--expires", "soon", ok=False)
    assert "no live token is named 'nope'" in run("token", "revoke", "nope", ok=False)
    run("token", "--new", "--name", "twice")
    assert "already named 'twice'" in run("token", "--new", "--name", "twice", ok=False)


# -- MCP over HTTP -----------------------------------------------------------------------------


@pytest.fixture
def live(app: App) -> Iterator[LiveServer]:
    with live_server(app) as srv:
        yield srv


def official(srv: LiveServer, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(120))
    return Client(streamable_http_client(srv.mcp_url, http_client=http), mode="legacy")  # type: ignore[arg-type]


def scoped(app: App, name: str, **kw: Any) -> str:
    owner = app.workspace.ensure_owner()
    return app.workspace.create_token(owner.id, name=name, scopes=TokenScopes(**kw))


@pytest.mark.anyio
async def test_a_read_only_token_sees_only_read_tools_and_is_refused_a_write(app: App, live: LiveServer) -> None:
    app.registry.set_enabled(app.workspace, "create_note", True)
    token = scoped(app, "reader", read_only=True)
    with anyio.fail_after(60):
        async with official(live, live.token) as client:  # the full token sees the write tool
            assert "create_note" in {t.name for t in (await client.list_tools()).tools}
        async with official(live, token) as client:
            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert "create_note" not in names and "search_notes" in names
            assert all(t.annotations is not None and t.annotations.read_only_hint for t in tools)
            with pytest.raises(MCPError) as info:
                await client.call_tool("create_note", {"title": "not allowed"})
            assert info.value.code == -32602 and "Unknown tool: 'create_note'" in info.value.message
    assert app.workspace.count_notes() == 0


@pytest.mark.anyio
async def test_a_tool_allowlist_lists_and_calls_only_those_tools(app: App, live: LiveServer) -> None:
    token = scoped(app, "two", tools=frozenset({"search_notes", "read_note", "create_note"}))
    with anyio.fail_after(60):
        async with official(live, token) as client:
            # create_note is allowed by the token but off in the workspace: still absent.
            assert {t.name for t in (await client.list_tools()).tools} == {"search_notes", "read_note"}
            with pytest.raises(MCPError) as info:
                await client.call_tool("list_notebooks", {})
            assert info.value.code == -32602
            found = await client.call_tool("search_notes", {"query": "anything"})
            assert found.is_error is False


def _books(app: App) -> dict[str, str]:
    ws = app.workspace
    work = ws.create_notebook("Work")
    home = ws.create_notebook("Home")
    ws.create_notebook("Private")
    return {
        "work": ws.create_note("Plan apples", "apples in Work", work.id).id,
        "home": ws.create_note("Shop apples", "apples at Home", home.id).id,
        "private": ws.create_note("Diary apples", "apples in Private",
                                  next(b.id for b in ws.list_notebooks() if b.title == "Private")).id,
    }


@pytest.mark.anyio
async def test_a_notebook_scoped_token_searches_and_reads_only_in_scope(app: App, live: LiveServer) -> None:
    ids = _books(app)
    token = scoped(app, "work", notebooks=("Work",))
    with anyio.fail_after(60):
        async with official(live, token) as client:
            hits = (await client.call_tool("search_notes", {"query": "apples", "mode": "keyword"})).structured_content
            assert hits is not None and [h["id"] for h in hits["results"]] == [ids["work"]]
            books = await client.call_tool("list_notebooks", {})
            assert "Private" not in books.content[0].text and "Work" in books.content[0].text  # type: ignore[union-attr]
            inside = await client.call_tool("read_note", {"id": ids["work"]})
            assert inside.is_error is False
            outside = await client.call_tool("read_note", {"id": ids["private"]})
            missing = await client.call_tool("read_note", {"id": "f" * 32})
            assert outside.is_error and missing.is_error
            assert outside.content[0].text.replace(ids["private"], "ID") == (  # type: ignore[union-attr]
                missing.content[0].text.replace("f" * 32, "ID"))  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_tokens_notebook_scope_narrows_the_workspace_scope_and_never_widens_it(app: App) -> None:
    ids = _books(app)
    home_only = scoped(app, "home", notebooks=("Home",))
    work_only = scoped(app, "work", notebooks=("Work",))
    app.workspace.set_setting(SCOPE_KEY, ["Work", "Home"])
    async with _asgi(app) as http:
        assert await _search_ids(http, home_only) == [ids["home"]]
        app.workspace.set_setting(SCOPE_KEY, ["Home"])
        assert await _search_ids(http, work_only) == []  # Work is outside the workspace's scope
        assert await _search_ids(http, access_token(app)) == [ids["home"]]


@pytest.mark.anyio
async def test_every_tool_that_is_not_a_read_is_absent_for_a_read_only_token(app: App) -> None:
    """Generated from the registry: turn every tool on, then a read-only token must list
    exactly the tools whose effect is read."""
    for tool in app.registry.all():
        app.registry.set_enabled(app.workspace, tool.name, True)
    token = scoped(app, "reader", read_only=True)
    async with _asgi(app) as http:
        listed = {t["name"] for t in (await _rpc(http, token, "tools/list"))["result"]["tools"]}
        full = {t["name"] for t in (await _rpc(http, access_token(app), "tools/list"))["result"]["tools"]}
    writes = {t.name for t in app.registry.all() if t.effect != "read"}
    reads = {t.name for t in app.registry.all() if t.effect == "read"}
    assert writes and writes <= full  # the check has something to find
    assert listed == reads
    # A browser session started from the token carries the same limits to /mcp.
    async with _asgi(app) as http:
        signed = await http.post("/api/v1/auth/sign-in", json={"token": token})
        session = {"X-Noteloom-Session": signed.json()["session"]}
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        r = await http.post("/mcp", content=json.dumps(msg).encode(), headers={**MCP_HEADERS, **session})
        assert {t["name"] for t in r.json()["result"]["tools"]} == reads


# -- the JSON API and the pages ----------------------------------------------------------------


@pytest.mark.anyio
async def test_the_json_api_under_scoped_expired_and_revoked_tokens(app: App) -> None:
    ids = _books(app)
    reader = scoped(app, "reader", read_only=True)
    narrow = scoped(app, "narrow", notebooks=("Work",))
    tools_only = scoped(app, "tools", tools=frozenset({"search_notes"}))
    async with _asgi(app) as http:
        ok = await http.get(f"/api/v1/notes/{ids['private']}", headers=_bearer(reader))
        assert ok.status_code == 200
        wrote = await http.post("/api/v1/notes", json={"title": "x"}, headers=_bearer(reader))
        assert wrote.status_code == 403 and "read-only" in wrote.json()["message"]
        patched = await http.patch(f"/api/v1/notes/{ids['work']}", json={"title": "y"}, headers=_bearer(reader))
        assert patched.status_code == 403
        preview = await http.post("/api/v1/notes/preview", json={"markdown": "# Hi"}, headers=_bearer(reader))
        assert preview.status_code == 200  # POSTed, but only reads
        assert app.workspace.get_note(ids["work"]).title == "Plan apples"
        # A tool allowlist is for MCP only: API routes are not tools.
        refused = await http.get("/api/v1/notes", headers=_bearer(tools_only))
        assert refused.status_code == 403 and "/mcp" in refused.json()["message"]
        # A notebook scope filters the notes API (it was refused before the API acted as the
        # person asking) and still keeps the token off the routes that cannot keep to it.
        listed = await http.get("/api/v1/notes", headers=_bearer(narrow))
        assert listed.status_code == 200 and [n["id"] for n in listed.json()["notes"]] == [ids["work"]]
        chat = await http.get("/api/v1/chat/conversations", headers=_bearer(narrow))
        assert chat.status_code == 403 and "--scope" in chat.json()["message"]
        # A browser session started from the read-only token reads, and cannot write.
        signed = await http.post("/api/v1/auth/sign-in", json={"token": reader})
        session = {"X-Noteloom-Session": signed.json()["session"]}
        assert (await http.get("/api/v1/notes", headers=session)).status_code == 200
        assert (await http.post("/api/v1/notes", json={"title": "x"}, headers=session)).status_code == 403
        assert (await http.post("/api/v1/auth/sign-out", headers=session)).status_code == 204
        # Expired and revoked: 401, like an unknown token.
        expire(app.workspace, reader)
        app.workspace.revoke_token("narrow")
        for token in (reader, narrow, "nl_unknown"):
            answer = await http.get("/api/v1/notes", headers=_bearer(token))
            assert answer.status_code == 401
        assert (await http.get("/api/v1/notes", headers=_bearer(access_token(app)))).status_code == 200


# -- helpers -----------------------------------------------------------------------------------


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _asgi(app: App) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(app)),
                              base_url="http://127.0.0.1:8765")


async def _rpc(http: httpx2.AsyncClient, token: str, method: str, params: dict[str, Any] | None = None) -> Any:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    r = await http.post("/mcp", content=json.dumps(msg).encode(), headers={**MCP_HEADERS, **_bearer(token)})
    assert r.status_code == 200, r.text
    return r.json()


async def _search_ids(http: httpx2.AsyncClient, token: str) -> list[str]:
    answer = await _rpc(http, token, "tools/call",
                        {"name": "search_notes", "arguments": {"query": "apples", "mode": "keyword"}})
    result = answer["result"]
    assert result["isError"] is False, result
    return sorted(h["id"] for h in result["structuredContent"]["results"])

