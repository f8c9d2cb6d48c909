"""MCP tasks with the official client: over HTTP against a serving app (a session, so the
task's progress reaches the client's message handler) and over stdio (`noteloom mcp`). An
import runs as a task, is polled with tasks/get until it ends and its result fetched with
tasks/result; another person, or another token of the same person, does not see it; a
path outside [mcp] file_roots is refused.

The SDK (2.3) keeps tasks out of its typed client (call_tool checks every tools/call answer
as a CallToolResult), so the task-augmented tools/call goes through the session's dispatcher
as raw JSON-RPC; tasks/get and tasks/result use the SDK's own task types."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from livesrv import LiveServer, live_server
from noteloom.accounts import TokenScopes
from noteloom.app import App
from test_mcp_tasks import WAIT, open_with_roots, write_folder

pytestmark = pytest.mark.anyio


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    return inbox


@pytest.fixture
def rooted(tmp_path: Path, roots: Path) -> Iterator[App]:
    app = open_with_roots(tmp_path / "home", [roots])
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def live(rooted: App) -> Iterator[LiveServer]:
    with live_server(rooted) as srv:
        yield srv


class Heard:
    """What the client's message handler received."""

    def __init__(self) -> None:
        self.progress: list[mt.ProgressNotificationParams] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, mt.ProgressNotification):
            self.progress.append(message.params)


async def start_task(client: Client, tool: str, arguments: dict[str, Any], token: str | int | None = None) -> str:
    params: dict[str, Any] = {"name": tool, "arguments": arguments, "task": {"ttl": 300_000}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    raw = await client.session._dispatcher.send_raw_request("tools/call", params, {})
    created = mt.CreateTaskResult.model_validate(raw)
    assert created.task.status == "working"
    return created.task.task_id


async def until_ended(client: Client, task_id: str) -> mt.GetTaskResult:
    """tasks/get until the task ends, each poll after the interval the server suggests."""
    with anyio.fail_after(WAIT):
        while True:
            task = await client.session.send_request(
                mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id=task_id)), mt.GetTaskResult)
            if task.status in ("completed", "failed", "cancelled"):
                return task
            await anyio.sleep((task.poll_interval or 100) / 1000)


async def task_result(client: Client, task_id: str) -> mt.CallToolResult:
    return await client.session.send_request(
        mt.GetTaskPayloadRequest(params=mt.GetTaskPayloadRequestParams(task_id=task_id)), mt.CallToolResult)


