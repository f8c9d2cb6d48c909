"""The in-memory copy of the SQLite vectors holds int8 codes and sign bits, not float32, and
still ranks as the exact search does: a small index keeps its float32 vectors too and ranks
exactly; past that, scores are within 0.01 of the exact cosine and the ranking holds at least
97% of the exact top 20 once the index outgrows the shortlist of the sign-bit pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom import vectors as vectors_module
from noteloom.app import App
from noteloom.vectors import NumpyVectorStore, _Mirror, _Rows, chunks, index_state
from vector_support import clustered, queries_near

DIMS = 384


def _fill(app: App, vectors: Any, notes: int = 10) -> tuple[NumpyVectorStore, list[int], list[str]]:
    ws = app.workspace
    note_ids = [ws.create_note(f"note {i}", "text").id for i in range(notes)]
    store = NumpyVectorStore()
    with db.write_tx(app.engine) as c:
        c.execute(
            index_state.insert(),
            {"id": 1, "model": "m", "dimensions": DIMS, "chunker": "c", "feed_cursor": 0,
             "backfill_seq": None, "created_time": 0, "updated_time": 0},
        )
        store.create(c, DIMS)
        c.execute(
            chunks.insert(),
            [{"note_id": note_ids[i % notes], "ordinal": i, "section_path": "0", "heading": "", "heading_path": "[]",
              "start_char": 0, "end_char": 1, "content_hash": f"{i:032x}", "text": f"chunk {i}"}
             for i in range(len(vectors))],
        )
        ids = list(c.execute(sa.select(chunks.c.id).order_by(chunks.c.id)).scalars())
        for start in range(0, len(ids), 5000):
            store.add(c, list(zip(ids[start : start + 5000], vectors[start : start + 5000].tolist(), strict=True)))
    return store, ids, note_ids






def _exact(vectors: Any, ids: list[int], q: Any, k: int) -> list[tuple[int, float]]:
    scores = vectors @ (q / np.linalg.norm(q))
    top = np.argsort(-scores, kind="stable")[:k]
    return [(ids[i], float(scores[i])) for i in top]


def test_a_large_copy_holds_under_a_third_of_the_float32_bytes(int8_only: None) -> None:
    rng = np.random.default_rng(1)
    unit = clustered(rng, 1000, DIMS)
    rows = _Rows(DIMS)
    rows.append(np.arange(1, 1001, dtype=np.int64), unit)
    rows.append(np.arange(1001, 1002, dtype=np.int64), unit[:1])
    assert rows.exact is None  # past the bound: no float32 copy
    held = sum(a[: rows.n].nbytes for a in (rows.ids, rows.codes, rows.scales))
    held += rows.bits[:, : rows.n].nbytes
    assert held <= rows.n * (DIMS * 4) * 0.3  # 437 bytes a chunk against 1,536
    # Each code times its scale gives the unit vector back to within half a step.
    back = rows.codes[:1000].astype(np.float32) * rows.scales[:1000, None]
    assert np.abs(back - unit).max() <= rows.scales.max() / 2 + 1e-7


def test_a_small_index_ranks_exactly_as_float32(app: App) -> None:
    rng = np.random.default_rng(2)
    vectors = clustered(rng, 1500, DIMS)
    store, ids, _ = _fill(app, vectors)
    with db.read_tx(app.engine) as c:
        for q in queries_near(rng, vectors, 20):
            got = store.nearest(c, q.tolist(), 20)
            want = _exact(vectors, ids, q, 20)
            assert [cid for cid, _ in got] == [cid for cid, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.fixture
def int8_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past this many chunks the copy keeps no float32 vectors (the real bound is 32,768)."""
    monkeypatch.setattr(vectors_module, "_EXACT_MAX", 1000)


def test_past_the_shortlist_the_ranking_stays_exact_within_tolerance(app: App, int8_only: None) -> None:
    """30,000 vectors, so the sign-bit pass picks a shortlist of 2,048 of them and the int8
    codes score it: over 30 queries about what the notes hold, the top 20 hold at least 97%
    of the exact top 20, with scores within 0.01 of the exact ones. (Among chunks all near
    cosine 0 to a query, below every relevance floor, the sign bits tell too little and the
    order there is approximate.)"""
    rng = np.random.default_rng(3)
    vectors = clustered(rng, 30_000, DIMS)
    store, ids, _ = _fill(app, vectors, notes=50)
    kept = 0
    with db.read_tx(app.engine) as c:
        queries = queries_near(rng, vectors, 30)
        for q in queries:
            got = store.nearest(c, q.tolist(), 20)
            want = _exact(vectors, ids, q, 20)
            kept += len({cid for cid, _ in got} & {cid for cid, _ in want})
            exact = dict(_exact(vectors, ids, q, len(ids)))
            assert [s for _, s in got] == pytest.approx([exact[cid] for cid, _ in got], abs=0.01)
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert kept / (20 * len(queries)) >= 0.97


def test_within_a_filter_past_the_shortlist_the_ranking_stays_exact_within_tolerance(
    app: App, int8_only: None
) -> None:
    rng = np.random.default_rng(4)
    vectors = clustered(rng, 30_000, DIMS)
    store, ids, note_ids = _fill(app, vectors, notes=10)
    allowed_notes = note_ids[:4]  # 40% of the chunks: 12,000, past the shortlist
    allowed = [i for n, i in enumerate(ids) if n % 10 < 4]
    sub = vectors[[n for n in range(len(ids)) if n % 10 < 4]]
    candidates = sa.select(chunks.c.id).where(chunks.c.note_id.in_(allowed_notes))
    kept = 0
    with db.read_tx(app.engine) as c:
        queries = queries_near(rng, sub, 20)
        for q in queries:
            got = store.nearest(c, q.tolist(), 20, candidates)
            assert {cid for cid, _ in got} <= set(allowed)
            kept += len({cid for cid, _ in got} & {cid for cid, _ in _exact(sub, allowed, q, 20)})
    assert kept / (20 * len(queries)) >= 0.97


def test_the_copy_follows_appends_and_deletes_without_reading_everything_again(app: App) -> None:
    rng = np.random.default_rng(5)
    vectors = clustered(rng, 3000, DIMS)
    store, ids, _ = _fill(app, vectors[:2000])
    with db.read_tx(app.engine) as c:
        assert store.nearest(c, vectors[10].tolist(), 1)[0][0] == ids[10]
    mirror: _Mirror = store._mirror
    first = mirror._rows
    assert first is not None and first.n == 2000
    with db.write_tx(app.engine) as c:
        cids = [int(c.execute(
            chunks.insert().values(note_id=app.workspace.list_notes(limit=1)[0].id, ordinal=i, section_path="0",
                                   heading="", heading_path="[]", start_char=0, end_char=1,
                                   content_hash=f"x{i:031x}", text="more").returning(chunks.c.id)
        ).scalar_one()) for i in range(1000)]
        store.add(c, list(zip(cids, vectors[2000:].tolist(), strict=True)))
        c.execute(index_state.update().values(updated_time=1))
    with db.read_tx(app.engine) as c:
        assert store.nearest(c, vectors[2500].tolist(), 1)[0][0] == cids[500]
    assert mirror._rows is first and first.n == 3000  # appended in place
    with db.write_tx(app.engine) as c:
        c.execute(chunks.delete().where(chunks.c.id == ids[10]))
        c.execute(index_state.update().values(updated_time=2))
    with db.read_tx(app.engine) as c:
        assert ids[10] not in {cid for cid, _ in store.nearest(c, vectors[10].tolist(), 50)}
    assert mirror._rows is not None and mirror._rows.n == 2999
