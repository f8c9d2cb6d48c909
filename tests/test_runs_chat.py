"""The chat on the run engine: each turn is a run (the message's id, kind ``chat_turn``)
holding its events, heartbeat, runner, cancel flag and tool-call records."""

from __future__ import annotations

import anyio
import pytest
import sqlalchemy as sa

from chat_support import collect, running_chat, scripted, settle, until
from noteloom import db
from noteloom.app import App
from noteloom.chat import ChatService
from noteloom.runs import store
from noteloom.runs import tables as rt
from noteloom.runs.liveness import RunnerLease
from noteloom.runs.store import CallStart

pytestmark = pytest.mark.anyio


def run_of(app: App, message_id: str) -> store.Run:
    with app.workspace.read() as c:
        run = store.get(c, message_id)
    assert run is not None
    return run


def calls_of(app: App, message_id: str) -> list[tuple[str, str | None]]:
    with app.workspace.read() as c:
        return [(x.tool, x.outcome) for x in store.calls_of(c, message_id)]


async def test_a_turn_is_a_run_whose_events_are_what_was_streamed(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    scripted(app, [{"chunks": ["Hel", "lo"], "usage": {"input_tokens": 40, "output_tokens": 3}}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "Say hello", controls={"model": "play:script"})
        running = run_of(app, sent.message_id)
        assert (running.status, running.runner_id) == ("running", chat.runner.id)
        assert running.heartbeat_time is not None and running.started_time is not None
        events = await collect(chat, owner, sent.message_id)
        view = await chat.message(owner, sent.message_id)
    run = run_of(app, sent.message_id)
    assert (run.kind, run.subject_id, run.user_id, run.status) == ("chat_turn", sent.message_id, owner.id, "succeeded")
    assert (run.model, run.input_tokens, run.output_tokens) == (view["model"], 40, 3)
    assert str(run.cost_usd) == view["cost_usd"] == "0"
    with app.workspace.read() as c:
        stored = store.read_events(c, sent.message_id, 0)
    assert [(e.seq, e.kind, e.data) for e in stored] == [(e.seq, e.kind, e.data) for e in events]


async def test_a_cancel_written_to_the_run_by_another_process_stops_the_turn(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    scripted(app, [{"chunks": ["slow"], "hang": True}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "go", controls={"model": "play:script"})
        await until(chat, owner, sent.message_id, "text")
        with app.workspace.write() as c:  # what another server does: only the run's row changes
            assert store.request_cancel(c, sent.message_id)
        view = await settle(chat, owner, sent.message_id, timeout=30.0)
    assert view["status"] == "cancelled" and view["content"] == "slow"
    assert run_of(app, sent.message_id).status == "cancelled"


async def test_a_turn_whose_run_went_silent_is_interrupted_at_start_up_with_its_partial_answer(app: App) -> None:
    owner = app.workspace.ensure_owner()
    chat = ChatService(app)
    with app.workspace.write() as c:
        conv = chat.stores.conversations.create(owner.id, conn=c)
        _, orphan = chat.stores.transcript.start_exchange(conv.id, "hello?", note_context=None, model=None, conn=c)
        c.execute(rt.runs.update().where(rt.runs.c.id == orphan.id).values(heartbeat_time=1))
        chat.stores.transcript.save_progress(orphan.id, content="Half an", activity=None, conn=c)
    async with running_chat(app) as live:
        view = await live.message(owner, orphan.id)
        events = await collect(live, owner, orphan.id)
    assert view["status"] == "failed" and view["error"]["code"] == "interrupted"
    assert view["content"] == "Half an" and "Send the message again" in view["error"]["message"]
    assert [e.kind for e in events] == ["error", "done"]
    assert run_of(app, orphan.id).status == "failed"


async def test_a_turn_whose_runner_died_in_a_tool_call_names_the_call(app: App) -> None:
    owner = app.workspace.ensure_owner()
    chat = ChatService(app)
    dead = RunnerLease(app.workspace.engine)
    dead.acquire()
    dead.release()
    with app.workspace.write() as c:
        conv = chat.stores.conversations.create(owner.id, conn=c)
        _, orphan = chat.stores.transcript.start_exchange(
            conv.id, "tidy up", note_context=None, model=None, runner_id=dead.id, conn=c
        )
        store.record_calls(c, orphan.id, [CallStart("call_1", "search_notes", {"query": "old"}, db.now_ms())])
    async with running_chat(app) as live:
        view = await live.message(owner, orphan.id)
    assert view["status"] == "failed" and view["error"]["code"] == "interrupted"
    assert "search_notes" in view["error"]["message"] and "Send the message again" in view["error"]["message"]
    run = run_of(app, orphan.id)
    assert "interrupted during tool 'search_notes'" in (run.error_message or "")
    assert calls_of(app, orphan.id) == [("search_notes", "interrupted")]


async def test_each_tool_call_of_a_turn_is_audited_held_then_run_after_approval(app: App) -> None:
    owner = app.workspace.ensure_owner()
    note = app.workspace.create_note("Old", "stale")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [
        {"tool_calls": [{"id": "c1", "name": "search_notes", "arguments": {"query": "stale"}}]},
        {"text": "I will delete it.", "tool_calls": [{"id": "c2", "name": "delete_note", "arguments": {"id": note.id}}]},
        {"text": "Done."},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "delete the stale note", controls={"model": "play:script"})
        parked = await settle(chat, owner, sent.message_id)
        assert parked["status"] == "awaiting_confirmation"
        assert run_of(app, sent.message_id).status == "waiting"
        assert calls_of(app, sent.message_id) == [("search_notes", "ok"), ("delete_note", "held")]
        await chat.confirm(owner, sent.message_id, "approve")
        assert (await settle(chat, owner, sent.message_id))["status"] == "complete"
    assert calls_of(app, sent.message_id) == [("search_notes", "ok"), ("delete_note", "held"), ("delete_note", "ok")]
    with app.workspace.read() as c:
        audited = store.calls_of(c, sent.message_id)
    assert audited[0].arguments == {"query": "stale"} and audited[-1].arguments == {"id": note.id}
    assert all(x.finished_time is not None and x.finished_time >= x.started_time for x in audited)
    assert run_of(app, sent.message_id).status == "succeeded"


async def test_a_denied_call_is_audited_as_denied(app: App) -> None:
    owner = app.workspace.ensure_owner()
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [
        {"tool_calls": [{"name": "delete_note", "arguments": {"id": "nope"}}]},
        {"text": "I may not."},
    ])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "delete it", controls={
            "model": "play:script", "tool_policies": {"delete_note": "deny"},
        })
        assert (await settle(chat, owner, sent.message_id))["status"] == "complete"
    assert calls_of(app, sent.message_id) == [("delete_note", "denied")]


async def test_purging_a_conversation_removes_its_runs_events_and_calls(any_app: App) -> None:
    app = any_app
    owner = app.workspace.ensure_owner()
    scripted(app, [{"tool_calls": [{"name": "search_notes", "arguments": {"query": "x"}}]}, {"text": "ok"}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "look", controls={"model": "play:script"})
        await settle(chat, owner, sent.message_id)
        assert calls_of(app, sent.message_id) == [("search_notes", "ok")]
        await chat.delete_conversation(owner, sent.conversation_id, permanent=True)
    with app.workspace.read() as c:
        for table in (rt.runs, rt.events, rt.calls):
            col = table.c.id if table is rt.runs else table.c.run_id
            assert c.execute(sa.select(sa.func.count()).select_from(table).where(col == sent.message_id)).scalar() == 0


async def test_a_turn_running_when_the_chat_stops_leaves_its_run_failed_interrupted(app: App) -> None:
    owner = app.workspace.ensure_owner()
    scripted(app, [{"chunks": ["still going"], "hang": True}])
    async with running_chat(app) as chat:
        sent = await chat.send(owner, "go", controls={"model": "play:script"})
        await until(chat, owner, sent.message_id, "text")
    run = run_of(app, sent.message_id)
    assert (run.status, run.error_code) == ("failed", "interrupted") and not run.cancel_requested
    with anyio.fail_after(5):
        view = await ChatService(app).message(owner, sent.message_id)
    assert view["status"] == "failed" and view["content"] == "still going"
