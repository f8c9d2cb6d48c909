"""Every surface behaves the same: one scripted conversation through the web chat API,
``noteloom ask`` (no terminal, a terminal, --yes), ``noteloom chat`` and an MCP client shows
the same policy decisions, the same tool results and the same error texts.

The conversation: the model reads a note that does not exist (a domain error), adds a tag
(auto), replaces a note's body (the tool asks: confirm) and trashes it (the workspace
policy, set with ``noteloom tools policy``, says deny). Each surface gets its own copy of
one workspace, so note ids, and so the script, are the same everywhere.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from chat_support import running_chat
from livesrv import live_server
from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.policy import denied
from noteloom.tools import note_missing
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio
MISSING = "0" * 32
NEW_BODY = "tarp, stove"
CARD = f"Replace the body of 'Packing list' (Travel/Packing) with {len(NEW_BODY)} characters."
#: What every surface must show for the calls of the one conversation.
POLICIES = {"c1": "auto", "c2": "auto", "c3": "confirm", "c4": "deny"}
NOT_FOUND = note_missing(MISSING)
DENIED = denied("delete_note")
TIMEOUT = 120  # a safety net for a loaded machine, never a pace


@dataclass
class World:
    template: Path
    note_id: str
    root: Path

    def home(self, name: str) -> Path:
        """A copy of the prepared workspace, its ids intact."""
        home = self.root / name
        shutil.copytree(self.template, home)
        return home


def noteloom(*args: str, home: Path, stdin: Any = subprocess.DEVNULL, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTELOOM_")}
    return subprocess.run([sys.executable, "-m", "noteloom", *args, "--home", str(home)],
                          **({"input": input} if input is not None else {"stdin": stdin}),
                          capture_output=True, text=True, env=env, timeout=TIMEOUT, check=False)


@pytest.fixture
def world(tmp_path: Path) -> World:
    template = tmp_path / "template"
    app = open_app(load_settings({"NOTELOOM_HOME": str(template)}), load_entry_points=False)
    try:
        ws = app.workspace
        travel = ws.create_notebook("Travel")
        packing = ws.create_notebook("Packing", travel.id)
        note = ws.create_note("Packing list", "tent, stove", packing.id, tags=["gear"])
        for name in ("update_note", "manage_tags", "delete_note"):
            app.registry.set_enabled(ws, name, True)
    finally:
        app.close()
    script = tmp_path / "conversation.json"
    script.write_text(json.dumps([
        {"text": "Let me tidy that note.", "tool_calls": [
            {"id": "c1", "name": "read_note", "arguments": {"id": MISSING}},
            {"id": "c2", "name": "manage_tags", "arguments": {"id": note.id, "add": ["packed"]}},
            {"id": "c3", "name": "update_note", "arguments": {"id": note.id, "body": NEW_BODY}},
            {"id": "c4", "name": "delete_note", "arguments": {"id": note.id}},
        ]},
        {"text": "Done."},
    ]))
    (template / "noteloom.toml").write_text(f"[providers.play]\ntype = \"scripted\"\nscript = {json.dumps(str(script))}\n")
    # The deny comes from the workspace setting, set the way a user sets it.
    set_deny = noteloom("tools", "policy", "delete_note", "deny", home=template)
    assert set_deny.returncode == 0 and set_deny.stdout.strip() == "delete_note: deny", set_deny.stderr
    listed = {line.split()[0]: line.split() for line in noteloom("tools", "list", home=template).stdout.splitlines()}
    assert listed["delete_note"][3] == "deny" and listed["update_note"][3] == "confirm*"
    assert listed["manage_tags"][3] == "confirm*" and listed["search_notes"][3] == "auto"
    return World(template, note.id, tmp_path)


def state(home: Path, note_id: str) -> tuple[str, list[str], bool]:
    """The note's body and tags, and whether it is still out of the trash."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        note = app.workspace.get_note(note_id, include_deleted=True)
        return note.body, sorted(note.tags), note.deleted_time is None
    finally:
        app.close()


def stable(content: str) -> Any:
    """A tool result without its clock readings (every surface runs at another moment)."""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if not k.endswith("_time")}
    return value


# -- the surfaces -----------------------------------------------------------------------------


