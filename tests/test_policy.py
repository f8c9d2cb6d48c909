"""One policy for every surface: the tool's own answer from its arguments, then the workspace
setting, then noteloom.toml, then the run; deny wins wherever it is said; cards name notes
by title and notebook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.default_plugins.workspace_tools import (
    CREATE_NOTE,
    CREATE_NOTEBOOK,
    DELETE_NOTE,
    MANAGE_TAGS,
    READ_NOTE,
    RESTORE_NOTE,
    SEARCH_NOTES,
    UPDATE_NOTE,
)
from noteloom.errors import ConfigError
from noteloom.policy import (
    PolicySources,
    configured,
    default_words,
    describe_call,
    file_policies,
    resolve,
    set_policy,
    workspace_policies,
)
from noteloom.tools import ToolContext, ToolDef
from noteloom.web.app import create_web_app


async def _noop(ctx: ToolContext, args: dict[str, Any]) -> Any:
    return {}


PLUGIN_WRITER = ToolDef("plugin_writer", "", {"type": "object"}, _noop, effect="write")


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        (SEARCH_NOTES, {"query": "x"}, "auto"),
        (CREATE_NOTE, {"title": "x"}, "auto"),
        (CREATE_NOTEBOOK, {"title": "x"}, "auto"),
        (RESTORE_NOTE, {"id": "n"}, "auto"),
        (UPDATE_NOTE, {"id": "n", "append": "more"}, "auto"),
        (UPDATE_NOTE, {"id": "n", "title": "New"}, "auto"),
        (UPDATE_NOTE, {"id": "n", "body": "all new"}, "confirm"),
        (UPDATE_NOTE, {"id": "n", "replace_text": {"find": "a", "replace": "b"}}, "confirm"),
        (DELETE_NOTE, {"id": "n"}, "confirm"),
        (MANAGE_TAGS, {"id": "n", "add": ["x"]}, "auto"),
        (MANAGE_TAGS, {"id": "n", "remove": ["x"]}, "confirm"),
        (PLUGIN_WRITER, {}, "confirm"),  # a write tool that says nothing asks
    ],
)
def test_the_tool_says_from_the_arguments_whether_a_call_asks(tool: ToolDef, args: dict[str, Any], expected: str) -> None:
    assert resolve(tool, args, PolicySources()) == expected


def test_each_layer_replaces_the_one_below_in_order() -> None:
    body = {"id": "n", "body": "x"}
    assert resolve(UPDATE_NOTE, body, PolicySources(workspace={"update_note": "auto"})) == "auto"
    # the settings file over the workspace setting, the run over both
    both = PolicySources(workspace={"update_note": "auto"}, file={"update_note": "confirm"})
    assert resolve(UPDATE_NOTE, {"id": "n", "append": "x"}, both) == "confirm"
    run = PolicySources(workspace={"update_note": "confirm"}, file={"update_note": "confirm"}, override={"update_note": "auto"})
    assert resolve(UPDATE_NOTE, body, run) == "auto"
    # a layer naming another tool changes nothing
    assert resolve(UPDATE_NOTE, body, PolicySources(override={"delete_note": "auto"})) == "confirm"
    assert configured(UPDATE_NOTE, run) == "auto" and configured(DELETE_NOTE, run) is None


@pytest.mark.parametrize("layer", ["workspace", "file", "override"])
def test_deny_wins_from_any_layer_over_any_later_auto(layer: str) -> None:
    layers: dict[str, dict[str, Any]] = {"workspace": {}, "file": {}, "override": {}}
    for name in layers:
        layers[name]["search_notes"] = "auto"
    layers[layer]["search_notes"] = "deny"
    sources = PolicySources(**layers)
    assert resolve(SEARCH_NOTES, {"query": "x"}, sources) == "deny"
    assert configured(SEARCH_NOTES, sources) == "deny"


def test_the_settings_file_reads_agent_over_the_deprecated_chat_table() -> None:
    file = {"chat": {"tool_policies": {"delete_note": "auto", "manage_tags": "deny"}},
            "agent": {"tool_policies": {"delete_note": "confirm"}}}
    assert file_policies(file) == {"delete_note": "confirm", "manage_tags": "deny"}
    with pytest.raises(ConfigError, match=r"\[agent.tool_policies\] delete_note = 'sometimes'"):
        file_policies({"agent": {"tool_policies": {"delete_note": "sometimes"}}})


def test_workspace_settings_skip_what_is_not_a_policy() -> None:
    raw = {"tool.a.policy": "deny", "tool.b.policy": "maybe", "tool.c.enabled": True, "tools.scope": "x"}
    assert workspace_policies(raw) == {"a": "deny"}


def test_defaults_in_a_word_and_mcp_destructive_hints_come_from_the_same_facts() -> None:
    assert [default_words(t) for t in (SEARCH_NOTES, CREATE_NOTE, UPDATE_NOTE, DELETE_NOTE, PLUGIN_WRITER)] == [
        "auto", "auto", "confirm*", "confirm", "confirm"]
    hints = {t.name: t.annotations["destructiveHint"] for t in (SEARCH_NOTES, CREATE_NOTE, UPDATE_NOTE, DELETE_NOTE, MANAGE_TAGS)}
    assert hints == {"search_notes": False, "create_note": False, "update_note": True, "delete_note": True,
                     "manage_tags": True}
    assert SEARCH_NOTES.untrusted_output and READ_NOTE.untrusted_output and not CREATE_NOTE.untrusted_output


def test_a_stored_policy_is_read_back_and_cleared(app: App) -> None:
    set_policy(app.workspace, "delete_note", "deny")
    sources = PolicySources.read(app.workspace.settings_with_prefix("tool."), {})
    assert resolve(DELETE_NOTE, {"id": "n"}, sources) == "deny"
    set_policy(app.workspace, "delete_note", None)
    assert PolicySources.read(app.workspace.settings_with_prefix("tool."), {}).workspace == {}


def test_cards_name_notes_by_title_and_notebook_path(app: App) -> None:
    ws = app.workspace
    travel = ws.create_notebook("Travel")
    packing = ws.create_notebook("Packing", travel.id)
    note = ws.create_note("Packing list", "tent, stove", packing.id)
    assert describe_call(UPDATE_NOTE, {"id": note.id, "body": "tarp"}, ws) == (
        "Replace the body of 'Packing list' (Travel/Packing) with 4 characters.")
    assert describe_call(UPDATE_NOTE, {"id": note.id, "replace_text": {"find": "tent", "replace": "tarp"}}, ws) == (
        "In 'Packing list' (Travel/Packing), replace “tent” with “tarp”.")
    assert describe_call(DELETE_NOTE, {"id": note.id}, ws) == "Move 'Packing list' (Travel/Packing) to the trash."
    assert describe_call(MANAGE_TAGS, {"id": note.id, "remove": ["gear"]}, ws) == (
        "On 'Packing list' (Travel/Packing): remove the tags gear.")
    assert describe_call(DELETE_NOTE, {"id": "0" * 32}, ws) == f"Move note {'0' * 32!r} to the trash."
    assert describe_call(PLUGIN_WRITER, {"id": note.id, "level": 3}, ws) == (
        "plugin_writer on 'Packing list' (Travel/Packing) with level=3.")


# -- the CLI and the API set the same setting ------------------------------------------------


def test_the_cli_sets_shows_and_clears_a_policy_and_tools_list_shows_it(app: App) -> None:
    runner = CliRunner()
    home = str(app.settings.data_dir)

    def tools(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, ["tools", *args, "--home", home])
        return result.exit_code, result.stdout, result.stderr

    assert tools("policy", "update_note") == (0, "update_note: confirm* (the tool's default)\n", "")
    assert tools("policy", "update_note", "deny") == (0, "update_note: deny\n", "")
    code, out, _ = tools("list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["update_note"]["policy"] == "deny" and rows["update_note"]["policy_default"] == "confirm*"
    assert rows["search_notes"]["policy"] == "auto" and rows["delete_note"]["policy"] == "confirm"
    assert tools("policy", "update_note", "--clear") == (0, "update_note: confirm* (the tool's default)\n", "")
    code, _, err = tools("policy", "update_note", "sometimes")
    assert code != 0 and "'sometimes' is not a policy; use one of auto, confirm, deny" in err
    code, _, err = tools("policy", "no_such_tool", "auto")
    assert code != 0 and "no tool named 'no_such_tool'" in err
    assert app.workspace.get_setting("tool.update_note.policy") is None


@pytest.mark.anyio
async def test_the_api_reads_and_sets_a_policy_and_says_what_the_settings_file_overrules(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text('[agent.tool_policies]\nmanage_tags = "confirm"\n')
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        transport = httpx2.ASGITransport(app=create_web_app(app))
        async with httpx2.AsyncClient(transport=transport, base_url="http://testserver",
                                      headers={"Authorization": f"Bearer {access_token(app)}"}) as c:
            r = await c.get("/api/v1/tools/update_note/policy")
            assert r.status_code == 200
            assert r.json() == {"name": "update_note", "policy": "confirm*", "setting": None, "file": None,
                                "default": "confirm*"}
            r = await c.put("/api/v1/tools/update_note/policy", json={"policy": "deny"})
            assert r.status_code == 200 and r.json()["policy"] == "deny" and r.json()["setting"] == "deny"
            assert app.workspace.get_setting("tool.update_note.policy") == "deny"
            r = await c.put("/api/v1/tools/manage_tags/policy", json={"policy": "auto"})
            assert r.json() == {"name": "manage_tags", "policy": "confirm", "setting": "auto", "file": "confirm",
                                "default": "confirm*"}, "noteloom.toml wins over the workspace setting"
            r = await c.put("/api/v1/tools/update_note/policy", json={"policy": None})
            assert r.json()["policy"] == "confirm*" and r.json()["setting"] is None
            bad = await c.put("/api/v1/tools/update_note/policy", json={"policy": "sometimes"})
            assert bad.status_code == 422 and bad.json()["error"] == "invalid_input"
            missing = await c.get("/api/v1/tools/no_such_tool/policy")
            assert missing.status_code == 404 and "no tool named 'no_such_tool'" in missing.json()["message"]
            anonymous = await c.get("/api/v1/tools/update_note/policy", headers={"Authorization": ""})
            assert anonymous.status_code == 401
    finally:
        app.close()


def test_the_agent_table_holds_budgets_and_tool_policies_side_by_side() -> None:
    from noteloom.agent.events import Budgets

    file = {"agent": {"max_steps": 4, "tool_policies": {"delete_note": "deny"}}}
    assert Budgets.from_file(file).max_steps == 4
    assert file_policies(file) == {"delete_note": "deny"}
