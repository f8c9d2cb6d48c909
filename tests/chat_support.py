"""Helpers for the chat tests: a running chat service, scripted models, waiting for a turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from noteloom.app import App
from noteloom.chat import ChatService, chat_lifespan
from noteloom.chat.records import TurnEvent
from noteloom.providers.scripted import ScriptedProvider, Step
from noteloom.workspace import User


def scripted(app: App, steps: Sequence[Step], name: str = "play", *, loop: bool = False) -> ScriptedProvider:
    """A scripted model reachable as ``NAME:script`` in this app."""
    provider = ScriptedProvider(name, list(steps), loop=loop)
    app.services["providers"].add(provider)
    return provider


@asynccontextmanager
async def running_chat(app: App) -> AsyncIterator[ChatService]:
    async with chat_lifespan(app) as chat:
        yield chat


async def collect(chat: ChatService, user: User, message_id: str, after: int = 0, timeout: float = 60.0) -> list[TurnEvent]:
    """Every event of the turn after ``after`` until it settles."""
    out: list[TurnEvent] = []
    with anyio.fail_after(timeout):
        async for event in chat.events(user, message_id, after):
            out.append(event)
    return out


async def settle(chat: ChatService, user: User, message_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """Wait for the turn to settle; its message as the API shows it."""
    await collect(chat, user, message_id, timeout=timeout)
    return await chat.message(user, message_id)


async def until(chat: ChatService, user: User, message_id: str, kind: str, timeout: float = 60.0) -> TurnEvent:
    """Wait for the first event of ``kind`` (the turn keeps running)."""
    with anyio.fail_after(timeout):
        async for event in chat.events(user, message_id, 0):
            if event.kind == kind:
                return event
    raise AssertionError(f"the turn settled without a {kind!r} event")
