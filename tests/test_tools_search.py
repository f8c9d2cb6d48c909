"""search_notes as a tool: hits carry a section read_note resolves, the scope holds, errors are readable."""

from __future__ import annotations

import random
from typing import Any

import pytest

from noteloom.app import App
from noteloom.tools import SCOPE_KEY
from test_tools_workspace import call, payload, tool_error

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


def random_markdown(rng: random.Random) -> str:
    """A body with nested ATX and setext headings, words scattered in every section."""
    lines: list[str] = []
    for _ in range(rng.randint(0, 3)):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))))
    for _ in range(rng.randint(0, 8)):
        title = f"{rng.choice(WORDS).title()} part"
        if rng.random() < 0.2:
            lines += ["", title, "=" if rng.random() < 0.5 else "-" * 3, ""]
        else:
            lines.append(f"{'#' * rng.randint(1, 4)} {title}")
        for _ in range(rng.randint(0, 3)):
            lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10))))
    return "\n".join(lines)


@pytest.mark.anyio
async def test_every_hit_section_resolves_in_read_note_and_holds_the_word(app: App) -> None:
    rng = random.Random(7)
    for i in range(30):
        app.workspace.create_note(f"note {i}", random_markdown(rng))
    checked = 0
    for word in WORDS[::2]:
        out = await payload(app, "search_notes", {"query": word, "limit": 100})
        for hit in out["results"]:
            assert "section" in hit, hit
            section = await payload(app, "read_note", {"id": hit["id"], "section": hit["section"], "max_chars": 0})
            assert section["section"]["path"] == hit["section"]
            assert section["section"]["heading"] == hit["section_heading"]
            assert word in section["body"].lower()
            checked += 1
    assert checked > 50


@pytest.mark.anyio
async def test_a_filter_only_query_has_no_section(app: App) -> None:
    app.workspace.create_note("Changelog", "# v1\nfirst release")
    out = await payload(app, "search_notes", {"query": "title:Changelog"})
    assert len(out["results"]) == 1 and "section" not in out["results"][0]
    body = await payload(app, "search_notes", {"query": "release"})
    assert body["results"][0]["section"] == "1" and body["results"][0]["section_heading"] == "v1"


@pytest.mark.anyio
async def test_a_malformed_query_is_a_tool_error_the_model_can_fix(app: App) -> None:
    message = await tool_error(app, "search_notes", {"query": '"never closed'})
    assert "quote" in message


@pytest.mark.anyio
async def test_search_pages_with_has_more_and_next_offset(app: App) -> None:
    for i in range(5):
        app.workspace.create_note(f"pumpkin {i}", "pumpkin soup")
    first = await payload(app, "search_notes", {"query": "pumpkin", "limit": 3})
    assert len(first["results"]) == 3 and first["has_more"] is True and first["next_offset"] == 3
    rest = await payload(app, "search_notes", {"query": "pumpkin", "limit": 3, "offset": 3})
    assert len(rest["results"]) == 2 and rest["has_more"] is False and "next_offset" not in rest
    assert {r["id"] for r in first["results"]}.isdisjoint({r["id"] for r in rest["results"]})


@pytest.mark.anyio
async def test_search_never_returns_notes_outside_the_scope(app: App) -> None:
    ws = app.workspace
    work = ws.create_notebook("Work")
    home = ws.create_notebook("Home")
    ws.create_note("work zebra", "zebra stripes", work.id)
    ws.create_note("home zebra", "zebra at home", home.id)
    ws.set_setting(SCOPE_KEY, ["Work"])
    for query in ("zebra", "notebook:Home zebra", "notebook:Home", "title:home"):
        out = await payload(app, "search_notes", {"query": query})
        assert all(r["notebook_id"] == work.id for r in out["results"]), query
    assert [r["title"] for r in (await payload(app, "search_notes", {"query": "zebra"}))["results"]] == ["work zebra"]


@pytest.mark.anyio
async def test_hits_from_clipped_notes_are_flagged_untrusted(app: App) -> None:
    app.workspace.create_note("mine", "walrus facts")
    assert (await call(app, "search_notes", {"query": "walrus"})).untrusted is False
    app.workspace.create_note("clipped", "walrus page", source_url="https://example.org/w")
    result = await call(app, "search_notes", {"query": "walrus"})
    assert result.untrusted is True and len(result.payload["results"]) == 2


@pytest.mark.anyio
async def test_search_arguments_are_checked(app: App) -> None:
    for args, argument in (({"query": "x", "limit": 0}, "limit"), ({"query": "x", "limit": 101}, "limit"),
                           ({"query": ""}, "query"), ({"query": "x", "offset": -1}, "offset")):
        message: Any = await tool_error(app, "search_notes", args)
        assert f"'{argument}'" in message
