"""The built-in provider types, registered through the same hook a plugin uses.

Each declares its key variable and its settings here; the registry knows none of them by
name (``noteloom.providers.registry``).
"""

from __future__ import annotations

from collections.abc import Callable

from noteloom.plugins import hookimpl
from noteloom.providers.anthropic import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_MAX_TOKENS,
    AnthropicProvider,
)
from noteloom.providers.base import LOCAL_IDLE, Timeouts
from noteloom.providers.echo import EchoProvider
from noteloom.providers.openai_compat import DEFAULT_OPENAI_MODEL, OpenAICompatProvider
from noteloom.providers.registry import MODEL_CAPABILITY_SETTINGS, ProviderSetting, ProviderType
from noteloom.providers.scripted import ScriptedProvider

_TIMEOUTS = Timeouts()
PRICES = ProviderSetting(
    "prices", dict, None,
    'USD per million tokens by model: {"MODEL" = {input = 0.5, output = 1.5, cache_read = 0.05}}; '
    "written prices win over the bundled price table",
)


def _sdk_settings(default_model: str) -> tuple[ProviderSetting, ...]:
    """What both SDK adapters read the same way (``noteloom.providers.sdk.common_options``)."""
    return (
        ProviderSetting("base_url", str, None,
                        "the API root of a server of your own (e.g. http://127.0.0.1:11434/v1); "
                        "without it, the vendor's own endpoint, with the vendor's key"),
        ProviderSetting("default_model", str, None,
                        f"the model used when an address names none (the vendor's endpoint: {default_model})"),
        ProviderSetting("models", list, None,
                        "the names of the models it serves, shown by `noteloom models`; or a table per model "
                        '([providers.NAME.models."MODEL"]) declaring what it reads besides text: '
                        "vision = true (images), document = true (whole PDFs)",
                        entries=MODEL_CAPABILITY_SETTINGS),
        ProviderSetting("local", bool, None,
                        "the server runs on your own machine: private, and free unless priced "
                        "(default: true for a loopback or private-network address)"),
        ProviderSetting("private", bool, None, "your traffic stays with this host (a rented one is still billed)"),
        ProviderSetting("connect_timeout", float, _TIMEOUTS.connect, "seconds to connect"),
        ProviderSetting("first_token_timeout", float, _TIMEOUTS.first_token,
                        "seconds until the first chunk of an answer (a local model may need to load)"),
        ProviderSetting("idle_timeout", float, None,
                        f"the longest silence between chunks, in seconds (default {_TIMEOUTS.idle:g}; "
                        f"{LOCAL_IDLE:g} for a server of your own, which may generate slowly)"),
        ProviderSetting("max_retries", int, 2, "retries of a request that failed before its answer began"),
        PRICES,
    )


OPENAI = ProviderType(
    "openai",
    OpenAICompatProvider.from_config,
    "OpenAI, or any server with an OpenAI-compatible /v1/chat/completions (Ollama, llama.cpp, vLLM, LM Studio …)",
    key_env="OPENAI_API_KEY",
    settings=(
        *_sdk_settings(DEFAULT_OPENAI_MODEL),
        ProviderSetting("reasoning_effort", bool, True, "send the thinking level as reasoning_effort"),
        ProviderSetting("think_tags", str, "auto",
                        '"auto", "open" (the answer starts inside <think>) or "off": how <think> text is read'),
        ProviderSetting("stream_usage", bool, True, "ask for token usage in the stream (stream_options)"),
        ProviderSetting("extra_body", dict, None, "fields added to every request body"),
        ProviderSetting("probe", bool, None,
                        "before a call, check that the server answers GET {base_url}/models, so a server "
                        "that is down fails the turn at once (default: true for a server of your own)"),
        ProviderSetting("probe_timeout", float, _TIMEOUTS.probe,
                        "seconds the reachability check waits for any answer"),
        ProviderSetting("max_output_tokens", int, None, "the most a call can produce when the request sets no limit"),
    ),
)
ANTHROPIC = ProviderType(
    "anthropic",
    AnthropicProvider.from_config,
    "Anthropic's Messages API (or a server compatible with it)",
    key_env="ANTHROPIC_API_KEY",
    settings=(
        *_sdk_settings(DEFAULT_ANTHROPIC_MODEL),
        ProviderSetting("max_tokens", int, DEFAULT_MAX_TOKENS, "output tokens per call when the request sets no limit"),
        ProviderSetting("thinking", str, "auto", '"auto", "adaptive" or "budget": how extended thinking is asked for'),
        ProviderSetting("cache", bool, True, "mark the prompt's stable prefix for prompt caching"),
    ),
)
ECHO = ProviderType("echo", EchoProvider.from_config, "answers with your last message: offline, free, no key",
                    offline=True)
SCRIPTED = ProviderType(
    "scripted",
    ScriptedProvider.from_config,
    "plays a script of answers and tool calls from a JSON file (tests, demos)",
    offline=True,
    settings=(
        ProviderSetting("script", str, None, "the path of the script: a JSON list of steps, or {steps, loop}"),
        ProviderSetting("loop", bool, False, "start again from the first step when the script runs out"),
        ProviderSetting("local", bool, None, "counts as a model on your machine (default: true)"),
        ProviderSetting("private", bool, None, "counts as private (default: true)"),
        ProviderSetting("vision", bool, False, "the script's model counts as reading images"),
        ProviderSetting("document", bool, False, "the script's model counts as reading whole PDFs"),
        PRICES,
    ),
)


@hookimpl
def register_providers(register: Callable[[ProviderType], None]) -> None:
    # Anthropic before OpenAI: with both keys set and nothing configured, Anthropic is the default.
    for kind in (ANTHROPIC, OPENAI, ECHO, SCRIPTED):
        register(kind)
