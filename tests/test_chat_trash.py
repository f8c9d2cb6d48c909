"""The chat's trash over the JSON API: deleted conversations listed, a dry run of emptying it
that says what goes (counts and titles) and changes nothing, and emptying it for good with
the messages and attachments (rows and files) of every deleted conversation, and only those."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import sqlalchemy as sa

from api_support import client, second_user
from chat_support import running_chat, scripted
from noteloom.app import App
from noteloom.chat import tables as t

pytestmark = pytest.mark.anyio


def blobs(app: App) -> list[Path]:
    root = app.workspace.attachments_dir / "chat"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def count(app: App, table: sa.Table, conversation_ids: list[str]) -> int:
    with app.engine.connect() as c:
        return int(c.execute(sa.select(sa.func.count()).select_from(table)
                             .where(table.c.conversation_id.in_(conversation_ids))).scalar() or 0)


async def send(c: httpx.AsyncClient, text: str, files: list[Any] | None = None) -> dict[str, Any]:
    payload = {"message": text, "controls": {"model": "play:script"}}
    if files:
        r = await c.post("/api/v1/chat/send", data={"payload": json.dumps(payload)}, files=files)
    else:
        r = await c.post("/api/v1/chat/send", json=payload)
    assert r.status_code == 202, r.text
    with anyio.fail_after(60):
        while (await c.get(f"/api/v1/chat/messages/{r.json()['message_id']}")).json()["status"] == "running":
            await anyio.sleep(0.02)
    return dict(r.json())


async def test_a_dry_run_says_what_goes_then_emptying_removes_it(app: App) -> None:
    scripted(app, [{"text": "Noted."}], loop=True)
    async with running_chat(app), client(app) as c:
        kept = await send(c, "Keep this chat", [("attachments", ("kept.txt", b"kept notes", "text/plain"))])
        a = await send(c, "Trip budget", [("attachments", ("budget.txt", b"300 euros", "text/plain")),
                                          ("attachments", ("plan.txt", b"leave Friday", "text/plain"))])
        b = await send(c, "Old idea")
        gone = [a["conversation_id"], b["conversation_id"]]
        for cid in gone:
            assert (await c.delete(f"/api/v1/chat/conversations/{cid}")).status_code == 204
        listed = (await c.get("/api/v1/chat/conversations", params={"deleted": "true"})).json()["conversations"]
        assert sorted(x["id"] for x in listed) == sorted(gone)

        r = await c.delete("/api/v1/chat/trash", params={"dry_run": "true"})
        assert r.status_code == 200, r.text
        preview = r.json()
        assert preview["dry_run"] is True
        assert {x["title"]: (x["messages"], x["attachments"]) for x in preview["conversations"]} == {
            "Trip budget": (2, 2), "Old idea": (2, 0)}
        assert preview["totals"] == {"conversations": 2, "messages": 4, "attachments": 2, "files": 0}
        # Nothing changed: the rows are there and a deleted chat still restores.
        assert count(app, t.messages, gone) == 4 and count(app, t.attachments, gone) == 2
        assert (await c.patch(f"/api/v1/chat/conversations/{b['conversation_id']}",
                              json={"deleted": False})).status_code == 200
        assert (await c.delete(f"/api/v1/chat/conversations/{b['conversation_id']}")).status_code == 204

        r = await c.delete("/api/v1/chat/trash")
        assert r.status_code == 200 and r.json()["dry_run"] is False
        assert r.json()["totals"]["conversations"] == 2
        assert count(app, t.messages, gone) == 0 and count(app, t.attachments, gone) == 0
        with app.engine.connect() as conn:
            assert conn.execute(sa.select(t.conversations.c.id).where(t.conversations.c.id.in_(gone))).first() is None
        assert (await c.get("/api/v1/chat/conversations", params={"deleted": "true"})).json()["conversations"] == []
        # The live chat and its file are untouched; no file of the purged ones is left.
        assert (await c.get(f"/api/v1/chat/conversations/{kept['conversation_id']}")).status_code == 200
        assert len(blobs(app)) == 1 and count(app, t.attachments, [kept["conversation_id"]]) == 1
        again = (await c.delete("/api/v1/chat/trash", params={"dry_run": "true"})).json()
        assert again["totals"] == {"conversations": 0, "messages": 0, "attachments": 0, "files": 0}


async def test_emptying_the_trash_touches_only_ones_own(app: App) -> None:
    scripted(app, [{"text": "Noted."}], loop=True)
    _, token = second_user(app)
    async with running_chat(app), client(app) as c, client(app, token) as guest:
        mine = await send(c, "Mine, deleted")
        await c.delete(f"/api/v1/chat/conversations/{mine['conversation_id']}")
        theirs = await send(guest, "Theirs, deleted")
        await guest.delete(f"/api/v1/chat/conversations/{theirs['conversation_id']}")
        preview = (await guest.delete("/api/v1/chat/trash", params={"dry_run": "true"})).json()
        assert [x["title"] for x in preview["conversations"]] == ["Theirs, deleted"]
        assert (await guest.delete("/api/v1/chat/trash")).status_code == 200
        assert count(app, t.messages, [mine["conversation_id"]]) == 2
        assert (await c.patch(f"/api/v1/chat/conversations/{mine['conversation_id']}",
                              json={"deleted": False})).status_code == 200
