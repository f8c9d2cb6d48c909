"""Which providers exist, from noteloom.toml, the environment and plugins; the offline models;
prices."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llm_support import collect, no_network  # noqa: F401
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.errors import ConfigError
from noteloom.messages import Message, StreamEnd, TextDelta, ToolCallDone, Usage, UsageUpdate
from noteloom.plugins import hookimpl
from noteloom.providers import (
    ModelRequest,
    ProviderConfig,
    ProviderError,
    ProviderRegistry,
    ProviderType,
    parse_address,
)
from noteloom.providers.anthropic import AnthropicProvider
from noteloom.providers.echo import EchoProvider
from noteloom.providers.openai_compat import OpenAICompatProvider
from noteloom.providers.pricing import price_of
from noteloom.providers.scripted import MAX_SCRIPT_BYTES, ScriptedProvider

TOML = """
[providers]
default = "local:qwen3:14b"

[providers.local]
type = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "LOCAL_API_KEY"
models = ["qwen3:14b", "llama3.2:1b"]
first_token_timeout = 90

[providers.claude]
type = "anthropic"
api_key = "from-the-file"

[providers.broken]
type = "openai"
base_url = 42
"""


def registry(tmp_path: Path, toml: str = TOML, env: dict[str, str] | None = None,
             plugins: list[Any] | None = None) -> ProviderRegistry:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "noteloom.toml").write_text(toml)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False, plugins=plugins)
    app.close()
    # The composition root reads the real environment; tests pass theirs explicitly.
    from noteloom.providers import provider_registry

    return provider_registry(app.settings.file, env or {}, app.plugins)


def test_addresses_split_at_the_first_colon_so_model_tags_survive() -> None:
    assert parse_address("local:qwen3:14b") == ("local", "qwen3:14b")
    assert parse_address("echo") == ("echo", None)
    assert parse_address("local:ns/model:q4") == ("local", "ns/model:q4")


def test_tables_in_the_settings_file_become_named_providers(tmp_path: Path) -> None:
    reg = registry(tmp_path, env={"LOCAL_API_KEY": "lk"})
    provider, model = reg.resolve()
    assert (provider.name, model) == ("local", "qwen3:14b")
    assert isinstance(provider, OpenAICompatProvider)
    assert provider.base_url == "http://127.0.0.1:11434/v1" and provider.api_key == "lk"
    assert provider.local and provider.timeouts.first_token == 90
    claude, model = reg.resolve("claude")
    assert isinstance(claude, AnthropicProvider) and claude.api_key == "from-the-file"
    assert model == "claude-sonnet-4-6"


def test_a_key_in_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    reg = registry(tmp_path, env={"ANTHROPIC_API_KEY": "from-env"})
    provider, _ = reg.resolve("claude:claude-opus-5")
    assert isinstance(provider, AnthropicProvider) and provider.api_key == "from-env"


def test_vendor_keys_alone_create_the_vendor_providers_and_a_default(tmp_path: Path) -> None:
    reg = registry(tmp_path, toml="", env={"OPENAI_API_KEY": "sk-o"})
    assert "openai" in reg.names() and "anthropic" not in reg.names()
    provider, model = reg.resolve()
    assert provider.name == "openai" and model == "gpt-5-mini"
    both = registry(tmp_path, toml="", env={"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"})
    assert both.default_address() == "anthropic:claude-sonnet-4-6"
    assert registry(tmp_path, toml="", env={"NOTELOOM_MODEL": "echo:echo"}).default_address() == "echo:echo"


def test_a_local_server_never_receives_the_vendor_key(tmp_path: Path) -> None:
    toml = '[providers.lan]\ntype = "openai"\nbase_url = "http://192.168.1.20:8080/v1"\ndefault_model = "m"\n'
    provider, _ = registry(tmp_path, toml=toml, env={"OPENAI_API_KEY": "sk-secret"}).resolve("lan")
    assert isinstance(provider, OpenAICompatProvider) and provider.api_key is None and provider.local


def test_a_remote_host_marked_private_is_private_but_not_free(tmp_path: Path) -> None:
    toml = ('[providers.rented]\ntype = "openai"\nbase_url = "https://gpu.example.invalid/v1"\n'
            'api_key = "k"\nprivate = true\n')
    provider, _ = registry(tmp_path, toml=toml).resolve("rented:big-model")
    # Privacy is not price: nobody knows this host's price, so the cost is unknown (test_pricing.py).
    assert provider.local and provider.cost("big-model", Usage(1000, 1000)) is None


def test_with_nothing_configured_the_error_points_newcomers_to_echo(tmp_path: Path) -> None:
    reg = registry(tmp_path, toml="")
    assert sorted(reg.names()) == ["echo", "scripted"]
    with pytest.raises(ConfigError, match=r"-m echo"):
        reg.resolve()
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY.*-m echo"):
        reg.resolve("openai:gpt-5-mini")
    provider, model = reg.resolve("echo")
    assert isinstance(provider, EchoProvider) and model == "echo"


def test_unknown_names_and_missing_models_say_what_to_do(tmp_path: Path) -> None:
    reg = registry(tmp_path, toml='[providers.box]\ntype = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n')
    with pytest.raises(ConfigError, match=r"no provider named 'nope'.*noteloom models"):
        reg.resolve("nope:x")
    with pytest.raises(ConfigError, match=r"-m box:MODEL"):
        reg.resolve("box")
    with pytest.raises(ConfigError, match=r"unknown type 'llamafile'"):
        registry(tmp_path, toml='[providers.x]\ntype = "llamafile"\n').resolve("x:y")


def test_a_broken_table_fails_when_used_not_when_the_app_opens(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    with pytest.raises(ConfigError, match=r"\[providers.broken\]: base_url must be a string"):
        reg.resolve("broken:m")
    info = {i.name: i for i in reg.describe()}
    assert not info["broken"].ready and "base_url" in (info["broken"].problem or "")
    assert info["local"].ready and info["local"].models == ["qwen3:14b", "llama3.2:1b"]


def test_the_description_shows_whether_a_key_is_set_but_never_the_key(tmp_path: Path) -> None:
    infos = registry(tmp_path, env={"LOCAL_API_KEY": "super-secret-key"}).describe()
    text = json.dumps([i.__dict__ for i in infos])
    assert "super-secret-key" not in text and "from-the-file" not in text
    local = next(i for i in infos if i.name == "local")
    assert local.key_set and local.key_env == "LOCAL_API_KEY"


class ParrotProvider(EchoProvider):
    """A plugin's provider type."""


