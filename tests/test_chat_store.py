"""Managing conversations, on SQLite and PostgreSQL: the list order, search taken literally,
rename, pin, delete and purge, owners kept apart, export, slash commands."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from chat_support import running_chat, scripted, settle
from noteloom.app import App
from noteloom.chat import ChatService
from noteloom.chat import tables as t
from noteloom.chat.commands import Command, parse_command
from noteloom.chat.export import markdown_to_text
from noteloom.db import new_id, now_ms
from noteloom.errors import InvalidInput, NotFound
from noteloom.runs import tables as rt
from noteloom.workspace import User

pytestmark = pytest.mark.anyio


def _second_user(app: App) -> User:
    uid = new_id()
    with app.workspace.write() as c:
        c.execute(sa.text("INSERT INTO users (id, name, is_owner, created_time) VALUES (:i, 'guest', :f, :t)"),
                  {"i": uid, "f": False, "t": now_ms()})
    return User(uid, "guest", False)


async def test_the_list_shows_pinned_first_then_the_most_recent(any_app: App) -> None:
    chat = ChatService(any_app)
    owner = any_app.workspace.ensure_owner()
    convs = chat.stores.conversations
    a = convs.create(owner.id, title="Alpha")
    b = convs.create(owner.id, title="Beta")
    c = convs.create(owner.id, title="Gamma")
    with any_app.workspace.write() as conn:  # make the activity order unambiguous
        for i, conv in enumerate((a, b, c)):
            conn.execute(t.conversations.update().where(t.conversations.c.id == conv.id).values(updated_time=1000 + i))
    await chat.update_conversation(owner, a.id, pinned=True)
    await chat.update_conversation(owner, c.id, title="Gamma renamed")
    titles = [x.title for x in await chat.conversations(owner)]
    assert titles == ["Alpha", "Gamma renamed", "Beta"]


async def test_search_matches_titles_and_messages_literally(any_app: App) -> None:
    chat = ChatService(any_app)
    owner = any_app.workspace.ensure_owner()
    convs = chat.stores.conversations
    for title in ("100% done", "a_b plan", "axb plan", "Other"):
        convs.create(owner.id, title=title)
    other = convs.create(owner.id, title="Quiet")
    with any_app.workspace.write() as c:
        chat.stores.transcript.add_note(other.id, "The budget is 50% spent", command="cost", conn=c)
    guest = _second_user(any_app)
    convs.create(guest.id, title="100% guest")

    async def titles(q: str) -> list[str]:
        return sorted(x.title for x in await chat.conversations(owner, search=q))

    assert await titles("%") == ["100% done", "Quiet"]
    assert await titles("_") == ["a_b plan"]
    assert await titles("A_B") == ["a_b plan"]
    assert await titles("PLAN") == ["a_b plan", "axb plan"]
    assert await titles("50% spent") == ["Quiet"]
    assert await titles("\\") == []


async def test_another_users_conversation_reads_as_missing(any_app: App) -> None:
    chat = ChatService(any_app)
    owner = any_app.workspace.ensure_owner()
    mine = chat.stores.conversations.create(owner.id, title="Private")
    guest = _second_user(any_app)
    assert await chat.conversations(guest) == []
    with pytest.raises(NotFound, match=mine.id):
        await chat.conversation(guest, mine.id)
    with pytest.raises(NotFound):
        await chat.update_conversation(guest, mine.id, title="Mine now")
    with pytest.raises(NotFound):
        await chat.delete_conversation(guest, mine.id, permanent=True)
    assert (await chat.conversation(owner, mine.id))["title"] == "Private"


async def test_delete_hides_restore_brings_back_and_purge_removes_everything(any_app: App) -> None:
    owner = any_app.workspace.ensure_owner()
    note = any_app.workspace.create_note("Trip", "Bring the tent.\n")
    any_app.registry.set_enabled(any_app.workspace, "delete_note", True)
    scripted(any_app, [
        {"tool_calls": [{"name": "rewrite_paragraph", "arguments": {"anchor": "tent", "text": "Bring the tarp."}},
                        {"name": "delete_note", "arguments": {"id": note.id}}]},
    ])
    async with running_chat(any_app) as chat:
        sent = await chat.send(owner, "tidy up", note_id=note.id, controls={"model": "play:script"})
        parked = await settle(chat, owner, sent.message_id)
        assert parked["status"] == "awaiting_confirmation" and len(parked["edits"]) == 1
        keep = await chat.send(owner, "/cost")
        cid = sent.conversation_id

        await chat.delete_conversation(owner, cid)
        assert cid not in [c.id for c in await chat.conversations(owner)]
        assert [c.id for c in await chat.conversations(owner, deleted=True)] == [cid]
        with pytest.raises(NotFound):
            await chat.message(owner, sent.message_id)
        await chat.restore_conversation(owner, cid)
        assert (await chat.message(owner, sent.message_id))["status"] == "awaiting_confirmation"

        purged = await chat.delete_conversation(owner, cid, permanent=True)
        assert purged == 2
    with any_app.workspace.read() as c:
        for table in (t.messages, t.pending_actions, t.edits):
            col = table.c.conversation_id if table is t.messages else table.c.message_id
            ids = [cid] if table is t.messages else [sent.message_id]
            assert c.execute(sa.select(sa.func.count()).select_from(table).where(col.in_(ids))).scalar() == 0
        for table, col in ((rt.runs, rt.runs.c.id), (rt.events, rt.events.c.run_id), (rt.calls, rt.calls.c.run_id)):
            assert c.execute(sa.select(sa.func.count()).select_from(table).where(col == sent.message_id)).scalar() == 0
        assert c.execute(sa.select(sa.func.count()).select_from(t.conversations).where(
            t.conversations.c.id == cid)).scalar() == 0
        # The other conversation is untouched.
        assert c.execute(sa.select(sa.func.count()).select_from(t.messages).where(
            t.messages.c.conversation_id == keep.conversation_id)).scalar() == 1


async def test_export_labels_roles_summarises_tools_and_flattens_markdown(app: App) -> None:
    owner = app.workspace.ensure_owner()
    scripted(app, [
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": "tent"}}]},
        {"text": "See **the list** at [the shop](https://shop.example)."},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "Where is the tent list?", controls={"model": "play:script"})
        await settle(chat, owner, sent.message_id)
        name, md = await chat.export(owner, sent.conversation_id, "md")
        _, txt = await chat.export(owner, sent.conversation_id, "txt")
    assert name == "Where-is-the-tent-list.md"
    assert "## You" in md and "## Assistant" in md
    assert "> Tool search_notes(query='tent'): done" in md
    assert "See **the list** at [the shop](https://shop.example)." in md
    assert "You (" in txt and "Assistant (" in txt
    assert "See the list at the shop (https://shop.example)." in txt and "**" not in txt


def test_plain_text_keeps_code_and_lists_readable() -> None:
    assert markdown_to_text("# Title\n\n- one\n- *two*\n\n```py\nx = 1\n```") == "Title\n\n- one\n- two\n\nx = 1"


def test_only_the_four_commands_are_commands() -> None:
    assert parse_command("/MODEL echo:echo") == Command("model", "echo:echo")
    assert parse_command("  /clear ") == Command("clear")
    assert parse_command("/system Be brief.\nAlways.") == Command("system", "Be brief.\nAlways.")
    assert parse_command("/usr/bin is a folder") is None
    assert parse_command("hello /cost") is None


async def test_slash_commands_change_the_conversation_and_leave_a_note(app: App) -> None:
    owner = app.workspace.ensure_owner()
    async with running_chat(app) as chat:
        first = await chat.send(owner, "/model echo")
        cid = first.conversation_id
        assert first.status == "complete" and first.user_message_id is None
        conv = await chat.conversation(owner, cid)
        assert conv["controls"]["model"] == "echo:echo"
        assert conv["messages"][0]["role"] == "note" and "echo:echo" in conv["messages"][0]["content"]
        with pytest.raises(InvalidInput, match="model 'nowhere:x' cannot be used"):
            await chat.send(owner, "/model nowhere:x", conversation_id=cid)
        await chat.send(owner, "/system Answer in French.", conversation_id=cid)
        assert (await chat.conversation(owner, cid))["controls"]["instructions"] == "Answer in French."
        await chat.send(owner, "/system", conversation_id=cid)
        assert (await chat.conversation(owner, cid))["controls"]["instructions"] is None
        sent = await chat.send(owner, "bonjour", conversation_id=cid)
        await settle(chat, owner, sent.message_id)
        cost = await chat.send(owner, "/cost", conversation_id=cid)
        note = await chat.message(owner, cost.message_id)
        assert note["content"].startswith("Tokens so far:") and "$0" in note["content"]
        cleared = await chat.send(owner, "/clear", conversation_id=cid)
        assert (await chat.message(owner, cleared.message_id))["command"] == "clear"