async def test_an_import_task_over_http_with_progress_and_owners(live: LiveServer, rooted: App, roots: Path) -> None:
    folder = write_folder(roots, 3)
    heard = Heard()
    http = httpx2.AsyncClient(headers=live.auth, timeout=httpx2.Timeout(120))
    transport = streamable_http_client(live.mcp_url, http_client=http)
    async with Client(transport, mode="legacy", message_handler=heard) as client:  # type: ignore[arg-type]
        assert client.server_capabilities.tasks is not None
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["import_notes"].execution == mt.ToolExecution(task_support="optional")
        task_id = await start_task(client, "import_notes", {"path": str(folder)}, token="imp")
        task = await until_ended(client, task_id)
        assert task.status == "completed", task.status_message
        result = await task_result(client, task_id)
        assert result.is_error is False and result.structured_content["notes"] == 3  # type: ignore[index]
        assert {"Day 0", "Day 1", "Day 2"} <= {n.title for n in rooted.workspace.list_notes()}
        with anyio.fail_after(WAIT):  # progress travels on the session's stream: wait for it, not a time
            while not heard.progress:
                await anyio.sleep(0.02)
        assert all(p.progress_token == "imp" for p in heard.progress)

        refused = await start_task(client, "import_notes", {"path": str(roots.parent)})
        failed = await until_ended(client, refused)
        assert failed.status == "failed" and "outside the folders" in (failed.status_message or "")

    ws = rooted.workspace
    owner = ws.ensure_owner()
    ann = ws.add_person("ann", actor=owner)
    others = {"ann": ws.create_token(ann.id),
              "a scoped token": ws.create_token(owner.id, name="scoped", scopes=TokenScopes(notebooks=("Trip",)))}
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120)) as raw:
        for who, token in others.items():
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-11-25"}
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                r = await raw.post(live.mcp_url, headers=headers, json={
                    "jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": task_id}})
                error = r.json()["error"]
                assert error["code"] == -32602 and "no task" in error["message"], (who, method, error)
            r = await raw.post(live.mcp_url, headers=headers,
                               json={"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": {}})
            assert r.json()["result"]["tasks"] == [], who
        mine = {"Authorization": f"Bearer {live.token}", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25"}
        r = await raw.post(live.mcp_url, headers=mine,
                           json={"jsonrpc": "2.0", "id": 3, "method": "tasks/list", "params": {}})
        assert task_id in {t["taskId"] for t in r.json()["result"]["tasks"]}  # stateless, same owner: found


async def test_an_import_task_over_stdio(rooted: App, roots: Path, tmp_path: Path) -> None:
    folder = write_folder(roots, 2, "Stdio trip")
    params = StdioServerParameters(command=sys.executable, args=["-m", "noteloom", "mcp"],
                                   env={"NOTELOOM_HOME": str(rooted.settings.data_dir)})
    heard = Heard()
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(WAIT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy",  # type: ignore[arg-type]
                          message_handler=heard) as client:
            task_id = await start_task(client, "import_notes", {"path": "Stdio trip"}, token=5)  # under the root
            task = await until_ended(client, task_id)
            assert task.status == "completed", task.status_message
            result = await task_result(client, task_id)
            assert result.structured_content["notes"] == 2  # type: ignore[index]
            while not heard.progress:
                await anyio.sleep(0.02)
            assert heard.progress[0].progress_token == 5
            listed = mt.ListTasksResult.model_validate(
                await client.session._dispatcher.send_raw_request("tasks/list", {}, {}))
            assert [t.task_id for t in listed.tasks] == [task_id]
    assert {"Day 0", "Day 1"} <= {n.title for n in rooted.workspace.list_notes()}
    assert folder.is_dir()


async def test_the_2026_07_28_tasks_extension_over_http_with_its_routing_headers(live: LiveServer, roots: Path) -> None:
    """The extension on the wire: the task handle, tasks/get named by its task in Mcp-Name
    (a proxy routes by it), a header naming another task refused with 400."""
    folder = write_folder(roots, 2, "Wire")
    meta = {mt.PROTOCOL_VERSION_META_KEY: "2026-07-28", mt.CLIENT_INFO_META_KEY: {"name": "t", "version": "1"},
            mt.CLIENT_CAPABILITIES_META_KEY: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}

    def headers(method: str, name: str) -> dict[str, str]:
        return {**live.auth, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}

    async with httpx2.AsyncClient(timeout=120) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "import_notes", "arguments": {"path": str(folder)}, "_meta": meta}}
        created = (await http.post(live.mcp_url, json=call, headers=headers("tools/call", "import_notes"))).json()
        task_id = created["result"]["taskId"]
        assert created["result"]["resultType"] == "task"
        get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
        wrong = await http.post(live.mcp_url, json=get, headers=headers("tasks/get", "another-task"))
        assert wrong.status_code == 400 and "Mcp-Name" in wrong.json()["error"]["message"]
        with anyio.fail_after(WAIT):
            while True:
                r = await http.post(live.mcp_url, json=get, headers=headers("tasks/get", task_id))
                task = r.json()["result"]
                if task["status"] != "working":
                    break
                await anyio.sleep(0.05)  # a poll's pace; the loop ends on the task's state
    assert task["status"] == "completed" and task["result"]["structuredContent"]["notes"] == 2
