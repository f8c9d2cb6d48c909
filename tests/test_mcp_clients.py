"""MCP with the clients users have: the official SDK client (HTTP, both connect modes, and
stdio), the fastmcp client and the MCP Inspector CLI, against a real server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest
from fastmcp import Client as FastClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from livesrv import LiveServer, live_server, live_server_process
from noteloom.app import App
from noteloom.mcp import ENABLED_KEY
from noteloom.workspace import Note

ROOT = Path(__file__).resolve().parents[1]
INSPECTOR = ROOT / ".peers" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
BODY = "Intro\n\n# Setup\nInstall the thing.\n\n## Linux\napt-get install thing\n\n# Usage\nRun it.\n"


@pytest.fixture
def note(app: App) -> Note:
    return app.workspace.create_note("Manual", BODY, tags=["docs"])


@pytest.fixture
def live(app: App) -> Iterator[LiveServer]:
    with live_server(app) as srv:
        yield srv


def official_http(srv: LiveServer, mode: str) -> Client:
    # A bound for a hung server only: httpx's 5 s default is exceeded on a loaded machine.
    http = httpx2.AsyncClient(headers=srv.auth, timeout=httpx2.Timeout(120))
    return Client(streamable_http_client(srv.mcp_url, http_client=http), mode=mode)  # type: ignore[arg-type]


def stdio_params(app: App) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "noteloom", "mcp"], env={"NOTELOOM_HOME": str(app.settings.data_dir)}
    )


async def exercise(client: Client, note: Note, app: App) -> None:
    """What every client must see: enabled tools only, outputs as declared, both error channels."""
    listed = await client.list_tools()
    names = {t.name for t in listed.tools}
    assert {"search_notes", "read_note", "read_notes", "list_notebooks", "list_tags"} <= names
    assert "create_note" not in names and "delete_note" not in names
    schemas = {t.name: t.output_schema for t in listed.tools}
    outline = await client.call_tool("read_note", {"id": note.id, "outline": True})
    assert outline.is_error is False
    assert outline.structured_content is not None
    jsonschema.validate(outline.structured_content, schemas["read_note"])
    assert outline.structured_content["body"] == "path\tchars\theading\n0\t7\n1\t60\tSetup\n1.1\t32\tLinux\n2\t16\tUsage"
    assert json.loads(outline.content[0].text) == outline.structured_content  # type: ignore[union-attr]
    section = await client.call_tool("read_note", {"id": note.id, "section": "Linux"})
    assert section.structured_content["body"] == "## Linux\napt-get install thing\n\n"  # type: ignore[index]
    missing = await client.call_tool("read_note", {"id": "0" * 32})
    assert missing.is_error is True and "does not exist" in missing.content[0].text  # type: ignore[union-attr]
    with pytest.raises(MCPError) as info:
        await client.call_tool("create_note", {"title": "not allowed"})
    assert info.value.code == -32602


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_client_over_http(app: App, live: LiveServer, note: Note, mode: str) -> None:
    with anyio.fail_after(30):
        async with official_http(live, mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await exercise(client, note, app)
            if mode == "legacy":
                with pytest.warns(Warning, match="ping is removed"):  # 2026-07-28 dropped ping
                    await client.send_ping()


@pytest.mark.anyio
async def test_the_official_client_over_stdio(app: App, note: Note, tmp_path: Path) -> None:
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(60):
        async with Client(stdio_client(stdio_params(app), errlog=errlog), mode="legacy") as client:  # type: ignore[arg-type]
            await exercise(client, note, app)
            app.registry.set_enabled(app.workspace, "create_note", True)
            made = await client.call_tool("create_note", {"title": "From stdio", "notebook": "Notes"})
            assert made.is_error is False
    assert app.workspace.get_note(made.structured_content["id"]).title == "From stdio"  # type: ignore[index]


@pytest.mark.anyio
async def test_the_fastmcp_client(app: App, live: LiveServer, note: Note) -> None:
    with anyio.fail_after(30):
        async with FastClient(live.mcp_url, auth=live.token) as client:
            names = {t.name for t in await client.list_tools()}
            assert "read_notes" in names and "update_note" not in names
            result = await client.call_tool("read_notes", {"ids": [note.id, "nope"]})
            assert result.structured_content["not_found"] == ["nope"]  # type: ignore[index]
            failed = await client.call_tool("read_note", {"id": note.id, "section": "Nowhere"}, raise_on_error=False)
            assert failed.is_error and "No section 'Nowhere'" in failed.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_client_without_the_token_is_turned_away(live: LiveServer) -> None:
    async with httpx2.AsyncClient() as http:
        r = await http.post(live.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                            headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 401


@pytest.mark.anyio
async def test_mcp_turned_off_is_refused_over_http_and_stdio(app: App, live: LiveServer) -> None:
    app.workspace.set_setting(ENABLED_KEY, False)
    with anyio.fail_after(30):
        with pytest.raises(Exception):  # noqa: B017 - the client wraps the 403 in its own error type
            async with official_http(live, "legacy") as client:
                await client.list_tools()
    proc = subprocess.run(
        [sys.executable, "-m", "noteloom", "mcp"],
        input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n",
        capture_output=True, text=True, timeout=60, env={**os.environ, "NOTELOOM_HOME": str(app.settings.data_dir)},
    )
    answer = json.loads(proc.stdout)
    assert answer["error"]["code"] == -32600 and "noteloom mcp enable" in answer["error"]["message"]


def run_stdio_lines(app: App, lines: list[str]) -> tuple[list[Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "noteloom", "mcp", "--verbose"],
        input="".join(line + "\n" for line in lines),
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "NOTELOOM_HOME": str(app.settings.data_dir)},
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_stdio_answers_batches_and_keeps_stdout_for_the_protocol(app: App, note: Note) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read_note", "arguments": {"id": note.id, "section": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    answers, stderr = run_stdio_lines(app, [json.dumps(init), json.dumps(batch), "{not json", json.dumps([])])
    by_kind = {("batch" if isinstance(a, list) else a.get("id", "?")): a for a in answers}
    assert by_kind[0]["result"]["protocolVersion"] == "2024-11-05"
    read, ping = by_kind["batch"]
    assert read["id"] == 1 and read["result"]["structuredContent"]["section"] == {"path": "1", "heading": "Setup"}
    assert ping == {"jsonrpc": "2.0", "id": 2, "result": {}}
    errors = sorted(a["error"]["code"] for a in answers if isinstance(a, dict) and "error" in a)
    assert errors == [-32700, -32600]
    assert len(answers) == 4  # the notification got nothing
    assert "tools/call" in stderr and "ping" in stderr  # --verbose logs each request, on stderr


# -- the MCP Inspector CLI ------------------------------------------------------------------

needs_inspector = pytest.mark.skipif(
    not INSPECTOR.exists(), reason="MCP Inspector not installed; `bash scripts/install-inspector.sh` (make test does it)"
)


def inspector(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    scratch = tempfile.mkdtemp(prefix="inspector-")
    full_env = {**os.environ, "HOME": scratch, "MCP_CATALOG_PATH": f"{scratch}/catalog.json",
                "MCP_CLIENT_CONFIG_PATH": f"{scratch}/clients.json", **(env or {})}
    return subprocess.run([str(INSPECTOR), "--cli", *args, "--format", "json"], capture_output=True, text=True,
                          timeout=90, env=full_env)


@needs_inspector
def test_the_inspector_over_http(app: App, live: LiveServer, note: Note) -> None:
    auth = ["--header", f"Authorization: Bearer {live.token}"]
    for t in app.registry.all():
        app.registry.set_enabled(app.workspace, t.name, True)
    listed = inspector(live.mcp_url, *auth, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["result"]["tools"]) == len(app.registry.all())
    assert "Warning" not in listed.stderr  # every schema is portable
    app.registry.set_enabled(app.workspace, "delete_note", False)
    names = {t["name"] for t in json.loads(inspector(live.mcp_url, *auth, "--method", "tools/list").stdout)["result"]["tools"]}
    assert "delete_note" not in names
    gone = inspector(live.mcp_url, *auth, "--method", "tools/call", "--tool-name", "delete_note",
                     "--tool-args-json", json.dumps({"id": note.id}))
    assert gone.returncode != 0 and app.workspace.get_note(note.id).deleted_time is None
    called = inspector(live.mcp_url, *auth, "--method", "tools/call", "--tool-name", "read_note",
                       "--tool-args-json", json.dumps({"id": note.id, "outline": True}))
    assert called.returncode == 0
    assert json.loads(called.stdout)["result"]["structuredContent"]["is_outline"] is True
    failed = inspector(live.mcp_url, *auth, "--method", "tools/call", "--tool-name", "read_note",
                       "--tool-args-json", json.dumps({"id": "0" * 32}))
    assert failed.returncode == 5  # isError
    assert inspector(live.mcp_url, "--method", "tools/list").returncode != 0  # no token


@needs_inspector
def test_the_inspector_over_stdio(app: App, note: Note) -> None:
    app.registry.set_enabled(app.workspace, "read_notes", False)
    # Clients hand a stdio server only a few environment variables, hence --home.
    server = [sys.executable, "-m", "noteloom", "mcp", "--home", str(app.settings.data_dir)]
    listed = inspector(*server, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["result"]["tools"]}
    assert "read_note" in names and "read_notes" not in names
    called = inspector(*server, "--method", "tools/call", "--tool-name", "read_note",
                       "--tool-args-json", json.dumps({"id": note.id, "section": "Usage"}))
    assert json.loads(called.stdout)["result"]["structuredContent"]["body"] == "# Usage\nRun it.\n"


@pytest.mark.anyio
async def test_the_server_also_runs_in_a_child_process_for_load_and_browser_tests(tmp_path: Path) -> None:
    with live_server_process(tmp_path / "child") as srv:
        async with official_http(srv, "legacy") as client:
            assert "read_note" in {t.name for t in (await client.list_tools()).tools}
