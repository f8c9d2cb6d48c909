"""The memory default (``chat.memory_default``, on unless set off): whether new chats have
memory. ``noteloom memory default [on|off]`` prints or sets it; ``GET/PUT
/api/v1/memory/default`` reads it for anyone and lets only the workspace's owner set it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_support import running_chat, scripted, settle
from noteloom.app import App, open_app
from noteloom.chat.wiring import MEMORY_DEFAULT_KEY
from noteloom.cli import cli
from noteloom.config import load_settings
from test_memory_api import client, second_user

pytestmark = pytest.mark.anyio


def _memory(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["memory", *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_command_prints_the_default_and_sets_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     database_url: str) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", database_url)
    assert _memory("default") == (0, "Memory in new chats: on.\n", "")
    code, out, _ = _memory("default", "off", "--json")
    assert code == 0 and json.loads(out) == {"memory_default": False}
    assert json.loads(_memory("default", "--json")[1]) == {"memory_default": False}
    assert _memory("default")[1] == "Memory in new chats: off.\n"
    assert _memory("default", "ON")[1] == "Memory in new chats: on.\n"
    app = open_app(load_settings({"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": database_url}),
                   load_entry_points=False)
    try:
        assert app.workspace.get_setting(MEMORY_DEFAULT_KEY) is True
    finally:
        app.close()
    code, out, err = _memory("default", "maybe")
    assert code == 2 and "on or off" in err and "'maybe'" in err
    assert _memory("default")[1] == "Memory in new chats: on.\n"  # unchanged


async def test_the_api_reads_it_and_only_the_owner_sets_it(app: App) -> None:
    _, guest = second_user(app)
    async with client(app) as c:
        assert (await c.get("/api/v1/memory/default")).json() == {"memory_default": True}
        put = await c.put("/api/v1/memory/default", json={"memory_default": False})
        assert put.status_code == 200 and put.json() == {"memory_default": False}
        assert (await c.get("/api/v1/memory/default")).json() == {"memory_default": False}
        bad = await c.put("/api/v1/memory/default", json={"memory_default": "off"})
        assert bad.status_code == 422 and "memory_default" in bad.text
        extra = await c.put("/api/v1/memory/default", json={"memory_default": True, "other": 1})
        assert extra.status_code == 422
    async with client(app, guest) as c:
        assert (await c.get("/api/v1/memory/default")).json() == {"memory_default": False}
        refused = await c.put("/api/v1/memory/default", json={"memory_default": True})
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert app.workspace.get_setting(MEMORY_DEFAULT_KEY) is False  # the guest changed nothing


async def test_a_new_chat_follows_the_default_the_api_set(app: App) -> None:
    owner = app.workspace.ensure_owner()
    provider = scripted(app, [{"text": "a"}, {"text": "b"}])
    memory_tools = {"remember", "recall", "forget"}
    async with client(app) as c:
        await c.put("/api/v1/memory/default", json={"memory_default": False})
    async with running_chat(app) as chat:
        off = await chat.send(owner, "Hello", controls={"model": "play:script"})
        view: dict[str, Any] = await settle(chat, owner, off.message_id)
        assert view["memories"] is None
        async with client(app) as c:
            await c.put("/api/v1/memory/default", json={"memory_default": True})
        on = await chat.send(owner, "Hello again", controls={"model": "play:script"})
        assert (await settle(chat, owner, on.message_id))["memories"] is not None
    assert not memory_tools & {t.name for t in provider.requests[0].tools}
    assert memory_tools <= {t.name for t in provider.requests[1].tools}
