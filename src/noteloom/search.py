"""Keyword search over the notes: ranked hits with a snippet and the section they fall in.

The index is the database's own (migration 0002): SQLite FTS5, or a PostgreSQL
tsvector with a GIN index, kept current by the database in the transaction of
every write; notes in the trash are not in it. ``search_notes`` parses the
query (:mod:`noteloom.query`), asks the index for the best-ranked notes that
pass the filters, then reads only the bodies of the hits on the page to place
a snippet and a section on each.

Ranking is BM25 (SQLite; a title match weighs ten times a body match) or
``ts_rank`` with the same weighting (PostgreSQL); ties go to the most recently
updated note (then the higher id). Queries made only of filters list notes
newest first, through an index of live notes by update time. Ranking costs
about a microsecond per matching note on SQLite, so a word found in most notes
is the slow case (~75 ms for 77,000 matches): each ranking is kept, in the
process, for as long as the index stays as it was (``_Rankings``), so a query
asked again or paged through is ranked once.

CJK text is indexed as overlapping character pairs (``db.index_text``) and
queries are split the same way, so a two-character word inside a longer run is
found, and a single character matches every pair it starts.

Limits, on PostgreSQL only: accents must match exactly (``unaccent`` is not
assumed), phrases deep inside very long notes may be missed (tsvector
positions stop at 16,383), and a note whose index would exceed 1 MB is indexed
by its first 100,000 characters.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, assert_never

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from noteloom import db, outline
from noteloom.errors import InvalidInput
from noteloom.postings import postings
from noteloom.query import (
    CompletedFilter,
    DateFilter,
    Filter,
    IdFilter,
    NotebookFilter,
    Query,
    SourceUrlFilter,
    TagFilter,
    TextTerm,
    Token,
    TypeFilter,
    parse_query,
)
from noteloom.workspace import Workspace

__all__ = ["SNIPPET_CHARS", "SearchHit", "count_matches", "notes_allowed", "search_notes"]

#: About how long a snippet is, ellipses aside.
SNIPPET_CHARS = 200
MAX_LIMIT = 1000
#: A filter matching at most this many notes drives a filter-only query (SQLite).
_DRIVE_LIMIT = 1000
#: Best text matches a filtered query checks before it joins every match to its note.
_WINDOW = 256
#: ... and at least this many per row the page needs.
_WINDOW_PER_ROW = 16
_SNIPPET_LEAD = 60

_n = db.notes
_fts = sa.table("notes_fts", sa.column("rowid"), sa.column("rank"))
# The table's configured rank (migration 0002), called directly. Unfiltered, the best
# matches come from the index alone: SQLite's top-N sort over bm25() costs about half of
# ``ORDER BY rank``, which makes FTS5 sort through an inner statement of its own (2.8
# against 5.1 ms for a word in 7,000 of 100,000 notes). With filters to check on the
# notes, ``ORDER BY rank`` wins instead: FTS5 hands rows over best first, so only rows up
# to the page's end are joined (measured on the bench mix: 10.6 against 14.2 ms for
# ``word* type:todo``).
_BM25: ColumnElement[Any] = sa.literal_column("bm25(notes_fts, 10.0, 1.0)")
# FTS5 reads "notes_fts MATCH ?" (the table's own name) as a match on every column.
_FTS_TABLE: ColumnElement[Any] = sa.literal_column("notes_fts")
_SEARCH_VECTOR: ColumnElement[Any] = sa.literal_column("notes.search_vector")
# SQLite's unary + keeps a column's index out of a plan (see _Plan._live).
_PLUS_DELETED: ColumnElement[Any] = sa.literal_column("+notes.deleted_time")
_PLUS_NOTEBOOK: ColumnElement[Any] = sa.literal_column("+notes.notebook_id")
# ts_rank weights for D, C, B (body), A (title): a title match weighs ten times a body one.
_PG_WEIGHTS: ColumnElement[Any] = sa.literal_column("'{0, 0, 0.1, 1}'::float4[]")


def _tsquery(text: str) -> ColumnElement[Any]:
    return sa.func.to_tsquery(sa.literal_column("'simple'::regconfig"), sa.bindparam(None, text, sa.Text))


@dataclass(frozen=True)
class SearchHit:
    """One note found by :func:`search_notes`.

    ``snippet`` is whitespace-normalised text around the first place in the body
    where a query word occurs (the start of the body when the words matched only
    the title; ``""`` when the query has no word that could match a body).
    ``section`` is the path of the innermost section holding that place, as the
    outline and ``read_note`` address it, and ``section_heading`` its heading
    (``""`` for section ``"0"``); both are ``None`` when no body word anchors the hit.
    ``score`` is higher for better matches (0.0 for queries made only of filters).
    ``notebook`` is the title of the note's notebook, and ``clipped`` whether the note
    came from outside the user's own writing (it has a source URL).
    """

    id: str
    title: str
    notebook_id: str
    updated_time: int
    snippet: str
    section: str | None
    section_heading: str | None
    score: float
    notebook: str = ""
    clipped: bool = False


def search_notes(
    ws: Workspace,
    query: str | Query,
    *,
    limit: int = 20,
    offset: int = 0,
    notebook_ids: Collection[str] | None = None,
    now_ms: int | None = None,
    conn: Connection | None = None,
) -> list[SearchHit]:
    """The notes matching ``query``, best first.

    ``notebook_ids`` restricts the search to exactly those notebooks (``None``:
    all). ``now_ms`` is the "now" of relative dates (``created:day-7``). ``conn``
    runs it inside the caller's transaction (which sees its own writes).
    Raises :class:`~noteloom.errors.QueryError` for a malformed query.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 0 to {MAX_LIMIT}, not {limit!r}", field="limit")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be a whole number from 0 up, not {offset!r}", field="offset")
    q = query if isinstance(query, Query) else parse_query(query, now_ms=now_ms)
    if limit == 0:
        return []
    with _reading(ws, conn) as c:
        rows = _Plan(c, q, notebook_ids).page(limit, offset)
        page = _page(c, [r.seq for r in rows], bool(q.body_terms)) if rows else {}
    anchor = _anchor(q.body_terms) if q.body_terms else None
    return [_hit(r, *page.get(r.seq, ("", "", False)), anchor) for r in rows]


