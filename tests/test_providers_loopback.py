"""Both adapters against a real HTTP server on 127.0.0.1: what only sockets can show —
connect failures, a slow first token, a stalled stream, a dropped connection, and a
cancel that hangs up on the server."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from llm_support import Exchange, LoopbackServer, free_port, no_network  # noqa: F401
from noteloom.agent import CancelToken, RunEvent, run
from noteloom.app import App
from noteloom.messages import Message, StreamEnd, StreamEvent, TextDelta
from noteloom.providers import ModelRequest, Provider, ProviderError, Timeouts
from noteloom.providers.anthropic import AnthropicProvider
from noteloom.providers.openai_compat import OpenAICompatProvider

pytestmark = pytest.mark.anyio
HELLO = (Message.user("hello"),)


@dataclass
class Wire:
    """One wire format: how to build its provider and its stream pieces."""

    name: str
    make: Callable[[str, Timeouts], Provider]
    opening: bytes
    piece: Callable[[str], bytes]
    closing: bytes


def _oa(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _an(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


OPENAI = Wire(
    "openai",
    lambda url, t: OpenAICompatProvider("local", base_url=f"{url}/v1", timeouts=t, max_retries=0),
    _oa({"role": "assistant", "content": ""}),
    lambda text: _oa({"content": text}),
    _oa({}, "stop") + b"data: [DONE]\n\n",
)
ANTHROPIC = Wire(
    "anthropic",
    lambda url, t: AnthropicProvider("claude", base_url=url, api_key="k", timeouts=t, max_retries=0),
    _an("message_start", {"message": {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [],
                                      "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 1}}})
    + _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    lambda text: _an("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
    _an("content_block_stop", {"index": 0})
    + _an("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})
    + _an("message_stop", {}),
)


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


async def consume(provider: Provider) -> tuple[list[StreamEvent], ProviderError | None]:
    seen: list[StreamEvent] = []
    try:
        async for event in provider.stream(ModelRequest("m", HELLO)):
            seen.append(event)
    except ProviderError as exc:
        return seen, exc
    finally:
        await provider.aclose()
    return seen, None


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_a_full_answer_over_real_http(wire: Wire) -> None:
    async def answer(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(wire.opening)
        for word in ("Hello ", "from ", "loopback."):
            await ex.send(wire.piece(word))
        await ex.send(wire.closing)
        await ex.end()

    with anyio.fail_after(10):
        async with LoopbackServer(answer) as server:
            events, error = await consume(wire.make(server.url, Timeouts()))
    assert error is None
    assert text(events) == "Hello from loopback."
    assert isinstance(events[-1], StreamEnd)
    assert server.exchanges[0].method == "POST"


@pytest.mark.parametrize("wire", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def test_a_provider_dropped_after_its_loop_ended_schedules_nothing_on_the_next_loop(wire: Wire) -> None:
    """A provider used on one event loop and dropped, unclosed, while another runs (a test
    after another, a workspace opened again) leaves that loop alone: the SDK's own client
    would schedule its close there and fail with "Event loop is closed"."""
    kept: list[Provider] = []

    async def answer(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(wire.opening + wire.piece("Hi.") + wire.closing)
        await ex.end()

    async def first() -> None:
        async with LoopbackServer(answer) as server:
            provider = wire.make(server.url, Timeouts())
            async for _ in provider.stream(ModelRequest("m", HELLO)):
                pass
            kept.append(provider)  # not closed: its client and connection pool outlive this loop

    async def second() -> set[asyncio.Task[Any]]:
        kept.clear()
        gc.collect()
        return asyncio.all_tasks() - {asyncio.current_task()}

    asyncio.run(first())
    scheduled = asyncio.run(second())
    assert scheduled == set(), f"dropping the provider scheduled {scheduled}"


async def test_nothing_listening_is_a_network_error(wire: Wire) -> None:
    with anyio.fail_after(10):
        events, error = await consume(wire.make(f"http://127.0.0.1:{free_port()}", Timeouts(connect=2)))
    assert error is not None and error.code == "api_network_error" and not events
    assert "Check the address" in str(error)


@pytest.mark.parametrize("send_headers", [True, False], ids=["headers-then-silence", "no-headers"])
async def test_no_first_token_within_the_deadline_is_no_response(wire: Wire, send_headers: bool) -> None:
    async def silent(ex: Exchange) -> None:
        if send_headers:
            await ex.start_stream()
        await ex.wait_for_hangup()

    with anyio.fail_after(10):
        async with LoopbackServer(silent) as server:
            started = time.monotonic()
            _, error = await consume(wire.make(server.url, Timeouts(first_token=0.4, idle=30)))
            waited = time.monotonic() - started
    assert error is not None and error.code == "api_no_response"
    assert waited < 5, "the first-token deadline cut the wait, not the SDK's long read timeout"


async def test_a_slow_first_token_within_its_own_deadline_outlasts_the_idle_deadline(wire: Wire) -> None:
    async def slow_start(ex: Exchange) -> None:
        await ex.start_stream()
        await asyncio.sleep(0.6)  # the model is loading
        await ex.send(wire.opening + wire.piece("Ready."))
        await ex.send(wire.closing)
        await ex.end()

    with anyio.fail_after(10):
        async with LoopbackServer(slow_start) as server:
            events, error = await consume(wire.make(server.url, Timeouts(first_token=5, idle=0.3)))
    assert error is None and text(events) == "Ready."


async def test_a_stream_that_stalls_fails_after_the_idle_deadline_and_hangs_up(wire: Wire) -> None:
    async def stall(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(wire.opening + wire.piece("Half an "))
        await ex.wait_for_hangup()
        server.saw_hangup()

    with anyio.fail_after(10):
        async with LoopbackServer(stall) as server:
            events, error = await consume(wire.make(server.url, Timeouts(first_token=5, idle=0.4)))
            await server.hung_up.wait()
    assert error is not None and error.code == "api_stream_error"
    assert text(events) == "Half an "


async def test_a_dropped_connection_mid_answer_is_a_stream_error(wire: Wire) -> None:
    async def drop(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(wire.opening + wire.piece("Cut "))
        ex.writer.write(b"40\r\ndata: {\"partial")  # a chunk that never completes
        await ex.writer.drain()
        ex.writer.transport.abort()

    with anyio.fail_after(10):
        async with LoopbackServer(drop) as server:
            events, error = await consume(wire.make(server.url, Timeouts(first_token=5, idle=5)))
    assert error is not None and error.code == "api_stream_error"
    assert text(events) == "Cut "


async def test_cancel_mid_stream_closes_the_upstream_connection_and_keeps_the_partial_text(
    wire: Wire, app: App
) -> None:
    async def endless(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(wire.opening)
        n = 0
        try:
            while True:
                await ex.send(wire.piece(f"word{n} "))
                n += 1
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass
        server.saw_hangup()

    token = CancelToken()
    seen: list[RunEvent] = []

    async def on_event(event: RunEvent) -> None:
        seen.append(event)
        if isinstance(event, TextDelta) and event.text.startswith("word1"):
            token.cancel()

    with anyio.fail_after(10):
        async with LoopbackServer(endless) as server:
            provider = wire.make(server.url, Timeouts(first_token=5, idle=5))
            result = await run(provider, "m", "Be brief.", HELLO, [], app.tool_context(), on_event=on_event,
                               cancel=token)
            await server.hung_up.wait()
            await provider.aclose()
    assert result.stop_reason == "cancelled"
    assert result.messages and result.messages[0].text == "word0 word1 "
    assert seen[-1].kind == "done"
