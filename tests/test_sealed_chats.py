"""Private and fortress chats over the chat service: everything of a protected chat is stored
sealed (messages, tool traces, pending actions, errors, titles, instructions, attachments,
the turn's events) and opens with its owner's keys; without them lists show a placeholder
and reading or sending answers Locked; fortress refuses a cloud model at every entry point."""

from __future__ import annotations

import anyio
import pytest
import sqlalchemy as sa

from chat_support import running_chat
from noteloom import db
from noteloom.app import App, open_app
from noteloom.chat import tables as t
from noteloom.chat.attachments import Upload
from noteloom.chat.sealing import LOCKED_TITLE
from noteloom.errors import InvalidInput, Locked
from noteloom.providers.scripted import Step
from noteloom.runs import tables as rt
from noteloom.vault import is_sealed
from sealed_support import MARKER, collect, files_holding, models, rows_holding, settle, vault_keys

pytestmark = pytest.mark.anyio


def steps() -> list[Step]:
    """A turn that calls a tool with the marker (held for a decision), then answers with it."""
    return [
        {"text": f"Looking for {MARKER}.",
         "tool_calls": [{"name": "create_note", "arguments": {"title": f"About {MARKER}", "body": MARKER}}]},
        {"text": f"The answer mentions {MARKER} again."},
    ]


async def test_a_private_chat_stores_nothing_in_clear_and_opens_with_the_keys(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    app.registry.set_enabled(app.workspace, "create_note", True)
    models(app, list(steps()))
    async with running_chat(app) as chat:
        sent = await chat.send(
            owner, f"Tell me about {MARKER}", security_level="private", keys=keys,
            controls={"model": "own:script", "instructions": f"Speak of {MARKER}.",
                      "tool_policies": {"create_note": "confirm"}},
            attachments=[Upload(f"{MARKER}.txt", f"file text {MARKER}\n".encode())],
        )
        parked = await settle(chat, owner, sent.message_id, keys)
        assert parked["status"] == "awaiting_confirmation"
        assert parked["pending_action"]["arguments"]["title"] == f"About {MARKER}"
        await chat.confirm(owner, sent.message_id, "decline", keys)
        view = await settle(chat, owner, sent.message_id, keys)
        detail = await chat.conversation(owner, sent.conversation_id, keys)
        name, text = await chat.export(owner, sent.conversation_id, "md", keys)
        att = detail["messages"][0]["attachments"][0]
        _, data = await chat.attachment(owner, att["id"], keys)
    assert view["status"] == "complete" and MARKER in view["content"]
    assert detail["title"] == f"Tell me about {MARKER}" and detail["security_level"] == "private"
    assert detail["controls"]["instructions"] == f"Speak of {MARKER}." and not detail["locked"]
    assert att["name"] == f"{MARKER}.txt" and data == f"file text {MARKER}\n".encode()
    assert view["tool_calls"][0]["arguments"]["title"] == f"About {MARKER}"
    assert MARKER in text and name.endswith(".md")
    assert rows_holding(app, MARKER) == [], "no row holds the marker in clear"
    assert files_holding(app, MARKER) == [], "nor any database or attachment file"


async def test_a_protected_turns_stored_events_open_for_a_reader_with_the_keys(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": f"Streaming {MARKER}."}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "hello", security_level="private", keys=keys,
                               controls={"model": "own:script"})
        await settle(chat, owner, sent.message_id, keys)
        events = await collect(chat, owner, sent.message_id, keys)  # settled: read back from the table
        with pytest.raises(Locked):
            await collect(chat, owner, sent.message_id, None, timeout=10)
    assert MARKER in "".join(str(e.data.get("text", "")) for e in events if e.kind == "text")
    assert events[-1].kind == "done" and events[-1].data["status"] == "complete"
    assert rows_holding(app, MARKER) == []


async def test_locked_lists_show_a_placeholder_and_reading_or_sending_asks_to_unlock(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "Private answer."}], loop=True)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, f"Secret plan {MARKER}", security_level="private", keys=keys,
                               controls={"model": "own:script"}, attachments=[Upload("a.txt", b"text\n")])
        await settle(chat, owner, sent.message_id, keys)
        plain = await chat.send(owner, "An open question", controls={"model": "own:script"})
        await settle(chat, owner, plain.message_id, keys)
        listed = {c.id: c for c in await chat.conversations(owner)}
        assert listed[sent.conversation_id].title == LOCKED_TITLE and listed[sent.conversation_id].locked
        assert listed[sent.conversation_id].controls.instructions is None
        assert listed[plain.conversation_id].title == "An open question" and not listed[plain.conversation_id].locked
        with pytest.raises(Locked, match="unlock it with your vault passphrase"):
            await chat.conversation(owner, sent.conversation_id)  # no keys
        assert (await chat.conversation(owner, plain.conversation_id))["title"] == "An open question"


