"""Branches over the JSON API: regenerate and edit-and-resend keep the old answer reachable,
the shown path and the next turn's history follow the chosen branch, a failed turn's retry
stores its question once, one turn can be deleted, and a sealed chat's branches stay sealed."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2 as httpx
import pytest

from api_support import client, second_user
from chat_support import running_chat, scripted
from noteloom.app import App
from noteloom.messages import Message
from sealed_support import MARKER, PASS, models, rows_holding

pytestmark = pytest.mark.anyio


async def settled(c: httpx.AsyncClient, message_id: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            r = await c.get(f"/api/v1/chat/messages/{message_id}")
            assert r.status_code == 200, r.text
            if r.json()["status"] != "running":
                return dict(r.json())
            await anyio.sleep(0.02)


async def send(c: httpx.AsyncClient, text: str, conversation_id: str | None = None, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"message": text, **kw}
    if conversation_id:
        body["conversation_id"] = conversation_id
    r = await c.post("/api/v1/chat/send", json=body)
    assert r.status_code == 202, r.text
    await settled(c, r.json()["message_id"])
    return dict(r.json())


async def shown(c: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    r = await c.get(f"/api/v1/chat/conversations/{conversation_id}")
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def user_texts(request_messages: tuple[Message, ...]) -> list[str]:
    return [m.text for m in request_messages if m.role == "user"]


async def test_regenerate_makes_a_branch_and_the_next_turn_follows_the_chosen_one(app: App) -> None:
    model = scripted(app, [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Follow-up."},
                           {"text": "Again."}])
    async with running_chat(app), client(app) as c:
        first = await send(c, "Where do we go?", controls={"model": "play:script"})
        cid = first["conversation_id"]
        r = await c.post(f"/api/v1/chat/messages/{first['message_id']}/regenerate")
        assert r.status_code == 202, r.text
        again = r.json()
        assert again["user_message_id"] == first["user_message_id"]
        assert (await settled(c, again["message_id"]))["content"] == "Second answer."
        msgs = await shown(c, cid)
        assert [m["role"] for m in msgs] == ["user", "assistant"]  # the question once
        assert msgs[1]["content"] == "Second answer."
        assert msgs[1]["branch"] == {"index": 2, "count": 2, "ids": [first["message_id"], again["message_id"]]}
        assert msgs[0]["branch"] is None
        # The model was asked the same question with no trace of the first answer.
        assert user_texts(model.requests[1].messages) == ["Where do we go?"]
        assert "First answer." not in repr(model.requests[1].messages)

        # Back to the first answer: the path shows it, and the next turn reads it, not the second.
        r = await c.post(f"/api/v1/chat/messages/{first['message_id']}/show")
        assert r.status_code == 200, r.text
        assert [m["content"] for m in r.json()["messages"]] == ["Where do we go?", "First answer."]
        assert r.json()["messages"][1]["branch"]["index"] == 1
        await send(c, "And then?", cid)
        history = repr(model.requests[2].messages)
        assert "First answer." in history and "Second answer." not in history
        assert [m["content"] for m in await shown(c, cid)] == ["Where do we go?", "First answer.", "And then?",
                                                               "Follow-up."]
        # The second branch is still there, and showing it again hides the follow-up.
        r = await c.post(f"/api/v1/chat/messages/{again['message_id']}/show")
        assert [m["content"] for m in r.json()["messages"]] == ["Where do we go?", "Second answer."]


async def test_edit_and_resend_branches_the_question(app: App) -> None:
    model = scripted(app, [{"text": "Tent."}, {"text": "Stove."}, {"text": "Boots."}])
    async with running_chat(app), client(app) as c:
        a = await send(c, "What to bring?", controls={"model": "play:script"})
        cid = a["conversation_id"]
        b = await send(c, "Anything else?", cid)
        r = await c.post(f"/api/v1/chat/messages/{b['user_message_id']}/edit", json={"message": "What shoes?"})
        assert r.status_code == 202, r.text
        edited = r.json()
        assert edited["user_message_id"] != b["user_message_id"]
        await settled(c, edited["message_id"])
        msgs = await shown(c, cid)
        assert [m["content"] for m in msgs] == ["What to bring?", "Tent.", "What shoes?", "Boots."]
        assert msgs[2]["branch"]["index"] == 2 and msgs[2]["branch"]["count"] == 2
        assert user_texts(model.requests[2].messages) == ["What to bring?", "What shoes?"]
        # The old question and its answer are one switch away.
        r = await c.post(f"/api/v1/chat/messages/{b['user_message_id']}/show")
        assert [m["content"] for m in r.json()["messages"]] == ["What to bring?", "Tent.", "Anything else?", "Stove."]
        # Only questions are edited, never to nothing, never into a command.
        r = await c.post(f"/api/v1/chat/messages/{b['message_id']}/edit", json={"message": "x"})
        assert r.status_code == 422 and r.json()["field"] == "message_id"
        assert (await c.post(f"/api/v1/chat/messages/{b['user_message_id']}/edit", json={"message": ""})).status_code == 422
        r = await c.post(f"/api/v1/chat/messages/{b['user_message_id']}/edit", json={"message": "/clear"})
        assert r.status_code == 422


async def test_retry_of_a_failed_turn_stores_the_question_once(app: App) -> None:
    scripted(app, [{"chunks": ["Hm"], "error": "api_overloaded"}, {"text": "Here it is."}])
    async with running_chat(app), client(app) as c:
        r = await c.post("/api/v1/chat/send", json={"message": "Plan the trip", "controls": {"model": "play:script"}})
        sent = r.json()
        failed = await settled(c, sent["message_id"])
        assert failed["status"] == "failed"
        r = await c.post(f"/api/v1/chat/messages/{sent['message_id']}/regenerate")
        assert r.status_code == 202, r.text
        assert (await settled(c, r.json()["message_id"]))["content"] == "Here it is."
        msgs = await shown(c, sent["conversation_id"])
        assert [(m["role"], m["content"]) for m in msgs] == [("user", "Plan the trip"), ("assistant", "Here it is.")]
        assert msgs[1]["branch"] is None  # the failed answer was replaced, not kept beside it
        assert (await c.get(f"/api/v1/chat/messages/{sent['message_id']}")).status_code == 404


async def test_delete_one_turn(app: App) -> None:
    model = scripted(app, [{"text": "One."}, {"text": "Two."}, {"text": "Two again."}, {"text": "Three."},
                           {"text": "Four."}])
    async with running_chat(app), client(app) as c:
        a = await send(c, "q1", controls={"model": "play:script"})
        cid = a["conversation_id"]
        b = await send(c, "q2", cid)
        r = await c.post(f"/api/v1/chat/messages/{b['message_id']}/regenerate")
        await settled(c, r.json()["message_id"])
        await send(c, "q3", cid)
        # Naming the answer deletes its question and every answer to it.
        r = await c.delete(f"/api/v1/chat/messages/{b['message_id']}")
        assert r.status_code == 204
        assert [m["content"] for m in await shown(c, cid)] == ["q1", "One.", "q3", "Three."]
        assert (await c.get(f"/api/v1/chat/messages/{b['user_message_id']}")).status_code == 404
        await send(c, "q4", cid)
        assert user_texts(model.requests[-1].messages) == ["q1", "q3", "q4"]
        assert (await c.delete(f"/api/v1/chat/messages/{b['user_message_id']}")).status_code == 404
        # The last turn: the conversation ends where it did before it.
        last = (await shown(c, cid))[-1]
        assert (await c.delete(f"/api/v1/chat/messages/{last['id']}")).status_code == 204
        assert [m["content"] for m in await shown(c, cid)] == ["q1", "One.", "q3", "Three."]


async def test_a_running_turn_is_neither_deleted_nor_regenerated(app: App) -> None:
    scripted(app, [{"chunks": ["Let me think "], "chunk_delay": 0.05, "hang": True}])
    async with running_chat(app), client(app) as c:
        r = await c.post("/api/v1/chat/send", json={"message": "slow", "controls": {"model": "play:script"}})
        sent = r.json()
        assert (await c.delete(f"/api/v1/chat/messages/{sent['message_id']}")).status_code == 409
        assert (await c.post(f"/api/v1/chat/messages/{sent['message_id']}/regenerate")).status_code == 409
        await c.post(f"/api/v1/chat/messages/{sent['message_id']}/cancel")
        await settled(c, sent["message_id"])


async def test_someone_elses_messages_answer_like_missing_ones(app: App) -> None:
    scripted(app, [{"text": "Mine."}], loop=True)
    _, token = second_user(app)
    async with running_chat(app), client(app) as c, client(app, token) as other:
        sent = await send(c, "private question", controls={"model": "play:script"})
        for method, path, body in [
            ("POST", f"/api/v1/chat/messages/{sent['message_id']}/regenerate", None),
            ("POST", f"/api/v1/chat/messages/{sent['user_message_id']}/edit", {"message": "mine now"}),
            ("POST", f"/api/v1/chat/messages/{sent['message_id']}/show", None),
            ("DELETE", f"/api/v1/chat/messages/{sent['message_id']}", None),
        ]:
            theirs = await other.request(method, path, json=body)
            missing = await c.request(method, path.replace(sent["message_id"], "0" * 32)
                                      .replace(sent["user_message_id"], "0" * 32), json=body)
            assert theirs.status_code == missing.status_code == 404, (path, theirs.text)
            assert theirs.json()["message"].replace(sent["message_id"], "X").replace(sent["user_message_id"], "X") \
                == missing.json()["message"].replace("0" * 32, "X")
        assert len(await shown(c, sent["conversation_id"])) == 2


async def test_a_sealed_chats_branches_stay_sealed(any_app: App) -> None:
    app = any_app
    models(app, [{"text": "Sealed answer."}], loop=True)
    async with running_chat(app), client(app) as c:
        assert (await c.post("/api/v1/vault/setup", json={"passphrase": PASS})).status_code == 201
        sent = await send(c, "first question", security_level="private", controls={"model": "own:script"})
        cid = sent["conversation_id"]
        r = await c.post(f"/api/v1/chat/messages/{sent['user_message_id']}/edit",
                         json={"message": f"edited {MARKER}"})
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])
        r = await c.post(f"/api/v1/chat/messages/{r.json()['message_id']}/regenerate")
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])
        msgs = await shown(c, cid)
        assert msgs[0]["content"] == f"edited {MARKER}" and msgs[0]["branch"]["count"] == 2
        assert msgs[1]["branch"]["count"] == 2
        assert rows_holding(app, MARKER) == []
        # Locked, the branches cannot be made or read.
        assert (await c.post("/api/v1/vault/lock")).status_code == 204
        assert (await c.post(f"/api/v1/chat/messages/{msgs[1]['id']}/regenerate")).status_code == 423
        assert (await c.post(f"/api/v1/chat/messages/{msgs[0]['id']}/edit", json={"message": "x"})).status_code == 423
        assert (await c.post(f"/api/v1/chat/messages/{msgs[0]['branch']['ids'][0]}/show")).status_code == 423
        assert (await c.post("/api/v1/vault/unlock", json={"passphrase": PASS})).status_code == 200
        assert [m["id"] for m in await shown(c, cid)] == [m["id"] for m in msgs]  # the refused switch changed nothing
