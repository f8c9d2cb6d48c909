"""Migration 0020 turns each conversation's messages into one line (each one's parent the one
before it by position, the conversation's leaf its last message), and its downgrade drops
the columns again; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection, Engine

from noteloom import db

BEFORE = "0019_sealed_chats"
REVISION = "0020_chat_branches"


def _alembic(engine: Engine, action: str, target: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, target)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    e = db.create_db_engine(database_url)
    try:
        yield e
    finally:
        e.dispose()


def _insert(c: Connection, table_name: str, **values: Any) -> None:
    """A row with ``values``, its other required columns given a plain value of their type."""
    table = sa.Table(table_name, sa.MetaData(), autoload_with=c)
    row = dict(values)
    for col in table.columns:
        if col.name in row or col.nullable or col.server_default is not None:
            continue
        py = col.type.python_type
        row[col.name] = False if py is bool else 0 if py in (int, float) else "0" if col.name == "cost_usd" else ""
    c.execute(table.insert(), row)


def test_existing_messages_become_one_line_and_the_downgrade_drops_the_columns(engine: Engine) -> None:
    _alembic(engine, "upgrade", BEFORE)
    with engine.begin() as c:
        _insert(c, "users", id="u1", name="owner", is_owner=True, created_time=1, updated_time=1)
        for cid in ("c1", "c2"):
            _insert(c, "chat_conversations", id=cid, user_id="u1", title=cid, created_time=1, updated_time=1)
        for mid, cid, pos, role in [("a1", "c1", 1, "user"), ("a2", "c1", 2, "assistant"), ("a3", "c1", 4, "note"),
                                    ("a4", "c1", 5, "user"), ("a5", "c1", 6, "assistant"), ("b1", "c2", 1, "user")]:
            _insert(c, "chat_messages", id=mid, conversation_id=cid, position=pos, role=role, status="complete",
                    created_time=1, updated_time=1)
        _insert(c, "chat_conversations", id="c3", user_id="u1", title="empty", created_time=1, updated_time=1)
    _alembic(engine, "upgrade", REVISION)
    with engine.connect() as c:
        parents = dict(c.execute(sa.text("SELECT id, parent_id FROM chat_messages")).all())
        leaves = dict(c.execute(sa.text("SELECT id, leaf_id FROM chat_conversations")).all())
    assert parents == {"a1": None, "a2": "a1", "a3": "a2", "a4": "a3", "a5": "a4", "b1": None}
    assert leaves == {"c1": "a5", "c2": "b1", "c3": None}
    _alembic(engine, "downgrade", BEFORE)
    with engine.connect() as c:
        assert "parent_id" not in {col["name"] for col in sa.inspect(c).get_columns("chat_messages")}
        assert "leaf_id" not in {col["name"] for col in sa.inspect(c).get_columns("chat_conversations")}
        assert c.execute(sa.text("SELECT count(*) FROM chat_messages")).scalar() == 6
