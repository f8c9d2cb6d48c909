"""A single-person workspace from before people existed: after the upgrade its owner owns
everything and nothing changes for them; a person added later sees none of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from noteloom import db
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.search import search_notes

pytestmark = pytest.mark.anyio


def _upgrade_to(url: str, target: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    engine = db.create_db_engine(url)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, target)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO users (id, name, is_owner, created_time) VALUES (:u, 'olga', true, 1)"),
                         {"u": "u" * 32})
            for book, parent in (("a" * 32, None), ("b" * 32, "a" * 32)):
                conn.execute(sa.text("INSERT INTO notebooks (id, parent_id, title, created_time, updated_time)"
                                     " VALUES (:b, :p, :t, 1, 1)"), {"b": book, "p": parent, "t": f"Book {book[0]}"})
            conn.execute(
                sa.text("INSERT INTO notes (id, notebook_id, title, body, is_todo, source_url, created_time, updated_time)"
                        " VALUES (:n, :b, 'Pelican', 'a pelican note', false, '', 1, 2)"),
                {"n": "n" * 32, "b": "b" * 32},
            )
    finally:
        engine.dispose()


async def test_the_owner_of_an_old_workspace_owns_everything_and_a_new_member_sees_none_of_it(
    tmp_path: Path, database_url: str
) -> None:
    _upgrade_to(database_url, "0017_user_vaults")
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "home"), "NOTELOOM_DATABASE_URL": database_url}),
                   load_entry_points=False)
    try:
        ws = app.workspace
        owner = ws.owner()
        assert owner is not None and owner.role == "owner" and owner.is_admin
        assert [(p.name, p.role, p.notebooks) for p in ws.list_people()] == [("olga", "owner", 1)]
        assert ws.notebook_owner("b" * 32) == owner.id
        listed = await app.registry.call(app.tool_context(owner), "list_notebooks", {})
        assert {b["title"] for b in listed.payload["notebooks"]} == {"Book a", "Book b"}
        found = await app.registry.call(app.tool_context(owner), "search_notes", {"query": "pelican"})
        assert "n" * 32 in str(found.payload)
        assert [h.id for h in search_notes(ws, "pelican")] == ["n" * 32]

        ann = ws.add_person("ann")
        listed = await app.registry.call(app.tool_context(ann), "list_notebooks", {})
        assert listed.payload["notebooks"] == []
        found = await app.registry.call(app.tool_context(ann), "search_notes", {"query": "pelican"})
        assert "n" * 32 not in str(found.payload)
    finally:
        app.close()
