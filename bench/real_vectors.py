"""Fill a workspace's semantic index with synthetic vectors of the real model's dimension.

    python -m bench.real_vectors HOME [--bases 256]

Embedding 100,000 real notes with the real model takes hours, so the vector search at that
size is measured over vectors made up here, while queries are still embedded for real by the
server. The index is filled through ``SemanticIndex.sync`` itself, with its embedder swapped
for one that has the real embedder's name and dimension: the notes are chunked as always,
the chunks and vectors are written through the vector store, and the index ends marked as
built for the real embedder, so ``noteloom serve`` sees nothing left to do.

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
import sys
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
        index.embedder = SyntheticEmbedder(real.name, real.embed_documents(texts))
        index.notes_per_step = 256
        index.chunks_per_batch = 4096
        index.rebuild()
        notes = index.sync()
        status = index.status()
        if status.state != "idle":
            raise SystemExit(f"the index did not end built: {status.as_dict()}")
        return {"embedder": real.name, "dimensions": status.dimensions, "notes": notes,
                "chunks": status.chunks, "chunker": index.spec.key, "backend": status.backend}
    finally:
        app.close()


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
    sys.exit(main())