async def test_every_read_and_send_of_a_locked_protected_chat_is_locked(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "Private answer."}], loop=True)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, f"Secret plan {MARKER}", security_level="private", keys=keys,
                               controls={"model": "own:script"}, attachments=[Upload("a.txt", b"text\n")])
        await settle(chat, owner, sent.message_id, keys)
        detail = await chat.conversation(owner, sent.conversation_id, keys)
        file_id = detail["messages"][0]["attachments"][0]["id"]
        for attempt in (
            chat.conversation(owner, sent.conversation_id),
            chat.message(owner, sent.message_id),
            chat.message(owner, sent.user_message_id or ""),
            chat.export(owner, sent.conversation_id, "md"),
            chat.attachment(owner, file_id),
            chat.send(owner, "more", conversation_id=sent.conversation_id),
            chat.send(owner, "/cost", conversation_id=sent.conversation_id),
            chat.send(owner, "new", security_level="private"),
            chat.update_conversation(owner, sent.conversation_id, security_level="standard"),
        ):
            with pytest.raises(Locked, match="unlock"):
                await attempt
        # With the keys again it resumes where it was.
        more = await chat.send(owner, "more", conversation_id=sent.conversation_id, keys=keys)
        view = await settle(chat, owner, more.message_id, keys)
        listed = {c.id: c for c in await chat.conversations(owner, keys=keys)}
    assert view["status"] == "complete"
    assert listed[sent.conversation_id].title == f"Secret plan {MARKER}" and not listed[sent.conversation_id].locked


async def test_renaming_and_instructions_seal_while_locked(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "ok"}], loop=True)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "start", security_level="private", keys=keys, controls={"model": "own:script"})
        await settle(chat, owner, sent.message_id, keys)
        renamed = await chat.update_conversation(owner, sent.conversation_id, title=f"Renamed {MARKER}",
                                                 controls={"instructions": f"Be {MARKER}"}, pinned=True)
        assert renamed.locked and renamed.title == LOCKED_TITLE and renamed.pinned
        opened = await chat.update_conversation(owner, sent.conversation_id, controls={"temperature": 0.5},
                                                keys=keys)
    assert opened.title == f"Renamed {MARKER}" and opened.controls.instructions == f"Be {MARKER}"
    assert opened.controls.temperature == 0.5, "other controls still change, the instructions kept"
    assert rows_holding(app, MARKER) == []


async def test_fortress_refuses_a_cloud_model_at_every_entry_point(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "Local answer."}], loop=True)
    async with running_chat(app) as chat:
        with pytest.raises(InvalidInput, match="not a private model") as on_send:
            await chat.send(owner, "hi", security_level="fortress", keys=keys, controls={"model": "cloud:script"})
        assert on_send.value.field == "model"
        sent = await chat.send(owner, "hi", security_level="fortress", keys=keys, controls={"model": "own:script"})
        await settle(chat, owner, sent.message_id, keys)
        cid = sent.conversation_id
        for attempt in (
            chat.update_conversation(owner, cid, controls={"model": "cloud:script"}, keys=keys),  # the setter
            chat.send(owner, "again", conversation_id=cid, keys=keys, controls={"model": "cloud:script"}),
            chat.send(owner, "/model cloud:script", conversation_id=cid, keys=keys),
        ):
            with pytest.raises(InvalidInput, match="not a private model"):
                await attempt
        # A standard chat on a cloud model cannot be made fortress …
        cloud = await chat.send(owner, "open", controls={"model": "cloud:script"})
        await settle(chat, owner, cloud.message_id, keys)
        with pytest.raises(InvalidInput, match="not a private model"):
            await chat.update_conversation(owner, cloud.conversation_id, security_level="fortress")
        # … unless its model becomes private in the same change.
        made = await chat.update_conversation(owner, cloud.conversation_id, security_level="fortress",
                                              controls={"model": "own:script"}, keys=keys)
        assert made.security_level == "fortress"
        # The choke point: with the front doors bypassed, the turn itself refuses the cloud model.
        with pytest.raises(InvalidInput):
            chat.runner.provider_for("cloud:script", "fortress")
        chat.check_model = lambda address, level="standard": str(address)  # type: ignore[method-assign]
        bypass = await chat.send(owner, "sneak", conversation_id=cid, keys=keys, controls={"model": "cloud:script"})
        view = await settle(chat, owner, bypass.message_id, keys)
    assert view["status"] == "failed" and view["error"]["code"] == "model_not_private"
    cloud_provider = app.services["providers"].get("cloud")
    assert not any("sneak" in repr(r) for r in getattr(cloud_provider, "requests", [])), "nothing reached the cloud"


