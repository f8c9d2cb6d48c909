"""Generic reads wired into chats and recipes: a chat with data on, or an agent recipe listing a
data tool, gets the one-line catalog of the sources it may read in its system prompt; when
it can read none (nothing opted in, or its allowlist leaves nothing) neither data tool is
offered. A recipe's own allowlist (``data_sources``) is checked, stored, exported, set from
the command line, the API and the page's options, and reaches the run's ToolContext."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from chat_support import running_chat, scripted, settle
from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.data import catalog_line
from noteloom.errors import InvalidInput
from noteloom.recipes.model import check_spec
from recipe_support import running, service
from recipe_support import scripted as scripted_recipe
from test_recipes_api import client

pytestmark = pytest.mark.anyio
DATA_TOOLS = {"describe_data", "query_data"}
TOML = """
[data]
workspace = ["notes", "todos", "tags"]
"""


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


# -- a recipe's allowlist ---------------------------------------------------------------------


def test_the_allowlist_is_checked_every_source_by_default_and_empty_means_none() -> None:
    assert check_spec({"name": "r", "prompt": "p"}).data_sources is None
    assert check_spec({"name": "r", "prompt": "p", "data_sources": []}).data_sources == ()
    spec = check_spec({"name": "r", "prompt": "p", "data_sources": ["todos", "crm", "todos", "crm.customers"]})
    assert spec.data_sources == ("todos", "crm", "crm.customers")
    assert check_spec({"name": "r", "prompt": "p", "data_sources": "notes, todos"}).data_sources == ("notes", "todos")
    # An edit that leaves the field out keeps it; null sets it back to every source.
    assert check_spec({"prompt": "q"}, base=spec).data_sources == spec.data_sources
    assert check_spec({"data_sources": None}, base=spec).data_sources is None
    for bad in (["two words"], [""], [3], {"notes": True}, ["x" * 201], ["a\nb"]):
        with pytest.raises(InvalidInput) as caught:
            check_spec({"name": "r", "prompt": "p", "data_sources": bad})
        assert caught.value.field == "data_sources"


def test_the_allowlist_is_stored_exported_and_imported_as_written(data_app: App) -> None:
    owner = data_app.workspace.ensure_owner()
    svc = service(data_app)
    for name, sources in (("every", None), ("none", []), ("some", ["todos", "notes"])):
        view = svc.add(owner, {"name": name, "prompt": "p", "data_sources": sources})
        assert view["data_sources"] == sources
        assert svc.get(owner, name)["data_sources"] == sources
    text = svc.export(owner)
    assert [r["data_sources"] for r in yaml.safe_load(text)["recipes"]] == [None, [], ["todos", "notes"]]
    for name in ("every", "none", "some"):
        svc.remove(owner, name)
    imported = svc.import_(owner, text)
    assert [svc.get(owner, r["id"])["data_sources"] for r in imported] == [None, [], ["todos", "notes"]]


def test_saving_warns_of_unopted_names_and_of_data_tools_that_will_not_be_offered(data_app: App) -> None:
    owner = data_app.workspace.ensure_owner()
    view = service(data_app).add(owner, {"name": "r", "prompt": "p", "tools": ["query_data"],
                                         "data_sources": ["crm"]})
    assert view["warnings"] == [
        "data_sources: 'crm' not opted in under [data] in noteloom.toml; it reads nothing from them until they are",
        "query_data: no data source is readable for this recipe, so it is not offered when it runs",
    ]
    assert service(data_app).add(owner, {"name": "s", "prompt": "p", "tools": ["query_data"],
                                         "data_sources": ["notes"]})["warnings"] == []


def test_the_command_line_sets_the_allowlist(data_app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTELOOM_HOME", str(data_app.settings.data_dir))
    runner = CliRunner()

    def recipes(*args: str) -> Any:
        result = runner.invoke(cli, ["recipes", *args, "--json"])
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
        return json.loads(result.stdout)

    made = recipes("add", "reader", "--prompt", "p", "--data-source", "todos", "--data-source", "crm.customers")
    assert made["data_sources"] == ["todos", "crm.customers"]
    assert recipes("edit", "reader", "--no-data-sources")["data_sources"] == []
    assert recipes("edit", "reader", "--data-source", "notes")["data_sources"] == ["notes"]
    assert recipes("edit", "reader", "--all-data-sources")["data_sources"] is None
    both = runner.invoke(cli, ["recipes", "edit", "reader", "--data-source", "notes", "--no-data-sources"])
    assert both.exit_code == 2 and "not more than one" in both.stderr
    bad = runner.invoke(cli, ["recipes", "edit", "reader", "--data-source", "a\tb"])
    assert bad.exit_code == 2 and "--data-source" in bad.stderr, bad.stderr


async def test_the_api_sets_the_allowlist_and_the_options_list_the_opted_in_sources(data_app: App) -> None:
    async with client(data_app) as c:
        options = (await c.get("/api/v1/recipes/options")).json()
        assert options["data_sources"] == [{"name": n, "description": data_app.services.get("data").description(n)}
                                           for n in ("notes", "todos", "tags")]
        made = await c.post("/api/v1/recipes", json={"name": "reader", "prompt": "p", "data_sources": ["todos"]})
        assert made.status_code == 201 and made.json()["data_sources"] == ["todos"]
        rid = made.json()["id"]
        patched = await c.patch(f"/api/v1/recipes/{rid}", json={"data_sources": []})
        assert patched.json()["data_sources"] == []
        kept = await c.patch(f"/api/v1/recipes/{rid}", json={"prompt": "q"})
        assert kept.json()["data_sources"] == []
        every = await c.patch(f"/api/v1/recipes/{rid}", json={"data_sources": None})
        assert every.json()["data_sources"] is None
        bad = await c.patch(f"/api/v1/recipes/{rid}", json={"data_sources": ["two words"]})
        assert bad.status_code == 422 and "data_sources" in bad.text


async def test_a_run_reads_only_what_the_recipes_allowlist_lets_it(data_app: App) -> None:
    owner = data_app.workspace.ensure_owner()
    requests: list[Any] = []

    def step(request: Any) -> dict[str, Any]:
        requests.append(request)
        if len(requests) == 1:
            return {"tool_calls": [{"name": "describe_data", "arguments": {}}]}
        return {"text": "Report."}

    scripted_recipe(data_app, [step], loop=True)
    service(data_app).add(owner, {"name": "reader", "prompt": "List what is due.", "model": "play",
                                  "tools": ["describe_data", "query_data"], "data_sources": ["todos"]})
    async with running(data_app):
        run = await service(data_app).run_now(owner, "reader")
    assert run["status"] == "succeeded", run
    line = _line(data_app, frozenset({"todos"}))
    assert line in requests[0].system_text and "notes (" not in line
    # The run's ToolContext carries the allowlist: describe_data lists the one source.
    result = next(r for m in requests[1].messages for r in m.tool_results)
    assert [s["name"] for s in json.loads(result.content)["sources"]] == ["todos"]


async def test_a_recipe_whose_allowlist_leaves_nothing_is_not_offered_the_data_tools(data_app: App) -> None:
    _, request = await _run(data_app, tools=["describe_data", "query_data", "search_notes"], data_sources=[])
    names = {t.name for t in request.tools}
    assert "search_notes" in names and not DATA_TOOLS & names
    assert "Data you can read" not in request.system_text
