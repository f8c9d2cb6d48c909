"""The exception tree as drawn: every error class has an answer on every surface, found along
its MRO, and what a surface tells (the field, a wait) comes from the error's attributes."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
from typing import Any

import httpx2
import pytest
import typer
from fastapi import FastAPI
from typer.testing import CliRunner

import noteloom
from noteloom.agent.events import Budgets
from noteloom.app import App
from noteloom.cli.common import EXIT_CODES, TRY_AGAIN, UNAVAILABLE, USAGE, fail_with
from noteloom.errors import (
    Busy,
    ConfigError,
    Conflict,
    EmbedderUnavailable,
    EmbeddingError,
    InvalidInput,
    NoteloomError,
    NotFound,
    StorageError,
    Unavailable,
    mapped,
)
from noteloom.mcp import McpServer
from noteloom.tools import TOOL_ERRORS, ToolDef
from noteloom.web.api_base import HTTP_ERRORS, install_error_handlers

pytestmark = pytest.mark.anyio

#: Modules not imported to find the tree: the entry point runs the CLI, migrations run under Alembic.
SKIPPED = ("noteloom.__main__", "noteloom.migrations")
#: Layers above the tools: a tool that raises one of their errors has a bug (the root's answer).
ABOVE_TOOLS = ("noteloom.providers", "noteloom.agent", "noteloom.messages", "noteloom.chat", "noteloom.web",
               "noteloom.cli", "noteloom.mcp", "noteloom.app", "noteloom.recipes", "noteloom.session_tools")
SURFACES: dict[str, dict[type[BaseException], Any]] = {"web": HTTP_ERRORS, "tools and MCP": TOOL_ERRORS,
                                                       "command line": EXIT_CODES}


def the_tree() -> list[type[NoteloomError]]:
    """Every class of the tree that noteloom defines, once each module has been imported."""
    for info in pkgutil.walk_packages(noteloom.__path__, "noteloom."):
        if not info.name.startswith(SKIPPED):
            importlib.import_module(info.name)
    found: list[type[NoteloomError]] = []
    todo: list[type[NoteloomError]] = [NoteloomError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo += cls.__subclasses__()
    return [c for c in found if c.__module__.startswith("noteloom.")]


def unmapped(table: dict[type[BaseException], Any], classes: list[type[NoteloomError]],
             root_is_meant: tuple[str, ...] = ()) -> list[str]:
    """The classes below the root that only the root's entry answers: nobody decided for them."""
    out = []
    for cls in classes:
        if cls is NoteloomError or cls.__module__.startswith(root_is_meant):
            continue
        nearest = next(c for c in cls.__mro__ if c in table)
        if nearest is NoteloomError:
            out.append(cls.__qualname__)
    return out


def test_every_class_of_the_tree_has_an_answer_on_every_surface() -> None:
    tree = the_tree()
    names = {c.__name__ for c in tree}
    assert {"Unavailable", "Busy", "InvalidInput", "ToolError", "ProviderError", "EmbedderUnavailable"} <= names
    for surface, table in SURFACES.items():
        assert NoteloomError in table, surface
        root_is_meant = ABOVE_TOOLS if table is TOOL_ERRORS else ()
        assert unmapped(table, tree, root_is_meant) == [], f"add these to the table of the {surface}"


def test_a_new_error_class_without_an_answer_is_caught() -> None:
    class Overheated(NoteloomError):
        pass

    class Throttled(Busy):
        pass

    for table in SURFACES.values():
        assert unmapped(table, [Overheated, Throttled]) == ["test_a_new_error_class_without_an_answer_is_caught."
                                                            "<locals>.Overheated"]
    assert mapped(HTTP_ERRORS, Throttled("x")).status == 409  # a subclass answers as its parent
    with pytest.raises(KeyError):
        mapped(HTTP_ERRORS, ValueError("outside the tree"))


