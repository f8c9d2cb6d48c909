"""``search_conversations``: the acting user's own past chats by keyword, matched literally,
deleted ones left out, a bounded snippet per hit; off until the chat's history capability
turns it on."""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App
from noteloom.chat import tables as t
from noteloom.chat.conversations import Conversations
from noteloom.chat.search import SNIPPET_CHARS, search_conversations
from noteloom.tools import CallOrigin, ToolResult, UnknownTool
from noteloom.workspace import User

pytestmark = pytest.mark.anyio


def _user(app: App, name: str) -> User:
    uid = db.new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": db.now_ms()})
    return User(uid, name, False)


def _chat(app: App, user: User, title: str, *texts: str, when: int | None = None) -> str:
    """A conversation of ``user`` with alternating user/assistant messages."""
    conv = Conversations(app.engine).create(user.id, title=title)
    tm = when if when is not None else db.now_ms()
    rows = [
        {"id": db.new_id(), "conversation_id": conv.id, "position": i, "role": "user" if i % 2 == 0 else "assistant",
         "content": text, "status": "complete", "created_time": tm, "updated_time": tm}
        for i, text in enumerate(texts)
    ]
    with db.write_tx(app.engine) as c:
        if rows:
            c.execute(t.messages.insert(), rows)
        c.execute(t.conversations.update().where(t.conversations.c.id == conv.id).values(updated_time=tm))
    return conv.id


async def _search(app: App, user: User, query: str, **more: Any) -> dict[str, Any]:
    app.registry.set_enabled(app.workspace, "search_conversations", True)
    origin = more.pop("origin", None)
    result = await app.registry.call(app.tool_context(user, origin=origin), "search_conversations",
                                     {"query": query, **more})
    assert isinstance(result, ToolResult)
    payload: dict[str, Any] = result.payload
    payload["_untrusted"] = result.untrusted
    return payload


def _ids(payload: dict[str, Any]) -> set[str]:
    return {h["conversation_id"] for h in payload["conversations"]}


async def test_it_is_off_until_enabled_and_a_read_whose_results_are_fenced(app: App) -> None:
    tool = app.registry.get("search_conversations")
    assert tool.effect == "read" and not tool.enabled_by_default and tool.untrusted_output
    owner = app.workspace.ensure_owner()
    with pytest.raises(UnknownTool):
        await app.registry.call(app.tool_context(owner), "search_conversations", {"query": "x"})


async def test_a_user_finds_their_own_chats_only_never_another_users(any_app: App) -> None:
    app = any_app
    a, b = app.workspace.ensure_owner(), _user(app, "bea")
    mine = _chat(app, a, "Trip to Lisbon", "Where should we eat in Alfama?", "Try the grilled sardines.")
    theirs = _chat(app, b, "Lisbon secrets", "My sardines recipe is secret")
    found = await _search(app, a, "sardines")
    assert _ids(found) == {mine}
    [hit] = found["conversations"]
    assert hit["title"] == "Trip to Lisbon" and hit["matched"] == "message"
    assert "grilled sardines" in hit["snippet"] and hit["date"].endswith("Z")
    assert found["_untrusted"] is True
    assert _ids(await _search(app, b, "sardines")) == {theirs}
    assert _ids(await _search(app, a, "secret")) == set()  # B's title and text are not A's to find


async def test_the_title_matches_too_case_ignored(any_app: App) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    conv = _chat(app, a, "Budget for 2027", "How much for rent?")
    [hit] = (await _search(app, a, "BUDGET"))["conversations"]
    assert (hit["conversation_id"], hit["matched"]) == (conv, "title")


@pytest.mark.parametrize("query", ["50%", "a_b", "it's", '"quoted"', "back\\slash", "x' OR '1'='1"])
async def test_wildcards_and_quotes_are_plain_characters(any_app: App, query: str) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    literal = _chat(app, a, "literal", f"the text has {query} in it")
    # Each would match under LIKE's wildcards or a string-built query, but holds none of the text.
    decoys = [_chat(app, a, "decoy", text) for text in ("50 percent", "aXb", "its", "quoted", "backslash", "x OR 1=1")]
    found = await _search(app, a, query)
    assert _ids(found) == {literal}, found
    assert not _ids(found) & set(decoys)
    assert query in found["conversations"][0]["snippet"]


async def test_a_lone_percent_or_underscore_matches_only_text_that_has_one(any_app: App) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    _chat(app, a, "plain", "nothing special here")
    pct = _chat(app, a, "pct", "100% sure")
    under = _chat(app, a, "under", "snake_case name")
    assert _ids(await _search(app, a, "%")) == {pct}
    assert _ids(await _search(app, a, "_")) == {under}


