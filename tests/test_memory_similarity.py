"""Memories as vectors: a message sharing no word with its memory reaches it by meaning once
the memory's vector is ready; until then a turn does not wait (terms only) and the vectors
are made in the background; a changed memory is embedded again, a deleted one dropped, and
one user's memories are never scored for another."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from anyio import to_thread

from chat_support import running_chat, scripted, settle
from noteloom import db
from noteloom.app import INDEXER, App, open_app
from noteloom.config import load_settings
from noteloom.memory import store
from noteloom.memory.context import ContextBuilder, MemoryContext
from noteloom.memory.similarity import MemoryVectors
from noteloom.memory.tables import memories
from noteloom.plugins import hookimpl
from recipe_support import running, service

pytestmark = pytest.mark.anyio

#: Shares no salient term with the allergy memory: only meaning links them.
MESSAGE = "Can I order the prawn curry?"
CONCEPTS = {
    "seafood": {"seafood", "shellfish", "prawn", "prawns", "shrimp", "lobster", "crab"},
    "cat": {"cat", "cats", "kitten", "feline"},
    "travel": {"flight", "airport", "plane", "trip"},
}
NOISE = 8


class ConceptEmbedder:
    """Words of one concept share a dimension, other words are hashed into a few faint ones:
    "prawn" is close to "shellfish" with no word in common. ``gate`` holds document
    embedding back while it is clear; ``documents`` is every text embedded so far."""

    name = "concept:11"
    dimensions = len(CONCEPTS) + NOISE

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.documents: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.gate.wait()
        self.documents.extend(texts)
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in "".join(ch if ch.isalnum() else " " for ch in text.lower()).split():
            concept = next((i for i, words in enumerate(CONCEPTS.values()) if word in words), None)
            if concept is not None:
                v[concept] += 1.0
            else:
                v[len(CONCEPTS) + hashlib.sha256(word.encode()).digest()[0] % NOISE] += 0.1
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / norm for x in v]


class ConceptPlugin:
    def __init__(self) -> None:
        self.embedder = ConceptEmbedder()

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        register("concept", lambda config, env: self.embedder)


@pytest.fixture
def semantic(tmp_path: Path) -> Iterator[tuple[App, ConceptEmbedder]]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text('[embeddings]\ntype = "concept"\n', encoding="utf-8")
    plugin = ConceptPlugin()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), plugins=[plugin], load_entry_points=False)
    try:
        yield app, plugin.embedder
    finally:
        plugin.embedder.gate.set()
        app.close()


def _add(app: App, user_id: str, content: str, title: str, **kw: Any) -> store.Memory:
    with db.write_tx(app.engine) as c:
        return store.add(c, user_id, content, title=title, **kw)


def _facts(app: App, user_id: str) -> store.Memory:
    """The allergy fact and two unrelated ones; the allergy's."""
    _add(app, user_id, "The cat is called Miso.", "Cat's name")
    _add(app, user_id, "The flight to Lisbon leaves at nine.", "Lisbon flight")
    return _add(app, user_id, "Allergic to shellfish since 2019.", "Shellfish allergy")


def _user(app: App, name: str) -> str:
    uid = db.new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": db.now_ms()})
    return uid


def _vectors(app: App) -> MemoryVectors:
    vectors = app.services.memory_vectors
    assert vectors is not None
    return vectors


def _build(app: App, builder: ContextBuilder, user_id: str, message: str = MESSAGE) -> MemoryContext:
    with db.read_tx(app.engine) as c:
        return builder.build(c, user_id, message, vectors=_vectors(app))


async def _settled(vectors: MemoryVectors) -> None:
    assert await to_thread.run_sync(vectors.idle.wait, 30), "the memory vectors were not made in time"


def _layer1(ctx: MemoryContext) -> list[str]:
    return [e.id for e in ctx.full]


async def test_a_turn_gets_a_memory_sharing_no_word_by_meaning_once_its_vector_is_ready(
    semantic: tuple[App, ConceptEmbedder],
) -> None:
    app, embedder = semantic
    owner = app.workspace.ensure_owner()
    allergy = _facts(app, owner.id)
    vectors = _vectors(app)
    provider = scripted(app, [{"text": "a"}, {"text": "b"}])
    embedder.gate.clear()  # the embedder is slow: nothing is ready when the first turn runs
    try:
        async with app.background(INDEXER), running_chat(app) as chat:
            with anyio.fail_after(30):
                first = await chat.send(owner, MESSAGE, controls={"model": "play:script"})
                before = await settle(chat, owner, first.message_id)
            # The turn did not wait for the embedder: terms only, the fact a title in layer 2 ...
            assert {"id": allergy.id, "title": "Shellfish allergy", "layer": 2} in before["memories"]
            # ... and its vector is being made in the background.
            assert not vectors.idle.is_set() and vectors.pending() == 3
            embedder.gate.set()
            await _settled(vectors)
            second = await chat.send(owner, MESSAGE, conversation_id=first.conversation_id)
            after = await settle(chat, owner, second.message_id)
    finally:
        embedder.gate.set()
    assert after["memories"][0] == {"id": allergy.id, "title": "Shellfish allergy", "layer": 1}
    assert "Allergic to shellfish since 2019." in provider.requests[1].system_text
    assert "Allergic to shellfish since 2019." not in provider.requests[0].system_text
    # Each memory was embedded once, as its title and the opening of its body.
    assert sorted(embedder.documents) == sorted(
        ["Cat's name\nThe cat is called Miso.", "Lisbon flight\nThe flight to Lisbon leaves at nine.",
         "Shellfish allergy\nAllergic to shellfish since 2019."]
    )


