"""MCP ``completion/complete`` in-process: prompt arguments (notebook paths, note titles, tags,
search filters) ranked prefix first, ``context.arguments`` honoured, at most 100 values with
``total`` and ``hasMore``, resource templates through the resources feature, what a scoped
token may not see never suggested, and the errors."""

from __future__ import annotations

from typing import Any

import pytest

from noteloom.accounts import TokenScopes
from noteloom.app import App
from noteloom.mcp import McpServer
from noteloom.mcp.completion import rank
from test_mcp_prompts import Peer, make_world, scoped


@pytest.fixture
def world(app: App) -> dict[str, Any]:
    return make_world(app)


@pytest.fixture
def peer(app: App) -> Peer:
    return Peer(McpServer(app))


def prompt_ref(name: str) -> dict[str, str]:
    return {"type": "ref/prompt", "name": name}


async def complete(peer: Peer, ref: dict[str, str], name: str, value: str,
                   context: dict[str, str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    completion: dict[str, Any] = (await peer.ok("completion/complete", params))["completion"]
    return completion


def test_ranking_puts_prefixes_first_then_containing_then_all_words_each_alphabetically() -> None:
    values = ["Work/Projects", "Homework", "work notes", "Projects at work", "Other", "Work/Projects"]
    assert rank(values, "WOR") == ["work notes", "Work/Projects", "Homework", "Projects at work"]
    assert rank(values, "work proj") == ["Projects at work", "Work/Projects"]
    assert rank(values, "") == ["Homework", "Other", "Projects at work", "work notes", "Work/Projects"]


@pytest.mark.anyio
async def test_notebook_paths_note_titles_and_tags(peer: Peer, world: dict[str, Any]) -> None:
    assert (await complete(peer, prompt_ref("weekly_review"), "notebook", "w")) == {
        "values": ["Work", "Work/Projects"], "total": 2, "hasMore": False}
    assert (await complete(peer, prompt_ref("weekly_review"), "notebook", "proj"))["values"] == ["Work/Projects"]
    every = await complete(peer, prompt_ref("weekly_review"), "notebook", "")
    assert every["values"] == ["Home", "Work", "Work/Projects"]
    titles = await complete(peer, prompt_ref("summarize"), "note", "la")
    assert titles["values"] == ["Launch plan"]
    assert (await complete(peer, prompt_ref("note_to_todos"), "note", "beta CH"))["values"] == ["Beta checklist"]
    tags = await complete(peer, prompt_ref("summarize"), "query", "tag:")
    assert tags["values"] == ["tag:food", "tag:launch"]
    assert (await complete(peer, prompt_ref("summarize"), "query", "notebook:pro"))["values"] == ["notebook:Projects"]
    assert (await complete(peer, prompt_ref("draft_reply"), "message", "any")) == {
        "values": [], "total": 0, "hasMore": False}  # free text: nothing to suggest


@pytest.mark.anyio
async def test_the_context_arguments_narrow_the_values(peer: Peer, world: dict[str, Any]) -> None:
    ref = prompt_ref("draft_reply")
    assert (await complete(peer, ref, "query", "tag:", {"notebook": "Home"}))["values"] == ["tag:food"]
    assert (await complete(peer, ref, "query", "tag:", {"notebook": "Work"}))["values"] == ["tag:launch"]
    assert (await complete(peer, ref, "query", "", {"notebook": "Home"}))["values"] == ["Groceries"]
    assert (await complete(peer, ref, "query", "tag:", {"notebook": "Nowhere"}))["values"] == []


@pytest.mark.anyio
async def test_at_most_100_values_with_total_and_has_more(peer: Peer, app: App, world: dict[str, Any]) -> None:
    for i in range(150):
        app.workspace.create_note(f"Bulk note {i:03}", "", world["home"].id)
    many = await complete(peer, prompt_ref("summarize"), "note", "bulk")
    assert len(many["values"]) == 100 and many["total"] == 150 and many["hasMore"] is True
    assert all(v.startswith("Bulk note") for v in many["values"])
    few = await complete(peer, prompt_ref("summarize"), "note", "bulk note 14")
    assert few["values"] == [f"Bulk note {i}" for i in range(140, 150)] and few["hasMore"] is False


@pytest.mark.anyio
async def test_a_scoped_token_is_offered_only_what_it_may_see(app: App, world: dict[str, Any]) -> None:
    home_only = await scoped(app, TokenScopes(notebooks=("Home",)))
    assert (await complete(home_only, prompt_ref("weekly_review"), "notebook", ""))["values"] == ["Home"]
    assert (await complete(home_only, prompt_ref("summarize"), "note", "la"))["values"] == []
    assert (await complete(home_only, prompt_ref("summarize"), "query", "tag:"))["values"] == ["tag:food"]
    resource = await complete(home_only, {"type": "ref/resource", "uri": "note://{id}"}, "id", "")
    assert resource["values"] == [world["groceries"].id]


@pytest.mark.anyio
async def test_resource_templates_complete_through_the_resources_feature(peer: Peer, world: dict[str, Any]) -> None:
    found = await complete(peer, {"type": "ref/resource", "uri": "note://{id}"}, "id", "Launch")
    assert found["values"] == [world["launch"].id] and found["total"] == 1
    assert (await complete(peer, {"type": "ref/resource", "uri": "test://{x}"}, "x", "a"))["values"] == []


@pytest.mark.anyio
async def test_a_template_whose_read_tool_is_off_completes_to_nothing(app: App, peer: Peer,
                                                                      world: dict[str, Any]) -> None:
    app.registry.set_enabled(app.workspace, "read_note", False)
    found = await complete(peer, {"type": "ref/resource", "uri": "note://{id}"}, "id", "Launch")
    assert found["values"] == [] and found["total"] == 0


@pytest.mark.anyio
async def test_bad_requests_are_32602(peer: Peer, world: dict[str, Any], app: App) -> None:
    async def error(params: dict[str, Any]) -> str:
        e = await peer.error("completion/complete", params)
        assert e["code"] == -32602, e
        message: str = e["message"]
        return message

    arg = {"name": "note", "value": "x"}
    assert "'nope'" in await error({"ref": prompt_ref("nope"), "argument": arg})
    assert "no argument 'colour'" in await error({"ref": prompt_ref("summarize"), "argument": {"name": "colour", "value": ""}})
    assert "neither ref/prompt nor ref/resource" in await error({"ref": {"type": "ref/tool"}, "argument": arg})
    assert "ref must be" in await error({"argument": arg})
    assert "argument must be" in await error({"ref": prompt_ref("summarize")})
    assert "argument.value" in await error({"ref": prompt_ref("summarize"), "argument": {"name": "note", "value": 3}})
    assert "context.arguments" in await error({"ref": prompt_ref("summarize"), "argument": arg,
                                               "context": {"arguments": {"notebook": 1}}})
    assert "uri" in await error({"ref": {"type": "ref/resource"}, "argument": arg})
    app.registry.set_enabled(app.workspace, "read_note", False)
    hidden = Peer(McpServer(app))  # a prompt not listed is not completed either
    assert (await hidden.error("completion/complete", {"ref": prompt_ref("summarize"), "argument": arg}))["code"] == -32602
