"""MCP prompts and completion with the clients users have: the official SDK client over HTTP
(a serving process; both protocol eras) and stdio, and fastmcp. They list the prompts, get
each with real notes and read the content (the week's notes, embedded note:// resources),
complete arguments, meet the errors, and a notebook-scoped token is refused another
notebook as if it were missing; a plugin's prompts (the conformance suite's) are served."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from fastmcp import Client as FastClient
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from livesrv import LiveServer, live_server, live_server_process
from noteloom.accounts import TokenScopes
from noteloom.app import App, open_app
from noteloom.config import load_settings
from test_mcp_clients import inspector, needs_inspector, stdio_params
from test_mcp_prompts import BUILT_IN, docs_example_plugin, make_world


@pytest.fixture
def world(app: App) -> dict[str, Any]:
    return make_world(app)


@pytest.fixture
def served(app: App, world: dict[str, Any]) -> Iterator[LiveServer]:
    with live_server_process(Path(app.settings.data_dir)) as srv:
        yield srv


def official(srv: LiveServer, mode: str = "legacy", token: str | None = None) -> Client:
    auth = {"Authorization": f"Bearer {token}"} if token else srv.auth
    http = httpx2.AsyncClient(headers=auth, timeout=httpx2.Timeout(120))
    return Client(streamable_http_client(srv.mcp_url, http_client=http), mode=mode)  # type: ignore[arg-type]


def texts(result: Any) -> str:
    return "\n".join(m.content.text for m in result.messages if isinstance(m.content, mt.TextContent))


def embedded(result: Any) -> dict[str, str]:
    """The note:// resources a prompt embeds, URI to text."""
    return {str(m.content.resource.uri): m.content.resource.text for m in result.messages
            if isinstance(m.content, mt.EmbeddedResource)}


async def uses_the_prompts(client: Client, world: dict[str, Any]) -> None:
    """What every client must get: the five prompts, their content from real notes, completion, errors."""
    assert [p.name for p in (await client.list_prompts()).prompts] == BUILT_IN
    week = await client.get_prompt("weekly_review", {"notebook": "Work"})
    text = texts(week)
    assert "Launch plan" in text and "Beta checklist" in text and "Send invoice" in text and "Old idea" not in text
    notes = embedded(week)
    assert f"note://{world['launch'].id}" in notes and "Call Anna about the venue." in notes[f"note://{world['launch'].id}"]
    assert all(m.content.resource.mime_type == "text/markdown" for m in week.messages
               if isinstance(m.content, mt.EmbeddedResource))
    summary = await client.get_prompt("summarize", {"note": "Beta checklist"})
    assert list(embedded(summary)) == [f"note://{world['checklist'].id}"]
    todos = await client.get_prompt("note_to_todos", {"note": world["launch"].id})
    assert "into to-dos" in texts(todos)
    related = await client.get_prompt("related_notes", {"note": "Launch plan"})
    assert f"note://{world['checklist'].id}" in embedded(related)
    reply = await client.get_prompt("draft_reply", {"message": "Any news on the beta?", "query": "beta"})
    assert "<<UNTRUSTED_" in texts(reply) and f"note://{world['launch'].id}" in embedded(reply)
    done = await client.complete(mt.PromptReference(name="weekly_review"), {"name": "notebook", "value": "wo"})
    assert done.completion.values == ["Work", "Work/Projects"] and done.completion.total == 2
    tags = await client.complete(mt.PromptReference(name="draft_reply"), {"name": "query", "value": "tag:"},
                                 {"notebook": "Home"})
    assert tags.completion.values == ["tag:food"]
    with pytest.raises(MCPError) as info:
        await client.get_prompt("weekly_review", {})
    assert info.value.code == -32602 and "'notebook'" in str(info.value)
    with pytest.raises(MCPError) as info:
        await client.get_prompt("no_such_prompt")
    assert info.value.code == -32602 and "'no_such_prompt'" in str(info.value)
    with pytest.raises(MCPError) as info:
        await client.get_prompt("summarize", {"note": "Nothing like it"})
    assert info.value.code == -32602 and "no note is titled 'Nothing like it'" in str(info.value)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_client_over_http(served: LiveServer, world: dict[str, Any], mode: str) -> None:
    with anyio.fail_after(60):
        async with official(served, mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await uses_the_prompts(client, world)


@pytest.mark.anyio
async def test_the_official_client_over_stdio(app: App, world: dict[str, Any], tmp_path: Path) -> None:
    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(90):
        async with Client(stdio_client(stdio_params(app), errlog=errlog), mode="legacy") as client:  # type: ignore[arg-type]
            await uses_the_prompts(client, world)


@pytest.mark.anyio
async def test_the_fastmcp_client(served: LiveServer, world: dict[str, Any]) -> None:
    with anyio.fail_after(60):
        async with FastClient(served.mcp_url, auth=served.token) as client:
            assert [p.name for p in await client.list_prompts()] == BUILT_IN
            result = await client.get_prompt("summarize", {"query": "tag:launch"})
            assert set(embedded(result)) == {f"note://{world['launch'].id}", f"note://{world['checklist'].id}"}
            week = await client.get_prompt("weekly_review", {"notebook": "Work/Projects"})
            assert list(embedded(week)) == [f"note://{world['checklist'].id}"]
            titles = await client.complete(mt.PromptReference(name="summarize"), {"name": "note", "value": "laun"})
            assert titles.values == ["Launch plan"]
            ids = await client.complete(mt.ResourceTemplateReference(uri="note://{id}"), {"name": "id", "value": "Groc"})
            assert ids.values == [world["groceries"].id]


@pytest.mark.anyio
async def test_a_notebook_scoped_token_is_refused_another_notebook_like_a_missing_one(
    app: App, served: LiveServer, world: dict[str, Any]
) -> None:
    owner = app.workspace.ensure_owner()
    token = app.workspace.create_token(owner.id, name="home only", scopes=TokenScopes(notebooks=("Home",)))
    with anyio.fail_after(60):
        async with official(served, token=token) as client:
            messages: dict[str, str] = {}
            for notebook in ("Work", "Nowhere"):
                with pytest.raises(MCPError) as info:
                    await client.get_prompt("weekly_review", {"notebook": notebook})
                assert info.value.code == -32602
                messages[notebook] = str(info.value)
            assert messages["Work"] == messages["Nowhere"].replace("Nowhere", "Work")
            with pytest.raises(MCPError):
                await client.get_prompt("summarize", {"note": world["launch"].id})
            home = await client.get_prompt("weekly_review", {"notebook": "Home"})
            assert list(embedded(home)) == [f"note://{world['groceries'].id}"]
            offered = await client.complete(mt.PromptReference(name="weekly_review"), {"name": "notebook", "value": ""})
            assert offered.completion.values == ["Home"]


@pytest.fixture
def plugged(tmp_path: Path) -> Iterator[LiveServer]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "plugged")}), load_entry_points=False,
                 plugins=[docs_example_plugin()])
    try:
        with live_server(a) as srv:
            yield srv
    finally:
        a.close()


