"""Generic reads wired into chats and recipes: a chat with data on, or an agent recipe listing a
data tool, gets the one-line catalog of the sources it may read in its system prompt; when
it can read none (nothing opted in, or its allowlist leaves nothing) neither data tool is
offered. A recipe's own allowlist (``data_sources``) is checked, stored, exported, set from
the command line, the API and the page's options, and reaches the run's ToolContext."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_support import running_chat, scripted, settle
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.data import catalog_line
from recipe_support import running, service
from recipe_support import scripted as scripted_recipe

pytestmark = pytest.mark.anyio
DATA_TOOLS = {"describe_data", "query_data"}
TOML = """
[data]
workspace = ["notes", "todos", "tags"]
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _open(tmp_path: Path, toml: str) -> App:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "noteloom.toml").write_text(toml, encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    for name in DATA_TOOLS:
        app.registry.set_enabled(app.workspace, name, True)
    return app


@pytest.fixture
def data_app(tmp_path: Path) -> Iterator[App]:
    """Notes, to-dos and tags opted in; both data tools enabled."""
    app = _open(tmp_path, TOML)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def bare_app(tmp_path: Path) -> Iterator[App]:
    """Nothing opted in under [data]; both data tools enabled all the same."""
    app = _open(tmp_path, "")
    try:
        yield app
    finally:
        app.close()


def _line(app: App, sources: frozenset[str] | None = None) -> str:
    return catalog_line(app.tool_context(app.workspace.ensure_owner(), data_sources=sources))


# -- chat ----------------------------------------------------------------------------------


async def _chat_request(app: App, **controls: Any) -> Any:
    owner = app.workspace.ensure_owner()
    provider = scripted(app, [{"text": "ok"}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "What is due this week?", controls={"model": "play:script", **controls})
        assert (await settle(chat, owner, sent.message_id))["status"] == "complete"
    return provider.requests[0]


async def test_a_chat_with_data_on_gets_the_catalog_line_and_both_tools(data_app: App) -> None:
    request = await _chat_request(data_app, data_access=True)
    line = _line(data_app)
    assert line.startswith("Data you can read with query_data") and "notes (" in line and "tags (" in line
    assert line in request.system_text
    assert {t.name for t in request.tools} >= DATA_TOOLS


async def test_a_chat_allowlist_narrows_the_catalog_line(data_app: App) -> None:
    request = await _chat_request(data_app, data_access=True, data_sources=["todos"])
    line = _line(data_app, frozenset({"todos"}))
    assert line in request.system_text
    assert "todos (" in line and "notes (" not in line and "tags (" not in line
    assert {t.name for t in request.tools} >= DATA_TOOLS


async def test_a_chat_with_data_off_gets_neither_the_line_nor_the_tools(data_app: App) -> None:
    request = await _chat_request(data_app, data_access=False)
    assert "Data you can read" not in request.system_text
    assert not DATA_TOOLS & {t.name for t in request.tools}


async def test_a_chat_whose_allowlist_leaves_nothing_is_offered_neither_data_tool(data_app: App) -> None:
    for sources in ([], ["crm"]):  # empty, or naming only a source the workspace did not opt in
        request = await _chat_request(data_app, data_access=True, data_sources=sources)
        assert "Data you can read" not in request.system_text
        assert not DATA_TOOLS & {t.name for t in request.tools}
        assert "search_notes" in {t.name for t in request.tools}  # the rest is still offered


async def test_a_chat_in_a_workspace_that_opted_nothing_in_is_offered_neither_data_tool(bare_app: App) -> None:
    request = await _chat_request(bare_app, data_access=True)
    assert _line(bare_app) == ""
    assert "Data you can read" not in request.system_text
    assert not DATA_TOOLS & {t.name for t in request.tools}


# -- recipe runs -----------------------------------------------------------------------------


def _recorder(app: App) -> list[Any]:
    """Every model request of the run (the scripted model answers each with a report)."""
    requests: list[Any] = []

    def step(request: Any) -> dict[str, Any]:
        requests.append(request)
        return {"text": "Report."}

    scripted_recipe(app, [step], loop=True)
    return requests


async def _run(app: App, **spec: Any) -> tuple[dict[str, Any], Any]:
    owner = app.workspace.ensure_owner()
    requests = _recorder(app)
    service(app).add(owner, {"name": "reader", "prompt": "List what is due.", "model": "play", **spec})
    async with running(app):
        run = await service(app).run_now(owner, "reader")
    assert run["status"] == "succeeded", run
    return run, requests[0]


async def test_a_recipe_listing_a_data_tool_gets_the_catalog_line(data_app: App) -> None:
    _, request = await _run(data_app, tools=["describe_data", "query_data", "search_notes"])
    assert _line(data_app) in request.system_text
    assert {t.name for t in request.tools} >= {*DATA_TOOLS, "search_notes"}


async def test_a_recipe_without_data_tools_gets_no_catalog_line(data_app: App) -> None:
    _, request = await _run(data_app, tools=["search_notes"])
    assert "Data you can read" not in request.system_text


async def test_a_recipe_that_can_read_nothing_is_not_offered_the_data_tools_and_its_trace_says_so(
    bare_app: App,
) -> None:
    run, request = await _run(bare_app, tools=["describe_data", "query_data", "search_notes"])
    assert "Data you can read" not in request.system_text
    names = {t.name for t in request.tools}
    assert "search_notes" in names and not DATA_TOOLS & names
    notes = [e["data"]["text"] for e in run["events"] if e["kind"] == "note"]
    assert any(n.startswith("tool 'query_data' is not offered: no data source is readable") for n in notes), notes