class ParrotPlugin:
    @hookimpl
    def register_providers(self, register: Any) -> None:
        register(ProviderType("parrot", lambda config: ParrotProvider(config.name)))


def test_plugins_add_provider_types_through_the_same_hook(tmp_path: Path) -> None:
    reg = registry(tmp_path, toml='[providers.polly]\ntype = "parrot"\n', plugins=[ParrotPlugin()])
    provider, _ = reg.resolve("polly")
    assert isinstance(provider, ParrotProvider) and provider.name == "polly"


def test_the_app_wires_the_registry_as_a_service(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h")}), load_entry_points=False)
    try:
        assert isinstance(app.services["providers"], ProviderRegistry)
        assert app.services["providers"].resolve("echo")[1] == "echo"
    finally:
        app.close()


@pytest.mark.anyio
async def test_echo_answers_with_the_latest_user_message_offline_and_free() -> None:
    request = ModelRequest("echo", (Message.user("first"), Message.assistant("x"), Message.user("say this back")))
    events = await collect(EchoProvider().stream(request))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "say this back"
    usage = next(e.usage for e in events if isinstance(e, UsageUpdate))
    assert usage.output_tokens > 0 and EchoProvider().cost("echo", usage) == Decimal(0)
    assert isinstance(events[-1], StreamEnd) and events[-1].reason == "end_turn"


@pytest.mark.anyio
async def test_scripted_plays_a_file_named_in_the_settings_in_order_and_says_when_it_runs_out(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": "one", "tool_calls": [{"name": "search_notes", "arguments": {"query": "q"}, "id": "c9"}]},
        {"chunks": ["t", "wo"]},
    ]))
    toml = f'[providers.play]\ntype = "scripted"\nscript = "{script}"\n'
    provider, model = registry(tmp_path, toml=toml).resolve("play")
    assert model == "script" and registry(tmp_path, toml=toml).resolve("play:script")[1] == "script"
    first = await collect(provider.stream(ModelRequest(model, (Message.user("hi"),))))
    assert [e.call.id for e in first if isinstance(e, ToolCallDone)] == ["c9"]
    assert isinstance(first[-1], StreamEnd) and first[-1].reason == "tool_use"
    second = await collect(provider.stream(ModelRequest(model, (Message.user("hi"),))))
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["t", "wo"]
    with pytest.raises(ProviderError, match="no step left for call 3"):
        await collect(provider.stream(ModelRequest(model, (Message.user("hi"),))))


