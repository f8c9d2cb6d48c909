"""The automatic memory context: which memories' bodies (layer 1) and titles (layer 2) a
message brings into the prompt, on a fixed memory set."""

from __future__ import annotations

import re

from noteloom import db
from noteloom.agent import fence
from noteloom.app import App
from noteloom.memory import store
from noteloom.memory.context import (
    ContextBuilder,
    Limits,
    MemoryContext,
    MemoryIndex,
    select,
    terms,
)
from noteloom.memory.store import Memory


def mem(n: int, title: str, content: str, *, scope: str = "personal", tags: tuple[str, ...] = (),
        updated: int = 0) -> Memory:
    return Memory(f"m{n:02d}", scope, "u1" if scope == "personal" else None, title, content,  # type: ignore[arg-type]
                  tags, "user", None, None, None, "u1", updated, updated)


def build(rows: list[Memory], message: str, limits: Limits | None = None,
          similar: dict[str, float] | None = None) -> MemoryContext:
    newest_first = sorted(rows, key=lambda r: -r.updated_time)
    return select(MemoryIndex.of(newest_first), message, limits or Limits(), similar)


def full_ids(ctx: MemoryContext) -> list[str]:
    return [e.id for e in ctx.full]


def index_ids(ctx: MemoryContext) -> list[str]:
    return [e.id for e in ctx.index]


FACTS = [
    mem(1, "Shellfish allergy", "Maya is allergic to shellfish; no prawns.", updated=10),
    mem(2, "Maya's birthday", "Maya's birthday is on 3 May; she likes orchids.", updated=20),
    mem(3, "Project Heron deadline", "The Heron review is on 12 June.", updated=30),
    mem(4, "Project Heron owner", "Heron is owned by Tom; Maya backs him up.", updated=40),
    mem(5, "Coffee", "Tom takes oat milk in coffee.", updated=50),
    mem(6, "Refund policy", "Refunds are honoured within 30 days with the receipt.", scope="shared", updated=5),
]


def test_terms_drop_stop_words_and_short_tokens_and_fold_plurals() -> None:
    assert terms("What do you know about the allergies of my cats, Al?") == {"allergie", "cat"}
    assert terms("Is it OK?") == set()
    assert "glass" in terms("glass") and "status" in terms("status")


def test_a_message_sharing_words_brings_the_bodies_ranked_by_terms_then_recency() -> None:
    ctx = build(FACTS, "When is the Heron review?")
    # Both Heron memories match "heron"; the deadline one matches "review" too.
    assert full_ids(ctx) == ["m03", "m04"]
    assert ctx.full[0].body == "The Heron review is on 12 June."
    ctx = build(FACTS, "Tell me about Heron")
    assert full_ids(ctx) == ["m04", "m03"]  # one term each: the newest first


def test_stop_words_alone_bring_no_body() -> None:
    ctx = build(FACTS, "What is it that we should do about this?")
    assert full_ids(ctx) == []
    assert sorted(index_ids(ctx)) == [f"m0{i}" for i in range(1, 7)]


def test_a_term_matching_more_than_half_the_memories_is_dropped() -> None:
    rows = [mem(i, f"Note {i}", f"garden item {i}" + (" tomatoes" if i == 3 else ""), updated=i) for i in range(1, 8)]
    ctx = build(rows, "garden tomatoes")
    # "garden" is in all seven: it says nothing; "tomatoe" picks the one.
    assert full_ids(ctx) == ["m03"]
    ctx = build(rows, "garden")
    assert full_ids(ctx) == []


def test_layer_one_is_capped_by_count() -> None:
    rows = [mem(i, f"Kiwi fact {i}", f"kiwi {i}", updated=i) for i in range(1, 9)] + \
           [mem(20 + i, f"Other {i}", f"plum {i}", updated=i) for i in range(1, 9)]
    ctx = build(rows, "kiwi", Limits(max_full=3))
    assert full_ids(ctx) == ["m08", "m07", "m06"]
    # The other matches are titles, deduplicated against layer 1.
    assert not set(full_ids(ctx)) & set(index_ids(ctx))
    assert {"m05", "m04", "m01"} <= set(index_ids(ctx))


def test_layer_one_is_capped_by_characters_and_an_overflowing_body_is_cut_with_the_recall_marker() -> None:
    long = "lantern " * 2_000  # 16,000 characters
    rows = [mem(1, "Short lantern", "lantern fact", updated=2), mem(2, "Long lantern", long, updated=1)]
    ctx = build(rows, "lantern", Limits(max_chars=1_000))
    assert full_ids(ctx) == ["m01", "m02"]
    cut = ctx.full[1]
    assert cut.cut and cut.body is not None
    assert cut.body.endswith("[… cut here: recall id m02 for the rest]")
    assert ctx.full_chars <= 1_000
    # Too little room left for a useful cut: the memory goes to layer 2 instead.
    ctx = build([mem(1, "A", "x" * 950 + " lantern", updated=2), mem(2, "B", long, updated=1)], "lantern",
                Limits(max_chars=1_000))
    assert full_ids(ctx) == ["m01"] and index_ids(ctx) == ["m02"]


