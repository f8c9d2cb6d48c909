"""The public plugin API: tools from typed functions, and one plugin file that adds a tool, a
provider type, a web route, a command and static files without touching noteloom."""

from __future__ import annotations

import enum
import importlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, ClassVar, Literal

import anyio
import httpx2 as httpx
import pytest
import typer
from jsonschema.validators import Draft202012Validator
from pydantic import BaseModel, Field

from llm_support import collect
from noteloom.app import App, access_token, open_app
from noteloom.cli.plugin_cmds import add_plugin_commands
from noteloom.config import load_settings
from noteloom.errors import ConfigError, InvalidInput
from noteloom.messages import Message, TextDelta
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineRun, check_job
from noteloom.plugins import (
    ProviderType,
    ToolContext,
    ToolDef,
    ToolError,
    hookimpl,
    pipeline_jobs,
    plugin_manager,
)
from noteloom.providers import ModelRequest, provider_registry
from noteloom.tools import ToolArgumentError, ToolRegistry, call_tool
from noteloom.web.app import create_web_app
from noteloom.web.headers import CONTENT_SECURITY_POLICY
from noteloom.web.plugin_routes import plugin_routes
from plugin_site import install_plugin

FIXTURES = Path(__file__).parent / "fixtures" / "plugins"


# -- ToolDef.from_function ---------------------------------------------------------------------