def count_matches(
    ws: Workspace,
    query: str | Query,
    *,
    notebook_ids: Collection[str] | None = None,
    now_ms: int | None = None,
    conn: Connection | None = None,
) -> int:
    """How many notes match ``query`` (the same rules as :func:`search_notes`)."""
    q = query if isinstance(query, Query) else parse_query(query, now_ms=now_ms)
    with _reading(ws, conn) as c:
        return _Plan(c, q, notebook_ids).count()


def notes_allowed(
    conn: Connection, q: Query, notebook_ids: Collection[str] | None = None
) -> sa.Select[Any] | None:
    """The ids of the live notes that ``q``'s filters and exclusions let through, its
    positive words left out, as a select (``None``: nothing restricts). Another ranking
    (semantic search) stays within it, so the query language means the same there.

    With ``any:1`` the positive filters are alternatives to the words, so they restrict
    nothing here; ``notebook:`` and every negated item still do. Tag and notebook names
    are resolved on ``conn`` now: the select itself runs on any connection of the same
    database.
    """
    filters = tuple(
        f for f in q.filters if not q.match_any or f.negated or isinstance(f, NotebookFilter)
    )
    if not filters and not q.negative_terms and notebook_ids is None:
        return None
    plan = _Plan(conn, Query(q.negative_terms, filters, False), notebook_ids)
    return sa.select(_n.c.id).where(*plan._where())


@contextmanager
def _reading(ws: Workspace, conn: Connection | None) -> Iterator[Connection]:
    if conn is not None:
        yield conn
    else:
        with ws.read() as c:
            yield c


# -- the SQL ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    seq: int
    id: str
    title: str
    notebook_id: str
    updated_time: int
    score: float


_COLUMNS = (_n.c.seq, _n.c.id, _n.c.title, _n.c.notebook_id, _n.c.updated_time)

# The statements every search runs, built once (building one costs about as much as
# running it for a rare word): the best ``fetch`` matches by the index alone, those
# joined to their notes, and the bodies of a page.
_TOP = (
    sa.select(_fts.c.rowid, _BM25.label("rank"))
    .where(_FTS_TABLE.match(sa.bindparam("fts_text")))
    .order_by(sa.literal_column("rank"))
    .limit(sa.bindparam("fetch"))
)
_NOTES_BY_SEQ = sa.select(*_COLUMNS).where(_n.c.seq.in_(sa.bindparam("seqs", expanding=True)))
# The state of the index: its structure record (segments and a counter every flush of a
# write transaction moves on) and its averages record (rows and tokens in all).
_INDEX_STATE = "SELECT group_concat(hex(block), '.') FROM notes_fts_data WHERE id IN (1, 10)"
_PAGE = (
    sa.select(_n.c.seq, sa.literal("").label("body"), db.notebooks.c.title.label("notebook"),
              (_n.c.source_url != "").label("clipped"))
    .select_from(_n.join(db.notebooks, db.notebooks.c.id == _n.c.notebook_id))
    .where(_n.c.seq.in_(sa.bindparam("seqs", expanding=True)))
)
_PAGE_BODIES = _PAGE.with_only_columns(
    _n.c.seq, _n.c.body, db.notebooks.c.title.label("notebook"), (_n.c.source_url != "").label("clipped")
)


# The same on SQLite, run on the driver's connection (in the same transaction): through
# SQLAlchemy it cost 0.22 ms of CPU a search for 0.05 ms of SQLite's own work.
_PAGE_SQL = (
    "SELECT notes.seq, {body}, notebooks.title, notes.source_url != '' FROM notes "
    "JOIN notebooks ON notebooks.id = notes.notebook_id WHERE notes.seq IN ({seqs})"
)


def _page(c: Connection, seqs: list[int], bodies: bool) -> dict[int, tuple[str, str, bool]]:
    """For each note of a page: its body (when a word can anchor a snippet, else ``""``),
    its notebook's title and whether it was clipped."""
    if c.dialect.name != "sqlite":
        found: Iterable[Any] = c.execute(_PAGE_BODIES if bodies else _PAGE, {"seqs": seqs})
    else:
        sql = _PAGE_SQL.format(body="notes.body" if bodies else "''", seqs=",".join("?" * len(seqs)))
        found = c.connection.driver_connection.execute(sql, seqs).fetchall()  # type: ignore[union-attr]
    return {r[0]: (r[1], r[2], bool(r[3])) for r in found}


def _row(r: Any, score: float) -> _Row:
    return _Row(r.seq, r.id, r.title, r.notebook_id, r.updated_time, score)


