"""Searching chats: standard ones by SQL, protected ones by opening them with the owner's keys.
A search that could not reach protected chats says so in a fixed sentence, whatever was asked
and whether or not anything of them matched; a model searches them only on a private model's
turn with the keys lent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api_support import client
from chat_support import running_chat
from noteloom.app import App
from noteloom.chat import ChatService
from noteloom.chat.search import PROTECTED_SKIPPED
from noteloom.messages import ToolResultPart
from noteloom.providers.scripted import ScriptedProvider, Step
from noteloom.vault import Keys
from noteloom.workspace import User
from sealed_support import PASS, models, settle, vault_keys

pytestmark = pytest.mark.anyio


async def two_chats(chat: ChatService, owner: User, keys: Keys) -> tuple[str, str]:
    """A standard and a private chat, both about herons."""
    plain = await chat.send(owner, "Herons by the lake", controls={"model": "own:script"})
    await settle(chat, owner, plain.message_id, None)
    sealed = await chat.send(owner, "The secret heron census", security_level="private", keys=keys,
                             controls={"model": "own:script"})
    await settle(chat, owner, sealed.message_id, keys)
    return plain.conversation_id, sealed.conversation_id


async def test_the_list_search_opens_protected_chats_only_with_the_keys(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "Noted."}], loop=True)
    async with running_chat(app) as chat:
        plain, sealed = await two_chats(chat, owner, keys)
        locked = [c.id for c in await chat.conversations(owner, search="HERON")]
        opened = [c.id for c in await chat.conversations(owner, search="HERON", keys=keys)]
        census = [c.id for c in await chat.conversations(owner, search="census", keys=keys)]
        skipped = await chat.search_skipped(owner, "heron", None)
        not_skipped = await chat.search_skipped(owner, "heron", keys)
    assert locked == [plain]
    assert opened == [sealed, plain], "the newest first, either kind"
    assert census == [sealed]
    assert skipped and not not_skipped


async def test_a_locked_list_search_says_the_same_whatever_matched(app: App) -> None:
    owner = app.workspace.ensure_owner()
    models(app, [{"text": "Noted."}], loop=True)
    async with running_chat(app) as chat, client(app) as c:
        assert (await c.post("/api/v1/vault/setup", json={"passphrase": PASS})).status_code == 201
        r = await c.post("/api/v1/chat/send", json={"message": "The secret heron census", "security_level": "private",
                                                    "controls": {"model": "own:script"}})
        assert r.status_code == 202
        await settle(chat, owner, r.json()["message_id"], vault_keys(app, owner.id))
        unlocked = (await c.get("/api/v1/chat/conversations", params={"search": "census"})).json()
        assert [x["title"] for x in unlocked["conversations"]] == ["The secret heron census"]
        assert unlocked["search_locked"] is False
        assert (await c.post("/api/v1/vault/lock")).status_code == 204
        hit = (await c.get("/api/v1/chat/conversations", params={"search": "census"})).json()
        miss = (await c.get("/api/v1/chat/conversations", params={"search": "zzz-nothing"})).json()
    assert hit == miss == {"conversations": [], "search_locked": True, "message": PROTECTED_SKIPPED}


def tool_result(provider: ScriptedProvider) -> dict[str, Any]:
    """What search_conversations answered the model (in its last request)."""
    parts = [p for m in provider.requests[-1].messages for p in m.parts if isinstance(p, ToolResultPart)]
    text = parts[-1].content
    start = text.index("{")
    return dict(json.loads(text[start:text.rindex("}") + 1]))


SEARCH: list[Step] = [{"tool_calls": [{"name": "search_conversations", "arguments": {"query": "heron"}}]}, {"text": "Found."}]


async def test_a_model_searches_protected_chats_only_on_a_private_model_with_the_keys(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    app.registry.set_enabled(app.workspace, "search_conversations", True)
    own = models(app, [{"text": "Noted."}, {"text": "Noted."}, *SEARCH, *SEARCH], loop=False)
    async with running_chat(app) as chat:
        plain, sealed = await two_chats(chat, owner, keys)
        # A standard chat on the private model, the keys lent: both chats found.
        asked = await chat.send(owner, "what about herons?", keys=keys,
                                controls={"model": "own:script", "history_access": True})
        await settle(chat, owner, asked.message_id, keys)
        with_keys = tool_result(own)
        # The same without keys (the vault locked): the protected one is left out, and said so.
        again = await chat.send(owner, "herons again?", conversation_id=asked.conversation_id)
        await settle(chat, owner, again.message_id, None)
        without = tool_result(own)
        # On a cloud model the keys are never lent to the search.
        cloud = ScriptedProvider("far", [*SEARCH], local=False)
        app.services["providers"].add(cloud)
        sent = await chat.send(owner, "herons in the cloud?", keys=keys,
                               controls={"model": "far:script", "history_access": True})
        await settle(chat, owner, sent.message_id, keys)
        on_cloud = tool_result(cloud)
    assert {h["conversation_id"] for h in with_keys["conversations"]} == {plain, sealed}
    assert "protected" not in with_keys
    assert {h["conversation_id"] for h in without["conversations"]} == {plain}
    assert without["protected"] == PROTECTED_SKIPPED
    assert {h["conversation_id"] for h in on_cloud["conversations"]} == {plain, asked.conversation_id}
    assert on_cloud["protected"] == PROTECTED_SKIPPED
    assert "census" not in json.dumps(on_cloud) and "census" not in json.dumps(without)