def test_shared_titles_are_never_crowded_out_by_many_personal_ones() -> None:
    rows = [mem(i, f"Personal {i}", f"body {i}", updated=100 + i) for i in range(1, 60)]
    rows += [mem(90 + i, f"Shared {i}", f"policy {i}", scope="shared", updated=i) for i in range(1, 4)]
    ctx = build(rows, "nothing to see", Limits(max_index=10))
    shared = [e.id for e in ctx.index if e.scope == "shared"]
    personal = [e.id for e in ctx.index if e.scope == "personal"]
    assert sorted(shared) == ["m91", "m92", "m93"]
    assert len(personal) == 10
    assert personal[0] == "m59"  # the newest personal ones fill the cap


def test_partial_matches_come_before_newer_rows_in_the_title_index() -> None:
    rows = [mem(i, f"Personal {i}", f"body {i}", updated=100 + i) for i in range(1, 20)]
    rows.append(mem(50, "Old falcon note", "falcon", updated=1))
    ctx = build(rows, "falcon", Limits(max_full=0, max_index=3))
    assert index_ids(ctx)[0] == "m50"


def test_titles_are_whitespace_collapsed_and_an_empty_one_is_untitled() -> None:
    rows = [mem(1, "Line one\n\n  - injected   line", "quartz", updated=2), mem(2, "  ", "other", updated=1)]
    ctx = build(rows, "nothing")
    titles = {e.id: e.title for e in ctx.index}
    assert titles == {"m01": "Line one - injected line", "m02": "(untitled)"}
    text = ctx.text(lambda s: s)
    assert "- Line one - injected line · personal · - · id m01" in text
    assert "- (untitled) · personal · - · id m02" in text


def test_a_similarity_ranks_ties_and_brings_close_memories_sharing_no_word() -> None:
    ctx = build(FACTS, "Planning a seafood paella", similar={"m01": 0.6, "m05": 0.1})
    assert full_ids(ctx) == ["m01"]  # close enough for its body; m05 is not
    personal = [e.id for e in ctx.index if e.scope == "personal"]
    assert personal[0] == "m05"  # but the closest title comes first, before newer ones
    assert build(FACTS, "Planning a seafood paella").full == ()


def test_the_block_is_fenced_and_tells_the_model_to_recall_by_id() -> None:
    ctx = build(FACTS, "Heron deadline")
    text = ctx.text(lambda s: fence(s, "abc123"))
    assert text.index("recall") < text.index("<<UNTRUSTED_abc123>>")
    inner = re.search(r"<<UNTRUSTED_abc123>>\n(.*)\n<</UNTRUSTED_abc123>>", text, re.DOTALL)
    assert inner is not None
    assert "The Heron review is on 12 June." in inner.group(1)
    assert "Refund policy · shared" in inner.group(1)
    assert ctx.given()[0] == {"id": "m03", "title": "Project Heron deadline", "layer": 1}
    assert {g["layer"] for g in ctx.given()} == {1, 2}
    assert build([], "anything").text(lambda s: s) == ""


def _user(app: App, name: str) -> str:
    uid = db.new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": db.now_ms()})
    return uid


def test_a_user_never_gets_another_users_memories_and_sees_edits_at_once(app: App) -> None:
    a, b = app.workspace.ensure_owner().id, _user(app, "b")
    with db.write_tx(app.engine) as c:
        mine = store.add(c, a, "Basalt ships on Friday.", title="Basalt release")
        theirs = store.add(c, b, "Basalt secret plan of B.", title="Basalt plan")
        shared = store.add(c, b, "Basalt is the billing rewrite.", title="What Basalt is", scope="shared")
    builder = ContextBuilder()
    with db.read_tx(app.engine) as c:
        ctx = builder.build(c, a, "Basalt")
    seen = set(full_ids(ctx)) | set(index_ids(ctx))
    assert seen == {mine.id, shared.id} and theirs.id not in seen
    with db.read_tx(app.engine) as c:
        ctx_b = builder.build(c, b, "Basalt")
    assert mine.id not in set(full_ids(ctx_b)) | set(index_ids(ctx_b))
    # An edit and a forget show on the next build, though the index is cached.
    with db.write_tx(app.engine) as c:
        store.edit(c, a, mine.id, content="Basalt ships on Monday.")
    with db.read_tx(app.engine) as c:
        ctx = builder.build(c, a, "Basalt ships")
    assert ctx.full[0].body == "Basalt ships on Monday."
    with db.write_tx(app.engine) as c:
        assert store.delete(c, a, mine.id)
    with db.read_tx(app.engine) as c:
        ctx = builder.build(c, a, "Basalt ships")
    assert mine.id not in set(full_ids(ctx)) | set(index_ids(ctx))
