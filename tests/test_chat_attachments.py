"""Attachments in the chat: multipart send, ingress refusals (nothing stored), the model's
request (fenced text, image and document blocks), attachment modes re-routing history,
view_attachment by ref within one conversation, ownership checked again by the turn,
delete and purge removing the bytes, and the download's headers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import sqlalchemy as sa

from api_support import client, second_user
from attachment_support import (
    html_with_scripts,
    pdf_bomb,
    png_bytes,
    scanned_pdf,
    svg_bytes,
    text_pdf,
)
from chat_support import running_chat
from noteloom import db
from noteloom.app import App
from noteloom.attachments import BlobStore
from noteloom.chat import tables as t
from noteloom.config import ServerLimits
from noteloom.messages import DocumentPart, ImagePart, Message, TextPart
from noteloom.providers.base import ModelCapabilities, ModelRequest
from noteloom.providers.scripted import ScriptedProvider, Step

pytestmark = pytest.mark.anyio
BOTH = ModelCapabilities(vision=True, document=True)
PDF_TEXT = "Quarterly figures: forty-two apples"


def model(app: App, steps: Sequence[Step], name: str = "play", caps: ModelCapabilities = BOTH,
          *, loop: bool = True) -> ScriptedProvider:
    provider = ScriptedProvider(name, list(steps), loop=loop, capabilities=caps)
    app.services["providers"].add(provider)
    return provider



async def send(c: httpx.AsyncClient, payload: dict[str, Any], files: Sequence[tuple[str, bytes]]) -> httpx.Response:
    parts = [("attachments", (name, data, "application/octet-stream")) for name, data in files]
    return await c.post("/api/v1/chat/send", data={"payload": json.dumps(payload)}, files=parts)


async def settled(c: httpx.AsyncClient, message_id: str) -> dict[str, Any]:
    with anyio.fail_after(120):
        while True:
            view = (await c.get(f"/api/v1/chat/messages/{message_id}")).json()
            if view["status"] != "running":
                return dict(view)
            await anyio.sleep(0.02)


def blobs(app: App) -> list[Path]:
    root = app.workspace.attachments_dir / "chat"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def rows(app: App, table: sa.Table = t.attachments) -> int:
    with db.read_tx(app.engine) as c:
        return int(c.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0)


def last_user(request: ModelRequest) -> Message:
    return [m for m in request.messages if m.role == "user" and not m.tool_results][-1]


def texts(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if isinstance(p, TextPart))


# -- send ------------------------------------------------------------------------------------


async def test_a_pdf_and_a_png_reach_a_vision_and_document_model(app: App) -> None:
    provider = model(app, [{"text": "Read them."}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "What do these say?", "controls": {"model": "play:script"}},
                       [("figures.pdf", text_pdf(1, PDF_TEXT)), ("dot.png", png_bytes())])
        assert r.status_code == 202, r.text
        sent = r.json()
        answer = await settled(c, sent["message_id"])
        assert answer["status"] == "complete"
        asked = (await c.get(f"/api/v1/chat/messages/{sent['user_message_id']}")).json()
    request = provider.requests[-1]
    user = last_user(request)
    said = texts(user)
    assert "What do these say?" in said
    fenced = re.search(r"<<UNTRUSTED_([0-9a-f]+)>>\n(.*?)\n<</UNTRUSTED_\1>>", said, re.S)
    assert fenced is not None and "forty-two apples" in fenced.group(2)
    assert "Attached file: figures.pdf (pdf)" in said
    images = [p for p in user.parts if isinstance(p, ImagePart)]
    assert len(images) == 1 and images[0].media_type == "image/png" and images[0].data
    # The image is preceded by the untrusted-source note; the contract is in the system prompt.
    i = user.parts.index(images[0])
    before = user.parts[i - 1]
    assert isinstance(before, TextPart) and "outside the user's own writing" in before.text
    assert f"<<UNTRUSTED_{fenced.group(1)}>>" in request.system_text
    files = asked["attachments"]
    assert [(f["name"], f["kind"], f["mime"], f["status"]) for f in files] == [
        ("figures.pdf", "pdf", "application/pdf", "ok"), ("dot.png", "image", "image/png", "not_needed")]
    assert files[1]["size"] == len(png_bytes())
    assert answer["attachments"] is None


async def test_an_image_on_a_text_only_model_is_refused_and_nothing_is_stored(app: App) -> None:
    model(app, [{"text": "no"}], caps=ModelCapabilities())
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "look", "controls": {"model": "play:script"}}, [("dot.png", png_bytes())])
        assert r.status_code == 422
        body = r.json()
        assert body["field"] == "attachments" and "dot.png" in body["message"] and "switch" in body["message"]
        assert (await c.get("/api/v1/chat/conversations")).json()["conversations"] == []
    assert rows(app) == 0 and rows(app, t.messages) == 0 and blobs(app) == []


async def test_an_svg_is_refused_with_what_is_accepted(app: App) -> None:
    model(app, [{"text": "no"}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "look", "controls": {"model": "play:script"}}, [("logo.svg", svg_bytes())])
    assert r.status_code in (415, 422)
    message = r.json()["message"]
    assert "logo.svg" in message and "SVG" in message and "PNG" in message and "PDF" in message
    assert rows(app, t.messages) == 0 and blobs(app) == []


async def test_six_files_are_refused(app: App) -> None:
    model(app, [{"text": "no"}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "six", "controls": {"model": "play:script"}},
                       [(f"n{i}.txt", b"note %d" % i) for i in range(6)])
    assert r.status_code == 422 and r.json()["field"] == "attachments" and "5" in r.json()["message"]
    assert rows(app, t.messages) == 0 and blobs(app) == []


async def test_a_pdf_over_its_cap_is_refused_naming_the_cap(app: App) -> None:
    model(app, [{"text": "no"}])
    app.settings.file["attachments"] = {"pdf_bytes": 1000}
    big = text_pdf(3, PDF_TEXT * 20)
    assert len(big) > 1000
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "big", "controls": {"model": "play:script"}},
                       [("ok.txt", b"fine"), ("big.pdf", big)])
    assert r.status_code == 422
    assert "big.pdf" in r.json()["message"] and "1,000 bytes" in r.json()["message"]
    assert rows(app) == 0 and rows(app, t.messages) == 0 and blobs(app) == []


async def test_a_pdf_bomb_is_not_extractable_and_the_message_still_sends(app: App) -> None:
    provider = model(app, [{"text": "Could not read it."}], caps=ModelCapabilities())
    app.settings.file["attachments"] = {"extract_seconds": 10.0}
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "open this", "controls": {"model": "play:script"}}, [("bomb.pdf", pdf_bomb())])
        assert r.status_code == 202, r.text
        answer = await settled(c, r.json()["message_id"])
        asked = (await c.get(f"/api/v1/chat/messages/{r.json()['user_message_id']}")).json()
    assert answer["status"] == "complete"
    assert asked["attachments"][0]["status"] == "failed"
    said = texts(last_user(provider.requests[-1]))
    assert "Attached file: bomb.pdf (pdf)" in said and "no text could be read from the PDF 'bomb.pdf'" in said


async def test_a_scanned_pdf_goes_as_a_document_to_a_document_model(app: App) -> None:
    provider = model(app, [{"text": "A picture of a page."}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "", "controls": {"model": "play:script"}}, [("scan.pdf", scanned_pdf())])
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])
        asked = (await c.get(f"/api/v1/chat/messages/{r.json()['user_message_id']}")).json()
    assert asked["attachments"][0]["status"] == "no_text"
    user = last_user(provider.requests[-1])
    docs = [p for p in user.parts if isinstance(p, DocumentPart)]
    assert len(docs) == 1 and docs[0].media_type == "application/pdf" and docs[0].data and docs[0].title == "scan.pdf"
    assert "no text layer" in texts(user)


async def test_an_empty_message_needs_a_file(app: App) -> None:
    model(app, [{"text": "ok"}])
    async with running_chat(app), client(app) as c:
        empty = await c.post("/api/v1/chat/send", json={"message": "  ", "controls": {"model": "play:script"}})
        assert empty.status_code == 422 and empty.json()["field"] == "message"
        bare = await c.post("/api/v1/chat/send", json={"controls": {"model": "play:script"}})
        assert bare.status_code == 422 and bare.json()["field"] == "message"
        with_file = await send(c, {"controls": {"model": "play:script"}}, [("list.md", b"# Packing\n- socks\n")])
        assert with_file.status_code == 202, with_file.text
        await settled(c, with_file.json()["message_id"])
        conv = (await c.get(f"/api/v1/chat/conversations/{with_file.json()['conversation_id']}")).json()
        exported = await c.get(f"/api/v1/chat/conversations/{conv['id']}/export?format=txt")
    assert conv["title"] == "list.md"
    assert "[Attached: list.md (text, 18 bytes)]" in exported.text
    assert conv["messages"][0]["content"] == "" and conv["messages"][0]["attachments"][0]["mime"] == "text/markdown"


async def test_a_multipart_send_may_be_larger_than_the_json_limit(app: App) -> None:
    model(app, [{"text": "ok"}])
    app.settings = dataclasses.replace(app.settings, limits=ServerLimits(max_body_bytes=64 * 1024))
    note = b"line of a long text file\n" * 8000  # 200 KB
    async with running_chat(app), client(app) as c:
        too_big = await c.post("/api/v1/chat/send", json={"message": "x" * 90_000 + "y" * 90_000})
        assert too_big.status_code == 413
        r = await send(c, {"message": "long", "controls": {"model": "play:script"}}, [("long.txt", note)])
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])


# -- routing ---------------------------------------------------------------------------------


async def test_switching_the_mode_reroutes_the_whole_history(app: App) -> None:
    provider = model(app, [{"text": "ok"}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "read", "controls": {"model": "play:script"}}, [("f.pdf", text_pdf(1, PDF_TEXT))])
        cid = r.json()["conversation_id"]
        await settled(c, r.json()["message_id"])
        first = last_user(provider.requests[-1])
        assert not any(isinstance(p, DocumentPart) for p in first.parts) and "forty-two" in texts(first)
        patch = await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"attachment_mode": "original"}})
        assert patch.status_code == 200 and patch.json()["controls"]["attachment_mode"] == "original"
        again = await c.post("/api/v1/chat/send", json={"message": "and now?", "conversation_id": cid})
        await settled(c, again.json()["message_id"])
        history = [m for m in provider.requests[-1].messages if m.role == "user"]
        assert isinstance(history[0].parts[-1], DocumentPart) and history[0].parts[-1].data
        assert "forty-two" not in texts(history[0])
        # The mode goes back, and so does the history.
        await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"attachment_mode": None}})
        third = await c.post("/api/v1/chat/send", json={"message": "once more", "conversation_id": cid})
        await settled(c, third.json()["message_id"])
        history = [m for m in provider.requests[-1].messages if m.role == "user"]
        assert "forty-two" in texts(history[0]) and not any(isinstance(p, DocumentPart) for p in history[0].parts)


def _ref_in(request: ModelRequest) -> str:
    found = re.findall(r"\[ref ([0-9a-f]{32})\]", "\n".join(texts(m) for m in request.messages))
    assert found, "no [ref …] in the request"
    return str(found[-1])


async def test_on_demand_view_attachment_by_ref_within_the_conversation(app: App) -> None:
    foreign: dict[str, str] = {}

    def call_view(request: ModelRequest) -> dict[str, Any]:
        return {"tool_calls": [{"id": "v1", "name": "view_attachment", "arguments": {"ref": _ref_in(request)}}]}

    def call_foreign(request: ModelRequest) -> dict[str, Any]:
        return {"tool_calls": [{"id": "v2", "name": "view_attachment", "arguments": {"ref": foreign["ref"]}}]}

    provider = model(app, [{"text": "other chat"}, call_view, {"text": "Seen it."}, {"text": "Still here."},
                           call_foreign, {"text": "Not mine."}], loop=False)
    async with running_chat(app), client(app) as c:
        other = await send(c, {"message": "keep", "controls": {"model": "play:script"}},
                           [("other.pdf", text_pdf(1, "another chat's file"))])
        await settled(c, other.json()["message_id"])
        foreign["ref"] = (await c.get(f"/api/v1/chat/messages/{other.json()['user_message_id']}")).json()[
            "attachments"][0]["id"]

        r = await send(c, {"message": "check the layout",
                           "controls": {"model": "play:script", "attachment_mode": "on_demand"}},
                       [("plan.pdf", text_pdf(1, PDF_TEXT))])
        cid = r.json()["conversation_id"]
        answer = await settled(c, r.json()["message_id"])
        assert answer["status"] == "complete", answer
        first = provider.requests[1]
        assert "view_attachment" in [spec.name for spec in first.tools]
        ref = _ref_in(first)
        assert ref != foreign["ref"] and f"[ref {ref}] plan.pdf (pdf)" in texts(last_user(first))
        result = [p for m in provider.requests[2].messages for p in m.tool_results][-1]
        assert not result.is_error and "plan.pdf" in result.content
        assert len(result.blocks) == 1 and isinstance(result.blocks[0], DocumentPart) and result.blocks[0].data
        assert result.blocks[0].ref == ref
        # Stored with its ref only; the next turn reads the bytes again.
        with db.read_tx(app.engine) as conn:
            stored = conn.execute(sa.select(t.messages.c.transcript).where(
                t.messages.c.id == r.json()["message_id"])).scalar()
        assert stored is not None and f'"ref": "{ref}"' in stored and '"data": ""' in stored

        again = await c.post("/api/v1/chat/send", json={"message": "thanks", "conversation_id": cid})
        await settled(c, again.json()["message_id"])
        replayed = [p for m in provider.requests[3].messages for p in m.tool_results][-1]
        assert isinstance(replayed.blocks[0], DocumentPart) and replayed.blocks[0].data == result.blocks[0].data

        # A ref of another conversation is unknown here; the error lists this one's.
        third = await c.post("/api/v1/chat/send", json={"message": "and that one?", "conversation_id": cid})
        await settled(c, third.json()["message_id"])
        refused = [p for m in provider.requests[5].messages for p in m.tool_results][-1]
        assert refused.is_error and not refused.blocks
        assert ref in refused.content and "plan.pdf" in refused.content and "other.pdf" not in refused.content


async def test_view_attachment_is_offered_only_in_on_demand_mode_on_a_file_model(app: App) -> None:
    provider = model(app, [{"text": "ok"}])
    plain = model(app, [{"text": "ok"}], name="plain", caps=ModelCapabilities())
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "a", "controls": {"model": "play:script"}}, [("a.txt", b"alpha")])
        cid = r.json()["conversation_id"]
        await settled(c, r.json()["message_id"])
        assert "view_attachment" not in [s.name for s in provider.requests[-1].tools]
        await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"attachment_mode": "on_demand"}})
        r = await c.post("/api/v1/chat/send", json={"message": "b", "conversation_id": cid})
        await settled(c, r.json()["message_id"])
        assert "view_attachment" in [s.name for s in provider.requests[-1].tools]
        # After /clear the file is out of the model's context: no tool, no contract for it.
        assert (await c.post("/api/v1/chat/send", json={"message": "/clear", "conversation_id": cid})).status_code == 202
        r = await c.post("/api/v1/chat/send", json={"message": "fresh start", "conversation_id": cid})
        await settled(c, r.json()["message_id"])
        assert "view_attachment" not in [s.name for s in provider.requests[-1].tools]
        assert "UNTRUSTED" not in provider.requests[-1].system_text
        await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"attachment_mode": None}})
        r = await send(c, {"message": "again", "conversation_id": cid}, [("a2.txt", b"alpha two")])
        await settled(c, r.json()["message_id"])
        await c.patch(f"/api/v1/chat/conversations/{cid}", json={"controls": {"attachment_mode": "on_demand"}})
        # The same conversation on a text-only model: no tool, the file's text is there still.
        r = await c.post("/api/v1/chat/send", json={"message": "c", "conversation_id": cid,
                                                    "controls": {"model": "plain:script"}})
        await settled(c, r.json()["message_id"])
        assert "view_attachment" not in [s.name for s in plain.requests[-1].tools]
        shown = "\n".join(texts(m) for m in plain.requests[-1].messages if m.role == "user")
        assert "alpha two" in shown and "<<UNTRUSTED_" in shown
        bare = await c.post("/api/v1/chat/send", json={"message": "no files", "controls": {
            "model": "play:script", "attachment_mode": "on_demand"}})
        await settled(c, bare.json()["message_id"])
        assert "view_attachment" not in [s.name for s in provider.requests[-1].tools]


async def test_the_turn_checks_ownership_again_before_reading_a_file(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = model(app, [{"text": "ok"}])
    guest, _ = second_user(app)
    read: list[str] = []
    original = BlobStore.read

    def spy(self: BlobStore, key: str) -> bytes:
        read.append(key)
        return original(self, key)

    monkeypatch.setattr(BlobStore, "read", spy)
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "mine", "controls": {"model": "play:script"}},
                       [("secret.pdf", scanned_pdf()), ("notes.txt", b"the secret word is heron")])
        cid = r.json()["conversation_id"]
        await settled(c, r.json()["message_id"])
        assert read and "heron" in texts(last_user(provider.requests[-1]))
        with db.write_tx(app.engine) as conn:  # the files change hands before the next turn
            conn.execute(t.attachments.update().values(user_id=guest))
        read.clear()
        again = await c.post("/api/v1/chat/send", json={"message": "and now?", "conversation_id": cid})
        answer = await settled(c, again.json()["message_id"])
    assert answer["status"] == "complete"
    assert read == []
    first = next(m for m in provider.requests[-1].messages if m.role == "user")
    said = texts(first)
    assert "heron" not in said and not any(isinstance(p, DocumentPart | ImagePart) for p in first.parts)
    assert "secret.pdf (pdf): not read, because it does not belong to this conversation's owner" in said


# -- delete, purge, download -----------------------------------------------------------------


async def test_delete_and_purge_remove_the_bytes(app: App) -> None:
    model(app, [{"text": "ok"}])
    async with running_chat(app), client(app) as c:
        kept = await send(c, {"message": "keep", "controls": {"model": "play:script"}}, [("k.txt", b"keep me")])
        await settled(c, kept.json()["message_id"])
        r = await send(c, {"message": "two", "controls": {"model": "play:script"}},
                       [("a.pdf", text_pdf()), ("b.png", png_bytes())])
        cid = r.json()["conversation_id"]
        await settled(c, r.json()["message_id"])
        files = (await c.get(f"/api/v1/chat/messages/{r.json()['user_message_id']}")).json()["attachments"]
        assert len(blobs(app)) == 3
        assert (await c.get(f"/api/v1/chat/attachments/{files[0]['id']}")).status_code == 200

        assert (await c.delete(f"/api/v1/chat/conversations/{cid}")).status_code == 204
        assert len(blobs(app)) == 1
        assert (await c.get(f"/api/v1/chat/attachments/{files[0]['id']}")).status_code == 404
        restored = await c.patch(f"/api/v1/chat/conversations/{cid}", json={"deleted": False})
        assert restored.status_code == 200
        shown = (await c.get(f"/api/v1/chat/conversations/{cid}")).json()["messages"][0]["attachments"]
        assert [(f["name"], f["removed"]) for f in shown] == [("a.pdf", True), ("b.png", True)]
        gone = await c.get(f"/api/v1/chat/attachments/{files[1]['id']}")
        assert gone.status_code == 404 and "removed" in gone.json()["message"]

        assert (await c.delete(f"/api/v1/chat/conversations/{cid}?permanent=true")).status_code == 204
        assert (await c.delete(f"/api/v1/chat/conversations/{kept.json()['conversation_id']}?permanent=true")
                ).status_code == 204
    assert blobs(app) == [] and rows(app) == 0


async def test_the_download_is_never_a_page_of_this_site(app: App) -> None:
    model(app, [{"text": "ok"}])
    _, guest_token = second_user(app)
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "files", "controls": {"model": "play:script"}},
                       [("page.html", html_with_scripts()), ("dot.png", png_bytes()), ("réport q1.pdf", text_pdf())])
        await settled(c, r.json()["message_id"])
        html, png, pdf = (await c.get(f"/api/v1/chat/messages/{r.json()['user_message_id']}")).json()["attachments"]
        page = await c.get(f"/api/v1/chat/attachments/{html['id']}")
        assert page.status_code == 200 and page.content == html_with_scripts()
        assert page.headers["content-type"].startswith("text/plain")
        assert page.headers["content-disposition"].startswith("attachment;")
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["content-security-policy"].startswith("sandbox")
        image = await c.get(f"/api/v1/chat/attachments/{png['id']}")
        assert image.headers["content-type"] == "image/png" and image.headers["content-disposition"].startswith("inline;")
        assert image.content == png_bytes()
        doc = await c.get(f"/api/v1/chat/attachments/{pdf['id']}")
        assert doc.headers["content-type"] == "application/pdf"
        assert "filename*=UTF-8''r%C3%A9port%20q1.pdf" in doc.headers["content-disposition"]
    async with running_chat(app), client(app, guest_token) as g:
        assert (await g.get(f"/api/v1/chat/attachments/{png['id']}")).status_code == 404
    async with client(app, "not-a-token") as anon:
        assert (await anon.get(f"/api/v1/chat/attachments/{png['id']}")).status_code == 401


async def test_models_carry_their_capabilities(app: App) -> None:
    model(app, [{"text": "ok"}])
    model(app, [{"text": "ok"}], name="plain", caps=ModelCapabilities())
    async with running_chat(app), client(app) as c:
        found = {m["id"]: m["capabilities"] for m in (await c.get("/api/v1/chat/models")).json()["models"]}
    assert found["play:script"] == {"vision": True, "document": True}
    assert found["plain:script"] == {"vision": False, "document": False}


# -- the store on both databases -------------------------------------------------------------


async def test_the_store_on_both_databases(any_app: App) -> None:
    from noteloom.chat.attachments import Upload, check_uploads, extract_all
    from noteloom.chat.service import ChatService

    chat = ChatService(any_app)
    st = chat.stores
    uid, _ = second_user(any_app, "writer")
    files = extract_all(check_uploads([Upload("a/b\u202e.txt", b"hello"), Upload("x.png", png_bytes())],
                                      chat.settings.attachments, "extract", BOTH), chat.settings.attachments)
    assert files[0].name == "b.txt"
    keys = st.attachments.put_bytes(files)
    with any_app.workspace.write() as conn:
        conv = st.conversations.create(uid, title="t", conn=conn)
        asked, _ = st.transcript.start_exchange(conv.id, "hi", note_context=None, model=None, conn=conn)
        added = st.attachments.add(asked.id, conv.id, uid, files, keys, conn=conn)
    assert [a.name for a in st.attachments.of_conversation(conv.id)] == ["b.txt", "x.png"]
    got, data = st.attachments.read(uid, added[1].id)
    assert data == png_bytes() and got.sha256 == files[1].sha256 and got.extract_status == "not_needed"
    assert st.attachments.unreadable(added[0], uid) is None
    assert st.attachments.unreadable(added[0], "0" * 32) == "it does not belong to this conversation's owner"
    with any_app.workspace.write() as conn:
        stripped = st.attachments.strip_conversations([conv.id], conn=conn)
    st.attachments.discard(stripped)
    assert sorted(stripped) == sorted(keys) and not any(st.attachments.blobs.exists(k) for k in keys)
    assert all(a.removed and a.extracted_text is None for a in st.attachments.of_conversation(conv.id))
    with any_app.workspace.write() as conn:
        assert st.attachments.purge_conversations([conv.id], conn=conn) == []
    assert st.attachments.of_conversation(conv.id) == []


async def test_a_file_that_changes_hands_before_its_first_turn_is_not_read(app: App) -> None:
    provider = model(app, [{"text": "ok"}])
    guest, _ = second_user(app)
    async with running_chat(app) as chat, client(app) as c:
        start = chat.runner.start

        def reassign_then_start(message_id: str, first_seq: int = 1) -> Any:
            with db.write_tx(app.engine) as conn:  # committed with the message; taken before its turn runs
                conn.execute(t.attachments.update().values(user_id=guest))
            return start(message_id, first_seq)

        chat.runner.start = reassign_then_start  # type: ignore[method-assign]
        r = await send(c, {"message": "read it", "controls": {"model": "play:script"}},
                       [("memo.txt", b"the code is 7731")])
        assert r.status_code == 202, r.text
        answer = await settled(c, r.json()["message_id"])
    assert answer["status"] == "complete"
    said = texts(last_user(provider.requests[-1]))
    assert "7731" not in said
    assert "memo.txt (text): not read, because it does not belong to this conversation's owner" in said


async def test_a_send_refused_after_its_bytes_were_written_leaves_no_blob(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    model(app, [{"hang": True}], loop=False)
    written: list[str] = []
    put = BlobStore.put

    def spy(self: BlobStore, data: bytes) -> str:
        written.append(put(self, data))
        return written[-1]

    monkeypatch.setattr(BlobStore, "put", spy)
    async with running_chat(app), client(app) as c:
        first = await c.post("/api/v1/chat/send", json={"message": "think long", "controls": {"model": "play:script"}})
        cid = first.json()["conversation_id"]
        busy = await send(c, {"message": "meanwhile", "conversation_id": cid}, [("late.txt", b"too late")])
        assert busy.status_code == 409  # the turn still runs: refused in the transaction, after the write
        assert len(written) == 1 and blobs(app) == [] and rows(app) == 0
        await c.post(f"/api/v1/chat/messages/{first.json()['message_id']}/cancel")
        await settled(c, first.json()["message_id"])


async def test_malformed_multipart_sends_are_refused_saying_what_to_send(app: App) -> None:
    model(app, [{"text": "ok"}])
    async with running_chat(app), client(app) as c:
        many = await c.post("/api/v1/chat/send", data={"payload": "{}"},
                            files=[("attachments", (f"f{i}.txt", b"x", "text/plain")) for i in range(7)])
        assert many.status_code == 422 and many.json()["field"] == "attachments"
        bad = await c.post("/api/v1/chat/send", data={"payload": "{not json"}, files=[("attachments", ("a.txt", b"x"))])
        assert bad.status_code == 422 and bad.json()["field"] == "payload"
        extra = await c.post("/api/v1/chat/send", data={"payload": "{}", "other": "1"},
                             files=[("attachments", ("a.txt", b"x"))])
        assert extra.status_code == 422 and extra.json()["field"] == "other"
        unknown = await c.post("/api/v1/chat/send", data={"payload": json.dumps({"mesage": "typo"})},
                               files=[("attachments", ("a.txt", b"x"))])
        assert unknown.status_code == 422 and "mesage" in unknown.json()["message"]
        huge = await c.post("/api/v1/chat/send", data={"payload": json.dumps({"message": "x" * 1_100_000})},
                            files=[("attachments", ("a.txt", b"x"))])
        assert huge.status_code == 422 and huge.json()["field"] == "body"
        as_text = await c.post("/api/v1/chat/send", data={"payload": "{}", "attachments": "not a file"},
                               files=[("attachments", ("a.txt", b"x"))])
        assert as_text.status_code == 422 and as_text.json()["field"] == "attachments"
    assert rows(app, t.messages) == 0 and blobs(app) == []


async def test_starting_the_chat_sweeps_bytes_no_row_names(app: App) -> None:
    """A process that died between writing a file and committing its row left bytes nobody
    names: the next chat start removes them once they are old, and keeps every named file."""
    model(app, [{"text": "Seen."}])
    async with running_chat(app), client(app) as c:
        r = await send(c, {"message": "Keep this", "controls": {"model": "play:script"}}, [("a.png", png_bytes())])
        assert r.status_code == 202, r.text
        await settled(c, r.json()["message_id"])
    [named] = blobs(app)
    orphan = BlobStore(app.workspace.attachments_dir / "chat").put(b"bytes of a send that never committed")
    for path in blobs(app):
        old = path.stat().st_mtime - 7200
        os.utime(path, (old, old))
    async with running_chat(app):
        pass
    assert blobs(app) == [named] and orphan not in {p.name for p in blobs(app)}
