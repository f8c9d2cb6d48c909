"""Memories as vectors, so the memory context ranks by meaning too (``context.Similarity``).

A message that shares no word with the fact it needs ("a prawn curry" for a shellfish
allergy) reaches it only through meaning: on ``bench/bench_memory.py`` terms alone bring
the right memory into layer 1 or 2 for 63 % of messages, with the local model's
similarity for over 90 %.

:class:`MemoryVectors` keeps one vector per memory in this process, keyed by the
memory's id and ``updated_time``: the memory's title and the opening of its body
(``OPENING`` characters; the measurement is beside it). It never embeds on the request
path:

- :meth:`MemoryVectors.similarity` (called by :meth:`ContextBuilder.build
  <noteloom.memory.context.ContextBuilder.build>` with the acting user's scoped memories)
  answers from the vectors that are ready, and hands the missing or stale ones to the
  worker. With none ready it answers ``None``: the context is the keyword one, and the
  message is not even embedded. A memory that is gone from the user's scope loses its
  vector there and then.
- the worker (:meth:`MemoryVectors.running`, entered with the semantic indexer, so
  one-shot commands never load the model for it) embeds in small batches on a thread of
  its own at a lower CPU priority, through the same embedder as the semantic index (the
  shared embedding service under ``serve --workers``).

Scores are cosine similarities with numpy over the user's own scoped memories only (the
rows :func:`noteloom.memory.store.scoped` gave), so another user's memory is never scored.
The message's vector comes from ``query_vector`` (the semantic index's cached one).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio import to_thread

from noteloom.embedders import Embedder, _lower_priority
from noteloom.memory.context import MemoryIndex, Similarity
from noteloom.memory.store import Memory

log = logging.getLogger(__name__)

#: Characters of a memory's body embedded after its title. On bench/bench_memory.py with
#: the onnx int8 MiniLM (1,600 memories, 150 messages; right memory in layer 1 or 2 for all
#: messages / time to embed them all, load ~4.8 on 2 cores): title only 87 % / 3.1 s,
#: 100 characters 93 % / 10.5 s, 200 characters 92 % / 12.5 s, 400 characters 91 % / 14.3 s;
#: the bench's first run, 1,000 characters, 91 %. The title and the opening sentence carry
#: the fact; more text costs time, not recall (one message is 0.7 point).
OPENING = 200
#: Memories embedded per call: small, so a stop waits for little and vectors come in steadily.
BATCH = 32
#: Vectors kept in this process (384 float32 each: ~1.5 KB), the least recently used dropped.
MAX_VECTORS = 50_000
#: Memories a similarity names per message (the closest): the ones selection can use.
TOP = 200
#: How much lower the worker runs than the requests it shares the CPU with.
NICE = 10
#: Longest wait after a failed batch before the next try (doubling from 1 s).
MAX_BACKOFF = 60.0
#: The owner key of shared memories (a personal one is its user's id).
SHARED = ""


def memory_text(row: Memory, opening: int = OPENING) -> str:
    """What is embedded of a memory: its title and the opening of its body."""
    return f"{row.title}\n{row.content[:opening]}"


@dataclass(frozen=True)
class _Kept:
    updated: int
    owner: str
    vector: Any  # a unit float32 numpy row


@dataclass(frozen=True)
class _Matrix:
    """One user's ready vectors, stacked, for the index they were taken from."""

    index: MemoryIndex
    version: int
    ids: list[str]
    vectors: Any  # float32 (n, dims), unit rows


