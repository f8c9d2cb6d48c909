"""Exact BM25 rankings of keyword queries from postings kept in memory (SQLite).

FTS5's ``bm25()`` scores every row that matches, about 1.3 µs each, and works out
each phrase's inverse document frequency by reading its whole doclist first: a
word in 60,000 of 100,000 notes costs ~100 ms to rank, and even ranking a few
chosen rows costs two reads of its doclist (~4 ms). So the ranking is computed
here instead, with FTS5's own formula and inputs, from a posting per phrase:
the rows it matches and, for each, its weighted frequency ``f`` (10 a title
instance, 1 a body one). With the row count and token total of the index's
averages record and each row's length from its docsize table, a row's score is
``Σ idf·f(k1+1)/(f + k1(1 − b + b·D/avgdl))`` summed phrase by phrase in the
query's order, the same floating-point operations in the same order as
``fts5Bm25Function``, so scores are equal to FTS5's to the last bit, and so is
the order (a posting whose rows do not all score back to FTS5's exactly is not
kept). An AND query intersects its phrases' postings; ``NOT`` parts take their
rows out (they add nothing to a score in FTS5 either).

A posting is read from FTS5 once (every match scored: 2-3 times what one
ranking of its phrase costs), then kept, per process, within a budget of rows
(the 100,000-note bench vault's 52 queries need 1.3 M rows, 14-22 MB). While a
server serves (:func:`serving`), a search that lacks a posting is ranked by
FTS5 as before and the posting is read on a thread of its own; one-shot
commands never keep any. The most frequent words are not read ahead: at
100,000 notes the fifty most frequent are stop words holding 3.4 M rows, and
the 3,461 words in 1,000 notes or more hold 24 M (400-600 MB).

Writes are followed through the change feed (``note_changes``): a posting and
the row lengths remember the feed's last row they saw, and are brought forward
by reading again only the notes changed since (a note purged, or more than
``REFRESH_LIMIT`` of them changed, drops everything instead); the lengths must
add up to the averages record, or everything is dropped too. Only read-only
transactions use it: a write transaction's own changes may yet roll back.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Postings", "postings", "serving"]

log = logging.getLogger(__name__)

# fts5Bm25Function's constants, and the weights of migration 0002's rank (title, body).
_K1 = 1.2
_B = 0.75
_WEIGHTS = "10.0, 1.0"

_AVERAGES = "SELECT block FROM notes_fts_data WHERE id = 1"
_FEED_END = "SELECT coalesce(max(seq), 0) FROM note_changes"
_CHANGED = (
    "SELECT DISTINCT c.note_id, c.kind, n.seq FROM note_changes c LEFT JOIN notes n ON n.id = c.note_id "
    "WHERE c.seq > :since AND c.seq <= :until"
)
# Every match, scored. The unary + keeps the rowid list a filter on FTS5's scan of the
# phrase's doclist: as a constraint, FTS5 would be asked for each rowid alone and read
# the phrase's doclist again for each (its idf), 2.8 ms a row for a common word.
_ALL = f"SELECT rowid, bm25(notes_fts, {_WEIGHTS}) FROM notes_fts WHERE notes_fts MATCH :text"


@dataclass(frozen=True)
class _Posting:
    feed: int  # the change feed's last row when read
    rows: npt.NDArray[np.int32]  # rowids, ascending
    freq: npt.NDArray[np.float32]  # weighted frequency of each (whole numbers, exact)


@dataclass(frozen=True)
class _Lengths:
    feed: int
    tokens: npt.NDArray[np.float64]  # by rowid: tokens over all columns (-1: not indexed)


class _View:
    """A posting scored at one state of the index: each row's ``f(k1+1)/(f + k1(1 − b +
    b·D/avgdl))``, and for a posting of a good part of the index the same by rowid (0
    where it does not match), which answers membership by one gather."""

    def __init__(self, posting: _Posting, avgdl: float, lengths: _Lengths) -> None:
        import numpy as np

        self.key = (posting.feed, avgdl)
        self.rows = posting.rows
        freq = posting.freq.astype(np.float64)
        norm = _K1 * ((1 - _B) + (_B * lengths.tokens[posting.rows]) / avgdl)
        term: npt.NDArray[np.float64] = (freq * (_K1 + 1.0)) / (freq + norm)
        self._term: npt.NDArray[np.float64] | None = term
        self.dense: npt.NDArray[np.float64] | None = None
        if 2 * len(posting.rows) >= len(lengths.tokens):  # no larger than the rows' terms
            self.dense = np.zeros(len(lengths.tokens))
            self.dense[posting.rows] = term
            self._term = None

    @property
    def term(self) -> npt.NDArray[np.float64]:
        """Each row's term, in the order of ``rows``."""
        if self._term is not None:
            return self._term
        assert self.dense is not None
        return self.dense[self.rows]

    def lookup(
        self, rows: npt.NDArray[np.int32]
    ) -> tuple[npt.NDArray[np.bool_] | None, npt.NDArray[np.float64]]:
        """Which of ``rows`` (ascending) match (``None``: all), and their terms."""
        if self.dense is not None:
            values = self.dense[rows]
            hit = values > 0.0
        else:
            import numpy as np

            at = np.searchsorted(self.rows, rows)
            at[at == len(self.rows)] = 0
            hit = self.rows[at] == rows if len(self.rows) else np.zeros(len(rows), dtype=bool)
            values = self.term[at] if len(self.rows) else np.zeros(len(rows))
        return (None if hit.all() else hit), values