@pytest.mark.anyio
async def test_a_plugins_prompts_are_listed_and_served_over_http(plugged: LiveServer) -> None:
    with anyio.fail_after(60):
        async with official(plugged) as client:
            names = [p.name for p in (await client.list_prompts()).prompts]
            assert names == [*BUILT_IN, "test_simple_prompt", "test_prompt_with_arguments",
                             "test_prompt_with_embedded_resource", "test_prompt_with_image"]
            args = await client.get_prompt("test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"})
            assert texts(args) == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"
            res = await client.get_prompt("test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"})
            assert embedded(res) == {"test://example-resource": "Embedded resource content for testing."}
            image = await client.get_prompt("test_prompt_with_image")
            assert isinstance(image.messages[0].content, mt.ImageContent)
            assert image.messages[0].content.mime_type == "image/png"
            colours = await client.complete(mt.PromptReference(name="test_prompt_with_arguments"),
                                            {"name": "arg1", "value": "gr"})
            assert colours.completion.values == ["green"]
        async with FastClient(plugged.mcp_url, auth=plugged.token) as fast:
            simple = await fast.get_prompt("test_simple_prompt")
            assert texts(simple) == "This is a simple prompt for testing."


@needs_inspector
def test_the_inspector_lists_and_gets_prompts_over_stdio_and_http(app: App, served: LiveServer, world: dict[str, Any]) -> None:
    server = [sys.executable, "-m", "noteloom", "mcp", "--home", str(app.settings.data_dir)]
    listed = inspector(*server, "--method", "prompts/list")
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)["result"]["prompts"]] == BUILT_IN
    got = inspector(*server, "--method", "prompts/get", "--prompt-name", "weekly_review", "--prompt-args", "notebook=Work")
    assert got.returncode == 0, got.stderr
    messages = json.loads(got.stdout)["result"]["messages"]
    assert "Launch plan" in messages[0]["content"]["text"]
    attached = {m["content"]["resource"]["uri"]: m["content"]["resource"] for m in messages
                if m["content"]["type"] == "resource"}
    assert attached[f"note://{world['launch'].id}"]["mimeType"] == "text/markdown"
    auth = ["--header", f"Authorization: Bearer {served.token}"]
    over_http = inspector(served.mcp_url, *auth, "--method", "prompts/get", "--prompt-name", "note_to_todos",
                          "--prompt-args", "note=Launch plan")
    assert over_http.returncode == 0, over_http.stderr
    assert json.loads(over_http.stdout)["result"]["messages"][1]["content"]["resource"]["uri"] == f"note://{world['launch'].id}"
    missing = inspector(*server, "--method", "prompts/get", "--prompt-name", "weekly_review")
    assert missing.returncode != 0


@pytest.mark.anyio
async def test_a_stdio_client_is_told_when_a_switch_hides_prompts(app: App, world: dict[str, Any], tmp_path: Path) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.PromptListChangedNotification):
            changed.set()

    errlog = (tmp_path / "stderr.log").open("w+")
    with anyio.fail_after(90):
        async with Client(stdio_client(stdio_params(app), errlog=errlog), mode="legacy",  # type: ignore[arg-type]
                          message_handler=on_message) as client:
            assert [p.name for p in (await client.list_prompts()).prompts] == BUILT_IN
            on = False
            while not changed.is_set():  # a switch set before the server's first look is its starting point
                await anyio.to_thread.run_sync(app.registry.set_enabled, app.workspace, "read_note", on)
                with anyio.move_on_after(5):
                    await changed.wait()
                on = not on
            shown = [p.name for p in (await client.list_prompts()).prompts]
            assert shown == ([] if not app.registry.is_enabled(app.workspace, "read_note") else BUILT_IN)
