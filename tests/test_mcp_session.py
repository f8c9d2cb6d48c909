"""MCP sessions: Streamable HTTP with ``Mcp-Session-Id`` (event streams, server→client
requests and their answers, the session's own GET stream, DELETE, cancellation), stdio as
one session, logging/setLevel, progress and tools/list_changed, with the official client
against a live server and raw HTTP for the edge cases."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastmcp import Client as FastClient
from fastmcp.client.messages import MessageHandler
from fastmcp.client.transports import StdioTransport
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CreateMessageResult,
    ElicitResult,
    LoggingMessageNotificationParams,
    TextContent,
    ToolListChangedNotification,
)

from livesrv import LiveServer, live_server, noteloom_serve
from noteloom.accounts import User
from noteloom.app import App
from noteloom.mcp import McpServer, serve_stdio
from noteloom.mcp.session import (
    SUBSCRIPTION_ID_META_KEY,
    McpSession,
    SessionGone,
    Sessions,
)
from noteloom.tools import ClientUnavailable, ToolContext, ToolDef

WAIT = 60  # seconds: generous, for a loaded machine; nothing waits a fixed time
ACCEPT_BOTH = "application/json, text/event-stream"
CLIENT_INFO = {"name": "raw", "version": "1"}
ASK_SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}


class Probe:
    """A tool that talks to its client through ``ctx.client``: logs at two levels, reports
    progress, and (``ask``) asks the user, or (``hang``) waits until cancelled."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    async def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        client = ctx.client
        assert client is not None
        await client.log("debug", "a debug line")
        await client.log("warning", {"said": "a warning"}, "probe")
        await client.progress(1, 2, "half way")
        if args.get("hang"):
            self.started.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.set()
        if args.get("sample"):
            return {"sampled": await client.sample({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 10})}
        if args.get("ask"):
            try:
                return {"answer": await client.elicit("Pick a colour", ASK_SCHEMA)}
            except ClientUnavailable as exc:
                return {"unavailable": str(exc)}
        return {"ok": True}


@pytest.fixture
def probe(app: App) -> Probe:
    handler = Probe()
    app.registry.register(ToolDef(
        name="probe_client",
        description="Test tool: talks to its client.",
        input_schema={"type": "object", "properties": {
            "ask": {"type": "boolean"}, "hang": {"type": "boolean"}, "sample": {"type": "boolean"}}},
        handler=handler,
    ))
    return handler


@pytest.fixture
def live(app: App, probe: Probe) -> Iterator[LiveServer]:
    with live_server(app) as srv:
        yield srv


def _http(srv: LiveServer) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers=srv.auth, timeout=httpx2.Timeout(120))


# -- the official client --------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_official_client_gets_logs_progress_elicitation_and_list_changed_over_http(
    app: App, live: LiveServer
) -> None:
    logs: list[LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []
    changed = anyio.Event()
    asked: list[str] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"colour": "teal"})

    async def on_sample(context: Any, params: Any) -> CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="hi"), model="m")

    transport = streamable_http_client(live.mcp_url, http_client=_http(live))
    client = Client(transport, mode="legacy", logging_callback=on_log, message_handler=on_message,  # type: ignore[arg-type]
                    elicitation_callback=on_elicit, sampling_callback=on_sample)
    with anyio.fail_after(WAIT):
        async with client:
            await client.set_logging_level("warning")
            plain = await client.call_tool("probe_client", {}, progress_callback=on_progress)
            assert plain.structured_content == {"ok": True}
            assert progress == [(1, 2, "half way")]
            assert [(m.level, m.data, m.logger) for m in logs] == [("warning", {"said": "a warning"}, "probe")]
            # read_notes reports each note it reads to a client that asked for progress.
            ids = [app.workspace.create_note(title, "body").id for title in ("One", "Two")]
            progress.clear()
            read = await client.call_tool("read_notes", {"ids": ids}, progress_callback=on_progress)
            assert len(read.structured_content["notes"]) == 2  # type: ignore[index]
            assert progress == [(1, 2, "read 'One'"), (2, 2, "read 'Two'")]
            answered = await client.call_tool("probe_client", {"ask": True})
            assert answered.structured_content == {"answer": {"action": "accept", "content": {"colour": "teal"}}}
            assert asked == ["Pick a colour"]
            sampled = await client.call_tool("probe_client", {"sample": True})
            assert sampled.structured_content == {"sampled": {
                "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}
            assert asked[-1] == "Say hi"
            # A toggle changes the tools: every session hears of it on its own stream.
            await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
            await changed.wait()
            assert "create_note" in {t.name for t in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_the_official_client_over_stdio_hears_of_a_toggle_from_another_process(app: App, tmp_path: Path) -> None:
    changed = anyio.Event()
    logs: list[LoggingMessageNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "noteloom", "mcp"], env={"NOTELOOM_HOME": str(app.settings.data_dir)}
    )
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(WAIT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy",  # type: ignore[arg-type]
                          message_handler=on_message, logging_callback=on_log) as client:
            assert await client.set_logging_level("error") is not None
            assert "create_note" not in {t.name for t in (await client.list_tools()).tools}
            # This process writes the setting; the stdio server's watcher sees the commit.
            await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
            await changed.wait()
            assert "create_note" in {t.name for t in (await client.list_tools()).tools}


# -- raw HTTP: the edge cases ----------------------------------------------------------------


async def _initialize(http: httpx2.AsyncClient, url: str, capabilities: dict[str, Any] | None = None) -> str:
    r = await http.post(url, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO},
    }, headers={"Accept": ACCEPT_BOTH})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["result"]["capabilities"]["tools"] == {"listChanged": True}
    assert "logging" in r.json()["result"]["capabilities"]
    return r.headers["mcp-session-id"]


