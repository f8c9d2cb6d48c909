"""MCP over HTTP at the JSON-RPC level: envelopes, batches, error codes, auth and HTTP rules.

In-process (httpx2's ASGI transport) against the full web app, token middleware included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.mcp import ENABLED_KEY
from noteloom.plugins import hookimpl
from noteloom.tools import ToolDef, ToolError
from noteloom.web.app import create_web_app

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


class BoomPlugin:
    """A third-party plugin: one tool that fails as expected, one that has a bug."""

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        async def expected(ctx: Any, args: dict[str, Any]) -> Any:
            raise ToolError("the widget is busy; try again later")

        async def bug(ctx: Any, args: dict[str, Any]) -> Any:
            raise RuntimeError("secret internal detail /etc/passwd")

        schema = {"type": "object", "properties": {}}
        register(ToolDef(name="busy_widget", description="fails politely", input_schema=schema, handler=expected))
        register(ToolDef(name="buggy_widget", description="has a bug", input_schema=schema, handler=bug))


@pytest.fixture
def boom_app(tmp_path: Path) -> AsyncIterator[App]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "boom")}), plugins=[BoomPlugin()], load_entry_points=False)
    yield a  # type: ignore[misc]
    a.close()


class Rpc:
    """A tiny raw MCP client over the in-process app."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.token = access_token(app)
        self.http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_web_app(app)), base_url="http://127.0.0.1:8765")

    async def post(self, body: Any, *, headers: dict[str, str] | None = None, raw: bytes | None = None,
                   auth: bool = True) -> httpx2.Response:
        h = {**HEADERS, **({"Authorization": f"Bearer {self.token}"} if auth else {}), **(headers or {})}
        content = raw if raw is not None else json.dumps(body).encode()
        return await self.http.post("/mcp", content=content, headers=h)

    async def call(self, method: str, params: dict[str, Any] | None = None, *, rid: Any = 1, **kw: Any) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        r = await self.post(msg, **kw)
        assert r.headers["content-type"] == "application/json"
        return r.json()

    async def tool(self, name: str, arguments: Any = None, **kw: Any) -> Any:
        answer = await self.call("tools/call", {"name": name, "arguments": arguments if arguments is not None else {}}, **kw)
        return answer["result"]


@pytest.fixture
async def rpc(app: App) -> AsyncIterator[Rpc]:
    client = Rpc(app)
    async with client.http:
        yield client


# -- handshake -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_initialize_answers_with_the_clients_version_when_it_is_spoken(rpc: Rpc, version: str) -> None:
    answer = await rpc.call("initialize", {**INIT, "protocolVersion": version})
    result = answer["result"]
    assert answer["id"] == 1 and result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "noteloom" and "tools" in result["capabilities"]
    assert "search_notes" in result["instructions"]


@pytest.mark.anyio
async def test_initialize_offers_the_newest_handshake_version_for_an_unknown_one(rpc: Rpc) -> None:
    result = (await rpc.call("initialize", {**INIT, "protocolVersion": "2099-01-01"}))["result"]
    assert result["protocolVersion"] == "2025-11-25"
    bad = await rpc.call("initialize", {"capabilities": {}})
    assert bad["error"]["code"] == -32602 and "protocolVersion" in bad["error"]["message"]