@asynccontextmanager
async def web(home: Path) -> AsyncIterator[tuple[App, httpx2.AsyncClient]]:
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        transport = httpx2.ASGITransport(app=create_web_app(app))
        async with running_chat(app), httpx2.AsyncClient(
            transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {access_token(app)}"}
        ) as c:
            yield app, c
    finally:
        app.close()


async def settled(c: httpx2.AsyncClient, message_id: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        while True:
            view: dict[str, Any] = (await c.get(f"/api/v1/chat/messages/{message_id}")).json()
            if view["status"] != "running":
                return view
            await anyio.sleep(0.02)


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":") and ": " in line)
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


async def test_one_conversation_shows_the_same_decisions_results_and_errors_on_every_surface(world: World) -> None:
    # 1. The web chat: the card names the note by title and notebook; approve it.
    home = world.home("web")
    async with web(home) as (_, c):
        sent = (await c.post("/api/v1/chat/send", json={"message": "tidy my packing list",
                                                       "controls": {"model": "play"}})).json()
        parked = await settled(c, sent["message_id"])
        assert parked["status"] == "awaiting_confirmation", parked
        assert parked["pending_action"]["tool"] == "update_note"
        assert parked["pending_action"]["description"] == CARD
        r = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/confirm", json={"decision": "approve"})
        assert r.status_code == 202
        done = await settled(c, sent["message_id"])
        assert done["status"] == "complete" and done["content"].endswith("Done.")
        events = sse((await c.get(f"/api/v1/chat/messages/{sent['message_id']}/events")).text)
    web_policies = {d["call_id"]: d["policy"] for k, d in events if k == "tool_call"}
    web_results = {d["call_id"]: (d["is_error"], d["content"]) for k, d in events if k == "tool_result"}
    assert web_policies == POLICIES
    assert web_results["c1"] == (True, NOT_FOUND)
    assert web_results["c4"] == (True, DENIED)
    assert web_results["c2"][0] is False and web_results["c3"][0] is False
    assert state(home, world.note_id) == (NEW_BODY, ["gear", "packed"], True)

    # 2. MCP (the official client over HTTP), calling the same tools directly: the same
    # results and error texts; confirm runs (MCP cannot ask yet), deny refuses.
    home = world.home("mcp")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        with live_server(app) as srv:
            client = Client(streamable_http_client(srv.mcp_url, http_client=httpx2.AsyncClient(headers=srv.auth)),
                            mode="legacy")
            async with client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                hints = {n: tools[n].annotations.destructive_hint for n in ("read_note", "manage_tags", "update_note",
                                                                             "delete_note")}  # type: ignore[union-attr]
                assert hints == {"read_note": False, "manage_tags": True, "update_note": True, "delete_note": True}
                mcp_results = {}
                for cid, name, args in [
                    ("c1", "read_note", {"id": MISSING}),
                    ("c2", "manage_tags", {"id": world.note_id, "add": ["packed"]}),
                    ("c3", "update_note", {"id": world.note_id, "body": NEW_BODY}),
                    ("c4", "delete_note", {"id": world.note_id}),
                ]:
                    out = await client.call_tool(name, args)
                    mcp_results[cid] = (out.is_error, out.content[0].text)  # type: ignore[union-attr]
    finally:
        app.close()
    assert mcp_results["c1"] == web_results["c1"] and mcp_results["c4"] == web_results["c4"]
    for cid in ("c2", "c3"):
        assert mcp_results[cid][0] is False
        assert stable(mcp_results[cid][1]) == stable(web_results[cid][1]), cid
    assert state(home, world.note_id) == (NEW_BODY, ["gear", "packed"], True)

    # 2b. MCP over stdio: the same dispatch, the same texts.
    home = world.home("mcp-stdio")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTELOOM_")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "noteloom", "mcp", "--home", str(home)], env=env)
    with (world.root / "stdio.log").open("w+") as errlog, anyio.fail_after(TIMEOUT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as stdio:  # type: ignore[arg-type]
            for cid, name, args in [("c1", "read_note", {"id": MISSING}), ("c4", "delete_note", {"id": world.note_id})]:
                out = await stdio.call_tool(name, args)
                assert (out.is_error, out.content[0].text) == web_results[cid], cid  # type: ignore[union-attr]

    # 3. `noteloom ask` without a terminal: the held call is declined, the rest is the same.
    home = world.home("ask-piped")
    run = noteloom("ask", "tidy my packing list", "-m", "play", home=home)
    assert run.returncode == 0, run.stderr
    assert f"declined: {CARD}" in run.stderr and "pass --yes" in run.stderr
    assert f"✗ {NOT_FOUND}" in run.stderr and f"✗ {DENIED}" in run.stderr
    assert run.stdout.rstrip().endswith("Done.")
    assert state(home, world.note_id) == ("tent, stove", ["gear", "packed"], True)

    # 4. `noteloom ask` on a terminal: asked y/N with the same card; "y" approves.
    home = world.home("ask-tty")
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"y\n")
        run = noteloom("ask", "tidy my packing list", "-m", "play", home=home, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert run.returncode == 0, run.stderr
    (asked,) = [line for line in run.stderr.splitlines() if "[y/N]" in line]
    assert CARD in asked
    assert f"✗ {NOT_FOUND}" in run.stderr and f"✗ {DENIED}" in run.stderr
    assert state(home, world.note_id) == (NEW_BODY, ["gear", "packed"], True)

    # 5. `noteloom ask --yes --json`: approved without a question, deny still refuses, and
    # every tool result is the very one the web chat's model read.
    home = world.home("ask-yes")
    run = noteloom("ask", "tidy my packing list", "-m", "play", "--yes", "--json", home=home)
    assert run.returncode == 0, run.stderr
    assert f"approved (--yes): {CARD}" in run.stderr
    answered = {c["name"]: (c["is_error"], c["result"]) for c in json.loads(run.stdout)["tool_calls"]
                if c["result"] is not None}
    by_name = {"c1": "read_note", "c2": "manage_tags", "c3": "update_note", "c4": "delete_note"}
    for cid, name in by_name.items():
        assert answered[name][0] == web_results[cid][0], cid
        assert stable(answered[name][1]) == stable(web_results[cid][1]), cid
    assert state(home, world.note_id) == (NEW_BODY, ["gear", "packed"], True)

    # 6. `noteloom chat` with piped input: no terminal, so the held call is declined.
    home = world.home("chat")
    run = noteloom("chat", "-m", "play", home=home, input="tidy my packing list\n")
    assert run.returncode == 0, run.stderr
    assert f"declined: {CARD}" in run.stderr
    assert f"✗ {NOT_FOUND}" in run.stderr and f"✗ {DENIED}" in run.stderr
    assert state(home, world.note_id) == ("tent, stove", ["gear", "packed"], True)


async def test_a_tool_bug_and_an_embedding_failure_read_alike_over_mcp_and_to_the_model(app: App) -> None:
    from noteloom.agent import ToolResultEvent, run
    from noteloom.errors import EmbeddingError
    from noteloom.messages import Message
    from noteloom.providers.scripted import ScriptedProvider
    from noteloom.tools import ToolDef

    async def embeds(ctx: Any, args: dict[str, Any]) -> Any:
        raise EmbeddingError("the embedding endpoint at http://127.0.0.1:9/v1 did not answer; start it or change [embeddings]")

    async def buggy(ctx: Any, args: dict[str, Any]) -> Any:
        raise KeyError("secret internal detail")

    for name, handler in (("embeds", embeds), ("buggy", buggy)):
        app.registry.register(ToolDef(name, "", {"type": "object"}, handler, default_enabled=True))
    provider = ScriptedProvider("s", [{"tool_calls": [{"id": "e", "name": "embeds"}, {"id": "b", "name": "buggy"}]},
                                      {"text": "ok"}])
    seen: dict[str, str] = {}

    async def on_event(event: Any) -> None:
        if isinstance(event, ToolResultEvent):
            seen[event.call_id] = event.content

    await run(provider, "m", "", [Message.user("go")], app.registry.enabled(app.workspace), app.tool_context(),
              on_event=on_event)
    with live_server(app) as srv:
        client = Client(streamable_http_client(srv.mcp_url, http_client=httpx2.AsyncClient(headers=srv.auth)),
                        mode="legacy")
        async with client:
            embedded = await client.call_tool("embeds", {})
            assert embedded.is_error is True and embedded.content[0].text == seen["e"]  # type: ignore[union-attr]
            assert "did not answer" in seen["e"]
            from mcp.shared.exceptions import MCPError

            with pytest.raises(MCPError) as info:
                await client.call_tool("buggy", {})
    assert info.value.error.code == -32603 and "secret" not in info.value.error.message
    assert "internal error" in seen["b"] and "secret" not in seen["b"]
