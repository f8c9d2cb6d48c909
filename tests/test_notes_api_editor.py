"""The editor's note routes, on SQLite and PostgreSQL: tags and to-do fields saved with the
version guard, the trash and back, a revision's text, attachments uploaded with their limit;
someone else's note answers exactly like a missing one."""

from __future__ import annotations

import pytest

from api_support import client, second_user
from noteloom.app import App
from noteloom.web.notes_api import ATTACHMENT_BYTES

pytestmark = pytest.mark.anyio
MISSING = "e" * 32


async def test_a_patch_sets_tags_and_to_do_fields_and_keeps_the_version_guard(any_app: App) -> None:
    app = any_app
    note = app.workspace.create_note("Packing", "tent", tags=["trip", "old"])
    async with client(app) as c:
        got = (await c.get(f"/api/v1/notes/{note.id}")).json()
        assert got["tags"] == ["old", "trip"] and got["is_todo"] is False and got["deleted_time"] is None
        saved = await c.patch(f"/api/v1/notes/{note.id}", json={
            "tags": ["Trip", "camping"], "is_todo": True, "todo_due": 1_800_000_000_000,
            "base_updated_time": got["updated_time"]})
        assert saved.status_code == 200, saved.text
        out = saved.json()
        assert sorted(out["tags"]) == ["camping", "trip"]
        assert out["is_todo"] is True and out["todo_due"] == 1_800_000_000_000 and out["todo_completed"] is None
        stale = await c.patch(f"/api/v1/notes/{note.id}", json={"todo_completed": 1, "base_updated_time": got["updated_time"]})
        assert stale.status_code == 409 and app.workspace.get_note(note.id).todo_completed is None
        done = (await c.patch(f"/api/v1/notes/{note.id}", json={
            "todo_completed": 1_700_000_000_000, "base_updated_time": out["updated_time"]})).json()
        assert done["todo_completed"] == 1_700_000_000_000 and done["todo_due"] == 1_800_000_000_000
        cleared = (await c.patch(f"/api/v1/notes/{note.id}", json={"todo_due": None, "tags": []})).json()
        assert cleared["todo_due"] is None and cleared["tags"] == [] and cleared["todo_completed"] == 1_700_000_000_000
        for bad, field in (({"tags": "trip"}, "tags"), ({"tags": [""]}, "tags.0"), ({"todo_due": -1}, "todo_due"),
                           ({"is_todo": "yes"}, "is_todo"), ({"tags": ["x"] * 201}, "tags"), ({"tags": ["  "]}, "tag")):
            r = await c.patch(f"/api/v1/notes/{note.id}", json=bad)
            assert r.status_code == 422 and r.json()["field"] == field, (bad, r.text)


async def test_trash_and_restore_and_a_trashed_note_reads_only_when_asked(any_app: App) -> None:
    app = any_app
    note = app.workspace.create_note("Old", "gone soon")
    async with client(app) as c:
        assert (await c.delete(f"/api/v1/notes/{note.id}")).status_code == 204
        plain = await c.get(f"/api/v1/notes/{note.id}")
        assert plain.status_code == 404 and "in the trash" in plain.json()["message"]
        trashed = (await c.get(f"/api/v1/notes/{note.id}", params={"trashed": "true"})).json()
        assert trashed["body"] == "gone soon" and trashed["deleted_time"] is not None
        assert (await c.patch(f"/api/v1/notes/{note.id}", json={"body": "x"})).status_code == 404
        assert (await c.delete(f"/api/v1/notes/{note.id}")).status_code == 404
        back = await c.post(f"/api/v1/notes/{note.id}/restore")
        assert back.status_code == 200 and back.json()["deleted_time"] is None
        again = await c.post(f"/api/v1/notes/{note.id}/restore")
        assert again.status_code == 409 and "not in the trash" in again.json()["message"]
        assert (await c.get(f"/api/v1/notes/{note.id}")).json()["title"] == "Old"
        assert (await c.post(f"/api/v1/notes/{MISSING}/restore")).status_code == 404
        assert (await c.delete(f"/api/v1/notes/{MISSING}")).status_code == 404


