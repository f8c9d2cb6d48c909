"""The memory store on SQLite and PostgreSQL: scope (a person never sees another's personal
memories, by listing, search or id), who may change what, the caps, the soft delete, and
search over 10,000 memories."""

from __future__ import annotations

import time

import pytest

from noteloom import db
from noteloom.app import App
from noteloom.db import new_id, now_ms
from noteloom.errors import InvalidInput, NotFound
from noteloom.memory import store
from noteloom.memory.tables import memories


def person(app: App, name: str) -> str:
    uid = new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": now_ms()})
    return uid


def test_a_person_sees_their_own_and_the_shared_memories_never_anothers(any_app: App) -> None:
    a, b = person(any_app, "ann"), person(any_app, "bob")
    with db.write_tx(any_app.engine) as c:
        mine = store.add(c, a, "Ann is allergic to shellfish", tags=["health"])
        theirs = store.add(c, b, "Bob's shellfish supplier is Marée", title="Supplier")
        shared = store.add(c, b, "Refunds are honoured within 30 days", scope="shared", title="Refunds")
    with db.read_tx(any_app.engine) as c:
        assert {x.id for x in store.scoped(c, a)} == {mine.id, shared.id}
        assert [x.id for x in store.scoped(c, a, scope="personal")] == [mine.id]
        assert [x.id for x in store.scoped(c, a, scope="shared")] == [shared.id]
        assert [x.id for x in store.search(c, a, "shellfish")] == [mine.id]
        assert [x.id for x in store.search(c, b, "SHELLFISH")] == [theirs.id]
        assert store.by_ids(c, a, [theirs.id, "f" * 32, shared.id, mine.id]) == [
            store.get(c, a, shared.id), store.get(c, a, mine.id)]
        assert store.get(c, a, theirs.id) is None
        assert store.get(c, a, "nonsense") is None
    assert shared.user_id is None and shared.created_by == b
    assert mine.title == "Ann is allergic to shellfish"  # the first line when no title is given


def test_search_is_case_insensitive_over_title_content_and_tags_every_word_must_match(any_app: App) -> None:
    a = person(any_app, "ann")
    with db.write_tx(any_app.engine) as c:
        in_content = store.add(c, a, "Prefers window seats on long flights", title="Seating")
        in_title = store.add(c, a, "aisle on short hops", title="Flights preference")
        in_tags = store.add(c, a, "Gate agents know her by name", tags=["Airline-Loyalty"])
        store.add(c, a, "50% of 100_000 is not a wildcard", title="percent")
    with db.read_tx(any_app.engine) as c:
        assert [x.id for x in store.search(c, a, "flights")] == [in_title.id, in_content.id]  # title hits first
        assert [x.id for x in store.search(c, a, "window FLIGHTS")] == [in_content.id]
        assert [x.id for x in store.search(c, a, "airline-loyalty")] == [in_tags.id]
        assert store.search(c, a, "window trains") == []
        assert store.search(c, a, "100_0") != [] and store.search(c, a, "a_sle") == []  # LIKE's wildcards are literal
        with pytest.raises(InvalidInput) as err:
            store.search(c, a, "  ?! ")
    assert err.value.field == "query"


def test_only_the_owner_edits_a_personal_memory_and_any_person_a_shared_one(any_app: App) -> None:
    a, b = person(any_app, "ann"), person(any_app, "bob")
    with db.write_tx(any_app.engine) as c:
        mine = store.add(c, a, "likes tea", source="ai", conversation_id="c" * 32, message_id="m" * 32)
        shared = store.add(c, a, "office opens at 9", scope="shared")
    with db.write_tx(any_app.engine) as c:
        with pytest.raises(NotFound) as foreign:
            store.edit(c, b, mine.id, content="likes coffee")
        with pytest.raises(NotFound) as unknown:
            store.edit(c, b, "0" * 32, content="x")
        edited = store.edit(c, a, mine.id, content="likes green tea", tags=["drinks", "Drinks", " "])
        reshared = store.edit(c, b, shared.id, title="Office hours\nweekdays")
    assert str(foreign.value).replace(mine.id, "ID") == str(unknown.value).replace("0" * 32, "ID")
    assert (edited.content, edited.tags, edited.by_ai, edited.conversation_id) == (
        "likes green tea", ("drinks",), True, "c" * 32)  # a correction keeps where the fact came from
    assert edited.updated_time > mine.updated_time
    assert reshared.title == "Office hours weekdays" and reshared.scope == "shared"


