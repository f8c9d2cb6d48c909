"""The chat's JSON API in-process: send, poll, resumable SSE, cancel, confirm, edits,
conversation housekeeping, notes for the page — with 404/409/422 that say what is wrong."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from chat_support import running_chat, scripted
from noteloom.app import App, access_token
from noteloom.db import new_id, now_ms
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio
BODY = "# Trip\n\nWe leave on Friday.\n\nBudget: 300 euros.\n"


@asynccontextmanager
async def client(app: App, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    token = token or access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver",
                                 headers={"Authorization": f"Bearer {token}"}) as c:
        yield c


async def wait_for(c: httpx.AsyncClient, message_id: str, status: str | None = None) -> dict[str, Any]:
    """Poll the message until it is no longer running (or has ``status``)."""
    with anyio.fail_after(60):
        while True:
            view = (await c.get(f"/api/v1/chat/messages/{message_id}")).json()
            if (status and view["status"] == status) or (not status and view["status"] != "running"):
                return view
            await anyio.sleep(0.02)


def sse(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    """``(id, event, data)`` of each event in an SSE body (comments and pings skipped)."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":") and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v[1:] if v.startswith(" ") else v
        if "event" in fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


async def test_send_then_poll_and_stream_the_turn(app: App) -> None:
    scripted(app, [{"chunks": ["Hi ", "there"]}])
    async with running_chat(app), client(app) as c:
        r = await c.post("/api/v1/chat/send", json={"message": "hello", "controls": {"model": "play:script"}})
        assert r.status_code == 202
        sent = r.json()
        assert sent["status"] == "running" and sent["created_conversation"] is True
        view = await wait_for(c, sent["message_id"])
        assert view["status"] == "complete" and view["content"] == "Hi there"
        assert view["content_html"] == "<p>Hi there</p>\n"
        stream = await c.get(f"/api/v1/chat/messages/{sent['message_id']}/events")
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = sse(stream.text)
        assert [e[0] for e in events] == list(range(1, len(events) + 1))
        assert events[-1][1] == "done" and events[-1][2]["status"] == "complete"
        assert "".join(d["text"] for _, k, d in events if k == "text") == "Hi there"

        resumed = sse((await c.get(f"/api/v1/chat/messages/{sent['message_id']}/events?after_seq=3")).text)
        assert [e[0] for e in resumed] == [e[0] for e in events[3:]]
        by_header = sse((await c.get(f"/api/v1/chat/messages/{sent['message_id']}/events",
                                     headers={"Last-Event-ID": "5"})).text)
        assert [e[0] for e in by_header] == [e[0] for e in events[5:]]


async def test_bad_input_is_a_422_naming_the_field(app: App) -> None:
    note = app.workspace.create_note("N", "short")
    async with running_chat(app), client(app) as c:
        async def field(path: str, body: Any) -> str:
            r = await c.post(path, json=body)
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "invalid_input"
            return str(r.json()["field"])

        assert await field("/api/v1/chat/send", {}) == "message"
        assert await field("/api/v1/chat/send", {"message": ""}) == "message"
        assert await field("/api/v1/chat/send", {"message": "x", "conversation_id": "nope"}) == "conversation_id"
        assert await field("/api/v1/chat/send", {"message": "x", "controls": {"temperature": 5}}) == "controls.temperature"
        assert await field("/api/v1/chat/send", {"message": "x", "colour": "red"}) == "colour"
        assert await field("/api/v1/chat/send", {"message": "x", "note_context": {
            "note_id": note.id, "selection": {"start": 4, "end": 2}}}) == "note_context.selection"
        assert await field("/api/v1/chat/send", {"message": "x", "note_context": {
            "note_id": note.id, "selection": {"start": 1, "end": 50}}}) == "note_context.selection"
        assert await field("/api/v1/chat/messages/" + "a" * 32 + "/confirm", {"decision": "maybe"}) == "decision"
        r = await c.get("/api/v1/chat/messages/not-an-id")
        assert r.status_code == 422 and r.json()["field"] == "message_id"
        r = await c.get("/api/v1/chat/conversations/" + "a" * 32 + "/export?format=pdf")
        assert r.status_code == 422 and r.json()["field"] == "format"


