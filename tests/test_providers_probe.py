"""A server of the user's own, configured in a ``[providers.NAME]`` table, against real
loopback sockets: the reachability check before a call, and the first-token and
inactivity timeouts with their defaults for such a server. No assertion measures time:
each test sets the one deadline it is about and leaves the others long, so only that
deadline can end the call the way the test expects (``fail_after`` only guards a hang)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import anyio
import pytest

from llm_support import Exchange, LoopbackServer, free_port, no_network  # noqa: F401
from noteloom.agent import run
from noteloom.app import App
from noteloom.default_plugins.providers import ANTHROPIC, OPENAI
from noteloom.errors import ConfigError
from noteloom.messages import Message, StreamEvent, TextDelta
from noteloom.providers import (
    ModelRequest,
    ProviderError,
    ProviderRegistry,
    build_provider_registry,
)
from noteloom.providers.openai_compat import OpenAICompatProvider

pytestmark = pytest.mark.anyio
HELLO = (Message.user("hello"),)
#: Every deadline the test is not about: far longer than any hang guard.
LONG = {"connect_timeout": 60, "first_token_timeout": 60, "idle_timeout": 60, "probe_timeout": 60}


def providers(table: dict[str, Any], env: dict[str, str] | None = None) -> ProviderRegistry:
    """The registry for ``[providers.local]`` = ``table``, through the real settings path."""
    return build_provider_registry({"providers": {"local": table}}, env or {},
                                   {"anthropic": ANTHROPIC, "openai": OPENAI})


def local(base_url: str, **settings: Any) -> OpenAICompatProvider:
    provider = providers({"type": "openai", "base_url": base_url, "max_retries": 0, **settings}).get("local")
    assert isinstance(provider, OpenAICompatProvider)
    return provider


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


async def answer(ex: Exchange, text: str = "Hi.") -> None:
    await ex.start_stream()
    await ex.send(_chunk({"role": "assistant", "content": text}) + _chunk({}, "stop") + b"data: [DONE]\n\n")
    await ex.end()


async def consume(provider: OpenAICompatProvider) -> tuple[list[StreamEvent], ProviderError | None]:
    seen: list[StreamEvent] = []
    try:
        async for event in provider.stream(ModelRequest("m", HELLO)):
            seen.append(event)
    except ProviderError as exc:
        return seen, exc
    return seen, None


class OnPort(LoopbackServer):
    """A loopback server on a port chosen beforehand (the one a provider was configured with)."""

    def __init__(self, behaviour: Any, port: int) -> None:
        super().__init__(behaviour)
        self.port = port

    async def __aenter__(self) -> OnPort:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- the reachability check ---------------------------------------------------------------


async def test_a_closed_port_fails_the_call_with_a_network_error_naming_the_host(app: App) -> None:
    port = free_port()
    provider = local(f"http://127.0.0.1:{port}/v1", **{**LONG, "probe_timeout": 0.5})
    with anyio.fail_after(20):
        events, error = await consume(provider)
        result = await run(provider, "m", "Be brief.", HELLO, [], app.tool_context())
    await provider.aclose()
    assert error is not None and error.code == "api_network_error" and not events
    assert f"127.0.0.1:{port}" in str(error) and "ollama serve" in str(error)
    assert "[providers.local]" in str(error), "it says where to correct the address"
    # The turn ends on that error, with that message, not on a later one.
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.code == "api_network_error"
    assert f"127.0.0.1:{port}" in str(result.error)


async def test_a_host_that_takes_the_connection_but_never_answers_fails_within_the_probe_timeout() -> None:
    async def silent(ex: Exchange) -> None:
        await ex.wait_for_hangup()

    with anyio.fail_after(20):
        async with LoopbackServer(silent) as server:
            provider = local(f"{server.url}/v1", **{**LONG, "probe_timeout": 0.3})
            _, error = await consume(provider)
            await provider.aclose()
    # Every other deadline is a minute: only the 0.3 s of the check can have ended the wait.
    assert error is not None and error.code == "api_network_error"
    assert "nothing answered within 0.3 s" in str(error)
    assert [(e.method, e.path) for e in server.exchanges] == [("GET", "/v1/models")]


async def test_any_http_answer_counts_as_reachable_even_a_404_and_a_success_is_remembered() -> None:
    async def behaviour(ex: Exchange) -> None:
        if ex.method == "GET":
            await ex.respond(404, b'{"error": "no such route"}')
        else:
            await answer(ex)

    with anyio.fail_after(20):
        async with LoopbackServer(behaviour) as server:
            provider = local(f"{server.url}/v1", **LONG)
            first, error = await consume(provider)
            second, error2 = await consume(provider)
            await provider.aclose()
    assert error is None and error2 is None and text(first) == text(second) == "Hi."
    assert [(e.method, e.path) for e in server.exchanges] == [
        ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions")
    ], "checked once, before the first call only"


async def test_a_failed_check_is_not_remembered_so_a_started_server_is_used_at_once() -> None:
    async def behaviour(ex: Exchange) -> None:
        if ex.method == "GET":
            await ex.respond(200, b'{"object": "list", "data": []}')
        else:
            await answer(ex, "Up.")

    port = free_port()
    provider = local(f"http://127.0.0.1:{port}/v1", **{**LONG, "probe_timeout": 0.5})
    with anyio.fail_after(20):
        _, error = await consume(provider)
        assert error is not None and error.code == "api_network_error"
        async with OnPort(behaviour, port) as server:  # the user starts the server
            events, error = await consume(provider)
            await provider.aclose()
    assert [e.method for e in server.exchanges] == ["GET", "POST"]
    assert error is None and text(events) == "Up."


def test_only_a_server_of_your_own_is_checked_and_the_check_can_be_turned_off() -> None:
    assert local("http://127.0.0.1:11434/v1").probe is not None
    assert local("http://192.168.1.20:8080/v1").probe is not None
    assert local("http://127.0.0.1:11434/v1", probe=False).probe is None
    assert local("https://gpu.example.invalid/v1", api_key="k").probe is None
    assert local("https://gpu.example.invalid/v1", api_key="k", private=True).probe is None, \
        "a rented private host is not the user's own"
    assert local("https://box.example.invalid/v1", api_key="k", local=True).probe is not None
    assert providers({"type": "openai"}, {"OPENAI_API_KEY": "k"}).get("openai").probe is None  # type: ignore[attr-defined]


# -- the call's deadlines on a server of your own ------------------------------------------


async def test_a_server_that_never_starts_answering_hits_the_configured_first_token_timeout() -> None:
    async def behaviour(ex: Exchange) -> None:
        if ex.method == "GET":
            await ex.respond(200, b'{"data": []}')
        else:
            await ex.start_stream()
            await ex.wait_for_hangup()

    with anyio.fail_after(20):
        async with LoopbackServer(behaviour) as server:
            provider = local(f"{server.url}/v1", **{**LONG, "first_token_timeout": 0.3})
            _, error = await consume(provider)
            await provider.aclose()
    assert error is not None and error.code == "api_no_response"
    assert "first_token_timeout" in str(error)


async def test_a_server_that_stalls_between_chunks_hits_the_configured_inactivity_timeout() -> None:
    async def behaviour(ex: Exchange) -> None:
        if ex.method == "GET":
            await ex.respond(200, b'{"data": []}')
        else:
            await ex.start_stream()
            await ex.send(_chunk({"role": "assistant", "content": "Half "}))
            await ex.wait_for_hangup()
            server.saw_hangup()

    with anyio.fail_after(20):
        async with LoopbackServer(behaviour) as server:
            provider = local(f"{server.url}/v1", **{**LONG, "idle_timeout": 0.3})
            events, error = await consume(provider)
            await server.hung_up.wait()
            await provider.aclose()
    assert error is not None and error.code == "api_stream_error"
    assert "no data for 0.3 s" in str(error)
    assert text(events) == "Half "


def test_a_server_of_your_own_waits_longer_between_chunks_than_a_remote_by_default() -> None:
    own = local("http://127.0.0.1:11434/v1").timeouts
    assert (own.connect, own.first_token, own.idle, own.probe) == (10, 60, 300, 2)
    remote = local("https://gpu.example.invalid/v1", api_key="k", private=True).timeouts
    assert (remote.first_token, remote.idle) == (60, 120), "a remote keeps its defaults"
    assert local("https://box.example.invalid/v1", api_key="k", local=True).timeouts.idle == 300
    written = local("http://127.0.0.1:11434/v1", idle_timeout=45, first_token_timeout=5, probe_timeout=1).timeouts
    assert (written.first_token, written.idle, written.probe) == (5, 45, 1)
    claude = providers({"type": "anthropic", "base_url": "http://127.0.0.1:9/", "idle_timeout": 7}).get("local")
    assert claude.timeouts.idle == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize(("key", "value", "says"), [
    ("idle_timeout", 0, "idle_timeout must be a number of seconds above 0"),
    ("first_token_timeout", -1, "first_token_timeout must be a number of seconds above 0"),
    ("probe_timeout", 0, "probe_timeout must be a number of seconds above 0"),
    ("probe_timeout", math.inf, "probe_timeout must be a number of seconds above 0"),
    ("idle_timeout", math.nan, "idle_timeout must be a number of seconds above 0"),
    ("probe_timeout", "2", "probe_timeout must be a number"),
    ("idle_timeout", True, "idle_timeout must be a number"),
    ("probe", "yes", "probe must be true or false"),
])
def test_a_bad_timeout_or_probe_setting_is_a_config_error_naming_the_key(key: str, value: Any, says: str) -> None:
    registry = providers({"type": "openai", "base_url": "http://127.0.0.1:11434/v1", key: value})
    with pytest.raises(ConfigError) as caught:
        registry.get("local")
    assert says in str(caught.value) and "[providers.local]" in str(caught.value)


def test_the_probe_settings_belong_to_the_openai_compatible_type_only() -> None:
    registry = providers({"type": "anthropic", "base_url": "http://127.0.0.1:9/", "probe_timeout": 1})
    with pytest.raises(ConfigError, match="has no setting 'probe_timeout'"):
        registry.get("local")