class _Rankings:
    """Recent best-first lists of index matches, for one state of the index (a state
    read in another transaction, newer or older, replaces them all). Kept per process;
    each list is exact for the query text, up to the length it was read to."""

    #: Matches kept in all (about 100 bytes each), and in one list.
    BUDGET = 100_000
    LONGEST = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""
        self._lists: OrderedDict[str, tuple[int, list[tuple[int, float]]]] = OrderedDict()
        self._size = 0

    def get(self, state: str, text: str, fetch: int) -> list[tuple[int, float]] | None:
        with self._lock:
            if state != self._state:
                return None
            kept = self._lists.get(text)
            if kept is None:
                return None
            read_to, best = kept
            if read_to < fetch and len(best) == read_to:  # shorter than asked, and there are more
                return None
            self._lists.move_to_end(text)
            return best[:fetch]

    def put(self, state: str, text: str, fetch: int, best: list[tuple[int, float]]) -> None:
        if fetch > self.LONGEST:
            return
        with self._lock:
            if state != self._state:
                self._state = state
                self._lists.clear()
                self._size = 0
            old = self._lists.pop(text, None)
            if old is not None:
                self._size -= len(old[1])
            self._lists[text] = (fetch, best)
            self._size += len(best)
            while self._size > self.BUDGET:
                self._size -= len(self._lists.popitem(last=False)[1][1])

    def clear(self) -> None:
        with self._lock:
            self._state = ""
            self._lists.clear()
            self._size = 0


_rankings = _Rankings()