@pytest.mark.anyio
async def test_scripted_reads_a_script_named_in_the_settings_and_can_loop(tmp_path: Path) -> None:
    (tmp_path / "demo.json").write_text(json.dumps({"steps": [{"text": "again"}], "loop": True}))
    toml = f'[providers.demo]\ntype = "scripted"\nscript = "{tmp_path / "demo.json"}"\n'
    provider, model = registry(tmp_path, toml=toml).resolve("demo")
    for _ in range(3):
        events = await collect(provider.stream(ModelRequest(model, (Message.user("hi"),))))
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["again"]


@pytest.mark.parametrize("address", ["scripted:/etc/shadow", "scripted:SECRET", "scripted", "play:SECRET"])
def test_a_model_address_never_names_a_script_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([{"text": "the secret"}]))
    address = address.replace("SECRET", str(secret))
    (tmp_path / "play.json").write_text(json.dumps([{"text": "ok"}]))
    reg = registry(tmp_path, toml=f'[providers.play]\ntype = "scripted"\nscript = "{tmp_path / "play.json"}"\n')
    opened: list[str] = []
    real_open = os.open

    def watching_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", watching_open)
    with pytest.raises(ConfigError, match=r"named in noteloom.toml.*never names a file"):
        reg.resolve(address)
    assert not any("shadow" in p or "secret" in p for p in opened)


def test_scripted_rejects_a_missing_malformed_huge_or_special_file_with_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no script file"):
        ScriptedProvider(script=str(tmp_path / "nope.json"))._script("script")
    (tmp_path / "bad.json").write_text('{"steps": 3}')
    with pytest.raises(ConfigError, match="must hold a list of steps"):
        ScriptedProvider(script=str(tmp_path / "bad.json"))._script("script")
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(MAX_SCRIPT_BYTES + 1)
    with pytest.raises(ConfigError, match=r"huge.json.*larger than 4 MiB"):
        ScriptedProvider(script=str(huge))._script("script")
    with pytest.raises(ConfigError, match=r"'/dev/zero' is not a regular file"):
        ScriptedProvider(script="/dev/zero")._script("script")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        ScriptedProvider(script=str(fifo))._script("script")
    with pytest.raises(ConfigError, match=r"cannot be read \(Is a directory\)|is not a regular file"):
        ScriptedProvider(script=str(tmp_path))._script("script")
    with pytest.raises(ConfigError, match=r"\[providers.NAME\]"):
        ScriptedProvider()._script("script")


def test_prices_local_is_free_unknown_is_none_and_written_prices_win() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=500_000)
    assert price_of(usage, "anything", free=True) == Decimal(0)
    assert price_of(usage, "qwen3:14b", api_url="http://gpu-box.example.invalid/v1") is None
    known = price_of(usage, "claude-sonnet-4-6", vendor="anthropic")
    assert known is not None and known > 0
    table = {"m": {"input": 2.0, "output": 8.0, "cache_read": 0.5}}
    assert price_of(usage, "m", table=table) == Decimal("2.0") * Decimal("0.5") + Decimal("0.25") + Decimal("8.0")


def test_timeouts_and_options_are_checked_with_the_table_named(tmp_path: Path) -> None:
    bad = '[providers.x]\ntype = "openai"\nbase_url = "http://127.0.0.1:1/v1"\nidle_timeout = -1\n'
    with pytest.raises(ConfigError, match=r"\[providers.x\]: idle_timeout"):
        registry(tmp_path, toml=bad).resolve("x:m")
    with pytest.raises(ConfigError, match="think_tags"):
        OpenAICompatProvider.from_config(ProviderConfig("y", "openai", {"base_url": "http://h/v1", "think_tags": "x"}))


def test_a_misspelt_setting_fails_when_used_and_names_the_settings_the_type_takes(tmp_path: Path) -> None:
    reg = registry(tmp_path, toml='[providers.box]\ntype = "openai"\nbase_ulr = "http://127.0.0.1:1/v1"\n')
    with pytest.raises(ConfigError, match=r"\[providers.box\]: openai has no setting 'base_ulr'; it takes .*base_url"):
        reg.resolve("box:m")
    assert reg.resolve("echo")[1] == "echo"  # the rest of the file still works
