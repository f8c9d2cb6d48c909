"""Migration 0022's indexes on SQLite and PostgreSQL: the quick switcher's title match, a
``[[Title]]`` looked up by its title and the backlinks find the same notes as before (the
trigram table follows retitling, the trash and deletion), and each query can use its index."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.app import App
from noteloom.web import browse_api
from noteloom.web.browse_api import _trigram_rowids, title_queries, titles_matching
from noteloom.web.links import _candidates
from test_browse_api import client, ok

pytestmark = pytest.mark.anyio


async def titles(app: App, q: str) -> list[str]:
    async with client(app) as c:
        return [n["title"] for n in (await ok(c, "GET", "/api/v1/browse/titles", params={"q": q}))["notes"]]


async def test_the_title_match_ranks_prefixes_first_and_follows_every_change(any_app: App) -> None:
    ws = any_app.workspace
    ws.create_note("Weekly MEETING notes", "")
    later = ws.create_note("Meeting room", "")
    ws.create_note('Say "meet" ok', "")
    ws.create_note("Unrelated", "")
    assert await titles(any_app, "meeting") == ["Meeting room", "Weekly MEETING notes"]
    assert await titles(any_app, "EETING") == ["Meeting room", "Weekly MEETING notes"]
    short = await titles(any_app, "me")  # two characters: no trigram, the same ranking
    assert short[0] == "Meeting room" and sorted(short[1:]) == ['Say "meet" ok', "Weekly MEETING notes"]
    assert await titles(any_app, '"meet"') == ['Say "meet" ok']
    assert await titles(any_app, "ting notes") == ["Weekly MEETING notes"]

    ws.update_note(later.id, title="Board room")
    assert await titles(any_app, "meeting") == ["Weekly MEETING notes"]
    assert await titles(any_app, "board") == ["Board room"]
    ws.delete_note(later.id)  # to the trash
    assert await titles(any_app, "board") == []
    ws.restore(later.id)
    assert await titles(any_app, "board") == ["Board room"]
    ws.delete_note(later.id)
    ws.purge(later.id)
    assert await titles(any_app, "board") == []


async def test_titles_resolve_and_link_back_on_both_databases(any_app: App) -> None:
    ws = any_app.workspace
    target = ws.create_note("Packing list", "socks")
    ws.create_note("Packing list", "an older twin")  # the newest with the title wins
    ws.update_note(target.id, body="socks and boots")
    by_title = ws.create_note("Trip", "Bring what [[Packing list]] says.")
    by_id = ws.create_note("Other", f"See [it](:/{target.id}).")
    ws.create_note("Code", f"```\n:/{target.id}\n```")  # not a link
    async with client(any_app) as c:
        found = await ok(c, "POST", "/api/v1/links/resolve", json={"ids": [], "titles": ["Packing list", "Nope"]})
        assert found["titles"] == {"Packing list": target.id}
        links = await ok(c, "GET", f"/api/v1/notes/{target.id}/backlinks")
    assert {b["id"] for b in links} == {by_title.id, by_id.id}


async def test_the_newest_notes_answer_when_enough_of_them_start_with_the_text(
        any_app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browse_api, "_RECENT_WINDOW", 3)
    ws = any_app.workspace
    clock = iter(range(1_000_000, 2_000_000, 1000))

    def add(title: str) -> None:  # each newer than the last (not left to the clock's resolution)
        note = ws.create_note(title, "")
        with ws.write() as conn:
            conn.execute(sa.update(db.notes).where(db.notes.c.id == note.id).values(updated_time=next(clock)))

    for title in ["Plan old", "A plan", "Plan two", "Other plan", "Plan one"]:  # the last is the newest
        add(title)

    def match(text: str, limit: int) -> list[str]:
        with ws.read() as conn:
            return [r.title for r in titles_matching(conn, text, None, limit)]

    assert match("plan", 2) == ["Plan one", "Plan two"]  # both among the newest three
    assert match("plan", 3) == ["Plan one", "Plan two", "Plan old", "Other plan"][:3]  # past them: ranked whole
    assert match("pl", 5) == ["Plan one", "Plan two", "Plan old", "Other plan", "A plan"]
    for title in ["Note", "Another", "Third"]:  # the newest three start with nothing asked
        add(title)
    assert match("plan", 1) == ["Plan one"]


def _plan(conn: Connection, query: Any) -> str:
    sql = str(query.compile(conn, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
    rows = conn.exec_driver_sql(prefix + sql).all()
    return "\n".join(str(r[-1]) for r in rows)


async def test_each_query_can_use_its_index(any_app: App) -> None:
    ws = any_app.workspace
    note = ws.create_note("Meeting room", "body")
    with ws.write() as conn:
        if conn.dialect.name == "postgresql":  # enough rows that a scan is not the cheaper plan
            conn.exec_driver_sql(
                "INSERT INTO notes (id, notebook_id, title, body, is_todo, source_url, created_time, updated_time) "
                "SELECT md5(i::text), notebook_id, 'Note ' || i, 'text of note ' || i, false, '', created_time, "
                "updated_time + i FROM notes, generate_series(1, 20000) AS i WHERE notes.id = %s", (note.id,))
            for index in ("ix_notes_title_trgm", "ix_notes_body_trgm"):  # as autovacuum would, in time
                conn.exec_driver_sql(f"SELECT gin_clean_pending_list('{index}'::regclass)")
            conn.exec_driver_sql("ANALYZE notes")
    with ws.read() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")  # the index must be usable, not merely chosen
        ranked, _ = title_queries("meeting", None, 12)
        if conn.dialect.name == "sqlite":
            ranked = ranked.where(db.notes.c.seq.in_(_trigram_rowids("meeting")))
        else:
            conn.exec_driver_sql("SET enable_indexscan = off")  # against a bitmap of every live note
        title_plan = _plan(conn, ranked)
        exact = sa.select(db.notes.c.id).where(db.notes.c.title.in_(["Meeting room"]), db.notes.c.deleted_time.is_(None))
        exact_plan = _plan(conn, exact)
        backlinks_plan = _plan(conn, _candidates(conn, note.id, note.title))
        if conn.dialect.name == "sqlite":
            assert "notes_titles VIRTUAL TABLE" in title_plan, title_plan
            assert "ix_notes_live_title" in exact_plan, exact_plan
            assert "notes_fts VIRTUAL TABLE" in backlinks_plan, backlinks_plan
        else:
            assert "ix_notes_title_trgm" in title_plan, title_plan
            assert "ix_notes_live_title" in exact_plan, exact_plan
            assert "ix_notes_body_trgm" in backlinks_plan, backlinks_plan