async def test_one_turn_at_a_time_and_cancel_answers_whether_it_had_settled(app: App) -> None:
    scripted(app, [{"chunks": ["busy"], "hang": True}])
    async with running_chat(app), client(app) as c:
        sent = (await c.post("/api/v1/chat/send", json={"message": "go", "controls": {"model": "play:script"}})).json()
        again = await c.post("/api/v1/chat/send", json={"message": "more", "conversation_id": sent["conversation_id"]})
        assert again.status_code == 409 and again.json()["error"] == "conflict"
        assert "cancel it first" in again.json()["message"]
        with anyio.fail_after(60):  # poll until the partial answer shows, as a page would
            while (await c.get(f"/api/v1/chat/messages/{sent['message_id']}")).json()["partial_text"] != "busy":
                await anyio.sleep(0.02)
        r = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/cancel")
        assert r.json() == {"already_settled": False}
        view = await wait_for(c, sent["message_id"])
        assert view["status"] == "cancelled" and view["content"] == "busy" and view["cancelled"] is True
        r = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/cancel")
        assert r.json() == {"already_settled": True}


async def test_confirm_through_the_api(app: App) -> None:
    note = app.workspace.create_note("Old", "x")
    app.registry.set_enabled(app.workspace, "delete_note", True)
    scripted(app, [{"tool_calls": [{"name": "delete_note", "arguments": {"id": note.id}}]}, {"text": "Done."}])
    async with running_chat(app), client(app) as c:
        sent = (await c.post("/api/v1/chat/send", json={"message": "delete", "controls": {"model": "play:script"}})).json()
        parked = await wait_for(c, sent["message_id"])
        assert parked["status"] == "awaiting_confirmation"
        assert parked["pending_action"]["tool"] == "delete_note"
        pending = (await c.get("/api/v1/chat/pending")).json()
        assert [p["message_id"] for p in pending] == [sent["message_id"]]
        r = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/confirm", json={"decision": "approve"})
        assert r.status_code == 202 and r.json()["status"] == "running"
        assert r.json()["last_seq"] > 0
        view = await wait_for(c, sent["message_id"])
        assert view["status"] == "complete" and view["pending_action"] is None
        again = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/confirm", json={"decision": "approve"})
        assert again.status_code == 409


async def test_edits_are_accepted_rejected_and_undone_through_the_api(app: App) -> None:
    note = app.workspace.create_note("Trip", BODY)
    scripted(app, [
        {"tool_calls": [{"name": "rewrite_paragraph", "arguments": {"anchor": "Friday", "text": "We leave on Monday."}},
                        {"name": "append_to_note", "arguments": {"text": "Pack light."}}]},
        {"text": "Two changes proposed."},
    ])
    async with running_chat(app), client(app) as c:
        sent = (await c.post("/api/v1/chat/send", json={
            "message": "change the day", "note_context": {"note_id": note.id},
            "controls": {"model": "play:script"}})).json()
        view = await wait_for(c, sent["message_id"])
        rewrite, append = view["edits"]
        r = await c.post(f"/api/v1/chat/edits/{rewrite['id']}/accept")
        assert r.status_code == 200 and "Monday" in r.json()["note"]["body"]
        assert (await c.post(f"/api/v1/chat/edits/{append['id']}/reject")).json()["edit"]["status"] == "rejected"
        assert (await c.post(f"/api/v1/chat/edits/{append['id']}/accept")).status_code == 409
        undo = await c.post(f"/api/v1/chat/edits/{rewrite['id']}/undo")
        assert undo.json()["note"]["body"] == BODY
        missing = await c.post("/api/v1/chat/edits/" + "0" * 32 + "/accept")
        assert missing.status_code == 404 and "0" * 32 in missing.json()["message"]


