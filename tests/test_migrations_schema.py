"""The migrated schema is the models' schema, on SQLite and on PostgreSQL.

Alembic's ``compare_metadata`` compares every table, column, type, nullability, index,
unique constraint and foreign key of the models with a database the migrations built;
what the models cannot describe is left out by the named rule of
``noteloom.migrations.compare`` and nothing else. A database at the several heads of
before the merge upgrades to the one head with its rows, and the migrations that can be
undone are undone and redone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

import noteloom.chat.tables
import noteloom.memory.tables
import noteloom.recipes.tables
import noteloom.runs.tables
import noteloom.vault
import noteloom.vectors
import noteloom.workspace.annotations
from noteloom import db
from noteloom.migrations import compare
from noteloom.search import search_notes
from noteloom.workspace import Workspace

#: Every module that declares tables on ``db.metadata`` (docs/schema.md). A table the
#: migrations create and no module listed here models shows up as a difference.
MODELS = (db, noteloom.chat.tables, noteloom.memory.tables, noteloom.runs.tables, noteloom.recipes.tables, noteloom.workspace.annotations, noteloom.vectors, noteloom.vault)
MERGE = "0011_one_head"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    return cfg


def _alembic(engine: Engine, action: str, target: str) -> None:
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, target)


def _versions(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def _differences(engine: Engine, metadata: sa.MetaData = db.metadata) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={"compare_type": True, "compare_server_default": True, "include_name": compare.include_name},
        )
        return list(compare_metadata(context, metadata))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    e = db.create_db_engine(database_url)
    try:
        yield e
    finally:
        e.dispose()


def _head() -> str:
    heads = ScriptDirectory.from_config(_config()).get_heads()
    assert len(heads) == 1
    return heads[0]


def test_a_new_database_has_the_models_schema(engine: Engine) -> None:
    assert {t.name for t in db.metadata.sorted_tables} >= {"notes", "chat_messages", "semantic_chunks"}
    db.migrate(engine)
    assert _versions(engine) == [_head()]
    assert _differences(engine) == []


def test_the_schema_still_matches_with_a_semantic_index_built(engine: Engine) -> None:
    db.migrate(engine)
    store = noteloom.vectors.vector_store(engine)
    with engine.begin() as conn:
        missing = store.available(conn)
        if missing:
            pytest.skip(missing)
        store.create(conn, 4)
    assert noteloom.vectors.VECTORS in compare.TABLES
    assert noteloom.vectors.VECTORS in sa.inspect(engine).get_table_names()
    assert _differences(engine) == []


def test_the_compare_reports_drift_outside_the_named_objects(engine: Engine) -> None:
    db.migrate(engine)
    drifted = sa.MetaData()
    for table in db.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["notes"].append_column(sa.Column("pinned", sa.Boolean, nullable=False))
    drifted.tables["tags"].c.title.nullable = True
    drifted.tables["users"].c.name.type = sa.String(100)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE notes_stray (id INTEGER PRIMARY KEY)")
        conn.exec_driver_sql("CREATE INDEX ix_settings_value ON settings (value)")
    found = _differences(engine, drifted)
    flat = [d for item in found for d in (item if isinstance(item, list) else [item])]
    kinds = {(d[0], _name(d)) for d in flat}
    assert kinds == {
        ("add_column", "notes.pinned"),
        ("modify_nullable", "tags.title"),
        ("modify_type", "users.name"),
        ("remove_table", "notes_stray"),
        ("remove_index", "ix_settings_value"),
    }


def _name(diff: tuple[Any, ...]) -> str:
    kind = diff[0]
    if kind == "add_column":
        return f"{diff[2]}.{diff[3].name}"
    if kind.startswith("modify_"):
        return f"{diff[2]}.{diff[3]}"
    return str(diff[1].name)


def test_the_objects_left_to_the_migrations_exist(engine: Engine) -> None:
    """The rule names real objects: a name kept after its object was dropped or renamed
    would hide the next object of that name."""
    db.migrate(engine)
    inspector = sa.inspect(engine)
    made_at_run_time = {noteloom.vectors.VECTORS}  # checked with a semantic index built, above
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            names = set(conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
            assert set(compare.TABLES) - made_at_run_time <= names
            assert set(compare.TRIGGERS) <= names
        else:
            for table, column in compare.COLUMNS:
                assert column in {c["name"] for c in inspector.get_columns(table)}
            indexes = {i["name"] for t in inspector.get_table_names() for i in inspector.get_indexes(t)}
            assert set(compare.INDEXES) <= indexes
            assert set(compare.FUNCTIONS) <= set(conn.exec_driver_sql("SELECT proname FROM pg_proc").scalars())


def _predicate(text: Any) -> str:
    return re.sub(r"[\s()]", "", str(text)).lower()


def test_partial_indexes_have_the_models_predicate(engine: Engine) -> None:
    """compare_metadata does not compare an index's WHERE: the model names it for SQLite
    (``sqlite_where``) and the migration writes it for both; the two must agree."""
    db.migrate(engine)
    option = f"{engine.dialect.name}_where"
    inspector = sa.inspect(engine)
    partial = 0
    for table in db.metadata.sorted_tables:
        reflected = {i["name"]: i.get("dialect_options", {}).get(option) for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            where = index.dialect_options["sqlite"]["where"]
            assert _predicate(reflected[index.name] if reflected[index.name] is not None else "") == (
                _predicate(where) if where is not None else ""
            ), index.name
            partial += where is not None
    assert partial >= 2  # ix_notes_trashed, ix_notes_live_recent


def test_primary_keys_are_the_models(engine: Engine) -> None:
    """compare_metadata does not compare primary keys, nor SQLite's AUTOINCREMENT (chunk ids
    are never reused, which the in-memory vector copy relies on)."""
    db.migrate(engine)
    inspector = sa.inspect(engine)
    for table in db.metadata.sorted_tables:
        pk = inspector.get_pk_constraint(table.name)["constrained_columns"]
        assert pk == [c.name for c in table.primary_key.columns], table.name
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            for table in db.metadata.sorted_tables:
                sql = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = ?", (table.name,)).scalar()
                assert ("AUTOINCREMENT" in str(sql).upper()) == table.dialect_options["sqlite"]["autoincrement"], table.name


def _at_old_heads(engine: Engine, heads: tuple[str, ...]) -> None:
    """What ``upgrade heads`` left before the merge: each branch up to its newest migration."""
    for head in heads:
        _alembic(engine, "upgrade", head)


OLD_HEADS = ("0002_keyword_index", "0003", "0005", "0006", "0007", "0010_conversation_tool_policies")
# A database from before 0007-0010 were written.
OLDER_HEADS = ("0002_keyword_index", "0003", "0004", "0005", "0006")


@pytest.mark.parametrize("heads", [OLD_HEADS, OLDER_HEADS], ids=["old-heads", "older-heads"])
def test_a_database_at_several_heads_upgrades_to_the_one_head_with_its_notes(
    engine: Engine, tmp_path: Path, heads: tuple[str, ...]
) -> None:
    merge = ScriptDirectory.from_config(_config()).get_revision(MERGE)
    assert merge is not None and merge.down_revision == OLD_HEADS
    _at_old_heads(engine, heads)
    assert _versions(engine) == sorted(heads)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO notebooks (id, title, created_time, updated_time) VALUES (:b, 'Book', 1, 1)"),
                     {"b": "b" * 32})
        conn.execute(
            sa.text("INSERT INTO notes (id, notebook_id, title, body, is_todo, source_url, created_time, updated_time)"
                    " VALUES (:n, :b, 'Pelican', 'a pelican note', false, '', 1, 2)"),
            {"n": "a" * 32, "b": "b" * 32},
        )
    db.migrate(engine)
    assert _versions(engine) == [_head()]
    assert _differences(engine) == []
    ws = Workspace(engine, tmp_path)
    assert ws.get_note("a" * 32).body == "a pelican note"
    assert [h.id for h in search_notes(ws, "pelican")] == ["a" * 32]
    ws.update_note("a" * 32, body="a pelican, edited")
    assert [r.body for r in ws.list_revisions("a" * 32)] == ["a pelican note"]


#: Each branch walked down as far as it goes: 0007 (deltas have no full text to go back
#: to) and 0001 (the workspace itself) refuse to be undone.
UNDO = ("0010_conversation_tool_policies@-3", "0004@-1", "0006@-1", "0005@-1", "0003@-1", "0002_keyword_index@-1")


def test_the_migrations_that_can_be_undone_are_undone_and_redone(engine: Engine) -> None:
    db.migrate(engine)
    _alembic(engine, "downgrade", "0007")  # the merge: back to its branches
    assert _versions(engine) == sorted(OLD_HEADS)
    for target in UNDO:
        _alembic(engine, "downgrade", target)
    assert _versions(engine) == ["0007"]
    inspector = sa.inspect(engine)
    left = set(inspector.get_table_names())
    assert left.isdisjoint({"web_sessions", "chat_conversations", "chat_messages", "semantic_chunks", "notes_fts"})
    assert "ix_notes_deleted_time" in {i["name"] for i in inspector.get_indexes("notes")}
    assert "search_vector" not in {c["name"] for c in inspector.get_columns("notes")}
    with pytest.raises(NotImplementedError):
        _alembic(engine, "downgrade", "0001")
    db.migrate(engine)
    assert _versions(engine) == [_head()]
    assert _differences(engine) == []