@pytest.mark.anyio
async def test_notifications_get_202_and_no_body(rpc: Rpc) -> None:
    r = await rpc.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202 and r.content == b""
    r = await rpc.post({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
    assert r.status_code == 202 and r.content == b""


@pytest.mark.anyio
async def test_ping_answers_an_empty_object(rpc: Rpc) -> None:
    assert await rpc.call("ping", rid="p-1") == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


@pytest.mark.anyio
async def test_server_discover_lists_both_protocol_eras(rpc: Rpc) -> None:
    meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28", CLIENT_CAPABILITIES_META_KEY: {}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    result = (await rpc.call("server/discover", {"_meta": meta}, headers=headers))["result"]
    assert result["supportedVersions"] == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert result["resultType"] == "complete" and "tools" in result["capabilities"]
    mismatch = await rpc.call("tools/list", {"_meta": meta}, headers={**headers, "Mcp-Method": "ping"})
    assert mismatch["error"]["code"] == -32020
    gone = await rpc.call("initialize", {**INIT, "_meta": meta}, headers={**headers, "Mcp-Method": "initialize"})
    assert gone["error"]["code"] == -32601


# -- batches -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_batch_is_answered_in_order_for_its_requests_only(rpc: Rpc) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        42,
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    r = await rpc.post(batch)
    assert r.status_code == 200
    answers = r.json()
    assert [a["id"] for a in answers] == [1, "b", None, 3]
    assert answers[0]["result"] == {} and answers[1]["error"]["code"] == -32601
    assert answers[2]["error"]["code"] == -32600 and "tools" in answers[3]["result"]


@pytest.mark.anyio
async def test_a_batch_of_notifications_gets_202_and_an_empty_batch_is_invalid(rpc: Rpc) -> None:
    r = await rpc.post([{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 3)
    assert r.status_code == 202 and r.content == b""
    r = await rpc.post([])
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600 and r.json()["id"] is None


@pytest.mark.anyio
async def test_a_batch_sees_its_own_writes_in_order(rpc: Rpc) -> None:
    rpc.app.registry.set_enabled(rpc.app.workspace, "create_notebook", True)
    r = await rpc.post([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create_notebook", "arguments": {"title": "Fresh"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_notebooks", "arguments": {}}},
    ])
    created, listed = r.json()
    assert created["result"]["structuredContent"]["title"] == "Fresh"
    assert [b["title"] for b in listed["result"]["structuredContent"]["notebooks"]] == ["Fresh"]


# -- JSON-RPC errors ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_malformed_json_is_a_parse_error(rpc: Rpc) -> None:
    r = await rpc.post(None, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert r.status_code == 400
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": r.json()["error"]["message"]}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        "ping",
    ],
)
async def test_an_invalid_request_is_32600(rpc: Rpc, message: Any) -> None:
    r = await rpc.post(message)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600


@pytest.mark.anyio
async def test_an_unknown_method_is_32601(rpc: Rpc) -> None:
    error = (await rpc.call("notes/frobnicate"))["error"]
    assert error["code"] == -32601 and "notes/frobnicate" in error["message"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "params",
    [{}, {"name": 5}, {"name": "read_note", "arguments": [1, 2]}, {"name": "read_note", "arguments": "id=1"}],
)
async def test_malformed_tools_call_params_are_32602(rpc: Rpc, params: dict[str, Any]) -> None:
    assert (await rpc.call("tools/call", params))["error"]["code"] == -32602
    assert (await rpc.call("tools/list", [1]))["error"]["code"] == -32602  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_an_unknown_or_disabled_tool_is_32602_and_a_disabled_one_is_not_listed(rpc: Rpc) -> None:
    unknown = (await rpc.call("tools/call", {"name": "launch_rockets"}))["error"]
    assert unknown["code"] == -32602 and "launch_rockets" in unknown["message"]
    disabled = (await rpc.call("tools/call", {"name": "create_note", "arguments": {"title": "x"}}))["error"]
    assert disabled["code"] == -32602
    rpc.app.registry.set_enabled(rpc.app.workspace, "read_note", False)
    listed = [t["name"] for t in (await rpc.call("tools/list"))["result"]["tools"]]
    assert "read_note" not in listed and "create_note" not in listed and "search_notes" in listed
    assert (await rpc.call("tools/call", {"name": "read_note", "arguments": {"id": "x"}}))["error"]["code"] == -32602
    rpc.app.registry.set_enabled(rpc.app.workspace, "create_note", True)
    assert "create_note" in [t["name"] for t in (await rpc.call("tools/list"))["result"]["tools"]]
    made = await rpc.tool("create_note", {"title": "now allowed"})
    assert made["isError"] is False


@pytest.mark.anyio
async def test_a_tool_error_and_a_bad_argument_are_results_with_is_error(rpc: Rpc) -> None:
    missing = await rpc.tool("read_note", {"id": "0" * 32})
    assert missing["isError"] is True and "does not exist" in missing["content"][0]["text"]
    bad = await rpc.tool("read_note", {"id": "0" * 32, "max_chars": -1})
    assert bad["isError"] is True and "'max_chars'" in bad["content"][0]["text"]
    assert "structuredContent" not in bad


@pytest.mark.anyio
async def test_a_bug_in_a_tool_is_32603_with_the_traceback_only_in_the_log(
    boom_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    client = Rpc(boom_app)
    async with client.http:
        polite = await client.tool("busy_widget")
        assert polite == {"content": [{"type": "text", "text": "the widget is busy; try again later"}], "isError": True}
        with caplog.at_level(logging.ERROR, logger="noteloom.mcp"):
            answer = await client.call("tools/call", {"name": "buggy_widget", "arguments": {}}, rid=9)
    assert answer["id"] == 9 and answer["error"]["code"] == -32603
    assert "secret" not in json.dumps(answer)
    assert "secret internal detail" in caplog.text and "Traceback" in caplog.text


# -- results -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_structured_content_conforms_to_the_output_schema_and_matches_the_text(rpc: Rpc) -> None:
    note = rpc.app.workspace.create_note("Hello", "# A\nbody", source_url="https://example.org")
    tools = {t["name"]: t for t in (await rpc.call("tools/list"))["result"]["tools"]}
    for name, args in [("read_note", {"id": note.id}), ("read_notes", {"ids": [note.id]}),
                       ("list_notebooks", {}), ("list_tags", {}), ("list_trash", {})]:
        result = await rpc.tool(name, args)
        assert result["isError"] is False
        jsonschema.validate(result["structuredContent"], tools[name]["outputSchema"])
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    flagged = await rpc.tool("read_note", {"id": note.id})
    assert flagged["_meta"] == {"noteloom/untrusted": True}


@pytest.mark.anyio
async def test_tools_are_listed_with_annotations_and_schemas(rpc: Rpc) -> None:
    rpc.app.registry.set_enabled(rpc.app.workspace, "delete_note", True)
    tools = {t["name"]: t for t in (await rpc.call("tools/list"))["result"]["tools"]}
    assert tools["read_note"]["annotations"]["readOnlyHint"] is True
    assert tools["delete_note"]["annotations"]["destructiveHint"] is True
    assert tools["read_note"]["inputSchema"]["required"] == ["id"] and "outputSchema" in tools["read_note"]


@pytest.mark.anyio
async def test_answers_take_the_shape_of_the_era_the_request_speaks(rpc: Rpc) -> None:
    legacy = (await rpc.call("tools/list", headers={"MCP-Protocol-Version": "2025-11-25"}))["result"]
    assert set(legacy) == {"tools"}
    meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28", CLIENT_CAPABILITIES_META_KEY: {}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    modern = (await rpc.call("tools/list", {"_meta": meta}, headers=headers))["result"]
    assert modern["resultType"] == "complete" and modern["ttlMs"] == 0 and modern["cacheScope"] == "private"
    assert modern["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "noteloom"
    assert [t["name"] for t in modern["tools"]] == [t["name"] for t in legacy["tools"]]


# -- HTTP rules ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_missing_or_wrong_token_is_401_and_a_token_in_the_query_is_not_a_credential(rpc: Rpc) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert (await rpc.post(ping, auth=False)).status_code == 401
    assert (await rpc.post(ping, auth=False, headers={"Authorization": "Bearer nl_wrong"})).status_code == 401
    # A URL ends up in logs and history: ?token= authenticates nothing (web/auth.py).
    r = await rpc.http.post(f"/mcp?token={rpc.token}", content=json.dumps(ping), headers=HEADERS)
    assert r.status_code == 401
    assert (await rpc.post(ping)).json()["result"] == {}


@pytest.mark.anyio
async def test_mcp_turned_off_is_403(rpc: Rpc) -> None:
    rpc.app.workspace.set_setting(ENABLED_KEY, False)
    r = await rpc.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 403 and "noteloom mcp enable" in r.json()["error"]["message"]
    rpc.app.workspace.set_setting(ENABLED_KEY, True)
    assert (await rpc.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})).status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("origin", "status"),
    [("https://evil.example", 403), ("null", 403), ("http://localhost:6274", 200), ("http://127.0.0.1:8765", 200)],
)
async def test_a_foreign_origin_is_403(rpc: Rpc, origin: str, status: int) -> None:
    r = await rpc.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": origin})
    assert r.status_code == status