async def test_conversations_are_listed_searched_renamed_pinned_deleted_and_exported(app: App) -> None:
    scripted(app, [{"text": "Plenty of [detail](https://example.org)."}], loop=True)
    async with running_chat(app), client(app) as c:
        ids = []
        for text in ("first about 100% cotton", "second about tents"):
            sent = (await c.post("/api/v1/chat/send", json={"message": text, "controls": {"model": "play:script"}})).json()
            await wait_for(c, sent["message_id"])
            ids.append(sent["conversation_id"])
        listing = (await c.get("/api/v1/chat/conversations")).json()["conversations"]
        assert [x["id"] for x in listing] == [ids[1], ids[0]]
        found = (await c.get("/api/v1/chat/conversations", params={"search": "100%"})).json()["conversations"]
        assert [x["id"] for x in found] == [ids[0]]
        r = await c.patch(f"/api/v1/chat/conversations/{ids[0]}", json={
            "title": "Cotton", "pinned": True, "controls": {"temperature": 0.2, "thinking_level": "low"}})
        assert r.status_code == 200
        assert r.json()["title"] == "Cotton" and r.json()["controls"]["temperature"] == 0.2
        reset = await c.patch(f"/api/v1/chat/conversations/{ids[0]}", json={"controls": {"temperature": None}})
        assert reset.json()["controls"]["temperature"] is None and reset.json()["controls"]["thinking_level"] == "low"
        assert (await c.get("/api/v1/chat/conversations")).json()["conversations"][0]["id"] == ids[0]
        detail = (await c.get(f"/api/v1/chat/conversations/{ids[0]}")).json()
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]

        md = await c.get(f"/api/v1/chat/conversations/{ids[0]}/export", params={"format": "md"})
        assert md.headers["content-type"].startswith("text/markdown")
        assert 'filename="Cotton.md"' in md.headers["content-disposition"]
        assert "[detail](https://example.org)" in md.text
        txt = await c.get(f"/api/v1/chat/conversations/{ids[0]}/export", params={"format": "txt"})
        assert "detail (https://example.org)" in txt.text

        assert (await c.delete(f"/api/v1/chat/conversations/{ids[1]}")).status_code == 204
        assert [x["id"] for x in (await c.get("/api/v1/chat/conversations")).json()["conversations"]] == [ids[0]]
        gone = (await c.get("/api/v1/chat/conversations", params={"deleted": "true"})).json()["conversations"]
        assert [x["id"] for x in gone] == [ids[1]]
        await c.patch(f"/api/v1/chat/conversations/{ids[1]}", json={"deleted": False})
        assert len((await c.get("/api/v1/chat/conversations")).json()["conversations"]) == 2
        assert (await c.delete(f"/api/v1/chat/conversations/{ids[1]}", params={"permanent": "true"})).status_code == 204
        assert (await c.get(f"/api/v1/chat/conversations/{ids[1]}")).status_code == 404


async def test_a_conversation_of_another_user_is_a_404(app: App) -> None:
    scripted(app, [{"text": "mine"}])
    guest = new_id()
    with app.workspace.write() as conn:
        conn.exec_driver_sql("INSERT INTO users (id, name, is_owner, created_time) VALUES (?, 'guest', 0, ?)",
                             (guest, now_ms()))
    guest_token = app.workspace.create_token(guest)
    async with running_chat(app), client(app) as owner_c, client(app, guest_token) as guest_c:
        sent = (await owner_c.post("/api/v1/chat/send", json={"message": "secret",
                                                              "controls": {"model": "play:script"}})).json()
        await wait_for(owner_c, sent["message_id"])
        for path in (f"/api/v1/chat/messages/{sent['message_id']}", f"/api/v1/chat/conversations/{sent['conversation_id']}",
                     f"/api/v1/chat/messages/{sent['message_id']}/events"):
            r = await guest_c.get(path)
            assert r.status_code == 404 and r.json()["error"] == "not_found"
        assert (await guest_c.get("/api/v1/chat/conversations")).json()["conversations"] == []
        r = await guest_c.post("/api/v1/chat/send", json={"message": "x", "conversation_id": sent["conversation_id"]})
        assert r.status_code == 404


