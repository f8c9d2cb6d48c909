"""People in one workspace: roles, passwords, ownership of notebooks, shares, and tools acting
as the person asking (on SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

from noteloom.access import AccessScope
from noteloom.accounts import User
from noteloom.app import App
from noteloom.errors import AuthError, Conflict, Forbidden, InvalidInput, NotFound
from noteloom.people import check_password, hash_password
from noteloom.tools import ToolError

pytestmark = pytest.mark.anyio


def people(app: App) -> tuple[User, User, User, User]:
    ws = app.workspace
    owner = ws.ensure_owner("olga")
    admin = ws.add_person("ada", role="admin")
    ann = ws.add_person("ann", password="ann's long password")
    bob = ws.add_person("bob")
    return owner, admin, ann, bob


async def visible_titles(app: App, user: User | None) -> set[str]:
    out = await app.registry.call(app.tool_context(user), "list_notebooks", {})
    return {b["title"] for b in out.payload["notebooks"]} if isinstance(out.payload, dict) else set()


def test_passwords_are_argon2id_hashes_checked_in_constant_form() -> None:
    stored = hash_password("correct horse battery")
    assert stored.startswith("$argon2id$")
    assert check_password(stored, "correct horse battery")
    assert not check_password(stored, "correct horse batterY")
    assert not check_password(None, "correct horse battery")
    with pytest.raises(InvalidInput):
        hash_password("short")


def test_people_are_added_listed_given_roles_and_the_owner_is_fixed(any_app: App) -> None:
    ws = any_app.workspace
    _owner, admin, ann, _bob = people(any_app)
    listed = {p.name: p for p in ws.list_people()}
    assert {n: p.role for n, p in listed.items()} == {"olga": "owner", "ada": "admin", "ann": "member", "bob": "member"}
    assert listed["ann"].has_password and not listed["bob"].has_password
    with pytest.raises(Conflict):
        ws.add_person("ann")
    with pytest.raises(Forbidden):
        ws.add_person("carl", actor=ann)  # members do not manage people
    with pytest.raises(Forbidden):
        ws.set_role("olga", "member", actor=admin)
    with pytest.raises(Forbidden):
        ws.set_role("ada", "member", actor=ws.add_person("ed", role="admin"))  # only the owner changes an admin
    assert ws.set_role("bob", "admin", actor=admin).role == "admin"
    with pytest.raises(InvalidInput):
        ws.set_role("bob", "owner")
    with pytest.raises(NotFound):
        ws.find_person("nobody")


def test_a_password_signs_in_and_a_new_password_signs_that_session_out(any_app: App) -> None:
    ws = any_app.workspace
    _, _, ann, _ = people(any_app)
    session, web = ws.start_password_session("ann", "ann's long password")
    assert web.user.id == ann.id and web.user.role == "member"
    assert ws.verify_session(session).user.name == "ann"
    for name, password in (("ann", "wrong password!"), ("bob", "ann's long password"), ("nobody", "x" * 10)):
        with pytest.raises(AuthError, match="the name or the password is wrong"):
            ws.start_password_session(name, password)
    ws.set_password("ann", "another long password", actor=ann)
    with pytest.raises(AuthError):
        ws.verify_session(session)


async def test_members_see_their_own_and_shared_notebooks_admins_everything(any_app: App) -> None:
    ws = any_app.workspace
    owner, admin, ann, bob = people(any_app)
    work = ws.create_notebook("Work")  # the owner's (an old workspace's rows have no owner_id)
    team = ws.create_notebook("Team", parent_id=work.id)
    ws.create_notebook("Ann's", owner_id=ann.id)
    sub = ws.create_notebook("Ann's drafts", parent_id=ws.find_notebook("Ann's").id)
    assert sub.owner_id == ann.id
    ws.create_note("plan", "the team plan", notebook_id=team.id)
    assert await visible_titles(any_app, owner) == {"Work", "Team", "Ann's", "Ann's drafts"}
    assert await visible_titles(any_app, admin) == {"Work", "Team", "Ann's", "Ann's drafts"}
    assert await visible_titles(any_app, ann) == {"Ann's", "Ann's drafts"}
    assert await visible_titles(any_app, bob) == set()
    ws.share_notebook(work.id, "bob", "read", actor=owner)
    assert await visible_titles(any_app, bob) == {"Work", "Team"}  # a share covers sub-notebooks
    with pytest.raises(NotFound):
        ws.share_notebook(work.id, "ann", "read", actor=ann)  # she cannot see it: missing
    with pytest.raises(Forbidden):
        ws.share_notebook(work.id, "ann", "read", actor=bob)  # he sees it but does not own it
    scope = AccessScope(ws, bob.id)
    books = ws.list_notebooks(with_counts=False)
    assert scope.allowed_ids(books) == {work.id, team.id}
    assert scope.writable_ids(books) == set()
    ws.share_notebook(work.id, "bob", "write", actor=admin)
    assert AccessScope(ws, bob.id).writable_ids(books) == {work.id, team.id}
    assert [s.access for s in ws.notebook_shares(work.id)] == ["write"]
    assert ws.unshare_notebook(work.id, "bob", actor=owner)
    assert await visible_titles(any_app, bob) == set()


async def test_a_foreign_note_reads_exactly_like_a_missing_one(any_app: App) -> None:
    ws = any_app.workspace
    owner, _, ann, _ = people(any_app)
    note = ws.create_note("secret", "owner's secret", notebook_id=ws.create_notebook("Private").id)
    any_app.registry.set_enabled(ws, "read_note", True)

    async def error(user: User, note_id: str) -> str:
        with pytest.raises(ToolError) as info:
            await any_app.registry.call(any_app.tool_context(user), "read_note", {"id": note_id})
        return str(info.value).replace(note_id, "ID")

    assert await error(ann, note.id) == await error(ann, "0" * 32)
    got: Any = await any_app.registry.call(any_app.tool_context(owner), "read_note", {"id": note.id})
    assert "owner's secret" in str(got.payload)


def test_removing_a_person_transfers_or_trashes_their_notebooks(any_app: App) -> None:
    ws = any_app.workspace
    owner, admin, ann, bob = people(any_app)
    mine = ws.create_notebook("Ann's", owner_id=ann.id)
    ws.create_note("n", "text", notebook_id=mine.id)
    bobs = ws.create_notebook("Bob's", owner_id=bob.id)
    ws.create_note("b", "text", notebook_id=bobs.id)
    with pytest.raises(InvalidInput):
        ws.remove_person("ann", notebooks="transfer", actor=admin)  # to whom?
    with pytest.raises(Forbidden):
        ws.remove_person("olga", notebooks="delete", actor=admin)
    out = ws.remove_person("ann", notebooks="transfer", transfer_to="bob", actor=admin)
    assert out["notebooks"] == 1 and ws.get_notebook(mine.id).owner_id == bob.id
    out = ws.remove_person("bob", notebooks="delete", actor=owner)
    assert out["notes_trashed"] == 2
    assert all(b.deleted_time is not None for b in ws.list_notebooks(include_deleted=True, with_counts=False))
    assert {p.name for p in ws.list_people()} == {"olga", "ada"}
