"""The workspace domain, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.errors import AuthError, Conflict, InvalidInput, NotFound
from noteloom.workspace import Workspace


def test_notebooks_nest_and_count_their_live_notes(any_ws: Workspace) -> None:
    work = any_ws.create_notebook("Work")
    sub = any_ws.create_notebook("Projects", work.id)
    any_ws.create_note("a", "", sub.id)
    gone = any_ws.create_note("b", "", sub.id)
    any_ws.delete_note(gone.id)
    books = {b.title: b for b in any_ws.list_notebooks()}
    assert books["Projects"].parent_id == work.id
    assert books["Projects"].note_count == 1
    assert [b.title for b in any_ws.notebook_path(sub.id)] == ["Work", "Projects"]
    assert any_ws.find_notebook("work/projects").id == sub.id


def test_a_notebook_cannot_move_inside_itself(any_ws: Workspace) -> None:
    top = any_ws.create_notebook("Top")
    child = any_ws.create_notebook("Child", top.id)
    with pytest.raises(InvalidInput, match="inside itself"):
        any_ws.update_notebook(top.id, parent_id=child.id)


def test_ambiguous_notebook_names_ask_for_the_path(any_ws: Workspace) -> None:
    a = any_ws.create_notebook("A")
    b = any_ws.create_notebook("B")
    any_ws.create_notebook("Inbox", a.id)
    any_ws.create_notebook("Inbox", b.id)
    with pytest.raises(Conflict, match="A/Inbox"):
        any_ws.find_notebook("Inbox")
    assert any_ws.find_notebook("B/Inbox").parent_id == b.id


def test_notes_keep_every_field(any_ws: Workspace) -> None:
    book = any_ws.create_notebook("Home")
    note = any_ws.create_note(
        "Buy paint", "white, 2 litres", book.id, is_todo=True, todo_due=1_800_000_000_000,
        source_url="https://example.org/x", tags=["DIY", "house"], created_time=1_600_000_000_000,
    )
    again = any_ws.get_note(note.id)
    assert again == note
    assert (again.is_todo, again.todo_due, again.todo_completed) == (True, 1_800_000_000_000, None)
    assert again.created_time == again.updated_time == 1_600_000_000_000
    assert set(again.tags) == {"DIY", "house"}
    assert len(note.id) == 32 and all(c in "0123456789abcdef" for c in note.id)


def test_a_note_without_notebook_goes_to_the_default_one(any_ws: Workspace) -> None:
    note = any_ws.create_note("loose", "")
    assert any_ws.get_notebook(note.notebook_id).title == "Notes"
    assert any_ws.create_note("second", "").notebook_id == note.notebook_id


def test_every_title_or_body_change_keeps_the_previous_version(any_ws: Workspace) -> None:
    note = any_ws.create_note("v1", "one")
    any_ws.update_note(note.id, body="two")
    any_ws.update_note(note.id, title="v3")
    any_ws.update_note(note.id, is_todo=True)  # not a content change: no revision
    revs = any_ws.list_revisions(note.id)
    assert [(r.title, r.body) for r in revs] == [("v1", "two"), ("v1", "one")]
    restored = any_ws.restore_revision(revs[1].id)
    assert (restored.title, restored.body) == ("v1", "one")
    assert len(any_ws.list_revisions(note.id)) == 3


def test_unchanged_updates_write_nothing(any_ws: Workspace) -> None:
    note = any_ws.create_note("same", "body")
    after = any_ws.update_note(note.id, title="same", body="body")
    assert after.updated_time == note.updated_time
    assert any_ws.list_revisions(note.id) == []


def test_trash_keeps_the_place_and_restores_a_whole_notebook(any_ws: Workspace) -> None:
    top = any_ws.create_notebook("Top")
    sub = any_ws.create_notebook("Sub", top.id)
    n1 = any_ws.create_note("in sub", "", sub.id)
    n0 = any_ws.create_note("deleted before", "", sub.id)
    any_ws.delete_note(n0.id)
    assert any_ws.delete_notebook(top.id) == 1
    trash = any_ws.list_trash()
    assert {(t.kind, t.title) for t in trash} == {("notebook", "Top"), ("note", "deleted before")}
    with pytest.raises(NotFound, match="trash"):
        any_ws.get_note(n1.id)
    any_ws.restore(top.id)
    assert any_ws.get_note(n1.id).notebook_id == sub.id
    # The note deleted on its own stays in the trash.
    assert [t.id for t in any_ws.list_trash()] == [n0.id]


def test_restoring_a_note_whose_notebook_is_gone_puts_it_in_the_default_notebook(any_ws: Workspace) -> None:
    book = any_ws.create_notebook("Gone")
    note = any_ws.create_note("orphan", "", book.id)
    any_ws.delete_note(note.id)
    any_ws.delete_notebook(book.id)
    any_ws.purge(book.id)
    any_ws.restore(note.id)
    assert any_ws.get_note(note.id).notebook_id != book.id


def test_purge_deletes_for_good_with_revisions_tags_and_attachments(any_ws: Workspace) -> None:
    note = any_ws.create_note("secret", "v1", tags=["t"])
    any_ws.update_note(note.id, body="v2")
    att = any_ws.add_attachment(note.id, b"\x89PNG data", "pic.png")
    path = any_ws.attachment_path(att.id, att.filename)
    assert path.read_bytes() == b"\x89PNG data"
    with pytest.raises(Conflict, match="not in the trash"):
        any_ws.purge(note.id)
    any_ws.delete_note(note.id)
    assert any_ws.purge(note.id) == 1
    assert not path.exists()
    with any_ws.read() as c:
        for table in (db.notes, db.revisions, db.note_tags, db.attachments):
            col = table.c.id if table is db.notes else table.c.note_id
            assert c.execute(sa.select(sa.func.count()).select_from(table).where(col == note.id)).scalar() == 0


def test_old_trash_is_purged_automatically(any_ws: Workspace) -> None:
    old = any_ws.create_note("old", "")
    fresh = any_ws.create_note("fresh", "")
    any_ws.delete_note(old.id)
    any_ws.delete_note(fresh.id)
    with any_ws.write() as c:
        c.execute(db.notes.update().where(db.notes.c.id == old.id).values(deleted_time=db.now_ms() - 91 * 86_400_000))
    assert any_ws.purge_expired(90) == 1
    assert [t.id for t in any_ws.list_trash()] == [fresh.id]


def test_tags_are_case_insensitive_and_counted_on_live_notes(any_ws: Workspace) -> None:
    a = any_ws.create_note("a", "", tags=["Recipe"])
    b = any_ws.create_note("b", "")
    assert any_ws.add_tags(b.id, ["recipe", "new"]) == ["Recipe", "new"]
    assert any_ws.add_tags(b.id, ["RECIPE"]) == []
    any_ws.delete_note(a.id)
    counts = {t.title: t.note_count for t in any_ws.list_tags()}
    assert counts == {"new": 1, "Recipe": 1}
    assert any_ws.remove_tags(b.id, ["recipe", "absent"]) == ["Recipe"]
    assert [t.title for t in any_ws.list_tags(used_only=True)] == ["new"]
    with pytest.raises(NotFound):
        any_ws.add_tags(b.id, ["missing"], create_missing=False)


def test_a_failed_operation_leaves_nothing_behind(any_ws: Workspace) -> None:
    book = any_ws.create_notebook("B")
    with pytest.raises(NotFound), any_ws.write() as conn:
        any_ws.create_note("first", "", book.id, conn=conn)
        any_ws.create_note("second", "", "0" * 32, conn=conn)  # no such notebook
    assert any_ws.list_notes() == []


def test_ids_and_values_are_validated(any_ws: Workspace) -> None:
    with pytest.raises(InvalidInput, match="32 lowercase hex"):
        any_ws.create_note("x", "", id="not-an-id")
    with pytest.raises(InvalidInput, match="todo_due"):
        any_ws.create_note("x", "", todo_due=-5)
    with pytest.raises(InvalidInput, match="must not be empty"):
        any_ws.create_notebook("   ")
    with pytest.raises(InvalidInput, match="NUL"):
        any_ws.create_note("x", "a\x00b")
    with pytest.raises(InvalidInput, match="NUL"):
        any_ws.create_note("x", "", tags=["a\x00b"])
    with pytest.raises(InvalidInput, match="NUL"):
        any_ws.create_notebook("a\x00b")
    note = any_ws.create_note("x", "", id="ab" * 16)
    with pytest.raises(Conflict, match="exists already"):
        any_ws.create_note("y", "", id=note.id)


def test_every_note_write_lands_in_the_change_feed(any_ws: Workspace) -> None:
    note = any_ws.create_note("x", "")
    any_ws.update_note(note.id, body="y")
    any_ws.delete_note(note.id)
    any_ws.restore(note.id)
    any_ws.delete_note(note.id)
    any_ws.purge(note.id)
    with any_ws.read() as c:
        kinds = c.execute(
            sa.select(db.note_changes.c.kind).where(db.note_changes.c.note_id == note.id).order_by(db.note_changes.c.seq)
        ).scalars().all()
    assert kinds == ["create", "update", "delete", "restore", "delete", "purge"]


def test_tokens_are_stored_hashed_and_can_be_revoked(any_ws: Workspace) -> None:
    owner = any_ws.ensure_owner("me")
    assert any_ws.ensure_owner("someone else").id == owner.id
    first = any_ws.create_token(owner.id)
    assert any_ws.verify_token(first).id == owner.id
    with any_ws.read() as c:
        stored = c.execute(sa.select(db.api_tokens.c.token_hash)).scalars().all()
    assert first not in stored
    second = any_ws.create_token(owner.id, revoke_others=True)
    with pytest.raises(AuthError, match="wrong or revoked"):
        any_ws.verify_token(first)
    assert any_ws.verify_token(second).name == "me"
    with pytest.raises(AuthError, match="required"):
        any_ws.verify_token("")


def test_run_time_settings_round_trip(any_ws: Workspace) -> None:
    any_ws.set_setting("tool.x.enabled", True)
    any_ws.set_setting("tool.x.enabled", False)
    any_ws.set_setting("tools.scope", ["Work", "!Work/Private"])
    assert any_ws.get_setting("tool.x.enabled") is False
    assert any_ws.settings_with_prefix("tool") == {"tool.x.enabled": False, "tools.scope": ["Work", "!Work/Private"]}
    assert any_ws.get_setting("missing", 7) == 7