class Pace(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


async def plan(
    ctx: ToolContext,
    destination: str,
    days: int = 3,
    budget: float | None = None,
    companions: list[str] | None = None,
    mode: Literal["car", "train"] = "train",
    pace: Pace = Pace.SLOW,
    tags: set[str] | None = None,
    note: Annotated[str, "Anything else to plan for."] = "",
    rain: bool = False,
) -> dict[str, Any]:
    """Plan a trip.

    This paragraph is not part of the description.

    Args:
        destination: Where the trip
            goes.
        days: How many days it lasts.
    """
    return {"ctx": ctx, "destination": destination, "days": days, "budget": budget, "companions": companions,
            "mode": mode, "pace": pace, "tags": tags, "note": note, "rain": rain}


def test_a_typed_signature_becomes_the_input_schema_and_the_docstring_the_descriptions() -> None:
    tool = ToolDef.from_function(plan)
    assert (tool.name, tool.description, tool.effect) == ("plan", "Plan a trip.", "read")
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "destination": {"type": "string", "description": "Where the trip goes."},
            "days": {"type": "integer", "description": "How many days it lasts.", "default": 3},
            "budget": {"type": ["number", "null"], "default": None},
            "companions": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                           "default": None},
            "mode": {"type": "string", "enum": ["car", "train"], "default": "train"},
            "pace": {"type": "string", "enum": ["slow", "fast"], "default": "slow"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                     "default": None},
            "note": {"type": "string", "description": "Anything else to plan for.", "default": ""},
            "rain": {"type": "boolean", "default": False},
        },
        "required": ["destination"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(tool.input_schema)


def test_name_description_and_the_other_fields_can_be_given() -> None:
    tool = ToolDef.from_function(plan, name="plan_trip", description="Plan it.", effect="write",
                                 requires=("semantic",), title="Plan a trip", idempotent=True)
    assert (tool.name, tool.description, tool.effect, tool.requires, tool.title, tool.idempotent) == (
        "plan_trip", "Plan it.", "write", ("semantic",), "Plan a trip", True)


@pytest.mark.anyio
async def test_the_context_is_given_and_the_arguments_arrive_as_python_values(app: App) -> None:
    tool = ToolDef.from_function(plan)
    ctx = app.tool_context()
    result = await call_tool(ctx, tool, {"destination": "Oslo", "pace": "fast", "tags": ["a", "b", "a"],
                                         "companions": ["Ann"], "budget": 120})
    out = result.payload
    assert out["ctx"] is ctx
    assert (out["destination"], out["days"], out["pace"], out["tags"], out["companions"], out["budget"]) == (
        "Oslo", 3, Pace.FAST, {"a", "b"}, ["Ann"], 120)


@pytest.mark.anyio
@pytest.mark.parametrize(("args", "says"), [
    ({}, "'destination' is a required property"),
    ({"destination": 3}, "argument 'destination'"),
    ({"destination": "Oslo", "days": "three"}, "argument 'days'"),
    ({"destination": "Oslo", "mode": "plane"}, "argument 'mode'"),
    ({"destination": "Oslo", "luggage": 2}, "'luggage' was unexpected"),
])
async def test_bad_arguments_are_refused_by_the_registry_before_the_function_runs(
    app: App, args: dict[str, Any], says: str
) -> None:
    calls: list[str] = []

    def count(ctx: ToolContext, destination: str, days: int = 1, mode: Literal["car", "train"] = "car") -> int:
        """Count."""
        calls.append(destination)
        return days

    registry = ToolRegistry()
    registry.register(ToolDef.from_function(count))
    with pytest.raises(ToolArgumentError, match=says):
        await registry.call(app.tool_context(), "count", args)
    assert calls == []


@pytest.mark.anyio
async def test_a_sync_function_runs_in_a_worker_thread_and_its_tool_error_reaches_the_model(app: App) -> None:
    seen: list[int] = []

    def where(ctx: ToolContext, fail: bool = False) -> int:
        """Say which thread ran."""
        seen.append(threading.get_ident())
        if fail:
            raise ToolError("it failed, as asked")
        return 1

    tool = ToolDef.from_function(where)
    assert (await call_tool(app.tool_context(), tool, {})).payload == 1
    assert seen and seen[0] != threading.get_ident()
    with pytest.raises(ToolError, match="it failed, as asked"):
        await call_tool(app.tool_context(), tool, {"fail": True})


class Trip(BaseModel):
    """A trip to plan."""

    destination: str = Field(description="Where to.")
    days: int = Field(3, ge=1, le=60)


class Plan(BaseModel):
    items: list[str]


@pytest.mark.anyio
async def test_a_single_pydantic_model_parameter_is_the_input_and_a_returned_model_its_json(app: App) -> None:
    def pack(ctx: ToolContext, trip: Trip) -> Plan:
        """Pack for a trip."""
        return Plan(items=[f"socks × {trip.days}", trip.destination])

    tool = ToolDef.from_function(pack)
    assert tool.input_schema["properties"]["destination"]["description"] == "Where to."
    assert tool.input_schema["properties"]["days"]["minimum"] == 1
    assert tool.input_schema["required"] == ["destination"]
    assert tool.output_schema is not None and tool.output_schema["properties"]["items"]["type"] == "array"
    Draft202012Validator.check_schema(tool.input_schema)
    result = await call_tool(app.tool_context(), tool, {"destination": "Rome", "days": 2})
    assert result.payload == {"items": ["socks × 2", "Rome"]}
    with pytest.raises(ToolArgumentError, match="argument 'days'"):
        await call_tool(app.tool_context(), tool, {"destination": "Rome", "days": 0})


@pytest.mark.anyio
async def test_pydantic_fields_in_a_signature_give_constraints_defaults_and_descriptions(app: App) -> None:
    async def pack(ctx: ToolContext, destination: str,
                   days: Annotated[int, Field(ge=1, description="How long.")] = 2,
                   pace: str = Field("slow", description="How fast.")) -> str:
        """Pack."""
        return f"{destination}:{days}:{pace}"

    tool = ToolDef.from_function(pack)
    props = tool.input_schema["properties"]
    assert props["days"] == {"default": 2, "description": "How long.", "minimum": 1, "title": "Days", "type": "integer"}
    assert props["pace"]["description"] == "How fast." and tool.input_schema["additionalProperties"] is False
    assert (await call_tool(app.tool_context(), tool, {"destination": "Rome"})).payload == "Rome:2:slow"
    with pytest.raises(ToolArgumentError):
        await call_tool(app.tool_context(), tool, {"destination": "Rome", "days": 0})


def _no_doc(x: int) -> int:
    return x


def _varargs(*things: str) -> None:
    """Varargs."""


def _untyped(x) -> None:  # type: ignore[no-untyped-def]
    """Untyped."""


@pytest.mark.parametrize(("fn", "kwargs", "says"), [
    (_no_doc, {}, "needs a description"),
    (_varargs, {}, r"\*args and \*\*kwargs"),
    (_untyped, {}, "has no annotation"),
    (_no_doc, {"name": "bad name", "description": "x"}, "must be 1 to 64 letters"),
    (lambda x: x, {"description": "x"}, "must be 1 to 64 letters"),
])
def test_a_function_that_cannot_be_a_tool_is_refused_with_the_reason(fn: Any, kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises((TypeError, ValueError), match=says):
        ToolDef.from_function(fn, **kwargs)


# -- one plugin file ------------------------------------------------------------------------------


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(FIXTURES))
    module = importlib.import_module("one_file_plugin")
    yield module
    sys.modules.pop("one_file_plugin", None)


@pytest.fixture
def plugin_app(tmp_path: Path, plugin: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text(
        '[packing_demo]\nalways = ["passport"]\n\n'
        '[providers.loud]\ntype = "shout"\napi_key = "k"\nexclaim = 3\n\n'
        '[providers.typo]\ntype = "shout"\napi_key = "k"\nexclaims = 3\n\n'
        '[providers.wrong]\ntype = "shout"\napi_key = "k"\nexclaim = "many"\n\n'
        '[providers.keyless]\ntype = "shout"\n'
    )
    monkeypatch.delenv("SHOUT_API_KEY", raising=False)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), plugins=[plugin], load_entry_points=False)
    try:
        yield app
    finally:
        app.close()


