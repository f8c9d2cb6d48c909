"""A confirmation card names the notes of its call by title and notebook, looked up as the
person deciding it: a note they cannot see is named as such, never by its title."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2 as httpx
import pytest

from api_support import client, second_user
from chat_support import running_chat, scripted
from noteloom.app import App

pytestmark = pytest.mark.anyio


async def parked(c: httpx.AsyncClient, model: str, text: str) -> dict[str, Any]:
    r = await c.post("/api/v1/chat/send", json={"message": text, "controls": {"model": model}})
    assert r.status_code == 202, r.text
    with anyio.fail_after(60):
        while True:
            view = (await c.get(f"/api/v1/chat/messages/{r.json()['message_id']}")).json()
            if view["status"] != "running":
                assert view["status"] == "awaiting_confirmation", view
                return dict(view)
            await anyio.sleep(0.02)


async def test_the_card_names_the_note_by_title_and_notebook(app: App) -> None:
    ws = app.workspace
    book = ws.create_notebook("Travel")
    note = ws.create_note("Old packing list", "- socks", notebook_id=book.id)
    app.registry.set_enabled(ws, "delete_note", True)
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Done."}])
    async with running_chat(app), client(app) as c:
        view = await parked(c, "play:script", "delete the old list")
        names = view["pending_action"]["names"]
        assert names == [{"id": note.id, "kind": "note", "title": "Old packing list", "notebook": "Travel"}]
        detail = (await c.get(f"/api/v1/chat/conversations/{view['conversation_id']}")).json()
        assert detail["messages"][-1]["pending_action"]["names"] == names


async def test_a_note_the_person_cannot_see_is_not_named(app: App) -> None:
    ws = app.workspace
    secret = ws.create_note("Salary review", "private", notebook_id=ws.create_notebook("Owner only").id)
    app.registry.set_enabled(ws, "delete_note", True)
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": secret.id}}]}], loop=True)
    _, token = second_user(app)
    async with running_chat(app), client(app, token) as guest:
        view = await parked(guest, "play:script", "delete it")
        action = view["pending_action"]
        assert action["names"] == [{"id": secret.id, "kind": "hidden", "title": None, "notebook": None}]
        assert "Salary review" not in str(view)
