"""The notes app's JSON (``web/browse_api.py``): the tree counts sub-notebooks, the list pages by a
cursor without repeating or losing a note, a notebook's list holds its sub-notebooks' notes,
search answers with the section, moving needs write access to both sides, each person sees
only their own and shared notebooks, and bad input is a 422."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest

from noteloom.app import App, access_token
from noteloom.web.app import create_web_app
from noteloom.web.browse_api import decode_cursor, encode_cursor
from test_people_api import keys_of, world

pytestmark = pytest.mark.anyio


MISSING = "f" * 32


@asynccontextmanager
async def client(app: App, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token or access_token(app)}"}
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers, timeout=120) as c:
        yield c


async def ok(c: httpx.AsyncClient, method: str, path: str, **kw: Any) -> Any:
    r = await c.request(method, path, **kw)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


async def all_pages(c: httpx.AsyncClient, params: dict[str, Any]) -> list[list[dict[str, Any]]]:
    pages, cursor = [], None
    while True:
        data = await ok(c, "GET", "/api/v1/browse/notes", params={**params, **({"cursor": cursor} if cursor else {})})
        pages.append(data["notes"])
        cursor = data["next_cursor"]
        if cursor is None:
            return pages


async def test_pages_follow_the_cursor_newest_first_without_repeating_or_losing_a_note(any_app: App) -> None:
    ws = any_app.workspace
    book = ws.create_notebook("Box")
    # Ties on updated_time (ten notes per millisecond) are where an offset-free cursor must use the id.
    ids = {ws.create_note(f"n{i}", "", book.id, updated_time=1_700_000_000_000 + i // 10, tags=["t"] if i == 0 else ()).id
           for i in range(130)}
    async with client(any_app) as c:
        pages = await all_pages(c, {"limit": 50})
        assert [len(p) for p in pages] == [50, 50, 30]
        rows = [n for p in pages for n in p]
        assert {n["id"] for n in rows} == ids and len(rows) == 130
        keys = [(n["updated_time"], n["id"]) for n in rows]
        assert keys == sorted(keys, reverse=True)
        first = next(n for n in rows if n["title"] == "n0")
        assert first["tags"] == ["t"] and first["notebook"] == "Box" and first["is_todo"] is False
        # A note saved while someone pages moves to the top: the pages still to come neither
        # repeat a row nor lose one.
        data = await ok(c, "GET", "/api/v1/browse/notes", params={"limit": 50})
        moved = data["notes"][-1]["id"]  # already seen
        ws.update_note(data["notes"][70 % 50]["id"], title="seen, changed")
        rest = await all_pages(c, {"limit": 50, "cursor": data["next_cursor"]})
        later = [n["id"] for p in rest for n in p]
        assert len(later) == len(set(later)) == 80 and moved not in later


def test_a_cursor_is_opaque_but_round_trips() -> None:
    cursor = encode_cursor(1_700_000_000_123, "a" * 32)
    assert "1700000000123" not in cursor and decode_cursor(cursor) == (1_700_000_000_123, "a" * 32)


async def test_counts_include_sub_notebooks_and_a_notebooks_list_holds_theirs(app: App) -> None:
    ws = app.workspace
    parent = ws.create_notebook("Projects")
    kids = [ws.create_notebook(f"Child {k}", parent.id) for k in range(2)]
    grandchild = ws.create_notebook("Deep", kids[0].id)
    for kid in kids:
        for i in range(50):
            ws.create_note(f"{kid.title} {i}", "", kid.id)
    ws.create_note("deep one", "", grandchild.id)
    ws.create_note("elsewhere", "", ws.create_notebook("Other").id)
    async with client(app) as c:
        tree = await ok(c, "GET", "/api/v1/browse/tree")
        by_id = {b["id"]: b for b in tree["notebooks"]}
        assert (by_id[parent.id]["note_count"], by_id[parent.id]["total_count"]) == (0, 101)
        assert by_id[kids[0].id]["total_count"] == 51 and by_id[kids[1].id]["total_count"] == 50
        assert by_id[grandchild.id]["parent_id"] == kids[0].id
        assert tree["total"] == 102
        pages = await all_pages(c, {"notebook_id": parent.id, "limit": 200})
        assert len(pages[0]) == 101 and "elsewhere" not in {n["title"] for n in pages[0]}
        deep = await all_pages(c, {"notebook_id": kids[0].id})
        assert sum(len(p) for p in deep) == 51


async def test_titles_start_with_the_prefix_first_and_match_any_case(app: App) -> None:
    ws = app.workspace
    ws.create_note("Garden plan", "")
    ws.create_note("Plan for the garden", "")
    ws.create_note("100% done_", "")
    ws.create_note("Unrelated", "")
    async with client(app) as c:
        found = await ok(c, "GET", "/api/v1/browse/titles", params={"q": "plan"})
        assert [n["title"] for n in found["notes"]] == ["Plan for the garden", "Garden plan"]
        # LIKE's wildcards are plain characters here.
        assert [n["title"] for n in (await ok(c, "GET", "/api/v1/browse/titles", params={"q": "0%"}))["notes"]] == ["100% done_"]
        assert (await ok(c, "GET", "/api/v1/browse/titles", params={"q": "_"}))["notes"][0]["title"] == "100% done_"
        assert len((await ok(c, "GET", "/api/v1/browse/titles"))["notes"]) == 4


async def test_search_answers_as_the_tool_does_with_the_section_of_the_hit(app: App) -> None:
    ws = app.workspace
    book = ws.create_notebook("Travel")
    note = ws.create_note("Trip", "# Trip\n\nintro\n\n## Packing\n\nbring the tent and the stove\n", book.id)
    async with client(app) as c:
        data = await ok(c, "GET", "/api/v1/browse/search", params={"q": "stove"})
        (hit,) = data["results"]
        assert (hit["id"], hit["notebook"], hit["section_heading"]) == (note.id, "Travel", "Packing")
        assert "stove" in hit["snippet"] and data["mode"] == "keyword" and data["has_more"] is False
        tool = (await app.registry.call(app.tool_context(), "search_notes", {"query": "stove"})).payload
        assert [r["id"] for r in tool["results"]] == [hit["id"]] and tool["results"][0]["section"] == hit["section"]
        r = await c.get("/api/v1/browse/search", params={"q": "stove notebook:Nowhere"})
        assert r.status_code == 200 and r.json()["results"] == []


async def test_moving_a_note_needs_write_access_to_the_note_and_the_target(any_app: App) -> None:
    w = world(any_app)
    ws = any_app.workspace
    async with client(any_app, w.tokens["ann"]) as c:
        # her own note into the notebook shared with her to write, and back
        r = await c.post(f"/api/v1/notes/{w.notes['Ann']}/move", json={"notebook_id": w.books["Desk"]})
        assert r.status_code == 200 and r.json()["notebook_id"] == w.books["Desk"], r.text
        assert ws.get_note(w.notes["Ann"]).notebook_id == w.books["Desk"]
        # read-only share: neither out of it nor into it
        assert (await c.post(f"/api/v1/notes/{w.notes['Lent']}/move", json={"notebook_id": w.books["Ann"]})).status_code == 403
        assert (await c.post(f"/api/v1/notes/{w.notes['Desk']}/move", json={"notebook_id": w.books["Lent"]})).status_code == 403
        # out of sight reads like missing, for the note and for the target
        foreign = await c.post(f"/api/v1/notes/{w.notes['Bob']}/move", json={"notebook_id": w.books["Ann"]})
        missing = await c.post(f"/api/v1/notes/{MISSING}/move", json={"notebook_id": w.books["Ann"]})
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["message"].replace(w.notes["Bob"], MISSING) == missing.json()["message"]
        into_foreign = await c.post(f"/api/v1/notes/{w.notes['Desk']}/move", json={"notebook_id": w.books["Bob"]})
        into_missing = await c.post(f"/api/v1/notes/{w.notes['Desk']}/move", json={"notebook_id": MISSING})
        assert into_foreign.status_code == into_missing.status_code == 404
    assert ws.get_note(w.notes["Bob"]).notebook_id == w.books["Bob"]
    assert ws.get_note(w.notes["Desk"]).notebook_id == w.books["Desk"]


async def test_a_member_browses_only_her_own_and_shared_notebooks(any_app: App) -> None:
    w = world(any_app)
    sees = {"owner": set(w.books), "ann": {"Ann", "Lent", "Desk"}, "ann_scoped": {"Ann", "Lent"}, "carl": set()}
    for who, books in sees.items():
        async with client(any_app, w.tokens[who]) as c:
            tree = await ok(c, "GET", "/api/v1/browse/tree")
            assert keys_of(w, [b["id"] for b in tree["notebooks"]], w.books) == books, who
            assert tree["total"] == len(books), who
            listed = (await ok(c, "GET", "/api/v1/browse/notes"))["notes"]
            assert keys_of(w, [n["id"] for n in listed], w.notes) == books, who
            titles = (await ok(c, "GET", "/api/v1/browse/titles", params={"q": "apples"}))["notes"]
            assert {n["title"].split()[0] for n in titles} == books, who
            found = (await ok(c, "GET", "/api/v1/browse/search", params={"q": "apples"}))["results"]
            assert keys_of(w, [n["id"] for n in found], w.notes) == books, who
            for key in ("Bob", "Work"):
                r = await c.get("/api/v1/browse/notes", params={"notebook_id": w.books[key]})
                assert r.status_code == (200 if key in books else 404), (who, key)


@pytest.mark.parametrize(("method", "path", "kw"), [
    ("GET", "/api/v1/browse/notes", {"params": {"cursor": "not-a-cursor"}}),
    ("GET", "/api/v1/browse/notes", {"params": {"cursor": encode_cursor(1, "a" * 32)[:-3] + "%%%"}}),
    ("GET", "/api/v1/browse/notes", {"params": {"limit": 0}}),
    ("GET", "/api/v1/browse/notes", {"params": {"limit": 100_000}}),
    ("GET", "/api/v1/browse/notes", {"params": {"notebook_id": "nope"}}),
    ("GET", "/api/v1/browse/titles", {"params": {"q": "x" * 201}}),
    ("GET", "/api/v1/browse/titles", {"params": {"q": "a\x00b"}}),
    ("GET", "/api/v1/browse/search", {"params": {}}),
    ("GET", "/api/v1/browse/search", {"params": {"q": "   "}}),
    ("GET", "/api/v1/browse/search", {"params": {"q": "x", "mode": "fuzzy"}}),
    ("GET", "/api/v1/browse/search", {"params": {"q": "x", "offset": -1}}),
    ("POST", f"/api/v1/notes/{MISSING}/move", {"json": {}}),
    ("POST", f"/api/v1/notes/{MISSING}/move", {"json": {"notebook_id": "x"}}),
    ("POST", f"/api/v1/notes/{MISSING}/move", {"json": {"notebook_id": MISSING, "extra": 1}}),
    ("POST", f"/api/v1/notes/{MISSING}/move", {"content": b"{", "headers": {"Content-Type": "application/json"}}),
])
async def test_bad_input_is_a_422_naming_the_field(app: App, method: str, path: str, kw: dict[str, Any]) -> None:
    async with client(app) as c:
        r = await c.request(method, path, **kw)
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.json()["error"] == "invalid_input" and r.json()["message"]


async def test_the_app_shells_answer_without_a_credential_and_runs_redirect(app: App) -> None:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        for path in ("/", "/search?q=x", f"/notes/{MISSING}", f"/notebooks/{MISSING}"):
            page = await c.get(path)
            assert page.status_code == 200 and 'id="note-pane"' in page.text, path
            assert page.text.index("vendor/editor/editor.js") < page.text.index("/static/render.js") \
                < page.text.index("/static/note_editor.js") < page.text.index("/static/app.js")
        run = await c.get(f"/runs/{MISSING}")
        assert run.status_code == 308 and run.headers["location"] == f"/recipes/runs/{MISSING}"
        assert (await c.get("/api/v1/browse/tree")).status_code == 401