@pytest.mark.anyio
async def test_the_plugins_tool_is_registered_called_and_rendered_like_a_builtin(plugin_app: App) -> None:
    tool = plugin_app.registry.get("packing_list")
    assert tool.input_schema["required"] == ["destination"]
    result = await plugin_app.registry.call(plugin_app.tool_context(), "packing_list",
                                            {"destination": "Lisbon", "days": 2, "extras": ["hat"]})
    assert result.payload == {"destination": "Lisbon", "items": [
        {"name": "socks", "count": 2}, {"name": "toothbrush", "count": 1},
        {"name": "passport", "count": 1}, {"name": "hat", "count": 1}]}
    render = json.dumps(result.render, ensure_ascii=False)
    assert "/plugins/packing_demo/static/socks.svg" in render and "× 2" in render
    with pytest.raises(ToolError, match="between 1 and 60"):
        await plugin_app.registry.call(plugin_app.tool_context(), "packing_list", {"destination": "x", "days": 99})


@pytest.mark.anyio
async def test_the_plugins_provider_type_is_configured_checked_and_answers_like_a_builtin(
    plugin_app: App,
) -> None:
    providers = plugin_app.services.get("providers")
    provider, model = providers.resolve("loud")
    assert model == "loud"  # the declared default of default_model
    events = await collect(provider.stream(ModelRequest(model, (Message.user("pack light"),))))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "PACK LIGHT!!!"
    with pytest.raises(ConfigError, match=r"\[providers.typo\]: shout has no setting 'exclaims'; it takes .*exclaim"):
        providers.resolve("typo")
    with pytest.raises(ConfigError, match=r"\[providers.wrong\]: exclaim must be a whole number, not 'many'"):
        providers.resolve("wrong")
    with pytest.raises(ConfigError, match="set SHOUT_API_KEY"):
        providers.resolve("keyless")
    with pytest.raises(ConfigError, match="needs an API key: set SHOUT_API_KEY"):
        providers.resolve("shout")


def test_a_provider_types_key_variable_alone_makes_a_provider_of_its_name(plugin_app: App) -> None:
    registry = provider_registry({}, {"SHOUT_API_KEY": "sk"}, plugin_app.plugins)
    provider, model = registry.resolve("shout")
    assert (provider.name, model, registry.default_address()) == ("shout", "loud", "shout:loud")
    info = {i.name: i for i in registry.describe()}["shout"]
    assert info.key_env == "SHOUT_API_KEY" and info.key_set and "sk" not in json.dumps(info.__dict__)
    assert registry.no_model_help().startswith("no model is configured. Set SHOUT_API_KEY or ")


def test_a_plugins_provider_type_replaces_a_builtin_of_the_same_name(plugin: ModuleType) -> None:
    class Whisper(plugin.ShoutProvider):  # type: ignore[name-defined,misc]
        pass

    class Replacing:
        @hookimpl
        def register_providers(self, register: Any) -> None:
            register(ProviderType("echo", lambda config: Whisper(config.name, default_model="w", exclaim=0),
                                  offline=True))

    registry = provider_registry({}, {}, plugin_manager([Replacing()], load_entry_points=False))
    assert isinstance(registry.resolve("echo")[0], Whisper)


def test_the_old_two_argument_provider_registration_is_refused_with_the_new_form() -> None:
    class Old:
        @hookimpl
        def register_providers(self, register: Any) -> None:
            register("parrot", lambda config: None)

    with pytest.raises(TypeError, match=r"register\(ProviderType\(name, factory"):
        provider_registry({}, {}, plugin_manager([Old()], load_entry_points=False))


