"""The index itself: chunks of every live note as vectors, kept current from the change feed.

See the package docstring for how it follows the feed, what it re-embeds and how
its worker starts and stops.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.chunks import Chunk, ChunkSpec, chunk_note
from noteloom.embedders import Embedder
from noteloom.errors import InvalidInput, NoteloomError
from noteloom.locks import WorkspaceLock
from noteloom.vectors import (
    Backend,
    IndexMeta,
    VectorStore,
    chunks,
    index_state,
    read_meta,
    vector_store,
)

log = logging.getLogger(__name__)

Relevance = Literal["strict", "normal", "loose"]
State = Literal["not built", "building", "indexing", "idle", "error"]

#: Cosine similarity a chunk needs to count as a match, per relevance level. On bench/eval
#: with all-MiniLM-L6-v2 the answer's best chunk scores 0.31 (p10) to 0.42 (median), and
#: the best other note, often a distractor on the same subject, 0.34 (median) to 0.46
#: (p90): ``strict`` keeps what beats nearly every distractor, ``normal`` keeps nearly
#: every answer, ``loose`` anything remotely related. Scores are no proof of relevance;
#: ranks are what the thresholds cut. Other models set theirs in ``[embeddings.thresholds]``.
DEFAULT_THRESHOLDS: dict[str, float] = {"strict": 0.45, "normal": 0.25, "loose": 0.1}

#: A feed row missing below rows already seen is a write still in flight (PostgreSQL
#: hands out sequence numbers before commit); after this long it is taken as rolled back.
GAP_TIMEOUT_S = 30.0
#: How often a process that is not the indexer checks whether the indexer has stopped.
LOCK_RETRY_SECONDS = 5.0


@dataclass(frozen=True)
class IndexStatus:
    """How far the index is: what a status line, the API and the web page show."""

    model: str
    dimensions: int | None
    state: State
    pending_notes: int
    indexed_notes: int
    chunks: int
    error: str | None = None
    updated_time: int | None = None
    #: Where the vectors are kept and searched: sqlite-vec, numpy (in memory) or pgvector.
    backend: Backend = "numpy"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChunkHit:
    """One matching chunk: the note, the section it sits in, a snippet and the cosine score."""

    note_id: str
    title: str
    notebook_id: str
    section: str
    section_heading: str
    heading_path: tuple[str, ...]
    snippet: str
    score: float
    start: int
    end: int
    updated_time: int


@dataclass(frozen=True)
class SemanticResult:
    hits: list[ChunkHit]
    #: Notes changed but not yet (re)indexed: the answer may miss or misplace them.
    pending_notes: int


class _Stopped(Exception):
    """The worker was asked to stop; the batch in hand is dropped uncommitted."""


@dataclass
class _Work:
    """Notes to (re)index in one step, and where the cursors go once they are done."""

    note_ids: list[str]
    feed_seqs: list[int] = field(default_factory=list)
    new_cursor: int | None = None
    new_backfill: int | None = None
    backfill_done: bool = False


class SemanticIndex:
    """Chunks of every live note as vectors, and search over them."""

    def __init__(
        self,
        engine: Engine,
        embedder: Embedder,
        *,
        spec: ChunkSpec | None = None,
        thresholds: dict[str, float] | None = None,
        poll_interval: float = 0.5,
        notes_per_step: int = 32,
        chunks_per_batch: int = 64,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.spec = spec or ChunkSpec()
        # Chunks cut to fit the model's window, when the embedder can count its tokens.
        self._count_tokens: Callable[[Sequence[str]], list[int]] | None = getattr(embedder, "count_tokens", None)
        window = getattr(embedder, "max_tokens", 0)
        if self._count_tokens is not None and isinstance(window, int) and window and not self.spec.max_tokens:
            self.spec = dataclasses.replace(self.spec, max_tokens=window)
        self.thresholds = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
        self.poll_interval = poll_interval
        self.notes_per_step = notes_per_step
        self.chunks_per_batch = chunks_per_batch
        self.store: VectorStore = vector_store(engine)
        self._stop = threading.Event()
        self._step_lock = threading.Lock()
        self._error: str | None = None
        self._busy = False
        self._standby = False  # another process holds the indexer lock
        self._gaps: dict[int, float] = {}  # feed seq -> when it was first seen missing
        self._done_above: set[int] = set()  # feed seqs past the cursor already applied
        self._query_vectors = functools.lru_cache(QUERY_CACHE_SIZE)(self._embed_query)
        self._nearest_lock = threading.Lock()
        self._nearest_found: dict[tuple[Any, ...], list[tuple[int, float]]] = {}

    @property
    def model(self) -> str:
        return self.embedder.name

    # -- status -------------------------------------------------------------------------

    def unavailable_reason(self) -> str | None:
        """Why vectors cannot be stored in this database (``None`` when they can)."""
        with db.read_tx(self.engine) as conn:
            return self.store.available(conn)

    def status(self, notebook_ids: Collection[str] | None = None) -> IndexStatus:
        """Counts and state, without loading the model; with ``notebook_ids``, of the notes in
        those notebooks only (what one person may see: other people's counts are theirs)."""
        with db.read_tx(self.engine) as conn:
            meta = read_meta(conn)
            pending = self._pending(conn, meta, notebook_ids)
            count_chunks = sa.select(sa.func.count()).select_from(chunks)
            count_notes = sa.select(sa.func.count(sa.distinct(chunks.c.note_id)))
            if notebook_ids is not None:
                theirs = chunks.c.note_id.in_(_notes_in(notebook_ids))
                count_chunks, count_notes = count_chunks.where(theirs), count_notes.where(theirs)
            n_chunks = conn.execute(count_chunks).scalar_one()
            n_notes = conn.execute(count_notes).scalar_one()
        current = meta is not None and meta.model == self.model
        state: State
        if self._error:
            state = "error"
        elif not current:
            state = "building" if self._busy else "not built"
        elif meta is not None and meta.backfill_seq is not None:
            state = "building"
        elif pending:
            state = "indexing"
        else:
            state = "idle"
        return IndexStatus(
            model=self.model,
            dimensions=meta.dimensions if current and meta else None,
            state=state,
            pending_notes=pending,
            indexed_notes=int(n_notes) if current else 0,
            chunks=int(n_chunks) if current else 0,
            error=self._error,
            updated_time=meta.updated_time if current and meta else None,
            backend=self.store.backend,
        )

    def is_built(self) -> bool:
        """Whether an index for this model exists (possibly still catching up)."""
        with db.read_tx(self.engine) as conn:
            meta = read_meta(conn)
        return meta is not None and meta.model == self.model

    def pending_notes(self) -> int:
        with db.read_tx(self.engine) as conn:
            return self._pending(conn, read_meta(conn))

    def _pending(self, conn: Connection, meta: IndexMeta | None, notebook_ids: Collection[str] | None = None) -> int:
        n = db.notes
        if meta is None or meta.model != self.model:
            live = sa.select(sa.func.count()).select_from(n).where(n.c.deleted_time.is_(None))
            if notebook_ids is not None:
                live = live.where(n.c.notebook_id.in_(sorted(notebook_ids)))
            return int(conn.execute(live).scalar_one())
        nc = db.note_changes
        feed = sa.select(nc.c.note_id).where(nc.c.seq > meta.feed_cursor)
        if notebook_ids is not None:
            feed = feed.where(nc.c.note_id.in_(_notes_in(notebook_ids)))
        if meta.backfill_seq is not None:
            rest = sa.select(n.c.id).where(n.c.seq > meta.backfill_seq, n.c.deleted_time.is_(None))
            if notebook_ids is not None:
                rest = rest.where(n.c.notebook_id.in_(sorted(notebook_ids)))
            union = sa.union(feed, rest).subquery()
            return int(conn.execute(sa.select(sa.func.count()).select_from(union)).scalar_one())
        # Nothing past the cursor, the usual case, is one key lookup; the count alone may
        # be planned over the note_id index and walk the whole feed (7 ms at 100,000 notes).
        if conn.execute(sa.select(nc.c.seq).where(nc.c.seq > meta.feed_cursor).limit(1)).first() is None:
            return 0
        distinct = sa.select(sa.func.count(sa.distinct(nc.c.note_id))).where(nc.c.seq > meta.feed_cursor)
        if notebook_ids is not None:
            distinct = distinct.where(nc.c.note_id.in_(_notes_in(notebook_ids)))
        return int(conn.execute(distinct).scalar_one())

    # -- building -----------------------------------------------------------------------

    def rebuild(self) -> None:
        """Forget every vector and chunk; the next step builds the index afresh."""
        with db.write_tx(self.engine) as conn:
            self._reset(conn, None)

    def _reset(self, conn: Connection, dimensions: int | None) -> None:
        conn.execute(chunks.delete())
        conn.execute(index_state.delete())
        if dimensions is None:
            self.store.drop(conn)
            return
        self.store.create(conn, dimensions)
        t = db.now_ms()
        top = conn.execute(sa.select(sa.func.max(db.note_changes.c.seq))).scalar()
        conn.execute(
            index_state.insert(),
            {
                "id": 1,
                "model": self.model,
                "dimensions": dimensions,
                "chunker": self.spec.key,
                "feed_cursor": int(top or 0),
                "backfill_seq": 0,
                "created_time": t,
                "updated_time": t,
            },
        )
        self._gaps.clear()
        self._done_above.clear()

    def _ensure_built(self) -> IndexMeta:
        """The index's state, (re)created first when the model or its size changed."""
        with db.read_tx(self.engine) as conn:
            meta = read_meta(conn)
        if meta is not None and meta.model == self.model:
            with db.read_tx(self.engine) as conn:
                held = self.store.holds(conn)
            if not held:
                # Built by the other SQLite backend (sqlite-vec came or went): keep the vectors.
                with db.write_tx(self.engine) as conn:
                    if not self.store.holds(conn):
                        log.info("moving the semantic index's vectors to %s", self.store.backend)
                        self.store.convert(conn, meta.dimensions)
                        conn.execute(index_state.update().values(updated_time=db.now_ms()))
            if meta.chunker != self.spec.key:
                # Same vectors, other cuts: walk every note again; unchanged chunks keep theirs.
                with db.write_tx(self.engine) as conn:
                    conn.execute(
                        index_state.update().values(chunker=self.spec.key, backfill_seq=0, updated_time=db.now_ms())
                    )
                    meta = read_meta(conn)
                assert meta is not None
            return meta
        dims = self.embedder.dimensions  # may load the model: never on a request path
        with db.write_tx(self.engine) as conn:
            again = read_meta(conn)
            if again is not None and again.model == self.model:
                return again  # another process built it meanwhile
            log.info("building the semantic index for %s (%d dimensions)", self.model, dims)
            self._reset(conn, dims)
            meta = read_meta(conn)
        assert meta is not None
        return meta

    def load_model(self) -> None:
        """Load the embedder's model now (preparing it first if it must), off any request path."""
        load = getattr(self.embedder, "load", None)
        if callable(load):
            load()
        else:
            _ = self.embedder.dimensions

    def step(self) -> int:
        """Index one batch of changed notes; returns how many notes it looked at."""
        return self._step()[0]

    def _step(self) -> tuple[int, bool]:
        """(notes looked at, whether there was anything to do)."""
        with self._step_lock:
            self._busy = True
            try:
                meta = self._ensure_built()
                work = self._next_work(meta)
                if work is None:
                    return 0, False
                self._apply(work)
                self._error = None
                return len(work.note_ids), True
            finally:
                self._busy = False

    def sync(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index everything pending, in the foreground; ``progress(done, total)`` after each batch."""
        self._stop.clear()
        total = self.pending_notes()
        done = 0
        while True:
            n, worked = self._step()
            if not worked:
                break
            done += n
            total = max(total, done + self.pending_notes())
            if progress is not None:
                progress(done, total)
        return done

    def _next_work(self, meta: IndexMeta) -> _Work | None:
        """The next notes to index: changes from the feed first, then the back-fill."""
        nc, n = db.note_changes, db.notes
        with db.read_tx(self.engine) as conn:
            rows = conn.execute(
                sa.select(nc.c.seq, nc.c.note_id)
                .where(nc.c.seq > meta.feed_cursor)
                .order_by(nc.c.seq)
                .limit(self.notes_per_step * 8)
            ).all()
            work = self._feed_work(meta, [(int(r.seq), str(r.note_id)) for r in rows]) if rows else None
            if work is not None:
                return work
            if meta.backfill_seq is None:
                return None
            notes = conn.execute(
                sa.select(n.c.seq, n.c.id)
                .where(n.c.seq > meta.backfill_seq)
                .order_by(n.c.seq)
                .limit(self.notes_per_step)
            ).all()
        if not notes:
            return _Work([], backfill_done=True)
        return _Work([str(r.id) for r in notes], new_backfill=int(notes[-1].seq))

    def _feed_work(self, meta: IndexMeta, rows: list[tuple[int, str]]) -> _Work | None:
        """Up to ``notes_per_step`` notes from the feed, and how far the cursor may then move:
        over rows applied, never over a hole younger than ``GAP_TIMEOUT_S``."""
        ids: list[str] = []
        taken: list[int] = []
        for seq, nid in rows:
            if seq in self._done_above:
                continue
            if nid not in ids:
                if len(ids) >= self.notes_per_step:
                    break
                ids.append(nid)
            taken.append(seq)
        applied = self._done_above | set(taken)
        top = max(applied, default=meta.feed_cursor)
        cursor, now = meta.feed_cursor, time.monotonic()
        for seq in range(meta.feed_cursor + 1, top + 1):
            if seq not in applied and now - self._gaps.setdefault(seq, now) < GAP_TIMEOUT_S:
                break
            cursor = seq
        if not ids and cursor == meta.feed_cursor:
            return None
        return _Work(ids, feed_seqs=taken, new_cursor=cursor)

    def _apply(self, work: _Work) -> None:
        n = db.notes
        prepared: list[tuple[str, int | None, list[Chunk], dict[str, list[int]]]] = []
        with db.read_tx(self.engine) as conn:
            rows = {
                r.id: r
                for r in conn.execute(
                    sa.select(n.c.id, n.c.title, n.c.body, n.c.deleted_time, n.c.updated_time).where(
                        n.c.id.in_(work.note_ids)
                    )
                )
            } if work.note_ids else {}
            existing: dict[str, dict[str, list[int]]] = {}
            if work.note_ids:
                for r in conn.execute(
                    sa.select(chunks.c.note_id, chunks.c.content_hash, chunks.c.id)
                    .where(chunks.c.note_id.in_(work.note_ids))
                    .order_by(chunks.c.id)
                ):
                    existing.setdefault(r.note_id, {}).setdefault(r.content_hash, []).append(r.id)
        for nid in work.note_ids:
            row = rows.get(nid)
            if row is None or row.deleted_time is not None:
                prepared.append((nid, None, [], existing.get(nid, {})))
            else:
                parts = chunk_note(nid, row.title, row.body, self.spec, self._count_tokens)
                prepared.append((nid, int(row.updated_time), parts, existing.get(nid, {})))

        # Embed what is new, outside any transaction (this is the slow part).
        todo: list[Chunk] = []
        for _, _, parts, have in prepared:
            left = {h: len(ids) for h, ids in have.items()}
            for c in parts:
                if left.get(c.content_hash, 0) > 0:
                    left[c.content_hash] -= 1
                else:
                    todo.append(c)
        # Each distinct text once (templates, repeated boilerplate), shortest first so a
        # batch pads little; batches stay small so a stop or a search never waits long.
        unique = sorted({c.content_hash: c.text for c in todo}.items(), key=lambda kv: len(kv[1]))
        by_hash: dict[str, list[float]] = {}
        for i in range(0, len(unique), self.chunks_per_batch):
            if self._stop.is_set():
                raise _Stopped
            batch = unique[i : i + self.chunks_per_batch]
            for (h, _), v in zip(batch, self.embedder.embed_documents([t for _, t in batch]), strict=True):
                by_hash[h] = v
        vectors: dict[int, list[float]] = {id(c): by_hash[c.content_hash] for c in todo}

        with db.write_tx(self.engine) as conn:
            meta = read_meta(conn)
            if meta is None or meta.model != self.model:
                return  # rebuilt under our feet; the next step starts over
            for nid, updated, parts, _ in prepared:
                self._write_note(conn, nid, updated, parts, vectors)
            # Strictly increasing: the in-memory vector copy takes an unchanged stamp to
            # mean an unchanged index.
            values: dict[str, Any] = {"updated_time": max(db.now_ms(), meta.updated_time + 1)}
            if work.new_cursor is not None and work.new_cursor > meta.feed_cursor:
                values["feed_cursor"] = work.new_cursor
            if work.new_backfill is not None:
                values["backfill_seq"] = work.new_backfill
            if work.backfill_done:
                values["backfill_seq"] = None
            conn.execute(index_state.update().where(index_state.c.id == 1).values(**values))
        cursor = values.get("feed_cursor", meta.feed_cursor)
        self._done_above = {s for s in self._done_above | set(work.feed_seqs) if s > cursor}
        self._gaps = {s: t for s, t in self._gaps.items() if s > cursor}

    def _write_note(
        self,
        conn: Connection,
        note_id: str,
        updated: int | None,
        parts: list[Chunk],
        vectors: dict[int, list[float]],
    ) -> None:
        """Make the stored chunks of one note match ``parts`` (none when it is gone)."""
        n = db.notes
        # Lock the note's row (PostgreSQL) so two indexers cannot interleave on one note.
        row = conn.execute(
            sa.select(n.c.updated_time, n.c.deleted_time).where(n.c.id == note_id).with_for_update()
        ).first()
        live = row is not None and row.deleted_time is None
        if updated is not None and (not live or row is None or int(row.updated_time) != updated):
            return  # changed since it was read: a later feed row brings it back
        if updated is None and live:
            return  # restored since it was read: likewise
        have: dict[str, list[int]] = {}
        for r in conn.execute(
            sa.select(chunks.c.id, chunks.c.content_hash).where(chunks.c.note_id == note_id).order_by(chunks.c.id)
        ):
            have.setdefault(r.content_hash, []).append(r.id)
        keep: list[tuple[int, Chunk]] = []
        new: list[Chunk] = []
        for c in parts:
            ids = have.get(c.content_hash)
            if ids:
                keep.append((ids.pop(0), c))
            else:
                if id(c) not in vectors:
                    # Another indexer dropped a chunk this one meant to keep: rare, embed it now.
                    vectors[id(c)] = self.embedder.embed_documents([c.text])[0]
                new.append(c)
        stale = [cid for ids in have.values() for cid in ids]
        if stale:
            conn.execute(chunks.delete().where(chunks.c.id.in_(stale)))
            self.store.remove(conn, stale)
        if row is None:
            self.store.prune(conn)  # purged: its chunks went with it, their vectors may not have
        for cid, c in keep:
            conn.execute(chunks.update().where(chunks.c.id == cid).values(**_chunk_values(c)))
        added: list[tuple[int, list[float]]] = []
        for c in new:
            cid = conn.execute(
                chunks.insert().values(note_id=note_id, **_chunk_values(c)).returning(chunks.c.id)
            ).scalar_one()
            added.append((int(cid), vectors[id(c)]))
        self.store.add(conn, added)

    # -- the background worker -------------------------------------------------------------

    @property
    def vectors_ready(self) -> threading.Event:
        """Set once searches answer from the store's in-memory copy of the vectors (until
        then the SQLite stores answer from the table: sqlite-vec's exact k-NN; the numpy
        one waits for the copy)."""
        return self.store.ready

    def preload(self) -> None:
        """Read the vectors' in-memory copy now, in batches, at a lower CPU priority on
        Linux; stops between two batches when the worker stops (``running`` starts it)."""
        _lower_thread_priority(PRELOAD_NICE)
        with db.read_tx(self.engine) as conn:
            if read_meta(conn) is not None:
                self.store.preload(conn, self._stop.is_set)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[SemanticIndex]:
        """Keep the index current in the background while the context is open, and read
        the vectors' copy at once on a thread of its own, so the first search does not
        (100,000 notes: ~630,000 chunks, 20-40 s)."""
        self._stop.clear()
        loader = threading.Thread(target=self._preload_logged, name="noteloom-vectors", daemon=True)
        loader.start()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._run)
                try:
                    yield self
                finally:
                    self._stop.set()
                    tg.cancel_scope.cancel()
        finally:
            # It stops at its next batch boundary (8,192 vectors): wait for it, so the
            # engine is not disposed under it.
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(loader.join)

    def _preload_logged(self) -> None:
        try:
            self.preload()
        except Exception:  # searches read the copy themselves then; say why it failed
            log.exception("reading the semantic index's vectors failed")

    async def _run(self) -> None:
        failures = 0
        try:
            # Load the model here, so the first search does not wait for it. A shutdown does
            # not wait for a load either: the thread is left to finish on its own.
            await to_thread.run_sync(lambda: self.embedder.dimensions, abandon_on_cancel=True)
        except Exception as exc:
            self._error = f"the embedder could not start: {exc}"
            log.warning("semantic index: %s", self._error)
        lock = WorkspaceLock(self.engine, "semantic-indexer")
        try:
            await self._index_while_holding(lock, failures)
        finally:
            lock.release()

    async def _index_while_holding(self, lock: WorkspaceLock, failures: int) -> None:
        """Index while this process holds ``lock``: of several processes serving one
        workspace, one indexes and the others only search what it wrote (they try again
        every ``LOCK_RETRY_SECONDS``, so one takes over when the holder stops)."""
        while True:
            try:
                if not lock.held and not await to_thread.run_sync(lock.try_acquire):
                    self._standby = True
                    await anyio.sleep(max(self.poll_interval, LOCK_RETRY_SECONDS))
                    continue
                self._standby = False
                # On shutdown ``_stop`` is set and the step stops at its next batch boundary,
                # before writing; it is not waited for, since a step commits all or nothing.
                _, worked = await to_thread.run_sync(self._step, abandon_on_cancel=True)
                failures = 0
            except _Stopped:
                return
            except NoteloomError as exc:
                worked, failures = False, failures + 1
                self._error = str(exc)
                log.warning("semantic index: %s", exc)
            except Exception as exc:  # a bug; keep the server up and say so in the status
                worked, failures = False, failures + 1
                self._error = f"{type(exc).__name__}: {exc}"
                log.exception("semantic index step failed")
            if worked:
                await anyio.sleep(0)
            else:
                await anyio.sleep(self.poll_interval if not failures else min(60.0, 2.0**failures))

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        notebook_ids: Collection[str] | None = None,
        tag: str | None = None,
        relevance: Relevance = "normal",
        one_per_note: bool = False,
        notes: sa.Select[Any] | None = None,
        conn: Connection | None = None,
    ) -> SemanticResult:
        """Chunks closest in meaning to ``query``, best first, above the relevance threshold.

        ``notes`` (a select of note ids, as :func:`noteloom.search.notes_allowed` gives)
        keeps the search within those notes, as ``notebook_ids`` and ``tag`` do. When the
        filters allow nothing, the model is not asked; a query asked before is not
        embedded again (:meth:`query_vector`). ``conn`` runs it in the caller's read
        transaction."""
        if relevance not in self.thresholds:
            raise InvalidInput(f"relevance {relevance!r} is not one of strict, normal, loose", field="relevance")
        if not query.strip():
            raise InvalidInput("the query is empty; say what to look for", field="query")
        floor = self.thresholds[relevance]
        candidates = _candidates(notebook_ids, tag, notes)
        given = conn
        with self._reading(given) as conn:
            meta = read_meta(conn)
            pending = self._pending(conn, meta)
            if meta is None or meta.model != self.model or limit <= 0:
                return SemanticResult([], pending)
            # Probed on the notes: on the chunks, SQLite reads every allowed note first.
            if candidates is not None and conn.execute(_allowed(notebook_ids, tag, notes).limit(1)).first() is None:
                return SemanticResult([], pending)
        vector = self.query_vector(query)
        with self._reading(given) as conn:
            k = limit * (8 if one_per_note else 2) + 16
            found: list[tuple[int, float]] | None = None
            if candidates is not None and self.store.backend != "pgvector":
                found = _best_allowed(conn, self.store, vector, k, floor, limit, one_per_note, notebook_ids, tag, notes)
            if found is None and candidates is None:
                found = self._nearest(conn, meta, query, vector, k)
            if found is None:
                found = self.store.nearest(conn, vector, k, candidates)
            found = [(cid, s) for cid, s in found if s >= floor]
            if one_per_note:
                found = _best_per_note(found, _notes_of(conn, [cid for cid, _ in found]))[: limit * 2]
            hits = _hydrate(conn, found)
        if one_per_note:
            seen: set[str] = set()
            best = []
            for h in hits:
                if h.note_id not in seen:
                    seen.add(h.note_id)
                    best.append(h)
            hits = best
        return SemanticResult(hits[:limit], pending)

    def _reading(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.read_tx(self.engine) if conn is None else nullcontext(conn)

    def query_vector(self, text: str) -> tuple[float, ...]:
        """The embedding of the search query ``text``. The last ``QUERY_CACHE_SIZE`` queries'
        are kept, by embedder name and text: a repeated query never runs the model (one
        query embedding is ~5-10 ms of CPU here; the vector search itself less)."""
        vector: tuple[float, ...] = self._query_vectors(self.embedder.name, text)
        return vector

    def _embed_query(self, name: str, text: str) -> tuple[float, ...]:
        return tuple(self.embedder.embed_query(text))

    def _nearest(
        self, conn: Connection, meta: IndexMeta, query: str, vector: Sequence[float], k: int
    ) -> list[tuple[int, float]]:
        """The store's nearest chunks of all, kept until the index next changes: paging
        through a query, or asking it again, searches the vectors once. (A filtered
        search is not kept: its allowed set can change without the index changing.)"""
        key = (self.model, query, k, meta.created_time, meta.updated_time)
        with self._nearest_lock:
            found = self._nearest_found.get(key)
        if found is None:
            found = self.store.nearest(conn, vector, k)
            with self._nearest_lock:
                if any(old[3:] != key[3:] for old in self._nearest_found) or len(self._nearest_found) >= NEAREST_CACHE_SIZE:
                    self._nearest_found.clear()
                self._nearest_found[key] = found
        return found


#: How much lower the thread reading the vectors' copy at start runs (searches go first).
PRELOAD_NICE = 5


def _lower_thread_priority(nice: int) -> None:
    """Lower the calling thread's CPU priority (Linux sets it per thread; elsewhere it would
    lower the whole process, so it is left alone)."""
    import os
    import sys

    if nice > 0 and sys.platform.startswith("linux"):
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
        except OSError:
            pass


#: Search queries whose vectors SemanticIndex.query_vector keeps (~1.5 KB each at 384 dimensions).
QUERY_CACHE_SIZE = 1024
#: Unfiltered vector searches SemanticIndex._nearest keeps while the index is unchanged.
NEAREST_CACHE_SIZE = 256
#: How many of the nearest chunks of all _best_allowed checks against a filter, per chunk asked.
OVERFETCH = 2


def _best_allowed(
    conn: Connection,
    store: VectorStore,
    vector: Sequence[float],
    k: int,
    floor: float,
    limit: int,
    one_per_note: bool,
    notebook_ids: Collection[str] | None,
    tag: str | None,
    notes: sa.Select[Any] | None,
) -> list[tuple[int, float]] | None:
    """The nearest chunks within the filters, found among the nearest of all, or ``None``
    when those cannot tell (then the store searches within the allowed set).

    Reading a large allowed set is the cost of a filtered search (at 100,000 chunks a
    ``-word`` allowing 90% read ~290 ms of ids); checking the best ``OVERFETCH * k`` chunks
    of all against the filters reads a few hundred notes. The answer is the same
    whenever it holds ``limit`` allowed results (notes, with ``one_per_note``): every allowed
    chunk not fetched scores below all the fetched ones. It is also complete when the
    fetch ran out of chunks, or reached below the relevance floor."""
    fetch = OVERFETCH * k
    best = store.nearest(conn, vector, fetch)
    note_of = _notes_of(conn, [cid for cid, s in best if s >= floor])
    allowed = _allowed_notes(conn, set(note_of.values()), notebook_ids, tag, notes)
    kept = [(cid, s) for cid, s in best if note_of.get(cid) in allowed]
    exhausted = len(best) < fetch or (bool(best) and best[-1][1] < floor)
    enough = len({note_of[cid] for cid, _ in kept}) if one_per_note else len(kept)
    return kept if exhausted or enough >= limit else None


def _notes_of(conn: Connection, chunk_ids: Sequence[int]) -> dict[int, str]:
    """The note of each chunk id (ids of chunks now gone are left out)."""
    out: dict[int, str] = {}
    for start in range(0, len(chunk_ids), 500):
        part = list(chunk_ids[start : start + 500])
        out.update((int(r.id), str(r.note_id)) for r in conn.execute(
            sa.select(chunks.c.id, chunks.c.note_id).where(chunks.c.id.in_(part))
        ))
    return out


def _allowed_notes(
    conn: Connection,
    note_ids: Collection[str],
    notebook_ids: Collection[str] | None,
    tag: str | None,
    notes: sa.Select[Any] | None,
) -> set[str]:
    """Which of ``note_ids`` the filters allow: the allowed select asked about these notes
    alone, so it reads them by key rather than every note it allows."""
    if not note_ids:
        return set()
    q = _allowed(notebook_ids, tag, notes).where(db.notes.c.id.in_(list(note_ids)))
    return {str(nid) for nid in conn.execute(q).scalars()}


def _allowed(notebook_ids: Collection[str] | None, tag: str | None, notes: sa.Select[Any] | None) -> sa.Select[Any]:
    """The ids of the live notes the filters allow, as a select."""
    n = db.notes
    q = notes if notes is not None else sa.select(n.c.id).where(n.c.deleted_time.is_(None))
    if notebook_ids is not None:
        q = q.where(n.c.notebook_id.in_(list(notebook_ids)))
    if tag:
        tagged = _tagged(tag)
        q = q.where(n.c.id.in_(tagged))
    return q


def _tagged(tag: str) -> sa.Select[Any]:
    """The ids of the notes that carry ``tag`` (by its folded title), as a select."""
    return (
        sa.select(db.note_tags.c.note_id)
        .select_from(db.note_tags.join(db.tags, db.tags.c.id == db.note_tags.c.tag_id))
        .where(db.tags.c.title_key == tag.strip().lower())
    )


def _best_per_note(found: Sequence[tuple[int, float]], note_of: dict[int, str]) -> list[tuple[int, float]]:
    """The best chunk of each note in ``found`` (best first), in that order."""
    seen: set[str] = set()
    out = []
    for cid, score in found:
        nid = note_of.get(cid)
        if nid is not None and nid not in seen:
            seen.add(nid)
            out.append((cid, score))
    return out


def _candidates(
    notebook_ids: Collection[str] | None, tag: str | None, notes: sa.Select[Any] | None = None
) -> sa.Select[Any] | None:
    """The chunk ids a filter allows, as a select (``None``: every chunk)."""
    if notebook_ids is None and not tag and notes is None:
        return None
    n = db.notes
    if notebook_ids is None and not tag and notes is not None:
        # Through the chunks' note index alone: the notes select has checked the notes.
        return sa.select(chunks.c.id).where(chunks.c.note_id.in_(notes.scalar_subquery()))
    q = sa.select(chunks.c.id).select_from(chunks.join(n, n.c.id == chunks.c.note_id))
    if notes is not None:
        q = q.where(chunks.c.note_id.in_(notes.scalar_subquery()))
    if notebook_ids is not None:
        q = q.where(n.c.notebook_id.in_(list(notebook_ids)))
    if tag:
        tagged = _tagged(tag)
        q = q.where(chunks.c.note_id.in_(tagged))
    return q


def _hydrate(conn: Connection, found: Sequence[tuple[int, float]]) -> list[ChunkHit]:
    """Hits for (chunk id, score) pairs, in that order; chunks of notes now in the trash drop out."""
    if not found:
        return []
    n = db.notes
    # Two lookups by key rather than one join: with a join, SQLite may start from the
    # notes and walk every chunk of the index (80 ms at 100,000 chunks instead of 1).
    parts = {
        r.id: r
        for r in conn.execute(
            sa.select(
                chunks.c.id, chunks.c.note_id, chunks.c.section_path, chunks.c.heading,
                chunks.c.heading_path, chunks.c.start_char, chunks.c.end_char, chunks.c.text,
            ).where(chunks.c.id.in_([cid for cid, _ in found]))
        )
    }
    notes = {
        r.id: r
        for r in conn.execute(
            sa.select(n.c.id, n.c.title, n.c.notebook_id, n.c.updated_time).where(
                n.c.id.in_({r.note_id for r in parts.values()}), n.c.deleted_time.is_(None)
            )
        )
    }
    rows = {cid: (r, notes[r.note_id]) for cid, r in parts.items() if r.note_id in notes}
    out = []
    for cid, score in found:
        if cid not in rows:
            continue
        r, note = rows[cid]
        out.append(
            ChunkHit(
                note_id=r.note_id,
                title=note.title,
                notebook_id=note.notebook_id,
                section=r.section_path,
                section_heading=r.heading,
                heading_path=tuple(json.loads(r.heading_path)),
                snippet=snippet_of(r.text),
                score=round(score, 4),
                start=r.start_char,
                end=r.end_char,
                updated_time=note.updated_time,
            )
        )
    return out


_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")


def snippet_of(text: str, limit: int = 240) -> str:
    """The start of a chunk's body (its title and heading line left out), on a word boundary."""
    body = text.split("\n\n", 1)[1] if "\n\n" in text else text
    body = " ".join(line for line in body.splitlines() if not _HEADING_LINE.match(line))
    body = " ".join(body.split())
    if len(body) <= limit:
        return body
    cut = body.rfind(" ", 0, limit)
    return body[: cut if cut > limit // 2 else limit] + " …"


def _chunk_values(c: Chunk) -> dict[str, Any]:
    return {
        "ordinal": c.ordinal,
        "section_path": c.section_path,
        "heading": c.heading,
        "heading_path": json.dumps(list(c.heading_path), ensure_ascii=False),
        "start_char": c.start,
        "end_char": c.end,
        "content_hash": c.content_hash,
        "text": c.text,
    }


def _notes_in(notebook_ids: Collection[str]) -> sa.Select[Any]:
    """The ids of the notes (live or trashed) in ``notebook_ids``."""
    return sa.select(db.notes.c.id).where(db.notes.c.notebook_id.in_(sorted(notebook_ids)))
