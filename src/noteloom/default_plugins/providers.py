"""The built-in provider types, registered through the same hook a plugin uses."""

from __future__ import annotations

from collections.abc import Callable

from noteloom.plugins import hookimpl
from noteloom.providers.anthropic import AnthropicProvider
from noteloom.providers.echo import EchoProvider
from noteloom.providers.openai_compat import OpenAICompatProvider
from noteloom.providers.scripted import ScriptedProvider


@hookimpl
def register_providers(register: Callable[..., None]) -> None:
    register("openai", OpenAICompatProvider.from_config)
    register("anthropic", AnthropicProvider.from_config)
    register("echo", EchoProvider.from_config)
    register("scripted", ScriptedProvider.from_config)
