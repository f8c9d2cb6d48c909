"""One answer per provider to "does traffic to it stay private?", from its table: a server
of your own is private, a remote is private only when its table says so, and privacy never
implies the rest of "your own" (free, checked before a call, the longer idle timeout)."""

from __future__ import annotations

from typing import Any

import pytest

from noteloom.default_plugins.providers import ANTHROPIC, ECHO, OPENAI, SCRIPTED
from noteloom.providers import ProviderRegistry, build_provider_registry
from noteloom.providers.base import is_private


def providers(tables: dict[str, Any], env: dict[str, str] | None = None) -> ProviderRegistry:
    return build_provider_registry({"providers": tables}, env or {},
                                   {"anthropic": ANTHROPIC, "openai": OPENAI, "echo": ECHO, "scripted": SCRIPTED})


REMOTE = {"type": "openai", "base_url": "https://gpu.example.invalid/v1", "api_key": "k"}


@pytest.mark.parametrize(("table", "private", "own"), [
    ({"type": "openai", "base_url": "http://127.0.0.1:11434/v1"}, True, True),
    ({"type": "openai", "base_url": "http://localhost:8080/v1"}, True, True),
    ({"type": "openai", "base_url": "http://10.0.0.7:8080/v1"}, True, True),
    ({"type": "openai", "base_url": "http://gpu-box.local:8080/v1"}, True, True),
    ({"type": "anthropic", "base_url": "http://127.0.0.1:9/"}, True, True),
    (REMOTE, False, False),
    ({**REMOTE, "private": True}, True, False),  # a rented host: private, not your own
    ({**REMOTE, "local": True}, True, True),  # your own machine behind a public name
    ({"type": "openai", "base_url": "http://127.0.0.1:11434/v1", "local": False}, False, False),
    ({"type": "openai", "base_url": "http://127.0.0.1:11434/v1", "private": False}, False, True),
    ({**REMOTE, "local": True, "private": False}, False, True),  # "private" wins when both are written
], ids=["loopback", "localhost", "lan", "mdns", "anthropic-compatible-local", "remote", "remote-private",
        "remote-local", "loopback-not-local", "loopback-not-private", "both-written"])
def test_each_table_gives_one_privacy_answer(table: dict[str, Any], private: bool, own: bool) -> None:
    registry = providers({"p": table})
    provider = registry.get("p")
    assert is_private(provider) is private and provider.local is private
    assert provider.private is private  # type: ignore[attr-defined]
    assert provider.self_hosted is own  # type: ignore[attr-defined]
    [info] = [i for i in registry.describe() if i.name == "p"]
    assert info.private is private and info.local is private


def test_the_vendors_endpoints_are_not_private_and_the_offline_models_are() -> None:
    registry = providers({}, {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"})
    assert not is_private(registry.get("openai")) and not is_private(registry.get("anthropic"))
    assert is_private(registry.get("echo"))
    scripted = providers({"s": {"type": "scripted", "script": "steps.json", "private": False}})
    assert not is_private(scripted.get("s"))


def test_a_provider_without_a_private_attribute_answers_with_local() -> None:
    class Plugin:
        local = True

    class Newer:
        local = True
        private = False

    assert is_private(Plugin()) and not is_private(Newer())
