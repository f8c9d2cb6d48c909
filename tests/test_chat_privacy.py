"""The chat warns when private content is about to go to a model that is not private: on
the send's answer and as the turn's first event. Private content, for now: files attached
to the conversation. Models are scripted; privacy is
what each provider declares. The note open beside the chat is not private content: notes
reach the chosen model through every workspace tool."""

from __future__ import annotations

import json

import pytest

from api_support import client
from chat_support import collect, running_chat
from noteloom.app import App
from noteloom.chat.attachments import Upload
from noteloom.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio


def models(app: App) -> None:
    """``cloud:script``, a model that is not private, and ``own:script``, one that is."""
    providers = app.services["providers"]
    providers.add(ScriptedProvider("cloud", [{"text": "Done."}], loop=True, local=False))
    providers.add(ScriptedProvider("own", [{"text": "Done."}], loop=True))



async def test_a_file_sent_to_a_model_that_is_not_private_is_warned_about(app: App) -> None:
    owner = app.workspace.ensure_owner()
    models(app)
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "summarise", controls={"model": "cloud:script"},
                               attachments=[Upload("health.txt", b"Blood pressure 130/85.\n")])
        events = await collect(chat, owner, sent.message_id)
    assert sent.privacy_warning is not None
    assert "cloud:script is not a private model" in sent.privacy_warning
    assert "files attached to it" in sent.privacy_warning
    assert events[0].kind == "privacy_warning", "said before the model answers"
    assert events[0].data == {"message": sent.privacy_warning, "model": "cloud:script"}
    assert events[-1].kind == "done" and events[-1].data["status"] == "complete", "a warning, not a gate"


async def test_no_warning_without_private_content_or_on_a_private_model(app: App) -> None:
    owner = app.workspace.ensure_owner()
    note = app.workspace.create_note("Health", "Blood pressure 130/85.\n")
    models(app)
    async with running_chat(app) as chat:
        plain = await chat.send(owner, "summarise", note_id=note.id, controls={"model": "cloud:script"})
        plain_events = await collect(chat, owner, plain.message_id)
        own = await chat.send(owner, "summarise", note_id=note.id, controls={"model": "own:script"})
        own_events = await collect(chat, owner, own.message_id)
    assert plain.privacy_warning is None and own.privacy_warning is None
    assert "privacy_warning" not in {e.kind for e in [*plain_events, *own_events]}


async def test_files_in_the_conversation_make_it_private_for_every_later_turn(app: App) -> None:
    owner = app.workspace.ensure_owner()
    models(app)
    async with running_chat(app) as chat:
        first = await chat.send(owner, "read this", controls={"model": "cloud:script"},
                                attachments=[Upload("payslip.txt", b"Net pay: 2,345.67\n")])
        await collect(chat, owner, first.message_id)
        later = await chat.send(owner, "and now?", conversation_id=first.conversation_id)
        await collect(chat, owner, later.message_id)
        switched = await chat.send(owner, "again", conversation_id=first.conversation_id,
                                   controls={"model": "own:script"})
        await collect(chat, owner, switched.message_id)
    assert first.privacy_warning is not None and "files attached to it" in first.privacy_warning
    assert later.privacy_warning is not None and "files attached to it" in later.privacy_warning
    assert switched.privacy_warning is None, "a private model takes the same chat without a warning"


async def test_the_api_gives_the_warning_and_each_models_privacy(app: App) -> None:
    note = app.workspace.create_note("Health", "Blood pressure 130/85.\n")
    models(app)
    async with running_chat(app), client(app) as c:
        listed = (await c.get("/api/v1/chat/models")).json()["models"]
        warned = (await c.post("/api/v1/chat/send", data={"payload": json.dumps({
            "message": "summarise", "note_context": {"note_id": note.id}, "controls": {"model": "cloud:script"},
        })}, files=[("attachments", ("health.txt", b"Blood pressure 130/85.\n", "text/plain"))])).json()
        quiet = (await c.post("/api/v1/chat/send", json={"message": "hello", "controls": {"model": "own:script"}})).json()
    by_id = {m["id"]: m for m in listed}
    assert by_id["cloud:script"]["private"] is False and by_id["own:script"]["private"] is True
    assert all(m["local"] == m["private"] for m in listed), "the older field says the same"
    assert "cloud:script is not a private model" in warned["privacy_warning"]
    assert quiet["privacy_warning"] is None
