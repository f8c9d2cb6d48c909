"""On SQLite the vectors live in sqlite-vec when it loads, and rank exactly as the numpy fallback does."""

from __future__ import annotations

import random
from typing import Any

import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App
from noteloom.semantic import SemanticIndex
from noteloom.vectors import (
    VECTORS,
    NumpyVectorStore,
    SqliteVecStore,
    VectorStore,
    chunks,
    index_state,
    vector_store,
)
from semantic_support import local_model

DIMS = 16


@pytest.fixture
def vec_app(app: App) -> App:
    if not db.sqlite_vec_available(app.engine):
        pytest.skip("sqlite-vec cannot be loaded by this Python's SQLite driver")
    return app


class Counting:
    """The real local model, counting the texts it embeds."""

    def __init__(self) -> None:
        self.inner = local_model()
        self.documents = 0
        self.name = self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_documents(self, texts: Any) -> list[list[float]]:
        self.documents += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _random_chunks(app: App, n: int) -> tuple[list[int], list[list[float]], list[str]]:
    """``n`` chunk rows over a few notes, random vectors for them, and the note ids."""
    ws = app.workspace
    note_ids = [ws.create_note(f"note {i}", "text").id for i in range(5)]
    rng = random.Random(7)
    with db.write_tx(app.engine) as c:
        c.execute(
            index_state.insert(),
            {"id": 1, "model": "m", "dimensions": DIMS, "chunker": "c", "feed_cursor": 0,
             "backfill_seq": None, "created_time": 0, "updated_time": 0},
        )
        ids = [
            int(c.execute(
                chunks.insert().values(
                    note_id=note_ids[i % 5], ordinal=i, section_path="0", heading="", heading_path="[]",
                    start_char=0, end_char=1, content_hash=f"{i:032x}", text=f"chunk {i}",
                ).returning(chunks.c.id)
            ).scalar_one())
            for i in range(n)
        ]
    vecs = [[rng.gauss(0, 1) for _ in range(DIMS)] for _ in ids]
    return ids, vecs, note_ids


def _rankings(app: App, store: VectorStore, ids: list[int], vecs: list[list[float]], queries: list[list[float]],
              candidates: sa.Select[Any] | None, *, knn: bool = False) -> list[list[tuple[int, float]]]:
    with db.write_tx(app.engine) as c:
        store.create(c, DIMS)
        store.add(c, list(zip(ids, vecs, strict=True)))
        c.execute(index_state.update().values(updated_time=db.now_ms()))
    with db.read_tx(app.engine) as c:
        if knn:  # sqlite-vec's own k-NN, which the in-memory mirror stands in for
            assert isinstance(store, SqliteVecStore)
            return [store._knn(c, q, 10, candidates) for q in queries]
        return [store.nearest(c, q, 10, candidates) for q in queries]


def test_with_sqlite_vec_the_backend_is_sqlite_vec(vec_app: App) -> None:
    assert vector_store(vec_app.engine).backend == "sqlite-vec"
    assert SemanticIndex(vec_app.engine, local_model()).status().backend == "sqlite-vec"


@pytest.mark.parametrize("filtered", [False, True])
def test_sqlite_vec_ranks_like_the_numpy_backend(vec_app: App, filtered: bool) -> None:
    ids, vecs, note_ids = _random_chunks(vec_app, 300)
    rng = random.Random(11)
    queries = [[rng.gauss(0, 1) for _ in range(DIMS)] for _ in range(20)]
    candidates = sa.select(chunks.c.id).where(chunks.c.note_id.in_(note_ids[:2])) if filtered else None
    by_knn = _rankings(vec_app, SqliteVecStore(), ids, vecs, queries, candidates, knn=True)
    by_vec = _rankings(vec_app, SqliteVecStore(), ids, vecs, queries, candidates)
    by_numpy = _rankings(vec_app, NumpyVectorStore(), ids, vecs, queries, candidates)
    allowed = {i for n, i in enumerate(ids) if n % 5 < 2} if filtered else set(ids)
    for a, b, c in zip(by_knn, by_vec, by_numpy, strict=True):
        assert len(a) == 10
        assert [cid for cid, _ in a] == [cid for cid, _ in b] == [cid for cid, _ in c]
        assert {cid for cid, _ in a} <= allowed
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5)
        assert [s for _, s in b] == pytest.approx([s for _, s in c], abs=1e-5)


def test_the_mirror_of_the_sqlite_vec_table_follows_adds_and_deletes(vec_app: App) -> None:
    ids, vecs, _ = _random_chunks(vec_app, 40)
    store = SqliteVecStore()
    with db.write_tx(vec_app.engine) as c:
        store.create(c, DIMS)
        store.add(c, list(zip(ids[:30], vecs[:30], strict=True)))
        c.execute(index_state.update().values(updated_time=1))
    with db.read_tx(vec_app.engine) as c:
        assert store.nearest(c, vecs[35], 1)[0][0] != ids[35]
        assert store.nearest(c, vecs[5], 1)[0][0] == ids[5]
    with db.write_tx(vec_app.engine) as c:
        store.add(c, list(zip(ids[30:], vecs[30:], strict=True)))
        c.execute(chunks.delete().where(chunks.c.id == ids[5]))
        store.remove(c, [ids[5]])
        c.execute(index_state.update().values(updated_time=2))
    with db.read_tx(vec_app.engine) as c:
        assert store.nearest(c, vecs[35], 1)[0][0] == ids[35]
        assert ids[5] not in {cid for cid, _ in store.nearest(c, vecs[5], 40)}


def _vector_rows(app: App) -> int:
    with app.engine.connect() as c:
        return int(c.exec_driver_sql(f"SELECT count(*) FROM {VECTORS}").scalar_one())


def test_vectors_of_edited_trashed_and_purged_notes_leave_the_sqlite_vec_table(vec_app: App) -> None:
    ws = vec_app.workspace
    index = SemanticIndex(vec_app.engine, local_model())
    basil = ws.create_note("Basil", "# Basil\n\nWater it every morning.\n\n## Pests\n\nAphids under the leaves.")
    mint = ws.create_note("Mint", "Mint spreads everywhere; keep it in a pot.")
    index.sync()
    assert _vector_rows(vec_app) == index.status().chunks > 0
    ws.update_note(mint.id, body="Mint wants shade and damp soil.")
    ws.delete_note(basil.id)
    index.sync()
    assert _vector_rows(vec_app) == index.status().chunks
    ws.purge(basil.id)
    ws.delete_note(mint.id)
    ws.purge(mint.id)
    index.sync()
    assert _vector_rows(vec_app) == index.status().chunks == 0


def test_an_index_of_numpy_blobs_moves_to_sqlite_vec_without_embedding_again(vec_app: App) -> None:
    ws = vec_app.workspace
    ws.create_note("Lisbon trip", "We took the train from Porto to Lisbon and stayed by the river.")
    ws.create_note("Basil", "Basil wilts when the soil dries out; water it every morning.")
    before = SemanticIndex(vec_app.engine, local_model())
    before.store = NumpyVectorStore()
    before.sync()
    assert before.status().backend == "numpy"
    emb = Counting()
    after = SemanticIndex(vec_app.engine, emb)
    after.sync()
    assert emb.documents == 0
    assert after.store.backend == "sqlite-vec"
    assert [h.title for h in after.search("a railway journey", limit=1).hits] == ["Lisbon trip"]
    with vec_app.engine.connect() as c:
        assert after.store.holds(c)
