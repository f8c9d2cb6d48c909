"""Accepting an edit an editor applied itself (``POST /edits/{id}/accept?applied=true``): the
note is left as the editor saved it, so the edit is applied once and is one revision."""

from __future__ import annotations

import pytest

from chat_support import running_chat, scripted
from noteloom.app import App
from test_chat_api import client, wait_for

pytestmark = pytest.mark.anyio
BODY = "# Trip\n\nWe leave on Friday.\n"


async def test_an_edit_the_editor_applied_is_recorded_without_applying_it_again(app: App) -> None:
    note = app.workspace.create_note("Trip", BODY)
    start = BODY.index("Friday")
    scripted(app, [{"tool_calls": [{"name": "edit_selection", "arguments": {"text": "Saturday"}}]},
                   {"text": "Proposed."}], loop=True)
    async with running_chat(app), client(app) as c:
        async def propose() -> dict[str, str]:
            sent = (await c.post("/api/v1/chat/send", json={
                "message": "change it", "controls": {"model": "play:script"},
                "note_context": {"note_id": note.id, "selection": {"start": start, "end": start + 6}}})).json()
            edit: dict[str, str] = (await wait_for(c, sent["message_id"]))["edits"][0]
            return edit

        edit = await propose()
        # Not saved yet: the note does not hold the new text, so nothing is recorded.
        early = await c.post(f"/api/v1/chat/edits/{edit['id']}/accept", params={"applied": "true"})
        assert early.status_code == 409 and "not in note" in early.json()["message"]
        saved = (await c.patch(f"/api/v1/notes/{note.id}", json={"body": BODY.replace("Friday", "Saturday")})).json()
        before = len((await c.get(f"/api/v1/notes/{note.id}/revisions")).json()["revisions"])
        r = await c.post(f"/api/v1/chat/edits/{edit['id']}/accept", params={"applied": "true"})
        assert r.status_code == 200 and r.json()["edit"]["status"] == "accepted"
        assert r.json()["note"]["body"] == BODY.replace("Friday", "Saturday")
        assert r.json()["note"]["updated_time"] == saved["updated_time"]
        assert len((await c.get(f"/api/v1/notes/{note.id}/revisions")).json()["revisions"]) == before
        again = await c.post(f"/api/v1/chat/edits/{edit['id']}/accept", params={"applied": "true"})
        assert again.status_code == 409
        # The server's undo still puts the note back as it was before the edit.
        assert (await c.post(f"/api/v1/chat/edits/{edit['id']}/undo")).json()["note"]["body"] == BODY
