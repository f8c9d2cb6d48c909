"""Semantic search at the surfaces: the tools, hybrid ranking, settings, CLI and API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.default_plugins.embedders import register_embedders
from noteloom.errors import ConfigError
from noteloom.semantic import NoteHit, SemanticIndex, fuse, open_index, query_shape
from noteloom.tools import SCOPE_KEY
from noteloom.web.app import create_web_app
from semantic_support import local_model
from test_tools_workspace import call, payload, tool_error

BASIL = "# Basil\n\n## Watering\n\nBasil wilts when the soil dries out; water it every morning in summer."
PESTO = "Pesto: blend basil, more basil, pine nuts and parmesan. Stop the blender before the basil wilts."
TRAIN = "We took the train from Porto to Lisbon and stayed in a hotel by the river."


def with_index(app: App) -> SemanticIndex:
    """Give ``app`` a semantic index on the model loaded once per test process."""
    index = SemanticIndex(app.engine, local_model())
    app.services["semantic"] = index
    return index


# -- search_notes gains a mode ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_search_notes_stays_keyword_until_an_index_exists_then_finds_by_meaning(app: App) -> None:
    ws = app.workspace
    ws.create_note("Balcony herbs", BASIL)
    ws.create_note("Pesto", PESTO)
    ws.create_note("Lisbon", TRAIN)
    index = with_index(app)
    query = "how do I stop my herbs drooping"
    assert (await payload(app, "search_notes", {"query": query}))["results"] == []  # AND of words: none
    index.sync()
    found = (await payload(app, "search_notes", {"query": query}))["results"]
    assert found[0]["title"] == "Balcony herbs"
    assert found[0]["section_heading"] in {"Basil", "Watering"}
    assert len({r["id"] for r in found}) == len(found), "one result per note"
    keyword = (await payload(app, "search_notes", {"query": query, "mode": "keyword"}))["results"]
    assert keyword == []
    semantic = (await payload(app, "search_notes", {"query": "rail trip", "mode": "semantic", "limit": 1}))
    assert [r["title"] for r in semantic["results"]] == ["Lisbon"]


@pytest.mark.anyio
async def test_a_query_keyword_syntax_rejects_is_the_same_error_in_hybrid(app: App) -> None:
    app.workspace.create_note("Lisbon", TRAIN)
    with_index(app).sync()
    broken = 'trip by "train to lisbon'
    hybrid = await tool_error(app, "search_notes", {"query": broken})
    assert "never closed" in hybrid
    assert hybrid == await tool_error(app, "search_notes", {"query": broken, "mode": "keyword"})


@pytest.mark.anyio
async def test_semantic_modes_without_an_index_say_to_use_keyword(tmp_path: Path) -> None:
    home = tmp_path / "off"
    home.mkdir()
    (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        assert "semantic" not in app.services
        assert "semantic_search_notes" not in {t.name for t in app.registry.all()}
        message = await tool_error(app, "search_notes", {"query": "x", "mode": "semantic"})
        assert "mode 'keyword'" in message
    finally:
        app.close()


# -- semantic_search_notes ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_semantic_search_returns_ranked_chunks_with_their_sections(app: App) -> None:
    ws = app.workspace
    ws.create_note("Balcony herbs", BASIL)
    ws.create_note("Lisbon", TRAIN)
    with_index(app).sync()
    out = await payload(app, "semantic_search_notes", {"query": "plants drooping in the heat", "limit": 5})
    top = out["results"][0]
    assert top["title"] == "Balcony herbs" and top["section"] in {"1", "1.1"}
    assert 0 < top["score"] <= 1 and "wilts" in top["snippet"]
    assert out["pending_notes"] == 0 and "notice" not in out
    section = await payload(app, "read_note", {"id": top["id"], "section": top["section"]})
    assert "wilts" in section["body"]


@pytest.mark.anyio
async def test_semantic_search_says_how_many_notes_wait_for_the_indexer(app: App) -> None:
    app.workspace.create_note("Balcony herbs", BASIL)
    with_index(app).sync()
    app.workspace.create_note("Lisbon", TRAIN)
    out = await payload(app, "semantic_search_notes", {"query": "rail trip"})
    assert out["pending_notes"] == 1 and "1 changed notes" in out["notice"]


@pytest.mark.anyio
async def test_semantic_search_keeps_to_the_notebook_scope_and_the_notebook_filter(app: App) -> None:
    ws = app.workspace
    work = ws.create_notebook("Work")
    trips = ws.create_notebook("Trips", parent_id=work.id)
    home = ws.create_notebook("Home")
    ws.create_note("Lisbon", TRAIN, trips.id)
    ws.create_note("Balcony herbs", BASIL, home.id)
    with_index(app).sync()
    found = await payload(app, "semantic_search_notes", {"query": "train journey", "notebook_id": "Work", "relevance": "loose"})
    assert {r["title"] for r in found["results"]} == {"Lisbon"}, "sub-notebooks are included"
    app.workspace.set_setting(SCOPE_KEY, ["Home"])
    scoped = await payload(app, "semantic_search_notes", {"query": "train journey", "relevance": "loose"})
    assert "Lisbon" not in {r["title"] for r in scoped["results"]}
    assert "does not exist" in await tool_error(app, "semantic_search_notes", {"query": "x", "notebook_id": "Work"})


@pytest.mark.anyio
async def test_bad_arguments_are_named(app: App) -> None:
    with_index(app)
    assert "relevance" in await tool_error(app, "semantic_search_notes", {"query": "x", "relevance": "fuzzy"})
    result = await call(app, "semantic_search_notes", {"query": "nothing indexed yet"})
    assert result.payload["results"] == []


# -- hybrid ranking -----------------------------------------------------------------------------------


def hit(nid: str, by: str) -> NoteHit:
    return NoteHit(nid, nid, "nb", 0, "", None, None, 1.0, by)


def test_query_shape_tells_keyword_syntax_from_descriptions() -> None:
    for q in ['"exact phrase"', "tag:work", "INV-77310", "Okonkwo", "basil", "a" * 32, "pyth*", "GIT-31 reset"]:
        assert query_shape(q) == "keyword", q
    for q in ["how do I stop my basil wilting", "strange noise when I slow the car down"]:
        assert query_shape(q) == "natural", q


def test_a_description_nothing_matches_word_for_word_is_ranked_by_meaning() -> None:
    semantic = [hit("herbs", "semantic"), hit("pesto", "semantic"), hit("other", "semantic")]
    fused = fuse("my herbs keep drooping by noon", [], semantic)
    assert [h.id for h in fused] == ["herbs", "pesto", "other"]
    assert all(h.found_by == "semantic" for h in fused)


def test_a_note_matching_every_word_of_a_description_is_lifted_by_both_rankings() -> None:
    semantic = [hit("herbs", "semantic"), hit("other", "semantic"), hit("pesto", "semantic")]
    fused = fuse("stop the blender before the basil wilts", [hit("pesto", "keyword")], semantic)
    assert fused[0].id == "pesto" and fused[0].found_by == "both"
    assert [h.id for h in fused[1:]] == ["herbs", "other"]


def test_an_identifier_is_led_by_keyword_search() -> None:
    fused = fuse("INV-77310", [hit("invoice", "keyword")], [hit("a", "semantic"), hit("invoice", "semantic")])
    assert [h.id for h in fused[:2]] == ["invoice", "a"]


# -- settings -------------------------------------------------------------------------------------------


def factories() -> dict[str, Any]:
    out: dict[str, Any] = {}
    register_embedders(register=out.__setitem__)
    return out


def test_semantic_search_is_on_by_default_with_the_local_model_and_off_on_request(app: App) -> None:
    default = open_index(app.engine, {}, factories(), {})
    assert default is not None and default.model == "local:all-MiniLM-L6-v2:onnx-int8"
    assert open_index(app.engine, {"enabled": False}, factories(), {}) is None
    chosen = open_index(app.engine, {"model": "local:all-MiniLM-L6-v2", "quantize": False}, factories(), {})
    assert chosen is not None and chosen.model == "local:all-MiniLM-L6-v2"
    remote = open_index(app.engine, {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "dimensions": 8}, factories(), {})
    assert remote is not None and remote.model == "openai:m"


def test_an_unknown_embedder_type_or_bad_threshold_is_a_config_error(app: App) -> None:
    with pytest.raises(ConfigError, match="no plugin provides"):
        open_index(app.engine, {"type": "magic"}, factories(), {})
    with pytest.raises(ConfigError, match="thresholds"):
        open_index(app.engine, {"thresholds": {"strict": "high"}}, factories(), {})


# -- CLI and API ---------------------------------------------------------------------------------------


def test_noteloom_index_builds_and_index_status_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The same model the other tests use, in fp32: no second copy to load in this process.
    (home / "noteloom.toml").write_text('[embeddings]\nmodel = "local:all-MiniLM-L6-v2"\nquantize = false\n')
    model = local_model()._load()  # loaded once, before _build is replaced (else it would call itself)
    monkeypatch.setattr("noteloom.embedders.LocalEmbedder._build", lambda self: model)
    runner = CliRunner()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    app.workspace.create_note("Lisbon", TRAIN)
    app.close()
    before = runner.invoke(cli, ["index", "status", "--json", "--home", str(home)])
    assert before.exit_code == 0, before.output
    assert json.loads(before.output)["pending_notes"] == 1
    built = runner.invoke(cli, ["index", "--home", str(home)])
    assert built.exit_code == 0, built.output
    assert "1 notes, 1 chunks" in built.output
    after = runner.invoke(cli, ["index", "status", "--home", str(home)])
    assert "state:       idle" in after.output and "384" in after.output
    assert "vectors:     sqlite-vec" in after.output
    again = runner.invoke(cli, ["index", "--rebuild", "--home", str(home)])
    assert again.exit_code == 0 and "indexed 1 notes" in again.output


def test_noteloom_index_without_semantic_search_says_how_to_turn_it_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n")
    result = CliRunner().invoke(cli, ["index", "--home", str(home)])
    assert result.exit_code == 1 and "embeddings" in result.output


@pytest.mark.anyio
async def test_the_api_shows_the_index_status(app: App) -> None:
    app.workspace.create_note("Lisbon", TRAIN)
    token = access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        r = await client.get("/api/v1/index/status", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
        body = r.json()
        assert body["enabled"] is True and body["state"] == "not built" and body["pending_notes"] == 1
        assert (await client.get("/api/v1/index/status")).status_code == 401

