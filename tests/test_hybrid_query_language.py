"""One query language: hybrid and semantic search obey every filter and exclusion keyword
search does, on SQLite and on PostgreSQL (pgvector), with the real local model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.errors import QueryError
from noteloom.search import search_notes
from noteloom.semantic import SemanticIndex, hybrid_search
from semantic_support import local_model
from test_tools_workspace import payload, tool_error

MODES = ("keyword", "semantic", "hybrid")

NOTES: dict[str, tuple[str, str, bool]] = {
    # title: (notebook, body, is_todo)
    "Winter camping": ("Trips", "# Cold nights\n\nThe tent gets cold at night, so we light the stove outside the tent.", False),
    "Summer camping": ("Trips", "# Shade\n\nPitch the tent in the shade and open both doors of the tent.", False),
    "Camp kitchen": ("Trips", "The gas stove boils water for pasta in ten minutes.", False),
    "Buy tent pegs": ("Trips", "Twelve aluminium pegs for the tent, before Friday.", True),
    "Balcony herbs": ("Garden", "# Basil\n\n## Watering\n\nBasil wilts when the soil dries out; water it every morning.", False),
    "Tomatoes": ("Garden", "Tie the tomato plants to stakes and pinch out the side shoots.", False),
    "Lisbon": ("Travel", "We took the train from Porto to Lisbon and stayed in a hotel by the river.", False),
}


@pytest.fixture(scope="module")
def _model() -> Any:
    return local_model()


@pytest.fixture
def corpus(any_app: App, _model: Any) -> Iterator[tuple[App, SemanticIndex]]:
    ws = any_app.workspace
    books = {name: ws.create_notebook(name).id for name in ("Trips", "Garden", "Travel")}
    for title, (book, body, todo) in NOTES.items():
        ws.create_note(title, body, books[book], is_todo=todo)
    index = SemanticIndex(any_app.engine, _model)
    index.sync()
    any_app.services["semantic"] = index
    yield any_app, index


def titles(app: App, index: SemanticIndex, query: str, mode: str, **kw: Any) -> list[str]:
    return [h.title for h in hybrid_search(app.workspace, index, query, mode=mode, **kw).hits]  # type: ignore[arg-type]


def test_an_exclusion_excludes_in_every_mode(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    for mode in MODES:
        found = titles(app, index, "tent -stove", mode)
        assert "Summer camping" in found, mode
        # Both notes that mention a stove are out, also the one only close in meaning.
        assert not {"Winter camping", "Camp kitchen"} & set(found), (mode, found)


def test_a_notebook_filter_restricts_the_semantic_arm(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    for mode in MODES:
        found = titles(app, index, "notebook:Garden plants drying out", mode)
        assert set(found) <= {"Balcony herbs", "Tomatoes"}, (mode, found)
        if mode != "keyword":  # no Garden note has these words: found by meaning alone
            assert found[0] == "Balcony herbs", (mode, found)
        # A description of a note in another notebook finds it nowhere.
        assert "Lisbon" not in titles(app, index, "notebook:Garden a rail journey to Lisbon", mode), mode


def test_a_type_filter_restricts_the_semantic_arm(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    for mode in MODES:
        assert titles(app, index, "type:todo tent", mode) == ["Buy tent pegs"], mode
        assert "Buy tent pegs" not in titles(app, index, "type:note tent", mode), mode
        semantic = titles(app, index, "type:todo camping equipment to purchase", mode)
        assert set(semantic) <= {"Buy tent pegs"}, (mode, semantic)


def test_the_notebook_scope_of_a_call_bounds_the_semantic_arm(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    garden = {b.id for b in app.workspace.list_notebooks() if b.title == "Garden"}
    for mode in MODES:
        found = titles(app, index, "a rail journey to Lisbon", mode, notebook_ids=garden)
        assert "Lisbon" not in found, (mode, found)


def test_a_word_in_no_note_finds_nothing_in_any_mode(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    for query in ("zqxvorp", '"zqxvorp blorft"'):
        for mode in MODES:
            assert titles(app, index, query, mode) == [], (query, mode)


def test_an_unclosed_quote_is_the_same_clear_error_in_every_mode(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    messages = set()
    for mode in MODES:
        with pytest.raises(QueryError) as info:
            hybrid_search(app.workspace, index, '"unclosed', mode=mode)  # type: ignore[arg-type]
        messages.add(str(info.value))
    assert len(messages) == 1 and "never closed" in messages.pop()


def test_a_query_of_filters_only_is_the_keyword_result_without_sections(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    keyword = [h.id for h in search_notes(app.workspace, "notebook:Garden")]
    assert len(keyword) == 2
    for query in ("notebook:Garden", "notebook:Garden -tomato"):
        expected = [h.id for h in search_notes(app.workspace, query)]
        for mode in MODES:
            result = hybrid_search(app.workspace, index, query, mode=mode)  # type: ignore[arg-type]
            assert [h.id for h in result.hits] == expected, (query, mode)
            assert all(h.section is None and h.section_heading is None for h in result.hits)


def test_hybrid_keeps_the_keyword_ranking_for_keyword_syntax(corpus: tuple[App, SemanticIndex]) -> None:
    app, index = corpus
    for query in ("tent", '"the tent"', "tent*", "title:camping", "stove -title:kitchen"):
        keyword = titles(app, index, query, "keyword")
        assert keyword, query
        assert titles(app, index, query, "hybrid")[: len(keyword)] == keyword, query


@pytest.mark.anyio
async def test_the_search_tools_speak_the_query_language(corpus: tuple[App, SemanticIndex]) -> None:
    app, _ = corpus
    for mode in MODES:
        out = await payload(app, "search_notes", {"query": "tent -stove", "mode": mode})
        assert "Winter camping" not in {r["title"] for r in out["results"]}, mode
        filters_only = await payload(app, "search_notes", {"query": "notebook:Garden", "mode": mode})
        assert {r["title"] for r in filters_only["results"]} == {"Balcony herbs", "Tomatoes"}
        assert all("section" not in r for r in filters_only["results"]), mode
    errors = {await tool_error(app, "search_notes", {"query": '"unclosed', "mode": m}) for m in MODES}
    errors.add(await tool_error(app, "semantic_search_notes", {"query": '"unclosed'}))
    assert len(errors) == 1, errors
    sem = await payload(app, "semantic_search_notes", {"query": "notebook:Garden plants drying out", "relevance": "loose"})
    assert sem["results"] and {r["notebook"] for r in sem["results"]} == {"Garden"}
    assert not (await payload(app, "semantic_search_notes", {"query": "zqxvorp"}))["results"]
    assert "only filters" in await tool_error(app, "semantic_search_notes", {"query": "type:todo"})


# -- the command line ----------------------------------------------------------------------------


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _model: Any) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    # Full precision, the model the tests load once (the default is its int8 variant).
    (home / "noteloom.toml").write_text("[embeddings]\nquantize = false\n", encoding="utf-8")
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        ws.create_note("Summer camping", NOTES["Summer camping"][1], tags=["trips"])
        ws.create_note("Camp kitchen", NOTES["Camp kitchen"][1])
        SemanticIndex(app.engine, _model).sync()
    finally:
        app.close()
    return home


def search(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(cli, ["notes", "search", *args])
    if ok:
        assert result.exit_code == 0, f"{args}: {result.output}"
    else:
        assert result.exit_code != 0, f"{args} should have failed: {result.output}"
    return result


def test_the_cli_takes_a_query_that_starts_with_a_dash(cli_home: Path) -> None:
    untagged = json.loads(search("-tag:*", "--json").stdout)
    assert [h["title"] for h in untagged] == ["Camp kitchen"]
    # Options still work on either side of the query, and -- ends them.
    assert [h["title"] for h in json.loads(search("--json", "tent", "-stove").stdout)] == ["Summer camping"]
    assert [h["title"] for h in json.loads(search("tent", "--limit", "1", "--json").stdout)] == ["Summer camping"]
    # After --, "--limit" is query text: notes without the word "limit" (both).
    assert len(json.loads(search("--json", "--", "--limit").stdout)) == 2
    listed = search("tent", "--", "--json").stdout
    assert listed.startswith(tuple("0123456789abcdef")) and "Summer camping" in listed, "--json was query text"


def test_the_cli_searches_in_every_mode(cli_home: Path) -> None:
    for mode in MODES:
        found = json.loads(search("--mode", mode, "--json", "tent", "-stove").stdout)
        assert [h["title"] for h in found] == ["Summer camping"], mode
    meaning = json.loads(search("--mode", "semantic", "--json", "boiling water for dinner").stdout)
    assert meaning[0]["title"] == "Camp kitchen"
    assert "--mode takes keyword, semantic or hybrid" in search("--mode", "fuzzy", "x", ok=False).output
    unclosed = search("--mode", "hybrid", '"unclosed', ok=False)
    assert "never closed" in unclosed.output and "Traceback" not in unclosed.output


# -- the vector search within an allowed set -----------------------------------------------------


def test_the_vector_search_within_an_allowed_set_is_exact(any_app: App) -> None:
    import numpy as np
    import sqlalchemy as sa

    from noteloom.semantic.index import _candidates
    from noteloom.vectors import chunks as chunk_table
    from noteloom.vectors import index_state, vector_store

    ws = any_app.workspace
    note_ids = [ws.create_note(f"n{i}", "x").id for i in range(50)]
    store, dims, n = vector_store(any_app.engine), 16, 2000
    rng = np.random.default_rng(7)
    with ws.write() as c:
        store.create(c, dims)
        c.execute(index_state.insert(), {"id": 1, "model": "m", "dimensions": dims, "chunker": "k", "feed_cursor": 0,
                                         "backfill_seq": None, "created_time": 0, "updated_time": 1})
        c.execute(chunk_table.insert(), [
            {"note_id": note_ids[i % 50], "ordinal": i, "section_path": "0", "heading": "", "heading_path": "[]",
             "start_char": 0, "end_char": 1, "content_hash": f"{i:032x}", "text": "x"} for i in range(n)
        ])
        ids = list(c.execute(sa.select(chunk_table.c.id).order_by(chunk_table.c.id)).scalars())
        vecs = rng.standard_normal((n, dims)).astype(np.float32)
        store.add(c, list(zip(ids, vecs.tolist(), strict=True)))
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    note_of = {cid: note_ids[i % 50] for i, cid in enumerate(ids)}
    query = rng.standard_normal(dims).astype(np.float32)
    scores = unit @ (query / np.linalg.norm(query))
    # SQLite: 1 note of 50 (rows picked out), 25 and 49 (the product masked).
    for allowed in (note_ids[:1], note_ids[:25], note_ids[1:]):
        select = sa.select(db_notes_id()).where(db_notes_id().in_(allowed))
        want = sorted((i for i, cid in enumerate(ids) if note_of[cid] in allowed), key=lambda i: -scores[i])[:30]
        with ws.read() as c:
            got = store.nearest(c, query.tolist(), 30, _candidates(None, None, select))
        # (On PostgreSQL sets this small are ranked exactly, without the HNSW index.)
        assert [cid for cid, _ in got] == [ids[i] for i in want], len(allowed)
        assert all(abs(s - float(scores[ids.index(cid)])) < 1e-4 for cid, s in got)


def db_notes_id() -> Any:
    from noteloom import db

    return db.notes.c.id