async def test_deleted_conversations_are_left_out(any_app: App) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    kept = _chat(app, a, "kept", "the aurora was green")
    gone = _chat(app, a, "gone", "the aurora was red")
    Conversations(app.engine).delete(a.id, gone)
    assert _ids(await _search(app, a, "aurora")) == {kept}


async def test_the_conversation_asking_is_left_out(app: App) -> None:
    a = app.workspace.ensure_owner()
    earlier = _chat(app, a, "earlier", "we talked about quinces")
    now = _chat(app, a, "now", "what did we say about quinces?")
    found = await _search(app, a, "quinces", origin=CallOrigin(conversation_id=now))
    assert _ids(found) == {earlier}


async def test_the_snippet_is_bounded_and_holds_the_match(any_app: App) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    long_text = "lorem ipsum " * 400 + "the NEEDLE is here " + "dolor sit " * 400
    _chat(app, a, "long", long_text)
    [hit] = (await _search(app, a, "needle"))["conversations"]
    snippet = hit["snippet"]
    assert "NEEDLE" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= SNIPPET_CHARS + 2
    # Short text comes whole, whitespace collapsed.
    _chat(app, a, "short", "a  short\n\nhaystack")
    [short] = (await _search(app, a, "haystack"))["conversations"]
    assert short["snippet"] == "a short haystack"


async def test_newest_first_with_a_limit_and_has_more(any_app: App) -> None:
    app = any_app
    a = app.workspace.ensure_owner()
    base = db.now_ms()
    convs = [_chat(app, a, f"c{i}", f"kiwi number {i}", when=base - 1000 * i) for i in range(5)]
    found = await _search(app, a, "kiwi", limit=3)
    assert [h["conversation_id"] for h in found["conversations"]] == convs[:3]
    assert found["has_more"] is True
    assert (await _search(app, a, "kiwi", limit=5))["has_more"] is False


async def test_nothing_found_says_so_and_is_not_fenced(app: App) -> None:
    a = app.workspace.ensure_owner()
    _chat(app, a, "x", "nothing here")
    found = await _search(app, a, "zebra")
    assert found["conversations"] == [] and "message" in found and found["_untrusted"] is False


async def test_only_user_and_assistant_text_is_searched(app: App) -> None:
    a = app.workspace.ensure_owner()
    conv = _chat(app, a, "c", "hello")
    with db.write_tx(app.engine) as c:
        c.execute(t.messages.insert(), {"id": db.new_id(), "conversation_id": conv, "position": 5, "role": "note",
                                        "command": "clear", "content": "context cleared: walrus", "status": "complete",
                                        "created_time": 1, "updated_time": 1})
    assert _ids(await _search(app, a, "walrus")) == set()


def test_two_thousand_conversations_of_twenty_messages_search_fast(any_app: App) -> None:
    """Measured, not asserted against the clock: the figure is printed (``-s``) for the report."""
    app = any_app
    a = app.workspace.ensure_owner()
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma"]
    convs, msgs = [], []
    tm = db.now_ms()
    for i in range(2000):
        cid = db.new_id()
        convs.append({"id": cid, "user_id": a.id, "title": f"chat {i}", "pinned": False, "workspace_tools": True,
                      "workspace_writes": True, "input_tokens": 0, "output_tokens": 0, "cost_usd": "0",
                      "unpriced_turns": 0, "created_time": tm - i, "updated_time": tm - i})
        for p in range(20):
            text = " ".join(words[(i + p + k) % len(words)] for k in range(60))
            if i % 400 == 0 and p == 7:
                text += " rare-marker"
            msgs.append({"id": db.new_id(), "conversation_id": cid, "position": p,
                         "role": "user" if p % 2 == 0 else "assistant", "content": text, "status": "complete",
                         "created_time": tm, "updated_time": tm})
    with db.write_tx(app.engine) as c:
        c.execute(t.conversations.insert(), convs)
        c.execute(t.messages.insert(), msgs)
    timings: list[tuple[str, float]] = []
    for query in ("rare-marker", "not-there-at-all", "gamma", "rare-marker", "not-there-at-all"):
        with app.workspace.read() as c:
            start = time.perf_counter()
            hits, _ = search_conversations(c, a.id, query, limit=10)
            timings.append((query, (time.perf_counter() - start) * 1000))
        if query == "rare-marker":
            assert len(hits) == 5
    print(f"\n{app.engine.dialect.name}: search over 2,000 conversations x 20 messages: " + ", ".join(f"{q!r} {ms:.1f} ms" for q, ms in timings))
    with app.workspace.read() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(t.messages)).scalar_one() == 40000
