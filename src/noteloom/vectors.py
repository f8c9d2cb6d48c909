"""Where chunk vectors live, and the nearest-neighbour query over them.

Three tables (migration 0003) describe the index: ``semantic_index`` (one row:
the model and dimensions the vectors were made with, the change-feed cursor,
the back-fill position), ``semantic_chunks`` (what each chunk is: note, section,
span, content hash, text). The vectors themselves go in ``semantic_vectors``,
created when the index is built, since its shape depends on the model:

- PostgreSQL: a ``vector(D)`` column of the pgvector extension with an HNSW
  index; the query is one ``ORDER BY embedding <=> q`` with the filters joined in.
- SQLite with the sqlite-vec extension loaded (``noteloom.db`` loads it): a
  ``vec0`` virtual table with cosine distance, searched exactly (brute force) by
  one ``MATCH … AND k = ?`` query, restricted to the filtered chunk ids by a
  ``chunk_id IN (…)`` constraint. A virtual table has no foreign keys, so the
  vectors of deleted chunks are removed explicitly (``remove``, ``prune``).
- SQLite without sqlite-vec (a ``sqlite3`` module that cannot load extensions,
  and no ``pysqlite3``): float32 blobs, searched exactly in memory with numpy.
  The vectors are read once per process and then kept current from the rows
  written since (chunk ids only grow), so a query is one matrix-vector product.

An index built by one SQLite backend is converted in place when the other one
opens it (``holds``/``convert``), so no vector is embedded twice.

Every function takes the caller's connection, so writes compose with the
index's own transactions.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db, ivf
from noteloom.errors import StorageError
from noteloom.ivf import InvertedLists

__all__ = [
    "Backend",
    "IndexMeta",
    "VectorStore",
    "chunks",
    "index_state",
    "vector_store",
]

index_state = sa.Table(
    "semantic_index",
    db.metadata,
    sa.Column("id", sa.Integer, primary_key=True),  # always 1
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("dimensions", sa.Integer, nullable=False),
    sa.Column("chunker", sa.Text, nullable=False),
    # The last note_changes.seq applied, and the notes.seq the back-fill has reached
    # (NULL once every note present at build time has been indexed).
    sa.Column("feed_cursor", sa.BigInteger, nullable=False),
    sa.Column("backfill_seq", sa.BigInteger),
    sa.Column("created_time", db.MS, nullable=False),
    sa.Column("updated_time", db.MS, nullable=False),
)

chunks = sa.Table(
    "semantic_chunks",
    db.metadata,
    # AUTOINCREMENT on SQLite: ids are never reused, which the in-memory copy relies on.
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("note_id", db.ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("section_path", sa.Text, nullable=False),
    sa.Column("heading", sa.Text, nullable=False),
    sa.Column("heading_path", sa.Text, nullable=False),  # JSON list of headings, root first
    sa.Column("start_char", sa.Integer, nullable=False),
    sa.Column("end_char", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.String(32), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sqlite_autoincrement=True,
)

VECTORS = "semantic_vectors"

#: Where the vectors are kept and searched.
Backend = Literal["sqlite-vec", "numpy", "pgvector"]

#: The most neighbours one sqlite-vec KNN query returns.
SQLITE_VEC_MAX_K = 4096
#: An allowed set of at most this many chunks is ranked exactly on PostgreSQL (see
#: PgVectorStore.nearest); larger ones go through the HNSW index with iterative scans.
#: Measured at 10,000 notes / 50,000 chunks of 384 dimensions (synthetic vectors, a
#: loaded machine): a notebook, tag or type:todo filter allowing ~10% was ranked exactly
#: in 140-160 ms, against 40-55 ms through the index with under half the true top 40;
#: a filter allowing 90% pays ~60 ms for the probe of the set's size.
PG_EXACT_MAX = 5000


@dataclass(frozen=True)
class IndexMeta:
    """What the stored vectors were made with, and how far the index has got."""

    model: str
    dimensions: int
    chunker: str
    feed_cursor: int
    backfill_seq: int | None
    created_time: int
    updated_time: int


def read_meta(conn: Connection) -> IndexMeta | None:
    row = conn.execute(sa.select(index_state).where(index_state.c.id == 1)).first()
    if row is None:
        return None
    return IndexMeta(
        row.model, row.dimensions, row.chunker, row.feed_cursor, row.backfill_seq,
        row.created_time, row.updated_time,
    )


class VectorStore(Protocol):
    """The vectors of the chunks, on one database engine."""

    backend: Backend

    def available(self, conn: Connection) -> str | None:
        """``None`` when vectors can be stored here, or why not (and what to do)."""

    def create(self, conn: Connection, dimensions: int) -> None:
        """(Re)create the empty vector table for ``dimensions``."""

    def drop(self, conn: Connection) -> None:
        """Remove the vector table, if any."""

    def holds(self, conn: Connection) -> bool:
        """Whether the vector table, if any, is in this store's form."""

    def convert(self, conn: Connection, dimensions: int) -> None:
        """Rewrite the vector table in this store's form, keeping every vector."""

    def add(self, conn: Connection, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        """Store the vectors of new chunks (chunk id, vector)."""

    def remove(self, conn: Connection, ids: Sequence[int]) -> None:
        """Forget the vectors of chunks just deleted."""

    def prune(self, conn: Connection) -> None:
        """Forget the vectors of chunks deleted behind the index's back (a purged note)."""

    def nearest(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None = None
    ) -> list[tuple[int, float]]:
        """Up to ``k`` (chunk id, cosine similarity), best first; only chunks the
        ``candidates`` select (one column of chunk ids) returns, when given."""

    def preload(self, conn: Connection, stop: Callable[[], bool] | None = None) -> None:
        """Bring the in-memory copy of the vectors, if the store keeps one, up to date now
        (a server does it at start, off the request path); gives up between batches once
        ``stop()`` is true."""

    @property
    def ready(self) -> threading.Event:
        """Set once searches answer from the in-memory copy (at once for a store without one)."""


def vector_store(engine: Engine) -> VectorStore:
    """The store for ``engine``'s database."""
    if engine.dialect.name == "postgresql":
        return PgVectorStore()
    if engine.dialect.name == "sqlite":
        return SqliteVecStore() if db.sqlite_vec_available(engine) else NumpyVectorStore()
    raise StorageError(f"no vector store for the {engine.dialect.name!r} database")


def _f32(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def _table_sql(conn: Connection, name: str) -> str | None:
    """The ``CREATE`` statement of table ``name`` on SQLite, ``None`` when there is none."""
    sql = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).scalar()
    return None if sql is None else str(sql)


def _is_vec0(sql: str | None) -> bool:
    return sql is not None and "vec0" in sql.lower()


class SqliteVecStore:
    """A sqlite-vec ``vec0`` virtual table (cosine distance); queries go through the
    in-memory mirror of it, and through sqlite-vec's own k-NN only without numpy."""

    backend: Backend = "sqlite-vec"

    def __init__(self) -> None:
        self._mirror = _Mirror()

    def available(self, conn: Connection) -> str | None:
        return None

    def create(self, conn: Connection, dimensions: int) -> None:
        self.drop(conn)
        self._mirror.forget()
        conn.exec_driver_sql(
            f"CREATE VIRTUAL TABLE {VECTORS} USING vec0("
            f"chunk_id INTEGER PRIMARY KEY, embedding float[{int(dimensions)}] distance_metric=cosine)"
        )

    def drop(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {VECTORS}")
        self._mirror.forget()

    def holds(self, conn: Connection) -> bool:
        return _is_vec0(_table_sql(conn, VECTORS))

    def convert(self, conn: Connection, dimensions: int) -> None:
        old = f"{VECTORS}_blobs"
        had = _table_sql(conn, VECTORS) is not None
        if had:
            conn.exec_driver_sql(f"ALTER TABLE {VECTORS} RENAME TO {old}")
        self.create(conn, dimensions)
        if had:
            conn.exec_driver_sql(
                f"INSERT INTO {VECTORS} (chunk_id, embedding) SELECT chunk_id, embedding FROM {old} "
                f"WHERE length(embedding) = ? AND chunk_id IN (SELECT id FROM semantic_chunks)",
                (4 * int(dimensions),),
            )
            conn.exec_driver_sql(f"DROP TABLE {old}")

    def add(self, conn: Connection, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if items:
            conn.exec_driver_sql(
                f"INSERT INTO {VECTORS} (chunk_id, embedding) VALUES (?, ?)",
                [(cid, _f32(vec)) for cid, vec in items],
            )

    def remove(self, conn: Connection, ids: Sequence[int]) -> None:
        if ids:
            marks = ", ".join("?" * len(ids))
            conn.exec_driver_sql(f"DELETE FROM {VECTORS} WHERE chunk_id IN ({marks})", tuple(ids))

    def prune(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"DELETE FROM {VECTORS} WHERE chunk_id NOT IN (SELECT id FROM semantic_chunks)")

    def nearest(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None = None
    ) -> list[tuple[int, float]]:
        k = min(k, SQLITE_VEC_MAX_K)
        meta = read_meta(conn)
        if k <= 0 or meta is None or len(query) != meta.dimensions or not any(query):
            return []
        if not self.holds(conn):
            return []
        if _numpy_available():
            # While another thread loads the copy, sqlite-vec's own k-NN answers (exact,
            # ~0.5 µs a vector) rather than the search waiting for the whole load.
            found = self._mirror.nearest(conn, query, k, candidates, wait=False)
            return self._knn(conn, query, k, candidates) if found is None else found
        return self._knn(conn, query, k, candidates)

    def preload(self, conn: Connection, stop: Callable[[], bool] | None = None) -> None:
        if _numpy_available() and self.holds(conn):
            self._mirror.preload(conn, stop)
        else:
            self._mirror.ready.set()

    @property
    def ready(self) -> threading.Event:
        return self._mirror.ready

    def _knn(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None
    ) -> list[tuple[int, float]]:
        """sqlite-vec's own exact k-NN (reads every vector per query)."""
        v = sa.table(VECTORS, sa.column("chunk_id"), sa.column("embedding"), sa.column("distance"), sa.column("k"))
        q = (
            sa.select(v.c.chunk_id, v.c.distance)
            .where(v.c.embedding.op("MATCH")(sa.bindparam("q", type_=sa.LargeBinary)), v.c.k == k)
            .order_by(v.c.distance)
        )
        if candidates is not None:
            q = q.where(v.c.chunk_id.in_(candidates.scalar_subquery()))
        rows = conn.execute(q, {"q": _f32(query)}).all()
        return [(int(r.chunk_id), 1.0 - float(r.distance)) for r in rows if r.distance is not None]


class NumpyVectorStore:
    """Float32 blobs in SQLite (where sqlite-vec cannot load), queried through the in-memory mirror."""

    backend: Backend = "numpy"

    def __init__(self) -> None:
        self._mirror = _Mirror()

    def available(self, conn: Connection) -> str | None:
        try:
            import numpy  # noqa: F401
        except ImportError:
            return "semantic search on SQLite needs numpy; install noteloom's `embeddings` extra"
        if _is_vec0(_table_sql(conn, VECTORS)):
            return (
                "the semantic index was built with the sqlite-vec extension, which cannot be loaded here; "
                "install noteloom's `embeddings` extra (sqlite-vec, and pysqlite3-binary where the Python "
                "sqlite3 module cannot load extensions)"
            )
        return None

    def create(self, conn: Connection, dimensions: int) -> None:
        self.drop(conn)
        conn.exec_driver_sql(
            f"CREATE TABLE {VECTORS} (chunk_id INTEGER PRIMARY KEY "
            "REFERENCES semantic_chunks(id) ON DELETE CASCADE, embedding BLOB NOT NULL)"
        )
        self._mirror.forget()

    def drop(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {VECTORS}")
        self._mirror.forget()

    def holds(self, conn: Connection) -> bool:
        return not _is_vec0(_table_sql(conn, VECTORS))

    def convert(self, conn: Connection, dimensions: int) -> None:
        raise StorageError(self.available(conn) or "the vector table cannot be converted")

    def add(self, conn: Connection, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if items:
            conn.exec_driver_sql(
                f"INSERT INTO {VECTORS} (chunk_id, embedding) VALUES (?, ?)",
                [(cid, _f32(vec)) for cid, vec in items],
            )

    def remove(self, conn: Connection, ids: Sequence[int]) -> None:
        pass  # the foreign key's ON DELETE CASCADE did it

    def prune(self, conn: Connection) -> None:
        pass  # likewise

    def nearest(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None = None
    ) -> list[tuple[int, float]]:
        # No other copy to answer from: a search during the load waits for it.
        return self._mirror.nearest(conn, query, k, candidates) or []

    def preload(self, conn: Connection, stop: Callable[[], bool] | None = None) -> None:
        self._mirror.preload(conn, stop)

    @property
    def ready(self) -> threading.Event:
        return self._mirror.ready


#: The sign-bit pass of _Mirror.nearest keeps at least this many chunks for the int8 pass,
#: and at least this many per neighbour asked for.
_SHORTLIST_MIN = 2048
_SHORTLIST_PER_K = 8
#: An index of up to this many chunks also keeps its float32 vectors in the copy (48 MB at
#: 384 dimensions), so its scores are exact; a larger one scores with the int8 codes.
_EXACT_MAX = 32_768


class _Rows:
    """The mirror's rows, in arrays that grow in place (appends copy nothing already held).

    Per chunk: its id; its vector as int8 codes with one scale (``codes * scale`` is the
    unit vector, to about 1/254 per component); and its sign bits, 64 to a word, stored
    word-major (``bits[w]`` holds word ``w`` of every row) so the Hamming pass reads
    contiguous memory. 437 bytes a chunk at 384 dimensions, against 1,536 as float32.
    While there are at most ``_EXACT_MAX`` rows, ``exact`` holds the float32 vectors too.
    """

    def __init__(self, dims: int) -> None:
        import numpy as np

        self.dims = dims
        self.words = (dims + 63) // 64
        self.n = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.codes = np.zeros((0, dims), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.bits = np.zeros((self.words, 0), dtype=np.uint64)
        self.exact: Any = np.zeros((0, dims), dtype=np.float32)

    def append(self, ids: Any, unit: Any, expected: int = 0) -> None:
        """Add rows: ascending ids above every id held, and their unit vectors (float32).
        ``expected`` is how many rows there will be in all, when known (room for them is
        made at once, not by growing by half)."""
        import numpy as np

        m = len(ids)
        if self.n + m > len(self.ids):
            cap = max(self.n + m, expected, len(self.ids) * 3 // 2, 1024)
            self.ids = _grown(self.ids, cap, self.n)
            self.codes = _grown(self.codes, cap, self.n)
            self.scales = _grown(self.scales, cap, self.n)
            bits = np.zeros((self.words, cap), dtype=np.uint64)
            bits[:, : self.n] = self.bits[:, : self.n]
            self.bits = bits
            if self.exact is not None:
                self.exact = _grown(self.exact, cap, self.n)
        end = self.n + m
        if end > _EXACT_MAX:
            self.exact = None
        self.ids[self.n : end] = ids
        peak = np.maximum(np.abs(unit).max(axis=1), 1e-12)
        self.scales[self.n : end] = peak / 127.0
        self.codes[self.n : end] = np.rint(unit * (127.0 / peak)[:, None])
        self.bits[:, self.n : end] = _sign_words(unit, self.words).T
        if self.exact is not None:
            self.exact[self.n : end] = unit
        self.n = end

    def kept(self, keep: Any) -> _Rows:
        """A copy holding only the rows where ``keep`` (a mask over the rows held) is true;
        a copy, so searches still reading this one are not disturbed."""
        out = _Rows(self.dims)
        out.n = int(keep.sum())
        out.ids = self.ids[: self.n][keep]
        out.codes = self.codes[: self.n][keep]
        out.scales = self.scales[: self.n][keep]
        out.bits = self.bits[:, : self.n][:, keep]
        out.exact = None if self.exact is None else self.exact[: self.n][keep]
        return out


def _grown(a: Any, cap: int, used: int) -> Any:
    import numpy as np

    out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    out[:used] = a[:used]
    return out


def _sign_words(unit: Any, words: int) -> Any:
    """The sign bits of each row of ``unit`` as ``words`` uint64 (rows, words)."""
    import numpy as np

    packed = np.packbits(unit > 0, axis=1, bitorder="little")
    padded = np.zeros((len(unit), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return padded.view(np.uint64)


class _Mirror:
    """An in-memory, compressed copy of the SQLite vector table, searched in two passes.

    sqlite-vec 0.1.9 answers a k-NN query by reading every vector from the table: about
    47 ms at 100,000 chunks of 384 floats here, and one vector read by its id costs ~0.8 ms
    (it reads the 1,024-vector block holding it). A float32 copy answered in 4 ms but held
    1.5 KB a chunk (0.9 GB at the 630,000 chunks 100,000 long-tailed notes make), and a
    matrix-vector product over it costs ~16 ms of CPU per 100,000 chunks. So the copy keeps
    int8 codes and sign bits instead (:class:`_Rows`, 437 bytes a chunk), and a query
    (1) ranks the chunks by the Hamming distance of their sign bits to the query's and
    keeps a shortlist (``_SHORTLIST_*``); (2) scores the shortlist with the int8 codes
    (within ~0.005 of the exact cosine) and ranks by that. An index of up to
    ``_EXACT_MAX`` chunks keeps its float32 vectors as well and scores exactly. The ranking
    misses a true neighbour only when the sign bits put it outside the shortlist
    (tests/test_hybrid_quantised.py states the tolerance). An index of ``ivf.IVF_MIN``
    chunks or more when the copy is first read is kept as inverted lists instead
    (:mod:`noteloom.ivf`: the sign-bit pass alone cost 11 ms at 630,000 chunks).

    The copy is read once whole (``preload``, when the index's worker starts); until then,
    a search that finds another thread reading it is told so (``None``) rather than kept
    waiting. Later reads only catch up with the table.

    The table stays the one store (written in the index's transactions, readable by any
    SQLite client with the extension).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: _Rows | None = None
        self._max_id = 0
        self._stamp: tuple[Any, ...] | None = None
        #: The copy of an index of ``ivf.IVF_MIN`` chunks or more, instead of ``_rows``.
        self._lists: InvertedLists | None = None
        #: Set once the copy has been read whole (and kept set while it only catches up).
        self.ready = threading.Event()

    def forget(self) -> None:
        with self._lock:
            self._rows = None
            self._lists = None
            self._max_id = 0
            self._stamp = None
            self.ready.clear()

    def preload(self, conn: Connection, stop: Callable[[], bool] | None = None) -> None:
        """Read the copy now, in batches; give up between two once ``stop()`` is true (a
        later refresh goes on from the last batch read)."""
        self._refresh(conn, stop=stop)

    def nearest(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None = None,
        *, wait: bool = True,
    ) -> list[tuple[int, float]] | None:
        """The ``k`` nearest chunks by the copy; ``None``, with ``wait`` false, when another
        thread is reading the copy for the first time (the caller answers another way)."""
        import numpy as np

        try:
            rows = self._refresh(conn, wait=wait or self.ready.is_set())
        except _Busy:
            return None
        lists = self._lists
        if lists is not None:
            return self._nearest_in_lists(conn, lists, query, k, candidates)
        if rows is None or not rows.n or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or q.shape[0] != rows.dims:
            return []
        q = q / norm
        n = rows.n
        ids = rows.ids[:n]
        picked: Any = None  # row positions still in the running (None: all)
        if candidates is not None:
            # Exact k-NN within the allowed chunks: their rows, found by binary search over
            # the sorted ids. Reading the set is the cost (bench at 100,000 chunks: 10,000
            # ids ~50-100 ms, 90,000 ~290 ms); SemanticIndex.search tries the best chunks of
            # all against the filter first, and comes here only when too few pass.
            allowed = np.unique(np.fromiter((r[0] for r in conn.execute(candidates)), dtype=np.int64))
            if not len(allowed):
                return []
            at = np.minimum(np.searchsorted(ids, allowed), n - 1)
            picked = at[ids[at] == allowed]  # allowed chunks the copy holds
            if not len(picked):
                return []
        count = n if picked is None else len(picked)
        shortlist = max(_SHORTLIST_MIN, _SHORTLIST_PER_K * k)
        if count > shortlist:
            picked = _closest_signs(rows, _sign_words(q[None, :], rows.words)[0], picked, shortlist)
        if picked is None:
            picked = np.arange(n)
        # einsum rather than a BLAS product: BLAS threads spin on a product this small
        # (measured 8 ms of CPU for 2,048 rows, against 0.9 ms).
        exact = rows.exact
        if exact is not None:
            scores = np.einsum("ij,j->i", exact[picked], q)
        else:
            scores = np.einsum("ij,j->i", rows.codes[picked], q, dtype=np.float32, casting="unsafe")
            scores *= rows.scales[picked]
        k = min(k, len(picked))
        top = np.sort(np.argpartition(-scores, k - 1)[:k])  # equal scores: the older chunk first
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[picked[i]]), float(scores[i])) for i in top]

    def _nearest_in_lists(
        self, conn: Connection, lists: InvertedLists, query: Sequence[float], k: int, candidates: sa.Select[Any] | None
    ) -> list[tuple[int, float]]:
        import numpy as np

        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if k <= 0 or norm == 0.0 or q.shape[0] != lists.dims:
            return []
        allowed = None
        if candidates is not None:
            allowed = np.unique(np.fromiter((r[0] for r in conn.execute(candidates)), dtype=np.int64))
            if not len(allowed):
                return []
        with self._lock:  # a refresh adds to the lists in place
            return lists.nearest(q / norm, k, allowed) if lists.n else []

    def _refresh(
        self, conn: Connection, stop: Callable[[], bool] | None = None, wait: bool = True
    ) -> _Rows | None:
        """The in-memory copy, brought up to date with the table.

        Every write of the index stamps ``semantic_index.updated_time``; an unchanged
        stamp means an unchanged table, so a query costs one small read. Otherwise, new
        chunks always have larger ids, so rows past the largest id held are the new
        ones (read in batches, so the float32 table never sits in memory whole); a chunk
        count that then disagrees means some were deleted, and only then are the ids read
        again to drop them. (Chunks purged with their note in between may linger in the
        copy; the exact pass reads the table and the query joins the live chunks, so they
        never show.)
        """
        if not self._lock.acquire(blocking=wait):
            raise _Busy
        try:
            return self._refreshed(conn, stop)
        finally:
            self._lock.release()

    def _refreshed(self, conn: Connection, stop: Callable[[], bool] | None) -> _Rows | None:
        import numpy as np

        stamp = conn.execute(sa.select(index_state.c.created_time, index_state.c.updated_time)).first()
        if stamp is not None and tuple(stamp) == self._stamp and (self._rows is not None or self._lists is not None):
            return self._rows
        if not _has_table(conn, VECTORS):
            self.ready.set()
            return None
        # Counted on the chunks' note index: far cheaper than the table of blobs.
        count = conn.execute(sa.select(sa.func.count(chunks.c.note_id))).scalar_one()
        if self._rows is None and self._lists is None and count >= ivf.IVF_MIN and ivf.available():
            self._lists = _trained_lists(conn, count)
        # In id order for the flat copy (its rows are kept sorted); in the table's own order
        # for the lists, since SQLite sorts a virtual table's rows itself, every one of them
        # in memory before the first comes out: 1 GB at 630,000 chunks of 384 floats.
        ordered = self._lists is None
        sql = f"SELECT chunk_id, embedding FROM {VECTORS} WHERE chunk_id > ?" + (" ORDER BY chunk_id" if ordered else "")
        args: tuple[Any, ...] = (self._max_id,)
        if self._max_id:
            # Catching up: the new chunks' ids come from the chunks table (its key), and a
            # few vectors are read by id, since the table's range query reads every vector
            # (~70 ms per 100,000 chunks) to find none or a handful.
            fresh = list(conn.execute(
                sa.select(chunks.c.id).where(chunks.c.id > self._max_id).order_by(chunks.c.id).limit(_READ_BY_ID + 1)
            ).scalars())
            if len(fresh) <= _READ_BY_ID:
                sql = f"SELECT chunk_id, embedding FROM {VECTORS} WHERE chunk_id IN ({', '.join('?' * len(fresh))})"
                args = tuple(fresh)
        result = conn.exec_driver_sql(sql, args) if args else None
        read, top = 0, self._max_id
        while result is not None and (batch := sorted(result.fetchmany(_REFRESH_BATCH))):
            read += len(batch)
            dims = len(batch[0][1]) // 4
            new_ids = np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))
            new = np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32).reshape(len(batch), dims)
            new = new / np.maximum(np.linalg.norm(new, axis=1, keepdims=True), 1e-12)
            if self._lists is not None:
                self._lists.add(new_ids, new.astype(np.float32))
            else:
                if self._rows is None or self._rows.dims != dims:
                    self._rows = _Rows(dims)
                self._rows.append(new_ids, new.astype(np.float32), count)
            top = max(top, int(new_ids.max()))
            if ordered:
                self._max_id = top
            if stop is not None and stop():
                result.close()
                if not ordered:  # rows past the last read may sit anywhere: start again
                    self._lists, self._max_id = None, 0
                return self._rows  # not stamped: the next refresh reads on from here
        self._max_id = top
        if read > _REFRESH_BATCH:
            _return_freed_memory()
        held = self._lists.n if self._lists is not None else self._rows.n if self._rows is not None else count
        if held != count:
            live = np.fromiter(conn.execute(sa.select(chunks.c.id)).scalars(), dtype=np.int64)
            if self._lists is not None:
                self._lists.keep(live)
            elif self._rows is not None:
                self._rows = self._rows.kept(np.isin(self._rows.ids[: self._rows.n], live))
        self._stamp = tuple(stamp) if stamp is not None else None
        self.ready.set()
        return self._rows


def _trained_lists(conn: Connection, count: int) -> InvertedLists | None:
    """Inverted lists trained on every ``stride``-th vector of the table (one pass reading
    few rows: 2 s of CPU at 630,000 chunks, against 15 s for all of them)."""
    import numpy as np

    nlist = ivf.lists_for(count)
    stride = max(1, count // (nlist * ivf.TRAIN_PER_LIST))
    rows = conn.exec_driver_sql(
        f"SELECT embedding FROM {VECTORS} WHERE chunk_id % ? = 0", (stride,)
    ).fetchall()
    if len(rows) < 64 * ivf.TRAIN_PER_LIST:
        return None  # a table far behind its chunks: the flat copy
    dims = len(rows[0][0]) // 4
    sample = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), dims)
    sample = sample / np.maximum(np.linalg.norm(sample, axis=1, keepdims=True), 1e-12)
    return InvertedLists(dims, min(nlist, max(1, len(sample) // ivf.TRAIN_PER_LIST)), sample)


class _Busy(Exception):
    """Another thread holds the copy's lock for its first read."""


#: At most this many new vectors are read by their ids when the copy catches up (sqlite-vec
#: reads a 1,024-vector block for each: ~0.8 ms a vector).
_READ_BY_ID = 64

#: Vectors read from the table at a time when the mirror catches up.
_REFRESH_BATCH = 8192


def _return_freed_memory() -> None:
    """Give the memory freed after reading many vectors back to the system (glibc keeps
    it otherwise: measured 1,065 MB anonymous after loading 630,000 vectors, 568 MB after)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _closest_signs(rows: _Rows, qbits: Any, picked: Any, shortlist: int) -> Any:
    """The row positions (of ``picked``, or of all rows) whose sign bits are nearest ``qbits``
    in Hamming distance: the ``shortlist`` nearest and any tied with the last of them."""
    import numpy as np

    n = rows.n
    dist = np.zeros(n if picked is None else len(picked), dtype=np.uint16)
    for w in range(rows.words):
        word = rows.bits[w, :n] if picked is None else rows.bits[w, picked]
        dist += np.bitwise_count(word ^ qbits[w])
    # Distances are small integers: a histogram finds the cut without sorting.
    below = np.cumsum(np.bincount(dist, minlength=64 * rows.words + 1))
    cut = int(np.searchsorted(below, shortlist))
    near = np.flatnonzero(dist <= cut)
    return near if picked is None else picked[near]


def _numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _has_table(conn: Connection, name: str) -> bool:
    return bool(sa.inspect(conn).has_table(name))


class PgVectorStore:
    """A pgvector ``vector(D)`` column with an HNSW index for cosine distance."""

    backend: Backend = "pgvector"

    def __init__(self) -> None:
        self._iterative: bool | None = None
        self._ready = threading.Event()
        self._ready.set()  # the server's HNSW index answers: nothing to load

    def preload(self, conn: Connection, stop: Callable[[], bool] | None = None) -> None:
        pass

    @property
    def ready(self) -> threading.Event:
        return self._ready

    def available(self, conn: Connection) -> str | None:
        if conn.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'vector'").first():
            return None
        if not conn.exec_driver_sql("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").first():
            return (
                "the PostgreSQL server has no pgvector extension; install it "
                "(scripts/install-pgvector.sh does, on Debian) or turn semantic search off"
            )
        return None

    def create(self, conn: Connection, dimensions: int) -> None:
        reason = self.available(conn)
        if reason:
            raise StorageError(reason)
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        self.drop(conn)
        conn.exec_driver_sql(
            f"CREATE TABLE {VECTORS} (chunk_id integer PRIMARY KEY "
            f"REFERENCES semantic_chunks(id) ON DELETE CASCADE, embedding vector({int(dimensions)}) NOT NULL)"
        )
        if dimensions <= 2000:  # the most an HNSW index on vector takes
            conn.exec_driver_sql(
                f"CREATE INDEX {VECTORS}_hnsw ON {VECTORS} USING hnsw (embedding vector_cosine_ops)"
            )

    def drop(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {VECTORS}")

    def holds(self, conn: Connection) -> bool:
        return True

    def convert(self, conn: Connection, dimensions: int) -> None:
        pass

    def remove(self, conn: Connection, ids: Sequence[int]) -> None:
        pass  # the foreign key's ON DELETE CASCADE did it

    def prune(self, conn: Connection) -> None:
        pass  # likewise

    def add(self, conn: Connection, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if items:
            conn.execute(
                sa.text(f"INSERT INTO {VECTORS} (chunk_id, embedding) VALUES (:id, CAST(:v AS vector))"),
                [{"id": cid, "v": _literal(vec)} for cid, vec in items],
            )

    def nearest(
        self, conn: Connection, query: Sequence[float], k: int, candidates: sa.Select[Any] | None = None
    ) -> list[tuple[int, float]]:
        if k <= 0 or not _has_table(conn, VECTORS):
            return []
        v = sa.table(VECTORS, sa.column("chunk_id"), sa.column("embedding"))
        query_vec = sa.cast(sa.bindparam("q", type_=sa.Text), _PgVector())
        distance = v.c.embedding.op("<=>", return_type=sa.Float)(query_vec)
        q = sa.select(v.c.chunk_id, distance.label("d")).order_by(distance).limit(k)
        if candidates is not None:
            # A small allowed set is ranked exactly, by its distances alone: the HNSW scan
            # would stop after hnsw.max_scan_tuples and could miss most of a few hundred
            # chunks spread over the graph. The CTE, materialised, keeps the index out.
            few = conn.execute(candidates.limit(PG_EXACT_MAX + 1)).scalars().all()
            if len(few) <= PG_EXACT_MAX:
                if not few:
                    return []
                exact = (
                    sa.select(v.c.chunk_id, distance.label("d"))
                    .where(v.c.chunk_id.in_(list(few)))
                    .cte("allowed")
                    .prefix_with("MATERIALIZED")
                )
                q = sa.select(exact.c.chunk_id, exact.c.d).order_by(exact.c.d).limit(k)
                rows = conn.execute(q, {"q": _literal(query)}).all()
                return [(int(r.chunk_id), 1.0 - float(r.d)) for r in rows if r.d is not None]
            q = q.where(v.c.chunk_id.in_(candidates.scalar_subquery()))
            if self._iterative is None:
                version = conn.exec_driver_sql(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).scalar()
                self._iterative = _version(str(version or "0")) >= (0, 8)
            if self._iterative:
                # With a filter, let the HNSW scan go on until it has found enough rows.
                conn.exec_driver_sql("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, k))}")
        rows = conn.execute(q, {"q": _literal(query)}).all()
        out = [(int(r.chunk_id), 1.0 - float(r.d)) for r in rows if r.d is not None]
        out.sort(key=lambda x: -x[1])
        return out


class _PgVector(sa.types.UserDefinedType[Any]):
    """pgvector's ``vector`` type, for a cast in a query (the values travel as text)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