def _session(sid: str) -> dict[str, str]:
    return {"Mcp-Session-Id": sid, "Accept": ACCEPT_BOTH, "MCP-Protocol-Version": "2025-11-25"}


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an event stream."""
    async for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


@pytest.mark.anyio
async def test_unknown_and_ended_sessions_are_404_and_a_request_without_one_is_stateless(live: LiveServer) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with _http(live) as http:
        r = await http.post(live.mcp_url, json=ping, headers=_session("made-up"))
        assert r.status_code == 404 and "initialize again" in r.json()["error"]["message"]
        r = await http.post(live.mcp_url, json=ping, headers=_session(f"{os.getpid() + 1:x}.abc"))
        assert r.status_code == 404 and "another server process" in r.json()["error"]["message"]
        sid = await _initialize(http, live.mcp_url)
        r = await http.post(live.mcp_url, json=ping, headers=_session(sid))
        assert r.status_code == 200 and r.json()["result"] == {} and "mcp-session-id" not in r.headers
        assert (await http.delete(live.mcp_url, headers=_session(sid))).status_code == 204
        assert (await http.post(live.mcp_url, json=ping, headers=_session(sid))).status_code == 404
        assert (await http.delete(live.mcp_url, headers=_session(sid))).status_code == 404
        # No session id: served as ever, plain JSON.
        r = await http.post(live.mcp_url, json=ping, headers={"Accept": ACCEPT_BOTH})
        assert r.status_code == 200 and r.json()["result"] == {}
        assert r.headers["content-type"].startswith("application/json")


def test_another_persons_session_id_is_unknown() -> None:
    sessions = Sessions()
    owner, ann = User("u1", "owner", True), User("u2", "ann", False)
    session = sessions.create(owner)
    with pytest.raises(SessionGone):
        sessions.get(session.id, ann)
    with pytest.raises(SessionGone):
        sessions.get(session.id, None)
    assert sessions.get(session.id, owner) is session


@pytest.mark.anyio
async def test_a_call_that_sends_nothing_first_is_plain_json_and_one_that_logs_is_an_event_stream(
    live: LiveServer,
) -> None:
    async with _http(live) as http:
        sid = await _initialize(http, live.mcp_url)
        quiet = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_tags", "arguments": {}}}
        r = await http.post(live.mcp_url, json=quiet, headers=_session(sid))
        assert r.headers["content-type"].startswith("application/json") and r.json()["result"]["isError"] is False
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "probe_client", "arguments": {}, "_meta": {"progressToken": "p1"}}}
        r = await http.post(live.mcp_url, json=call, headers=_session(sid))
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
        assert [e.get("method") for e in events] == ["notifications/message", "notifications/progress", None]
        assert events[0]["params"] == {"level": "warning", "data": {"said": "a warning"}, "logger": "probe"}
        assert events[1]["params"] == {"progressToken": "p1", "progress": 1, "total": 2, "message": "half way"}
        assert events[-1]["id"] == 2 and events[-1]["result"]["structuredContent"] == {"ok": True}
        # A client that takes only JSON gets the answer alone.
        r = await http.post(live.mcp_url, json=call, headers={**_session(sid), "Accept": "application/json"})
        assert r.headers["content-type"].startswith("application/json") and r.json()["id"] == 2


@pytest.mark.anyio
async def test_an_elicitation_is_answered_by_a_posted_response(live: LiveServer) -> None:
    async with _http(live) as http:
        sid = await _initialize(http, live.mcp_url, {"elicitation": {"form": {}}})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "probe_client",
                                                                           "arguments": {"ask": True}}}
        with anyio.fail_after(WAIT):
            async with http.stream("POST", live.mcp_url, json=call, headers=_session(sid)) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                seen: list[dict[str, Any]] = []
                async for event in _events(r.aiter_lines()):
                    seen.append(event)
                    if event.get("method") == "elicitation/create":
                        assert event["params"] == {"message": "Pick a colour", "requestedSchema": ASK_SCHEMA}
                        answer = {"jsonrpc": "2.0", "id": event["id"],
                                  "result": {"action": "decline"}}
                        posted = await http.post(live.mcp_url, json=answer, headers=_session(sid))
                        assert posted.status_code == 202
        assert seen[-1]["id"] == 7
        assert seen[-1]["result"]["structuredContent"] == {"answer": {"action": "decline"}}
        # Without the capability the tool is told it cannot ask.
        other = await _initialize(http, live.mcp_url)
        r = await http.post(live.mcp_url, json=call, headers=_session(other))
        last = [json.loads(x[5:]) for x in r.text.splitlines() if x.startswith("data:")][-1]
        assert "did not declare elicitation" in last["result"]["structuredContent"]["unavailable"]


@pytest.mark.anyio
async def test_the_get_stream_carries_list_changed_and_cancelled_calls_stop(
    app: App, live: LiveServer, probe: Probe
) -> None:
    async with _http(live) as http:
        r = await http.get(live.mcp_url, headers={"Accept": "text/event-stream"})
        assert r.status_code == 405  # no session: nothing to stream
        sid = await _initialize(http, live.mcp_url)
        with anyio.fail_after(WAIT):
            async with http.stream("GET", live.mcp_url, headers=_session(sid)) as stream:
                assert stream.status_code == 200
                again = await http.get(live.mcp_url, headers=_session(sid))
                assert again.status_code == 409
                await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
                async for event in _events(stream.aiter_lines()):
                    assert event == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                    break

            hang = {"jsonrpc": "2.0", "id": "h1", "method": "tools/call",
                    "params": {"name": "probe_client", "arguments": {"hang": True}}}
            done: list[httpx2.Response] = []

            async def call() -> None:
                done.append(await http.post(live.mcp_url, json=hang,
                                            headers={**_session(sid), "Accept": "application/json"}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.to_thread.run_sync(probe.started.wait, WAIT)
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "h1"}}
                assert (await http.post(live.mcp_url, json=cancel, headers=_session(sid))).status_code == 202
            assert probe.cancelled.is_set()
            assert done[0].status_code == 202 and done[0].content == b""  # a cancelled request gets no answer


async def _numbered(lines: AsyncIterator[str]) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """The ``(id, message)`` pairs of an event stream whose events carry ids."""
    event_id: int | None = None
    async for line in lines:
        if line.startswith("id:"):
            event_id = int(line[3:])
        elif line.startswith("data:"):
            assert event_id is not None, "an event of the session's stream without an id"
            yield event_id, json.loads(line[5:])
            event_id = None


@pytest.mark.anyio
async def test_a_lost_stream_opened_again_with_last_event_id_gets_what_followed(app: App, live: LiveServer) -> None:
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}

    async def toggle(on: bool) -> None:
        await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", on)

    async with _http(live) as http:
        sid = await _initialize(http, live.mcp_url)
        seen: list[tuple[int, dict[str, Any]]] = []
        with anyio.fail_after(WAIT):
            async with http.stream("GET", live.mcp_url, headers=_session(sid)) as stream:
                events = _numbered(stream.aiter_lines())
                for on in (True, False):  # one change at a time: each is its own notification
                    await toggle(on)
                    seen.append(await events.__anext__())
        assert [m for _, m in seen] == [changed, changed]
        first, second = seen[0][0], seen[1][0]
        assert second > first
        # The client lost the stream after the first event (it says so): the second comes
        # again, with its id, ahead of anything new.
        with anyio.fail_after(WAIT):
            async with http.stream("GET", live.mcp_url,
                                   headers={**_session(sid), "Last-Event-ID": str(first)}) as stream:
                events = _numbered(stream.aiter_lines())
                assert await events.__anext__() == (second, changed)
                await toggle(True)
                third = await events.__anext__()
        assert third[1] == changed and third[0] > second
        # Opened again without Last-Event-ID (or with one that is not ours): nothing again.
        for header in ({}, {"Last-Event-ID": "not-a-number"}):
            with anyio.fail_after(WAIT):
                async with http.stream("GET", live.mcp_url, headers={**_session(sid), **header}) as stream:
                    events = _numbered(stream.aiter_lines())
                    await toggle(False)
                    got = await events.__anext__()
                    await toggle(True)
                    got_next = await events.__anext__()
            assert got[0] > third[0] and got_next[0] > got[0]
            third = got_next


@pytest.mark.anyio
async def test_mcp_method_and_name_headers_are_checked_against_the_body(live: LiveServer) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_tags", "arguments": {}}}
    async with _http(live) as http:
        r = await http.post(live.mcp_url, json=call, headers={"Mcp-Method": "tools/list"})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "Bad Request: the Mcp-Method header says 'tools/list' but the body's method is 'tools/call'")
        r = await http.post(live.mcp_url, json=call, headers={"Mcp-Method": "tools/call", "Mcp-Name": "search_notes"})
        assert r.status_code == 400 and "params.name is 'list_tags'" in r.json()["error"]["message"]
        r = await http.post(live.mcp_url, json=call, headers={"Mcp-Method": "tools/call", "Mcp-Name": "list_tags"})
        assert r.status_code == 200 and r.json()["result"]["isError"] is False
        # 2026-07-28 requires them (the SDK's ladder): a modern request without them is a 400 too.
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        modern = {**call, "params": {**call["params"], "_meta": meta}}  # type: ignore[dict-item]
        r = await http.post(live.mcp_url, json=modern, headers={"MCP-Protocol-Version": "2026-07-28"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32020
        assert "mcp-method header does not match" in r.json()["error"]["message"]
        r = await http.post(live.mcp_url, json=modern, headers={"MCP-Protocol-Version": "2026-07-28",
                                                                "Mcp-Method": "tools/call"})
        assert r.status_code == 400 and "mcp-name header does not match" in r.json()["error"]["message"]
        r = await http.post(live.mcp_url, json=modern, headers={"MCP-Protocol-Version": "2026-07-28",
                                                                "Mcp-Method": "tools/call", "Mcp-Name": "list_tags"})
        assert r.status_code == 200 and r.json()["result"]["isError"] is False


# -- stdio, in process ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_stdio_reads_the_answer_to_an_elicitation_while_the_call_waits(app: App, probe: Probe) -> None:
    server = McpServer(app)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stdin, stdout = os.fdopen(in_r, "rb"), os.fdopen(out_w, "wb")
    feed, replies = os.fdopen(in_w, "wb", buffering=0), os.fdopen(out_r, "rb")

    async def write(message: dict[str, Any]) -> None:
        await anyio.to_thread.run_sync(feed.write, (json.dumps(message) + "\n").encode())

    async def read() -> dict[str, Any]:
        line = await anyio.to_thread.run_sync(replies.readline)
        assert line, "the server closed stdout"
        return json.loads(line)  # type: ignore[no-any-return]

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_stdio, server, None, stdin, stdout)
            await write({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": CLIENT_INFO}})
            assert (await read())["result"]["protocolVersion"] == "2025-06-18"
            await write({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}})
            assert (await read())["result"] == {}
            await write({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "probe_client", "arguments": {"ask": True}}})
            seen = [await read(), await read()]
            assert [m["params"]["level"] for m in seen] == ["debug", "warning"]
            ask = await read()
            assert ask["method"] == "elicitation/create"
            await write({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"colour": "red"}}})
            done = await read()
            assert done["id"] == 3
            assert done["result"]["structuredContent"] == {"answer": {"action": "accept", "content": {"colour": "red"}}}
            await anyio.to_thread.run_sync(feed.close)
    stdout.close()
    replies.close()


def test_sessions_are_capped_per_person_and_forgotten_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    from noteloom.mcp import session as module

    monkeypatch.setattr(module, "MAX_SESSIONS_PER_USER", 3)
    sessions = Sessions()
    made = [sessions.create(None) for _ in range(4)]
    assert [s.id for s in sessions.all()] == [s.id for s in made[1:]]
    assert made[0].closed
    for s in made[1:]:
        s.last_used -= module.IDLE_SECONDS + 1
    made[2].streaming = True
    sessions.expire()
    assert sessions.all() == [made[2]]
    made[2].subscribe("note://x")
    assert sessions.subscribed("note://x") == [made[2]] and sessions.subscribed("note://y") == []
    stdio = McpSession(None, session_id="stdio")
    sessions.attach(stdio)
    stdio.subscribe("note://y")
    assert sessions.subscribed("note://y") == [stdio]


# -- elicitation for confirmations ----------------------------------------------------------


async def _confirmations(client: Client, app: App, answers: list[str], asked: list[str]) -> None:
    """delete_note (confirmed by default): declined it leaves the note, accepted it runs."""
    ws = app.workspace
    note = await anyio.to_thread.run_sync(lambda: ws.create_note("Packing list", "socks"))
    await anyio.to_thread.run_sync(app.registry.set_enabled, ws, "delete_note", True)
    answers[:] = ["decline", "cancel", "accept"]
    declined = await client.call_tool("delete_note", {"id": note.id})
    assert declined.is_error is True
    assert "the user declined it when asked to confirm" in declined.content[0].text  # type: ignore[union-attr]
    dismissed = await client.call_tool("delete_note", {"id": note.id})
    assert dismissed.is_error is True and "dismissed" in dismissed.content[0].text  # type: ignore[union-attr]
    assert (await anyio.to_thread.run_sync(ws.get_note, note.id)).title == "Packing list"
    done = await client.call_tool("delete_note", {"id": note.id})
    assert done.is_error is False
    assert asked == ["Allow this? Move 'Packing list' (Notes) to the trash."] * 3


def _answering(answers: list[str], asked: list[str]) -> Any:
    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action=answers.pop(0))  # type: ignore[arg-type]

    return on_elicit


@pytest.mark.anyio
async def test_a_confirmed_call_asks_through_elicitation_over_http(app: App, live: LiveServer) -> None:
    answers: list[str] = []
    asked: list[str] = []
    transport = streamable_http_client(live.mcp_url, http_client=_http(live))
    with anyio.fail_after(WAIT):
        async with Client(transport, mode="legacy", elicitation_callback=_answering(answers, asked)) as client:  # type: ignore[arg-type]
            await _confirmations(client, app, answers, asked)
        # A client without elicitation: the call runs, as it always has.
        note = app.workspace.create_note("Old list", "")
        async with Client(streamable_http_client(live.mcp_url, http_client=_http(live)), mode="legacy") as plain:  # type: ignore[arg-type]
            assert (await plain.call_tool("delete_note", {"id": note.id})).is_error is False


@pytest.mark.anyio
async def test_a_confirmed_call_asks_through_elicitation_over_stdio(app: App, tmp_path: Path) -> None:
    answers: list[str] = []
    asked: list[str] = []
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "noteloom", "mcp"], env={"NOTELOOM_HOME": str(app.settings.data_dir)}
    )
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(WAIT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy",  # type: ignore[arg-type]
                          elicitation_callback=_answering(answers, asked)) as client:
            await _confirmations(client, app, answers, asked)


# -- 2026-07-28: subscriptions/listen ----------------------------------------------------------


async def _listen_for_a_toggle(client: Client, app: App) -> None:
    async with client.listen(tools_list_changed=True, resource_subscriptions=["note://x"]) as sub:
        assert sub.honored.tools_list_changed is True
        assert sub.honored.resource_subscriptions == ["note://x"]
        await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
        event = await sub.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
    names = [t.name for t in (await client.list_tools()).tools]
    assert "create_note" in names and names == sorted(names)


@pytest.mark.anyio
async def test_the_official_client_listens_for_list_changed_over_http(app: App, live: LiveServer) -> None:
    transport = streamable_http_client(live.mcp_url, http_client=_http(live))
    with anyio.fail_after(WAIT):
        async with Client(transport, mode="auto") as client:  # type: ignore[arg-type]
            assert client.protocol_version == "2026-07-28"
            await _listen_for_a_toggle(client, app)


@pytest.mark.anyio
async def test_the_official_client_listens_for_list_changed_over_stdio(app: App, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "noteloom", "mcp"], env={"NOTELOOM_HOME": str(app.settings.data_dir)}
    )
    errlog = (tmp_path / "stderr.log").open("w+")
    outside: list[Any] = []

    async def on_message(message: Any) -> None:
        meta = message.params.meta if isinstance(message, ToolListChangedNotification) and message.params else None
        if isinstance(message, ToolListChangedNotification) and not (meta or {}).get(SUBSCRIPTION_ID_META_KEY):
            outside.append(message)

    with anyio.fail_after(WAIT):
        async with Client(stdio_client(params, errlog=errlog), mode="auto",  # type: ignore[arg-type]
                          message_handler=on_message) as client:
            assert client.protocol_version == "2026-07-28"
            await _listen_for_a_toggle(client, app)
    assert outside == []  # at 2026-07-28 the change rides only the listen stream


@pytest.mark.anyio
async def test_a_raw_listen_stream_is_acknowledged_and_stamped_and_needs_an_event_stream(
    app: App, live: LiveServer
) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    listen = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
              "params": {"notifications": {"toolsListChanged": True, "promptsListChanged": False}, "_meta": meta}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
    async with _http(live) as http:
        r = await http.post(live.mcp_url, json=listen, headers={**headers, "Accept": "application/json"})
        assert r.status_code == 406
        with anyio.fail_after(WAIT):
            async with http.stream("POST", live.mcp_url, json=listen, headers={**headers, "Accept": ACCEPT_BOTH}) as r:
                events = _events(r.aiter_lines())
                ack = await events.__anext__()
                assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
                    "notifications": {"toolsListChanged": True}, "_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}}}
                await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
                changed = await events.__anext__()
                assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}}}


@pytest.mark.anyio
async def test_registering_a_tool_notifies_the_sessions_of_this_process(app: App) -> None:
    server = McpServer(app)
    heard = anyio.Event()
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        heard.set()

    session = McpSession(None, send)
    server.sessions.attach(session)

    async def nothing(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        return {}

    with anyio.fail_after(WAIT):
        async with server.running():  # it has taken its baseline when it is entered
            await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
            await heard.wait()
            heard = anyio.Event()
            app.registry.register(ToolDef(name="late_tool", description="Registered late.",
                                          input_schema={"type": "object", "properties": {}}, handler=nothing))
            await heard.wait()
    assert sent == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}] * 2


@pytest.mark.anyio
async def test_delete_ends_the_sessions_open_stream(live: LiveServer) -> None:
    async with _http(live) as http:
        sid = await _initialize(http, live.mcp_url)
        with anyio.fail_after(WAIT):
            async with http.stream("GET", live.mcp_url, headers=_session(sid)) as stream:
                lines = stream.aiter_lines()
                assert await lines.__anext__() == ": stream open"  # the stream is open
                assert (await http.delete(live.mcp_url, headers=_session(sid))).status_code == 204
                rest = [line async for line in lines]
            assert [x for x in rest if x.startswith("data:")] == []


# -- noteloom serve: stopping, and sessions with --workers ---------------------------------------


@pytest.mark.anyio
async def test_stopping_the_server_ends_a_sessions_stream_cleanly(app: App, tmp_path: Path) -> None:
    with noteloom_serve(app.settings.data_dir, log=tmp_path / "serve.log") as srv:
        async with _http(srv.server) as http:
            sid = await _initialize(http, srv.server.mcp_url)
            with anyio.fail_after(WAIT):
                async with http.stream("GET", srv.server.mcp_url, headers=_session(sid)) as stream:
                    lines = stream.aiter_lines()
                    assert await lines.__anext__() == ": stream open"
                    os.kill(srv.pid, signal.SIGINT)
                    # Ended by the server (a clean end of the body), not cut off when uvicorn's
                    # graceful timeout runs out (that raises a protocol error here).
                    rest = [line async for line in lines]
            assert [x for x in rest if x.startswith("data:")] == []


@pytest.mark.anyio
async def test_with_workers_a_session_reached_in_another_process_says_so(app: App, tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with noteloom_serve(app.settings.data_dir, "--workers", "2", log=tmp_path / "serve.log") as srv:
        async with _http(srv.server) as http:
            sid = await _initialize(http, srv.server.mcp_url)
        answers: set[int] = set()
        with anyio.fail_after(WAIT * 2):
            # Each new connection is placed by the kernel; soon one reaches the other worker.
            while 404 not in answers:
                async with _http(srv.server) as fresh:
                    r = await fresh.post(srv.server.mcp_url, json=ping, headers=_session(sid))
                answers.add(r.status_code)
                if r.status_code == 404:
                    assert "another server process" in r.json()["error"]["message"]
                else:
                    assert r.status_code == 200 and r.json()["result"] == {}


@pytest.mark.anyio
async def test_a_confirmed_call_asks_a_2026_client_with_an_input_required_result(app: App, live: LiveServer) -> None:
    answers: list[str] = []
    asked: list[str] = []
    transport = streamable_http_client(live.mcp_url, http_client=_http(live))
    with anyio.fail_after(WAIT):
        async with Client(transport, mode="auto", elicitation_callback=_answering(answers, asked)) as client:  # type: ignore[arg-type]
            assert client.protocol_version == "2026-07-28"
            await _confirmations(client, app, answers, asked)


@pytest.mark.anyio
async def test_an_answer_for_another_call_asks_again(app: App, live: LiveServer) -> None:
    ws = app.workspace
    note = ws.create_note("Keep me", "")
    app.registry.set_enabled(ws, "delete_note", True)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "delete_note"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"id": note.id}, "_meta": meta}}
    async with _http(live) as http:
        first = (await http.post(live.mcp_url, json=call, headers=headers)).json()["result"]
        assert first["resultType"] == "input_required"
        assert first["inputRequests"]["confirm"]["method"] == "elicitation/create"
        assert first["inputRequests"]["confirm"]["params"]["message"] == "Allow this? Move 'Keep me' (Notes) to the trash."
        accept = {"confirm": {"action": "accept"}}
        forged = {**call, "params": {**call["params"], "inputResponses": accept, "requestState": "confirm:0"}}
        again = (await http.post(live.mcp_url, json=forged, headers=headers)).json()["result"]
        assert again["resultType"] == "input_required"
        assert ws.get_note(note.id).title == "Keep me"
        retried = {**call, "params": {**call["params"], "inputResponses": accept, "requestState": first["requestState"]}}
        done = (await http.post(live.mcp_url, json=retried, headers=headers)).json()["result"]
        assert done["resultType"] == "complete" and done["isError"] is False


# -- fastmcp ---------------------------------------------------------------------------------


class _Changes(MessageHandler):
    def __init__(self) -> None:
        self.changed = anyio.Event()

    async def on_tool_list_changed(self, message: ToolListChangedNotification) -> None:
        self.changed.set()


async def _fastmcp_hears_a_toggle(client: FastClient, handler: _Changes, app: App) -> None:
    async with client:
        assert "create_note" not in {t.name for t in await client.list_tools()}
        await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "create_note", True)
        await handler.changed.wait()
        assert "create_note" in {t.name for t in await client.list_tools()}


@pytest.mark.anyio
async def test_fastmcp_hears_of_a_toggle_over_http(app: App, live: LiveServer) -> None:
    handler = _Changes()
    with anyio.fail_after(WAIT):
        await _fastmcp_hears_a_toggle(
            FastClient(live.mcp_url, auth=live.token, mode="legacy", message_handler=handler), handler, app)


@pytest.mark.anyio
async def test_fastmcp_hears_of_a_toggle_over_stdio(app: App, tmp_path: Path) -> None:
    handler = _Changes()
    transport = StdioTransport(sys.executable, ["-m", "noteloom", "mcp"],
                               env={**os.environ, "NOTELOOM_HOME": str(app.settings.data_dir)},
                               log_file=tmp_path / "stderr.log")
    with anyio.fail_after(WAIT):
        await _fastmcp_hears_a_toggle(FastClient(transport, mode="legacy", message_handler=handler), handler, app)
