"""The model picker's list: every configured provider, usable or not (then with the reason),
private ones marked, and only usable providers' models offered as options."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api_support import client
from chat_support import running_chat
from noteloom.app import App, open_app
from noteloom.config import load_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_KEY_FOR_TEST", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text(
        '[providers.claude]\ntype = "anthropic"\napi_key_env = "CLAUDE_KEY_FOR_TEST"\n\n'
        '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodels = ["qwen3:14b"]\n',
        encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        yield app
    finally:
        app.close()


async def test_every_configured_provider_is_listed_with_private_marked(configured: App) -> None:
    async with running_chat(configured), client(configured) as c:
        out = (await c.get("/api/v1/chat/models")).json()
    providers = {p["name"]: p for p in out["providers"]}
    assert {"claude", "local", "echo"} <= set(providers)
    claude = providers["claude"]
    assert claude["ready"] is False and "CLAUDE_KEY_FOR_TEST" in (claude["problem"] or "")
    assert claude["private"] is False
    local = providers["local"]
    assert local["ready"] is True and local["private"] is True and "local:qwen3:14b" in local["models"]
    assert providers["echo"]["private"] is True
    options = {m["id"]: m for m in out["models"]}
    assert options["local:qwen3:14b"]["private"] is True
    assert not any(m.startswith("claude:") for m in options)  # not usable: listed, never an option
