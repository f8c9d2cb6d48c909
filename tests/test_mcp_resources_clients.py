"""MCP resources with the clients users have: the official SDK client over HTTP (a live
``noteloom serve`` in its own process) and stdio (``noteloom mcp``), and fastmcp over HTTP.
They list, page and read notes, notebooks and attachments, get "not found" for what is not
there, and receive ``notifications/resources/updated`` when a subscribed note is edited
through the web API or by another process."""

from __future__ import annotations

import base64
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
import pytest
from fastmcp import Client as FastClient
from fastmcp.client.transports import StdioTransport
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceUpdatedNotification

from livesrv import LiveServer, live_server_process
from noteloom.app import App
from noteloom.workspace import Note

ROOT = Path(__file__).resolve().parents[1]
INSPECTOR = ROOT / ".peers" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAeIhvDMAAAAASUVORK5CYII=")


@pytest.fixture
def note(app: App) -> Note:
    ws = app.workspace
    book = ws.create_notebook("Work")
    note = ws.create_note("Manual", "How it works.\n", notebook_id=book.id, tags=["docs"])
    ws.add_attachment(note.id, PIXEL, "dot.png")
    return note


@pytest.fixture
def served(app: App, note: Note) -> Iterator[LiveServer]:
    # Its own process: an edit made here, in the test's process, must reach it through the feed.
    with live_server_process(Path(app.settings.data_dir)) as srv:
        yield srv


