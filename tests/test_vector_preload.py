"""The vectors' in-memory copy is read at server start, on a thread of its own: a search during
the read answers exactly from the table (sqlite-vec's k-NN) instead of waiting for it, readiness
is an event, and once read the copy follows every write of the index."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom import vectors as vectors_module
from noteloom.app import App
from noteloom.semantic import SemanticIndex
from noteloom.vectors import SqliteVecStore, chunks, index_state, vector_store

DIMS = 64
WAIT_S = 30.0


class WordsEmbedder:
    """Deterministic and offline: a text's vector is the sum of its words' hashed directions,
    so texts sharing words are near and a query finds the notes that hold its words."""

    name = "test:words"
    dimensions = DIMS

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(DIMS, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v += np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
        norm = float(np.linalg.norm(v))
        return (v / norm if norm else v).tolist()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _sqlite_vec(app: App) -> SqliteVecStore:
    store = vector_store(app.engine)
    if not isinstance(store, SqliteVecStore):
        pytest.skip("sqlite-vec cannot be loaded here")
    return store


def _fill(app: App, store: SqliteVecStore, vectors: Any) -> list[int]:
    note = app.workspace.create_note("note", "text").id
    with db.write_tx(app.engine) as c:
        c.execute(index_state.insert(), {
            "id": 1, "model": "m", "dimensions": vectors.shape[1], "chunker": "c", "feed_cursor": 0,
            "backfill_seq": None, "created_time": 0, "updated_time": 0,
        })
        store.create(c, vectors.shape[1])
        c.execute(chunks.insert(), [
            {"note_id": note, "ordinal": i, "section_path": "0", "heading": "", "heading_path": "[]",
             "start_char": 0, "end_char": 1, "content_hash": f"{i:032x}", "text": f"chunk {i}"}
            for i in range(len(vectors))
        ])
        ids = list(c.execute(sa.select(chunks.c.id).order_by(chunks.c.id)).scalars())
        store.add(c, list(zip(ids, vectors.tolist(), strict=True)))
    return ids


def _exact(vectors: Any, ids: list[int], q: Any, k: int) -> list[int]:
    scores = vectors @ (q / np.linalg.norm(q))
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_a_search_during_the_read_answers_exactly_from_the_table_and_then_from_the_copy(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _sqlite_vec(app)
    monkeypatch.setattr(vectors_module, "_REFRESH_BATCH", 500)  # several batches for 3,000 vectors
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((3000, 48)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = _fill(app, store, vectors)
    queries = vectors[rng.integers(0, len(vectors), 10)] + 0.3 * rng.standard_normal((10, 48)).astype(np.float32)

    reading, go_on = threading.Event(), threading.Event()

    def held_after_first_batch() -> bool:
        reading.set()
        go_on.wait(WAIT_S)
        return False

    def load() -> None:
        with db.read_tx(app.engine) as c:
            store.preload(c, held_after_first_batch)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        assert reading.wait(WAIT_S)
        assert not store.ready.is_set()
        with db.read_tx(app.engine) as c:
            for q in queries:  # the copy holds 500 of 3,000 rows: the table answers, exactly
                assert [cid for cid, _ in store.nearest(c, q.tolist(), 20)] == _exact(vectors, ids, q, 20)
    finally:
        go_on.set()
        loader.join(WAIT_S)
    assert store.ready.wait(WAIT_S)

    def no_table_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the copy is read: searches answer from it")

    monkeypatch.setattr(store, "_knn", no_table_search)
    with db.read_tx(app.engine) as c:
        for q in queries:  # 3,000 rows: past no bound, the copy ranks exactly
            assert [cid for cid, _ in store.nearest(c, q.tolist(), 20)] == _exact(vectors, ids, q, 20)


def test_a_stopped_read_is_taken_up_where_it_stopped(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _sqlite_vec(app)
    monkeypatch.setattr(vectors_module, "_REFRESH_BATCH", 400)
    rng = np.random.default_rng(8)
    vectors = rng.standard_normal((1000, 16)).astype(np.float32)
    ids = _fill(app, store, vectors)
    with db.read_tx(app.engine) as c:
        store.preload(c, lambda: True)  # stops after its first batch
    assert not store.ready.is_set()
    rows = store._mirror._rows
    assert rows is not None and rows.n == 400
    with db.read_tx(app.engine) as c:
        assert store.nearest(c, vectors[900].tolist(), 1)[0][0] == ids[900]
    assert store.ready.is_set() and store._mirror._rows is rows and rows.n == 1000


def test_the_worker_reads_the_copy_at_start_and_the_copy_follows_writes(app: App) -> None:
    _sqlite_vec(app)
    ws = app.workspace
    lisbon = ws.create_note("Lisbon trip", "We took the train from Porto to Lisbon.")
    basil = ws.create_note("Basil care", "Water the basil every morning.")
    SemanticIndex(app.engine, WordsEmbedder()).sync()
    index = SemanticIndex(app.engine, WordsEmbedder(), poll_interval=0.05)  # a fresh process's copy
    assert not index.vectors_ready.is_set()

    def found(query: str) -> list[str]:
        return [h.title for h in index.search(query, limit=3, relevance="loose", one_per_note=True).hits]

    async def until(check: Any) -> None:
        with anyio.fail_after(WAIT_S):
            while not await anyio.to_thread.run_sync(check):
                await anyio.sleep(0.05)

    async def main() -> None:
        async with index.running():
            with anyio.fail_after(WAIT_S):
                assert await anyio.to_thread.run_sync(index.vectors_ready.wait, WAIT_S)
            rows = index.store._mirror._rows  # type: ignore[attr-defined]
            with db.read_tx(app.engine) as c:
                held = c.execute(sa.select(sa.func.count()).select_from(chunks)).scalar_one()
            assert rows is not None and rows.n == held  # read before any search asked
            assert found("train to Lisbon")[0] == "Lisbon trip"
            ws.create_note("Pesto", "Pesto: blend basil with pine nuts and garlic.")
            await until(lambda: "Pesto" in found("pine nuts garlic"))
            ws.update_note(lisbon.id, body="A ferry across the river Tagus.")
            await until(lambda: found("ferry Tagus river")[:1] == ["Lisbon trip"])
            ws.delete_note(basil.id)
            await until(lambda: "Basil care" not in found("water basil every morning"))

    anyio.run(main)