async def test_a_revision_reads_whole_and_only_under_its_own_note(any_app: App) -> None:
    app = any_app
    ws = app.workspace
    note = ws.create_note("Plan", "first text")
    ws.update_note(note.id, title="Plan B", body="second text")
    other = ws.create_note("Other", "x")
    rev = ws.list_revisions(note.id)[0].id
    async with client(app) as c:
        got = await c.get(f"/api/v1/notes/{note.id}/revisions/{rev}")
        assert got.status_code == 200 and got.json() == {"id": rev, "title": "Plan", "body": "first text"}
        wrong = await c.get(f"/api/v1/notes/{other.id}/revisions/{rev}")
        assert wrong.status_code == 404
        assert (await c.get(f"/api/v1/notes/{note.id}/revisions/{MISSING}")).status_code == 404
        assert (await c.get(f"/api/v1/notes/{note.id}/revisions/nothex")).status_code == 422


async def test_an_attachment_uploads_with_its_type_and_too_large_or_malformed_is_refused(any_app: App) -> None:
    app = any_app
    note = app.workspace.create_note("Photos", "")
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    async with client(app) as c:
        r = await c.post(f"/api/v1/notes/{note.id}/attachments", files={"file": ("dot.png", png, "image/png")})
        assert r.status_code == 201, r.text
        out = r.json()
        assert out["filename"] == "dot.png" and out["mime"] == "image/png" and out["size"] == len(png)
        att = app.workspace.get_attachment(out["id"])
        assert att.note_id == note.id
        assert (await c.get(f"/attachments/{out['id']}")).content == png
        big = await c.post(f"/api/v1/notes/{note.id}/attachments",
                           files={"file": ("big.bin", b"x" * (ATTACHMENT_BYTES + 1), "application/octet-stream")})
        assert big.status_code == 413 and big.json()["field"] == "file" and "10 MB" in big.json()["message"]
        wrong_part = await c.post(f"/api/v1/notes/{note.id}/attachments", files={"upload": ("a.txt", b"a", "text/plain")})
        assert wrong_part.status_code == 422 and wrong_part.json()["field"] == "file"
        as_json = await c.post(f"/api/v1/notes/{note.id}/attachments", json={"file": "x"})
        assert as_json.status_code == 422 and as_json.json()["field"] == "file"
        missing = await c.post(f"/api/v1/notes/{MISSING}/attachments", files={"file": ("a.txt", b"a", "text/plain")})
        assert missing.status_code == 404
    assert len(app.workspace.list_attachments(note.id)) == 1


async def test_someone_elses_note_answers_every_new_route_like_a_missing_one(any_app: App) -> None:
    app = any_app
    ws = app.workspace
    note = ws.create_note("Owner's", "private")
    ws.update_note(note.id, body="private, edited")
    rev = ws.list_revisions(note.id)[0].id
    _, token = second_user(app)
    calls = [
        ("GET", "/api/v1/notes/{id}?trashed=true", None),
        ("PATCH", "/api/v1/notes/{id}", {"tags": ["x"]}),
        ("DELETE", "/api/v1/notes/{id}", None),
        ("POST", "/api/v1/notes/{id}/restore", None),
        ("GET", "/api/v1/notes/{id}/revisions/" + rev, None),
    ]
    async with client(app, token) as c:
        for method, path, body in calls:
            theirs = await c.request(method, path.replace("{id}", note.id), json=body)
            nothing = await c.request(method, path.replace("{id}", MISSING), json=body)
            assert theirs.status_code == nothing.status_code == 404, (method, path, theirs.text)
            assert theirs.text.replace(note.id, "<ID>") == nothing.text.replace(MISSING, "<ID>")
        up = await c.post(f"/api/v1/notes/{note.id}/attachments", files={"file": ("a.txt", b"a", "text/plain")})
        assert up.status_code == 404
    after = ws.get_note(note.id)
    assert after.tags == () and after.deleted_time is None and ws.list_attachments(note.id) == []


async def test_a_note_says_whether_the_asker_may_change_it(any_app: App) -> None:
    ws = any_app.workspace
    book = ws.create_notebook("Lent")
    note = ws.create_note("Lent note", "read me", book.id)
    _, token = second_user(any_app)
    ws.share_notebook(book.id, "guest", "read")
    async with client(any_app) as c:
        assert (await c.get(f"/api/v1/notes/{note.id}")).json()["writable"] is True
    async with client(any_app, token) as c:
        got = await c.get(f"/api/v1/notes/{note.id}")
        assert got.status_code == 200 and got.json()["writable"] is False
        assert (await c.patch(f"/api/v1/notes/{note.id}", json={"body": "x"})).status_code == 403
    ws.share_notebook(book.id, "guest", "write")
    async with client(any_app, token) as c:
        assert (await c.get(f"/api/v1/notes/{note.id}")).json()["writable"] is True
