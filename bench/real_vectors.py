"""Fill a workspace's semantic index with synthetic vectors of the real model's dimension.

    python -m bench.real_vectors HOME [--bases 256]

Embedding 100,000 real notes with the real model takes hours, so the vector search at that
size is measured over vectors made up here, while queries are still embedded for real by the
server. Every note is chunked as the index chunks it, the chunks and their vectors are written
through the vector store (``VectorStore.create``/``add``), and the index is marked as built
for the real embedder (its name, its dimension) and current with the change feed, so
``noteloom serve`` sees nothing left to do.

Random vectors would all sit near cosine 0 from any real query, below every relevance
threshold, and the semantic arm would then hydrate no hit at all. So a few hundred real
chunks are embedded for real (``--bases``), and each synthetic vector is one of them, picked
by the chunk's hash, plus noise: queries then score chunks as they would real ones.
Prints one JSON line: the embedder, its dimension, notes and chunks indexed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class SyntheticEmbedder:
    """The real embedder's name and dimension; vectors near a few real ones."""

    def __init__(self, name: str, bases: Sequence[Sequence[float]], noise: float = 0.6) -> None:
        import numpy as np

        self.name = name
        self._bases = np.asarray(bases, dtype=np.float32)
        self.dimensions = int(self._bases.shape[1])
        self._noise = noise
        self._rng = np.random.default_rng(42)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        picks = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "big") % len(self._bases)
                 for t in texts]
        noise = self._rng.standard_normal((len(texts), self.dimensions)).astype(np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        vectors = self._bases[picks] * (1.0 - self._noise) + noise * self._noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        out: list[list[float]] = vectors.tolist()
        return out

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("synthetic vectors are for documents; the server embeds queries for real")


def fill(home: Path, bases: int) -> dict[str, Any]:
    import sqlalchemy as sa

    from noteloom import db
    from noteloom.app import open_app
    from noteloom.chunks import chunk_note
    from noteloom.config import load_settings
    from noteloom.semantic import SemanticIndex

    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        index = app.services.get("semantic")
        if not isinstance(index, SemanticIndex):
            raise SystemExit("semantic search is off in this workspace (is the `embeddings` extra installed?)")
        real = index.embedder
        # A sample of real chunks, spread over the vault, embedded for real.
        n = db.notes
        rng = random.Random(42)
        with db.read_tx(app.engine) as conn:
            ids = list(conn.execute(sa.select(n.c.id).where(n.c.deleted_time.is_(None)).order_by(n.c.seq)).scalars())
            picked = rng.sample(ids, min(len(ids), bases))
            rows = conn.execute(sa.select(n.c.id, n.c.title, n.c.body).where(n.c.id.in_(picked))).all()
        texts = [c.text for r in rows for c in chunk_note(r.id, r.title, r.body, index.spec)]
        texts = rng.sample(texts, min(len(texts), bases))
        synthetic = SyntheticEmbedder(real.name, real.embed_documents(texts))
        notes, n_chunks = _write(app.engine, index, synthetic)
        status = index.status()
        if status.state != "idle" or status.chunks != n_chunks:
            raise SystemExit(f"the index did not end built: {status.as_dict()}")
        return {"embedder": real.name, "dimensions": status.dimensions, "notes": notes,
                "chunks": status.chunks, "chunker": index.spec.key, "backend": status.backend}
    finally:
        app.close()


def _write(engine: Any, index: Any, embedder: SyntheticEmbedder, batch: int = 500) -> tuple[int, int]:
    """Every live note chunked as the index chunks it, its chunks and vectors written through
    the vector store, and the index marked as built for ``embedder`` and current with the feed.
    (``SemanticIndex.sync`` writes one note per transaction: 168 s for 2,000 notes on a loaded machine.)"""
    import sqlalchemy as sa

    from noteloom import db
    from noteloom.chunks import chunk_note
    from noteloom.semantic.index import _chunk_values  # the index's own row form of a chunk
    from noteloom.vectors import chunks, index_state

    n = db.notes
    with db.write_tx(engine) as conn:
        conn.execute(chunks.delete())
        conn.execute(index_state.delete())
        index.store.create(conn, embedder.dimensions)
    last, next_id, notes, written = 0, 1, 0, 0
    while True:
        with db.read_tx(engine) as conn:
            rows = conn.execute(
                sa.select(n.c.seq, n.c.id, n.c.title, n.c.body, n.c.deleted_time)
                .where(n.c.seq > last).order_by(n.c.seq).limit(batch)
            ).all()
        if not rows:
            break
        last = int(rows[-1].seq)
        live = [r for r in rows if r.deleted_time is None]
        parts = [c for r in live for c in chunk_note(r.id, r.title, r.body, index.spec)]
        vectors = embedder.embed_documents([c.text for c in parts])
        ids = range(next_id, next_id + len(parts))
        with db.write_tx(engine) as conn:
            if parts:
                conn.execute(chunks.insert(), [{"id": i, "note_id": c.note_id, **_chunk_values(c)}
                                               for i, c in zip(ids, parts, strict=True)])
                index.store.add(conn, list(zip(ids, vectors, strict=True)))
        next_id += len(parts)
        notes += len(live)
        written += len(parts)
    with db.write_tx(engine) as conn:
        top = conn.execute(sa.select(sa.func.max(db.note_changes.c.seq))).scalar()
        t = db.now_ms()
        conn.execute(index_state.insert(), {
            "id": 1, "model": embedder.name, "dimensions": embedder.dimensions, "chunker": index.spec.key,
            "feed_cursor": int(top or 0), "backfill_seq": None, "created_time": t, "updated_time": t,
        })
    return notes, written


def describe(home: Path) -> dict[str, Any]:
    """The embedder and chunker the workspace's index would use (the model is not loaded)."""
    from noteloom.app import open_app
    from noteloom.config import load_settings
    from noteloom.semantic import SemanticIndex

    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        index = app.services.get("semantic")
        if not isinstance(index, SemanticIndex):
            return {"embedder": None, "chunker": None}
        return {"embedder": index.model, "chunker": index.spec.key}
    finally:
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--bases", type=int, default=256, help="Real chunks embedded to build the vectors around.")
    parser.add_argument("--describe", action="store_true", help="Only print the embedder and chunker in use.")
    args = parser.parse_args()
    print(json.dumps(describe(args.home) if args.describe else fill(args.home, args.bases)), flush=True)


if __name__ == "__main__":
    main()