@asynccontextmanager
async def web(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.mark.anyio
async def test_the_plugins_web_route_needs_the_token_and_carries_our_headers(plugin_app: App) -> None:
    token = access_token(plugin_app)
    async with web(plugin_app) as c:
        refused = await c.get("/plugins/packing_demo/lists")
        assert refused.status_code == 401
        assert (await c.get("/plugins/packing_demo/lists", headers={"Authorization": "Bearer nl_wrong"})).status_code == 401
        r = await c.get("/plugins/packing_demo/lists", params={"to": "Rome"},
                        headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert r.json()["list"]["destination"] == "Rome" and r.json()["user"]
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
        page = await c.get("/plugins/packing_demo/page", headers={"Authorization": f"Bearer {token}"})
        assert page.status_code == 200 and page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert (await c.get("/plugins/packing_demo/page")).status_code == 401


@pytest.mark.anyio
async def test_static_files_are_served_without_a_credential_and_never_from_outside_the_folder(
    tmp_path: Path, plugin_app: App, plugin: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "pictures"
    folder.mkdir()
    (folder / "socks.svg").write_text("<svg/>")
    (folder / ".hidden").write_text("hidden")
    (tmp_path / "secret.txt").write_text("the secret")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    monkeypatch.setattr(plugin, "PICTURES", folder)
    async with web(plugin_app) as c:
        r = await c.get("/plugins/packing_demo/static/socks.svg")
        assert r.status_code == 200 and r.text == "<svg/>" and r.headers["x-content-type-options"] == "nosniff"
        for path in ["/plugins/packing_demo/static/../secret.txt", "/plugins/packing_demo/static/%2e%2e/secret.txt",
                     "/plugins/packing_demo/static/..%2fsecret.txt", "/plugins/packing_demo/static/link.txt",
                     "/plugins/packing_demo/static/.hidden", "/plugins/packing_demo/static/nope.svg",
                     "/plugins/other/static/socks.svg"]:
            r = await c.get(path)
            # A client may take ".." out itself (a private path then: 401); the server never serves it.
            assert r.status_code in (401, 404), (path, r.status_code)
            assert "secret" not in r.text and "hidden" not in r.text


async def raw_get(asgi: Any, path: str) -> tuple[int, bytes]:
    """A GET of ``path`` exactly as written (an HTTP client would take ``..`` out first)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await anyio.Event().wait()  # the client stays until the response is sent
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asgi(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.anyio
async def test_a_path_that_climbs_out_of_the_static_folder_is_not_found(
    tmp_path: Path, plugin_app: App, plugin: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "pictures"
    folder.mkdir()
    (folder / "socks.svg").write_text("<svg/>")
    (tmp_path / "secret.txt").write_text("the secret")
    monkeypatch.setattr(plugin, "PICTURES", folder)
    asgi = create_web_app(plugin_app)
    assert await raw_get(asgi, "/plugins/packing_demo/static/socks.svg") == (200, b"<svg/>")
    for path in ["/plugins/packing_demo/static/../secret.txt", "/plugins/packing_demo/static/../../secret.txt", "/plugins/packing_demo/static/a/../../secret.txt",
                 f"/plugins/packing_demo/static/{tmp_path}/secret.txt", "/plugins/packing_demo/static//etc/passwd"]:
        status, body = await raw_get(asgi, path)
        assert status == 404 and b"secret" not in body and b"root:" not in body, (path, status)


class CatchAll:
    """A plugin whose route would answer anything under its prefix, and that has no static files."""

    @hookimpl
    def register_web_routes(self, register: Any) -> None:
        from fastapi import APIRouter

        router = APIRouter()

        @router.get("/{rest:path}")
        async def anything(rest: str) -> dict[str, str]:
            return {"private": rest}

        register("catchall", router)


@pytest.mark.anyio
async def test_the_public_static_prefix_never_reaches_a_plugins_own_routes(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h")}), plugins=[CatchAll()], load_entry_points=False)
    try:
        token = access_token(app)
        async with web(app) as c:
            r = await c.get("/plugins/catchall/static/x")
            assert r.status_code == 404 and "private" not in r.text
            assert (await c.get("/plugins/catchall/x")).status_code == 401
            assert (await c.get("/plugins/catchall/x", headers={"Authorization": f"Bearer {token}"})).json() == {
                "private": "x"}
    finally:
        app.close()


@pytest.mark.parametrize(("hook", "says"), [
    ("static_route", "is under /static"),
    ("bad_name", "is not a plugin name"),
    ("not_a_router", "must come with a fastapi.APIRouter"),
    ("missing_folder", "which is not a folder"),
])
def test_a_registration_that_breaks_a_rule_is_refused_at_start(tmp_path: Path, hook: str, says: str) -> None:
    from fastapi import APIRouter

    class Bad:
        @hookimpl
        def register_web_routes(self, register: Any) -> None:
            router = APIRouter()
            if hook == "static_route":
                router.get("/static/x")(lambda: None)
                register("bad", router)
            elif hook == "bad_name":
                register("../up", router)
            elif hook == "not_a_router":
                register("bad", object())

        @hookimpl
        def register_static(self, register: Any) -> None:
            if hook == "missing_folder":
                register("bad", tmp_path / "nowhere")

    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h")}), plugins=[Bad()], load_entry_points=False)
    try:
        with pytest.raises((ValueError, TypeError), match=says):
            plugin_routes(app)
    finally:
        app.close()


def test_a_plugin_command_is_added_but_none_replaces_one_of_ours(plugin: ModuleType) -> None:
    cli = typer.Typer()
    cli.add_typer(typer.Typer(), name="notes")

    @cli.command("serve")
    def serve() -> None:
        """Ours."""

    class Clash:
        @hookimpl
        def register_cli_commands(self, cli: typer.Typer) -> None:
            cli.add_typer(typer.Typer(), name="notes")

            @cli.command()
            def serve() -> None:
                """Theirs."""

    added = add_plugin_commands(cli, plugin_manager([plugin, Clash()], defaults=False, load_entry_points=False))
    assert added == ["packing"]
    assert [c.name for c in cli.registered_commands] == ["serve", "packing"]
    assert [g.name for g in cli.registered_groups] == ["notes"]
    assert cli.registered_commands[0].callback is serve


# -- pipeline jobs --------------------------------------------------------------------------------


class TagUntagged(BasePipelineJob):
    name = "tag_untagged"
    untrusted_digest = False
    default_prompt = "Pick one tag for this note."
    verdict_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}

    def next_item(self, run: PipelineRun) -> PipelineItem | None:
        return None

    def digest(self, run: PipelineRun, item: PipelineItem) -> str:
        return item.label

    def validate_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Any) -> None:
        if verdict["tag"] == "none":
            raise InvalidInput("tag 'none' is not a tag", field="tag")

    def record_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Any, model: str) -> None:
        return None


class Jobs:
    @hookimpl
    def register_pipeline_jobs(self, register: Any) -> None:
        register(TagUntagged())


def test_pipeline_jobs_reach_the_app_by_name_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h")}), plugins=[Jobs()], load_entry_points=False)
    try:
        # The plugin's job beside noteloom's own, which register through the same hook.
        assert sorted(app.pipeline_jobs) == ["clip_safety", "event_extraction", "note_triage", "tag_untagged"]
    finally:
        app.close()
    jobs = pipeline_jobs(plugin_manager([Jobs(), Jobs()], load_entry_points=False, defaults=False))
    assert list(jobs) == ["tag_untagged"] and jobs["tag_untagged"].label == "Tag untagged"
    assert jobs["tag_untagged"].config_schema["type"] == "object"

    class Nameless(TagUntagged):
        name = "Not A Name"

    with pytest.raises(ValueError, match="name must match"):
        check_job(Nameless())
    with pytest.raises(TypeError, match=r"lacks .*next_item"):
        check_job(object())
    with pytest.raises(ValueError, match="key must be text"):
        PipelineItem("", "x")


# -- installed through an entry point, in a real process --------------------------------------


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    """The environment of a process in which the plugin is an installed package."""
    site = install_plugin(tmp_path / "site", "one_file_plugin", entry="packing_demo", dist="packing-demo", version="1.0")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {**os.environ, "NOTELOOM_HOME": str(home), "SHOUT_API_KEY": "sk-test",
           "PYTHONPATH": os.pathsep.join([str(site), str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    env.pop("NOTELOOM_DATABASE_URL", None)
    env.pop("NOTELOOM_MODEL", None)
    return env


def _noteloom(env: dict[str, str], *args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "noteloom", *args] if code is None else [sys.executable, "-c", code, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120, check=False)


def test_an_installed_plugins_command_and_model_work_from_the_command_line(installed: dict[str, str]) -> None:
    done = _noteloom(installed, "packing", "Lisbon", "--days", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["2 × socks", "1 × toothbrush"]
    asked = _noteloom(installed, "ask", "-m", "shout", "pack light")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == "PACK LIGHT!"


def test_an_installed_plugin_with_plain_signatures_loads_no_heavy_module_at_start(installed: dict[str, str]) -> None:
    probe = (
        "import json, sys\n"
        "from noteloom.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    heavy = ('pydantic', 'fastapi', 'jsonschema', 'starlette', 'typer.testing')\n"
        "    print(json.dumps([m for m in heavy if m in sys.modules]), file=sys.stderr)\n"
    )
    done = _noteloom(installed, "notes", "list", code=probe)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
