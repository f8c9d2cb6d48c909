"""Raising a chat's level seals what it stored in place, with nothing of the plaintext left in
the database (rows, free pages, the write-ahead log) or the attachment store; lowering opens
it again and needs the window; a chat with a turn in progress keeps its level."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from chat_support import running_chat
from noteloom import db
from noteloom.app import App
from noteloom.chat import tables as t
from noteloom.chat.attachments import Upload
from noteloom.errors import Conflict, InvalidInput, Locked
from noteloom.providers.scripted import Step
from noteloom.runs import tables as rt
from sealed_support import MARKER, files_holding, models, rows_holding, settle, vault_keys

pytestmark = pytest.mark.anyio


def chatty() -> list[Step]:
    """A turn that streams the marker in pieces, calls a tool with it, and fails on a second call."""
    return [
        {"chunks": ["Thinking of ", MARKER, " now ", "and again ", MARKER, "."],
         "tool_calls": [{"name": "search_notes", "arguments": {"query": MARKER}}]},
        {"text": f"Found nothing on {MARKER}."},
    ]


async def test_a_chat_raised_from_standard_keeps_no_plaintext_anywhere(
    any_app: App, caplog: pytest.LogCaptureFixture,
) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, chatty())
    async with running_chat(app) as chat:
        sent = await chat.send(owner, f"What about {MARKER}?", controls={"model": "own:script",
                                                                         "instructions": f"Mind {MARKER}."},
                               attachments=[Upload(f"{MARKER}.txt", f"notes on {MARKER}\n".encode())])
        view = await settle(chat, owner, sent.message_id, None)
        assert view["status"] == "complete" and MARKER in view["content"]
        # As a long turn's partial answers are, the answer was written many times over, at
        # many lengths: copies of it sit in the database's free space.
        for i in range(20):
            with db.write_tx(app.engine) as c:
                c.execute(t.messages.update().where(t.messages.c.id == sent.message_id)
                          .values(content="x" * (i * 37 % 500) + MARKER + "y" * (i * 911 % 6000)))
        with db.write_tx(app.engine) as c:
            c.execute(t.messages.update().where(t.messages.c.id == sent.message_id).values(content=view["content"]))
        assert rows_holding(app, MARKER), "a standard chat is stored in clear"
        raised = await chat.update_conversation(owner, sent.conversation_id, security_level="private")  # no keys
        assert raised.security_level == "private" and raised.locked
        assert rows_holding(app, MARKER) == []
        assert files_holding(app, MARKER) == [], "not in the database file, its WAL, or the attachment files"
        assert not [r for r in caplog.records if r.levelname == "ERROR"], "the scrub after the rewrite ran (VACUUM …)"
        detail = await chat.conversation(owner, sent.conversation_id, keys)
        assert MARKER in detail["messages"][1]["content"] and detail["title"] == f"What about {MARKER}?"
        assert detail["messages"][1]["tool_calls"][0]["arguments"] == {"query": MARKER}
        assert detail["controls"]["instructions"] == f"Mind {MARKER}."
        file_id = detail["messages"][0]["attachments"][0]["id"]
        _, data = await chat.attachment(owner, file_id, keys)
        assert data == f"notes on {MARKER}\n".encode()
        with pytest.raises(Locked):
            await chat.update_conversation(owner, sent.conversation_id, security_level="standard")
        lowered = await chat.update_conversation(owner, sent.conversation_id, security_level="standard", keys=keys)
        assert lowered.security_level == "standard" and not lowered.locked
        again = await chat.conversation(owner, sent.conversation_id)
        _, plain = await chat.attachment(owner, file_id)
    assert MARKER in again["messages"][1]["content"] and plain == f"notes on {MARKER}\n".encode()
    assert again["messages"][0]["attachments"][0]["name"] == f"{MARKER}.txt"
    with app.engine.connect() as c:
        sealed = c.execute(sa.select(sa.func.count()).select_from(t.messages).where(t.messages.c.sealed)).scalar()
        events = [r.data for r in c.execute(sa.select(rt.events.c.data).where(rt.events.c.run_id == sent.message_id))]
    assert sealed == 0 and any(MARKER in str(e) for e in events), "lowered: in clear again, events included"


async def test_raising_needs_a_vault_and_changes_nothing_while_a_turn_waits(app: App) -> None:
    owner = app.workspace.ensure_owner()
    note = app.workspace.create_note("Old", "stale")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    models(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Done."}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "delete it", controls={"model": "own:script"})
        parked = await settle(chat, owner, sent.message_id, None)
        assert parked["status"] == "awaiting_confirmation"
        with pytest.raises(InvalidInput, match="set up your vault first"):
            await chat.update_conversation(owner, sent.conversation_id, security_level="private")
        keys = vault_keys(app, owner.id)
        with pytest.raises(Conflict, match="waiting for a decision"):
            await chat.update_conversation(owner, sent.conversation_id, security_level="private")
        await chat.confirm(owner, sent.message_id, "decline")
        await settle(chat, owner, sent.message_id, None)
        raised = await chat.update_conversation(owner, sent.conversation_id, security_level="fortress", keys=keys)
    assert raised.security_level == "fortress" and not raised.locked


async def test_between_the_protected_levels_nothing_is_rewritten(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": f"Private {MARKER}."}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "hi", security_level="private", keys=keys, controls={"model": "own:script"})
        await settle(chat, owner, sent.message_id, keys)
        with app.engine.connect() as c:
            before = c.execute(sa.select(t.messages.c.content).where(t.messages.c.id == sent.message_id)).scalar()
        made = await chat.update_conversation(owner, sent.conversation_id, security_level="fortress")
        with app.engine.connect() as c:
            after = c.execute(sa.select(t.messages.c.content).where(t.messages.c.id == sent.message_id)).scalar()
    assert made.security_level == "fortress" and before == after


NOTE_BODY = "# Trip\n\nWe leave on Friday.\nBring the tent.\n"
REWRITE: list[Step] = [
    {"tool_calls": [{"name": "rewrite_paragraph",
                     "arguments": {"anchor": "Bring the tent", "text": f"We leave on Saturday.\n{MARKER} tarp."}}]},
    {"text": "I proposed a change."},
]


async def test_proposed_edits_are_kept_out_of_protected_chats(app: App) -> None:
    """A proposed edit's texts are stored in clear: a protected chat's turns propose none, and
    raising a chat waits for its proposals to be decided, then forgets their texts."""
    owner = app.workspace.ensure_owner()
    note = app.workspace.create_note("Trip", NOTE_BODY)
    keys = vault_keys(app, owner.id)
    own = models(app, [*REWRITE, *REWRITE])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "switch to Saturday", note_id=note.id, controls={"model": "own:script"})
        view = await settle(chat, owner, sent.message_id, None)
        assert "rewrite_paragraph" in {s.name for s in own.requests[0].tools}
        [edit] = view["edits"]
        with pytest.raises(Conflict, match="proposed edit"):
            await chat.update_conversation(owner, sent.conversation_id, security_level="private")
        await chat.reject_edit(owner, edit["id"])
        await chat.update_conversation(owner, sent.conversation_id, security_level="private")
        assert rows_holding(app, MARKER) == []
        again = await chat.send(owner, "and now?", conversation_id=sent.conversation_id, note_id=note.id, keys=keys)
        later = await settle(chat, owner, again.message_id, keys)
        detail = await chat.conversation(owner, sent.conversation_id, keys)
    assert "rewrite_paragraph" not in {s.name for s in own.requests[-1].tools}, "not offered in a private chat"
    assert later["edits"] == [] and later["tool_calls"][0]["status"] == "error"
    assert detail["messages"][1]["edits"][0]["status"] == "rejected", "decided edits keep their status"
    assert rows_holding(app, MARKER) == []
