"""Migration 0012 moves the chat's turns onto the run engine's tables with nothing lost,
and its downgrade puts them back; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection, Engine

from noteloom import db

BEFORE = "0011_one_head"
REVISION = "0012_run_engine"


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


def _events(c: Connection, table: str, key: str, value: str) -> list[tuple[int, str, Any]]:
    rows = c.execute(sa.text(f"SELECT seq, kind, data FROM {table} WHERE {key} = :v ORDER BY seq"), {"v": value})
    return [(r.seq, r.kind, json.loads(r.data) if isinstance(r.data, str) else r.data) for r in rows]


def test_the_chats_turns_become_runs_with_their_events_and_come_back_on_downgrade(engine: Engine) -> None:
    _alembic(engine, "upgrade", BEFORE)
    with engine.begin() as c:
        _insert(c, "users", id="u1", name="owner", is_owner=True, created_time=1, updated_time=1)
        _insert(c, "chat_conversations", id="c1", user_id="u1", title="Trip", created_time=1, updated_time=1)
        _insert(c, "chat_messages", id="m1", conversation_id="c1", position=1, role="user", content="go",
                status="complete", cancel_requested=False, created_time=1, updated_time=1)
        turns = [
            ("m2", "complete", None, None, False),
            ("m3", "awaiting_confirmation", None, None, False),
            ("m4", "running", "runner1", 1234, True),
            ("m5", "failed", None, None, False),
        ]
        for pos, (mid, status, runner, beat, cancel) in enumerate(turns, start=2):
            _insert(c, "chat_messages", id=mid, conversation_id="c1", position=pos, role="assistant",
                    content="half", status=status, runner_id=runner, heartbeat_time=beat,
                    cancel_requested=cancel, error_code="api_error" if status == "failed" else None,
                    model="play:script", input_tokens=pos * 10, output_tokens=pos, cost_usd=None if pos == 4 else "0.25",
                    created_time=10, started_time=11, finished_time=None if status == "running" else 12,
                    updated_time=13)
        for seq, kind, data in [(1, "status", {"status": "running"}), (2, "text", {"text": "hé"}),
                                (3, "done", {"status": "complete"})]:
            _insert(c, "chat_events", message_id="m2", seq=seq, kind=kind, data=json.dumps(data), time=seq)

    _alembic(engine, "upgrade", REVISION)
    with engine.connect() as c:
        runs = {r.id: r for r in c.execute(sa.text("SELECT * FROM runs"))}
        assert set(runs) == {"m2", "m3", "m4", "m5"}  # the user's message is no run
        assert {k: r.status for k, r in runs.items()} == {
            "m2": "succeeded", "m3": "waiting", "m4": "running", "m5": "failed",
        }
        m4 = runs["m4"]
        assert (m4.kind, m4.user_id, m4.subject_id, m4.runner_id, m4.heartbeat_time, bool(m4.cancel_requested)) == (
            "chat_turn", "u1", "m4", "runner1", 1234, True)
        assert (m4.created_time, m4.started_time, m4.finished_time) == (10, 11, None)
        assert runs["m5"].error_code == "api_error"
        assert (runs["m2"].model, runs["m2"].input_tokens, runs["m2"].output_tokens, runs["m2"].cost_usd) == (
            "play:script", 20, 2, "0.25")
        assert runs["m4"].cost_usd is None
        assert _events(c, "run_events", "run_id", "m2") == [
            (1, "status", {"status": "running"}), (2, "text", {"text": "hé"}), (3, "done", {"status": "complete"}),
        ]
        names = {col["name"] for col in sa.inspect(c).get_columns("chat_messages")}
        assert not names & {"heartbeat_time", "runner_id", "cancel_requested"}
        assert "chat_events" not in sa.inspect(c).get_table_names()
        statuses = dict(c.execute(sa.text("SELECT id, status FROM chat_messages")).all())
        assert statuses["m3"] == "awaiting_confirmation"  # the message keeps the chat's own words

    _alembic(engine, "downgrade", BEFORE)
    with engine.connect() as c:
        back = {r.id: r for r in c.execute(sa.text("SELECT * FROM chat_messages"))}
        assert (back["m4"].runner_id, back["m4"].heartbeat_time, bool(back["m4"].cancel_requested)) == (
            "runner1", 1234, True)
        assert bool(back["m1"].cancel_requested) is False
        assert _events(c, "chat_events", "message_id", "m2")[1] == (2, "text", {"text": "hé"})
        assert "runs" not in sa.inspect(c).get_table_names()
