"""The note open beside a person's chat: only one they may see reaches the model, and someone
else's note is refused in the very words of a missing one."""

from __future__ import annotations

import pytest

from chat_support import collect, running_chat
from noteloom.app import App
from noteloom.errors import InvalidInput
from noteloom.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_a_member_chats_beside_a_shared_note_but_never_beside_someone_elses(any_app: App) -> None:
    ws = any_app.workspace
    owner = ws.ensure_owner()
    ann = ws.add_person("ann")
    work = ws.create_notebook("Work")
    private = ws.create_note("Salaries", "PELICAN-SALARY 9000", notebook_id=ws.create_notebook("HR").id)
    plan = ws.create_note("Plan", "PELICAN-PLAN ship in May", notebook_id=work.id)
    model = ScriptedProvider("own", [{"text": "Done."}], loop=True)
    any_app.services["providers"].add(model)
    async with running_chat(any_app) as chat:
        with pytest.raises(InvalidInput) as foreign:
            await chat.send(ann, "summarise", note_id=private.id, controls={"model": "own:script"})
        with pytest.raises(InvalidInput) as missing:
            await chat.send(ann, "summarise", note_id="0" * 32, controls={"model": "own:script"})
        assert str(foreign.value).replace(private.id, "ID") == str(missing.value).replace("0" * 32, "ID")
        assert model.requests == [], "nothing reached the model"

        ws.share_notebook(work.id, "ann", "read", actor=owner)
        sent = await chat.send(ann, "summarise", note_id=plan.id, controls={"model": "own:script"})
        events = await collect(chat, ann, sent.message_id)
        assert events[-1].data["status"] == "complete"
        assert "PELICAN-PLAN" in model.requests[-1].system_text

        ws.unshare_notebook(work.id, "ann", actor=owner)
        with pytest.raises(InvalidInput):
            await chat.send(ann, "again", conversation_id=sent.conversation_id, note_id=plan.id)
    assert all("PELICAN-SALARY" not in r.system_text for r in model.requests)