def test_the_three_kinds_are_told_apart() -> None:
    assert not issubclass(Unavailable, ConfigError) and not issubclass(ConfigError, Unavailable)
    assert issubclass(Busy, Conflict) and issubclass(EmbedderUnavailable, EmbeddingError | Unavailable)
    web = {cls: mapped(HTTP_ERRORS, cls("x")) for cls in (Unavailable, Busy, Conflict, InvalidInput, ConfigError)}
    assert (web[Unavailable].status, web[Unavailable].error) == (503, "unavailable")
    assert (web[Busy].status, web[Busy].error) == (409, "busy")
    assert (web[Conflict].status, web[Conflict].error) == (409, "conflict")
    assert (web[InvalidInput].status, web[InvalidInput].error) == (422, "invalid_input")
    assert web[ConfigError].error != "unavailable"
    codes = {cls: mapped(EXIT_CODES, cls("x")) for cls in (Unavailable, Busy, InvalidInput, NotFound)}
    assert codes[Unavailable] == UNAVAILABLE and codes[Busy] == TRY_AGAIN
    assert len({codes[Unavailable], codes[Busy], codes[InvalidInput], USAGE}) == 4


def test_what_surfaces_read_survives_a_trip_between_processes() -> None:
    field = pickle.loads(pickle.dumps(InvalidInput("limit must be a number", field="limit")))
    assert (type(field), str(field), field.field) == (InvalidInput, "limit must be a number", "limit")
    wait = pickle.loads(pickle.dumps(EmbedderUnavailable("the embedder is down", retry_after=2.5)))
    assert (type(wait), str(wait), wait.retry_after) == (EmbedderUnavailable, "the embedder is down", 2.5)


def test_bad_budgets_name_their_field() -> None:
    for kwargs, field in (({"max_steps": 0}, "max_steps"), ({"max_cost": "lots"}, "max_cost"),
                          ({"time_limit": -1}, "time_limit"), ({"max_output_tokens": True}, "max_output_tokens")):
        with pytest.raises(InvalidInput) as info:
            Budgets.checked(**kwargs)
        assert info.value.field == field and str(info.value).startswith(field)


# -- the web ------------------------------------------------------------------------------------


def raising_api() -> FastAPI:
    api = FastAPI()
    install_error_handlers(api)
    errors: dict[str, NoteloomError] = {
        "invalid": InvalidInput("the query is empty; say what to look for", field="query"),
        "named": InvalidInput("limit must be a whole number from 0 to 200, not 500", field="limit"),
        "unnamed": InvalidInput("these values do not fit together"),
        "unavailable": Unavailable("the chat's turn runner is not running; start noteloom with `noteloom serve`"),
        "waiting": EmbedderUnavailable("the embedding service is starting", retry_after=2.2),
        "busy": Busy("an import holds the workspace", retry_after=5),
        "storage": StorageError("the database could not be written"),
    }

    @api.get("/api/v1/raise/{kind}")
    async def raise_(kind: str) -> None:
        raise errors[kind]

    return api


async def get(path: str) -> httpx2.Response:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=raising_api()), base_url="http://t") as c:
        return await c.get(path)


async def test_the_web_names_the_field_from_the_error_not_its_wording() -> None:
    r = await get("/api/v1/raise/invalid")
    assert r.status_code == 422
    assert r.json() == {"error": "invalid_input", "message": "query: the query is empty; say what to look for",
                        "field": "query"}
    r = await get("/api/v1/raise/named")
    assert r.json()["field"] == "limit" and r.json()["message"].startswith("limit must be")
    r = await get("/api/v1/raise/unnamed")
    assert r.status_code == 422 and "field" not in r.json()  # no leading word is taken for a field


async def test_the_web_says_unavailable_and_busy_with_retry_after_when_waiting_helps() -> None:
    r = await get("/api/v1/raise/unavailable")
    assert (r.status_code, r.json()["error"]) == (503, "unavailable") and "retry-after" not in r.headers
    r = await get("/api/v1/raise/waiting")
    assert (r.status_code, r.json()["error"], r.headers["retry-after"]) == (503, "unavailable", "3")
    r = await get("/api/v1/raise/busy")
    assert (r.status_code, r.json()["error"], r.headers["retry-after"]) == (409, "busy", "5")
    r = await get("/api/v1/raise/storage")
    assert (r.status_code, r.json()["error"]) == (500, "storage_error")


