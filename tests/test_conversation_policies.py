"""A conversation's own tool policies: the last layer of noteloom.policy, stored with the
conversation, set over the API; a deny from the workspace or the settings file still wins."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from chat_support import running_chat, scripted, settle
from noteloom.app import App, access_token
from noteloom.errors import InvalidInput
from noteloom.policy import set_policy
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio


def _delete_script(app: App, note_id: str) -> None:
    scripted(app, [
        {"tool_calls": [{"name": "delete_note", "arguments": {"id": note_id}}]},
        {"text": "Done."},
    ], loop=True)


async def test_a_conversation_auto_runs_what_asks_elsewhere_and_confirm_holds_what_runs(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "delete_note", True)
    doomed = app.workspace.create_note("Old list", "socks")
    _delete_script(app, doomed.id)
    async with running_chat(app) as chat:
        # The default: delete_note asks.
        sent = await chat.send(owner, "tidy up", controls={"model": "play:script"})
        assert (await settle(chat, owner, sent.message_id))["status"] == "awaiting_confirmation"
        await chat.confirm(owner, sent.message_id, "decline")
        await settle(chat, owner, sent.message_id)
        # This conversation trusts it.
        await chat.update_conversation(owner, sent.conversation_id,
                                       controls={"tool_policies": {"delete_note": "auto"}})
        again = await chat.send(owner, "tidy up", conversation_id=sent.conversation_id)
        view = await settle(chat, owner, again.message_id)
        assert view["status"] == "complete" and view["pending_action"] is None
    assert app.workspace.get_note(doomed.id, include_deleted=True).deleted_time is not None
    conv = await _conversation(app, sent.conversation_id)
    assert conv["controls"]["tool_policies"] == {"delete_note": "auto"}


async def test_a_deny_in_the_workspace_wins_over_a_conversation_auto(app: App) -> None:
    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "delete_note", True)
    set_policy(app.workspace, "delete_note", "deny")
    kept = app.workspace.create_note("Keep", "me")
    _delete_script(app, kept.id)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "tidy up", controls={"model": "play:script",
                                                           "tool_policies": {"delete_note": "auto"}})
        view = await settle(chat, owner, sent.message_id)
    assert view["status"] == "complete" and view["pending_action"] is None
    assert app.workspace.get_note(kept.id).deleted_time is None
    assert [c["status"] for c in view["tool_calls"]] != ["done"]


async def test_the_api_sets_and_clears_a_conversations_policies_and_refuses_bad_ones(app: App) -> None:
    owner = app.workspace.ensure_owner()
    token = access_token(app)
    scripted(app, [{"text": "hi"}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "hi", controls={"model": "play:script"})
        await settle(chat, owner, sent.message_id)
    conv_id = sent.conversation_id
    auth = {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with running_chat(app), httpx.AsyncClient(transport=transport, base_url="http://testserver",
                                                    headers=auth) as c:
        r = await c.patch(f"/api/v1/chat/conversations/{conv_id}",
                          json={"controls": {"tool_policies": {"create_note": "confirm"}}})
        assert r.status_code == 200, r.text
        assert r.json()["controls"]["tool_policies"] == {"create_note": "confirm"}
        r = await c.patch(f"/api/v1/chat/conversations/{conv_id}",
                          json={"controls": {"tool_policies": {"create_note": "sometimes"}}})
        assert r.status_code == 422 and "tool_policies" in r.text
        r = await c.patch(f"/api/v1/chat/conversations/{conv_id}", json={"controls": {"tool_policies": None}})
        assert r.status_code == 200 and r.json()["controls"]["tool_policies"] == {}
    async with running_chat(app) as chat:
        with pytest.raises(InvalidInput, match="tool_policies"):
            await chat.update_conversation(owner, conv_id, controls={"tool_policies": {"x": "never"}})


async def _conversation(app: App, conversation_id: str) -> dict[str, Any]:
    owner = app.workspace.ensure_owner()
    async with running_chat(app) as chat:
        return await chat.conversation(owner, conversation_id)
