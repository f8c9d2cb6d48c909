"""search_notes over MCP answers byte for byte as recorded: what the call path builds (hits,
snippets, sections, the result object, its JSON) is kept identical while it is made faster.

The workspace is built from fixed ids and times; the recorded answers are in
``fixtures/call_path_golden.json``. After a change of behaviour that is meant, write them
again with ``python tests/test_call_path_golden.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.web.app import create_web_app

GOLDEN = Path(__file__).with_name("fixtures") / "call_path_golden.json"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
T0 = 1_764_590_000_000

LONG_FILLER = " ".join(f"filler{i % 997} words about nothing in particular" for i in range(5000))
NOTES: list[dict[str, Any]] = [
    {"title": "Socket timeouts", "book": "a", "body": (
        "# Networking\n\nAn introduction to sockets and why they hang.\n\n"
        "## Timeouts\n\nA socket timeout happens when the peer stops answering; set one on every socket.\n\n"
        "### Retry\n\nRetry with backoff after a timeout, not at once.\n"
    )},
    {"title": "A very long note", "book": "c", "body": (
        "# Start\n\n" + LONG_FILLER + "\n\n## Deep section\n\nThe quokka sleeps here, near the socket of the lamp.\n"
    )},
    {"title": "Café crème", "book": "a", "body": "Le café est prêt. Une façade Ünïcödé, et encore du CAFÉ.\n"},
    {"title": "会議メモ", "book": "a", "body": "今日の会議で数据を確認した。次の会議は来週。\n"},
    {"title": "Clipped article", "book": "b", "source_url": "https://example.com/socket-buffers",
     "body": "# Socket buffers\n\nTuning the socket buffer size, as found on the web.\n"},
    {"title": "Loops without headings", "book": "a", "body": (
        "Some text first. " * 40 + "\n\nThe event loop runs callbacks one at a time.\n\n" + "More text after. " * 40
    )},
    {"title": "Buffer overflow", "book": "a", "body": "Nothing relevant in the body at all.\n"},
    {"title": "Quokka census", "book": "c", "body": (
        "# Intro\n\nA quokka was seen.\n\n## Counts\n\nNone today.\n\n## Island\n\nThe quokka count reached 577 this year.\n"
    )},
    {"title": "İstanbul trip", "book": "a", "body": "İSTANBUL: the socket adapters there differ. İstanbul again.\n"},
    {"title": "Todo: fix the socket", "book": "a", "is_todo": True, "body": "- [ ] replace the socket\n"},
    {"title": "Whitespace", "book": "a", "body": "\n\n   The\tsocket   \n\n  spread   over\n\n\n lines   .  \n"},
]
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("socket", {"query": "socket", "mode": "keyword"}),
    ("socket page 1", {"query": "socket", "mode": "keyword", "limit": 2}),
    ("socket page 2", {"query": "socket", "mode": "keyword", "limit": 2, "offset": 2}),
    ("two words", {"query": "socket timeout", "mode": "keyword"}),
    ("phrase", {"query": '"event loop"', "mode": "keyword"}),
    ("prefix", {"query": "sock*", "mode": "keyword", "limit": 3}),
    ("accents folded", {"query": "cafe", "mode": "keyword"}),
    ("accents folded 2", {"query": "facade", "mode": "keyword"}),
    ("cjk", {"query": "会議", "mode": "keyword"}),
    ("cjk pair", {"query": "数据", "mode": "keyword"}),
    ("deep in a long note", {"query": "quokka", "mode": "keyword"}),
    ("where the words meet", {"query": "quokka 577", "mode": "keyword"}),
    ("title only", {"query": "buffer", "mode": "keyword"}),
    ("nothing", {"query": "nonexistentword", "mode": "keyword"}),
    ("filters only", {"query": "notebook:Work", "mode": "keyword"}),
    ("negation", {"query": "socket -timeout", "mode": "keyword"}),
    ("title field", {"query": "title:buffer", "mode": "keyword"}),
    ("any", {"query": "any:1 quokka cafe", "mode": "keyword"}),
    ("dotted capital I", {"query": "istanbul", "mode": "keyword"}),
    ("todo", {"query": "socket type:todo", "mode": "keyword"}),
    ("default mode", {"query": "socket"}),
    ("bad query", {"query": 'tag:"unclosed', "mode": "keyword"}),
    ("bad argument", {"query": "socket", "limit": 0}),
]
#: Protocol versions named in the header (a version makes the SDK shape the result): none, two.
VERSIONS = (None, "2025-06-18", "2024-11-05")


def build(home: Path) -> App:
    home.mkdir(parents=True, exist_ok=True)
    (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n", encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    ws = app.workspace
    books = {"a": ws.create_notebook("Work", id="a" * 32, created_time=T0, updated_time=T0)}
    books["b"] = ws.create_notebook("Clippings", id="b" * 32, created_time=T0, updated_time=T0)
    books["c"] = ws.create_notebook("Deep", parent_id="a" * 32, id="c" * 32, created_time=T0, updated_time=T0)
    for i, n in enumerate(NOTES):
        ws.create_note(
            n["title"], n["body"], books[n["book"]].id, id=f"{i + 1:032x}", is_todo=n.get("is_todo", False),
            source_url=n.get("source_url", ""), created_time=T0 + i * 60_000, updated_time=T0 + i * 61_001,
        )
    return app


async def answers(app: App) -> dict[str, Any]:
    """Each query's answer (status and body text) under each protocol version header."""
    token = access_token(app)
    transport = httpx2.ASGITransport(app=create_web_app(app))
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        for version in VERSIONS:
            headers = {**HEADERS, "Authorization": f"Bearer {token}"}
            if version is not None:
                headers["MCP-Protocol-Version"] = version
            for rid, (name, args) in enumerate(QUERIES):
                body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                        "params": {"name": "search_notes", "arguments": args}}
                r = await http.post("/mcp", content=json.dumps(body).encode(), headers=headers)
                out[f"{name} [{version or 'no version'}]"] = {
                    "status": r.status_code, "content-type": r.headers["content-type"], "body": r.text,
                }
    return out


@pytest.fixture
def golden_app(tmp_path: Path) -> Iterator[App]:
    app = build(tmp_path / "home")
    try:
        yield app
    finally:
        app.close()


def test_search_answers_are_byte_for_byte_as_recorded(golden_app: App) -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = asyncio.run(answers(golden_app))
    assert list(got) == list(expected)
    for name in expected:
        assert got[name] == expected[name], name


def test_the_recording_covers_what_it_claims() -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    deep = json.loads(expected["deep in a long note [2025-06-18]"]["body"])["result"]["structuredContent"]
    # The match 200,000 characters into the long note is what its snippet shows.
    long_hit = next(h for h in deep["results"] if h["title"] == "A very long note")
    assert "quokka sleeps" in long_hit["snippet"] and long_hit["section_heading"] == "Deep section"
    versioned = json.loads(expected["socket [2025-06-18]"]["body"])["result"]
    assert json.loads(versioned["content"][0]["text"]) == versioned["structuredContent"]
    clipped = json.loads(expected["socket [no version]"]["body"])["result"]
    assert clipped["_meta"] == {"noteloom/untrusted": True}


if __name__ == "__main__":  # write the recording again
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        built = build(Path(tmp) / "home")
        try:
            recorded = asyncio.run(answers(built))
        finally:
            built.close()
    GOLDEN.write_text(json.dumps(recorded, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(recorded)} answers to {GOLDEN}", file=sys.stderr)
