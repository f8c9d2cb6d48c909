"""Memory context: does the right memory reach the prompt, at what size, and how fast.

Run from the repository root::

    .venv/bin/python -m bench.bench_memory [--personal 1500] [--shared 100] [--messages 150]
                                           [--scale 10000] [--repeats 200] [--db sqlite|URL]

- **Selection** (``bench/eval/memories.py``, fixed seed): one user's personal memories and
  the workspace's shared ones, and messages each with its right memory — half share a
  salient word with it, half share none. With the default caps, per half: how often the
  right memory's body is in layer 1, its title in layer 2 (the titles-only index), either;
  the characters of layer-1 text and of the whole memory block per turn. Another user's
  memories are in the database too and must never appear.
- **Product path**: the same selection with the memories embedded as the product embeds
  them when semantic search is on: ``MemoryVectors`` (title and the body's opening) on its
  background worker, with the packaged local model as ``local_embedder`` builds it; the
  time to embed them all in the background, and what a turn adds (the message's vector and
  the cosine over the user's memories) beside the terms-only build.
- **Build time**: the context for each message over ``--scale`` memories of one user,
  the index warm (built once per process and rebuilt when the memories change); the
  first (cold) build is printed beside it. Wall-clock ms, with the load average.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa
from anyio import to_thread

from bench.eval.memories import Ask, MemorySet, generate
from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.embedders import local_embedder, local_model_available
from noteloom.memory.context import ContextBuilder, Limits, Similarity, Vectors
from noteloom.memory.similarity import OPENING, MemoryVectors
from noteloom.memory.tables import memories

LAYER1_TARGET = 0.80
EITHER_TARGET = 0.90
BUILD_TARGET_MS = 10.0
#: Memories a similarity names per message (the closest).
SIMILAR_TOP = 200


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _app(home: Path, url: str | None) -> App:
    env = {"NOTELOOM_HOME": str(home)}
    if url:
        env["NOTELOOM_DATABASE_URL"] = url
    return open_app(load_settings(env), load_entry_points=False)


def _store(app: App, user_id: str, data: MemorySet) -> dict[str, str]:
    """The memories as rows of ``user_id`` (shared ones the workspace's); key -> id."""
    ids: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for m in data.memories:
        ids[m.key] = db.new_id()
        rows.append({"id": ids[m.key], "scope": m.scope, "user_id": user_id if m.scope == "personal" else None,
                     "title": m.title, "content": m.content, "tags": list(m.tags), "source": "user",
                     "created_by": user_id, "created_time": m.updated, "updated_time": m.updated})
    with db.write_tx(app.engine) as c:
        for i in range(0, len(rows), 500):
            c.execute(memories.insert(), rows[i:i + 500])
    return ids


def _other_user(app: App) -> str:
    """A second user whose memories share the messages' words: none may reach the owner."""
    uid = db.new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": "other", "is_owner": False, "created_time": db.now_ms()})
        c.execute(memories.insert(), [
            {"id": db.new_id(), "scope": "personal", "user_id": uid, "title": f"Other's note on {w}",
             "content": f"{w} — private to the other user.", "tags": [], "source": "user", "created_by": uid,
             "created_time": 1_800_000_000_000, "updated_time": 1_800_000_000_000}
            for w in ("Heron", "Basalt", "birthday", "coffee", "seafood paella", "refund", "Maya")
        ])
    return uid


def _similarity(data: MemorySet, ids: dict[str, str]) -> Similarity | None:
    """Cosine similarity with the packaged local model (each memory's title and opening), or
    ``None`` when the model is not installed."""
    if not local_model_available():
        return None
    import numpy as np

    embedder = local_embedder({}, os.environ)
    order = [ids[m.key] for m in data.memories]
    vectors = np.asarray(embedder.embed_documents([f"{m.title}\n{m.content[:1000]}" for m in data.memories]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def similar(message: str) -> dict[str, float]:
        q = np.asarray(embedder.embed_query(message))
        scores = vectors @ (q / np.linalg.norm(q))
        top = np.argsort(-scores)[:SIMILAR_TOP]
        return {order[i]: float(scores[i]) for i in top}

    return similar


def bench_selection(app: App, personal: int, shared: int, count: int, semantic: bool) -> None:
    data = generate(personal=personal, shared=shared, messages=count)
    owner = app.workspace.ensure_owner()
    ids = _store(app, owner.id, data)
    other = _other_user(app)
    with db.read_tx(app.engine) as c:
        foreign = set(c.execute(sa.select(memories.c.id).where(memories.c.user_id == other)).scalars())
    builder = ContextBuilder(Limits())
    print(f"memory selection: {personal} personal and {shared} shared memories, {count} messages, caps "
          f"{Limits().max_full} bodies / {Limits().max_chars} characters / {Limits().max_index} personal titles "
          f"[{_load()}]")
    _selection(app, builder, owner.id, data, ids, foreign, None, "terms only")
    if semantic:
        t0 = time.perf_counter()
        similar = _similarity(data, ids)
        if similar is None:
            print("  (with meaning: the local model is not installed; skipped)")
            return
        print(f"  (with meaning: {len(data.memories)} memories embedded by the local model in "
              f"{time.perf_counter() - t0:.0f} s)")
        _selection(app, builder, owner.id, data, ids, foreign, similar, "terms and meaning")
        anyio.run(_product_path, app, builder, owner.id, data, ids, foreign)


async def _product_path(app: App, builder: ContextBuilder, user_id: str, data: MemorySet, ids: dict[str, str],
                        foreign: set[str]) -> None:
    """The selection as the product makes it: ``MemoryVectors`` embedding in the background."""
    embedder = local_embedder({}, os.environ)
    t0 = time.perf_counter()
    await to_thread.run_sync(lambda: embedder.dimensions)  # the model loads once per process
    loaded = time.perf_counter() - t0
    # The semantic index's cache of query vectors, as the app hands it over.
    vectors = MemoryVectors(embedder, query_vector=functools.lru_cache(1024)(embedder.embed_query))
    async with vectors.running():
        t0 = time.perf_counter()
        with db.read_tx(app.engine) as c:
            first = builder.build(c, user_id, data.messages[-1].text, vectors=vectors)
        cold_ms = (time.perf_counter() - t0) * 1000
        queued = vectors.pending()
        t0 = time.perf_counter()
        await to_thread.run_sync(vectors.idle.wait)
        took = time.perf_counter() - t0
        print(f"  (product path: the local model loaded in {loaded:.1f} s; the first turn took {cold_ms:.0f} ms with "
              f"no vector ready ({len(first.full)} bodies by terms) and queued {queued} memories, embedded in the "
              f"background, {OPENING} characters of each body, in {took:.1f} s [{_load()}])")
        _selection(app, builder, user_id, data, ids, foreign, None, "product path", vectors=vectors)
        plain: list[float] = []
        added: list[float] = []
        for ask in data.messages:  # the product's cost: a message embedded once, then scored
            with db.read_tx(app.engine) as c:
                t0 = time.perf_counter()
                builder.build(c, user_id, ask.text + " (timed)")
                t1 = time.perf_counter()
                builder.build(c, user_id, ask.text + " (timed)", vectors=vectors)
                t2 = time.perf_counter()
            plain.append((t1 - t0) * 1000)
            added.append((t2 - t1) * 1000 - (t1 - t0) * 1000)
        print(f"  product path, per turn: terms only p50 {statistics.median(plain):.1f} ms; with meaning adds "
              f"p50 {statistics.median(added):.1f} ms, max {max(added):.1f} ms (the message's vector, not cached, "
              f"and the cosine over {len(data.memories)} memories) [{_load()}]")


def _selection(app: App, builder: ContextBuilder, user_id: str, data: MemorySet, ids: dict[str, str],
               foreign: set[str], similar: Similarity | None, how: str, *, vectors: Vectors | None = None) -> None:
    rows: dict[bool, list[tuple[bool, bool, int, int]]] = {True: [], False: []}
    for ask in data.messages:
        with db.read_tx(app.engine) as c:
            ctx = builder.build(c, user_id, ask.text, similarity=similar, vectors=vectors)
        full = [e.id for e in ctx.full]
        index = [e.id for e in ctx.index]
        assert not (set(full) | set(index)) & foreign, "another user's memory reached the context"
        right = ids[ask.right]
        rows[ask.shares_word].append((right in full, right in index, ctx.full_chars, len(ctx.text(_plain))))
    for shares, label in ((True, "sharing a word"), (False, "sharing no word")):
        got = rows[shares]
        n = len(got)
        l1 = sum(r[0] for r in got) / n
        l2 = sum(r[1] for r in got) / n
        either = sum(r[0] or r[1] for r in got) / n
        print(f"  {how}, {n} messages {label}: body in layer 1 {l1:.0%}, title in layer 2 {l2:.0%}, either {either:.0%}; "
              f"layer-1 text median {statistics.median(r[2] for r in got):.0f} max {max(r[2] for r in got)} chars, "
              f"memory block median {statistics.median(r[3] for r in got):.0f} max {max(r[3] for r in got)} chars "
              f"[{_load()}]")
    every = rows[True] + rows[False]
    l1_word = sum(r[0] for r in rows[True]) / max(len(rows[True]), 1)
    either_all = sum(r[0] or r[1] for r in every) / len(every)
    worst = max(r[2] for r in every)
    print(f"  {how}, targets: layer 1 for the word-sharing half {l1_word:.0%} (≥ {LAYER1_TARGET:.0%}), layer 1 or 2 for "
          f"all {either_all:.0%} (≥ {EITHER_TARGET:.0%}), layer-1 text at most {worst} chars (≤ {Limits().max_chars}) "
          f"[{_load()}]")


def bench_build(app: App, scale: int, repeats: int) -> None:
    data = generate(personal=scale - 100, shared=100, messages=150)
    owner = app.workspace.ensure_owner()
    _store(app, owner.id, data)
    builder = ContextBuilder(Limits())
    asks: list[Ask] = data.messages
    t0 = time.perf_counter()
    with db.read_tx(app.engine) as c:
        builder.build(c, owner.id, asks[0].text)
    cold = (time.perf_counter() - t0) * 1000
    times: list[float] = []
    for i in range(repeats):
        ask = asks[i % len(asks)]
        t0 = time.perf_counter()
        with db.read_tx(app.engine) as c:
            builder.build(c, owner.id, ask.text)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(f"memory context build, {scale} memories: p50 {statistics.median(times):.2f} ms, p95 {p95:.2f} ms "
          f"(target p50 < {BUILD_TARGET_MS:g}); first build (index cold) {cold:.0f} ms [{_load()}]")


def _plain(text: str) -> str:
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--personal", type=int, default=1500)
    parser.add_argument("--shared", type=int, default=100)
    parser.add_argument("--messages", type=int, default=150)
    parser.add_argument("--scale", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--no-semantic", action="store_true", help="skip the run with the local model")
    parser.add_argument("--db", default="sqlite", help="sqlite, or a PostgreSQL URL")
    args, _ = parser.parse_known_args()
    url = None if args.db == "sqlite" else args.db
    with tempfile.TemporaryDirectory() as tmp:
        app = _app(Path(tmp) / "selection", url)
        try:
            bench_selection(app, args.personal, args.shared, args.messages, not args.no_semantic)
        finally:
            app.close()
        app = _app(Path(tmp) / "build", url)
        try:
            bench_build(app, args.scale, args.repeats)
        finally:
            app.close()


if __name__ == "__main__":
    main()