def test_a_deleted_memory_is_gone_from_every_read_but_its_row_stays(any_app: App) -> None:
    a, b = person(any_app, "ann"), person(any_app, "bob")
    with db.write_tx(any_app.engine) as c:
        mine = store.add(c, a, "parks on level 3")
        shared = store.add(c, a, "wifi password is on the fridge", scope="shared")
    with db.write_tx(any_app.engine) as c:
        assert not store.delete(c, b, mine.id)  # another's: nothing happens
        assert not store.delete(c, a, shared.id, shared_too=False)  # the AI's forget: own only
        assert store.delete(c, a, mine.id)
        assert not store.delete(c, a, mine.id)
        assert store.delete(c, b, shared.id)  # a person removes a shared one
    with db.read_tx(any_app.engine) as c:
        assert store.scoped(c, a) == [] and store.scoped(c, b) == []
        assert store.search(c, a, "level") == [] and store.by_ids(c, a, [mine.id]) == []
        assert c.execute(memories.select().where(memories.c.deleted_time.is_not(None))).all() != []


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"content": "   \n\t "}, "content"),
    ({"content": "x" * (store.CONTENT_MAX + 1)}, "content"),
    ({"content": "ok", "title": "t" * (store.TITLE_MAX + 1)}, "title"),
    ({"content": "a\x00b"}, "content"),
    ({"content": "ok", "tags": [f"t{i}" for i in range(store.TAGS_MAX + 1)]}, "tags"),
])
def test_empty_content_and_anything_over_its_cap_are_refused_naming_the_field(
    app: App, kwargs: dict[str, object], field: str,
) -> None:
    a = person(app, "ann")
    content = str(kwargs.pop("content"))
    with db.write_tx(app.engine) as c, pytest.raises(InvalidInput) as err:
        store.add(c, a, content, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_the_caps_themselves_are_accepted(any_app: App) -> None:
    a = person(any_app, "ann")
    with db.write_tx(any_app.engine) as c:
        big = store.add(c, a, "é" * store.CONTENT_MAX, title="t" * store.TITLE_MAX)
    with db.read_tx(any_app.engine) as c:
        got = store.get(c, a, big.id)
    assert got is not None and len(got.content) == store.CONTENT_MAX and len(got.title) == store.TITLE_MAX


def test_search_over_ten_thousand_memories(any_app: App, capsys: pytest.CaptureFixture[str]) -> None:
    """Measured, not asserted on time: the figure is printed for the report."""
    a, b = person(any_app, "ann"), person(any_app, "bob")
    words = ["apple", "banana", "cherry", "delta", "echo", "fox", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike"]
    tm = now_ms()
    rows = []
    for i in range(10_000):
        owner = (a, b)[i % 2]
        text = " ".join(words[(i + k) % len(words)] for k in range(30)) + f" fact{i}"
        rows.append({"id": new_id(), "scope": "personal", "user_id": owner, "title": f"Memory {i}",
                     "content": text, "tags": ["t"], "source": "ai", "conversation_id": None, "run_id": None,
                     "message_id": None, "created_by": owner, "created_time": tm + i, "updated_time": tm + i,
                     "deleted_time": None})
    with db.write_tx(any_app.engine) as c:
        c.execute(memories.insert(), rows)
    timings = []
    with db.read_tx(any_app.engine) as c:
        for _ in range(5):
            t0 = time.perf_counter()
            hits = store.search(c, a, "fact4242")
            timings.append(time.perf_counter() - t0)
        broad = store.search(c, a, "banana", limit=20)
    assert [x.title for x in hits] == ["Memory 4242"]
    assert len(broad) == 20 and all(x.user_id == a for x in broad)
    timings.sort()
    with capsys.disabled():
        print(f"\nmemory search, 10,000 rows ({any_app.engine.dialect.name}): median {timings[2] * 1000:.1f} ms")
