"""Revisions stored as deltas: every version comes back exactly, history stays small, the
chain holds under concurrent writers, and revisions from before migration 0007 stay valid."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from noteloom import db
from noteloom.cli import cli
from noteloom.errors import NotFound, StorageError
from noteloom.workspace import Workspace, delta, revisions

# Text with what breaks naive diffs: CRLF and lone CR, lines that repeat, combining marks,
# CJK, astral characters (two UTF-16 units), and the empty string.
_ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r", "é", "e\u0301", "中", "😀", "- [ ] x\n", "\n\n"])
_TEXT = st.lists(_ALPHABET, max_size=30).map("".join)


@st.composite
def _edit(draw: st.DrawFn) -> tuple[str, int, int, str]:
    """One edit, as (kind, at, length, text); positions are fractions resolved later."""
    kind = draw(st.sampled_from(["append", "insert", "delete", "replace", "body", "title", "restore", "same"]))
    return kind, draw(st.integers(0, 1000)), draw(st.integers(0, 40)), draw(_TEXT)


def _apply(kind: str, at: int, size: int, text: str, body: str) -> str:
    pos = at * len(body) // 1000
    if kind == "append":
        return body + text
    if kind == "insert":
        return body[:pos] + text + body[pos:]
    if kind == "delete":
        return body[:pos] + body[pos + size :]
    if kind == "replace":
        return body[:pos] + text + body[pos + size :]
    return text  # "body": the whole text replaced


@contextmanager
def _max_chain(n: int) -> Iterator[None]:
    saved = revisions.MAX_CHAIN
    revisions.MAX_CHAIN = n
    try:
        yield
    finally:
        revisions.MAX_CHAIN = saved


def _check_history(ws: Workspace, note_id: str, versions: list[tuple[str, str]]) -> None:
    """Every earlier version in ``versions`` (oldest first; the last is current) comes back
    exactly, from the listing and from each revision on its own."""
    note = ws.get_note(note_id)
    assert (note.title, note.body) == versions[-1]
    listed = ws.list_revisions(note_id)
    expected = versions[-2::-1]
    assert [(r.title, r.chars) for r in listed] == [(t, len(b)) for t, b in expected]
    assert [(r.title, r.body) for r in listed] == expected
    assert [ws.revision_text(r.id) for r in listed] == expected


@pytest.mark.postgres
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_TEXT, edits=st.lists(_edit(), max_size=25), chain=st.sampled_from([1000, 1, 2, 3]))
def test_every_revision_rebuilds_exactly_after_any_edits_and_restores(
    any_ws: Workspace, first: str, edits: list[tuple[str, int, int, str]], chain: int
) -> None:
    with _max_chain(chain):
        note = any_ws.create_note("t", first)
        versions = [("t", first)]
        for kind, at, size, text in edits:
            title, body = versions[-1]
            if kind == "restore":
                listed = any_ws.list_revisions(note.id)
                if not listed:
                    continue
                back = listed[at * len(listed) // 1001]
                any_ws.restore_revision(back.id)
                new = (back.title, back.body)
            elif kind == "title":
                new = (text.strip(), body)
                any_ws.update_note(note.id, title=text)
            elif kind == "same":
                new = (title, body)
                any_ws.update_note(note.id, title=title, body=body)
            else:
                new = (title, _apply(kind, at, size, text, body))
                any_ws.update_note(note.id, body=new[1])
            if new != versions[-1]:
                versions.append(new)
        _check_history(any_ws, note.id, versions)


@given(source=_TEXT, target=_TEXT, middle=_TEXT)
def test_a_script_turns_its_source_into_its_target_and_chains_compose(source: str, target: str, middle: str) -> None:
    ops = delta.diff(source, target)
    n, decoded = delta.decode(delta.encode(len(source), ops))
    assert n == len(source) and delta.apply(source, decoded) == target
    # Composed through an intermediate text, as a rebuild does.
    assert delta.rebuild(middle, [(len(middle), delta.diff(middle, source)), (len(source), ops)]) == target


@given(first=_TEXT, edits=st.lists(_edit(), min_size=10, max_size=60))
def test_a_long_chain_of_scattered_edits_rebuilds_every_version(first: str, edits: list[tuple[str, int, int, str]]) -> None:
    # Enough scripts for a rebuild to split its text into many pieces and join them midway.
    versions = [first * 8]
    for kind, at, size, text in edits:
        versions.append(_apply(kind if kind in ("append", "insert", "delete", "replace") else "insert", at, size, text,
                               versions[-1]))
    scripts = [(len(b), delta.diff(b, a)) for a, b in pairwise(versions)]
    for k in range(len(versions)):
        assert delta.rebuild(versions[-1], scripts[k:][::-1]) == versions[k]


def test_large_middles_are_anchored_on_unique_lines_and_stay_small() -> None:
    body = "".join(f"line {i} of a long note\n" for i in range(20_000))
    both_ends = "new first line\n" + body + "new last line\n"
    far_apart = body.replace("line 5 of", "LINE 5 of").replace("line 19000 of", "line 19,000 of")
    for new in (both_ends, far_apart):
        ops = delta.diff(new, body)
        assert delta.apply(new, ops) == body
        assert len(delta.encode(len(new), ops)) < 200
    appended = body + "one more line\n"
    assert delta.diff(appended, body) == [(0, len(body))]


@pytest.mark.slow  # ~5 s: each save re-indexes the whole note for keyword search
def test_a_thousand_small_appends_store_less_than_twice_the_appended_text(ws: Workspace) -> None:
    note = ws.create_note("Journal", "# Journal\n")
    body, appended = note.body, 0
    with ws.write() as c:  # one transaction: the same rows, without 1,000 commits
        for i in range(1000):
            line = f"{i:04d} walked to the river, saw a heron, wrote this down.\n"
            body += line
            appended += len(line.encode())
            ws.update_note(note.id, body=body, conn=c)
    with ws.read() as c:
        r = db.revisions
        stored = c.execute(
            sa.select(
                sa.func.sum(
                    sa.func.coalesce(sa.func.length(sa.cast(r.c.title, sa.LargeBinary)), 0)
                    + sa.func.coalesce(sa.func.length(sa.cast(r.c.body, sa.LargeBinary)), 0)
                    + sa.func.coalesce(sa.func.length(sa.cast(r.c.delta, sa.LargeBinary)), 0)
                )
            ).where(r.c.note_id == note.id)
        ).scalar_one()
    assert stored <= 2 * appended
    listed = ws.list_revisions(note.id)
    assert len(listed) == 1000
    oldest, middle = listed[-1], listed[500]
    assert oldest.body == "# Journal\n"
    assert middle.body == "# Journal\n" + "".join(
        f"{i:04d} walked to the river, saw a heron, wrote this down.\n" for i in range(499)
    )


def test_a_long_chain_is_cut_by_a_full_snapshot(ws: Workspace) -> None:
    with _max_chain(5):
        note = ws.create_note("n", "start\n")
        for i in range(12):
            ws.update_note(note.id, body=ws.get_note(note.id).body + f"{i}\n")
    with ws.read() as c:
        kinds = c.execute(
            sa.select(db.revisions.c.delta.is_(None), db.revisions.c.chain_len)
            .where(db.revisions.c.note_id == note.id)
            .order_by(db.revisions.c.created_time)
        ).all()
    assert max(k.chain_len for k in kinds) <= 5
    assert sum(1 for k in kinds if k[0]) >= 2  # the first version (tiny) and at least one cut
    assert ws.list_revisions(note.id)[-1].body == "start\n"


@pytest.mark.postgres
def test_two_writers_of_one_note_keep_a_consistent_chain(any_ws: Workspace) -> None:
    note = any_ws.create_note("shared", "base\n")
    start = threading.Barrier(2, timeout=30)
    written: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            start.wait()
            for i in range(25):
                # Each write appends to whatever is current, read in the same transaction.
                with any_ws.write() as c:
                    body = any_ws.get_note(note.id, conn=c).body
                    new = any_ws.update_note(note.id, body=body + f"{name}{i}\n", conn=c).body
                with lock:
                    written.append(new)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    listed = any_ws.list_revisions(note.id)
    current = any_ws.get_note(note.id).body
    # Every committed version is in the history once, rebuilt exactly, none invented (a
    # revision made against a version the other writer had already replaced would show
    # that version twice and lose the other's).
    assert len(listed) == 50
    assert sorted([r.body for r in listed] + [current]) == sorted(["base\n", *written])


def test_a_listing_reads_no_text_and_a_damaged_history_says_so(ws: Workspace) -> None:
    note = ws.create_note("n", "one two three four five six seven")
    ws.update_note(note.id, body="one two three four five six seven eight")
    ws.update_note(note.id, body="one two three four five six seven eight nine")
    with ws.write() as c:  # changed behind noteloom's back
        c.execute(db.notes.update().where(db.notes.c.id == note.id).values(body="something else"))
    listed = ws.list_revisions(note.id)
    assert [r.chars for r in listed] == [39, 33]
    with pytest.raises(StorageError, match=f"revision {listed[0].id!r} of note {note.id!r} cannot be rebuilt"):
        _ = listed[0].body
    with pytest.raises(NotFound, match="no revision"):
        ws.revision_text("0" * 32)


def test_purging_a_note_deletes_its_whole_history(ws: Workspace) -> None:
    note = ws.create_note("n", "a")
    keep = ws.create_note("other", "x")
    for i in range(5):
        ws.update_note(note.id, body="a" * (i + 2))
        ws.update_note(keep.id, body="x" * (i + 2))
    ws.delete_note(note.id)
    ws.purge(note.id)
    with ws.read() as c:
        left = c.execute(sa.select(db.revisions.c.note_id).distinct()).scalars().all()
    assert left == [keep.id]
    assert [r.body for r in ws.list_revisions(keep.id)] == ["x" * n for n in (5, 4, 3, 2, 1)]


@pytest.mark.postgres
def test_revisions_from_before_0007_stay_valid_and_new_ones_chain_onto_them(
    database_url: str, tmp_path: Path
) -> None:
    engine = db.create_db_engine(database_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(sa.text("INSERT INTO notebooks (id, title, created_time, updated_time) VALUES (:b, 'B', 1, 1)"),
                     {"b": "b" * 32})
        conn.execute(
            sa.text("INSERT INTO notes (id, notebook_id, title, body, is_todo, source_url, created_time, updated_time)"
                    " VALUES (:n, :b, 'Now', 'third text', false, '', 1, 30)"),
            {"n": "a" * 32, "b": "b" * 32},
        )
        for i, (title, body) in enumerate([("First", "first text"), ("Second", "second text")]):
            conn.execute(
                sa.text("INSERT INTO revisions (id, note_id, title, body, version_time, created_time)"
                        " VALUES (:id, :n, :t, :body, :v, :c)"),
                {"id": f"{i}" * 32, "n": "a" * 32, "t": title, "body": body, "v": 10 * i + 1, "c": 10 * i + 10},
            )
    db.migrate(engine)
    ws = Workspace(engine, tmp_path)
    try:
        ws.update_note("a" * 32, body="third text, and a fourth")
        listed = ws.list_revisions("a" * 32)
        assert [(r.title, r.chars, r.body) for r in listed] == [
            ("Now", 10, "third text"), ("Second", 11, "second text"), ("First", 10, "first text"),
        ]
        assert ws.restore_revision("0" * 32).body == "first text"
        assert [r.body for r in ws.list_revisions("a" * 32)][:2] == ["third text, and a fourth", "third text"]
    finally:
        engine.dispose()


def test_history_diff_shows_what_a_revision_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, result.output
        return result.output

    run("init")
    note_id = run("notes", "add", "Plan", "--body", "buy rope\nbuy tent").strip()
    run("notes", "edit", note_id, "--body", "buy rope\nbuy a bigger tent\nbook the train")
    run("notes", "edit", note_id, "--title", "Trip")
    newest, older = (r["id"] for r in json.loads(run("notes", "history", note_id, "--json")))
    first = run("notes", "history", note_id, "--diff", older)
    assert f"--- revision {older}\n+++ revision {newest}\n" in first
    assert "-buy tent\n\\ No newline at end of file\n+buy a bigger tent\n+book the train\n" in first
    last = run("notes", "history", note_id, "--diff", newest)
    assert last.startswith("title: 'Plan' -> 'Trip'\n") and "+++ current version" not in last  # same body
    assert "has no revision" in run("notes", "history", note_id, "--diff", "f" * 32, code=1)