async def test_the_api_is_documented_and_says_when_the_chat_is_not_running(app: App) -> None:
    async with client(app) as c:
        schema = (await c.get("/api/v1/openapi.json")).json()
        for path in ("/api/v1/chat/send", "/api/v1/chat/messages/{message_id}", "/api/v1/chat/messages/{message_id}/events",
                     "/api/v1/chat/messages/{message_id}/cancel", "/api/v1/chat/messages/{message_id}/confirm",
                     "/api/v1/chat/edits/{edit_id}/accept", "/api/v1/chat/edits/{edit_id}/reject",
                     "/api/v1/chat/conversations", "/api/v1/chat/conversations/{conversation_id}",
                     "/api/v1/chat/conversations/{conversation_id}/export", "/api/v1/notes", "/api/v1/notes/{note_id}"):
            assert path in schema["paths"], path
        assert set(schema["components"]["schemas"]["SendIn"]["properties"]) == {
            "message", "conversation_id", "note_context", "controls", "security_level"}
        r = await c.post("/api/v1/chat/send", json={"message": "hi"})
        assert r.status_code == 503 and "noteloom serve" in r.json()["message"]


async def test_models_and_defaults_for_the_settings_drawer(app: App) -> None:
    async with running_chat(app), client(app) as c:
        models = (await c.get("/api/v1/chat/models")).json()
    assert {"id": "echo:echo", "provider": "echo", "private": True, "local": True,
            "capabilities": {"vision": False, "document": False}} in models["models"]
    assert set(models["defaults"]) == {"temperature", "top_p", "max_tokens", "thinking_level",
                                       "max_steps", "max_cost", "time_limit"}


async def test_the_notes_pane_reads_searches_saves_and_restores_notes(app: App) -> None:
    ws = app.workspace
    note = ws.create_note("Packing", "tent and stove")
    ws.create_note("Other", "nothing")
    async with client(app) as c:
        listed = (await c.get("/api/v1/notes")).json()["notes"]
        assert {n["title"] for n in listed} == {"Packing", "Other"}
        found = (await c.get("/api/v1/notes", params={"q": "stove"})).json()["notes"]
        assert [n["id"] for n in found] == [note.id] and "stove" in found[0]["snippet"]
        got = (await c.get(f"/api/v1/notes/{note.id}")).json()
        saved = await c.patch(f"/api/v1/notes/{note.id}", json={"body": "tent, stove, lamp",
                                                                 "base_updated_time": got["updated_time"]})
        assert saved.status_code == 200 and saved.json()["body"] == "tent, stove, lamp"
        stale = await c.patch(f"/api/v1/notes/{note.id}", json={"body": "older tab", "base_updated_time": got["updated_time"]})
        assert stale.status_code == 409 and "changed since you opened it" in stale.json()["message"]
        revs = (await c.get(f"/api/v1/notes/{note.id}/revisions")).json()["revisions"]
        assert len(revs) == 1 and revs[0]["chars"] == len("tent and stove")
        back = await c.post(f"/api/v1/notes/{note.id}/revisions/{revs[0]['id']}/restore")
        assert back.json()["body"] == "tent and stove"
        html = (await c.post("/api/v1/notes/preview", json={"markdown": "**hi** <script>x</script>"})).json()["html"]
        assert "<strong>hi</strong>" in html and "<script" not in html
        made = await c.post("/api/v1/notes", json={"title": "New"})
        assert made.status_code == 201 and made.json()["title"] == "New"
        assert (await c.get("/api/v1/notes/" + "e" * 32)).status_code == 404


async def test_the_chat_page_is_served_and_linked_from_the_other_pages(app: App) -> None:
    async with client(app) as c:
        page = await c.get("/chat")
        home = await c.get("/")
        script = await c.get("/static/chat.js")
    assert page.status_code == 200
    for marker in ('id="transcript"', 'id="composer"', 'id="note-body"', 'id="settings"', "/static/chat.js"):
        assert marker in page.text
    assert 'href="/chat"' in home.text
    assert script.status_code == 200 and "EventSource" in script.text