async def test_an_agent_recipe_run_gets_the_memory_by_meaning(semantic: tuple[App, ConceptEmbedder]) -> None:
    app, _ = semantic
    owner = app.workspace.ensure_owner()
    allergy = _facts(app, owner.id)
    vectors = _vectors(app)
    from recipe_support import scripted as scripted_recipe

    scripted_recipe(app, [{"text": "Done."}], loop=True)
    service(app).add(owner, {"name": "menu", "prompt": MESSAGE, "model": "play", "tools": ["recall"]})
    async with vectors.running():
        assert _layer1(_build(app, ContextBuilder(), owner.id)) == []  # nothing ready: terms only
        await _settled(vectors)
    async with running(app):
        run = await service(app).run_now(owner, "menu")
    assert run["status"] == "succeeded", run
    assert run["memories"][0] == {"id": allergy.id, "title": "Shellfish allergy", "layer": 1}


async def test_a_changed_memory_is_embedded_again_and_a_deleted_one_dropped(
    semantic: tuple[App, ConceptEmbedder],
) -> None:
    app, embedder = semantic
    owner = app.workspace.ensure_owner()
    allergy = _facts(app, owner.id)
    cat = next(m for m in _scoped(app, owner.id) if m.title == "Cat's name")
    vectors, builder = _vectors(app), ContextBuilder()
    async with vectors.running():
        _build(app, builder, owner.id)
        await _settled(vectors)
        assert _layer1(_build(app, builder, owner.id)) == [allergy.id]
        # The allergy turns out to be to cats; its row changes (a later updated_time).
        with db.write_tx(app.engine) as c:
            store.edit(c, owner.id, allergy.id, title="Cat allergy", content="Allergic to cats.")
            c.execute(sa.update(memories).where(memories.c.id == allergy.id)
                      .values(updated_time=allergy.updated_time + 1000))
        # The stale vector is not used: until the new one is ready, terms only.
        assert _layer1(_build(app, builder, owner.id)) == []
        await _settled(vectors)
        assert "Cat allergy\nAllergic to cats." in embedder.documents
        assert _layer1(_build(app, builder, owner.id)) == []
        assert set(_layer1(_build(app, builder, owner.id, "Is a kitten a good present?"))) == {allergy.id, cat.id}
        # A deleted memory's vector is dropped on the next context of its owner.
        assert vectors.ready(cat.id) and len(vectors) == 3
        with db.write_tx(app.engine) as c:
            assert store.delete(c, owner.id, cat.id)
        assert _layer1(_build(app, builder, owner.id, "Is a kitten a good present?")) == [allergy.id]
        assert not vectors.ready(cat.id) and len(vectors) == 2


async def test_one_users_memories_are_never_scored_for_another(semantic: tuple[App, ConceptEmbedder]) -> None:
    app, _ = semantic
    owner = app.workspace.ensure_owner()
    other = _user(app, "other")
    mine = _add(app, owner.id, "The cat is called Miso.", "Cat's name")
    theirs = _add(app, other, "Allergic to shellfish since 2019.", "Shellfish allergy")
    shared = _add(app, owner.id, "Friday lunch is seafood from the harbour.", "Lunch", scope="shared")
    vectors, builder = _vectors(app), ContextBuilder()
    async with vectors.running():
        _build(app, builder, other)
        _build(app, builder, owner.id)
        await _settled(vectors)
        assert vectors.ready(theirs.id) and vectors.ready(mine.id) and vectors.ready(shared.id)
        with db.read_tx(app.engine) as c:
            index = builder.index(c, owner.id)
        similar = vectors.similarity(index, owner.id)
        assert similar is not None
        assert set(similar(MESSAGE)) == {mine.id, shared.id}
        ctx = _build(app, builder, owner.id)
        assert theirs.id not in {e.id for e in (*ctx.full, *ctx.index)}
        # The owner's context dropped nothing of the other user's: their vector stays theirs.
        assert vectors.ready(theirs.id)
        # The other user's context has their own and the shared one, never the owner's.
        assert set(_layer1(_build(app, builder, other))) == {theirs.id, shared.id}


def _scoped(app: App, user_id: str) -> list[store.Memory]:
    with db.read_tx(app.engine) as c:
        return list(store.scoped(c, user_id))


async def test_recall_finds_a_memory_by_meaning_once_its_vector_is_ready_and_never_waits_for_it(
    semantic: tuple[App, ConceptEmbedder],
) -> None:
    from noteloom.tools import call_tool

    app, embedder = semantic
    owner = app.workspace.ensure_owner()
    allergy = _facts(app, owner.id)
    other = _user(app, "other")
    _add(app, other, "Cooks prawns every Friday.", "Friday prawns")  # B's: never recalled for A
    ctx = app.tool_context(owner)
    recall = app.registry.get("recall")
    embedder.gate.clear()
    try:
        async with app.background(INDEXER):
            early = await call_tool(ctx, recall, {"query": "prawn curry"})
            assert early.payload["memories"] == []  # no word in common, no vector yet: nothing, at once
            embedder.gate.set()
            await _settled(_vectors(app))
            found = await call_tool(ctx, recall, {"query": "prawn curry"})
    finally:
        embedder.gate.set()
    assert [m["id"] for m in found.payload["memories"]] == [allergy.id]
    assert found.untrusted