class _Stale(Exception):
    """The kept state cannot be brought to the reader's snapshot."""


class Postings:
    """Postings by FTS5 phrase text, for one database at a time (another one's feed or
    averages replace them all). Counts what it read from FTS5 and what it scored, for
    tests and benchmarks to see the work done."""

    #: Posting rows kept in all (16 to 24 bytes each with their terms: 2,000,000 rows are
    #: 32-48 MB), least recently used first out.
    BUDGET = 2_000_000
    #: Changed notes a posting is brought forward by; more, and everything is read again.
    REFRESH_LIMIT = 512

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._db: weakref.ref[Engine] | None = None
        self._feed, self._averages = -1, b""
        self._lists: OrderedDict[str, _Posting] = OrderedDict()
        self._views: dict[str, _View] = {}
        self._size = 0
        self._lengths: _Lengths | None = None
        #: Rows FTS5 scored to read or refresh postings; rows scored from postings.
        self.read_rows = 0
        self.scored_rows = 0
        #: Read a missing posting on a thread of its own (FTS5 ranks the query meanwhile)
        #: rather than in the search that first needs it.
        self.background = False
        self._wanted: OrderedDict[str, Engine] = OrderedDict()
        self._reader: threading.Thread | None = None
        self._settled = threading.Condition(self._lock)

    def clear(self, *, lengths: bool = True) -> None:
        """Forget every posting (and the row lengths, unless ``lengths`` is false)."""
        with self._lock:
            self._lists.clear()
            self._views.clear()
            self._size = 0
            if lengths:
                self._lengths = None
                self._feed = -1

    # -- ranking --

    def best(
        self, conn: Connection, positive: Sequence[str], negative: Sequence[str], fetch: int
    ) -> list[tuple[int, float]] | None:
        """The ``fetch`` best rows of the AND of the ``positive`` FTS5 phrases without any
        of the ``negative`` ones, as (rowid, FTS5 rank), best first, equal ranks by rowid;
        ``None`` when this cannot answer (FTS5 then ranks)."""
        if not self.enabled or not positive:
            return None
        import numpy as np

        try:
            feed = int(conn.exec_driver_sql(_FEED_END).scalar_one())
            averages = bytes(conn.exec_driver_sql(_AVERAGES).scalar() or b"")
            counts = _varints(averages)
            if not counts or counts[0] <= 0:  # nothing indexed (yet)
                return None
            self._adopt(conn, feed, averages)
            n_rows, tokens = counts[0], sum(counts[1:])
            avgdl = float(tokens) / float(n_rows)
            if self.background and self._ask(conn.engine, (*positive, *negative)):
                return None
            lengths = self._lengths_at(conn, feed, n_rows, tokens)
            lists = [self._posting(conn, p, feed, n_rows, avgdl, lengths) for p in (*positive, *negative)]
        except _Stale:
            return None
        views = [self._view(p, t, feed, avgdl, lengths) for p, t in zip(lists, (*positive, *negative), strict=True)]
        pos, neg = views[: len(positive)], views[len(positive) :]
        # The intersection, from the shortest posting; each phrase's F of each row kept.
        first = min(range(len(pos)), key=lambda i: len(pos[i].rows))
        cand = pos[first].rows
        terms: dict[int, npt.NDArray[np.float64]] = {first: pos[first].term}
        for i in sorted(range(len(pos)), key=lambda i: len(pos[i].rows)):
            if i in terms:
                continue
            hit, values = pos[i].lookup(cand)
            if hit is not None:
                cand, values = cand[hit], values[hit]
                terms = {k: v[hit] for k, v in terms.items()}
            terms[i] = values
        for view in neg:
            hit, _ = view.lookup(cand)
            keep = np.zeros(len(cand), dtype=bool) if hit is None else ~hit
            if not keep.all():
                cand = cand[keep]
                terms = {k: v[keep] for k, v in terms.items()}
        if not len(cand):
            return []
        score = np.zeros(len(cand))
        for i, view in enumerate(pos):  # in the query's order, as FTS5 adds them up
            score += _idf(n_rows, len(view.rows)) * terms[i]
        rank = -1.0 * score
        with self._lock:
            self.scored_rows += len(cand)
        if len(cand) > fetch:
            top = np.argpartition(rank, fetch - 1)[:fetch]
            cand, rank = cand[top], rank[top]
        order = np.lexsort((cand, rank))
        return [(int(r), float(s)) for r, s in zip(cand[order].tolist(), rank[order].tolist(), strict=True)]

    # -- reading them in the background --

    #: Phrases waiting for the reader, at most; more are asked for again by later searches.
    WAITING = 64

    def _ask(self, engine: Engine, texts: Sequence[str]) -> bool:
        """Hand the phrases without a posting to the reader; whether there were any."""
        with self._lock:
            missing = [t for t in texts if t not in self._lists]
            if self._lengths is None and not missing:  # the row lengths are read first, there
                missing = list(texts[:1])
            for text in missing:
                if text not in self._wanted and len(self._wanted) < self.WAITING:
                    self._wanted[text] = engine
            if self._wanted and self._reader is None:
                self._reader = threading.Thread(target=self._read_wanted, name="noteloom-postings", daemon=True)
                self._reader.start()
        return bool(missing)

    def _read_wanted(self) -> None:
        """The reader: reads the postings asked for, each in a read transaction of its own,
        and ends when none is left (the next one asked for starts it again)."""
        while True:
            with self._lock:
                if not self._wanted or not self.background:
                    self._wanted.clear()
                    self._reader = None
                    self._settled.notify_all()
                    return
                text, engine = next(iter(self._wanted.items()))
            try:
                self._read_one(engine, text)
            except Exception:  # the search that needs it reads it or lets FTS5 rank
                log.debug("reading the posting of %r failed", text, exc_info=True)
            with self._lock:
                self._wanted.pop(text, None)

    def _read_one(self, engine: Engine, text: str) -> None:
        with engine.connect() as conn, conn.begin():
            feed = int(conn.exec_driver_sql(_FEED_END).scalar_one())
            averages = bytes(conn.exec_driver_sql(_AVERAGES).scalar() or b"")
            counts = _varints(averages)
            if not counts or counts[0] <= 0:
                return
            self._adopt(conn, feed, averages)
            n_rows, tokens = counts[0], sum(counts[1:])
            lengths = self._lengths_at(conn, feed, n_rows, tokens)
            self._posting(conn, text, feed, n_rows, float(tokens) / float(n_rows), lengths)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until the reader has nothing left to read; whether it came to that."""
        with self._lock:
            return self._settled.wait_for(lambda: self._reader is None, timeout)

    # -- keeping them true --

    def _adopt(self, conn: Connection, feed: int, averages: bytes) -> None:
        """Drop everything kept for another database, or when the index changed with no
        row in the feed to say so."""
        with self._lock:
            if self._db is None or self._db() is not conn.engine or (feed == self._feed and averages != self._averages):
                self._db = weakref.ref(conn.engine)
                self._lists.clear()
                self._views.clear()
                self._size = 0
                self._lengths = None
                self._feed = -1
            if feed >= self._feed:
                self._feed, self._averages = feed, averages

    def _changed(self, conn: Connection, since: int, until: int) -> list[int]:
        """The rowids of the notes changed between two rows of the feed."""
        if since > until:
            raise _Stale
        rows = conn.exec_driver_sql(_CHANGED.replace(":since", "?").replace(":until", "?"), (since, until)).all()
        if len(rows) > self.REFRESH_LIMIT or any(r.seq is None for r in rows):
            self.clear()  # purged notes leave no rowid to follow: read everything again
            raise _Stale
        return sorted({int(r.seq) for r in rows})

    def _view(self, posting: _Posting, text: str, feed: int, avgdl: float, lengths: _Lengths) -> _View:
        with self._lock:
            kept = self._views.get(text)
        if kept is not None and kept.key == (posting.feed, avgdl) and kept.rows is posting.rows:
            return kept
        made = _View(posting, avgdl, lengths)
        with self._lock:
            if text in self._lists:
                self._views[text] = made
        return made

    def _lengths_at(self, conn: Connection, feed: int, n_rows: int, n_tokens: int) -> _Lengths:
        """The row lengths at ``feed``; they must add up to the averages record's totals (a
        change to the index that the feed did not carry would show there)."""
        import numpy as np

        with self._lock:
            kept = self._lengths
        if kept is not None and kept.feed == feed:
            return kept
        if kept is not None and kept.feed > feed:
            raise _Stale  # a reader behind the kept state: FTS5 ranks for it
        if kept is None:
            top = int(conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM notes_fts_docsize").scalar_one())
            tokens = np.full(top + 1, -1.0)
            for rowid, size in conn.exec_driver_sql("SELECT id, sz FROM notes_fts_docsize"):
                tokens[rowid] = sum(_varints(size))
        else:
            changed = self._changed(conn, kept.feed, feed)
            tokens = kept.tokens
            if changed:
                top = max(changed[-1], len(tokens) - 1)
                tokens = np.concatenate([tokens, np.full(top + 1 - len(tokens), -1.0)]) if top >= len(tokens) else tokens.copy()
                tokens[changed] = -1.0
                marks = ",".join("?" * len(changed))
                for rowid, size in conn.exec_driver_sql(
                    f"SELECT id, sz FROM notes_fts_docsize WHERE id IN ({marks})", tuple(changed)
                ):
                    tokens[rowid] = sum(_varints(size))
        present = tokens >= 0.0
        if int(tokens[present].sum()) != n_tokens or int(np.count_nonzero(present)) != n_rows:
            self.clear()
            raise _Stale
        made = _Lengths(feed, tokens)
        with self._lock:
            if self._lengths is None or self._lengths.feed <= feed:
                self._lengths = made
        return made

    def _posting(
        self, conn: Connection, text: str, feed: int, n_rows: int, avgdl: float, lengths: _Lengths
    ) -> _Posting:
        import numpy as np

        with self._lock:
            kept = self._lists.get(text)
            if kept is not None:
                self._lists.move_to_end(text)
        if kept is not None and kept.feed == feed:
            return kept
        if kept is not None and kept.feed > feed:
            raise _Stale
        if kept is None:
            rows, freq = self._read(conn, text, None, n_rows, avgdl, lengths, 0)
        else:
            changed = self._changed(conn, kept.feed, feed)
            gone = _members(np.asarray(changed, dtype=np.int32), kept.rows)
            stay_rows, stay_freq = kept.rows[~gone], kept.freq[~gone]
            new_rows, new_freq = (
                self._read(conn, text, changed, n_rows, avgdl, lengths, len(stay_rows)) if changed else (stay_rows[:0], stay_freq[:0])
            )
            rows = np.concatenate([stay_rows, new_rows])
            order = np.argsort(rows, kind="stable")
            rows, freq = rows[order], np.concatenate([stay_freq, new_freq])[order]
        made = _Posting(feed, rows, freq)
        with self._lock:
            old = self._lists.pop(text, None)
            if old is not None:
                self._size -= len(old.rows)
            self._lists[text] = made
            self._size += len(rows)
            self._views.pop(text, None)
            while self._size > self.BUDGET and len(self._lists) > 1:
                out, evicted = self._lists.popitem(last=False)
                self._size -= len(evicted.rows)
                self._views.pop(out, None)
        return made

    def _read(
        self,
        conn: Connection,
        text: str,
        only: list[int] | None,
        n_rows: int,
        avgdl: float,
        lengths: _Lengths,
        others: int,
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        """The rows of phrase ``text`` (all, or those of ``only``, the rest of the posting
        being ``others`` rows) with their weighted frequencies, recovered from FTS5's
        scores and checked to score back to them exactly."""
        import numpy as np

        sql, args = _ALL.replace(":text", "?"), list[object]([text])
        if only is not None:
            sql += f" AND rowid BETWEEN ? AND ? AND +rowid IN ({','.join('?' * len(only))})"
            args += [only[0], only[-1], *only]
        found = conn.exec_driver_sql(sql, tuple(args)).all()
        with self._lock:
            self.read_rows += len(found)
        rows = np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))
        fts = np.fromiter((r[1] for r in found), dtype=np.float64, count=len(found))
        idf = _idf(n_rows, others + len(found))
        if len(rows) and int(rows.max()) >= len(lengths.tokens):
            raise _Stale
        norm = _K1 * ((1 - _B) + (_B * lengths.tokens[rows]) / avgdl)
        f_term = -fts / idf  # f(k1+1)/(f + norm)
        freq = np.rint(f_term * norm / ((_K1 + 1.0) - f_term))
        again = -1.0 * (idf * ((freq * (_K1 + 1.0)) / (freq + norm)))
        if not np.array_equal(again, fts):
            # Not this posting's fault alone (lengths or averages out of step): start again.
            self.clear()
            raise _Stale
        if len(freq) and (freq.max() >= 2**24 or rows.max() >= 2**31):
            raise _Stale  # not exact in float32 / int32 (no note is that long)
        order = np.argsort(rows, kind="stable")
        return rows[order].astype(np.int32), freq[order].astype(np.float32)


def _members(sorted_rows: npt.NDArray[np.int32], rows: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
    """Which of ``rows`` are in ``sorted_rows`` (ascending)."""
    import numpy as np

    if not len(sorted_rows):
        return np.zeros(len(rows), dtype=bool)
    at = np.searchsorted(sorted_rows, rows)
    at[at == len(sorted_rows)] = 0
    hit: npt.NDArray[np.bool_] = sorted_rows[at] == rows
    return hit


def _idf(n_rows: int, n_hits: int) -> float:
    """fts5Bm25GetData's idf: ``log((N − n + 0.5)/(n + 0.5))``, at least 1e-6."""
    idf = math.log((n_rows - n_hits + 0.5) / (n_hits + 0.5))
    return 1e-6 if idf <= 0.0 else idf


def _varints(blob: bytes) -> list[int]:
    """SQLite varints, one after another (FTS5's averages and docsize records)."""
    out: list[int] = []
    i, n = 0, len(blob)
    while i < n:
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(value)
    return out


postings = Postings()


@contextmanager
def serving() -> Iterator[None]:
    """Keep postings while a long-running process serves searches, each read in the
    background the first time a search needs it (that search is ranked by FTS5, as
    one-shot commands always are: reading a posting costs 2-3 times what ranking its
    phrase once does)."""
    was = postings.enabled, postings.background
    postings.enabled = postings.background = True
    try:
        yield
    finally:
        postings.enabled, postings.background = was
        postings.settle(timeout=30)
