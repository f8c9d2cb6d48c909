"""The tool registry: registration through the plugin hook, toggles, validation, the scope,
and the CLI that drives them (`noteloom tools …`, `noteloom mcp enable|disable|status`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.errors import EmbeddingError, NotFound, QueryError, SectionError
from noteloom.plugins import DEFAULT_PLUGINS, hookimpl, plugin_manager
from noteloom.tools import (
    SCOPE_KEY,
    NotebookScope,
    ToolArgumentError,
    ToolContext,
    ToolDef,
    ToolError,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    UnknownTool,
)
from noteloom.workspace import Notebook

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"], "additionalProperties": False}


async def _echo(ctx: Any, args: dict[str, Any]) -> Any:
    return {"n": args["n"]}


class WordCount:
    """A third-party plugin, registered the way installed packages are."""

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        register(ToolDef(name="word_count", description="count", input_schema=SCHEMA, handler=_echo))
        register(ToolDef(name="shred", description="destroys", input_schema=SCHEMA, handler=_echo, effect="destructive"))


def test_the_built_in_tools_come_through_the_same_hook_as_plugins(tmp_path: Path) -> None:
    assert "noteloom.default_plugins.workspace_tools" in DEFAULT_PLUGINS
    pm = plugin_manager([WordCount()], load_entry_points=False)
    assert "noteloom.default_plugins.workspace_tools" in {pm.get_name(p) for p in pm.get_plugins()}
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), plugins=[WordCount()], load_entry_points=False)
    try:
        names = {t.name for t in app.registry.all()}
        assert {"word_count", "shred", "search_notes", "create_note"} <= names
        enabled = {t.name for t in app.registry.enabled(app.workspace)}
        assert "word_count" in enabled and "shred" not in enabled  # only read tools start on
    finally:
        app.close()


def test_a_tool_name_is_registered_once() -> None:
    registry = ToolRegistry()
    registry.register(ToolDef(name="t", description="", input_schema=SCHEMA, handler=_echo))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(ToolDef(name="t", description="", input_schema=SCHEMA, handler=_echo))


def test_annotations_follow_the_effect() -> None:
    read = ToolDef(name="r", description="", input_schema=SCHEMA, handler=_echo, title="Read")
    gone = ToolDef(name="d", description="", input_schema=SCHEMA, handler=_echo, effect="destructive")
    assert read.annotations == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                "openWorldHint": False, "title": "Read"}
    assert gone.annotations["destructiveHint"] is True and gone.annotations["readOnlyHint"] is False
    assert ToolDef(name="w", description="", input_schema=SCHEMA, handler=_echo, effect="write", default_enabled=True).enabled_by_default


def test_toggles_are_settings_and_one_read_brings_toggles_and_scope(app: App) -> None:
    registry, ws = app.registry, app.workspace
    registry.set_enabled(ws, "create_note", True)
    registry.set_enabled(ws, "read_note", False)
    ws.set_setting(SCOPE_KEY, ["Work"])
    assert ws.get_setting("tool.create_note.enabled") is True
    settings = registry.read_settings(ws)
    assert settings.is_enabled(registry.get("create_note")) and not settings.is_enabled(registry.get("read_note"))
    assert settings.scope.patterns == ["Work"]
    names = {t.name for t in registry.enabled(ws, settings)}
    assert "create_note" in names and "read_note" not in names
    with pytest.raises(UnknownTool):
        registry.enabled_tool(ws, "read_note")
    with pytest.raises(UnknownTool):
        registry.enabled_tool(ws, "no_such_tool", settings)
    with pytest.raises(UnknownTool):
        registry.set_enabled(ws, "no_such_tool", True)


@pytest.mark.anyio
async def test_arguments_are_validated_before_the_handler_runs(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), plugins=[WordCount()], load_entry_points=False)
    try:
        ctx = app.tool_context(None)
        assert (await app.registry.call(ctx, "word_count", {"n": 3})).payload == {"n": 3}
        with pytest.raises(ToolArgumentError, match=r"argument 'n': 0 is less than the minimum of 1"):
            await app.registry.call(ctx, "word_count", {"n": 0})
        with pytest.raises(ToolArgumentError, match="'n' is a required property"):
            await app.registry.call(ctx, "word_count", {})
        with pytest.raises(ToolArgumentError, match="must be a JSON object"):
            await app.registry.call(ctx, "word_count", ["n", 1])
    finally:
        app.close()


@pytest.mark.anyio
@pytest.mark.parametrize("error", [NotFound("no note 'x'"), SectionError("ambiguous"), QueryError("bad quote"),
                                   EmbeddingError("the embedding endpoint is down; start it")])
async def test_domain_errors_reach_the_model_as_tool_errors(app: App, error: Exception) -> None:
    async def failing(ctx: Any, args: dict[str, Any]) -> Any:
        raise error

    app.registry.register(ToolDef(name="failing", description="", input_schema={"type": "object"}, handler=failing))
    with pytest.raises(ToolError, match=str(error)):
        await app.registry.call(app.tool_context(None), "failing", {})


@pytest.mark.anyio
async def test_a_bug_stays_a_bug_logged_with_its_stack_and_told_as_an_internal_error(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    async def buggy(ctx: Any, args: dict[str, Any]) -> Any:
        raise KeyError("oops")

    app.registry.register(ToolDef(name="buggy", description="", input_schema={"type": "object"}, handler=buggy))
    with pytest.raises(ToolFailure, match="buggy: internal error in the tool") as info:
        await app.registry.call(app.tool_context(None), "buggy", {})
    assert isinstance(info.value.__cause__, KeyError) and not isinstance(info.value, ToolError)
    logged = [r for r in caplog.records if r.name == "noteloom.tools"]
    assert logged and logged[0].exc_info is not None and "oops" in caplog.text


@pytest.mark.anyio
async def test_the_declared_untrusted_output_holds_unless_the_handler_says_per_call(app: App) -> None:
    async def plain(ctx: Any, args: dict[str, Any]) -> Any:
        return {"text": "from the web"}

    async def per_call(ctx: Any, args: dict[str, Any]) -> Any:
        return ToolResult({"text": "mine"}, untrusted=False)

    for name, handler in (("fetched", plain), ("checked", per_call)):
        app.registry.register(ToolDef(name=name, description="", input_schema={"type": "object"}, handler=handler,
                                      untrusted_output=True))
    ctx = app.tool_context(None)
    assert (await app.registry.call(ctx, "fetched", {})).untrusted is True
    assert (await app.registry.call(ctx, "checked", {})).untrusted is False


def _books() -> list[Notebook]:
    def nb(i: str, title: str, parent: str | None = None) -> Notebook:
        return Notebook(i, parent, title, 0, 0)

    return [nb("w", "Work"), nb("wp", "Private", "w"), nb("wc", "Clients", "w"), nb("wca", "Acme", "wc"),
            nb("h", "Home"), nb("hp", "Private", "h"), nb("p1", "Projects 2026"), nb("p2", "projects old")]


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ([], None),
        (["Work"], {"w", "wp", "wc", "wca"}),
        (["work/clients"], {"wc", "wca"}),
        (["Work", "!Work/Private"], {"w", "wc", "wca"}),
        (["!Private"], {"w", "wc", "wca", "h", "p1", "p2"}),
        (["Projects*"], {"p1", "p2"}),
        (["*/Acme"], {"wca"}),
        (["Nothing"], set()),
    ],
)
def test_the_notebook_scope_matches_titles_and_paths(patterns: list[str], expected: set[str] | None) -> None:
    assert NotebookScope(patterns).allowed_ids(_books()) == expected


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(cli, list(args))
        assert (result.exit_code == 0) == ok, f"{args}: {result.output}"
        return result.output

    return invoke


def test_tools_can_be_listed_enabled_and_disabled_from_the_terminal(run: Callable[..., str]) -> None:
    listed = {r["name"]: r for r in json.loads(run("tools", "list", "--json"))}
    assert listed["read_note"]["enabled"] is True and listed["create_note"]["enabled"] is False
    assert listed["delete_note"]["effect"] == "destructive"
    assert "on: create_note, update_note" in run("tools", "enable", "create_note", "update_note")
    run("tools", "disable", "read_notes")
    listed = {r["name"]: r for r in json.loads(run("tools", "list", "--json"))}
    assert listed["create_note"]["enabled"] and listed["update_note"]["enabled"] and not listed["read_notes"]["enabled"]
    text = run("tools", "list")
    assert "read_notes" in text and "(default on)" in text
    assert "no tool named 'bogus'" in run("tools", "enable", "bogus", ok=False)
    run("tools", "enable", "--all")
    assert all(r["enabled"] for r in json.loads(run("tools", "list", "--json")))


def test_the_scope_can_be_set_shown_and_cleared_from_the_terminal(run: Callable[..., str]) -> None:
    run("notebooks", "add", "Work")
    run("notebooks", "add", "Home")
    assert "every notebook" in run("tools", "scope")
    out = run("tools", "scope", "Work", "!Home")
    assert "scope: Work !Home" in out and "  Work" in out and "  Home" not in out
    assert json.loads(run("tools", "scope", "--json")) == {"patterns": ["Work", "!Home"], "notebooks": ["Work"]}
    run("tools", "scope", "--clear")
    assert json.loads(run("tools", "scope", "--json"))["patterns"] == []
    run("tools", "scope", "Work", "--clear", ok=False)


def test_mcp_is_switched_on_and_off_from_the_terminal(run: Callable[..., str]) -> None:
    assert "MCP is on" in run("mcp", "status")
    run("mcp", "disable")
    assert "MCP is off" in run("mcp", "status")
    run("mcp", "enable")
    status = run("mcp", "status")
    assert "MCP is on" in status and "/mcp" in status and "search_notes" in status


def test_every_built_in_tool_has_a_valid_schema_and_a_plugins_bad_schema_is_refused_at_registration(
    app: App,
) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from noteloom.app import is_builtin

    tools = app.registry.all()
    assert tools and all(is_builtin(t) for t in tools), [t.name for t in tools if not is_builtin(t)]
    for tool in tools:  # what registration skips for them at start-up
        Draft202012Validator.check_schema(tool.input_schema)

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        return {}

    bad = ToolDef("bad_tool", "A plugin's tool.", {"type": "object", "properties": {"n": {"type": 12}}}, handler)
    assert not is_builtin(bad)
    with pytest.raises(SchemaError):
        ToolRegistry().register(bad)