@pytest.mark.anyio
async def test_get_is_405_and_says_to_post(rpc: Rpc) -> None:
    r = await rpc.http.get("/mcp", headers={"Authorization": f"Bearer {rpc.token}", "Accept": "text/event-stream"})
    assert r.status_code == 405 and r.headers["allow"] == "POST"


@pytest.mark.anyio
async def test_content_type_accept_and_protocol_header_are_checked(rpc: Rpc) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert (await rpc.post(ping, headers={"Content-Type": "text/plain"})).status_code == 415
    assert (await rpc.post(ping, headers={"Accept": "text/html"})).status_code == 406
    assert (await rpc.post(ping, headers={"Accept": "application/json;q=0"})).status_code == 406
    assert (await rpc.post(ping, headers={"Accept": "*/*"})).status_code == 200
    assert (await rpc.post(ping, headers={"Content-Type": "application/json; charset=utf-8"})).status_code == 200
    bad = await rpc.post(ping, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert bad.status_code == 400 and "1999-01-01" in bad.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_revoked_token_is_refused_at_once_on_sqlite_and_after_a_short_trust_window_on_postgresql(
    any_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noteloom.web import auth

    now = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: now[0])
    rpc = Rpc(any_app)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with rpc.http:
        assert (await rpc.post(ping)).status_code == 200
        assert (await rpc.post(ping)).status_code == 200  # trusted: no query per request
        owner = any_app.workspace.ensure_owner()
        any_app.workspace.create_token(owner.id, revoke_others=True)  # as `noteloom token --new` elsewhere would
        if any_app.engine.dialect.name == "sqlite":  # anyone's commit ends the trust
            assert (await rpc.post(ping)).status_code == 401
        else:
            assert (await rpc.post(ping)).status_code == 200  # still trusted for a moment
            now[0] += auth.TOKEN_CACHE_SECONDS + 0.1
            assert (await rpc.post(ping)).status_code == 401


@pytest.mark.anyio
async def test_a_session_of_calls_on_sqlite_and_postgresql(any_app: App) -> None:
    any_app.registry.set_enabled(any_app.workspace, "create_note", True)
    client = Rpc(any_app)
    async with client.http:
        made = await client.tool("create_note", {"title": "Over MCP", "body": "# Part\nsunflower seeds"})
        assert made["isError"] is False
        found = await client.tool("search_notes", {"query": "sunflower"})
        hit = found["structuredContent"]["results"][0]
        assert hit["id"] == made["structuredContent"]["id"] and hit["section"] == "1"
        section = await client.tool("read_note", {"id": hit["id"], "section": hit["section"]})
        assert section["structuredContent"]["body"] == "# Part\nsunflower seeds"


@pytest.mark.anyio
async def test_a_tool_disabled_by_another_process_is_gone_from_the_next_request(rpc: Rpc) -> None:
    """The server keeps the tool settings it read while nobody commits; a change made
    elsewhere (`noteloom tools disable` runs in a process of its own) shows at once."""
    listed = await rpc.call("tools/list")
    assert "search_notes" in {t["name"] for t in listed["result"]["tools"]}
    other = open_app(load_settings({"NOTELOOM_HOME": str(rpc.app.settings.data_dir)}), load_entry_points=False)
    try:
        other.registry.set_enabled(other.workspace, "search_notes", False)
    finally:
        other.close()
    listed = await rpc.call("tools/list")
    assert "search_notes" not in {t["name"] for t in listed["result"]["tools"]}
    called = await rpc.call("tools/call", {"name": "search_notes", "arguments": {"query": "x"}})
    assert called["error"]["code"] == -32602
