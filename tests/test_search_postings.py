"""Rankings from kept postings are FTS5's own: the same rows, order and scores to the
last bit, for AND, phrase, prefix, field and NOT queries, before and after writes the
postings follow through the change feed; and work is skipped (rows read from FTS5)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noteloom import search
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.postings import postings, serving
from noteloom.query import parse_query
from noteloom.search import search_notes
from noteloom.workspace import Workspace

WORDS = ["apple", "apply", "banana", "cherry", "kiwi", "lemon", "mango", "melon", "pear", "plum", "Café", "数据库"]


@pytest.fixture(autouse=True)
def _postings_on() -> Iterator[None]:
    postings.enabled = True
    postings.clear()
    postings.read_rows = postings.scored_rows = 0
    search._rankings.clear()
    try:
        yield
    finally:
        postings.enabled = postings.background = False
        postings.settle(timeout=30)
        postings.clear()
        search._rankings.clear()


def fts5_ranking(ws: Workspace, query: str) -> list[tuple[int, float]]:
    """Every match as FTS5 ranks it, equal ranks by rowid."""
    with ws.read() as c:
        text = search._Plan(c, parse_query(query), None)._fts_text()
        rows = c.exec_driver_sql(
            "SELECT rowid, bm25(notes_fts, 10.0, 1.0) AS r FROM notes_fts WHERE notes_fts MATCH ? ORDER BY r, rowid",
            (text,),
        ).all()
    return [(int(r[0]), float(r[1])) for r in rows]


def kept_ranking(ws: Workspace, query: str, fetch: int = 1_000_000) -> list[tuple[int, float]] | None:
    """Every match as ranked from the postings (``None``: they could not answer)."""
    with ws.read() as c:
        return search._Plan(c, parse_query(query), None)._from_postings(fetch)


def texts() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


def queries() -> st.SearchStrategy[str]:
    word = st.sampled_from(WORDS)
    item = st.one_of(
        word,
        word.map(lambda w: w[:3] + "*"),
        st.tuples(word, word).map(lambda p: f'"{p[0]} {p[1]}"'),
        word.map(lambda w: f"title:{w}"),
        word.map(lambda w: f"body:{w}"),
    )
    negated = st.one_of(word, st.tuples(word, word).map(lambda p: f'"{p[0]} {p[1]}"')).map(lambda w: "-" + w)
    return st.tuples(st.lists(item, min_size=1, max_size=3), st.lists(negated, max_size=2)).map(
        lambda q: " ".join([*q[0], *q[1]])
    )


@pytest.fixture
def fresh_app() -> Iterator[App]:
    """One workspace for all of a test's examples: notes pile up, so later examples rank
    more of them."""
    with tempfile.TemporaryDirectory() as home:
        a = open_app(load_settings({"NOTELOOM_HOME": str(Path(home) / "h")}), load_entry_points=False)
        try:
            yield a
        finally:
            a.close()


writes = st.lists(
    st.tuples(st.sampled_from(["create", "update", "trash", "restore", "purge"]), st.integers(0, 50), texts(), texts()),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.lists(st.tuples(texts(), texts()), min_size=1, max_size=25),
    asked=st.lists(queries(), min_size=1, max_size=4),
    changes=writes,
)
def test_kept_postings_rank_as_fts5_does_before_and_after_writes(
    fresh_app: App, notes: list[tuple[str, str]], asked: list[str], changes: list[tuple[str, int, str, str]]
) -> None:
    ws = fresh_app.workspace
    postings.clear()
    ids = [ws.create_note(title, body).id for title, body in notes]
    trashed: set[str] = set()
    for q in asked:
        assert kept_ranking(ws, q) == fts5_ranking(ws, q), q
    for kind, k, title, body in changes:
        note_id = ids[k % len(ids)]
        if kind == "create":
            ids.append(ws.create_note(title, body).id)
        elif kind == "update" and note_id not in trashed:
            ws.update_note(note_id, title=title, body=body)
        elif kind == "trash" and note_id not in trashed:
            ws.delete_note(note_id)
            trashed.add(note_id)
        elif kind == "restore" and note_id in trashed:
            ws.restore(note_id)
            trashed.discard(note_id)
        elif kind == "purge" and note_id in trashed:
            ws.purge(note_id)
            trashed.discard(note_id)
            ids.remove(note_id)
            if not ids:
                ids.append(ws.create_note(title, body).id)
    for q in asked:  # the postings kept are brought forward (read again after a purge)
        ranked = kept_ranking(ws, q)
        assert ranked == fts5_ranking(ws, q) or (ranked is None and kept_ranking(ws, q) == fts5_ranking(ws, q)), q


def test_search_notes_returns_the_same_page_with_postings_as_without(ws: Workspace) -> None:
    for i in range(60):
        ws.create_note(f"note {i} {WORDS[i % 10]}", " ".join(WORDS[(i * j) % 10] for j in range(i % 13 + 1)))
    for q in ["apple", "apple pear", '"banana cherry"', "mel* -plum", "title:kiwi lemon", "pear -apple -kiwi"]:
        for limit, offset in [(5, 0), (10, 3), (20, 0)]:
            postings.enabled = True
            search._rankings.clear()
            kept = search_notes(ws, q, limit=limit, offset=offset)
            postings.enabled = False
            search._rankings.clear()
            assert kept == search_notes(ws, q, limit=limit, offset=offset), q


def test_a_kept_posting_is_not_read_again_and_a_write_reads_only_the_changed_notes(ws: Workspace) -> None:
    ids = [ws.create_note(f"n{i}", "apple banana " * (i % 4 + 1)).id for i in range(40)]
    assert kept_ranking(ws, "apple banana") == fts5_ranking(ws, "apple banana")
    read = postings.read_rows
    assert read == 80  # each phrase read once, every match
    assert kept_ranking(ws, "banana apple") is not None
    assert kept_ranking(ws, "apple -banana") == []
    assert postings.read_rows == read  # another combination of the same phrases reads nothing
    scored = postings.scored_rows
    ws.update_note(ids[3], body="apple only")
    ws.delete_note(ids[5])
    assert kept_ranking(ws, "apple banana") == fts5_ranking(ws, "apple banana")
    # Only the two changed notes were read again, for each phrase (apple matches one now).
    assert postings.read_rows - read == 1
    assert postings.scored_rows - scored == 38


def test_many_changes_or_a_purge_read_the_postings_again(ws: Workspace) -> None:
    ids = [ws.create_note(f"n{i}", "apple pear").id for i in range(10)]
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    read = postings.read_rows
    ws.delete_note(ids[0])
    ws.purge(ids[0])
    assert kept_ranking(ws, "apple") is None  # FTS5 ranks this one
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    assert postings.read_rows - read == 9  # read again whole
    old, postings.REFRESH_LIMIT = postings.REFRESH_LIMIT, 2
    try:
        for i in range(1, 5):
            ws.update_note(ids[i], body="apple apple")
        assert kept_ranking(ws, "apple") is None
        assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    finally:
        postings.REFRESH_LIMIT = old


def test_write_transactions_and_any_queries_are_ranked_by_fts5(ws: Workspace) -> None:
    ws.create_note("a", "apple pear")
    with ws.write() as c:
        assert search._Plan(c, parse_query("apple"), None)._best(10)
    assert postings.read_rows == 0
    search_notes(ws, "any:1 apple pear")
    assert postings.read_rows == 0
    postings.enabled = False
    assert kept_ranking(ws, "apple") is None


def test_a_change_to_the_index_the_feed_did_not_carry_is_noticed(ws: Workspace) -> None:
    ids = [ws.create_note(f"n{i}", "apple pear").id for i in range(6)]
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    with ws.write() as c:  # a fed write, and a row put in the index behind the feed's back
        c.exec_driver_sql("INSERT INTO notes_fts(rowid, title, body) VALUES (9999, 'apple', 'apple apple')")
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    ws.update_note(ids[0], body="apple")
    with ws.write() as c:
        c.exec_driver_sql("INSERT INTO notes_fts(rowid, title, body) VALUES (9998, 'apple', 'pear')")
    assert kept_ranking(ws, "apple") is None  # the lengths no longer add up: read again
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")


def test_an_empty_index_and_an_emptied_one_rank_nothing(ws: Workspace) -> None:
    assert search_notes(ws, "apple") == []
    note = ws.create_note("a", "apple")
    assert kept_ranking(ws, "apple") == fts5_ranking(ws, "apple")
    ws.delete_note(note.id)
    assert kept_ranking(ws, "apple") in (None, [])
    assert search_notes(ws, "apple") == []


def test_while_serving_a_missing_posting_is_read_in_the_background_and_fts5_ranks_meanwhile(
    ws: Workspace,
) -> None:
    for i in range(30):
        ws.create_note(f"n{i}", "apple pear " * (i % 5 + 1))
    with serving():
        assert kept_ranking(ws, "apple pear") is None  # FTS5 ranks this one
        first = search_notes(ws, "pear apple", limit=5)
        assert postings.settle(timeout=30)
        assert postings.read_rows == 60  # both phrases, read once, off the searches' path
        assert kept_ranking(ws, "apple pear") == fts5_ranking(ws, "apple pear")
        search._rankings.clear()
        assert search_notes(ws, "pear apple", limit=5) == first
    assert not postings.background
