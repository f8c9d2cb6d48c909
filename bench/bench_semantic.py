"""Semantic search: retrieval quality and speed. ``python -m bench.bench_semantic [--quick]``.

Prints, with the local all-MiniLM-L6-v2 model on this machine:

1. recall@5 and MRR@10 of keyword, semantic and hybrid search per query kind on the
   evaluation set in ``bench/eval`` (torch fp32, torch int8, the default onnx int8 and the
   static model distilled from it);
2. embedding throughput in chunks per second and CPU seconds (the same four);
3. the time to index N notes of ``bench.corpus`` (10,000 unless ``--notes``;
   ``--quick`` indexes 1,000 and extrapolates);
4. the time from an edit to the note being found by semantic search (in the top
   five, with its new text), with the background worker running;
5. query latency (p50/p95) over 100,000 chunks: the vector search alone, a whole
   ``SemanticIndex.search`` including embedding the query (and again with the query's
   vector cached), hybrid search with filters (the semantic arm kept within the notes
   they allow), and the bytes a chunk takes in the in-memory vector copy.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from bench.corpus import generate, load
from noteloom.app import App, open_app
from noteloom.chunks import chunk_note
from noteloom.config import load_settings
from noteloom.embedders import (
    Embedder,
    LocalEmbedder,
    OnnxEmbedder,
    StaticEmbedder,
    default_cache_dir,
    static_runtime_available,
)
from noteloom.errors import QueryError
from noteloom.search import search_notes
from noteloom.semantic import SemanticIndex, hybrid_search

EVAL = Path(__file__).parent / "eval" / "eval.json"
KINDS = ("paraphrase", "keyword", "deep", "deep-chunk", "cross-language")


@contextmanager
def workspace() -> Iterator[App]:
    """A throwaway SQLite workspace with semantic search left to the caller."""
    with tempfile.TemporaryDirectory(prefix="noteloom-bench-") as home:
        (Path(home) / "noteloom.toml").write_text("[embeddings]\nenabled = false\n", encoding="utf-8")
        app = open_app(load_settings({"NOTELOOM_HOME": home}), load_entry_points=False)
        try:
            yield app
        finally:
            app.close()


def _rank(ids: list[str], relevant: set[str]) -> int | None:
    for i, nid in enumerate(ids):
        if nid in relevant:
            return i + 1
    return None


# -- 1. retrieval quality --------------------------------------------------------------------


def evaluate(embedder: Embedder, label: str) -> dict[str, dict[str, tuple[float, float]]]:
    data = json.loads(EVAL.read_text(encoding="utf-8"))
    with workspace() as app:
        ws = app.workspace
        with ws.write() as c:
            for n in data["notes"]:
                ws.create_note(n["title"], n["body"], id=n["id"], tags=n["tags"], conn=c)
        index = SemanticIndex(app.engine, embedder)
        started = time.perf_counter()
        index.sync()
        took = time.perf_counter() - started
        status = index.status()
        print(f"[{label}] indexed {status.indexed_notes} notes ({status.chunks} chunks) in {took:.1f} s")
        ranks: dict[str, dict[str, list[int | None]]] = {m: {k: [] for k in KINDS} for m in ("keyword", "semantic", "hybrid")}
        relevant_scores: list[float] = []
        other_scores: list[float] = []
        for q in data["queries"]:
            rel = set(q["relevant"])
            if q["kind"] in ("paraphrase", "deep"):
                # Cosine scores: the best chunk of the answer, and the best chunk of any other note.
                scored = index.search(q["text"], limit=50, relevance="loose", one_per_note=True).hits
                relevant_scores.extend(h.score for h in scored[:50] if h.note_id in rel)
                other_scores.extend(h.score for h in scored[:1] if h.note_id not in rel)
                other_scores.extend(h.score for h in scored[1:2] if scored[0].note_id in rel)
            try:
                kw = [h.id for h in search_notes(ws, q["text"], limit=10)]
            except QueryError:
                kw = []
            sem = [h.note_id for h in index.search(q["text"], limit=10, relevance="loose", one_per_note=True).hits]
            hyb = [h.id for h in hybrid_search(ws, index, q["text"], mode="hybrid", limit=10).hits]
            for mode, ids in (("keyword", kw), ("semantic", sem), ("hybrid", hyb)):
                ranks[mode][q["kind"]].append(_rank(ids, rel))
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for mode, by_kind in ranks.items():
        table[mode] = {}
        everything: list[int | None] = []
        for kind, rs in by_kind.items():
            table[mode][kind] = _metrics(rs)
            everything.extend(rs)
        table[mode]["all"] = _metrics(everything)
    _print_table(label, table, {k: len(v) for k, v in ranks["keyword"].items()})
    if relevant_scores and other_scores:
        def q(v: list[float], p: float) -> float:
            return sorted(v)[int(p * (len(v) - 1))]

        print(
            f"[{label}] cosine of the answer: p10 {q(relevant_scores, 0.1):.2f}, median {q(relevant_scores, 0.5):.2f}; "
            f"of the best other note: median {q(other_scores, 0.5):.2f}, p90 {q(other_scores, 0.9):.2f}"
        )
    return table


def _metrics(ranks: list[int | None]) -> tuple[float, float]:
    if not ranks:
        return (0.0, 0.0)
    recall5 = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = sum(1.0 / r for r in ranks if r is not None and r <= 10) / len(ranks)
    return recall5, mrr


def _print_table(label: str, table: dict[str, dict[str, tuple[float, float]]], counts: dict[str, int]) -> None:
    cols = [*KINDS, "all"]
    head = "".join(f"{c + f' ({counts.get(c, sum(counts.values()))})':>24}" for c in cols)
    print(f"[{label}] recall@5 / MRR@10{head}")
    for mode, row in table.items():
        cells = "".join(f"{row[c][0]:>15.2f} / {row[c][1]:.2f}" for c in cols)
        print(f"[{label}] {mode:<17}{cells}")


# -- 2. throughput ---------------------------------------------------------------------------------


def sample_chunks(n_notes: int, limit: int) -> list[str]:
    texts: list[str] = []
    for note in generate(n_notes, seed=3).iter_notes():
        texts.extend(c.text for c in chunk_note(note.id, note.title, note.body))
        if len(texts) >= limit:
            break
    return texts[:limit]


def throughput(embedder: Embedder, texts: list[str]) -> tuple[float, float]:
    """(chunks per second of wall time, CPU seconds for them all)."""
    embedder.embed_documents(texts[:8])  # warm up
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started), time.process_time() - cpu


# -- 3. indexing a corpus --------------------------------------------------------------------------


def index_corpus(embedder: Embedder, n: int) -> tuple[float, int, int, float]:
    """(wall seconds, notes, chunks, CPU seconds) of indexing ``n`` corpus notes."""
    with workspace() as app:
        load(app.workspace, generate(n, seed=0))
        index = SemanticIndex(app.engine, embedder, notes_per_step=64)
        index.load_model()
        started, cpu = time.perf_counter(), time.process_time()
        index.sync()
        took = time.perf_counter() - started
        s = index.status()
        return took, s.indexed_notes, s.chunks, time.process_time() - cpu


# -- 4. edit to findable --------------------------------------------------------------------------


def edit_latency(embedder: Embedder, rounds: int = 5) -> list[float]:
    out: list[float] = []
    with workspace() as app:
        ws = app.workspace
        load(ws, generate(300, seed=5))
        index = SemanticIndex(app.engine, embedder, poll_interval=0.2)
        index.sync()
        note = ws.create_note("Scratch", "Nothing here yet.")
        facts = [
            ("The zeppelin hangar tour starts at the north gate at nine.", "zeppelin hangar tour start time"),
            ("Grandma's quince paste needs four hours of slow stirring.", "how long to stir quince paste"),
            ("The kayak rental closes when the wind passes 30 km/h.", "kayak rental wind limit"),
            ("Our wifi password is on the fridge under the lighthouse magnet.", "where is the wifi password"),
            ("The piano tuner comes every second Thursday in March.", "when does the piano tuner come"),
        ]

        async def run() -> None:
            async with index.running():
                for body, query in facts[:rounds]:
                    await anyio.to_thread.run_sync(lambda b=body: ws.update_note(note.id, body=b))
                    started = time.perf_counter()
                    with anyio.fail_after(60):
                        while True:
                            hits = await anyio.to_thread.run_sync(
                                lambda q=query: index.search(q, limit=5, relevance="loose").hits
                            )
                            if any(h.note_id == note.id and h.snippet.startswith(body[:20]) for h in hits):
                                break
                            await anyio.sleep(0.02)
                    out.append(time.perf_counter() - started)

        anyio.run(run)
    return out


# -- 5. query latency at 100,000 chunks ------------------------------------------------------------


def query_latency(
    embedder: Embedder, n_chunks: int, queries: int = 50
) -> tuple[list[float], list[float], list[float], dict[str, tuple[float, float, float, float]]]:
    import numpy as np
    import sqlalchemy as sa

    from noteloom.vectors import chunks as chunk_table
    from noteloom.vectors import index_state

    rng = np.random.default_rng(0)
    dims = embedder.dimensions
    with workspace() as app:
        ws = app.workspace
        n_notes = n_chunks // 10
        load(ws, generate(n_notes, seed=9))
        index = SemanticIndex(app.engine, embedder)
        with ws.read() as c:
            note_ids = list(c.execute(sa.text("SELECT id FROM notes")).scalars())
        # Synthetic vectors: the cost of the search does not depend on what they mean.
        with ws.write() as c:
            index.store.create(c, dims)
            c.execute(
                index_state.insert(),
                {"id": 1, "model": index.model, "dimensions": dims, "chunker": index.spec.key,
                 "feed_cursor": 10**12, "backfill_seq": None, "created_time": 0, "updated_time": 0},
            )
            batch = 5000
            for start in range(0, n_chunks, batch):
                rows = [
                    {"note_id": note_ids[i % len(note_ids)], "ordinal": i, "section_path": "0", "heading": "",
                     "heading_path": "[]", "start_char": 0, "end_char": 10, "content_hash": f"{i:032x}",
                     "text": f"chunk {i}"}
                    for i in range(start, min(n_chunks, start + batch))
                ]
                c.execute(chunk_table.insert(), rows)
            ids = list(c.execute(sa.select(chunk_table.c.id).order_by(chunk_table.c.id)).scalars())
            vecs = rng.standard_normal((len(ids), dims)).astype(np.float32)
            for start in range(0, len(ids), batch):
                index.store.add(c, list(zip(ids[start : start + batch], vecs[start : start + batch].tolist(), strict=True)))
        query_vecs = rng.standard_normal((queries, dims)).astype(np.float32).tolist()
        with ws.read() as c:
            index.store.nearest(c, query_vecs[0], 10)  # the first query loads the vectors
        vector_only: list[float] = []
        for q in query_vecs:
            started = time.perf_counter()
            with ws.read() as c:
                index.store.nearest(c, q, 20)
            vector_only.append((time.perf_counter() - started) * 1000)
        words = ["garden", "invoice", "train", "recipe", "backup", "meeting", "budget", "python"]
        r = random.Random(1)
        texts: list[str] = []
        while len(texts) < min(queries, 56):  # distinct: each one runs the model
            text = " ".join(sorted(r.sample(words, 3)))
            if text not in texts:
                texts.append(text)
        whole: list[float] = []
        repeated: list[float] = []
        for out in (whole, repeated):  # the second round finds every query's vector cached
            for text in texts:
                started = time.perf_counter()
                index.search(text, limit=10, relevance="loose")
                out.append((time.perf_counter() - started) * 1000)
        filtered = filtered_latency(app, index, max(10, queries // 3))
        rows = getattr(getattr(index.store, "_mirror", None), "_rows", None)
        if rows is not None:
            held = rows.ids[: rows.n].nbytes + rows.codes[: rows.n].nbytes + rows.scales[: rows.n].nbytes
            held += rows.bits[:, : rows.n].nbytes
            print(f"   in-memory vector copy: {held / max(1, rows.n):.0f} bytes a chunk "
                  f"({held / 2**20:.0f} MB for {rows.n:,} chunks; float32 would be {dims * 4} bytes)")
    return vector_only, whole, repeated, filtered


#: Hybrid queries with filters, by how much of the workspace the filters allow.
FILTERED_QUERIES = {
    "no filter": "garden plan",
    "notebook: (small set)": "notebook:Cooking garden plan",
    "tag: (small set)": "tag:important garden plan",
    "type:todo (large set)": "type:todo garden plan",
    "-word (nearly all)": "garden plan -meeting",
    "description + notebook:": "how should I plan the garden this spring notebook:Travel",
}


def filtered_latency(app: App, index: SemanticIndex, rounds: int) -> dict[str, tuple[float, float, float, float]]:
    """Per query of ``FILTERED_QUERIES``: (share of chunks allowed, vector search p50 ms
    within them, whole hybrid_search p50 and p95 ms)."""
    import sqlalchemy as sa

    from noteloom.query import parse_query
    from noteloom.search import notes_allowed
    from noteloom.semantic.index import _candidates
    from noteloom.vectors import chunks as chunk_table

    ws = app.workspace
    out: dict[str, tuple[float, float, float, float]] = {}
    with ws.read() as c:
        total = int(c.execute(sa.select(sa.func.count()).select_from(chunk_table)).scalar_one())
    vector = index.embedder.embed_query("garden plan")
    for label, query in FILTERED_QUERIES.items():
        q = parse_query(query)
        with ws.read() as c:
            allowed = notes_allowed(c, q)
            candidates = _candidates(None, None, allowed)
            share = 1.0 if candidates is None else len(c.execute(candidates).all()) / max(1, total)
        vec_ms: list[float] = []
        whole_ms: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            with ws.read() as c:
                allowed = notes_allowed(c, q)
                index.store.nearest(c, vector, 40, _candidates(None, None, allowed))
            vec_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            hybrid_search(ws, index, query, mode="hybrid", limit=10)
            whole_ms.append((time.perf_counter() - started) * 1000)
        out[label] = (share, _pct(vec_ms, 0.5), _pct(whole_ms, 0.5), _pct(whole_ms, 0.95))
    return out


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def _timed(label: str, fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    out = fn()
    print(f"    ({label}: {time.perf_counter() - started:.1f} s)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_semantic")
    parser.add_argument("--quick", action="store_true", help="smaller runs (1,000 notes, int8 only for quality)")
    parser.add_argument("--notes", type=int, default=None, help="notes to index for the indexing time")
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks for the query latency")
    parser.add_argument("--only", default="", help="comma-separated parts: quality,throughput,index,edit,query")
    args, _ = parser.parse_known_args()
    parts = set(args.only.split(",")) if args.only else {"quality", "throughput", "index", "edit", "query"}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    fp32 = LocalEmbedder()
    int8 = LocalEmbedder(quantize=True)
    onnx = OnnxEmbedder(cache_dir=default_cache_dir(os.environ))
    # The static model distilled from it (runtime = "static"): the fast path, for its recall cost.
    static = [(StaticEmbedder(cache_dir=default_cache_dir(os.environ)), "static")] if static_runtime_available() else []
    print(f"model: all-MiniLM-L6-v2; torch threads: {_torch_threads()}; cores: {os.cpu_count()}", flush=True)

    if "quality" in parts:
        print("\n1. retrieval quality on bench/eval (single relevant note per query)")
        kinds = [(onnx, "onnx-int8")] if args.quick else [(fp32, "fp32"), (int8, "int8"), (onnx, "onnx-int8"), *static]
        for emb, label in kinds:
            _timed(f"eval {label}", lambda e=emb, lab=label: evaluate(e, lab))

    if "throughput" in parts:
        texts = sample_chunks(400, 200 if args.quick else 400)
        avg = statistics.mean(len(t) for t in texts)
        print(f"\n2. embedding throughput ({len(texts)} corpus chunks, {avg:.0f} characters on average)")
        for emb, label in ((fp32, "fp32"), (int8, "int8"), (onnx, "onnx-int8"), *static):
            rate, cpu = throughput(emb, texts)
            print(f"   {label}: {rate:.1f} chunks/s, {cpu:.1f} s CPU; load {os.getloadavg()[0]:.1f}", flush=True)

    if "index" in parts:
        n = args.notes or (1000 if args.quick else 10_000)
        print(f"\n3. indexing {n:,} corpus notes from scratch (onnx int8, the default)")
        took, notes, n_chunks, cpu = index_corpus(onnx, n)
        print(
            f"   {notes:,} notes, {n_chunks:,} chunks in {took:.0f} s, {cpu:.0f} s CPU "
            f"({n_chunks / took:.1f} chunks/s); load {os.getloadavg()[0]:.1f}"
        )
        if n < 10_000:
            print(f"   extrapolated to 10,000 notes: {took * 10_000 / n / 60:.1f} min")

    if "edit" in parts:
        print("\n4. edit -> found by semantic search (background worker, 300-note workspace)")
        lat = edit_latency(int8, 3 if args.quick else 5)
        print(f"   {', '.join(f'{x:.2f}' for x in lat)} s; median {statistics.median(lat):.2f} s")

    if "query" in parts:
        n_chunks = 20_000 if args.quick else args.chunks
        print(f"\n5. query latency over {n_chunks:,} chunks (SQLite)")
        vec, whole, repeated, filtered = query_latency(int8, n_chunks)
        print(f"   load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"   vector search: p50 {_pct(vec, 0.5):.1f} ms, p95 {_pct(vec, 0.95):.1f} ms")
        print(f"   whole search (embed query + vectors + rows): p50 {_pct(whole, 0.5):.1f} ms, p95 {_pct(whole, 0.95):.1f} ms")
        print(f"   the same queries again (vectors cached): p50 {_pct(repeated, 0.5):.1f} ms, p95 {_pct(repeated, 0.95):.1f} ms")
        print(f"   hybrid search with filters ({n_chunks // 10:,} notes; vector search = filter select + k-NN within it):")
        for label, (share, vec_p50, p50, p95) in filtered.items():
            print(
                f"     {label:<26} {share:>6.1%} of chunks allowed: vector search p50 {vec_p50:.1f} ms; "
                f"whole hybrid p50 {p50:.1f} ms, p95 {p95:.1f} ms",
                flush=True,
            )


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


if __name__ == "__main__":
    main()
