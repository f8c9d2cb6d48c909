"""``noteloom memory …`` as a user types it, on SQLite and PostgreSQL: add (personal and
shared), list with AI-written memories badged, edit, rm, search, --json, and errors naming
what to fix."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from noteloom import db
from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.db import new_id, now_ms
from noteloom.memory import store


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> Path:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("NOTELOOM_HOME", str(path))
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", database_url)
    return path


def invoke(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["memory", *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str, input: str | None = None) -> Any:
    code, out, err = invoke(*args, "--json", input=input)
    assert code == 0, (args, out, err)
    return json.loads(out)


def the_app(home: Path) -> App:
    env = {"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": os.environ["NOTELOOM_DATABASE_URL"]}
    return open_app(load_settings(env), load_entry_points=False)


def test_add_list_edit_and_rm_personal_and_shared_memories(home: Path) -> None:
    mine = ok("add", "Prefers metric units", "--tag", "units", "--tag", "style")
    shared = ok("add", "Invoices go out on the 1st", "--title", "Invoicing", "--shared")
    assert (mine["scope"], mine["title"], mine["tags"], mine["source"]) == (
        "personal", "Prefers metric units", ["units", "style"], "user")
    assert shared["scope"] == "shared" and shared["title"] == "Invoicing"
    assert {m["id"] for m in ok("list")} == {mine["id"], shared["id"]}
    assert [m["id"] for m in ok("list", "--shared")] == [shared["id"]]
    assert [m["id"] for m in ok("list", "--mine")] == [mine["id"]]

    edited = ok("edit", mine["id"], "--content", "Prefers metric units, except for beer", "--no-tags")
    assert edited["content"] == "Prefers metric units, except for beer" and edited["tags"] == []
    assert edited["title"] == "Prefers metric units"  # a title not given stays
    assert [m["id"] for m in ok("search", "BEER")] == [mine["id"]]

    assert ok("rm", shared["id"]) == {"id": shared["id"], "deleted": True}
    assert [m["id"] for m in ok("list")] == [mine["id"]]
    code, _, err = invoke("rm", shared["id"])
    assert code == 1 and f"no memory {shared['id']!r}" in err


def test_the_list_badges_what_the_ai_wrote_with_where_it_came_from(home: Path) -> None:
    ok("add", "Written by hand")
    app = the_app(home)
    try:
        owner = app.workspace.ensure_owner()
        with db.write_tx(app.engine) as c:
            store.add(c, owner.id, "Likes short answers", source="ai", conversation_id="c" * 32)
            store.add(c, owner.id, "Digest to the team", source="ai", run_id="r" * 32)
    finally:
        app.close()
    code, out, _ = invoke("list")
    assert code == 0
    lines = {line.split("  ")[-1]: line for line in out.splitlines()}
    assert f"[AI from chat {'c' * 32}] Likes short answers" in out
    assert f"[AI from run {'r' * 32}] Digest to the team" in out
    assert "[AI" not in lines["Written by hand"]
    assert [m["by_ai"] for m in ok("list")].count(True) == 2


def test_another_persons_memory_is_missing_to_every_command(home: Path) -> None:
    ok("list")  # makes the workspace and its owner
    app = the_app(home)
    try:
        other = new_id()
        with db.write_tx(app.engine) as c:
            c.execute(db.users.insert(), {"id": other, "name": "bob", "is_owner": False, "created_time": now_ms()})
            theirs = store.add(c, other, "bob's private fact")
    finally:
        app.close()
    assert ok("list") == [] and ok("search", "private") == []
    for args in (("show", theirs.id), ("edit", theirs.id, "--title", "x"), ("rm", theirs.id)):
        code, _, err = invoke(*args)
        assert code == 1 and f"no memory {theirs.id!r}" in err, args


def test_bad_input_names_the_option_and_stdin_is_read_for_dash(home: Path) -> None:
    code, _, err = invoke("add", "   ")
    assert code == 2 and "CONTENT" in err
    code, _, err = invoke("add", "ok", "--title", "t" * 256)
    assert code == 2 and "--title" in err
    code, _, err = invoke("search", "?!")
    assert code == 2 and "QUERY" in err
    code, _, err = invoke("list", "--shared", "--mine")
    assert code == 2 and "exclude" in err
    piped = ok("add", "-", input="A long fact\nover two lines\n")
    assert piped["content"] == "A long fact\nover two lines" and piped["title"] == "A long fact"