async def test_a_private_chat_on_a_cloud_model_is_warned_about_and_gets_no_memory_or_history(app: App) -> None:
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"text": "ok"}], loop=True)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "hello", security_level="private", keys=keys,
                               controls={"model": "cloud:script", "history_access": True, "memory_access": True})
        view = await settle(chat, owner, sent.message_id, keys)
    assert sent.privacy_warning is not None and "this chat is private" in sent.privacy_warning
    assert view["status"] == "complete" and view["memories"] is None, "memory off on a cloud model's turn"
    cloud = app.services["providers"].get("cloud")
    offered = {t.name for r in cloud.requests for t in r.tools}
    assert "search_conversations" not in offered and "recall" not in offered


async def test_a_streaming_protected_turn_writes_nothing_in_clear_and_streams_to_another_worker(
    any_app: App,
) -> None:
    """The partial answer of a running protected turn lives in memory; what is stored of it
    (its events) is sealed, and another process reads it with the keys: events and partial text."""
    app = any_app
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"chunks": ["Working on ", MARKER, " now"], "hang": True}])
    other = open_app(app.settings, load_entry_points=False)
    try:
        other_keys = vault_keys(other, owner.id)
        async with running_chat(app) as runs, running_chat(other) as reads:
            sent = await runs.send(owner, "go", security_level="private", keys=keys,
                                   controls={"model": "own:script"})
            assert reads.runner.live.get(sent.message_id) is None
            with anyio.fail_after(30):
                async for event in reads.events(owner, sent.message_id, 0, other_keys):
                    if event.kind == "text" and MARKER in str(event.data.get("text")):
                        break  # stored (sealed) and opened over there
            view = await reads.message(owner, sent.message_id, other_keys)
            assert view["status"] == "running" and view["partial_text"] == f"Working on {MARKER} now"
            assert rows_holding(app, MARKER) == [] and files_holding(app, MARKER) == [], "nothing of it in clear"
            await runs.cancel(owner, sent.message_id)
            done = await settle(runs, owner, sent.message_id, keys)
    finally:
        other.close()
    assert done["status"] == "cancelled" and MARKER in done["content"]
    assert rows_holding(app, MARKER) == []


async def test_a_protected_turn_reaped_by_another_process_stays_sealed(app: App) -> None:
    """A turn whose process stopped is settled by another one, which cannot read it: what it
    writes (the error, the last events) is sealed too, and what the turn stored is kept."""
    owner = app.workspace.ensure_owner()
    keys = vault_keys(app, owner.id)
    models(app, [{"chunks": ["Half an answer about ", MARKER], "hang": True}])
    other = open_app(app.settings, load_entry_points=False)
    try:
        other_keys = vault_keys(other, owner.id)
        async with running_chat(app) as runs, running_chat(other) as reaper:
            sent = await runs.send(owner, "go", security_level="private", keys=keys, controls={"model": "own:script"})
            with anyio.fail_after(30):
                async for event in reaper.events(owner, sent.message_id, 0, other_keys):
                    if event.kind == "text":
                        break
            # As if its process had died: the other runner settles it.
            reaped = await anyio.to_thread.run_sync(reaper.runner.recover, db.now_ms() + 60_000)
            assert reaped == [sent.message_id]
            view = await reaper.message(owner, sent.message_id, other_keys)
            events = await collect(reaper, owner, sent.message_id, other_keys, timeout=30)
            with app.engine.connect() as c:
                stored = [r.data for r in c.execute(sa.select(rt.events.c.data).where(
                    rt.events.c.run_id == sent.message_id).order_by(rt.events.c.seq))]
                error = c.execute(sa.select(t.messages.c.error_message).where(
                    t.messages.c.id == sent.message_id)).scalar()
            await runs.cancel(owner, sent.message_id)
    finally:
        other.close()
    assert view["status"] == "failed" and view["error"]["code"] == "interrupted"
    assert "Send the message again" in view["error"]["message"]
    assert [e.kind for e in events][-2:] == ["error", "done"]
    assert all(set(d) == {"sealed"} for d in stored), "every stored event is sealed, the reaper's too"
    assert is_sealed(error)
    assert rows_holding(app, MARKER) == []