class MemoryVectors:
    """One vector per memory, embedded in the background; see the module docstring."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        query_vector: Callable[[str], Sequence[float]] | None = None,
        opening: int = OPENING,
        batch: int = BATCH,
        max_vectors: int = MAX_VECTORS,
        top: int = TOP,
        users: int = 64,
    ) -> None:
        """Cheap: no thread, no model, no numpy until there is work."""
        self.embedder = embedder
        self._query = query_vector or embedder.embed_query
        self.opening = opening
        self.batch = max(1, batch)
        self.max_vectors = max_vectors
        self.top = top
        self._users = users
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        #: id -> (updated_time, owner, text), oldest request first.
        self._pending: OrderedDict[str, tuple[int, str, str]] = OrderedDict()
        self._matrices: OrderedDict[str, _Matrix] = OrderedDict()
        #: What the worker is embedding now: id -> updated_time.
        self._inflight: dict[str, int] = {}
        self._version = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        #: Set while nothing is pending or being embedded (tests and the bench wait on it).
        self.idle = threading.Event()
        self.idle.set()
        #: The last embedding failure, ``None`` once a batch succeeds again.
        self.error: str | None = None

    # -- the request path -------------------------------------------------------------------

    def similarity(self, index: MemoryIndex, user_id: str) -> Similarity | None:
        """Scores by meaning over ``index`` (``user_id``'s scoped memories), from the vectors
        ready now; ``None`` when none are. Missing and stale ones go to the worker."""
        with self._cond:
            matrix = self._matrices.get(user_id)
            if matrix is None or matrix.index is not index or matrix.version != self._version:
                matrix = self._stack(index, user_id)
                self._matrices[user_id] = matrix
                while len(self._matrices) > self._users:
                    self._matrices.popitem(last=False)
            self._matrices.move_to_end(user_id)
        if not matrix.ids:
            return None
        return lambda message: self._scores(matrix, message)

    def _stack(self, index: MemoryIndex, user_id: str) -> _Matrix:
        """(Under the lock.) The ready vectors of ``index``'s rows; queues the others and
        drops the vectors of this user's (and shared) memories that are gone."""
        ids: list[str] = []
        rows: list[Any] = []
        live: set[str] = set()
        queued = False
        for row in index.rows[: self.max_vectors]:
            live.add(row.id)
            kept = self._kept.get(row.id)
            if kept is not None and kept.updated == row.updated_time:
                ids.append(row.id)
                rows.append(kept.vector)
                self._kept.move_to_end(row.id)
                continue
            waiting = self._pending.get(row.id)
            if (waiting is None or waiting[0] != row.updated_time) and self._inflight.get(row.id) != row.updated_time:
                owner = row.user_id if row.scope == "personal" and row.user_id else SHARED
                self._pending[row.id] = (row.updated_time, owner, memory_text(row, self.opening))
                queued = True
        gone = [k for k, v in self._kept.items() if v.owner in (user_id, SHARED) and k not in live]
        for k in gone:
            del self._kept[k]
        for k in [k for k, v in self._pending.items() if v[1] in (user_id, SHARED) and k not in live]:
            del self._pending[k]
        if queued:
            self.idle.clear()
            self._cond.notify_all()
        elif not self._pending and not self._inflight:
            self.idle.set()
        if not rows:
            return _Matrix(index, self._version, [], None)
        import numpy as np

        return _Matrix(index, self._version, ids, np.vstack(rows))

    def _scores(self, matrix: _Matrix, message: str) -> Mapping[str, float]:
        """The ``top`` closest memories to ``message``: id -> cosine."""
        import numpy as np

        try:
            q = np.asarray(self._query(message), dtype=np.float32)
        except Exception as exc:  # a turn goes on with terms only; say why once per failure
            log.warning("memory similarity: the message could not be embedded (%s); terms only", exc)
            return {}
        norm = float(np.linalg.norm(q))
        if not norm or q.shape[0] != matrix.vectors.shape[1]:
            return {}
        scores = matrix.vectors @ (q / norm)
        k = min(self.top, len(scores))
        best = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        return {matrix.ids[i]: float(scores[i]) for i in best}

    # -- the worker -------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[MemoryVectors]:
        """Embed what turns ask for while the context is open, on a thread of its own; on
        exit it stops after the batch in hand (one call of at most ``batch`` memories)."""
        self._stop.clear()
        worker = threading.Thread(target=self._work, name="noteloom-memory-vectors", daemon=True)
        worker.start()
        try:
            yield self
        finally:
            with self._cond:
                self._stop.set()
                self._cond.notify_all()
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(worker.join)

    def _work(self) -> None:
        _lower_priority(NICE)
        failures = 0
        while True:
            with self._cond:
                while not self._pending and not self._stop.is_set():
                    self.idle.set()
                    self._cond.wait()
                if self._stop.is_set():
                    return
                batch = []
                for _ in range(min(self.batch, len(self._pending))):
                    key, (updated, owner, text) = self._pending.popitem(last=False)
                    batch.append((key, updated, owner, text))
                    self._inflight[key] = updated
            try:
                vectors = self.embedder.embed_documents([text for *_, text in batch])
            except Exception as exc:
                failures += 1
                with self._cond:
                    self._inflight.clear()
                    self.error = str(exc)
                    for key, updated, owner, text in batch:  # back in line, unless changed meanwhile
                        self._pending.setdefault(key, (updated, owner, text))
                log.warning("memory vectors: embedding failed (%s); trying again", exc)
                self._stop.wait(min(MAX_BACKOFF, 2.0 ** (failures - 1)))
                continue
            failures = 0
            self._keep(batch, vectors)

    def _keep(self, batch: list[tuple[str, int, str, str]], vectors: Sequence[Sequence[float]]) -> None:
        import numpy as np

        array = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(array, axis=1, keepdims=True)
        array /= np.where(norms == 0, 1.0, norms)
        with self._cond:
            self._inflight.clear()
            self.error = None
            for (key, updated, owner, _), vector in zip(batch, array, strict=True):
                kept = self._kept.get(key)
                if kept is not None and kept.updated > updated:
                    continue
                self._kept[key] = _Kept(updated, owner, vector)
                self._kept.move_to_end(key)
            while len(self._kept) > self.max_vectors:
                self._kept.popitem(last=False)
            self._version += 1
            if not self._pending:
                self.idle.set()

    # -- what there is ----------------------------------------------------------------------

    def ready(self, memory_id: str) -> bool:
        """Whether a vector of ``memory_id`` (of some version) is kept."""
        with self._cond:
            return memory_id in self._kept

    def __len__(self) -> int:
        with self._cond:
            return len(self._kept)

    def pending(self) -> int:
        """Memories waiting to be embedded."""
        with self._cond:
            return len(self._pending) + len(self._inflight)