class _Plan:
    """One query turned into SQL for the connection's engine.

    Three shapes, by what drives the query:

    - text terms: the index yields notes best first (FTS5 ranks inside itself with
      ``ORDER BY rank LIMIT``), and only those rows are joined and filtered;
    - filters only, one of them selective (a tag or notebook set with at most
      ``_DRIVE_LIMIT`` notes): start from its notes and sort them by update time;
    - filters only otherwise: read live notes newest first through the index of live
      notes (migration 0002) until the page is full.
    """

    def __init__(self, conn: Connection, q: Query, notebook_ids: Collection[str] | None) -> None:
        self.conn = conn
        self.q = q
        self.sqlite = conn.dialect.name == "sqlite"
        self.positive = q.positive_terms
        self.negative = q.negative_terms
        self.ranked = bool(self.positive)
        # Names resolved to ids up front: tags by pattern, notebooks with their sub-notebooks.
        self.tag_ids = {
            f.pattern: self._tags_matching(f.pattern)
            for f in q.filters
            if isinstance(f, TagFilter) and f.pattern != "*"
        }
        books: set[str] | None = None
        wanted = [f for f in q.filters if isinstance(f, NotebookFilter) and not f.negated]
        if wanted:  # several notebook: filters are ORed, and restrict even with any:1
            books = set().union(*(_notebooks_matching(conn, f.pattern, notebook_ids) for f in wanted))
        if notebook_ids is not None:
            books = set(notebook_ids) if books is None else books & set(notebook_ids)
        self.books = books
        self.notebook_ids = notebook_ids
        self.driver = self._choose_driver()

    # -- choosing how to run --

    def _choose_driver(self) -> TagFilter | Literal["books"] | None:
        """The selective filter to start from, when the index does not drive (SQLite only:
        PostgreSQL keeps statistics and plans this itself)."""
        if not self.sqlite or self.ranked or self.q.match_any:
            return None
        best: tuple[int, TagFilter | Literal["books"]] | None = None
        if self.books is not None:
            n = self._count(sa.select(sa.func.count()).where(_n.c.notebook_id.in_(sorted(self.books))))
            best = (n, "books")
        for f in self.q.filters:
            if isinstance(f, TagFilter) and not f.negated and f.pattern != "*":
                nt = db.note_tags
                n = self._count(sa.select(sa.func.count()).where(nt.c.tag_id.in_(self.tag_ids[f.pattern])))
                if best is None or n < best[0]:
                    best = (n, f)
        return best[1] if best is not None and best[0] <= _DRIVE_LIMIT else None

    def _count(self, stmt: sa.Select[Any]) -> int:
        return int(self.conn.execute(stmt).scalar_one())

    def _tags_matching(self, pattern: str) -> list[str]:
        t = db.tags
        return list(self.conn.execute(sa.select(t.c.id).where(_like(t.c.title_key, pattern))).scalars())

    # -- conditions --

    def _live(self) -> ColumnElement[bool]:
        """Not in the trash. SQLite has no statistics: told that this holds for most
        notes, it reads the index of live notes newest first rather than taking the index
        on ``deleted_time`` and sorting every note; with a driver, the + keeps that index
        out of the way for good."""
        if not self.sqlite:
            return _n.c.deleted_time.is_(None)
        if self.driver is not None:
            return _PLUS_DELETED.is_(None)
        return sa.func.likely(_n.c.deleted_time.is_(None))

    def _conditions(
        self, *, negated_text: bool = True
    ) -> tuple[list[ColumnElement[bool]], list[ColumnElement[bool]]]:
        """(conditions every hit meets, conditions of which one is enough with any:1);
        ``negated_text=False`` leaves out the negated words, for FTS5 to handle."""
        required: list[ColumnElement[bool]] = []
        alternatives: list[ColumnElement[bool]] = []
        for f in self.q.filters:
            if isinstance(f, NotebookFilter) and not f.negated:
                continue  # in self.books
            if self.q.match_any and not f.negated:
                alternatives.append(self._filter(f))
            else:
                required.append(self._filter(f))
        if self.books is not None:
            col: ColumnElement[Any] = _n.c.notebook_id
            if self.sqlite and self.driver != "books":
                col = _PLUS_NOTEBOOK  # the recency index has the column; its own index would sort
            required.append(col.in_(sorted(self.books)))
        if self.negative and negated_text:
            required.append(sa.not_(self._matches(self.negative, True)))
        return required, alternatives

    def _match_text(self, terms: Sequence[TextTerm], any_of: bool) -> str:
        """The index query for ``terms`` (FTS5 or tsquery syntax)."""
        if self.sqlite:
            return (" OR " if any_of else " AND ").join(f"({_fts5_term(t)})" for t in terms)
        return (" | " if any_of else " & ").join(f"({_tsquery_term(t)})" for t in terms)

    def _matches(self, terms: Sequence[TextTerm], any_of: bool) -> ColumnElement[bool]:
        """Notes whose index entry matches ``terms``."""
        text = self._match_text(terms, any_of)
        if self.sqlite:
            return _n.c.seq.in_(sa.select(_fts.c.rowid).where(_FTS_TABLE.match(text)))
        return _SEARCH_VECTOR.bool_op("@@")(_tsquery(text))

    def _where(self) -> list[ColumnElement[bool]]:
        """Every condition, for counting and for the plans the index does not drive."""
        required, alternatives = self._conditions()
        where = [self._live(), *required]
        pos = self._matches(self.positive, self.q.match_any) if self.positive else None
        if alternatives:
            where.append(sa.or_(*([pos] if pos is not None else []), *alternatives))
        elif pos is not None:
            where.append(pos)
        return where

    # -- running it --

    def count(self) -> int:
        return self._count(sa.select(sa.func.count()).select_from(_n).where(*self._where()))

    def page(self, limit: int, offset: int) -> list[_Row]:
        if not self.ranked:
            return self._recent(self._where(), limit, offset)
        if not self.sqlite:
            return self._pg_page(limit, offset)
        required, alternatives = self._conditions(negated_text=False)
        if alternatives:
            return self._sqlite_any_page(required, alternatives, limit, offset)
        return self._sqlite_page(required, limit, offset)

    def _recent(self, where: list[ColumnElement[bool]], limit: int, offset: int) -> list[_Row]:
        stmt = (
            sa.select(*_COLUMNS)
            .where(*where)
            # id descending too: the index of live notes then yields this order as it is.
            .order_by(_n.c.updated_time.desc(), _n.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return [_row(r, 0.0) for r in self.conn.execute(stmt)]

    def _fts_text(self) -> str:
        text = self._match_text(self.positive, self.q.match_any)
        if self.negative:  # FTS5 excludes them itself, cheaper than a NOT IN
            text = f"({text}) NOT ({self._match_text(self.negative, True)})"
        return text

    def _fts_ranked(self, required: list[ColumnElement[bool]]) -> sa.Select[Any]:
        """Text matches meeting ``required``, best first (notes in the trash are not in
        the index, so nothing else needs checking)."""
        return (
            sa.select(*_COLUMNS, _fts.c.rank)
            .select_from(_fts.join(_n, _n.c.seq == _fts.c.rowid))
            .where(_FTS_TABLE.match(self._fts_text()), *required)
        )

    def _fts_top(self, fetch: int, want: int) -> tuple[list[tuple[float, Any]], bool]:
        """The best text matches (rank, note row) that can be among the first ``want``,
        ranked by the index alone (the ``fetch`` best) and only then joined to their notes:
        with no filter to check, the other matches are never read. And whether ``fetch``
        was enough: the matches tied with the ``want``-th all among them."""
        best = self._best(fetch)
        if len(best) == fetch and best[-1][1] == best[want - 1][1]:
            return [], False
        end = min(want, len(best))
        while end < len(best) and best[end][1] == best[end - 1][1]:
            end += 1  # tied with the last row of the page: its update time decides
        rank_of = dict(best[:end])
        rows = self.conn.execute(_NOTES_BY_SEQ, {"seqs": list(rank_of)}).all() if rank_of else []
        return [(rank_of[r.seq], r) for r in rows], True

    def _best(self, fetch: int) -> list[tuple[int, float]]:
        """The index's ``fetch`` best matches as (rowid, rank), best first.

        Ranking is the whole cost of a word found in many notes (BM25 costs about 1.3 µs
        per matching note: 80 ms for a word in 60,000 of 100,000), so rankings are kept
        (:data:`_rankings`) while the index stays as it was. Only in read transactions: a
        write transaction's own changes are not in the index's state until it commits.
        """
        text = self._fts_text()
        keep = self.conn.info.get("read_only") and not self.conn.info.get("write")
        state = str(self.conn.exec_driver_sql(_INDEX_STATE).scalar_one()) if keep else ""
        if keep and (kept := _rankings.get(state, text, fetch)) is not None:
            return kept
        if keep and not self.q.match_any and (ranked := self._from_postings(fetch)) is not None:
            _rankings.put(state, text, fetch, ranked)
            return ranked
        best = [(int(r.rowid), float(r.rank)) for r in self.conn.execute(_TOP, {"fts_text": text, "fetch": fetch})]
        if keep:
            _rankings.put(state, text, fetch, best)
        return best

    def _from_postings(self, fetch: int) -> list[tuple[int, float]] | None:
        """The same ranking from the phrases' postings (:mod:`noteloom.postings`), when
        they are kept: an AND of phrases, less any negated ones, each one FTS5 phrase."""
        return postings.best(
            self.conn, [_fts5_term(t) for t in self.positive], [_fts5_term(t) for t in self.negative], fetch
        )

    def _sqlite_page(self, required: list[ColumnElement[bool]], limit: int, offset: int) -> list[_Row]:
        if required and (found := self._sqlite_window_page(required, limit, offset)) is not None:
            return found
        ranked = self._fts_ranked(required).order_by(_fts.c.rank) if required else None
        want = offset + limit
        # Some room past the page: rows tied on rank across its end must all be seen, and
        # every further try ranks every match again (1 search in 20 needed one on the bench).
        fetch = max(want + 1, 2 * want + 8)
        while True:
            if ranked is None:
                rows, settled = self._fts_top(fetch, want)
            else:
                rows = [(r.rank, r) for r in self.conn.execute(ranked.limit(fetch))]
                # Rows tied on rank across the end of the page must all be seen to order them.
                settled = len(rows) < fetch or rows[-1][0] != rows[want - 1][0]
            if settled:
                break
            fetch *= 4
        rows.sort(key=lambda p: p[1].id, reverse=True)
        rows.sort(key=lambda p: (p[0], -p[1].updated_time))
        return [_row(r, -float(rank)) for rank, r in rows[offset:want]]

    def _sqlite_window_page(
        self, required: list[ColumnElement[bool]], limit: int, offset: int
    ) -> list[_Row] | None:
        """A filtered page from the best text matches alone, or ``None`` if they do not
        settle it.

        The index ranks its matches by itself (``_fts_top``); only the best ``_WINDOW`` of
        them are checked against the filters. Every match outside the window ranks no
        better than the window's last, so once the page is filled by rows that rank
        strictly better than that, it is exact. Otherwise (a selective filter) the caller
        joins every match to its note instead. For ``word* type:todo`` at 100,000 notes
        this is 5 ms against 11 ms.
        """
        want = offset + limit
        size = max(_WINDOW, _WINDOW_PER_ROW * (want + 1))
        window = self._best(size)
        rank_of = dict(window)
        rows = [
            _row(r, -float(rank_of[r.seq]))
            for r in self.conn.execute(sa.select(*_COLUMNS).where(_n.c.seq.in_(list(rank_of)), *required))
        ]
        if len(window) == size:  # there are more matches: the page must be settled without them
            worst = -float(window[-1][1])
            if sum(1 for r in rows if r.score > worst) < want:
                return None
        rows.sort(key=lambda r: r.id, reverse=True)
        rows.sort(key=lambda r: (-r.score, -r.updated_time))
        return rows[offset:want]

    def _sqlite_any_page(
        self,
        required: list[ColumnElement[bool]],
        alternatives: list[ColumnElement[bool]],
        limit: int,
        offset: int,
    ) -> list[_Row]:
        """any:1 with positive filters: the text matches, best first, then the notes that
        only meet a filter, newest first."""
        ranked_total = self._count(sa.select(sa.func.count()).select_from(self._fts_ranked(required).subquery()))
        rows = self._sqlite_page(required, limit, offset) if offset < ranked_total else []
        if len(rows) < limit:
            rest = [self._live(), *required, sa.or_(*alternatives)]
            rest.append(sa.not_(self._matches(self.positive, True)))
            if self.negative:
                rest.append(sa.not_(self._matches(self.negative, True)))
            rows += self._recent(rest, limit - len(rows), max(0, offset - ranked_total))
        return rows

    def _pg_page(self, limit: int, offset: int) -> list[_Row]:
        rank: ColumnElement[Any] = sa.func.ts_rank(
            _PG_WEIGHTS, _SEARCH_VECTOR, _tsquery(self._match_text(self.positive, self.q.match_any)), 1
        )
        if self.q.match_any and any(not f.negated for f in self.q.filters):
            rank = sa.case((self._matches(self.positive, True), rank), else_=sa.null())
        rk = rank.label("rk")
        stmt = (
            sa.select(*_COLUMNS, rk)
            .where(*self._where())
            .order_by(rk.desc().nulls_last(), _n.c.updated_time.desc(), _n.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return [_row(r, 0.0 if r.rk is None else float(r.rk)) for r in self.conn.execute(stmt)]

    # -- filters --

    def _filter(self, f: Filter) -> ColumnElement[bool]:
        cond: ColumnElement[bool]
        if isinstance(f, TagFilter):
            nt = db.note_tags
            if f.pattern == "*":
                cond = sa.select(nt.c.note_id).where(nt.c.note_id == _n.c.id).exists()
            elif not self.tag_ids[f.pattern]:
                return sa.true() if f.negated else sa.false()
            elif f is self.driver:
                cond = _n.c.id.in_(sa.select(nt.c.note_id).where(nt.c.tag_id.in_(self.tag_ids[f.pattern])))
            else:
                cond = (
                    sa.select(nt.c.note_id)
                    .where(nt.c.note_id == _n.c.id, nt.c.tag_id.in_(self.tag_ids[f.pattern]))
                    .exists()
                )
        elif isinstance(f, NotebookFilter):  # negated: positive ones are in self.books
            cond = _n.c.notebook_id.in_(sorted(_notebooks_matching(self.conn, f.pattern, self.notebook_ids)))
        elif isinstance(f, DateFilter):
            col = {"created": _n.c.created_time, "updated": _n.c.updated_time, "due": _n.c.todo_due}[f.field]
            # "Before" is its own comparison, not NOT(on or after): a missing due date is neither.
            return col < f.since if f.negated else col >= f.since
        elif isinstance(f, TypeFilter):
            cond = _n.c.is_todo.is_(sa.true()) if f.todo else _n.c.is_todo.is_(sa.false())
        elif isinstance(f, CompletedFilter):
            done = _n.c.todo_completed.is_not(None) if f.completed else _n.c.todo_completed.is_(None)
            cond = sa.and_(_n.c.is_todo.is_(sa.true()), done)
        elif isinstance(f, IdFilter):
            cond = _n.c.id == f.note_id
        elif isinstance(f, SourceUrlFilter):
            cond = _like(sa.func.lower(_n.c.source_url), f.pattern)
        else:  # pragma: no cover - the union is closed
            assert_never(f)
        return sa.not_(cond) if f.negated else cond


def _like(col: ColumnElement[Any], pattern: str) -> ColumnElement[bool]:
    """``col`` matches the lower-case ``pattern``, where ``*`` is the only wildcard."""
    if "*" not in pattern:
        return col == pattern
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
    return col.like(escaped, escape="\\")


def _notebooks_matching(conn: Connection, pattern: str, within: Collection[str] | None = None) -> set[str]:
    """Live notebooks whose title (or ``Parent/Child`` path) matches ``pattern``, with every
    notebook below them. With ``within``, the others do not exist: they match nothing and
    are no part of a path (else ``notebook:Hidden`` would tell that a parent is called so)."""
    nb = db.notebooks
    rows = conn.execute(
        sa.select(nb.c.id, nb.c.parent_id, nb.c.title).where(nb.c.deleted_time.is_(None))
    ).all()
    if within is not None:
        allowed = set(within)
        rows = [r for r in rows if r.id in allowed]
    by_id = {r.id: r for r in rows}
    children: dict[str, list[str]] = {}
    for r in rows:
        if r.parent_id:
            children.setdefault(r.parent_id, []).append(r.id)
    rx = _glob(pattern)

    def path(r: Any) -> str:
        parts, seen = [r.title], {r.id}
        while r.parent_id in by_id and r.parent_id not in seen:
            r = by_id[r.parent_id]
            seen.add(r.id)
            parts.append(r.title)
        return "/".join(reversed(parts))

    by_path = "/" in pattern
    roots = [
        r.id
        for r in rows
        if rx.fullmatch(_fold_title(r.title)) or (by_path and rx.fullmatch(_fold_title(path(r))))
    ]
    out: set[str] = set()
    stack = list(roots)
    while stack:
        cur = stack.pop()
        if cur not in out:
            out.add(cur)
            stack.extend(children.get(cur, ()))
    return out


def _fold_title(title: str) -> str:
    return " ".join(title.lower().split())


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


# -- index query text --------------------------------------------------------------------


def _fts5_term(term: TextTerm) -> str:
    """A term as FTS5 query syntax; every token is a quoted string, so nothing the user
    typed is read as FTS5 syntax."""
    phrase = " + ".join(_fts5_token(tok) for tok in term.tokens)
    if term.field == "all":
        return phrase
    return f"{term.field} : ({phrase})"


def _fts5_token(tok: Token) -> str:
    quoted = '"' + tok.text.replace('"', '""') + '"'
    return f"{quoted} *" if tok.prefix else quoted


def _tsquery_term(term: TextTerm) -> str:
    """A term as tsquery syntax, each lexeme quoted. A phrase of several words must sit in
    one field: the title's last word is adjacent to the body's first in the tsvector."""
    if term.field == "title":
        return _ts_phrase(term.tokens, "A")
    if term.field == "body":
        return _ts_phrase(term.tokens, "B")
    if len(term.tokens) == 1:
        return _ts_phrase(term.tokens, "")
    return f"({_ts_phrase(term.tokens, 'A')}) | ({_ts_phrase(term.tokens, 'B')})"


def _ts_phrase(tokens: Sequence[Token], weight: str) -> str:
    parts = []
    for tok in tokens:
        lexeme = "'" + tok.text.replace("\\", "\\\\").replace("'", "''") + "'"
        label = ("*" if tok.prefix else "") + weight
        parts.append(f"{lexeme}:{label}" if label else lexeme)
    return " <-> ".join(parts)


# -- snippets and sections ----------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")
_CJK_SPLIT = re.compile(f"([{db.CJK_CHARS}]+)")
# Outlines of the notes hits fell in, most recently used last (an LRU).
_OUTLINES_KEPT = 4096
# The sections of a note that start at or before an offset (outline.sections_through), each
# by its path, and the offset through which they hold (len(body) for the whole outline).
_Outline = tuple[tuple[outline.Section, ...], dict[str, outline.Section], int]
_outlines: OrderedDict[tuple[str, int, int, int], _Outline] = OrderedDict()
_outlines_lock = threading.Lock()


# Where hits were placed (snippet, section path, heading), by the query's body terms and
# the note's version as outlines are: a query asked again places the same hits again.
_PLACES_KEPT = 4096
_places: OrderedDict[tuple[Any, ...], tuple[str, str | None, str | None]] = OrderedDict()


def _hit(row: _Row, body: str, notebook: str, clipped: bool, anchor: _Anchor | None) -> SearchHit:
    snippet, section, heading = "", None, None
    if anchor is not None:
        key = (anchor.key, row.id, row.updated_time, len(body), hash(body))
        with _outlines_lock:
            placed = _places.get(key)
            if placed is not None:
                _places.move_to_end(key)
        if placed is None:
            placed = _placed(row, body, anchor)
            with _outlines_lock:
                _places[key] = placed
                while len(_places) > _PLACES_KEPT:
                    _places.popitem(last=False)
        snippet, section, heading = placed
    return SearchHit(
        row.id, row.title, row.notebook_id, row.updated_time, snippet, section, heading, row.score, notebook, clipped
    )


def _placed(row: _Row, body: str, anchor: _Anchor) -> tuple[str, str | None, str | None]:
    place = anchor.place(row, body)
    if place is None:  # the words matched the title only
        return _snippet(body, 0, 0), None, None
    (start, end), sec = place
    return _snippet(body, start, end), sec.path, sec.heading


def _section_at(row: _Row, body: str, offset: int) -> outline.Section:
    """The innermost section holding ``offset``."""
    return outline.innermost_section_in(_outline_of(row, body, offset)[0], offset)


def _outline_of(row: _Row, body: str, offset: int) -> _Outline:
    """The sections of ``body`` that start at or before ``offset``, and each by its path:
    read only as far as they need (a hit's first match is nearly always in the first few
    thousand characters of a note that may hold 400,000), and exact for every offset up
    to that one. Outlines are kept between searches (keyed by note, version and a hash of
    the text, never the text itself): the same notes come back for query after query,
    and parsing is most of a hit's cost."""
    key = (row.id, row.updated_time, len(body), hash(body))
    with _outlines_lock:
        kept = _outlines.get(key)
        if kept is not None:
            _outlines.move_to_end(key)
    if kept is None or kept[2] < offset:
        secs = outline.sections_through(body, offset)
        through = len(body) if secs[-1].end == len(body) else secs[-1].end - 1
        kept = (secs, {s.path: s for s in secs}, through)
        with _outlines_lock:
            _outlines[key] = kept
            while len(_outlines) > _OUTLINES_KEPT:
                _outlines.popitem(last=False)
    return kept


def _collapse_spaces(text: str) -> str:
    r"""Each run of whitespace as one space (what ``re.sub(r"\s+", " ", text)`` gives, at a
    fraction of its cost: ``str.split`` runs in C, ``re.sub`` builds a piece per run)."""
    words = text.split()
    if not words:
        return " " if text else ""
    out = " ".join(words)
    if text[0].isspace():
        out = " " + out
    if text[-1].isspace():
        out += " "
    return out


def _snippet(body: str, start: int, end: int) -> str:
    """About ``SNIPPET_CHARS`` characters of ``body`` around ``[start, end)``, whitespace
    collapsed, with … where the text was cut."""
    lo = max(0, start - 4 * _SNIPPET_LEAD)
    hi = min(len(body), end + 4 * SNIPPET_CHARS)
    before = _collapse_spaces(body[lo:start])
    if lo == 0:
        before = before.lstrip()
    match = _collapse_spaces(body[start:end])
    after = _collapse_spaces(body[end:hi])
    cut_front = lo > 0
    if len(before) > _SNIPPET_LEAD:
        before = before[-_SNIPPET_LEAD:]
        space = before.find(" ")
        if 0 <= space < 20:
            before = before[space + 1 :]
        cut_front = True
    room = max(0, SNIPPET_CHARS - len(before) - len(match))
    cut_back = hi < len(body)
    if len(after) > room:
        after = after[:room]
        space = after.rfind(" ")
        if space > room - 20:
            after = after[:space]
        cut_back = True
    text = (before + match + after).strip()
    return ("…" if cut_front and text else "") + text + ("…" if cut_back and text else "")


class _Anchor:
    """Where the first of some terms occurs in a raw body, as the index would have
    matched it: whole words (a prefix: a word start), any case, any accents; CJK as
    written. The body is lower-cased and its accented letters folded to their base
    letters, one character for one so offsets stay put, and each term, folded the same
    way, is one plain pattern: ``re`` scans for it at C speed, and word starts are
    checked on the few candidates.

    Only as much of the body is folded as the answer needs (:class:`_Folding`): the
    first match of a word is nearly always in the first few thousand characters, and
    folding a whole 400,000-character note cost more than ranking the hits.
    """

    def __init__(self, terms: tuple[TextTerm, ...]) -> None:
        self.terms = terms
        # The terms as one string, whose hash is computed once: they key the places kept
        # (a tuple of dataclasses is hashed field by field at every look-up).
        self.key = repr(terms)
        self.patterns = [_anchor_pattern(t) for t in terms]

    def find(self, body: str) -> tuple[int, int] | None:
        """The first place any of the terms occurs."""
        folding = _Folding(body)
        best: tuple[int, int] | None = None
        for rx, word_start in self.patterns:
            for span in _word_matches(rx, word_start, folding, 1):
                if best is None or span[0] < best[0]:
                    best = span
        return best

    def place(self, row: _Row, body: str) -> tuple[tuple[int, int], outline.Section] | None:
        """Where a hit sits: the section in which the most of the terms occur together
        (the innermost such, then the earliest), and the first match in it.

        With one term that is its first occurrence. With several, the first occurrence
        of the first term may be far from the others (``quokka 577``: a quokka in the
        introduction, the two together in section 3), and the section where they meet
        is the one to read.
        """
        if len(self.patterns) == 1:
            span = self.find(body)
            return None if span is None else (span, _section_at(row, body, span[0]))
        folding = _Folding(body)
        matches = [_word_matches(rx, word_start, folding, _MATCHES_PER_TERM) for rx, word_start in self.patterns]
        if not any(matches):
            return None
        secs, by_path, _ = _outline_of(row, body, max(span[0] for spans in matches for span in spans))
        # Terms found in each section, counting a subsection's matches in its parents.
        found: dict[str, tuple[outline.Section, set[int]]] = {}
        first: dict[str, tuple[int, int]] = {}
        for term, spans in enumerate(matches):
            for span in spans:
                inner = outline.innermost_section_in(secs, span[0])
                for sec in (inner, *_ancestors(inner, by_path)):
                    found.setdefault(sec.path, (sec, set()))[1].add(term)
                    if sec.path not in first or span[0] < first[sec.path][0]:
                        first[sec.path] = span
        best = min(found, key=lambda p: (-len(found[p][1]), -found[p][0].level, first[p][0]))
        return first[best], found[best][0]


def _ancestors(sec: outline.Section, by_path: dict[str, outline.Section]) -> Iterator[outline.Section]:
    """The sections ``sec`` is nested in (never section ``"0"``), innermost first: a
    section's path is its parent's path with one more number."""
    path = sec.path
    while (dot := path.rfind(".")) > 0:
        path = path[:dot]
        yield by_path[path]


#: Matches of one term looked at when placing a hit of several terms.
_MATCHES_PER_TERM = 64
#: Characters of a body folded before the first look for a match; each further look
#: folds three times as much again.
_FIRST_FOLD = 4096


class _Folding:
    """A body folded (:func:`_folded`) one growing prefix at a time.

    Each prefix ends just after an ASCII space or line break. That keeps it exact:
    no letter lower-cases differently for what follows a space (a final sigma looks
    past case-ignorable characters only), and a match of an anchor pattern never
    ends on a space, so the matches found in a prefix are exactly the body's matches
    that end before the cut, in order (a later match of the same pattern ends later).
    """

    def __init__(self, body: str) -> None:
        self.body = body
        # Only U+0130 lower-cases to two characters; with it anywhere, the whole body is
        # folded character by character (as _folded does), so every prefix is too.
        self.per_char = not body.isascii() and "\u0130" in body
        self.text = ""

    @property
    def whole(self) -> bool:
        return len(self.text) == len(self.body)

    def grow(self) -> bool:
        """Fold more of the body; ``False`` when it was all folded already."""
        done, body = len(self.text), self.body
        if done == len(body):
            return False
        cut = len(body)
        target = max(_FIRST_FOLD, 4 * done)
        if target < len(body):
            cut = min((i + 1 for i in (body.find("\n", target), body.find(" ", target)) if i >= 0), default=cut)
        self.text += _folded(body[done:cut], self.per_char)
        return True


def _folded(body: str, per_char: bool | None = None) -> str:
    """``body`` lower-cased with accents folded, one character for one. ``per_char``:
    lower-case each character alone (``None``: when that is needed to keep offsets)."""
    text = body.lower()
    if not body.isascii():
        if per_char or (per_char is None and len(text) != len(body)):
            # A few letters lower-case to two: keep offsets aligned.
            text = "".join(c if len(c.lower()) != 1 else c.lower() for c in body)
        text = _fold_text(text)
    return text


def _word_matches(rx: re.Pattern[str], word_start: bool, folding: _Folding, most: int) -> list[tuple[int, int]]:
    """The first ``most`` spans of ``rx`` in the folded body, only those starting a word
    when ``word_start``; the body is folded only as far as they need."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        text = folding.text
        for m in rx.finditer(text, pos):
            pos = m.end()
            if not word_start or m.start() == 0 or not _is_word_char(text[m.start() - 1]):
                spans.append(m.span())
                if len(spans) == most:
                    return spans
        if not folding.grow():
            return spans


def _is_word_char(ch: str) -> bool:
    return ch.isalnum()


def _anchor(terms: tuple[TextTerm, ...]) -> _Anchor:
    return _Anchor(terms)


@functools.lru_cache(maxsize=4096)
def _anchor_pattern(term: TextTerm) -> tuple[re.Pattern[str], bool]:
    """The pattern of ``term`` over a folded body, and whether a match must start a word."""
    pieces: list[tuple[str, bool]] = []  # (regex, is CJK)
    for word in _WORD.findall(unicodedata.normalize("NFC", term.text)):
        for k, piece in enumerate(_CJK_SPLIT.split(word)):
            if piece:
                low = piece.lower()
                pieces.append((re.escape(low), True) if k % 2 else (re.escape(_fold_text(low)), False))
    out = []
    for i, (rx, cjk) in enumerate(pieces):
        if i:
            out.append(r"[\W_]*" if cjk or pieces[i - 1][1] else r"[\W_]+")
        out.append(rx)
    if not pieces[-1][1] and not term.prefix:
        out.append(r"(?![^\W_])")
    return re.compile("".join(out)), not pieces[0][1]


def _fold(ch: str) -> str:
    low = ch.lower()
    if len(low) != 1:
        low = ch
    return unicodedata.normalize("NFD", low)[0]


def _fold_text(text: str) -> str:
    """``text`` (lower case) with each accented letter replaced by its base letter.

    A regex over the accented letters, not ``str.translate``: translate looks every
    character of a non-ASCII string up in the table and raises (and swallows) a KeyError
    for each one missing, which made it a quarter of a search's time in the server."""
    folds, pattern = _folding()
    return pattern.sub(lambda m: folds[m.group()], text)


@functools.cache
def _folding() -> tuple[dict[str, str], re.Pattern[str]]:
    """Each lower-case letter with accents → its base letter, and a pattern matching them."""
    folds = {v: base for base, variants in _accent_variants().items() for v in variants if v != base}
    return folds, re.compile("[" + "".join(re.escape(v) for v in sorted(folds)) + "]")


@functools.cache
def _accent_variants() -> dict[str, frozenset[str]]:
    """Base letter → the letters (lower case) that are it with accents, over the Latin,
    Greek and Cyrillic blocks."""
    groups: dict[str, set[str]] = {}
    for cp in [*range(0xC0, 0x250), *range(0x370, 0x530), *range(0x1E00, 0x1F00)]:
        ch = chr(cp)
        if not ch.isalpha():
            continue
        base = _fold(ch)
        low = ch.lower()
        if base != low and len(low) == 1:
            groups.setdefault(base, {base}).add(low)
    return {k: frozenset(v) for k, v in groups.items()}