class Updates:
    """The resource URIs a client was told have changed."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def wait_for(self, uri: str) -> None:
        with anyio.fail_after(30):
            while uri not in self.uris:
                await anyio.sleep(0.02)


def official_http(srv: LiveServer, **kwargs: Any) -> Client:
    http = httpx2.AsyncClient(headers=srv.auth, timeout=httpx2.Timeout(120))
    return Client(streamable_http_client(srv.mcp_url, http_client=http), mode="legacy", **kwargs)  # type: ignore[arg-type]


async def reads_the_workspace(client: Client, note: Note, app: App) -> None:
    """What every client sees: the note listed and read, its notebook, its attachment, not found."""
    listed = await client.list_resources()
    uris = [str(r.uri) for r in listed.resources]
    assert f"note://{note.id}" in uris and f"notebook://{note.notebook_id}" in uris
    templates = await client.list_resource_templates()
    assert {t.uri_template for t in templates.resource_templates} >= {"note://{id}", "notebook://{id}"}
    read = await client.read_resource(f"note://{note.id}")
    text = read.contents[0]
    assert text.mime_type == "text/markdown" and text.text.endswith("How it works.\n")  # type: ignore[union-attr]
    assert 'notebook: "Work"' in text.text and '"docs"' in text.text  # type: ignore[union-attr]
    book = await client.read_resource(f"notebook://{note.notebook_id}")
    assert f"[Manual](note://{note.id})" in book.contents[0].text  # type: ignore[union-attr]
    att = app.workspace.list_attachments(note.id)[0]
    blob = (await client.read_resource(f"noteloom://attachment/{att.id}")).contents[0]
    assert blob.mime_type == "image/png" and base64.b64decode(blob.blob) == PIXEL  # type: ignore[union-attr]
    with pytest.raises(MCPError) as info:
        await client.read_resource(f"note://{'0' * 32}")
    assert info.value.code == -32002 and f"note://{'0' * 32}" in str(info.value)


def edit_through_the_web_api(srv: LiveServer, note: Note, body: str) -> None:
    r = httpx2.patch(f"{srv.url}/api/v1/notes/{note.id}", json={"body": body}, headers=srv.auth, timeout=60)
    assert r.status_code == 200, r.text


@pytest.mark.anyio
async def test_the_official_client_over_http(app: App, served: LiveServer, note: Note) -> None:
    updates = Updates()
    with anyio.fail_after(60), pytest.warns(Warning):  # subscribe is deprecated for 2026-07-28 clients
        async with official_http(served, message_handler=updates) as client:
            await reads_the_workspace(client, note, app)
            await client.subscribe_resource(f"note://{note.id}")
            await client.subscribe_resource(f"notebook://{note.notebook_id}")
            await anyio.to_thread.run_sync(edit_through_the_web_api, served, note, "Edited on the web.")
            await updates.wait_for(f"note://{note.id}")
            await updates.wait_for(f"notebook://{note.notebook_id}")
            again = await client.read_resource(f"note://{note.id}")
            assert again.contents[0].text.endswith("Edited on the web.")  # type: ignore[union-attr]
            # Another process writes to the workspace directly: the server hears it from the feed.
            await client.unsubscribe_resource(f"notebook://{note.notebook_id}")
            before = len(updates.uris)
            await anyio.to_thread.run_sync(lambda: app.workspace.update_note(note.id, body="Edited elsewhere."))
            with anyio.fail_after(30):
                while len(updates.uris) == before:
                    await anyio.sleep(0.02)
            assert updates.uris[before:] == [f"note://{note.id}"]


@pytest.mark.anyio
async def test_the_official_client_pages_in_the_2026_revision(app: App, served: LiveServer, note: Note) -> None:
    for i in range(130):
        app.workspace.create_note(f"extra {i}", "", notebook_id=note.notebook_id)
    http = httpx2.AsyncClient(headers=served.auth, timeout=httpx2.Timeout(120))
    with anyio.fail_after(60):
        async with Client(streamable_http_client(served.mcp_url, http_client=http), mode="auto") as client:  # type: ignore[arg-type]
            assert client.protocol_version == "2026-07-28"
            first = await client.list_resources()
            assert len(first.resources) == 100 and first.next_cursor
            second = await client.list_resources(cursor=first.next_cursor)
            uris = [str(r.uri) for r in [*first.resources, *second.resources]]
            assert len(uris) == len(set(uris)) == 130 + 2 and second.next_cursor is None
            with pytest.raises(MCPError) as info:  # 2026-07-28 retired -32002 for -32602
                await client.read_resource(f"note://{'0' * 32}")
            assert info.value.code == -32602


@pytest.mark.anyio
async def test_the_official_client_over_stdio(app: App, note: Note, tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "noteloom", "mcp"],
                                   env={"NOTELOOM_HOME": str(app.settings.data_dir)})
    updates = Updates()
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(60), pytest.warns(Warning):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy",  # type: ignore[arg-type]
                          message_handler=updates) as client:
            await reads_the_workspace(client, note, app)
            await client.subscribe_resource(f"note://{note.id}")
            # This test's process is not the server's: the edit reaches it through the change feed.
            await anyio.to_thread.run_sync(lambda: app.workspace.update_note(note.id, body="Edited from the CLI."))
            await updates.wait_for(f"note://{note.id}")


@pytest.mark.anyio
async def test_the_fastmcp_client(app: App, served: LiveServer, note: Note) -> None:
    with anyio.fail_after(60):
        async with FastClient(served.mcp_url, auth=served.token) as client:
            listed = await client.list_resources()
            assert f"note://{note.id}" in {str(r.uri) for r in listed}
            templates = await client.list_resource_templates()
            assert "note://{id}" in {t.uri_template for t in templates}
            contents = await client.read_resource(f"note://{note.id}")
            assert contents[0].text.endswith("How it works.\n")  # type: ignore[union-attr]
            with pytest.raises(Exception, match="Resource not found"):
                await client.read_resource(f"notebook://{'0' * 32}")


@pytest.mark.anyio
async def test_the_fastmcp_client_over_stdio_reads_resources_and_gets_a_prompt(
    app: App, note: Note, tmp_path: Path
) -> None:
    transport = StdioTransport(sys.executable, ["-m", "noteloom", "mcp"],
                               env={**os.environ, "NOTELOOM_HOME": str(app.settings.data_dir)},
                               log_file=tmp_path / "stderr.log")
    with anyio.fail_after(60):
        async with FastClient(transport) as client:
            listed = await client.list_resources()
            assert f"note://{note.id}" in {str(r.uri) for r in listed}
            contents = await client.read_resource(f"note://{note.id}")
            assert contents[0].text.endswith("How it works.\n")  # type: ignore[union-attr]
            prompt = await client.get_prompt("summarize", {"note": "Manual"})
    embedded = [m.content for m in prompt.messages if m.content.type == "resource"]
    assert [str(e.resource.uri) for e in embedded] == [f"note://{note.id}"]  # type: ignore[union-attr]
    assert "How it works." in embedded[0].resource.text  # type: ignore[union-attr]


@pytest.mark.skipif(not INSPECTOR.exists(), reason="MCP Inspector not installed; `bash scripts/install-inspector.sh`")
def test_the_inspector_lists_and_reads(app: App, served: LiveServer, note: Note) -> None:
    scratch = tempfile.mkdtemp(prefix="inspector-")
    env = {**os.environ, "HOME": scratch, "MCP_CATALOG_PATH": f"{scratch}/catalog.json",
           "MCP_CLIENT_CONFIG_PATH": f"{scratch}/clients.json"}

    def inspector(*args: str) -> dict[str, Any]:
        done = subprocess.run([str(INSPECTOR), "--cli", served.mcp_url, "--header", f"Authorization: Bearer {served.token}",
                               *args, "--format", "json"], capture_output=True, text=True, timeout=90, env=env)
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    listed = inspector("--method", "resources/list")["result"]["resources"]
    assert f"note://{note.id}" in {r["uri"] for r in listed}
    templates = inspector("--method", "resources/templates/list")["result"]["resourceTemplates"]
    assert "note://{id}" in {t["uriTemplate"] for t in templates}
    read = inspector("--method", "resources/read", "--uri", f"note://{note.id}")["result"]["contents"][0]
    assert read["mimeType"] == "text/markdown" and read["text"].endswith("How it works.\n")