async def test_the_chat_that_is_not_running_is_unavailable_not_misconfigured(app: App) -> None:
    from noteloom.app import access_token
    from noteloom.web.app import create_web_app

    transport = httpx2.ASGITransport(app=create_web_app(app))
    async with httpx2.AsyncClient(transport=transport, base_url="http://t",
                                  headers={"Authorization": f"Bearer {access_token(app)}"}) as c:
        r = await c.post("/api/v1/chat/send", json={"message": "hi"})
    assert (r.status_code, r.json()["error"]) == (503, "unavailable") and "noteloom serve" in r.json()["message"]


# -- tools and MCP --------------------------------------------------------------------------------


async def test_mcp_answers_each_kind_as_a_result_the_model_can_act_on(app: App) -> None:
    raised: dict[str, NoteloomError] = {
        "down": Unavailable("the embedding service is starting", retry_after=3),
        "held": Busy("an import holds the workspace"),
        "bad": InvalidInput("the query is empty; say what to look for", field="query"),
        "broken": StorageError("the database could not be written"),
    }

    def handler_for(error: NoteloomError) -> Any:
        async def handler(ctx: Any, args: dict[str, Any]) -> Any:
            raise error
        return handler

    for name, error in raised.items():
        app.registry.register(ToolDef(name, "", {"type": "object"}, handler_for(error), default_enabled=True))
    server, owner = McpServer(app), app.workspace.ensure_owner()

    async def call(name: str) -> dict[str, Any]:
        reply = await server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                     "params": {"name": name, "arguments": {}}}, owner)
        body: dict[str, Any] = reply.body
        return body

    down = (await call("down"))["result"]
    assert down["isError"] is True
    assert down["content"][0]["text"] == "the embedding service is starting; try again in 3 s"
    assert (await call("held"))["result"]["content"][0]["text"] == "an import holds the workspace"
    assert (await call("bad"))["result"]["content"][0]["text"] == "query: the query is empty; say what to look for"
    assert (await call("broken"))["error"]["code"] == -32603  # a database failure is not the model's to fix


# -- the command line -----------------------------------------------------------------------------


def run(error: NoteloomError) -> tuple[int, str]:
    cli = typer.Typer()

    @cli.command()
    def search(limit: int = typer.Option(10, "--limit", "-l"), title: str = typer.Argument("x")) -> None:
        fail_with(error)

    result = CliRunner().invoke(cli, [])
    return result.exit_code, result.stderr


def test_the_command_line_names_the_option_and_exits_by_kind() -> None:
    assert run(InvalidInput("limit must be a whole number from 0 to 200, not 500", field="limit")) == (
        USAGE, "error: --limit must be a whole number from 0 to 200, not 500\n")
    assert run(InvalidInput("must not be empty", field="title")) == (USAGE, "error: TITLE: must not be empty\n")
    assert run(InvalidInput("--due 'soon' is not a date", field="--due")) == (USAGE, "error: --due 'soon' is not a date\n")
    # Bad input that is no option of this command fails as before; so does a missing thing.
    assert run(InvalidInput("note_context.note_id: no such note", field="note_context.note_id"))[0] == 1
    assert run(NotFound("no note 'x'")) == (1, "error: no note 'x'\n")
    assert run(Unavailable("the embedding service is not running; start `noteloom serve`"))[0] == UNAVAILABLE
    assert run(Busy("an import holds the workspace; run it again when it is done"))[0] == TRY_AGAIN


def test_a_closed_vault_is_not_a_failed_sign_in() -> None:
    """Sealed content behind a closed unlock window is 423 (a 401 would send the browser to sign
    in again), a wrong passphrase 403; a tool tells the model to have the user unlock first."""
    from noteloom.errors import AuthError, Locked, WrongPassphrase

    assert issubclass(Locked, AuthError) and issubclass(WrongPassphrase, AuthError)
    locked, wrong = mapped(HTTP_ERRORS, Locked("x")), mapped(HTTP_ERRORS, WrongPassphrase("x"))
    assert (locked.status, locked.error) == (423, "locked")
    assert (wrong.status, wrong.error) == (403, "wrong_passphrase")
    assert mapped(HTTP_ERRORS, AuthError("x")).status == 401
    assert mapped(TOOL_ERRORS, Locked("x")) == "recoverable" and mapped(TOOL_ERRORS, AuthError("x")) == "bug"
